#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, to try and test the sbatch scripts of scripts/slurm/.
#
#   scripts/slurm/local_cluster.sh start  [DIR]   install Slurm if missing, start munged, slurmctld, slurmd
#   scripts/slurm/local_cluster.sh status [DIR]   which of its daemons run, and the node's state
#   scripts/slurm/local_cluster.sh stop   [DIR]   cancel its jobs, stop exactly the daemons it started
#   scripts/slurm/local_cluster.sh env    [DIR]   print 'export SLURM_CONF=DIR/slurm.conf' (for eval)
#
# DIR (default: $SUMM_SLURM_DIR, else /tmp/summ-slurm) holds everything the cluster writes: slurm.conf, its own
# munge key and socket, state, spool, pid and log files.  Nothing goes to /etc, /run or /var, so the cluster
# runs beside any other Slurm or munge on the machine: it picks two free TCP ports and uses its own munge socket.
# Slurm's client commands (sbatch, squeue, scontrol...) find the cluster through SLURM_CONF:
#
#   scripts/slurm/local_cluster.sh start /tmp/mycluster
#   export SLURM_CONF=/tmp/mycluster/slurm.conf
#   sbatch scripts/slurm/train.sbatch ...
#   scripts/slurm/local_cluster.sh stop /tmp/mycluster
#
# Needs root (the daemons run as root) and, the first time, apt-get: it installs Debian's slurmctld slurmd
# slurm-client slurm-wlm-basic-plugins munge with --no-install-recommends (about 15 s).  No systemd or cgroups
# are used (proctrack/linuxproc, task/none).  'stop' kills only the processes named in DIR's pid files, after
# checking that each still is the daemon it was; jobs are cancelled first so no job step outlives the cluster.
# Exit status: 0 on success; 'status' exits 1 when a daemon is not running.
set -euo pipefail

die() { printf 'local_cluster.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf 'local_cluster.sh: %s\n' "$*" >&2; }

cmd="${1:-}"
[[ "$cmd" =~ ^(start|stop|status|env)$ ]] || die "usage: local_cluster.sh start|stop|status|env [DIR]"
dir="${2:-${SUMM_SLURM_DIR:-/tmp/summ-slurm}}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
conf="$dir/slurm.conf"
node="$(hostname -s)"  # a name the job's tasks can resolve to meet at; else a NodeName with NodeAddr 127.0.0.1
getent hosts "$node" >/dev/null 2>&1 || node=localnode
packages=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge)

# pid_of NAME: the pid in DIR/run/NAME.pid if that process is alive and still runs the program NAME.
pid_of() {
    local file="$dir/run/$1.pid" pid
    [[ -f "$file" ]] || return 1
    pid="$(tr -dc 0-9 < "$file")"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    [[ "$(tr '\0' ' ' < "/proc/$pid/cmdline")" == *"$1"* ]] || return 1  # the pid was reused by another program
    echo "$pid"
}

install_slurm() {
    local missing=()
    for program in slurmctld slurmd sbatch srun scontrol munged mungekey; do
        command -v "$program" >/dev/null || missing+=("$program")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    [[ $(id -u) -eq 0 ]] || die "Slurm is not installed (missing: ${missing[*]}) and installing it needs root"
    command -v apt-get >/dev/null || die "Slurm is not installed (missing: ${missing[*]}) and there is no apt-get"
    log "installing ${packages[*]} (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${packages[@]}" >"$dir/apt-get.log" 2>&1; then
        apt-get update -q >>"$dir/apt-get.log" 2>&1 || die "apt-get update failed (see $dir/apt-get.log)"
        apt-get install -y -q --no-install-recommends "${packages[@]}" >>"$dir/apt-get.log" 2>&1 \
            || die "apt-get install ${packages[*]} failed (see $dir/apt-get.log)"
    fi
}

# free_port AFTER: the first TCP port above AFTER on which nothing listens on 127.0.0.1.
free_port() {
    local port=$(( $1 + 1 ))
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
    echo "$port"
}

# munged refuses a socket in a directory that not everyone can traverse.
check_traversable() {
    local path="$dir"
    while [[ "$path" != "/" ]]; do
        [[ $(( 0$(stat -c %a "$path") & 01 )) -eq 1 ]] \
            || die "munged needs execute permission for all on '$path' (chmod o+x it, or use another DIR)"
        path="$(dirname "$path")"
    done
}

write_config() {
    local layout ctld_port slurmd_port
    # The node's CPU layout as slurmd detects it ("CPUs=2 Boards=1 ... RealMemory=..."), without its host name.
    layout="$(slurmd -C | sed -n '1s/^NodeName=[^ ]* //p')"
    ctld_port="$(free_port $(( 20000 + RANDOM % 20000 )))"
    slurmd_port="$(free_port "$ctld_port")"
    cat > "$conf" <<EOF
# Written by scripts/slurm/local_cluster.sh: a single-node cluster whose files all live in $dir.
ClusterName=summlocal
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Its own munged; cred_expire also sets how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# Schedule at once, and retry pending jobs (e.g. a requeued one whose BeginTime passed) every second or two.
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1
# Reject at submission a job that asks for more than the node has (it would otherwise pend forever).
EnforcePartLimits=ALL
ReturnToService=2
JobRequeue=1
# Keep finished jobs visible to 'scontrol show job' for 10 minutes (there is no accounting database).
MinJobAge=600
KillWait=10
InactiveLimit=0
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$node NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 $layout State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_for_node() {
    local state=""
    for _ in $(seq 1 120); do
        state="$(sinfo -h -n "$node" -o %T 2>/dev/null | head -n 1 || true)"
        [[ "$state" == idle* || "$state" == mixed* || "$state" == allocated* ]] && return 0
        sleep 0.5
    done
    die "node $node not ready after 60 s (state '${state:-unknown}'); see $dir/log/"
}

start() {
    install_slurm
    [[ $(id -u) -eq 0 ]] || die "the daemons run as root: run this as root"
    chmod 755 "$dir"
    check_traversable
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/run" "$dir/log"
    chmod 755 "$dir/munge"
    export SLURM_CONF="$conf"

    if ! pid_of munged >/dev/null; then
        if [[ ! -f "$dir/munge/munge.key" ]]; then
            mungekey --create --keyfile="$dir/munge/munge.key"
        fi
        chmod 400 "$dir/munge/munge.key"
        munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
            --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
            --origin=127.0.0.1 || die "munged did not start (see $dir/log/munged.log)"
    fi
    if pid_of slurmctld >/dev/null || pid_of slurmd >/dev/null; then
        log "already running in $dir"
    else
        write_config
        slurmctld -f "$conf" || die "slurmctld did not start (see $dir/log/slurmctld.log)"
        slurmd -f "$conf" -N "$node" || die "slurmd did not start (see $dir/log/slurmd.log)"
    fi
    wait_for_node
    log "cluster up in $dir (node $node: $(sinfo -h -n "$node" -o '%c CPUs, %T'))"
    echo "export SLURM_CONF=$conf"
}

stop() {
    export SLURM_CONF="$conf"
    if pid_of slurmctld >/dev/null; then
        local jobs
        jobs="$(squeue -h -o %A 2>/dev/null | tr '\n' ' ' || true)"
        if [[ -n "${jobs// /}" ]]; then
            log "cancelling jobs: $jobs"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for _ in $(seq 1 30); do
                [[ -z "$(squeue -h -o %A 2>/dev/null || true)" ]] && break
                sleep 0.5
            done
        fi
    fi
    local name pid
    for name in slurmd slurmctld munged; do
        if pid="$(pid_of "$name")"; then
            kill -TERM "$pid"
            for _ in $(seq 1 40); do
                [[ -d "/proc/$pid" ]] || break
                sleep 0.25
            done
            [[ -d "/proc/$pid" ]] && kill -KILL "$pid"
            log "stopped $name (pid $pid)"
        fi
        rm -f "$dir/run/$name.pid"
    done
}

status() {
    export SLURM_CONF="$conf"
    local name pid rc=0
    for name in munged slurmctld slurmd; do
        if pid="$(pid_of "$name")"; then
            echo "$name: running (pid $pid)"
        else
            echo "$name: not running"
            rc=1
        fi
    done
    if [[ $rc -eq 0 ]]; then
        sinfo -N -o '%N %c %T' || rc=1
        squeue || rc=1
    fi
    return $rc
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) echo "export SLURM_CONF=$conf" ;;
esac

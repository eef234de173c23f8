# Shared helpers for the shell entry points (sourced, not run).
# Every entry point: fails fast, never prompts, logs to stderr, keeps stdout for data.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
USER_DIR="$ROOT/fairseq_plugins"

# Exit status of every command of the project: 0 success, 1 runtime failure, 2 usage or bad input.
step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }  # a runtime failure
die_input() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 2; }  # usage or bad input

# print_usage: the running script's header comment (its second line up to the first line that is not a
# comment), without the leading '# ': what -h/--help prints, on stdout.
print_usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }

# print_version: NAME (fairseq-summarization-plugins VERSION), the version of pyproject.toml.
print_version() {
    printf '%s (fairseq-summarization-plugins %s)\n' "$(basename "$0")" \
        "$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml")"
}

# option_value OPTION "$@": stop with a usage error unless OPTION (= $1) is followed by a value.
option_value() { [[ $# -ge 2 && -n "$2" ]] || die_input "$1 needs a value (see $(basename "$0") --help)"; }

# unknown_option OPTION: the usage error for an option a script does not know, before its positional arguments.
unknown_option() {
    die_input "unknown option: $1 (see $(basename "$0") --help; fairseq's options go after the directories)"
}

# Use the project's virtual environment when there is one; otherwise whatever is on PATH.
use_venv() {
    if [[ -x "$ROOT/.venv/bin/python" ]]; then
        export PATH="$ROOT/.venv/bin:$PATH"
    fi
    command -v fairseq-train >/dev/null || die "fairseq not found: run 'bash scripts/setup.sh' first"
}

warn() { printf '%s: warning: %s\n' "$(basename "$0")" "$*" >&2; }

# quietly LOG COMMAND...: COMMAND with its stderr (fairseq's config dump, hydra notices, warnings) appended to
# LOG, unless VERBOSE=1 (then on stderr).  When COMMAND fails, the end of LOG is shown and its status returned.
quietly() {
    local log="$1" status=0
    shift
    if [[ "${VERBOSE:-0}" == 1 ]]; then "$@"; return; fi
    "$@" 2>>"$log" || status=$?
    if [[ $status -ne 0 ]]; then
        tail -n 25 "$log" >&2
        warn "$1 failed (exit status $status); its whole log: $log"
    fi
    return $status
}

# train_logged LOG VERBOSE FAIRSEQ_TRAIN_ARGS...: fairseq-train with its whole output appended to LOG and, on
# stderr, what fairseq_plugins/runtime/training_log.py makes of it (everything with VERBOSE=1).  When fairseq-train
# fails, the end of this run's part of LOG is shown and train.sh exits with fairseq-train's status.
train_logged() {
    local log="$1" status=0 first echo=()
    [[ "$2" == 1 ]] && echo=(--echo)
    shift 2
    printf '==> %s: train.sh, fairseq-train %s\n' "$(date '+%F %T')" "$*" >> "$log" || die "cannot write $log"
    first=$(($(wc -l < "$log") + 1))
    local tuned=()
    [[ -n "${TUNED_EPOCHS:-}" ]] && tuned=(--tuned-epochs "$TUNED_EPOCHS" --config-name "${CONFIG_NAME:-the config}")
    fairseq-train "$@" 2>&1 | training_log --log "$log" ${echo[@]+"${echo[@]}"} ${tuned[@]+"${tuned[@]}"} \
        || status=$?
    if [[ $status -ne 0 ]]; then
        [[ ${#echo[@]} -gt 0 ]] || training_log --log "$log" --failure "$first"
        printf '%s: error: fairseq-train failed (exit status %s); its whole log: %s\n' "$(basename "$0")" "$status" \
            "$log" >&2
        exit "$status"
    fi
}

training_log() {
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m fairseq_plugins.cli.training_log "$@"
}

# show_progress FILE TOTAL: run in the background while fairseq writes FILE, "N/TOTAL summaries" on the terminal
# every 2 seconds (the H- lines of FILE so far).
show_progress() {
    local file="$1" total="$2" count
    while sleep 2; do
        count="$(grep -c '^H-' "$file" 2>/dev/null || true)"
        printf '\r    %s/%s summaries' "${count:-0}" "$total" >&2
    done
}
DEFAULT_CONFIG=scitldr_small

# load_config FILE: a config is a bash file that sets PREP_ARGS, TRAIN_ARGS, GEN_ARGS (arrays).  Sets
# CONFIG_FILE and CONFIG_NAME (the file's name without .conf: what config.json records and compares).
load_config() {
    local file="$1"
    [[ -f "$file" ]] || file="$ROOT/configs/$1"
    [[ -f "$file" ]] || file="$ROOT/configs/$1.conf"
    [[ -f "$file" ]] || die_input "config not found: $1 (looked in the current directory and $ROOT/configs/)"
    PREP_ARGS=() TRAIN_ARGS=() GEN_ARGS=()
    # shellcheck disable=SC1090
    source "$file"
    CONFIG_FILE="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
    CONFIG_NAME="$(basename "$file" .conf)"
}

# last_value OPTION ARGS...: the value of OPTION's last occurrence in ARGS (as "--opt V" or "--opt=V"), empty if
# it has none.
last_value() {
    local option="$1" value=""
    shift
    while [[ $# -gt 0 ]]; do
        case "$1" in
            "$option") value="${2:-}"; shift ;;
            "$option"=*) value="${1#*=}" ;;
        esac
        shift
    done
    printf '%s' "$value"
}

# has_budget FAIRSEQ_ARGS...: does one of --max-update, --max-epoch, --stop-time-hours end training (its last
# value not 0)?
has_budget() {
    local -A last=()
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --max-update|--max-epoch|--stop-time-hours) last[$1]="${2:-0}"; shift ;;
            --max-update=*|--max-epoch=*|--stop-time-hours=*) last[${1%%=*}]="${1#*=}" ;;
        esac
        shift
    done
    local value
    for value in "${last[@]}"; do
        [[ "$value" =~ ^0*(\.0*)?$ ]] || return 0
    done
    return 1
}

# warn_busy_machine [LOADAVG_FILE]: torch uses one thread per core by default; on a machine whose other jobs already keep the
# cores busy (1-minute load above half the cores), those threads wait for each other and training runs many
# times slower.  Says what to set, unless OMP_NUM_THREADS is set already.
warn_busy_machine() {
    local file="${1:-/proc/loadavg}" load cores
    [[ -z "${OMP_NUM_THREADS:-}" && -r "$file" ]] || return 0
    read -r load _ < "$file"
    cores=$(nproc)
    if awk -v load="$load" -v cores="$cores" 'BEGIN { exit !(load > cores / 2) }'; then
        warn "this machine is busy (load $load on $cores cores): torch's default of one thread per core can" \
            "make training many times slower here; set OMP_NUM_THREADS=1 (or the number of idle cores)"
    fi
}

# checkpoint_info ARGS: which checkpoint, its update and validation figure (fairseq_plugins/runtime/checkpoint_info.py)
checkpoint_info() {
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m fairseq_plugins.cli.checkpoint_info "$@"
}

# The record of the config that made a data or model directory: DIR/config.json (fairseq_plugins/runtime/run_config.py).
run_config() {
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m fairseq_plugins.cli.run_config "$@"
}

# record_config DIR ROLE [EXTRA...]: DIR/config.json from the loaded config and the extra options.
record_config() {
    local dir="$1" role="$2"; shift 2
    run_config write "$dir/config.json" "$CONFIG_NAME" "$CONFIG_FILE" "$role" \
        "${#PREP_ARGS[@]}" "${PREP_ARGS[@]}" "${#TRAIN_ARGS[@]}" "${TRAIN_ARGS[@]}" \
        "${#GEN_ARGS[@]}" "${GEN_ARGS[@]}" "$@" || die "cannot write $dir/config.json"
}

# recorded DIR KEY: a field of DIR/config.json (an array NUL-separated); nothing when DIR has no record.
recorded() {
    [[ -f "$1/config.json" ]] || return 0
    run_config get "$1/config.json" "$2" || die "cannot read $1/config.json"
}

# load_recorded DIR: the config DIR/config.json names (its file, else configs/NAME.conf).
load_recorded() {
    local file
    file="$(recorded "$1" file)"
    if [[ -f "$file" ]]; then load_config "$file"; else load_config "$(recorded "$1" name)"; fi
}

# use_training_config DATA_DIR SAVE_DIR CONFIG FORCE: load the config to train with.  CONFIG empty: the one
# SAVE_DIR was trained with (a resumed run), else the one DATA_DIR was prepared with, else the default.  An
# explicit CONFIG must match SAVE_DIR's and prepare text as DATA_DIR's (PREP_ARGS), unless FORCE is 1.
use_training_config() {
    local data="$1" save="$2" config="$3" force="$4" saved prepared
    saved="$(recorded "$save" name)" prepared="$(recorded "$data" name)"
    if [[ -n "$config" ]]; then
        load_config "$config"
    elif [[ -n "$saved" ]]; then
        load_recorded "$save"
    elif [[ -n "$prepared" ]]; then
        load_recorded "$data"
    else
        warn "$data records no config (prepared before config.json existed): using -c $DEFAULT_CONFIG"
        load_config "$DEFAULT_CONFIG"
    fi
    [[ "$force" == 1 ]] && return 0
    if [[ -n "$saved" && "$saved" != "$CONFIG_NAME" ]]; then
        die_input "$save was trained with -c $saved: going on with -c $CONFIG_NAME would mix two configs in one run" \
            "(leave -c out, use another SAVE_DIR, or give --force-config)"
    fi
    if [[ -n "$prepared" ]]; then
        local data_prep=()
        mapfile -d '' -t data_prep < <(recorded "$data" prep_args)
        [[ "${data_prep[*]}" == "${PREP_ARGS[*]}" ]] || die_input "$data was prepared with -c $prepared" \
            "(PREP_ARGS: ${data_prep[*]}), but -c $CONFIG_NAME prepares text differently (${PREP_ARGS[*]}):" \
            "its model would not match the data (give --force-config to train on it anyway)"
    fi
}

# use_model_config SAVE_DIR CONFIG FORCE: load the config to decode the model in SAVE_DIR with.  CONFIG empty:
# the GEN_ARGS recorded when it was trained; an explicit CONFIG other than that one is an error unless FORCE is 1.
use_model_config() {
    local save="$1" config="$2" force="$3" trained
    trained="$(recorded "$save" name)"
    if [[ -n "$config" ]]; then
        load_config "$config"
        if [[ -n "$trained" && "$trained" != "$CONFIG_NAME" && "$force" != 1 ]]; then
            die_input "$save was trained with -c $trained; -c $CONFIG_NAME would decode it with $CONFIG_NAME's" \
                "GEN_ARGS (leave -c out to use the model's, or give --force-config)"
        fi
    elif [[ -n "$trained" ]]; then
        PREP_ARGS=() TRAIN_ARGS=() GEN_ARGS=()
        mapfile -d '' -t GEN_ARGS < <(recorded "$save" gen_args)
        CONFIG_NAME="$trained" CONFIG_FILE="$save/config.json"
    else
        warn "$save records no config (trained before config.json existed): decoding with -c $DEFAULT_CONFIG's" \
             "GEN_ARGS; give -c CONFIG if it was trained with another"
        load_config "$DEFAULT_CONFIG"
    fi
}

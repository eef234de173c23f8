# shellcheck shell=bash disable=SC2034  # WORKER, WORKER_ARGS and SAVE_DIR are for the sourcing script
# Shared by the multi-process launchers (scripts/launch/torchrun_train.sh, scripts/slurm/train.sbatch); sourced.
# Needs ROOT (the repository) set; sources scripts/lib.sh.
#
#   prepare_training [-c CONFIG] [--force-config] DATA_DIR SAVE_DIR [fairseq-train options...]
#
# does what train.sh does before it trains (same arguments, config and model directory), except the training
# itself: it checks DATA_DIR, loads CONFIG (default: the one SAVE_DIR or else DATA_DIR records; scripts/lib.sh
# use_training_config), puts the venv on PATH, creates SAVE_DIR with prep.json/dict.txt/sp.model and
# config.json (the config it trains with), locks SAVE_DIR against a second run (hold_lock), repairs a
# truncated checkpoint_last.pt (checkpoint_guard.py), and sets
#   WORKER        the per-process script, scripts/launch/fairseq_worker.py
#   WORKER_ARGS   its fairseq-train arguments: DATA_DIR/bin --user-dir ... --save-dir SAVE_DIR TRAIN_ARGS extra
#   SAVE_DIR
#   TUNED_EPOCHS  the config's --max-epoch (empty: its budget is not in epochs)
# Each launcher then starts one WORKER per GPU or CPU worker in its own way (srun, torchrun).

# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

# hold_lock DIR WHAT NAME: an exclusive lock on DIR/.lock for as long as this process and its children
# (fairseq-train, torchrun, srun) live, or stop naming the holder.  fairseq saves through fixed names
# (checkpoint_last.pt, and NAME.tmp before a rename), so two runs writing one folder clobber each other's
# checkpoints: a resubmitted job while its requeued twin waits, the same train.sh started twice.  flock(2) is
# released by the kernel when the holder dies, even by kill -9, so a lock is never stale; the file keeps the last
# holder's host, pid and Slurm job.  scripts/experiments/lib.py's hold_lock is the same lock for a table's folder.
hold_lock() {
    local dir="$1" what="$2" name="$3" file="$1/.lock" holder
    exec {LOCK_FD}>>"$file" || die "cannot open the lock $file"
    if ! flock -n "$LOCK_FD"; then
        holder="$(cat "$file" 2>/dev/null || true)"
        die "$dir is locked by another $what (${holder:-holder not yet recorded}; lock $file): two runs must" \
            "never write one folder; wait for it to end, stop it, or give another $name"
    fi
    printf 'host %s, pid %s%s, since %s\n' "$(hostname)" "$$" "${SLURM_JOB_ID:+, Slurm job $SLURM_JOB_ID}" \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$file"
}

# run_forwarding NAME COMMAND...: COMMAND in the background, with SIGUSR1 and SIGTERM to this script forwarded to it
# until it has really ended (bash's `wait` returns early when a trapped signal arrives).  Sets STATUS (COMMAND's
# exit status) and SIGNALLED (USR1 or TERM, the last signal forwarded; empty without one).
run_forwarding() {
    local name="$1" sig
    shift
    SIGNALLED="" STATUS=0
    "$@" &
    FORWARD_PID=$!
    for sig in USR1 TERM; do
        # shellcheck disable=SC2064  # expanded now: the signal's name
        trap "SIGNALLED=$sig; echo '$name: got SIG$sig, forwarding it to the training processes' >&2
              kill -s $sig \"\$FORWARD_PID\" 2>/dev/null || true" "$sig"
    done
    while kill -0 "$FORWARD_PID" 2>/dev/null; do
        wait "$FORWARD_PID" || true  # 128 + signal when a trapped signal interrupted it
    done
    wait "$FORWARD_PID" || STATUS=$?  # the status of the ended command (bash keeps it)
    trap - USR1 TERM
}

prepare_training() {
    local config="" force=0 data file
    while [[ $# -gt 0 ]]; do
        case "$1" in
            -c) config="${2:?-c needs a config}"; shift 2 ;;
            --force-config) force=1; shift ;;
            *) break ;;
        esac
    done
    [[ $# -ge 2 ]] || die "usage: $(basename "$0") [-c CONFIG] [--force-config] DATA_DIR SAVE_DIR" \
        "[fairseq-train options]"
    data="$1" SAVE_DIR="$2"; shift 2
    [[ -f "$data/bin/dict.src.txt" ]] || die "$data/bin/dict.src.txt not found: run preprocess.sh first"
    use_training_config "$data" "$SAVE_DIR" "$config" "$force"
    use_venv
    mkdir -p "$SAVE_DIR"
    hold_lock "$SAVE_DIR" "training" "SAVE_DIR"  # before anything in SAVE_DIR is written or repaired
    for file in prep.json dict.txt sp.model; do
        if [[ -f "$data/$file" ]]; then cp "$data/$file" "$SAVE_DIR/$file"; fi
    done
    record_config "$SAVE_DIR" model "$@"  # what generate.sh and the hub decode this model with
    # A kill during fairseq's copy to checkpoint_last.pt leaves it truncated: put the newest complete one back.
    python "$ROOT/scripts/launch/checkpoint_guard.py" "$SAVE_DIR" || die "cannot resume from $SAVE_DIR"
    WORKER="$ROOT/scripts/launch/fairseq_worker.py"
    WORKER_ARGS=("$data/bin" --user-dir "$USER_DIR" --save-dir "$SAVE_DIR" "${TRAIN_ARGS[@]}" "$@")
    # A config's budget in epochs gives way to a --max-update given on the command line without --max-epoch.
    TUNED_EPOCHS="$(last_value --max-epoch "${TRAIN_ARGS[@]}")"
    if [[ -n "$TUNED_EPOCHS" && -n "$(last_value --max-update "$@")" && -z "$(last_value --max-epoch "$@")" ]]; then
        WORKER_ARGS+=(--max-epoch 0)
    fi
    step "Training ($CONFIG_FILE) -> $SAVE_DIR"
}

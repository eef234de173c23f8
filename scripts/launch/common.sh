# shellcheck shell=bash disable=SC2034  # WORKER, WORKER_ARGS and SAVE_DIR are for the sourcing script
# Shared by the multi-process launchers (scripts/launch/torchrun_train.sh, scripts/slurm/train.sbatch); sourced.
# Needs ROOT (the repository) set; sources scripts/lib.sh.
#
#   prepare_training [-c CONFIG] DATA_DIR SAVE_DIR [fairseq-train options...]
#
# does what train.sh does before it trains (same arguments, config and model directory), except the training
# itself: it checks DATA_DIR, loads CONFIG (default: scitldr_small), puts the venv on PATH, creates SAVE_DIR
# with prep.json/dict.txt/sp.model, repairs a truncated checkpoint_last.pt (checkpoint_guard.py), and sets
#   WORKER        the per-process script, scripts/launch/fairseq_worker.py
#   WORKER_ARGS   its fairseq-train arguments: DATA_DIR/bin --user-dir ... --save-dir SAVE_DIR TRAIN_ARGS extra
#   SAVE_DIR
# Each launcher then starts one WORKER per GPU or CPU worker in its own way (srun, torchrun).

# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

prepare_training() {
    local config=scitldr_small data file
    if [[ "${1:-}" == "-c" ]]; then config="${2:?-c needs a config}"; shift 2; fi
    [[ $# -ge 2 ]] || die "usage: $(basename "$0") [-c CONFIG] DATA_DIR SAVE_DIR [fairseq-train options]"
    data="$1" SAVE_DIR="$2"; shift 2
    [[ -f "$data/bin/dict.src.txt" ]] || die "$data/bin/dict.src.txt not found: run preprocess.sh first"
    load_config "$config"
    use_venv
    mkdir -p "$SAVE_DIR"
    for file in prep.json dict.txt sp.model; do
        if [[ -f "$data/$file" ]]; then cp "$data/$file" "$SAVE_DIR/$file"; fi
    done
    # A kill during fairseq's copy to checkpoint_last.pt leaves it truncated: put the newest complete one back.
    python "$ROOT/scripts/launch/checkpoint_guard.py" "$SAVE_DIR" || die "cannot resume from $SAVE_DIR"
    WORKER="$ROOT/scripts/launch/fairseq_worker.py"
    WORKER_ARGS=("$data/bin" --user-dir "$USER_DIR" --save-dir "$SAVE_DIR" "${TRAIN_ARGS[@]}" "$@")
    step "Training ($CONFIG_FILE) -> $SAVE_DIR"
}

#!/usr/bin/env bash
# Train a model with fairseq-train and this project's plugins.
#
#   train.sh [-c CONFIG] [--force-config] [--verbose] DATA_DIR SAVE_DIR [EXTRA fairseq-train OPTIONS...]
#   train.sh -h|--help | --version
#
# DATA_DIR is the output of preprocess.sh.  CONFIG sets TRAIN_ARGS; extra options come after them, so they
# override (e.g. --max-update 50 --arch pgn_lstm_see2017).  Without -c: the config SAVE_DIR was trained with
# (a resumed run), else the one DATA_DIR was prepared with (DATA_DIR/config.json), else scitldr_small.  A -c
# whose PREP_ARGS differ from DATA_DIR's, or other than a resumed SAVE_DIR's, is an error (--force-config
# allows it).  SAVE_DIR receives the checkpoints plus what generation needs to prepare raw text (prep.json,
# dict.txt, sp.model) and config.json (the config, its resolved arrays and the extra options), so it is a
# self-contained model directory: generate.sh and the hub API decode it with its own GEN_ARGS.
# Re-running the same command resumes from SAVE_DIR/checkpoint_last.pt
# (a checkpoint_last.pt truncated by a kill during fairseq's copy is first replaced by the newest complete
# checkpoint).  The multi-process launchers (scripts/launch/, scripts/slurm/) share this preparation.
#
# From a trained ML model to self-critical RL fine-tuning (configs/scitldr_small_rl.conf):
#   ./train.sh -c scitldr_small_rl DATA_DIR RL_DIR --finetune-from-model ML_DIR/checkpoint_best.pt
#
# fairseq-train's whole output is appended to SAVE_DIR/train.log.  The terminal (stderr; stdout stays empty) shows
# the steps, the model's size, the budget, one progress line per --log-interval with updates/s and the time left,
# the validations (one per --log-interval, and the last), fairseq's warnings and errors, and at the end the best
# and the last checkpoint (fairseq_plugins/runtime/training_log.py).  --verbose, or TRAIN_VERBOSE=1 in the environment,
# shows the whole log on stderr as well.  When fairseq-train fails, its last traceback (or its error line) is
# shown, with the log's name.
#
# The options of this script (-c, --force-config, --verbose) go anywhere before DATA_DIR.
# Exit status: 0 success, 1 runtime failure (fairseq-train's own status when it fails), 2 usage or bad input.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"
source "$ROOT/scripts/launch/common.sh"

options=() VERBOSE="${TRAIN_VERBOSE:-0}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) print_usage; exit 0 ;;
        --version) print_version; exit 0 ;;
        -c) option_value "$@"; options+=(-c "$2"); shift 2 ;;
        --force-config) options+=(--force-config); shift ;;
        --verbose) VERBOSE=1; shift ;;
        --) shift; break ;;
        -*) unknown_option "$1" ;;
        *) break ;;
    esac
done
[[ $# -ge 2 ]] || die_input "usage: train.sh [-c CONFIG] [--force-config] [--verbose] DATA_DIR SAVE_DIR" \
    "[fairseq-train options] (see --help)"
[[ -f "$1/bin/dict.src.txt" ]] || die_input "$1/bin/dict.src.txt not found: run preprocess.sh first"
prepare_training "${options[@]}" "$@"
warn_busy_machine
has_budget "${WORKER_ARGS[@]}" || warn "no --max-update, --max-epoch or --stop-time-hours in $CONFIG_NAME or on the" \
    "command line: this run trains until it is stopped"
log="$SAVE_DIR/train.log"
[[ $VERBOSE == 1 ]] || step "fairseq's log: $log (--verbose shows it here)"
train_logged "$log" "$VERBOSE" "${WORKER_ARGS[@]}"
step "Checkpoints in $SAVE_DIR (generate.sh, summ-serve and summ-package use checkpoint_best.pt by default)"
checkpoint_info --run "$SAVE_DIR" >&2 || true

#!/usr/bin/env bash
# Train a model with fairseq-train and this project's plugins.
#
#   train.sh [-c CONFIG] DATA_DIR SAVE_DIR [EXTRA fairseq-train OPTIONS...]
#
# DATA_DIR is the output of preprocess.sh.  CONFIG (default: scitldr_small) sets TRAIN_ARGS; extra options
# come after them, so they override (e.g. --max-update 50 --arch pgn_lstm_see2017).  SAVE_DIR receives the
# checkpoints plus what generation needs to prepare raw text (prep.json, dict.txt, sp.model), so it is a
# self-contained model directory.  Re-running the same command resumes from SAVE_DIR/checkpoint_last.pt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"

config=scitldr_small
if [[ "${1:-}" == "-c" ]]; then config="${2:?-c needs a config}"; shift 2; fi
[[ $# -ge 2 ]] || die "usage: train.sh [-c CONFIG] DATA_DIR SAVE_DIR [fairseq-train options]"
data="$1" save="$2"; shift 2
[[ -f "$data/bin/dict.src.txt" ]] || die "$data/bin/dict.src.txt not found: run preprocess.sh first"
load_config "$config"
use_venv

mkdir -p "$save"
for file in prep.json dict.txt sp.model; do
    if [[ -f "$data/$file" ]]; then cp "$data/$file" "$save/$file"; fi
done
step "Training ($CONFIG_FILE) -> $save"
fairseq-train "$data/bin" --user-dir "$USER_DIR" --save-dir "$save" "${TRAIN_ARGS[@]}" "$@"

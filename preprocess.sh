#!/usr/bin/env bash
# Tokenize, mark copyable OOV words and binarize a corpus for fairseq.
#
#   preprocess.sh [-c CONFIG] RAW_DIR DATA_DIR [EXTRA fairseq-preprocess OPTIONS...]
#
# RAW_DIR holds line-aligned {train,valid,test}.{src,tgt} (see scripts/ and `summ-convert` for raw formats).
# CONFIG (default: scitldr_small) sets PREP_ARGS, the options of `summ-prepare` (language, units, vocabulary
# size, truncation limits).  DATA_DIR receives:
#   tok/      tokenized text with per-document OOV markers, and {split}.oov (the words behind the markers)
#   ref/      the raw targets, for scoring
#   bin/      fairseq binaries with a joined dictionary (input of fairseq-train / fairseq-generate)
#   prep.json the preprocessing settings (reused to prepare raw text at generation time), sp.model if any
#   config.json which config prepared it (train.sh defaults to it and checks a -c against its PREP_ARGS)
# Extra options are passed to fairseq-preprocess (e.g. --workers 8).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"

config=scitldr_small
if [[ "${1:-}" == "-c" ]]; then config="${2:?-c needs a config}"; shift 2; fi
[[ $# -ge 2 ]] || die "usage: preprocess.sh [-c CONFIG] RAW_DIR DATA_DIR [fairseq-preprocess options]"
raw="$1" data="$2"; shift 2
[[ -d "$raw" ]] || die "raw directory not found: $raw"
load_config "$config"
use_venv

step "Tokenizing and marking OOV words ($CONFIG_FILE)"
summ-prepare --raw-dir "$raw" --out-dir "$data" "${PREP_ARGS[@]}"

splits=()
for split in train valid test; do
    if [[ -f "$data/tok/$split.src" && -f "$data/tok/$split.tgt" ]]; then splits+=("$split"); fi
done
[[ " ${splits[*]} " == *" train "* ]] || die "no training split produced in $data/tok"
mkdir -p "$data/ref"
for split in "${splits[@]}"; do cp "$raw/$split.tgt" "$data/ref/$split.tgt"; done

step "Binarizing with fairseq-preprocess (splits: ${splits[*]})"
prefixes=(--trainpref "$data/tok/train")
[[ " ${splits[*]} " == *" valid "* ]] && prefixes+=(--validpref "$data/tok/valid")
[[ " ${splits[*]} " == *" test "* ]] && prefixes+=(--testpref "$data/tok/test")
fairseq-preprocess --source-lang src --target-lang tgt "${prefixes[@]}" --destdir "$data/bin" \
    --srcdict "$data/dict.txt" --joined-dictionary --workers 2 "$@"
record_config "$data" data "$@"
step "Done: train with  ./train.sh $data SAVE_DIR  (config $CONFIG_NAME, recorded in $data/config.json)"

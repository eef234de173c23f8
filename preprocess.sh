#!/usr/bin/env bash
# Tokenize, mark copyable OOV words and binarize a corpus for fairseq.
#
#   preprocess.sh [-c CONFIG] RAW_DIR DATA_DIR [EXTRA fairseq-preprocess OPTIONS...]
#   preprocess.sh -h|--help | --version
#
# RAW_DIR holds line-aligned {train,valid,test}.{src,tgt} (see scripts/ and `summ-convert` for raw formats).
# CONFIG (default: scitldr_small) sets PREP_ARGS, the options of `summ-prepare` (language, units, vocabulary
# size, truncation limits).  DATA_DIR receives:
#   tok/      tokenized text with per-document OOV markers, and {split}.oov (the words behind the markers)
#   ref/      the raw targets, for scoring
#   bin/      fairseq binaries with a joined dictionary (input of fairseq-train / fairseq-generate)
#   prep.json the preprocessing settings (reused to prepare raw text at generation time), sp.model if any
#   config.json which config prepared it (train.sh defaults to it and checks a -c against its PREP_ARGS)
#   preprocess.log fairseq-preprocess's messages (its settings and counts; the end of it is shown if it fails)
# Extra options are passed to fairseq-preprocess (e.g. --workers 8).  Options of this script (-c) go anywhere
# before RAW_DIR.  Exit status: 0 success, 1 runtime failure, 2 usage or bad input.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"

config=scitldr_small
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) print_usage; exit 0 ;;
        --version) print_version; exit 0 ;;
        -c) option_value "$@"; config="$2"; shift 2 ;;
        --) shift; break ;;
        -*) unknown_option "$1" ;;
        *) break ;;
    esac
done
[[ $# -ge 2 ]] || die_input "usage: preprocess.sh [-c CONFIG] RAW_DIR DATA_DIR [fairseq-preprocess options] (see --help)"
raw="$1" data="$2"; shift 2
[[ -d "$raw" ]] || die_input "raw directory not found: $raw"
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

log="$data/preprocess.log"
: > "$log"
step "Binarizing with fairseq-preprocess (splits: ${splits[*]}; its messages: $log)"
prefixes=(--trainpref "$data/tok/train")
[[ " ${splits[*]} " == *" valid "* ]] && prefixes+=(--validpref "$data/tok/valid")
[[ " ${splits[*]} " == *" test "* ]] && prefixes+=(--testpref "$data/tok/test")
# fairseq-preprocess logs its Namespace dump and INFO lines on stdout, its warnings on stderr: both to the log
quietly "$log" fairseq-preprocess --source-lang src --target-lang tgt "${prefixes[@]}" --destdir "$data/bin" \
    --srcdict "$data/dict.txt" --joined-dictionary --workers 2 "$@" >>"$log"
record_config "$data" data "$@"
step "Done: train with  ./train.sh $data SAVE_DIR  (config $CONFIG_NAME, recorded in $data/config.json)"

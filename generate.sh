#!/usr/bin/env bash
# Summarize with beam search: a binarized split, or raw text through the same preprocessing.
#
#   generate.sh [-c CONFIG [--force-config]] [--split SPLIT | --input FILE|-] [--output FILE]
#               [--checkpoint NAME] [--score] [--refs FILE] DATA_DIR SAVE_DIR [EXTRA fairseq OPTIONS...]
#
#   --split SPLIT   summarize DATA_DIR's binarized split (default: test), with fairseq-generate
#   --input FILE    summarize raw documents, one per line ('-' = stdin), with fairseq-interactive
#   --output FILE   where the summaries go (default: stdout); exactly one line per input document, in order
#   --checkpoint    checkpoint file in SAVE_DIR (default: checkpoint_best.pt)
#   --score         print official ROUGE-1.5.5 against DATA_DIR/ref/SPLIT.tgt (or --refs FILE), then summ-analyze's
#                   novel n-grams, copied sentences and repetition of the summaries and the references against
#                   the source as the model read it (prepared and truncated, restored to text)
# The model's own GEN_ARGS (recorded in SAVE_DIR/config.json when it was trained) set beam, lengths, blocking;
# extra options override them.  -c CONFIG decodes with that config's GEN_ARGS instead, which is an error when
# the model was trained with another config, unless --force-config.  A model directory without config.json
# (trained before it existed) decodes with scitldr_small's GEN_ARGS, with a warning.
# Copied OOV words are restored from the per-document marker files, then the text is detokenized.
# Logs go to stderr; fairseq's raw output is kept in OUTPUT.fairseq.log when --output is given.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"

config="" force=0 split="" input="" output="" checkpoint=checkpoint_best.pt score=0 refs=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -c) config="${2:?-c needs a config}"; shift 2 ;;
        --force-config) force=1; shift ;;
        --split) split="${2:?--split needs a name}"; shift 2 ;;
        --input) input="${2:?--input needs a file or -}"; shift 2 ;;
        --output) output="${2:?--output needs a file}"; shift 2 ;;
        --checkpoint) checkpoint="${2:?--checkpoint needs a file name}"; shift 2 ;;
        --score) score=1; shift ;;
        --refs) refs="${2:?--refs needs a file}"; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -ge 2 ]] || die "usage: generate.sh [options] DATA_DIR SAVE_DIR [fairseq options] (see the header)"
data="$1" save="$2"; shift 2
[[ -n "$split" && -n "$input" ]] && die "give --split or --input, not both"
[[ -n "$split$input" ]] || split=test
[[ -f "$save/$checkpoint" ]] || die "checkpoint not found: $save/$checkpoint"
[[ -f "$data/prep.json" ]] || die "$data/prep.json not found: run preprocess.sh first"
use_model_config "$save" "$config" "$force"
step "Decoding with the GEN_ARGS of $CONFIG_NAME ($CONFIG_FILE): ${GEN_ARGS[*]}"
use_venv

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
common=(--user-dir "$USER_DIR" --task summarization --path "$save/$checkpoint" -s src -t tgt "${GEN_ARGS[@]}")

if [[ -n "$split" ]]; then
    [[ -f "$data/bin/$split.src-tgt.src.bin" ]] || die "split '$split' not binarized in $data/bin"
    oov="$data/tok/$split.oov"
    [[ -n "$refs" ]] || refs="$data/ref/$split.tgt"
    step "Generating $split with fairseq-generate"
    fairseq-generate "$data/bin" --gen-subset "$split" "${common[@]}" "$@" \
        > "$work/fairseq.out"
else
    [[ "$input" == "-" || -f "$input" ]] || die "input not found: $input"
    step "Preparing raw input ($input)"
    summ-prepare --apply "$data/prep.json" --input "$input" --out-prefix "$work/input"
    oov="$work/input.oov"
    step "Generating with fairseq-interactive"
    fairseq-interactive "$data/bin" --input "$work/input.src" --buffer-size 64 --batch-size 32 \
        "${common[@]}" "$@" > "$work/fairseq.out"
fi

hyps="${output:-$work/summaries.txt}"
summ-restore --prep "$data/prep.json" --oov "$oov" --generate-output "$work/fairseq.out" --out "$hyps"
[[ -n "$output" ]] && cp "$work/fairseq.out" "$output.fairseq.log"
[[ -z "$output" ]] && cat "$hyps"

if [[ $score -eq 1 ]]; then
    [[ -f "$refs" ]] || die "--score: references not found: ${refs:-give --refs FILE}"
    lang="$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["settings"]["lang"])' "$data/prep.json")"
    step "Official ROUGE-1.5.5 ($lang)"
    summ-rouge --refs "$refs" --hyps "$hyps" --lang "$lang" >&2
    # the source as the model read it (prepared, truncated), restored to text as the summaries are
    if [[ -n "$split" ]]; then src_tok="$data/tok/$split.src"; else src_tok="$work/input.src"; fi
    awk '{ printf "H-%d\t0\t%s\n", NR - 1, $0 }' "$src_tok" > "$work/source.gen"
    summ-restore --prep "$data/prep.json" --oov "$oov" --generate-output "$work/source.gen" --out "$work/source.txt"
    lower="$(python -c 'import json, sys; print("--lower" if json.load(open(sys.argv[1]))["settings"]["lowercase"] else "")' "$data/prep.json")"
    step "Novel n-grams, copied sentences, repetition (summ-analyze against the source the model read)"
    summ-analyze --source "$work/source.txt" --hyp "$hyps" --name summaries --ref "$refs" --lang "$lang" $lower >&2
fi

#!/usr/bin/env bash
# Summarize with beam search: a binarized split, or raw text through the same preprocessing.
#
#   generate.sh [-c CONFIG [--force-config]] [--split SPLIT | --input FILE|-] [--output FILE]
#               [--checkpoint NAME] [--score] [--refs FILE] [--no-detok] [--quantize int8] [--verbose]
#               DATA_DIR SAVE_DIR [EXTRA fairseq OPTIONS...]
#   generate.sh -h|--help | --version
#
#   --split SPLIT   summarize DATA_DIR's binarized split (default: test), with fairseq-generate
#   --input FILE    summarize raw documents, one per line ('-' = stdin), with fairseq-interactive
#   --output FILE   where the summaries go (default and '-': stdout; a missing folder is created); exactly one line
#                   per input document, in order
#   --checkpoint    checkpoint file in SAVE_DIR (default: checkpoint_best.pt)
#   --score         print official ROUGE-1.5.5 against DATA_DIR/ref/SPLIT.tgt (or --refs FILE), then summ-analyze's
#                   novel n-grams, copied sentences and repetition of the summaries and the references against
#                   the source as the model read it (prepared and truncated, restored to text); the references
#                   tokenized and cased as the source was (summ-prepare --apply --whole), so every row counts
#                   the same units
#   --no-detok      write the summaries as ROUGE scores them: the model's tokens (copied words restored)
#                   separated by spaces, not detokenized English ("the model ( a gru )" for "the model (a gru)")
#   --quantize int8 decode on the CPU with the decoder's recurrent cells, readout and output layer in int8
#                   (dynamic quantisation, fairseq_plugins/inference/quantize.py; off by default: docs/decoding.md)
#   --verbose       fairseq's messages (config dump, hydra notices, warnings) on stderr instead of a log file
#   -c, --force-config and the options above go anywhere before DATA_DIR.
# The model's own GEN_ARGS (recorded in SAVE_DIR/config.json when it was trained) set beam, lengths, blocking;
# extra options override them.  -c CONFIG decodes with that config's GEN_ARGS instead, which is an error when
# the model was trained with another config, unless --force-config.  A model directory without config.json
# (trained before it existed) decodes with scitldr_small's GEN_ARGS, with a warning.
# Copied OOV words are restored from the per-document marker files, then the text is detokenized.
# A copied word comes back as the source wrote it (Smallville), even from a lower-cased model.  --score scores
# the --no-detok form, as every ROUGE figure of the project does.
# Steps, progress and results go to stderr; fairseq's messages to a log file, OUTPUT.log with --output, else
# $TMPDIR/generate.XXXXXX.log (named on stderr); fairseq's raw output is kept in OUTPUT.fairseq.log with --output.
# A summ-package directory is its own DATA_DIR and SAVE_DIR (generate.sh --input FILE PACKAGE PACKAGE); it is
# checked against its sha256 manifest first, and refused (exit 2) when a file is missing or changed.
# Exit status: 0 success, 1 runtime failure, 2 usage or bad input.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"

config="" force=0 split="" input="" output="" checkpoint=checkpoint_best.pt score=0 refs="" detok=() VERBOSE=0
quantize=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) print_usage; exit 0 ;;
        --version) print_version; exit 0 ;;
        -c) option_value "$@"; config="$2"; shift 2 ;;
        --force-config) force=1; shift ;;
        --split) option_value "$@"; split="$2"; shift 2 ;;
        --input) option_value "$@"; input="$2"; shift 2 ;;
        --output) option_value "$@"; output="$2"; shift 2 ;;
        --checkpoint) option_value "$@"; checkpoint="$2"; shift 2 ;;
        --score) score=1; shift ;;
        --refs) option_value "$@"; refs="$2"; shift 2 ;;
        --no-detok) detok=(--no-detok); shift ;;
        --quantize) option_value "$@"; quantize="$2"; shift 2 ;;
        --verbose) VERBOSE=1; shift ;;
        --) shift; break ;;
        -*) unknown_option "$1" ;;
        *) break ;;
    esac
done
[[ $# -ge 2 ]] || die_input "usage: generate.sh [options] DATA_DIR SAVE_DIR [fairseq options] (see --help)"
data="$1" save="$2"; shift 2
[[ "$output" == "-" ]] && output=""
[[ -n "$split" && -n "$input" ]] && die_input "give --split or --input, not both"
[[ -n "$split$input" ]] || split=test
if [[ -n "$quantize" ]]; then
    [[ "$quantize" == int8 ]] || die_input "--quantize: unknown scheme '$quantize' (int8)"
    for option in "$@"; do
        case "$option" in
            --fp16|--bf16|--memory-efficient-fp16|--memory-efficient-bf16)
                die_input "--quantize $quantize decodes on the CPU in int8: it does not combine with $option" ;;
        esac
    done
fi
[[ -f "$save/$checkpoint" ]] || die_input "checkpoint not found: $save/$checkpoint"
if [[ -n "$output" && ! -d "$(dirname "$output")" ]]; then
    mkdir -p "$(dirname "$output")" 2>/dev/null || die_input "--output $output: cannot create its folder $(dirname "$output")"
fi
if [[ -f "$save/manifest.json" || -f "$save/MODEL_CARD.md" ]]; then  # a summ-package: checked before use
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m fairseq_plugins.cli.package verify "$save" \
        || exit 2
fi
[[ -f "$data/prep.json" ]] || die_input "$data/prep.json not found: run preprocess.sh first"
use_model_config "$save" "$config" "$force"
step "Decoding with the GEN_ARGS of $CONFIG_NAME ($CONFIG_FILE): ${GEN_ARGS[*]}"
use_venv
step "Checkpoint $(checkpoint_info "$save/$checkpoint" 2>&1) (--checkpoint chooses another)"

work="$(mktemp -d)" progress=""
trap 'rm -rf "$work"; [[ -z "$progress" ]] || kill "$progress" 2>/dev/null' EXIT
log=/dev/null
if [[ $VERBOSE == 0 ]]; then
    if [[ -n "$output" ]]; then log="$output.log"; else log="$(mktemp "${TMPDIR:-/tmp}/generate.XXXXXX.log")"; fi
    : > "$log"
    step "fairseq's messages go to $log (--verbose shows them here)"
fi
# fairseq's messages to $log, and N/TOTAL summaries every 2 s on a terminal; stdout goes to $work/fairseq.out
fairseq_quietly() {
    if [[ -t 2 && $VERBOSE == 0 ]]; then show_progress "$work/fairseq.out" "$(wc -l < "$oov")" & progress=$!; fi
    quietly "$log" "$@" > "$work/fairseq.out"
    [[ -z "$progress" ]] || { kill "$progress"; progress=""; printf '\n' >&2; }
}
# fairseq-generate / fairseq-interactive, or with --quantize the same command with the model quantized as it loads
fairseq_command() {
    if [[ -z "$quantize" ]]; then "$@"; return; fi
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" python -m fairseq_plugins.cli.quantize "$quantize" "$@"
}
common=(--user-dir "$USER_DIR" --task summarization --path "$save/$checkpoint" -s src -t tgt "${GEN_ARGS[@]}")
# decoding lengths against the training targets' (prep.json's target_lengths): a warning naming the figures
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m fairseq_plugins.cli.length_fit \
    "$data/prep.json" --prog "$(basename "$0")" "${GEN_ARGS[@]}" "$@" || true

if [[ -n "$split" ]]; then
    [[ -f "$data/bin/$split.src-tgt.src.bin" ]] || die_input "split '$split' not binarized in $data/bin"
    oov="$data/tok/$split.oov"
    [[ -n "$refs" ]] || refs="$data/ref/$split.tgt"
    step "Generating $split with fairseq-generate${quantize:+ (decoder in $quantize, on the CPU)}"
    fairseq_quietly fairseq_command fairseq-generate "$data/bin" --gen-subset "$split" "${common[@]}" "$@"
else
    [[ "$input" == "-" || -f "$input" ]] || die_input "input not found: $input"
    if [[ "$input" == "-" && -t 0 ]]; then
        printf '%s: reading documents from the terminal, one per line; end with Ctrl-D\n' "$(basename "$0")" >&2
    fi
    step "Preparing raw input ($input)"
    summ-prepare --apply "$data/prep.json" --input "$input" --out-prefix "$work/input"
    oov="$work/input.oov"
    step "Generating with fairseq-interactive${quantize:+ (decoder in $quantize, on the CPU)}"
    fairseq_quietly fairseq_command fairseq-interactive "$data/bin" --input "$work/input.src" --buffer-size 64 \
        --batch-size 32 "${common[@]}" "$@"
fi

hyps="${output:-$work/summaries.txt}"
summ-restore --prep "$data/prep.json" --oov "$oov" --generate-output "$work/fairseq.out" --output "$hyps" \
    ${detok[@]+"${detok[@]}"}
[[ -n "$output" ]] && cp "$work/fairseq.out" "$output.fairseq.log"
[[ -z "$output" ]] && cat "$hyps"

if [[ $score -eq 1 ]]; then
    [[ -f "$refs" ]] || die_input "--score: references not found: ${refs:-give --refs FILE}"
    # ROUGE and summ-analyze read the summaries as tokens (--no-detok), as every figure of the project
    scored="$hyps"
    if [[ ${#detok[@]} -eq 0 ]]; then
        scored="$work/scored.txt"
        summ-restore --prep "$data/prep.json" --oov "$oov" --generate-output "$work/fairseq.out" \
            --output "$scored" --no-detok 2>>"$log"
    fi
    lang="$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["settings"]["lang"])' "$data/prep.json")"
    step "Official ROUGE-1.5.5 ($lang)"
    summ-rouge --refs "$refs" --hyps "$scored" --lang "$lang" >&2
    # the source as the model read it (prepared, truncated), restored to text as the summaries are
    if [[ -n "$split" ]]; then src_tok="$data/tok/$split.src"; else src_tok="$work/input.src"; fi
    awk '{ printf "H-%d\t0\t%s\n", NR - 1, $0 }' "$src_tok" > "$work/source.gen"
    summ-restore --prep "$data/prep.json" --oov "$oov" --generate-output "$work/source.gen" --output "$work/source.txt" \
        --no-detok
    # the references tokenized and cased as the source was (whole: not truncated), so that every row is counted
    # in the units the model read
    summ-prepare --apply "$data/prep.json" --input "$refs" --out-prefix "$work/refs" --whole 2>>"$log"
    awk '{ printf "H-%d\t0\t%s\n", NR - 1, $0 }' "$work/refs.src" > "$work/refs.gen"
    summ-restore --prep "$data/prep.json" --oov "$work/refs.oov" --generate-output "$work/refs.gen" \
        --output "$work/refs.txt" --no-detok 2>>"$log"
    lower="$(python -c 'import json, sys; print("--lower" if json.load(open(sys.argv[1]))["settings"]["lowercase"] else "")' "$data/prep.json")"
    step "Novel n-grams, copied sentences, repetition (summ-analyze against the source the model read)"
    summ-analyze --source "$work/source.txt" --hyp "$scored" --name summaries --ref "$work/refs.txt" --lang "$lang" \
        $lower >&2
fi

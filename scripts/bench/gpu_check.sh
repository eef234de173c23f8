#!/usr/bin/env bash
# Every GPU check of the project, its figures in one folder.  Parts, in this order (default: all):
#   speed  in this order, so that a short time limit still gives the end-to-end figures: step_ops.py at
#          --max-tokens 4000 (operations, kernels, ms per decoder step, peak memory; training and beam search);
#          throughput.py end to end (fairseq-train, fairseq-generate) at 4000 and 64000 tokens per batch (its rows
#          at 4000: THROUGHPUT_MODELS, comma-separated); graph_ceiling.py (the fused recurrence eager and replayed
#          as a CUDA graph); step_ops.py at 64000, for fairseq's search loop and for foreach_adam's update;
#          profile_step.py --profile (where a training step's and a beam search's GPU time goes); step_ops.py for
#          the code in BASELINE_TREE when it exists (default runs/baseline_tree: an older checkout's
#          fairseq_plugins/ and scripts/, the "before" of a change)
#   host   where fairseq-train's host time goes on the GPU (train_host_profile.py: pgn_lstm under cProfile after
#          10 updates of warm-up, at 4000 and 64000 tokens per batch; the callers of every synchronising method)
#   tier   the GPU test tier (every architecture x criterion x precision on CUDA, the RL fine-tune through
#          train.sh in each precision, CPU/GPU decode agreement, the hub and summ-serve on CUDA)
#   copy   the quickstart's 600 updates in fp32 and --fp16, no validation, the last checkpoint decoded: are OOV
#          markers still copied?
#   paper  See et al.'s CNN/DM recipe at paper scale on the GPU (paper_scale.py --table see2017_table1 --device
#          cuda): s/update, peak memory and the recipe's projected hours
#
#   bash scripts/bench/gpu_check.sh [OUT_DIR] [PART ...]        (OUT_DIR default: $OUT, else runs/gpu_check)
#
# On the offline GPU machine of ../shared/gpu/README.md: `bash .gpu/setup.sh && bash scripts/bench/gpu_check.sh`.
# OUT_DIR receives summary.md (the report) and gpu_check.tgz (logs, JUnit file, per-case losses, tables).  Each
# part runs under its own time limit (SPEED_SECONDS 300, HOST_SECONDS 90, TIER_SECONDS 330, COPY_SECONDS 230,
# PAPER_SECONDS 150; TIER_ARGS: more pytest options for the tier),
# so a slow machine still returns what finished.  Exit status: the test tier's (0 when it did not run).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/runs/gpu_check}}"
shift || true
PARTS=("$@")
[[ ${#PARTS[@]} -eq 0 ]] && PARTS=(speed host tier copy paper)
WORK="$(mktemp -d)"
mkdir -p "$OUT_DIR"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
BASELINE_TREE="${BASELINE_TREE:-$ROOT/runs/baseline_tree}"
BENCH_BIN="$ROOT/runs/bench/lcsts_char/bin"

{ "$PY" -c "import sys, torch, fairseq; print('python', sys.version.split()[0], '| torch', torch.__version__,
'| CUDA', torch.version.cuda, '| fairseq', fairseq.__version__, '|',
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null; } > "$WORK/versions.txt"

speed() {
    local ops=(scripts/bench/step_ops.py --device cuda --data-bin "$BENCH_BIN")
    [[ -f "$BENCH_BIN/dict.src.txt" ]] || "$PY" -c "from pathlib import Path
from scripts.bench.throughput_runners import prepare_lcsts
prepare_lcsts(Path('$BENCH_BIN').parent, Path('$BENCH_BIN'))" > "$WORK/speed/prepare.log" 2>&1
    "$PY" "${ops[@]}" --json "$WORK/speed/ops_4000.json" > "$WORK/speed/ops_4000.md" 2> "$WORK/speed/ops_4000.log"
    local tp=(scripts/bench/throughput.py --device cuda --data-bin "$BENCH_BIN" --updates 120 --decode-sentences 400
              --lengths fixed --block-ngram-repeat 0)
    local rows=${THROUGHPUT_MODELS:-pgn_lstm,pgn_lstm_graphs,pgn_lstm_fairseq_search,pgn_lstm_foreach_adam,lstm}
    "$PY" "${tp[@]}" --models "$rows" \
        --work "$WORK/speed/tp4000" \
        --json "$WORK/speed/throughput_4000.json" > "$WORK/speed/throughput_4000.txt" \
        2> "$WORK/speed/throughput_4000.log"
    "$PY" "${tp[@]}" --models pgn_lstm,pgn_lstm_graphs,lstm --max-tokens 64000 --decode-sentences 32 \
        --work "$WORK/speed/tp64000" \
        --json "$WORK/speed/throughput_64000.json" > "$WORK/speed/throughput_64000.txt" \
        2> "$WORK/speed/throughput_64000.log"
    "$PY" scripts/bench/graph_ceiling.py --json "$WORK/speed/graph_ceiling.json" > "$WORK/speed/graph_ceiling.md" \
        2> "$WORK/speed/graph_ceiling.log"
    "$PY" "${ops[@]}" --max-tokens 64000 --passes training --json "$WORK/speed/ops_64000.json" \
        > "$WORK/speed/ops_64000.md" 2> "$WORK/speed/ops_64000.log"
    "$PY" "${ops[@]}" --models pgn_lstm --passes beam --fairseq-beam-search \
        --json "$WORK/speed/ops_fairseq_search.json" > "$WORK/speed/ops_fairseq_search.md" \
        2> "$WORK/speed/ops_fairseq_search.log"
    "$PY" "${ops[@]}" --models pgn_lstm_foreach_adam --passes update --json "$WORK/speed/ops_foreach_adam.json" \
        > "$WORK/speed/ops_foreach_adam.md" 2> "$WORK/speed/ops_foreach_adam.log"
    "$PY" scripts/bench/profile_step.py --device cuda --data-bin "$BENCH_BIN" --models pgn_lstm,lstm --batches 5 \
        --rounds 1 --decode-sentences 32 --profile > "$WORK/speed/profile_4000.txt" 2> "$WORK/speed/profile_4000.log"
    if [[ -d "$BASELINE_TREE/fairseq_plugins" ]]; then
        PYTHONPATH="$BASELINE_TREE" "$PY" "$BASELINE_TREE/${ops[0]}" "${ops[@]:1}" --models pgn_lstm,lstm \
            --json "$WORK/speed/baseline_ops_4000.json" > "$WORK/speed/baseline_ops_4000.md" \
            2> "$WORK/speed/baseline_ops_4000.log"
    fi
}

host() {
    local tokens updates
    for tokens in 4000 64000; do
        updates=$(( tokens == 4000 ? 60 : 30 ))
        "$PY" scripts/bench/train_host_profile.py --device cuda --data-bin "$BENCH_BIN" --max-tokens "$tokens" \
            --updates "$updates" > "$WORK/speed/host_$tokens.txt" \
            2> "$WORK/host/host_$tokens.log"
    done
}

tier() {
    local more=()
    read -r -a more <<< "${TIER_ARGS:-}"  # more pytest options, e.g. "-n 4" where pytest-xdist is installed
    SUMM_CUDA_REPORT="$WORK/cases.jsonl" timeout "${TIER_SECONDS:-330}" bash scripts/test.sh --gpu \
        --junitxml="$WORK/cuda-tests.xml" "${more[@]}" > "$WORK/cuda-tests.log" 2>&1
}

copy_check() {
    ./preprocess.sh -c scitldr_small data/scitldr "$WORK/copy/data" > "$WORK/copy/preprocess.log" 2>&1 || return
    for precision in fp32 fp16; do
        local extra=() model="$WORK/copy/$precision"
        [[ $precision == fp16 ]] && extra=(--fp16)
        ./train.sh -c scitldr_small "$WORK/copy/data" "$model" --disable-validation "${extra[@]}" \
            > "$WORK/copy/$precision.train.log" 2>&1 \
            || { printf '%s\ttraining failed\t\n' "$precision" >> "$WORK/copy_check.tsv"; continue; }
        local decode=(-c scitldr_small --split test --checkpoint checkpoint_last.pt --output "$WORK/copy/$precision.sum")
        ./generate.sh "${decode[@]}" --score "$WORK/copy/data" "$model" > "$WORK/copy/$precision.gen.log" 2>&1 \
            || ./generate.sh "${decode[@]}" "$WORK/copy/data" "$model" > "$WORK/copy/$precision.gen.log" 2>&1
        local restored rouge
        restored=$(grep -o 'wrote [0-9]* summaries to [^;]*\.sum; [0-9]* markers restored' \
            "$WORK/copy/$precision.gen.log" | grep -o '[0-9]* markers' | head -n 1)
        rouge=$(grep -o 'F1 mean over documents (exact).*' "$WORK/copy/$precision.gen.log" | head -n 1)
        printf '%s\t%s\t%s\n' "$precision" "${restored:-not found}" "${rouge:-not scored}" >> "$WORK/copy_check.tsv"
    done
    rm -rf "$WORK/copy/data/bin" "$WORK"/copy/*/checkpoint*.pt
}

paper() {
    "$PY" scripts/experiments/paper_scale.py --table see2017_table1 --device cuda \
        --work "${PAPER_WORK:-$ROOT/runs/see2017_table1_dry_run}" > "$WORK/paper/dry_run.log" 2>&1
    cp "${PAPER_WORK:-$ROOT/runs/see2017_table1_dry_run}/dry_run.md" "$WORK/paper/" 2>/dev/null
}

export -f speed host tier copy_check paper
export ROOT WORK PY BASELINE_TREE BENCH_BIN
tier_status=0
for part in "${PARTS[@]}"; do
    echo "==> $part"
    mkdir -p "$WORK/$part"
    case $part in
        speed) timeout "${SPEED_SECONDS:-300}" bash -c speed
               rm -rf "$WORK"/speed/tp*/models "$WORK"/speed/tp*/decode_subset ;;  # checkpoints: too large to return
        host) mkdir -p "$WORK/speed"; timeout "${HOST_SECONDS:-90}" bash -c host ;;
        tier) bash -c tier; tier_status=$?; tail -n 3 "$WORK/cuda-tests.log" ;;
        copy) mkdir -p "$WORK/copy"; timeout "${COPY_SECONDS:-230}" bash -c copy_check; cat "$WORK/copy_check.tsv" ;;
        paper) timeout "${PAPER_SECONDS:-150}" bash -c paper; tail -n 12 "$WORK/paper/dry_run.md" 2>/dev/null ;;
        *) echo "gpu_check: unknown part $part (speed, host, tier, copy, paper)" >&2; exit 2 ;;
    esac
done

"$PY" scripts/bench/gpu_report.py "$WORK" > "$OUT_DIR/summary.md"
tar czf "$OUT_DIR/gpu_check.tgz" -C "$WORK" .
echo "==> $OUT_DIR/summary.md, $OUT_DIR/gpu_check.tgz"
exit $tier_status

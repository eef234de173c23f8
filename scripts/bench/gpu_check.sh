#!/usr/bin/env bash
# Every GPU check of the project in one run, its figures in one folder: the GPU test tier (every architecture x
# criterion x precision on CUDA, the RL fine-tune through train.sh in each precision, CPU/GPU decode agreement,
# the hub and summ-serve on CUDA), then the copy check (the quickstart's 600 updates in fp32 and --fp16, no
# validation, the last checkpoint decoded: are OOV markers still copied?), then a report.
#
#   bash scripts/bench/gpu_check.sh [OUT_DIR]        (default: $OUT, else runs/gpu_check)
#
# On the offline GPU machine of ../shared/gpu/README.md: `bash .gpu/setup.sh && bash scripts/bench/gpu_check.sh`.
# OUT_DIR receives summary.md (the report) and gpu_check.tgz (logs, JUnit file, per-case losses, summaries).
# Each part runs under its own time limit (TIER_SECONDS, default 330; COPY_SECONDS, default 230), so a slow
# machine still returns what finished.  Exit status: the test tier's.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/runs/gpu_check}}"
WORK="$(mktemp -d)"
mkdir -p "$OUT_DIR"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"

{ "$PY" -c "import sys, torch, fairseq; print('python', sys.version.split()[0], '| torch', torch.__version__,
'| CUDA', torch.version.cuda, '| fairseq', fairseq.__version__, '|',
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null; } > "$WORK/versions.txt"

echo "==> GPU test tier (log: cuda-tests.log)"
SUMM_CUDA_REPORT="$WORK/cases.jsonl" timeout "${TIER_SECONDS:-330}" bash scripts/test.sh --gpu \
    --junitxml="$WORK/cuda-tests.xml" > "$WORK/cuda-tests.log" 2>&1
tier=$?
tail -n 3 "$WORK/cuda-tests.log"

echo "==> Copy check: scitldr_small, 600 updates, fp32 and --fp16"
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
}
mkdir -p "$WORK/copy"
export -f copy_check
WORK="$WORK" timeout "${COPY_SECONDS:-230}" bash -c copy_check
cat "$WORK/copy_check.tsv" 2>/dev/null

"$PY" scripts/bench/gpu_report.py "$WORK" > "$OUT_DIR/summary.md"
rm -rf "$WORK/copy/data/bin" "$WORK"/copy/*/checkpoint*.pt
tar czf "$OUT_DIR/gpu_check.tgz" -C "$WORK" .
echo "==> $OUT_DIR/summary.md, $OUT_DIR/gpu_check.tgz"
exit $tier

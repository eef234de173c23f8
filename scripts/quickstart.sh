#!/usr/bin/env bash
# The main job, from nothing: set up, then preprocess -> train -> generate -> official ROUGE on the English
# SciTLDR-A sample shipped in data/scitldr.  Outputs go to runs/quickstart/.  Re-running reuses the install.
#
#   bash scripts/quickstart.sh [CONFIG]        (default config: scitldr_small)
#
# The setup's steps show on the terminal; pip's output goes to runs/setup.log (its end is shown if setup fails).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="${1:-scitldr_small}"
out="$ROOT/runs/quickstart"
log="$ROOT/runs/setup.log"

mkdir -p "$ROOT/runs"
printf '==> Setting up (pip and apt output: %s)\n' "$log"
if ! bash "$ROOT/scripts/setup.sh" 2>&1 | tee "$log" | grep --line-buffered '^==> '; then
    tail -n 30 "$log" >&2
    printf 'quickstart.sh: error: setup failed; its whole output: %s\n' "$log" >&2
    exit 1
fi
printf '\n==> Main job: %s on data/scitldr, outputs in %s\n' "$config" "$out"
rm -rf "$out"
"$ROOT/preprocess.sh" -c "$config" "$ROOT/data/scitldr" "$out/data"
"$ROOT/train.sh" -c "$config" "$out/data" "$out/model"
"$ROOT/generate.sh" -c "$config" --split test --score --output "$out/test.summaries.txt" "$out/data" "$out/model"
printf '\n==> Summaries: %s (one line per test document)\n' "$out/test.summaries.txt"

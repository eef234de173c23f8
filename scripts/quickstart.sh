#!/usr/bin/env bash
# The main job, from nothing: set up, then preprocess -> train -> generate -> official ROUGE on the English
# SciTLDR-A sample shipped in data/scitldr.  Outputs go to runs/quickstart/.  Re-running reuses the install.
#
#   bash scripts/quickstart.sh [CONFIG]        (default config: scitldr_small)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="${1:-scitldr_small}"
out="$ROOT/runs/quickstart"

bash "$ROOT/scripts/setup.sh"
printf '\n==> Main job: %s on data/scitldr, outputs in %s\n' "$config" "$out"
rm -rf "$out"
"$ROOT/preprocess.sh" -c "$config" "$ROOT/data/scitldr" "$out/data"
"$ROOT/train.sh" -c "$config" "$out/data" "$out/model"
"$ROOT/generate.sh" -c "$config" --split test --score --output "$out/test.summaries.txt" "$out/data" "$out/model"
printf '\n==> Summaries: %s (one line per test document)\n' "$out/test.summaries.txt"

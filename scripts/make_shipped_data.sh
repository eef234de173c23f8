#!/usr/bin/env bash
# Rebuild the two corpora shipped in data/ (SciTLDR-A and CSL titles, both Apache-2.0) from the shared copies.
#
#   bash scripts/make_shipped_data.sh [SHARED_DATA_DIR]      (default: <repo>/../shared/data)
#
# Deterministic: running it again gives byte-identical files.  See data/README.md for the formats.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${1:-$REPO/../shared/data}"
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
    if [[ -x "$REPO/.venv/bin/python" ]]; then PY="$REPO/.venv/bin/python"; else PY=python3; fi
fi
[[ -d "$SHARED/scitldr_a" && -d "$SHARED/csl_title" ]] || {
    echo "make_shipped_data.sh: error: $SHARED/scitldr_a or $SHARED/csl_title not found" >&2; exit 1; }

# summ-convert, from this checkout whether or not the project is installed.
convert() { (cd "$REPO" && "$PY" -m fairseq_plugins.cli.convert "$@"); }

# --- SciTLDR-A: official split; source = abstract sentences joined; target = first TLDR; all TLDRs of
#     valid/test in {valid,test}.tgt.all (one JSON array per line); paper ids in {split}.ids.
out="$REPO/data/scitldr"
mkdir -p "$out"
convert jsonl "$SHARED/scitldr_a/train.jsonl" --src-field source --tgt-field target --target-index 0 \
    --id-field paper_id --out-prefix "$out/train"
for pair in dev:valid test:test; do
    convert jsonl "$SHARED/scitldr_a/${pair%%:*}.jsonl" --src-field source --tgt-field target --all-targets \
        --id-field paper_id --out-prefix "$out/${pair##*:}"
done

# --- CSL titles: abstract -> title; ydli_dev + ydli_test + clge_val (3,000 pairs) re-split 2,600/200/200,
#     documents with the same normalized abstract or title kept in one split.
out="$REPO/data/csl"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
convert tsv "$SHARED/csl_title/ydli_dev.tsv" --src-col 1 --tgt-col 2 --num-cols 3 --out-prefix "$tmp/ydli_dev"
convert tsv "$SHARED/csl_title/ydli_test.tsv" --src-col 1 --tgt-col 2 --num-cols 3 --out-prefix "$tmp/ydli_test"
convert tsv "$SHARED/csl_title/clge_val.tsv" --src-col 1 --tgt-col 0 --num-cols 2 --out-prefix "$tmp/clge_val"
mkdir -p "$out"
convert split --in-prefix "$tmp/ydli_dev" "$tmp/ydli_test" "$tmp/clge_val" --sizes test=200,valid=200 \
    --rest train --seed csl-title --out-dir "$out"

for dir in "$REPO/data/scitldr" "$REPO/data/csl"; do
    [[ -f "$dir/LICENSE" && -f "$dir/NOTICE" ]] || echo "make_shipped_data.sh: warning: $dir needs LICENSE and NOTICE" >&2
done
wc -l "$REPO"/data/scitldr/*.src "$REPO"/data/csl/*.src >&2

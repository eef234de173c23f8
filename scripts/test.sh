#!/usr/bin/env bash
# The test suite: sets up first if needed (idempotent), then runs pytest.  Extra arguments go to pytest.
#
#   bash scripts/test.sh [--fast] [-k PATTERN ...]
#
# --fast leaves out the tests marked slow (pytest -m "not slow": those that start the scripts, the fairseq
# binaries, training or official ROUGE): under 2 minutes on 2 cores instead of about 20.  CI and the README's
# test command run the whole suite (no --fast).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELECT=()
if [[ "${1:-}" == "--fast" ]]; then
    SELECT=(-m "not slow")
    shift
fi
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest -q -rs tests "${SELECT[@]}" "$@"

#!/usr/bin/env bash
# The test suite: sets up first if needed (idempotent), then runs pytest.  Extra arguments go to pytest.
#
#   bash scripts/test.sh [-k PATTERN ...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest -q -rs tests "$@"

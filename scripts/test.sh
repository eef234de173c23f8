#!/usr/bin/env bash
# The test suite: sets up first if needed (idempotent), then runs pytest.  Extra arguments go to pytest.
#
#   bash scripts/test.sh [--fast | --gpu] [-k PATTERN ...]
#
# --fast leaves out the tests marked slow (pytest -m "not slow": those that start the scripts, the fairseq
# binaries, training or official ROUGE): under 2 minutes on 2 cores instead of about 20.  CI and the README's
# test command run the whole suite (no --fast), in which the GPU tests are skipped, with the reason, where torch
# sees no GPU.
# --gpu runs just the GPU tier (pytest -m cuda: every model and criterion on CUDA in fp32, fp16 and bf16, CPU/GPU
# decode agreement, the hub and summ-serve on CUDA).  Where .venv already exists (for example the GPU
# recipe's, ../shared/gpu/README.md, whose .venv is the machine's own Python) it is used as it is.
# The suite runs in TEST_WORKERS processes (pytest-xdist, default 2: most tests wait on a subprocess's imports,
# so two share the 2 cores of the machines it is sized for), each test file whole in one process so that its
# module fixtures (trained models) are made once; the GPU tier runs in one process.  TEST_WORKERS=0: no workers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELECT=()
WORKERS=(-n "${TEST_WORKERS:-2}" --dist loadfile)
SETUP=1
if [[ "${1:-}" == "--fast" ]]; then
    SELECT=(-m "not slow")
    shift
elif [[ "${1:-}" == "--gpu" ]]; then
    SELECT=(-m cuda)
    WORKERS=()
    [[ -x "$ROOT/.venv/bin/python" ]] && SETUP=0
    shift
fi
[[ $SETUP == 1 ]] && bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
[[ "${TEST_WORKERS:-2}" == 0 ]] && WORKERS=()
exec "$ROOT/.venv/bin/python" -m pytest -q -rs tests ${SELECT[@]+"${SELECT[@]}"} ${WORKERS[@]+"${WORKERS[@]}"} "$@"

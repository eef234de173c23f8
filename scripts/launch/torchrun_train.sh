#!/usr/bin/env bash
# Multi-process training without Slurm: torchrun starts one scripts/launch/fairseq_worker.py per GPU or CPU worker.
#
#   scripts/launch/torchrun_train.sh [--nproc-per-node N] [--nnodes N --node-rank R --master-addr HOST
#       [--master-port PORT]] [--max-restarts N] [-c CONFIG] DATA_DIR SAVE_DIR [fairseq-train options...]
#
# The arguments after the launcher options are train.sh's (config, data, model directory, extra fairseq-train
# options) and mean the same.  --nproc-per-node defaults to the number of GPUs, or 1 without one.  One node:
# torchrun --standalone (a free local port).  Several nodes: run the same command on every node with its
# --node-rank and the first node's address.  On CPU the workers use gloo (see fairseq_worker.py); torchrun sets
# OMP_NUM_THREADS=1 per worker unless it is set.
#
# The global batch is --max-tokens/--batch-size x processes x --update-freq: 2 processes with --update-freq 1
# train exactly like 1 process with --update-freq 2 (tests/test_distributed.py).
# Stopping: SIGTERM to torchrun (or SIGUSR1/SIGTERM to the workers) makes every worker finish its update, save
# checkpoint_last.pt and stop; rerunning the same command resumes.  --max-restarts N lets torchrun restart
# failed workers, which then resume from checkpoint_last.pt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/launch/common.sh"

nproc="" nnodes=1 node_rank=0 master_addr="" master_port=29500 max_restarts=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nproc-per-node) nproc="${2:?$1 needs a number}"; shift 2 ;;
        --nnodes) nnodes="${2:?$1 needs a number}"; shift 2 ;;
        --node-rank) node_rank="${2:?$1 needs a number}"; shift 2 ;;
        --master-addr) master_addr="${2:?$1 needs a host}"; shift 2 ;;
        --master-port) master_port="${2:?$1 needs a port}"; shift 2 ;;
        --max-restarts) max_restarts="${2:?$1 needs a number}"; shift 2 ;;
        *) break ;;
    esac
done
prepare_training "$@"
command -v torchrun >/dev/null || die "torchrun not found (it comes with torch)"
if [[ -z "$nproc" ]]; then
    nproc="$(python -c 'import torch; print(torch.cuda.device_count() or 1)')"
fi
if [[ "$nnodes" -eq 1 ]]; then
    rendezvous=(--standalone)
else
    [[ -n "$master_addr" ]] || die "--nnodes $nnodes needs --master-addr (the address of node rank 0)"
    rendezvous=(--nnodes "$nnodes" --node-rank "$node_rank" --master-addr "$master_addr" --master-port "$master_port")
fi
exec torchrun "${rendezvous[@]}" --nproc-per-node "$nproc" --max-restarts "$max_restarts" \
    "$WORKER" "${WORKER_ARGS[@]}"

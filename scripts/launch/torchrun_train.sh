#!/usr/bin/env bash
# Multi-process training without Slurm: torchrun starts one scripts/launch/fairseq_worker.py per GPU or CPU worker.
#
#   scripts/launch/torchrun_train.sh [--nproc-per-node N] [--nnodes N --node-rank R --master-addr HOST
#       [--master-port PORT]] [--max-restarts N] [--shutdown-timeout SECONDS] [-c CONFIG] [--force-config]
#       DATA_DIR SAVE_DIR [fairseq-train options...]
#   scripts/launch/torchrun_train.sh -h|--help
#
# The options of this script go anywhere before DATA_DIR; -c, --force-config, DATA_DIR, SAVE_DIR and the
# fairseq-train options are train.sh's and mean the same.  --nproc-per-node defaults to the number of GPUs, or 1
# without one.  One node: torchrun --standalone (a free local port).  Several nodes: run the same command on
# every node with its --node-rank and the first node's address.  On CPU the workers use gloo (see
# fairseq_worker.py); torchrun sets OMP_NUM_THREADS=1 per worker unless it is set.  SAVE_DIR is locked while the
# run lasts: a second run on it stops at once, naming this one.
#
# The global batch is --max-tokens/--batch-size x processes x --update-freq: 2 processes with --update-freq 1
# train exactly like 1 process with --update-freq 2 (tests/test_distributed.py).
#
# Stopping: SIGTERM or SIGUSR1 to this script (or SIGTERM to torchrun, or SIGUSR1/SIGTERM to the workers) makes
# every worker finish its update, skip a validation that would be due (--eval-rouge decodes the whole split),
# save checkpoint_last.pt and stop; the script then exits with status 75 (resumable), and rerunning the same
# command resumes.  torchrun kills the workers --shutdown-timeout seconds after it passed the signal on (default
# 300; torchrun's own default, 30 s, is shorter than one update and a save of a paper-sized model): give at
# least one update plus one checkpoint write.  A run that reaches its end in the update the signal came in
# validates as usual and exits 0.  --max-restarts N lets torchrun restart failed workers, which then resume
# from checkpoint_last.pt.
#
# Exit status: 0 finished, 75 stopped on a signal with checkpoint_last.pt saved, 2 usage or bad input, else
# failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/launch/common.sh"

nproc="" nnodes=1 node_rank=0 master_addr="" master_port=29500 max_restarts=0 shutdown_timeout=300 training=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) print_usage; exit 0 ;;
        --nproc-per-node) option_value "$@"; nproc="$2"; shift 2 ;;
        --nnodes) option_value "$@"; nnodes="$2"; shift 2 ;;
        --node-rank) option_value "$@"; node_rank="$2"; shift 2 ;;
        --master-addr) option_value "$@"; master_addr="$2"; shift 2 ;;
        --master-port) option_value "$@"; master_port="$2"; shift 2 ;;
        --max-restarts) option_value "$@"; max_restarts="$2"; shift 2 ;;
        --shutdown-timeout) option_value "$@"; shutdown_timeout="$2"; shift 2 ;;
        -c) option_value "$@"; training+=(-c "$2"); shift 2 ;;
        --force-config) training+=(--force-config); shift ;;
        --) shift; break ;;
        -*) unknown_option "$1" ;;
        *) break ;;
    esac
done
[[ "$shutdown_timeout" =~ ^[0-9]+$ ]] || die_input "--shutdown-timeout needs a number of seconds, not '$shutdown_timeout'"
[[ $# -ge 2 ]] || die_input "usage: torchrun_train.sh [launcher options] [-c CONFIG] DATA_DIR SAVE_DIR" \
    "[fairseq-train options] (see --help)"
prepare_training "${training[@]}" "$@"
command -v torchrun >/dev/null || die "torchrun not found (it comes with torch)"
if [[ -z "$nproc" ]]; then
    nproc="$(python -c 'import torch; print(torch.cuda.device_count() or 1)')"
fi
if [[ "$nnodes" -eq 1 ]]; then
    rendezvous=(--standalone)
else
    [[ -n "$master_addr" ]] || die_input "--nnodes $nnodes needs --master-addr (the address of node rank 0)"
    rendezvous=(--nnodes "$nnodes" --node-rank "$node_rank" --master-addr "$master_addr" --master-port "$master_port")
fi
# The workers write this file when they stop on a signal with checkpoint_last.pt saved: torchrun, signalled,
# exits with a status of its own whatever its workers did.
export SUMM_RESUMABLE_FILE="$SAVE_DIR/.stopped_on_signal"
rm -f "$SUMM_RESUMABLE_FILE"
run_forwarding torchrun_train.sh torchrun "${rendezvous[@]}" --nproc-per-node "$nproc" \
    --max-restarts "$max_restarts" --shutdown-timeout "$shutdown_timeout" \
    --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 "$WORKER" "${WORKER_ARGS[@]}"
if [[ -f "$SUMM_RESUMABLE_FILE" ]]; then
    echo "torchrun_train.sh: $(cat "$SUMM_RESUMABLE_FILE"); rerun the same command to resume (exit status 75)" >&2
    rm -f "$SUMM_RESUMABLE_FILE"
    exit 75
fi
[[ $STATUS -eq 0 ]] || die "training failed (torchrun exit status $STATUS${SIGNALLED:+, after SIG$SIGNALLED})"

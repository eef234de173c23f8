#!/usr/bin/env python3
"""One training process of a (possibly) multi-process fairseq-train run, under Slurm's srun or torchrun.

    srun python scripts/launch/fairseq_worker.py DATA/bin --user-dir fairseq_plugins --save-dir SAVE ...
    torchrun --nproc-per-node 2 scripts/launch/fairseq_worker.py DATA/bin --user-dir fairseq_plugins ...

The arguments are fairseq-train's.  The worker adds what fairseq 0.12 needs to join a process group that
somebody else started (it must not spawn, and on CPU must not look for GPUs), then runs fairseq-train in this
process:

- rank, world size, local rank and rendezvous come from torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
  MASTER_PORT) or else from Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the first host of
  SLURM_STEP_NODELIST/SLURM_JOB_NODELIST via `scontrol show hostnames`, port MASTER_PORT or one derived from
  the job id; Slurm's variables count only in a task that srun started, not in the batch script itself).
  With neither, or a world size of 1, it is a plain single-process fairseq-train.
- flags added (unless already given): ``--distributed-init-method env:// --distributed-no-spawn
  --distributed-world-size N --distributed-rank R`` and, on GPU, ``--distributed-backend nccl --device-id
  LOCAL``; on CPU (no GPU, or ``--cpu``) ``--distributed-backend gloo --ddp-backend legacy_ddp --cpu``
  (fairseq's default pytorch_ddp refuses CPU modules).  Also ``--load-checkpoint-on-all-dp-ranks``: by default
  rank 0 loads checkpoint_last.pt and sends it to the other ranks with torch.save/torch.load, and that
  torch.load (safe loading, torch >= 2.6) rejects the omegaconf DictConfig in the loaded state, so a
  multi-process run could not resume; with the flag every rank reads the file itself (safe loading stays on).
- threads: a Slurm task uses SLURM_CPUS_PER_TASK threads unless OMP_NUM_THREADS is set.

Stopping on a signal (preemption).  fairseq-train installs no signal handler: SIGUSR1 or SIGTERM kill it
where it stands and every update since its last checkpoint is lost.  This worker turns SIGUSR1 and SIGTERM
into "finish the current update, save checkpoint_last.pt, stop" (a validation due after that update is skipped
unless the run ends there anyway, so that the save fits in the launcher's shutdown time): every rank
all-reduces a stop flag once per update (one scalar), so all ranks stop after the same update and rank 0 saves
while the others wait.  The
worker then exits with status 75 (EX_TEMPFAIL, "resumable"); the same command resumes from checkpoint_last.pt
(fairseq's default --restore-file) with the same data order and learning-rate schedule.  A run that reaches
its end (--max-update, --max-epoch, patience) exits 0 even when a signal came in its last update.  torchrun and
Slurm signal every process of a worker, its DataLoader processes too: those ignore the stop signals, so that the
worker can still read its batch and save, and are ended when training returns.
"""
import logging
import math
import os
import signal
import socket
import subprocess
import sys

RESUMABLE_EXIT = 75  # EX_TEMPFAIL: stopped on a signal after saving; rerun the same command to resume
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)

logger = logging.getLogger("fairseq_worker")
_stop = {"signal": None, "stopped_early": False}


def _say(message: str) -> None:
    print(f"fairseq_worker: {message}", file=sys.stderr, flush=True)


def _has(args, flag) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in args)


def _first_slurm_host() -> str:
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ["SLURM_JOB_NODELIST"]
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodelist], check=True, capture_output=True,
                           text=True).stdout.split()
    host = hosts[0]
    try:
        socket.getaddrinfo(host, None)
        return host
    except socket.gaierror:  # a NodeName that is not a host name: use the node's NodeAddr
        info = subprocess.run(["scontrol", "show", "node", "-o", host], check=True, capture_output=True,
                              text=True).stdout
        for field in info.split():
            if field.startswith("NodeAddr="):
                return field.split("=", 1)[1]
        raise


def process_group_from_env():
    """(rank, world_size, local_rank) from torchrun or Slurm; sets MASTER_ADDR/MASTER_PORT for env://."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun (it also sets MASTER_ADDR and MASTER_PORT)
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)), "torchrun"
    if "SLURM_STEP_ID" not in env and int(env.get("SLURM_NTASKS", 1)) > 1:
        _say("in a Slurm job but not started by srun: training in this one process (use srun for all tasks)")
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_JOB_ID" in env:
        world_size = int(env["SLURM_NTASKS"])
        if world_size > 1:
            env.setdefault("MASTER_ADDR", _first_slurm_host())
            if "MASTER_PORT" not in env:
                job = int(env["SLURM_JOB_ID"]) + int(env.get("SLURM_ARRAY_TASK_ID", 0) or 0)
                env["MASTER_PORT"] = str(15000 + job % 20000)
        return int(env["SLURM_PROCID"]), world_size, int(env.get("SLURM_LOCALID", 0)), "slurm"
    return 0, 1, 0, "none"


def distributed_flags(args, rank, world_size, local_rank):
    """fairseq-train flags for one process of a group started by someone else (none for a world of 1)."""
    import torch

    if world_size <= 1:
        return []
    flags = []

    def add(flag, *values):
        if not _has(args, flag):
            flags.extend([flag, *values])

    add("--distributed-init-method", "env://")
    add("--distributed-world-size", str(world_size))
    add("--distributed-rank", str(rank))
    for switch in ("--distributed-no-spawn", "--load-checkpoint-on-all-dp-ranks"):
        if not _has(args, switch):
            flags.append(switch)
    gpus = 0 if "--cpu" in args else torch.cuda.device_count()
    if gpus > 0:
        add("--distributed-backend", "nccl")
        add("--device-id", str(local_rank % gpus))  # one GPU per task (e.g. --gpus-per-task=1) -> device 0
    else:
        add("--distributed-backend", "gloo")
        add("--ddp-backend", "legacy_ddp")
        if "--cpu" not in args:
            flags.append("--cpu")
    return flags


def _request_stop(signum, frame):
    if _stop["signal"] is None:
        _stop["signal"] = signum
        os.write(2, f"fairseq_worker: got signal {signal.Signals(signum).name}: saving and stopping after "
                    f"the current update\n".encode())


def ends_by_itself(cfg, trainer) -> bool:
    """Does fairseq-train stop after this update anyway (--max-update, --stop-time-hours)?  Its final validation
    then runs even after a stop signal: the run is finished, not resumed."""
    max_update = cfg.optimization.max_update or math.inf
    hours = trainer.cumulative_training_time() / 3600
    return trainer.get_num_updates() >= max_update or 0 < cfg.optimization.stop_time_hours < hours


def without_validation(original, cfg, *args):
    """fairseq's validate_and_save with validation off for this call: after a stop signal the workers have
    torchrun's --shutdown-timeout (or Slurm's warning time) to save, and a due validation (--eval-rouge decodes
    the whole split) could outlast it; the resumed run validates at its next interval."""
    disabled = cfg.dataset.disable_validation
    cfg.dataset.disable_validation = True
    try:
        logger.info("stop signal: skipping the validation due after this update, saving")
        return original(cfg, *args)
    finally:
        cfg.dataset.disable_validation = disabled


def record_resumable(updates: int) -> None:
    """Rank 0 tells the launcher (torchrun_train.sh, through SUMM_RESUMABLE_FILE) that it stopped on a signal
    with checkpoint_last.pt saved: torchrun, signalled itself, exits with a status of its own."""
    path = os.environ.get("SUMM_RESUMABLE_FILE")
    if path and int(os.environ.get("RANK", 0)) == 0:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(f"stopped on a signal after update {updates}, checkpoint_last.pt saved\n")


def data_workers_ignore_stop_signals():
    """torchrun and Slurm signal a worker's whole process group, which holds its DataLoader processes too; torch
    makes those die on SIGTERM (and SIGUSR1 kills by default), and the training process then fails on its next
    batch before it can save.  Only the training process stops on these signals: its data loaders (forked, so
    they inherit this patch) ignore them, and ``end_data_workers`` ends them when training returns."""
    from torch.utils.data._utils import signal_handling

    set_torch_handlers = signal_handling._set_worker_signal_handlers

    def set_handlers(*args, **kwargs):
        set_torch_handlers(*args, **kwargs)
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)

    signal_handling._set_worker_signal_handlers = set_handlers


def end_data_workers() -> None:
    """Kill the DataLoader processes still alive (an epoch left part-way on a stop signal): they ignore SIGTERM,
    so multiprocessing's exit handler, which terminates and then joins them, would wait for ever.  torch's
    SIGCHLD handler would report their deaths as a failure, so it is reset first."""
    import multiprocessing

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for child in multiprocessing.active_children():
        child.kill()
        child.join()


def install_stop_on_signal():
    """Make fairseq-train save checkpoint_last.pt and stop, on every rank together, after a stop signal."""
    from fairseq_cli import train as fairseq_train  # first: it sets up fairseq-train's logging (to stdout)

    import torch
    from fairseq import checkpoint_utils
    from fairseq.distributed import utils as distributed_utils

    original = fairseq_train.validate_and_save

    def stop_requested_anywhere(trainer) -> bool:
        flag = torch.tensor([1.0 if _stop["signal"] is not None else 0.0], device=trainer.device)
        if trainer.data_parallel_world_size > 1:
            flag = distributed_utils.all_reduce(flag, trainer.data_parallel_process_group, op="max")
        return bool(flag.item() > 0)

    def validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        requested = stop_requested_anywhere(trainer)  # collective: every rank calls it once per update
        if requested and not ends_by_itself(cfg, trainer):
            valid_losses, should_stop = without_validation(original, cfg, trainer, task, epoch_itr, valid_subsets,
                                                           end_of_epoch)
        else:
            valid_losses, should_stop = original(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        if not requested or should_stop:  # should_stop: the run ended by itself and has saved
            return valid_losses, should_stop
        updates = trainer.get_num_updates()
        saved_by_fairseq = (end_of_epoch and epoch_itr.epoch % cfg.checkpoint.save_interval == 0) or (
            cfg.checkpoint.save_interval_updates > 0 and updates > 0
            and updates % cfg.checkpoint.save_interval_updates == 0
            and updates >= cfg.dataset.validate_after_updates)
        if not saved_by_fairseq:
            checkpoint_utils.save_checkpoint(cfg.checkpoint, trainer, epoch_itr, valid_losses[0])
        logger.info(f"stopped on a signal after update {updates}; checkpoint saved, run the same command to "
                    f"resume (exit status {RESUMABLE_EXIT})")
        _stop["stopped_early"] = True
        record_resumable(updates)
        return valid_losses, True

    fairseq_train.validate_and_save = validate_and_save
    data_workers_ignore_stop_signals()
    for signum in STOP_SIGNALS:
        signal.signal(signum, _request_stop)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rank, world_size, local_rank, source = process_group_from_env()
    if source == "slurm" and "OMP_NUM_THREADS" not in os.environ and os.environ.get("SLURM_CPUS_PER_TASK"):
        import torch

        torch.set_num_threads(int(os.environ["SLURM_CPUS_PER_TASK"]))
    args += distributed_flags(args, rank, world_size, local_rank)
    if world_size > 1:
        _say(f"rank {rank}/{world_size} (local {local_rank}, from {source}), rendezvous "
             f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
    install_stop_on_signal()
    from fairseq_cli import train as fairseq_train

    sys.argv = ["fairseq-train", *args]
    try:
        fairseq_train.cli_main()
    finally:
        end_data_workers()
    if _stop["stopped_early"]:
        return RESUMABLE_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())

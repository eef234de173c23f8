"""compare.py --launcher slurm: the Slurm side (options, sbatch, job states, the job ids a table submitted).

compare.py decides what to submit; this module only talks to Slurm.  The ids live in WORK/slurm_jobs.json
(``step -> job id``), so a later invocation knows which of its jobs are still queued or running.  A job's state
comes from ``scontrol show job`` (no accounting database needed); a job Slurm has forgotten (after its
MinJobAge) counts as ended, and compare.py then judges it by what it left in WORK.
"""
import argparse
import json
import shlex
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

JOBS = "slurm_jobs.json"
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
          "SUSPENDED", "SIGNALING", "STAGE_OUT"}  # queued or running: never resubmitted


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("launcher")
    group.add_argument("--launcher", choices=("local", "slurm"), default="local",
                       help="local: every step here, one after another; slurm: one training job per system "
                            "(scripts/slurm/train.sbatch, requeued on preemption), a decoding job after it, the "
                            "table after all; returns at once, and run again it reports progress")
    group.add_argument("--partition", help="sbatch --partition of every job")
    group.add_argument("--account", help="sbatch --account of every job")
    group.add_argument("--time", help="sbatch --time of every job (a training job requeues itself at its limit)")
    group.add_argument("--gpus", type=int, default=0,
                       help="GPUs of a training job: one task per GPU (default 0: one CPU task)")
    group.add_argument("--sbatch-args", default="", metavar='"OPTIONS"', help="more sbatch options, one string")
    group.add_argument("--step", help=argparse.SUPPRESS)  # inside a job: prepare, system:LABEL or table


def passthrough(args) -> List[str]:
    """The launcher options of ``args`` as compare.py's command line (for the scripts built on compare.py)."""
    options = ["--launcher", args.launcher, "--gpus", str(args.gpus)]
    for flag, value in (("--partition", args.partition), ("--account", args.account), ("--time", args.time),
                        ("--sbatch-args", args.sbatch_args)):
        if value:
            options += [flag, value]
    return options


def common_options(args) -> List[str]:
    """sbatch options of every job of the table."""
    options = []
    for flag, value in (("--partition", args.partition), ("--account", args.account), ("--time", args.time)):
        if value:
            options += [flag, value]
    return options + shlex.split(args.sbatch_args)


def training_options(args) -> List[str]:
    """sbatch options of a training job: one task per GPU, or one CPU task with --threads cores."""
    if args.gpus > 0:
        return ["--nodes", "1", "--ntasks-per-node", str(args.gpus), "--gpus-per-task", "1"]
    return ["--nodes", "1", "--ntasks-per-node", "1", "--cpus-per-task", str(max(args.threads, 1))]


def sbatch(options: List[str], env: dict) -> str:
    """Submit; returns the job id (sbatch --parsable)."""
    result = subprocess.run(["sbatch", "--parsable", *options], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"sbatch {shlex.join(options)} failed: {result.stderr.strip()}")
    return result.stdout.strip().split(";")[0]


def dependency(kind: str, jobs: List[str]) -> List[str]:
    jobs = [job for job in jobs if job]
    return [f"--dependency={kind}:{':'.join(jobs)}"] if jobs else []


def job_state(job: str, env: dict) -> Optional[str]:
    """Slurm's JobState of a job, None when Slurm does not know it (any more)."""
    result = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True, text=True)
    for field in result.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return None


class Jobs:
    """The job ids of a table's steps (WORK/slurm_jobs.json) and their states."""

    def __init__(self, work: Path, env: dict):
        self.path = work / JOBS
        self.env = env
        self.ids: Dict[str, str] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def active(self, step: str) -> Optional[str]:
        """The job id of ``step`` when that job is queued or running, else None."""
        job = self.ids.get(step)
        return job if job and job_state(job, self.env) in ACTIVE else None

    def state(self, step: str) -> str:
        job = self.ids.get(step)
        return f"job {job} {job_state(job, self.env) or 'ended'}" if job else "never submitted"

    def record(self, step: str, job: str) -> str:
        self.ids[step] = job
        self.path.write_text(json.dumps(self.ids, indent=1) + "\n")
        return job

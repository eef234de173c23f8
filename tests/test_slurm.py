"""The sbatch scripts of scripts/slurm/, on a real single-node Slurm started by scripts/slurm/local_cluster.sh.

1. train.sbatch: a 2-task job trains with world size 2 (gloo) and finishes its updates;
2. the same job signalled with SIGUSR1 (as --signal=B:USR1@... does before a time limit) saves, requeues itself
   and resumes from checkpoint_last.pt: updates 1..N each logged exactly once, and the same losses as the
   uninterrupted job;
3. generate_array.sbatch as a 2-task array with trigram blocking, then merge_and_score.sbatch (afterok): one
   summary per document in the input's order, and official ROUGE.
The cluster is stopped in the fixture's finalizer, even when a test fails; `stop` kills only its own daemons.
Jobs are judged by JobState=COMPLETED (sbatch's own exit status says little, see NOTES).  Skipped, with the
reason, only where Slurm is missing and cannot be installed (no root or no apt-get).
"""
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, command_env, run
from test_distributed import TINY, assert_same_updates, prepare_data, train_updates

pytestmark = pytest.mark.slow  # every test runs Slurm jobs

CLUSTER = ROOT / "scripts" / "slurm" / "local_cluster.sh"
SLURM = ROOT / "scripts" / "slurm"
SLURM_PROGRAMS = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "munged")


def _cannot_install_reason():
    if all(shutil.which(p) or os.path.exists(f"/usr/sbin/{p}") for p in SLURM_PROGRAMS):
        return None if os.geteuid() == 0 else "the local Slurm cluster's daemons must run as root"
    if os.geteuid() != 0:
        return "Slurm is not installed and installing it needs root"
    if not shutil.which("apt-get"):
        return "Slurm is not installed and this machine has no apt-get to install it"
    return None


@pytest.fixture(scope="module")
def cluster():
    reason = _cannot_install_reason()
    if reason:
        print(f"SKIP test_slurm: {reason}")
        pytest.skip(reason)
    # Short path under /tmp: munged's socket lives there and must be reachable by everyone.
    directory = Path(tempfile.mkdtemp(prefix="summ-slurm-", dir="/tmp"))
    started = subprocess.run(["bash", CLUSTER, "start", directory], capture_output=True, text=True, timeout=300)
    try:
        if started.returncode != 0 and "apt-get" in started.stderr and "failed" in started.stderr:
            print(f"SKIP test_slurm: Slurm could not be installed: {started.stderr.strip()}")
            pytest.skip(f"Slurm could not be installed: {started.stderr.strip()}")
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"export SLURM_CONF={directory}/slurm.conf"
        yield directory, command_env(SLURM_CONF=str(directory / "slurm.conf"))
    finally:
        subprocess.run(["bash", CLUSTER, "stop", directory], capture_output=True, text=True, timeout=120)
        shutil.rmtree(directory, ignore_errors=True)


def job_fields(job: str, slurm_env: dict) -> list:
    """`scontrol show job -o` as dicts, one per job record (an array job has one per task)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job], env=slurm_env, capture_output=True, text=True)
    records = []
    for line in out.stdout.splitlines():
        records.append(dict(field.split("=", 1) for field in line.split() if "=" in field))
    return records


def wait_for(job: str, slurm_env: dict, timeout: float = 900) -> list:
    """Wait until every record of the job is in a final state; return the records.  The timeout is a safety net
    for a hung job: with other jobs on the 2 cores a 6-update 2-task training job took 4.5 minutes."""
    final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}
    deadline = time.time() + timeout
    while time.time() < deadline:
        records = job_fields(job, slurm_env)
        if records and all(r.get("JobState") in final or r.get("Reason") == "DependencyNeverSatisfied"
                           for r in records):
            return records
        time.sleep(1)
    raise AssertionError(f"job {job} not finished after {timeout} s: {job_fields(job, slurm_env)}")


def sbatch(slurm_env: dict, *args) -> str:
    result = run(["sbatch", "--parsable", *args], env=slurm_env)
    return result.stdout.strip().split(";")[0]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


@pytest.fixture(scope="module")
def data(cluster, tmp_path_factory):
    return prepare_data(tmp_path_factory.mktemp("slurm"), test=7)


@pytest.fixture(scope="module")
def trained(cluster, data, tmp_path_factory):
    """An uninterrupted 2-task training job of 6 updates: (save dir, log text, job records)."""
    _, slurm_env = cluster
    work = tmp_path_factory.mktemp("train")
    log = work / "train.log"
    job = sbatch(slurm_env, "--output", log, SLURM / "train.sbatch", data, work / "model", *TINY, "--max-update", "6")
    records = wait_for(job, slurm_env)
    return work / "model", read(log), records


def test_two_task_training_job(trained):
    save, log, records = trained
    assert records[0]["JobState"] == "COMPLETED" and records[0]["ExitCode"] == "0:0", (records, log[-3000:])
    assert records[0]["NumTasks"] == "2"
    assert "rank 0/2 (local 0, from slurm)" in log and "rank 1/2 (local 1, from slurm)" in log
    assert "training on 2 devices" in log  # fairseq's own word: distributed world size 2
    assert "distributed init (rank 0)" in log
    assert [u["num_updates"] for u in train_updates(log)] == [1, 2, 3, 4, 5, 6]
    assert re.search(r"Saved checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ 6 updates", log)
    assert (save / "checkpoint_last.pt").is_file() and (save / "prep.json").is_file()


def test_signalled_job_saves_requeues_and_resumes(cluster, data, trained, tmp_path):
    _, slurm_env = cluster
    log = tmp_path / "train.log"
    job = sbatch(slurm_env, "--output", log, SLURM / "train.sbatch", data, tmp_path / "model", *TINY,
                 "--max-update", "10")
    deadline = time.time() + 600
    while "num_updates=2," not in read(log):  # training is under way
        assert time.time() < deadline, read(log)[-3000:]
        assert job_fields(job, slurm_env)[0]["JobState"] in ("PENDING", "RUNNING"), read(log)[-3000:]
        time.sleep(0.2)
    # What Slurm does before a time limit with --signal=B:USR1@SECS: SIGUSR1 to the batch shell only.
    run(["scancel", "--signal=USR1", "--batch", job], env=slurm_env)
    record = wait_for(job, slurm_env)[0]
    text = read(log)
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0", (record, text[-3000:])
    assert record["Restarts"] == "1"  # requeued once by the script itself
    assert "got SIGUSR1" in text and "requeueing job" in text and f"Job {job}, run 2" in text

    stopped = re.search(r"stopped on a signal after update (\d+)", text)
    assert stopped, text[-3000:]
    k = int(stopped.group(1))
    assert 2 <= k < 10
    assert re.search(rf"Saved checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ {k} updates", text)
    first_run, second_run = text.split(f"Job {job}, run 2")
    assert re.search(rf"Loaded checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ {k} updates\)", second_run)
    # No update lost and none repeated: 1..k in the first run, k+1..10 in the second.
    assert [u["num_updates"] for u in train_updates(first_run)] == list(range(1, k + 1))
    assert [u["num_updates"] for u in train_updates(second_run)] == list(range(k + 1, 11))
    # And the resumed training is the uninterrupted one: same batches, same losses.
    _, uninterrupted, _ = trained
    assert_same_updates(train_updates(text)[:6], train_updates(uninterrupted))


def test_generation_array_then_merge_in_order_with_rouge(cluster, data, trained, tmp_path):
    _, slurm_env = cluster
    save, _, _ = trained
    docs, refs = tmp_path / "docs.txt", tmp_path / "refs.txt"
    shutil.copy(data.parent / "raw" / "test.src", docs)  # 7 raw documents: shards of 3 and 4
    shutil.copy(data.parent / "raw" / "test.tgt", refs)
    fast = ["--beam", "2", "--max-len-b", "15", "--batch-size", "1",  # batch 1: no batch-composition effects
            "--block-ngram-repeat", "3"]  # the project's generator options reach every shard
    out = tmp_path / "shards"
    array = sbatch(slurm_env, "--array=0-1", "--output", tmp_path / "gen-%a.log", SLURM / "generate_array.sbatch",
                   "--input", docs, "--out-dir", out, "--checkpoint", "checkpoint_last.pt", data, save, *fast)
    merge = sbatch(slurm_env, f"--dependency=afterok:{array}", "--output", tmp_path / "merge.log",
                   SLURM / "merge_and_score.sbatch", "--input", docs, "--out-dir", out,
                   "--output", tmp_path / "merged.sum", "--refs", refs)
    # Meanwhile, the reference: the whole file summarized at once, outside Slurm.
    reference = subprocess.Popen(["./generate.sh", "--input", str(docs), "--checkpoint", "checkpoint_last.pt",
                                  str(data), str(save), *fast], cwd=ROOT, env=command_env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    shard_records = wait_for(array, slurm_env)
    merge_record = wait_for(merge, slurm_env)[0]
    reference_out, reference_err = reference.communicate(timeout=300)
    logs = "\n".join(read(tmp_path / name) for name in ("gen-0.log", "gen-1.log", "merge.log"))
    assert sorted(r["ArrayTaskId"] for r in shard_records) == ["0", "1"]
    assert all(r["JobState"] == "COMPLETED" for r in shard_records), (shard_records, logs[-4000:])
    assert merge_record["JobState"] == "COMPLETED", (merge_record, logs[-4000:])
    assert reference.returncode == 0, reference_err[-3000:]

    shard0 = (out / "shard-0.tsv").read_text(encoding="utf-8").splitlines()
    shard1 = (out / "shard-1.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in shard0 + shard1] == [str(i) for i in range(7)]
    merged = (tmp_path / "merged.sum").read_text(encoding="utf-8").split("\n")
    assert merged[-1] == "" and len(merged) - 1 == 7  # one summary line per input document
    assert merged[:-1] == reference_out.split("\n")[:-1]  # ... in the input's order
    assert merged[:-1] == [line.split("\t", 1)[1] for line in shard0 + shard1]
    assert re.search(r"ROUGE-1\s.*\d+\.\d+", read(tmp_path / "merge.log")), read(tmp_path / "merge.log")[-2000:]


def test_stop_kills_only_its_own_daemons(cluster):
    directory, slurm_env = cluster
    pids = {name: int((directory / "run" / f"{name}.pid").read_text()) for name in ("munged", "slurmctld", "slurmd")}
    bystander = subprocess.Popen(["sleep", "120"])  # an unrelated process that must survive
    try:
        stopped = subprocess.run(["bash", CLUSTER, "stop", directory], capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        for name, pid in pids.items():
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"{name} (pid {pid}) still runs"
        assert bystander.poll() is None
        status = subprocess.run(["bash", CLUSTER, "status", directory], capture_output=True, text=True)
        assert status.returncode == 1 and "slurmctld: not running" in status.stdout
    finally:
        bystander.kill()
        bystander.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True

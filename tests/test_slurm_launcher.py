"""compare.py --launcher slurm on the real one-node Slurm of scripts/slurm/local_cluster.sh (test_slurm.py's
cluster fixture): a two-system tiny table gives the local launcher's ROUGE; a training job signalled as before a
time limit (scancel --signal=USR1 --batch) requeues itself and the table still completes; running the command
again while the jobs run, and after they finished, submits nothing."""
import json
import re
import sys
import time

import pytest

from conftest import ROOT, run, slice_corpus
from test_slurm import cluster, job_fields, read, wait_for  # noqa: F401  (cluster: the shared fixture)

pytestmark = pytest.mark.slow  # Slurm jobs and training runs

TINY = "--encoder-embed-dim 16 --decoder-embed-dim 16 --encoder-hidden-size 16 --decoder-hidden-size 16 " \
       "--log-interval 1 --max-tokens 1000 --dropout 0"
SYSTEMS = ["--variant", f"copy scitldr_small {TINY}", "--variant", f"no_copy scitldr_small {TINY} --no-copy"]
DECODE = ["--decode", "greedy --beam 1 --max-len-b 12 --batch-size 8"]


def table(raw, work, *launcher):
    return [sys.executable, ROOT / "scripts" / "experiments" / "compare.py", "--name", "tiny", "--corpus", "raw",
            "--raw", raw, "--config", "scitldr_small", "--updates", "60", *SYSTEMS, *DECODE, "--work", work,
            *launcher]


def rouge_rows(work) -> dict:
    rows = json.loads((work / "results.json").read_text())["rows"]
    return {row["system"]: row["rouge"] for row in rows}


def test_slurm_table_equals_local_survives_a_requeue_and_never_resubmits(cluster, tmp_path):  # noqa: F811
    _, slurm_env = cluster
    raw = slice_corpus("scitldr", tmp_path / "raw", (("train", 60), ("valid", 8), ("test", 6)))
    local = tmp_path / "local"
    run(table(raw, local), timeout=1800)  # minutes on a quiet machine; with the cores shared, many more

    work = tmp_path / "slurm"
    first = run(table(raw, work, "--launcher", "slurm"), env=slurm_env)
    submitted = re.findall(r"(\S+): submitted job (\d+)", first.stdout)
    assert [step for step, _ in submitted] == ["prepare", "train:copy", "decode:copy", "train:no_copy",
                                               "decode:no_copy", "table"], first.stdout
    jobs = dict(submitted)
    again = run(table(raw, work, "--launcher", "slurm"), env=slurm_env)
    assert "submitted" not in again.stdout and "queued or running" in again.stdout, again.stdout

    log = work / "logs" / "train_no_copy.log"
    deadline = time.time() + 600
    while "num_updates=3," not in read(log):  # training is under way
        assert time.time() < deadline, read(log)[-3000:]
        time.sleep(0.05)
    run(["scancel", "--signal=USR1", "--batch", jobs["train:no_copy"]], env=slurm_env)
    done = wait_for(jobs["table"], slurm_env, timeout=1800)[0]
    text = read(log)
    assert done["JobState"] == "COMPLETED", (done, read(work / "logs" / "slurm_table.log")[-3000:])
    assert "requeueing job" in text and f"Job {jobs['train:no_copy']}, run 2" in text
    assert job_fields(jobs["train:no_copy"], slurm_env)[0]["Restarts"] == "1"

    assert rouge_rows(work) == rouge_rows(local)  # same seeds, threads and batches: the same figures ...
    for system in ("copy", "no_copy"):  # ... from the same summaries, the requeued system's included
        assert read(work / "outputs" / f"{system}.greedy.txt") == read(local / "outputs" / f"{system}.greedy.txt")
    header = (work / "results.md").read_text()
    assert "| no_copy |" in header
    made = r"^Made at commit \S+ on \d{4}-\d\d-\d\d \d\d:\d\d UTC: .*logical CPUs; .*fairseq-fixed \S+, torch"
    assert re.search(made, header, flags=re.M), header[:600]
    finished = run(table(raw, work, "--launcher", "slurm"), env=slurm_env)
    assert "submitted" not in finished.stdout and finished.stdout.count(": finished (") == 2, finished.stdout


def test_a_failed_system_is_marked_in_the_table_with_its_log(cluster, tmp_path):  # noqa: F811
    _, slurm_env = cluster
    raw = slice_corpus("scitldr", tmp_path / "raw", (("train", 30), ("valid", 5), ("test", 4)))
    work = tmp_path / "slurm"
    command = table(raw, work, "--launcher", "slurm")
    command[command.index(SYSTEMS[3])] = f"broken scitldr_small {TINY} --no-such-option"
    first = run(command, env=slurm_env)
    jobs = dict(re.findall(r"(\S+): submitted job (\d+)", first.stdout))
    assert wait_for(jobs["table"], slurm_env, timeout=1800)[0]["JobState"] == "COMPLETED"
    results = (work / "results.md").read_text()
    assert f"| broken | **failed**: see `{work / 'logs' / 'train_broken.log'}` |" in results
    assert re.search(r"\| copy \| greedy \| \d+\.\d\d \|", results)  # the finished row is kept
    again = run(command, env=slurm_env)
    assert re.search(r"broken: FAILED .*log \S+train_broken\.log\): submitting it again", again.stdout)
    assert "copy: finished" in again.stdout

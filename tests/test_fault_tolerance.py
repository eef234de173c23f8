"""Fault tolerance of training: kill -9 and restart, atomicity of checkpoint writes, checkpoint averaging.

What fairseq 0.12 (fairseq-fixed) does, and what these tests prove:
- Restarting the same fairseq-train command resumes from SAVE_DIR/checkpoint_last.pt (model, optimizer, lr
  schedule, position in the epoch) and the updates after the resume point are the uninterrupted run's: the
  data order depends only on seed and epoch, and every update reseeds with seed + num_updates.  Updates done
  after the last checkpoint are redone, not lost: with --save-interval-updates N at most N-1 are redone.
- checkpoint_utils.torch_persistent_save is atomic (NAME.tmp, then os.rename): a kill during it leaves the
  previous file intact.
- But save_checkpoint writes only the first file of a save that way; the others, checkpoint_last.pt included
  whenever checkpoint_E_U.pt / checkpointE.pt / checkpoint_best.pt is written too, are copies made with
  PathManager.copy = shutil.copyfile into the final name.  A kill -9 during that copy leaves a truncated
  checkpoint_last.pt and the next run cannot start.  scripts/launch/checkpoint_guard.py (run by the
  multi-process launchers) puts the newest complete checkpoint back in its place.
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, command_env, run
from test_distributed import TINY, assert_same_updates, load_checkpoint, prepare_data, train_updates

pytestmark = pytest.mark.slow  # every test trains and kills fairseq-train

SAVED = re.compile(r"Saved checkpoint \S+ \(epoch \d+ @ (\d+) updates")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return prepare_data(tmp_path_factory.mktemp("fault"))


def start(cmd, log: Path = None) -> subprocess.Popen:
    """A command in its own process group (so kill -9 reaches train.sh and fairseq-train), output merged:
    to a pipe, or to LOG (a pipe nobody reads would fill up and block the writer)."""
    out = subprocess.PIPE if log is None else log.open("a")
    return subprocess.Popen([str(c) for c in cmd], cwd=ROOT, env=command_env(), stdout=out, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def kill9(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """An uninterrupted run of 8 updates saving every 3: (save dir, per-update log)."""
    save = tmp_path_factory.mktemp("reference") / "model"
    result = run(["./train.sh", data, save, *TINY, "--max-update", "8", "--save-interval-updates", "3"])
    return save, train_updates(result.stdout + result.stderr)  # train.sh logs to stderr


def test_kill_9_then_same_command_resumes_like_an_uninterrupted_run(data, reference, tmp_path):
    command = ["./train.sh", data, tmp_path / "model", *TINY, "--max-update", "8", "--save-interval-updates", "3"]
    first = start(command)
    log, saved = [], []
    for line in first.stdout:  # kill once a mid-epoch checkpoint exists and training went past it
        log.append(line)
        saved += [int(n) for n in SAVED.findall(line)]
        if saved and f"num_updates={saved[-1] + 1}," in line:
            kill9(first)
            break
    assert first.returncode == -signal.SIGKILL, "".join(log)[-3000:]
    k = saved[-1]
    done_before_kill = train_updates("".join(log))
    assert done_before_kill[-1]["num_updates"] > k  # there was work after the last checkpoint

    second = run(command)
    second_log = second.stdout + second.stderr
    assert re.search(rf"Loaded checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ {k} updates\)", second_log)
    resumed = train_updates(second_log)
    assert [u["num_updates"] for u in resumed] == list(range(k + 1, 9))  # nothing lost: k+1..8
    _, uninterrupted = reference
    assert_same_updates(resumed, uninterrupted[k:])  # ... and the same updates as without the kill
    # The updates done after the checkpoint and before the kill were redone, identically.
    assert_same_updates(done_before_kill[k:], uninterrupted[k:len(done_before_kill)])


WRITER = """
import sys, torch
from fairseq.checkpoint_utils import torch_persistent_save
path = sys.argv[1]
state = {"model": {"embed": torch.randn(24_000_000)}, "marker": 0}  # about 96 MB, like a large embedding
for marker in range(10_000):
    state["marker"] = marker
    torch_persistent_save(state, path)
    print(marker, flush=True)
"""


def _kill_writer_part_way(path: Path, fraction: float):
    """Start WRITER, let it save once, kill -9 it when the next save's NAME.tmp holds FRACTION of a file.
    Returns (full size, markers it reported saved, whether the kill landed during a write)."""
    tmp = Path(str(path) + ".tmp")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT, env=command_env(),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert writer.stdout.readline().strip() == "0"  # one complete checkpoint exists
        full = path.stat().st_size
        deadline = time.time() + 60
        while time.time() < deadline:
            size = tmp.stat().st_size if tmp.exists() else 0
            if size >= fraction * full:
                break
        kill9(writer)
    finally:
        if writer.poll() is None:
            kill9(writer)
    completed = [0] + [int(line) for line in writer.stdout.read().split()]
    return full, completed, tmp.exists() and tmp.stat().st_size < full


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_kill_9_during_torch_persistent_save_keeps_the_last_good_checkpoint(tmp_path, fraction):
    """fairseq's own save function, killed at a given fraction of a write: the previous checkpoint survives."""
    path = tmp_path / "checkpoint_last.pt"
    for _ in range(3):  # on a busy machine the kill may land just after a write: then try again
        full, completed, killed_mid_write = _kill_writer_part_way(path, fraction)
        if killed_mid_write:
            break
    assert killed_mid_write, "the kill never landed during a write"
    state = load_checkpoint(path)  # loads: never half-written
    assert state["marker"] == completed[-1]  # the last save that completed
    assert state["model"]["embed"].numel() == 24_000_000


def _kill_during_copy_to_checkpoint_last(command, save: Path, attempts=3):
    """Run fairseq-train saving every update; kill -9 while checkpoint_last.pt is being copied (it shrinks)."""
    last = save / "checkpoint_last.pt"
    for attempt in range(attempts):
        trainer = start(command, save.parent / f"train-{attempt}.log")
        full, size = 0, 0
        deadline = time.time() + 240
        try:
            while time.time() < deadline and trainer.poll() is None:
                size = last.stat().st_size if last.exists() else 0
                if full and 0 < size < full:  # truncated in place and being rewritten: shutil.copyfile
                    kill9(trainer)
                    break
                full = max(full, size)
        finally:
            if trainer.poll() is None:
                kill9(trainer)
        if last.exists() and last.stat().st_size < full:
            return full
    raise AssertionError(f"never caught a copy to checkpoint_last.pt in {attempts} runs")


def test_kill_9_during_the_copy_to_checkpoint_last_truncates_it_and_the_guard_repairs_it(data, tmp_path):
    save = tmp_path / "model"
    big = ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024"]  # checkpoints of about 150 MB
    command = ["./train.sh", data, save, *TINY, *big, "--save-interval-updates", "1", "--keep-interval-updates", "1",
               "--max-update", "40"]
    full = _kill_during_copy_to_checkpoint_last(command, save)
    last = save / "checkpoint_last.pt"
    assert 0 < last.stat().st_size < full  # fairseq left a half-written checkpoint_last.pt in place
    with pytest.raises(Exception):
        load_checkpoint(last)
    # fairseq-train itself would die loading it; train.sh first runs the guard, which puts back the newest
    # complete checkpoint, and training resumes from there.
    interval = sorted(save.glob("checkpoint_1_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    newest = int(interval[-1].stem.split("_")[-1])  # written atomically before the copy began
    resumed = run(command[:-2] + ["--max-update", str(newest + 1)])
    assert f"restored checkpoint_last.pt from checkpoint_1_{newest}.pt ({newest} updates)" in resumed.stderr
    assert (save / "checkpoint_last.pt.corrupt").exists()
    resumed_log = resumed.stdout + resumed.stderr
    assert re.search(rf"Loaded checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ {newest} updates\)", resumed_log)
    assert [u["num_updates"] for u in train_updates(resumed_log)] == [newest + 1]
    # A complete checkpoint_last.pt is left alone.
    again = run([sys.executable, "scripts/launch/checkpoint_guard.py", save])
    assert "restored" not in again.stderr


def test_average_last_checkpoints_and_generate_with_the_average(data, reference, tmp_path):
    import torch

    save, _ = reference  # checkpoint_1_3.pt and checkpoint_1_6.pt, then checkpoint_last.pt at 8 updates
    averaged = tmp_path / "averaged.pt"
    result = run([sys.executable, "scripts/average_checkpoints.py", "--save-dir", save, "--last", "2",
                  "--output", averaged])
    assert "checkpoint_1_3.pt" in result.stderr and "checkpoint_1_6.pt" in result.stderr
    a = load_checkpoint(save / "checkpoint_1_3.pt")["model"]
    b = load_checkpoint(save / "checkpoint_1_6.pt")["model"]
    mean = load_checkpoint(averaged)
    for name, tensor in mean["model"].items():
        assert torch.allclose(tensor, (a[name].double() + b[name].double()).div(2).to(tensor.dtype), atol=1e-7)
    assert not torch.equal(mean["model"][next(iter(a))], a[next(iter(a))])
    generated = run(["fairseq-generate", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task",
                     "summarization", "--path", averaged, "--gen-subset", "test", "--beam", "2", "--max-len-b", "10",
                     "--batch-size", "8"])
    assert len(re.findall(r"^H-\d+\t", generated.stdout, flags=re.M)) == 25


def test_plain_fairseq_train_dies_on_sigusr1_without_saving(data, tmp_path):
    """Why the launchers run fairseq_worker.py: fairseq-train installs no handler for Slurm's warning signal."""
    save = tmp_path / "model"
    trainer = start(["./train.sh", data, save, *TINY, "--max-update", "50"])
    log = []
    for line in trainer.stdout:
        log.append(line)
        if "num_updates=2," in line:
            os.killpg(trainer.pid, signal.SIGUSR1)
            break
    log.append(trainer.stdout.read())
    trainer.wait(timeout=60)
    assert trainer.returncode == -signal.SIGUSR1 or trainer.returncode == 128 + signal.SIGUSR1
    assert "Saved checkpoint" not in "".join(log)
    assert not (save / "checkpoint_last.pt").exists()  # the 2+ updates done are lost


# A DataLoader in a process that stops on signals as fairseq_worker.py makes it: its loader processes (two,
# slowed so that they are alive when the signal comes) get the group-wide SIGTERM that torchrun and Slurm send.
_LOADER_UNDER_A_GROUP_SIGNAL = """
import os, signal, sys, time
import torch
from scripts.launch import fairseq_worker

class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 40
    def __getitem__(self, index):
        time.sleep(0.02)
        return index

fairseq_worker.data_workers_ignore_stop_signals()
signal.signal(signal.SIGTERM, lambda signum, frame: print("stop requested", flush=True))
seen = []
try:
    for batch in torch.utils.data.DataLoader(Slow(), batch_size=2, num_workers=2):
        seen += batch.tolist()
        if len(seen) == 2:
            os.killpg(0, signal.SIGTERM)  # the whole process group, loader processes included
    print("items", seen == list(range(40)), flush=True)
finally:
    fairseq_worker.end_data_workers()
"""


def test_data_loader_processes_outlive_a_group_sigterm_so_the_training_process_can_save(tmp_path):
    process = subprocess.run([sys.executable, "-c", _LOADER_UNDER_A_GROUP_SIGNAL], cwd=ROOT, env=command_env(),
                             capture_output=True, text=True, timeout=120, start_new_session=True)
    assert process.returncode == 0, process.stderr[-2000:]
    assert "stop requested" in process.stdout and "items True" in process.stdout

"""Two runs never write one folder: train.sh and the launchers lock the checkpoint folder (scripts/launch/
common.sh's hold_lock), compare.py the table's work folder (scripts/experiments/lib.py's hold_lock).  A second
run stops at once naming the holder; a killed holder's lock is gone (flock(2) dies with its process)."""
import signal
import socket
import subprocess
import sys

import pytest

from conftest import ROOT, command_env, run

pytestmark = pytest.mark.slow  # each test starts the scripts


HOLD = 'ROOT="$PWD"; source scripts/launch/common.sh; hold_lock "$1" training SAVE_DIR'  # what train.sh runs


def start_holder(code: list) -> subprocess.Popen:
    """A process that takes a lock, prints 'locked' and sleeps; returned once it holds the lock."""
    holder = subprocess.Popen(code, cwd=ROOT, env=command_env(), stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def kill(holder: subprocess.Popen) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()


def fake_data(tmp_path):
    """A data folder train.sh accepts up to fairseq-train (which then fails on its empty dictionary)."""
    (tmp_path / "data" / "bin").mkdir(parents=True)
    (tmp_path / "data" / "bin" / "dict.src.txt").write_text("")
    return tmp_path / "data"


@pytest.mark.parametrize("launcher", ["train.sh", "scripts/launch/torchrun_train.sh"])
def test_a_second_training_in_a_locked_save_dir_stops_naming_the_holder(tmp_path, launcher):
    data, save = fake_data(tmp_path), tmp_path / "model"
    save.mkdir()
    holder = start_holder(["bash", "-c", HOLD + "; echo locked; sleep 120", "_", str(save)])
    try:
        refused = run([ROOT / launcher, data, save, "--max-update", "1"], check=False)
    finally:
        kill(holder)
    assert refused.returncode == 1
    assert f"{save} is locked by another training" in refused.stderr
    assert f"host {socket.gethostname()}, pid {holder.pid}, since " in refused.stderr
    assert "give another SAVE_DIR" in refused.stderr
    assert sorted(p.name for p in save.iterdir()) == [".lock"]  # nothing written into the holder's folder

    after = run(["bash", "-c", HOLD + "; echo taken", "_", save])  # the killed holder's lock is gone
    assert after.stdout.strip() == "taken"
    assert f"pid {holder.pid}," not in (save / ".lock").read_text()  # the file names the latest holder


def test_a_second_table_in_a_locked_work_folder_stops_naming_the_holder(tmp_path):
    work = tmp_path / "work"
    holder = start_holder([sys.executable, "-c", "import time; from pathlib import Path; "
                           "from scripts.experiments.lib import hold_lock; "
                           f"hold_lock(Path({str(work)!r}), 'table'); print('locked', flush=True); time.sleep(120)"])
    try:
        refused = run([sys.executable, "scripts/experiments/compare.py", "--name", "t", "--corpus", "lcsts",
                       "--config", "lcsts_char", "--updates", "1", "--variant", "a lcsts_char", "--work", work],
                      check=False)
    finally:
        kill(holder)
    assert refused.returncode == 1
    assert f"{work} is locked by another table (host {socket.gethostname()}, pid {holder.pid}, since " in refused.stderr
    assert "give another --work" in refused.stderr
    assert not (work / "data").exists() and not (work / "raw").exists()

    taken = run([sys.executable, "-c", "from pathlib import Path; from scripts.experiments.lib import hold_lock; "
                 f"hold_lock(Path({str(work)!r}), 'table'); print('ok')"])
    assert taken.stdout.strip() == "ok"  # the killed holder's lock is gone

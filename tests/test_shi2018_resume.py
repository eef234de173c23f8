"""scripts/experiments/shi2018_table1.py run again over its work directory: an interrupted row resumes and keeps its
whole accuracy curve; a finished row is reused only when its recorded training command (configs included) is the
same, and is otherwise trained from scratch.  Tiny: 60 training pairs, 16/32 hidden units, 2-6 updates per run."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import slice_corpus

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))
import shi2018_table1  # noqa: E402

TINY = ["--encoder-hidden-size", "16", "--decoder-hidden-size", "32", "--max-tokens", "2000",
        "--validate-interval-updates", "2", "--save-interval-updates", "2"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A work directory with preprocessed data (jieba words, as the table's rows use)."""
    work = tmp_path_factory.mktemp("shi2018_resume")
    raw = slice_corpus("csl", work / "raw", (("train", 60), ("valid", 10), ("test", 10)))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    subprocess.run([str(ROOT / "preprocess.sh"), "-c", "shi2018_lcsts", str(raw), str(work / "data")], check=True,
                   env=env, capture_output=True, stdin=subprocess.DEVNULL)
    return work


class Runs:
    """Stands in for shi2018_table1.run: trainings run for real (the first one, with ``interrupt_at``, stops there
    and then fails, as a kill after that checkpoint would leave the row), the summarizing of the test set not."""

    def __init__(self, interrupt_at=None):
        self.trainings, self.interrupt_at = [], interrupt_at

    def __call__(self, cmd, log=None, env=None):
        if not str(cmd[0]).endswith("train.sh"):
            return
        self.trainings.append([str(c) for c in cmd])
        if self.interrupt_at is None:
            return RUN(cmd, log=log, env=env)
        RUN([*cmd, "--max-update", str(self.interrupt_at)], log=log, env=env)
        self.interrupt_at = None
        raise subprocess.CalledProcessError(-9, cmd)


RUN = shi2018_table1.run


def loaded(log_text: str) -> list:
    """The update counts of the checkpoints fairseq-train resumed from, in a training log."""
    return re.findall(r"Loaded checkpoint \S+ \(epoch \d+ @ (\d+) updates\)", log_text)


def rerun(monkeypatch, work, budget, interrupt_at=None):
    """train_and_test of row 1 with ``budget``: (its curve, the training commands it ran)."""
    runs = Runs(interrupt_at)
    monkeypatch.setattr(shi2018_table1, "run", runs)
    _, curve = shi2018_table1.train_and_test(1, work, work / "data", work / "w2v.bin", budget)
    return curve, runs.trainings


@pytest.mark.slow
def test_an_interrupted_row_resumes_with_its_whole_curve_and_a_changed_budget_trains_afresh(work, monkeypatch):
    log = work / "row1.train.log"
    with pytest.raises(subprocess.CalledProcessError):
        rerun(monkeypatch, work, ["--max-update", "4", *TINY], interrupt_at=2)
    curve, trainings = rerun(monkeypatch, work, ["--max-update", "4", *TINY])
    assert len(trainings) == 1 and loaded(log.read_text()) == ["2"]  # resumed from the checkpoint of update 2
    assert [n for n, _ in curve] == [2, 4]  # the validation before the interruption is still there

    again, trainings = rerun(monkeypatch, work, ["--max-update", "4", *TINY])
    assert trainings == [] and again == curve  # the same command: reused

    curve, trainings = rerun(monkeypatch, work, ["--max-update", "6", *TINY])
    text = log.read_text()
    assert len(trainings) == 1 and text.splitlines()[0].endswith("training from scratch")  # a new log
    assert loaded(text) == [] and text.count("\n+ ") == 1  # one run, not resumed from the 4-update model
    assert [n for n, _ in curve] == [2, 4, 5, 6]  # its own curve (epoch 1, 60 pairs, ends at update 5)
    recorded = json.loads((work / "row1" / "train_command.json").read_text())
    assert recorded["command"][-len(TINY) - 2:] == ["--max-update", "6", *TINY]


def test_the_record_holds_the_row_config_and_the_config_it_sources():
    texts = shi2018_table1.config_texts("shi2018_lcsts_row6")
    assert sorted(texts) == ["shi2018_lcsts.conf", "shi2018_lcsts_row6.conf"]
    assert "--focal-gamma 1" in texts["shi2018_lcsts_row6.conf"] and "TRAIN_ARGS=(" in texts["shi2018_lcsts.conf"]


def test_a_finished_row_is_reused_across_commits_and_trained_again_when_its_code_changed(tmp_path):
    """The record holds compare.py's code fingerprint: another commit with the same files reuses the row; another
    SHA-256 of the code (or another torch) trains it again from scratch."""
    model, log = tmp_path / "row1", tmp_path / "row1.train.log"
    code = shi2018_table1.code_record(shi2018_table1.training_code("shi2018_lcsts_row1"))
    wanted = {"command": ["train.sh", "-c", "shi2018_lcsts_row1"], "W2V": "w2v.bin", "configs": {}, "code": code}
    assert shi2018_table1.start(1, model, log, wanted)  # nothing there: trains
    (model / "done").touch()
    assert not shi2018_table1.start(1, model, log, dict(wanted, code=dict(code, commit="0000000")))  # reused
    assert shi2018_table1.start(1, model, log, dict(wanted, code=dict(code, sha256="0" * 64)))  # retrained
    assert not model.joinpath("done").exists() and "another command or configs" in log.read_text()

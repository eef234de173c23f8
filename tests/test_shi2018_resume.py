"""scripts/experiments/shi2018_table1.py run again over its work directory: an interrupted row resumes and keeps its
whole accuracy curve; a finished row is reused only when its training record (records.py, with the word2vec
file's digest) is the same, and is otherwise trained from scratch.  Tiny: 60 training pairs, 16/32 hidden units,
2-6 updates per run."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import slice_corpus
from scripts.experiments import records, shi2018_table1
from scripts.experiments.lib import Experiment
from test_experiments import CountingExperiment

ROOT = Path(__file__).resolve().parent.parent

TINY = ["--encoder-hidden-size", "16", "--decoder-hidden-size", "32", "--max-tokens", "2000",
        "--validate-interval-updates", "2", "--save-interval-updates", "2"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A work directory with preprocessed data (jieba words, as the table's rows use) and a word2vec file (row 1
    does not read it; its digest is in every row's record)."""
    work = tmp_path_factory.mktemp("shi2018_resume")
    raw = slice_corpus("csl", work / "raw", (("train", 60), ("valid", 10), ("test", 10)))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    subprocess.run([str(ROOT / "preprocess.sh"), "-c", "shi2018_lcsts", str(raw), str(work / "data")], check=True,
                   env=env, capture_output=True, stdin=subprocess.DEVNULL)
    (work / "w2v.bin").write_bytes(b"vectors")
    return work


class Interrupted(Experiment):
    """Trains for real; with ``interrupt_at`` the first training stops at that update and then fails, as a kill
    after that checkpoint would leave the row."""

    def __init__(self, work, interrupt_at=None):
        super().__init__("shi2018_table1", work, threads=1)
        self.trainings, self.interrupt_at = [], interrupt_at

    def run(self, cmd, log_name, stdout=None, append=False):
        self.trainings.append([str(c) for c in cmd])
        if self.interrupt_at is None:
            return super().run(cmd, log_name, stdout, append)
        super().run([*cmd, "--max-update", str(self.interrupt_at)], log_name, stdout, append)
        self.interrupt_at = None
        self.fail("interrupted")


def loaded(log_text: str) -> list:
    """The update counts of the checkpoints fairseq-train resumed from, in a training log."""
    return re.findall(r"Loaded checkpoint \S+ \(epoch \d+ @ (\d+) updates\)", log_text)


def rerun(work, budget, interrupt_at=None):
    """Row 1's training (seed 1) with ``budget``: (its curve, the training commands it ran)."""
    exp = Interrupted(work, interrupt_at)
    shi2018_table1.train(exp, "row1", 1, work / "data", work / "w2v.bin", budget)
    return shi2018_table1.read_curve(work / "logs" / "train_row1.seed1.log"), exp.trainings


@pytest.mark.slow
def test_an_interrupted_row_resumes_with_its_whole_curve_and_a_changed_budget_trains_afresh(work):
    log = work / "logs" / "train_row1.seed1.log"
    with pytest.raises(SystemExit):
        rerun(work, ["--max-update", "4", *TINY], interrupt_at=2)
    curve, trainings = rerun(work, ["--max-update", "4", *TINY])
    assert len(trainings) == 1 and loaded(log.read_text()) == ["2"]  # resumed from the checkpoint of update 2
    assert [n for n, _ in curve] == [2, 4]  # the validation before the interruption is still there

    again, trainings = rerun(work, ["--max-update", "4", *TINY])
    assert trainings == [] and again == curve  # the same record: reused

    curve, trainings = rerun(work, ["--max-update", "6", *TINY])
    assert len(trainings) == 1 and loaded(log.read_text()) == []  # a new log, not resumed from the 4-update model
    assert [n for n, _ in curve] == [2, 4, 5, 6]  # its own curve (epoch 1, 60 pairs, ends at update 5)
    assert records.read_record(work / "models" / "row1.seed1")["train_options"] == [
        "-c", "shi2018_lcsts_row1", "--max-update", "6", *TINY, "--seed", "1"]


class FakeTraining(CountingExperiment):
    """A 'training' writes a finished model's checkpoint and a log with one validation; nothing runs."""

    LOG = "valid on 'valid' subset | accuracy 12.5 | x | num_updates 4\n"

    def run(self, cmd, log_name, stdout=None, append=False):
        model = Path(cmd[4])  # train.sh -c CONFIG DATA MODEL --max-update N --seed S
        model.mkdir(parents=True, exist_ok=True)
        (model / "checkpoint_best.pt").write_bytes(b"model")
        return super().run(cmd, log_name, stdout, append)


def test_a_finished_row_is_reused_and_trained_again_when_its_word2vec_file_or_config_changed(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "shi2018_lcsts.conf").write_text("TRAIN_ARGS=(--lr 0.001)\n")
    row6 = root / "configs" / "shi2018_lcsts_row6.conf"
    row6.write_text('source "$(dirname "${BASH_SOURCE[0]}")/shi2018_lcsts.conf"\nTRAIN_ARGS+=(--focal-gamma 1)\n')
    monkeypatch.setattr(records, "ROOT", root)
    data, w2v = tmp_path / "data", tmp_path / "w2v.bin"
    data.mkdir()
    (data / "prep.json").write_text("{}")
    w2v.write_bytes(b"one")
    exp = FakeTraining(tmp_path / "work")

    def trains():
        before = exp.runs
        model = shi2018_table1.train(exp, "row6", 1, data, w2v, ["--max-update", "4"])
        assert model == exp.work / "models" / "row6.seed1" and (model / "checkpoint_best.pt").is_file()
        assert shi2018_table1.read_curve(exp.logs / "train_row6.seed1.log") == [(4, 12.5)]
        return exp.runs - before

    assert trains() == 1 and trains() == 0
    w2v.write_bytes(b"two")  # another word2vec file
    assert trains() == 1 and trains() == 0
    (root / "configs" / "shi2018_lcsts.conf").write_text("TRAIN_ARGS=(--lr 0.002)\n")  # the config row 6 sources
    assert trains() == 1
    assert records.config_chain("shi2018_lcsts_row6") == [row6, root / "configs" / "shi2018_lcsts.conf"]

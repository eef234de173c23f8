"""scripts/experiments/shi2018_table1.py's table, without training: the trivial baselines a row is below, Table 1's
steps with their verdict over the seeds, the archive, and the options it refuses."""
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import command_env
from scripts.experiments import shi2018_table1 as shi
from scripts.experiments.lib import Experiment

ROOT = Path(__file__).resolve().parent.parent

SCORES = ("NLPCC R-2", "NLPCC R-4", "NLPCC R-SU4", "R-1", "R-2", "R-L")


def result(system, seed, r1):
    scores = dict.fromkeys(SCORES, 0.1)
    scores["R-1"] = r1
    if seed is None:
        return {"system": system, "seed": None, "scores": scores}
    return {"system": system, "seed": seed, "scores": scores, "curve": [(150, 10.0), (300, 12.5)], "updates": 300,
            "epochs": 2.1, "train_min": 3.0}


def test_a_row_is_flagged_below_lead_and_below_the_lstm_of_its_own_seed():
    results = [result("LEAD-20", None, 0.22), result("lstm", 1, 0.15), result("row1", 1, 0.12),
               result("row5", 1, 0.23), result("lstm", 2, 0.25), result("row1", 2, 0.24)]
    flags = shi.below_baselines(results)
    assert flags[("row1", 1)] == "**LEAD-20**, **lstm seed 1**"
    assert flags[("row5", 1)] == ""  # above LEAD-20 and seed 1's lstm; seed 2's lstm is not its control
    assert flags[("row1", 2)] == "**lstm seed 2**"
    assert flags[("lstm", 1)] == "**LEAD-20**"  # the control itself is held to LEAD
    lines = shi.table_lines(results)
    assert lines[2].startswith("| LEAD-20 | the source's first 20 characters |")
    assert "| row1 | baseline | 1 | 300 | 2.1 | 3.0 | 12.50 |" in lines[4]
    assert lines[4].endswith("| 12.00 | 10.00 | 10.00 | **LEAD-20**, **lstm seed 1** |")


def per_doc(work, name, r1):
    (work / "logs" / f"rouge_{name}.per_doc.tsv").write_text(
        "doc\trouge-1-f\trouge-2-f\trouge-l-f\n" + "".join(f"{i}\t{r1 + i / 100}\t0.1\t0.2\n" for i in range(4)))


@pytest.fixture
def work(tmp_path):
    work = tmp_path / "work"
    (work / "raw").mkdir(parents=True)
    (work / "raw" / "test.src").write_text("a\nb\nc\nd\n")
    return work


def test_the_steps_hold_only_in_every_seed_and_say_how_many_intervals(work):
    exp = Experiment("test", work)
    for seed, gain in ((1, 0.05), (2, 0.02)):
        per_doc(work, f"row1.seed{seed}", 0.20)
        per_doc(work, f"row2.seed{seed}", 0.20 + gain)  # word2vec helps in both seeds
        per_doc(work, f"lstm.seed{seed}", 0.20 + (0.01 if seed == 1 else -0.01))
    results = [result(system, seed, 0.2) for seed in (1, 2) for system in ("lstm", "row1", "row2")]
    lines = shi.steps_section(exp, results, [1, 2])
    assert "per seed (2): 4 intervals of 3 scores each (12 in all)" in lines[2]
    assert "over 10,000 paired resamples of the 4 test pairs" in lines[2]
    step = next(line for line in lines if line.startswith("| row2 (+ word2vec) | row1 (baseline) |"))
    assert "B > A in every seed (2): +5.00 [+5.00, +5.00], +2.00 [+2.00, +2.00]" in step
    control = next(line for line in lines if line.startswith("| row1 (baseline) | lstm (fairseq's lstm"))
    assert "inconclusive (-1.00 [-1.00, -1.00], +1.00 [+1.00, +1.00])" in control  # the seeds disagree
    assert not any(line.startswith("| row3") for line in lines)  # a row that did not run has no step

    one = shi.steps_section(exp, results[:3], [1])
    assert "inconclusive (one seed: +5.00" in next(line for line in one if line.startswith("| row2"))


def test_the_archive_holds_what_the_table_is_made_of_and_no_checkpoint_or_data(work, tmp_path):
    for folder in ("logs", "outputs", "models/row1.seed1", "data/bin"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    for name in ("table1.md", "results.json", "outputs/row1.seed1.txt", "outputs/lead.txt",
                 "logs/rouge_row1.seed1.per_doc.tsv", "logs/train_row1.seed1.log", "logs/generate_row1.seed1.log",
                 "models/row1.seed1/checkpoint_best.pt", "data/bin/train.src-tgt.src.bin"):
        (work / name).write_text(name)
    dest = tmp_path / "out" / "shi.tar.xz"
    members = shi.archive(work, dest)
    assert sorted(members) == ["logs/rouge_row1.seed1.per_doc.tsv", "logs/train_row1.seed1.log", "outputs/lead.txt",
                       "outputs/row1.seed1.txt", "results.json", "table1.md"]
    with tarfile.open(dest) as packed:
        assert sorted(packed.getnames()) == sorted(members)
        assert packed.extractfile("outputs/row1.seed1.txt").read() == b"outputs/row1.seed1.txt"


@pytest.mark.parametrize("options, message", [
    (["--rows", "1,9"], "rows are 1 to 7"),
    (["--seeds", "1,x"], "give numbers separated by commas"),
    (["--seeds", "2,2"], "a number is repeated"),
    (["--archive", "table.zip"], "give a .tar.xz file"),
])
def test_bad_options_are_refused_before_any_work(tmp_path, options, message):
    run = subprocess.run([sys.executable, ROOT / "scripts" / "experiments" / "shi2018_table1.py", "--work",
                          tmp_path / "work", *options], capture_output=True, text=True, env=command_env())
    assert run.returncode == 2 and message in run.stderr
    assert not (tmp_path / "work").exists()

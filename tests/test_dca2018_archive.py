"""dca2018_cnndm.py --archive: what the report reads of a run, kept without checkpoints, rebuilds the same table."""
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))


def finished_system(work: Path, label: str, f1: float) -> None:
    """One trained and scored system as compare.py leaves it, its per-document scores and checkpoint
    statistics already computed (so the report runs no ROUGE and loads no checkpoint)."""
    model = work / "models" / label.replace(":", "_")
    model.mkdir(parents=True)
    (model / "train_seconds").write_text("120.0\n")
    (model / "valid_stats.json").write_text('{"nll_bits": 6.5, "end_cos_1": 0.25}')
    (model / "test_stats.json").write_text('{"end_cos_1": 0.2, "end_cos_2": 0.1}')
    (model / "checkpoint_best.pt").write_bytes(b"weights")
    logs, outputs = work / "logs", work / "outputs"
    (logs / f"train_{label}.log").write_text("num_updates=10, wps=50\nnum_updates=20, wps=70\n")
    (logs / f"rouge_{label}.beam.out").write_text(
        f"ROUGE-1 {100 * f1:.2f} [0 - 1]\nROUGE-2 5.00 [0 - 1]\nROUGE-L 20.00 [0 - 1]\n")
    (logs / f"rouge_{label}.beam.per_doc.tsv").write_text(
        "doc\trouge-1-f\trouge-2-f\trouge-l-f\n" + "".join(f"{i}\t{f1}\t0.05\t0.2\n" for i in range(3)))
    (outputs / f"{label}.beam.txt").write_text("a b . <q> a b .\nc d e .\nf .\n")


def test_the_archive_holds_no_checkpoint_and_rebuilds_the_same_report(tmp_path):
    import dca2018_report as report

    work, dest = tmp_path / "work", tmp_path / "archive" / "seed1.tar.xz"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    (work / "data" / "train.bin").write_bytes(b"data")
    finished_system(work, "1:single_mle", 0.25)
    finished_system(work, "2:single_sem", 0.30)

    members = report.archive(work, dest)
    with tarfile.open(dest) as packed:
        assert sorted(packed.getnames()) == sorted(members)
    assert not [m for m in members if m.endswith(".pt") or m.startswith("data")]
    assert "logs/rouge_2:single_sem.beam.per_doc.tsv" in members

    from_work = report.report([work], tmp_path / "a.md", "cmd")
    from_archive = report.report([dest], tmp_path / "b.md", "cmd")
    assert from_work.replace(str(work.resolve()), "RUN") == from_archive.replace(str(dest), "RUN")
    assert "| 2:single_sem | beam | 30.00 |" in from_archive
    assert "| 2:single_sem | 1:single_mle | +5.00 [+5.00, +5.00]" in from_archive  # paired bootstrap kept


def test_the_report_names_the_code_of_each_system_and_gives_verdicts_over_seeds(tmp_path):
    """Section 1 reads each system's training record; section 5 holds a direction only over two or more seeds."""
    import json

    import dca2018_report as report
    from compare import code_record, training_code

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    for seed, gain in ((1, 0.05), (2, 0.04)):
        finished_system(work, f"1:single_mle_seed{seed}", 0.25)
        finished_system(work, f"2:single_sem_seed{seed}", 0.25 + gain)
    now = code_record(training_code("dca_lstm_cnndm_small"))
    records = {"1_single_mle_seed1": dict(now, commit="abc1234", sha256="0" * 64), "2_single_sem_seed1": now,
               "1_single_mle_seed2": None}
    for folder, code in records.items():
        record = {"train_options": ["-c", "dca_lstm_cnndm_small", "--max-update", "10"], "code": code}
        (work / "models" / folder / "training.json").write_text(json.dumps(record))
    text = report.report([work], tmp_path / "r.md", "cmd")
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines()
            if line.startswith("| ") and "| beam |" in line}
    assert rows["1:single_mle_seed1"].endswith("| older (commit abc1234) |")
    assert rows["2:single_sem_seed1"].endswith("| this checkout |")
    assert rows["1:single_mle_seed2"].endswith("| not recorded |")  # a record without the code
    assert rows["2:single_sem_seed2"].endswith("| not recorded |")  # no record at all
    assert "| 2:single_sem | 1:single_mle | 2 | B > A in every seed (2): +5.00 [+5.00, +5.00], +4.00" in text


def test_an_archive_that_is_not_a_tar_xz_is_refused(tmp_path):
    import dca2018_report as report

    with pytest.raises(SystemExit, match=r"must be a \.tar\.xz file"):
        report.archive(tmp_path, tmp_path / "archive")


def test_the_report_says_how_many_intervals_it_prints(tmp_path):
    import dca2018_report as report

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    for label in ("1:single_mle", "2:single_sem", "3:agents_no_comm"):
        finished_system(work, label, 0.25)
    text = report.report([work], tmp_path / "r.md", "cmd")
    # 2 and 3 against row 1, and 3 against 2: 3 comparisons, one decoding
    assert "3 comparisons x 3 scores = 9 intervals at 95 %, none corrected" in text

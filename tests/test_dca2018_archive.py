"""dca2018_cnndm.py --archive: what the report reads of a run, kept without checkpoints, rebuilds the same table."""
import json
import tarfile
from pathlib import Path

import pytest

from scripts.experiments.dca2018_cnndm import declared

ROOT = Path(__file__).resolve().parents[1]

DECLARED = declared()


def finished_system(work: Path, label: str, f1: float, code=None, options=None, decode="beam", r2=0.05,
                    rl=0.2) -> None:
    """One trained and scored system as compare.py leaves it, its per-document scores and checkpoint
    statistics already computed (so the report runs no ROUGE and loads no checkpoint), with a training record
    of the options dca2018_cnndm.py declares for it (``code``: the record's code fingerprint), decoded once
    (``decode``) with per-document F1 ``f1``, ``r2`` and ``rl`` (ROUGE-1, -2, -L) for each of its 3 documents."""
    from scripts.experiments import dca2018_report as report

    model = work / "models" / label.replace(":", "_")
    model.mkdir(parents=True)
    options = (options or report.declared_options(DECLARED, label)) + ["--max-update", "20"]
    (model / "training.json").write_text(json.dumps({"train_options": options, "code": code}))
    (model / "train_seconds").write_text("120.0\n")
    (model / "valid_stats.json").write_text('{"nll_bits": 6.5, "end_cos_1": 0.25}')
    (model / "test_stats.json").write_text('{"end_cos_1": 0.2, "end_cos_2": 0.1}')
    (model / "checkpoint_best.pt").write_bytes(b"weights")
    logs, outputs = work / "logs", work / "outputs"
    (logs / f"train_{label}.log").write_text("num_updates=10, wps=50\nnum_updates=20, wps=70\n")
    (logs / f"rouge_{label}.{decode}.out").write_text(
        f"ROUGE-1 {100 * f1:.2f} [0 - 1]\nROUGE-2 {100 * r2:.2f} [0 - 1]\nROUGE-L {100 * rl:.2f} [0 - 1]\n")
    (logs / f"rouge_{label}.{decode}.per_doc.tsv").write_text(
        "doc\trouge-1-f\trouge-2-f\trouge-l-f\n" + "".join(f"{i}\t{f1}\t{r2}\t{rl}\n" for i in range(3)))
    (outputs / f"{label}.{decode}.txt").write_text("a b . <q> a b .\nc d e .\nf .\n")


def test_the_archive_holds_no_checkpoint_and_rebuilds_the_same_report(tmp_path):
    from scripts.experiments import dca2018_report as report

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

    from_work = report.report([work], tmp_path / "a.md", "cmd", DECLARED)
    from_archive = report.report([dest], tmp_path / "b.md", "cmd", DECLARED)
    assert from_work.replace(str(work.resolve()), "RUN") == from_archive.replace(str(dest), "RUN")
    assert "| 2:single_sem | beam | 30.00 |" in from_archive
    assert "| 2:single_sem | 1:single_mle | +5.00 [+5.00, +5.00]" in from_archive  # paired bootstrap kept


def test_the_report_names_the_code_of_each_system_and_gives_verdicts_over_seeds(tmp_path):
    """Section 1 reads each system's training record; section 5 holds a direction only over two or more seeds."""
    import json

    from scripts.experiments import dca2018_report as report
    from scripts.experiments.records import code_record, training_code

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    for seed, gain in ((1, 0.05), (2, 0.04)):
        finished_system(work, f"1:single_mle_seed{seed}", 0.25)
        finished_system(work, f"2:single_sem_seed{seed}", 0.25 + gain)
    now = code_record(training_code("cnndm_small"))  # rows 1 and 2 train with configs/cnndm_small.conf
    records = {"1_single_mle_seed1": dict(now, commit="abc1234", sha256="0" * 64), "2_single_sem_seed1": now,
               "1_single_mle_seed2": None, "2_single_sem_seed2": None}
    for folder, code in records.items():
        record = work / "models" / folder / "training.json"
        record.write_text(json.dumps(dict(json.loads(record.read_text()), code=code)))
    text = report.report([work], tmp_path / "r.md", "cmd", DECLARED)
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines()
            if line.startswith("| ") and "| beam |" in line}
    assert rows["1:single_mle_seed1"].endswith("| older (commit abc1234) |  |")
    assert rows["2:single_sem_seed1"].endswith("| this checkout |  |")
    assert rows["1:single_mle_seed2"].endswith("| not recorded |  |")  # records without the code
    assert rows["2:single_sem_seed2"].endswith("| 20 |  | 2.0 | not recorded |  |")  # its updates and minutes
    assert "| 2:single_sem | 1:single_mle | 2 | B > A in every seed (2): +5.00 [+5.00, +5.00], +4.00" in text


def test_the_header_says_how_each_run_was_made_and_rows_below_a_baseline_of_their_seed_are_flagged(tmp_path):
    """A finished run's command, commit, corpus and budget come from its results.md, a stopped run is marked so;
    a row below LEAD-3, or below fairseq's `lstm` of its own seed, is flagged (another seed's `lstm` does not
    count)."""
    from scripts.experiments import dca2018_report as report

    seed1, seed2 = tmp_path / "seed1", tmp_path / "seed2"
    for work in (seed1, seed2):
        for folder in ("logs", "outputs", "data"):
            (work / folder).mkdir(parents=True)
    finished_system(seed1, "1:single_mle", 0.20)
    finished_system(seed1, "control:fairseq_lstm", 0.22)
    finished_system(seed2, "1:single_mle_seed2", 0.21)
    finished_system(seed2, "control:fairseq_lstm_seed2", 0.15)
    (seed1 / "outputs" / "lead.txt").write_text("a b .\nc d .\ne f .\n")
    (seed1 / "logs" / "rouge_lead.per_doc.tsv").write_text(
        "doc\trouge-1-f\trouge-2-f\trouge-l-f\n" + "".join(f"{i}\t0.24\t0.05\t0.2\n" for i in range(3)))
    lead = {"system": "LEAD-3", "decode": "", "rouge": {"ROUGE-1": 24.0, "ROUGE-2": 9.0, "ROUGE-L": 22.0}}
    rows = [lead] + [{"system": label, "decode": "beam", "rouge": {"ROUGE-1": f1, "ROUGE-2": 5.0, "ROUGE-L": 20.0}}
                     for label, f1 in (("1:single_mle", 20.0), ("control:fairseq_lstm", 22.0))]
    trained = {label: {"updates": 20, "epochs": 0.5, "train_min": 2.0} for label in ("1:single_mle",
                                                                                      "control:fairseq_lstm")}
    (seed1 / "results.json").write_text(json.dumps({"rows": rows, "trained": trained}))
    (seed1 / "results.md").write_text("# dca2018_cnndm\n\nCommand: `python scripts/experiments/compare.py --x`\n\n"
                                      "Made at commit abc1234 on 2026-11-29 16:00 UTC: a CPU\n\n"
                                      "Corpus `cnndm`: 3 training documents\nBudget: 20 updates per system\n| x |\n")

    text = report.report([seed1, seed2], tmp_path / "r.md", "cmd", DECLARED)
    assert "Made at commit " in text.split("Runs, each")[0] and "Training seeds: 1, 2 " in text
    assert f"- `{seed1.resolve()}`:\n  - Command: `python scripts/experiments/compare.py --x`\n  - Made at commit " \
        "abc1234 on 2026-11-29 16:00 UTC: a CPU\n  - Corpus `cnndm`: 3 training documents\n  - Budget: 20 " in text
    assert f"- `{seed2.resolve()}`: **not finished**" in text
    table = {line.split(" | ")[0][2:]: line for line in text.split("## 2.")[0].splitlines() if "| beam |" in line}
    assert table["1:single_mle"].endswith("| 20 | 0.50 | 2.0 | not recorded | **LEAD-3**, **control:fairseq_lstm** |")
    assert table["1:single_mle_seed2"].endswith("| **LEAD-3** |")  # 21.00: above its own seed's lstm (15.00)
    assert table["control:fairseq_lstm"].endswith("| **LEAD-3** |")
    assert table["control:fairseq_lstm_seed2"].endswith("| **LEAD-3** |")


def test_the_posters_directions_are_judged_over_the_seeds_at_the_headline_decoding(tmp_path):
    """+ SEM (row 2 - row 1) rises in the poster's R-1 and R-2 and falls in its R-L: ours rising in two seeds
    reproduces the first two and not the third; a step whose rows were not run says so."""
    from scripts.experiments import dca2018_report as report

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    for suffix, gain in (("", 0.05), ("_seed2", 0.03)):
        finished_system(work, "1:single_mle" + suffix, 0.25, decode="beam+block")
        finished_system(work, "2:single_sem" + suffix, 0.25 + gain, decode="beam+block", r2=0.07, rl=0.22)
    text = report.report([work], tmp_path / "r.md", "cmd", DECLARED)
    directions = {line.split(" | ")[0][2:]: line for line in text.split("## 1.")[0].splitlines() if " - " in line}
    assert directions["+ SEM"] == ("| + SEM | 2:single_sem - 1:single_mle | +0.78 / +0.64 / -0.83 | reproduces: "
                                   "+5.00 [+5.00, +5.00], +3.00 [+3.00, +3.00] | reproduces: +2.00 [+2.00, +2.00], "
                                   "+2.00 [+2.00, +2.00] | does not reproduce: +2.00 [+2.00, +2.00], +2.00 [+2.00, "
                                   "+2.00] |")
    assert directions["+ RL"].endswith("| not run | not run | not run |")


def test_an_archive_that_is_not_a_tar_xz_is_refused(tmp_path):
    from scripts.experiments import dca2018_report as report

    with pytest.raises(SystemExit, match=r"must be a \.tar\.xz file"):
        report.archive(tmp_path, tmp_path / "archive")


def test_the_report_says_how_many_intervals_it_prints(tmp_path):
    from scripts.experiments import dca2018_report as report

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    for label in ("1:single_mle", "2:single_sem", "3:agents_no_comm"):
        finished_system(work, label, 0.25)
    text = report.report([work], tmp_path / "r.md", "cmd", DECLARED)
    # 2 and 3 against row 1, and 3 against 2: 3 comparisons, one decoding
    assert "3 comparisons x 3 scores = 9 intervals at 95 %, none corrected" in text


def test_the_report_reads_only_systems_whose_record_matches_the_printed_command(tmp_path):
    """Options in another order match; a missing record, other options, a continued system whose parent's
    record differs, and a label the script does not declare are left out of every section, with the reason."""
    from scripts.experiments import dca2018_report as report

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data"):
        (work / folder).mkdir(parents=True)
    for label in ("1:single_mle", "2:single_sem", "3:agents_no_comm", "5:agents_comm_caa", "6:rl",
                  "control:6_ml_continued"):
        finished_system(work, label, 0.25)
    finished_system(work, "control:mine", 0.25, options=["-c", "cnndm_small"])

    def record(label):
        return work / "models" / label.replace(":", "_") / "training.json"

    row5 = json.loads(record("5:agents_comm_caa").read_text())
    rl = json.loads(record("6:rl").read_text())
    shuffled = rl["train_options"][:2] + [w for pair in reversed(list(zip(*[iter(rl["train_options"][2:-2])] * 2)))
                                          for w in pair]
    record("6:rl").write_text(json.dumps(dict(rl, train_options=shuffled, parent=row5)))  # kept
    record("3:agents_no_comm").write_text(json.dumps({"train_options": ["-c", "dca_lstm_cnndm_small", "--seed", "3"]}))
    record("2:single_sem").unlink()
    ml = json.loads(record("control:6_ml_continued").read_text())
    record("control:6_ml_continued").write_text(json.dumps(dict(ml, parent={"train_options": ["-c", "x"]})))

    text = report.report([work], tmp_path / "r.md", "cmd", DECLARED)
    table, rest = text.split("## 2.")
    assert "| 6:rl | beam | 25.00 |" in table and "| 1:single_mle | beam |" in table
    for gone in ("2:single_sem", "3:agents_no_comm", "control:6_ml_continued", "control:mine"):
        assert f"| {gone} | beam |" not in table and f"| {gone} |" not in rest
    assert "- 2:single_sem in" in text and "no training record, so its options cannot be checked" in text
    assert "- 3:agents_no_comm in" in text and "not `-c dca_lstm_cnndm_small --no-communication" in text
    assert "- control:6_ml_continued in" in text and "its parent 5:agents_comm_caa: trained with `-c x`" in text
    assert "- control:mine in" in text and "not a system of the printed command" in text
    assert "| 6:rl | `-c dca_lstm_cnndm_small --criterion self_critical_cohesion" in text  # the printed command


def test_an_option_repeated_keeps_its_order_when_records_are_compared():
    from scripts.experiments.lib import option_groups

    assert option_groups(["-c", "a", "--lr", "0.1", "--seed", "2"]) == \
        option_groups(["-c", "a", "--seed", "2", "--lr", "0.1", "--max-update", "5"], ignore=("--max-update",))
    assert option_groups(["--lr", "1", "--lr", "2"]) != option_groups(["--lr", "2", "--lr", "1"])
    assert option_groups(["--rl-gamma", "-0.5"]) == [["--rl-gamma", "-0.5"]]  # a negative value


@pytest.mark.slow
def test_per_document_scores_of_a_chinese_run_are_scored_as_chinese(tmp_path):
    """A work folder of another corpus (LCSTS characters: data/prep.json says zh) is scored in its language:
    official ROUGE-1.5.5 on characters mapped to ids, where English tokenization would keep none of them."""
    from scripts.experiments import dca2018_report as report

    work = tmp_path / "work"
    for folder in ("logs", "outputs", "data/ref"):
        (work / folder).mkdir(parents=True)
    (work / "data" / "prep.json").write_text('{"settings": {"lang": "zh"}}')
    (work / "data" / "ref" / "test.tgt").write_text("今天天气很好\n我们去公园散步\n", encoding="utf-8")
    (work / "outputs" / "sys.beam.txt").write_text("今 天 天 气 很 好\n我 们 去 看 书\n", encoding="utf-8")
    run = report.Run(work)
    assert run.lang == "zh"
    rows = run.per_doc("sys.beam").read_text().splitlines()
    header, first, second = (line.split("\t") for line in rows)
    f1 = header.index("rouge-1-f")
    assert float(first[f1]) == 1.0  # the whole reference, character for character
    assert 0.0 < float(second[f1]) < 1.0  # 3 of the reference's 7 characters, 3 of the summary's 5
    assert report.Run(tmp_path / "archive_like").lang == "en"  # no data kept: the DCA runs' English


def test_a_run_with_unreadable_data_settings_is_an_error(tmp_path):
    from scripts.experiments import dca2018_report as report

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prep.json").write_text("{}")  # no settings: not prepared by summ-prepare
    with pytest.raises(SystemExit, match=r"prep.json: no settings.lang, so not the record summ-prepare writes"):
        report.Run(tmp_path)

"""scripts/experiments/checkpoint_choice.py's report, without training: its rows and intervals from results.json and
the per-document scores, the archive it is rebuilt from, and the inputs it refuses."""
import json
import tarfile
from pathlib import Path

import pytest

from scripts.experiments import checkpoint_choice
from scripts.experiments.lib import pack

ROOT = Path(__file__).resolve().parent.parent


def scores(r1: float, r2: float, rl: float) -> dict:
    return {"ROUGE-1": r1, "ROUGE-2": r2, "ROUGE-L": rl}


def finished_run(work: Path, default_rl: float) -> Path:
    """A work folder as the script leaves it for aclsum seed 1: results.json and per-document scores in which
    every document of the default scores ``default_rl`` ROUGE-L, of best_by_loss 0.01 and of the last 0.20."""
    folder = work / "aclsum" / "seed1"
    folder.mkdir(parents=True)
    (work / "aclsum" / "shipped").mkdir()
    (work / "aclsum" / "shipped" / "checkpoint_best.pt").write_bytes(b"weights")
    row = {"corpus": "aclsum", "seed": 1, "same_last": True}
    for which, rl, update in (("default", default_rl, 280), ("best_by_loss", 0.01, 8), ("last", 0.20, 300)):
        (folder / f"{which}.tsv").write_text("doc\trouge-1-f\trouge-2-f\trouge-l-f\n"
                                             + "".join(f"{i}\t0.1\t0.1\t{rl}\n" for i in range(5)))
        (folder / f"{which}.sum").write_text("a summary\n")
        row[which] = {"rouge": scores(17.0, 1.2, 100 * rl), "update": update, "per_doc": f"aclsum/seed1/{which}.tsv"}
    results = {"command": "python scripts/experiments/checkpoint_choice.py --seeds 1", "made": "Made at commit abc.",
               "updates": 300, "rows": [row], "leads": {"aclsum": scores(26.93, 9.56, 20.74)}}
    (work / "results.json").write_text(json.dumps(results))
    return work


def test_the_report_gives_each_checkpoint_and_the_default_against_the_better_with_its_interval(tmp_path):
    text = checkpoint_choice.rebuilt(finished_run(tmp_path, default_rl=0.15))
    assert "Made by `python scripts/experiments/checkpoint_choice.py --seeds 1`." in text
    assert ("| aclsum | 1 | 17.00 / 1.20 / 15.00 (280) | 17.00 / 1.20 / 1.00 (8) | 17.00 / 1.20 / 20.00 (300) "
            "| -5.00 [-5.00, -5.00] vs last |") in text
    assert "aclsum LEAD-1 26.93 / 9.56 / 20.74" in text
    assert "Not within noise in every row: the default is below in aclsum seed 1." in text
    level = checkpoint_choice.rebuilt(finished_run(tmp_path / "level", default_rl=0.20))
    assert "| +0.00 [+0.00, +0.00] vs last |" in level and "Within noise: the interval of every row" in level


def test_the_archive_holds_no_checkpoint_and_rebuilds_the_same_report(tmp_path):
    work = finished_run(tmp_path / "work", default_rl=0.15)
    dest = tmp_path / "kept" / "checkpoint_choice.tar.xz"
    members = pack(work, checkpoint_choice.ARCHIVED, dest)
    assert "results.json" in members and "aclsum/seed1/default.tsv" in members and "aclsum/seed1/last.sum" in members
    with tarfile.open(dest) as packed:
        assert not any(name.endswith(".pt") for name in packed.getnames())
    assert checkpoint_choice.rebuilt(dest) == checkpoint_choice.rebuilt(work)


def test_a_folder_without_results_and_an_archive_of_another_kind_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit, match=r"results\.json not in .*: not a finished run of this script"):
        checkpoint_choice.rebuilt(tmp_path)
    with pytest.raises(SystemExit):
        checkpoint_choice.main(["--archive", str(tmp_path / "kept.zip"), "--work", str(tmp_path)])
    assert "kept.zip: give a .tar.xz file" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()  # refused before any step ran

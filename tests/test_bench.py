"""scripts/bench/throughput.py: the plumbing of one tiny run (3 updates, 10 sentences, each model twice, the
three models) on LCSTS from ../shared/data.  The figures of such a run mean nothing; the test checks that every
model is trained and decoded, that each figure is parsed and reported as the median of its runs, and that the
ratios are those of the table."""
import json
import re
import sys

import pytest

from test_distributed import run

COLUMNS = ["train_wps", "train_peak_mb", "decode_sent_per_s", "decode_tok_per_s", "hyp_len", "decode_peak_mb"]
NUMBER = r"\s+([\d.]+)"
MODELS = ("lstm", "pgn_lstm", "pgn_lstm_a512")


@pytest.fixture(scope="module")
def bench(shared_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    result = run([sys.executable, "scripts/bench/throughput.py", "--updates", "3", "--decode-sentences", "10",
                  "--max-tokens", "1500", "--max-len-b", "12", "--device", "cpu", "--work", work,
                  "--repeats", "2", "--all-models", "--json", work / "figures.json"])
    return result.stdout, json.loads((work / "figures.json").read_text())


def table_rows(stdout: str) -> dict:
    rows = {}
    for name in MODELS:
        found = re.findall(rf"^{name}{NUMBER * len(COLUMNS)}$", stdout, flags=re.M)
        assert len(found) == 1, stdout
        rows[name] = dict(zip(COLUMNS, map(float, found[0])))
    return rows


def test_table_has_numeric_rows_for_both_models(bench):
    stdout, figures = bench
    assert "decoding: the first 10 sentences of valid, beam 5, --max-len-b 12, --min-len 12" in stdout
    rows = table_rows(stdout)
    for name, row in rows.items():
        assert all(value > 0 for value in row.values()), (name, row)
        assert row["hyp_len"] == 13.0  # fixed-length decoding: 12 tokens and </s> for every sentence of both
        assert row["train_peak_mb"] > 100 and row["decode_peak_mb"] > 100  # a python with torch: real RSS
        assert figures["models"][name]["decode_sentences"] == 10  # the subset, not the whole valid split
        assert figures["models"][name]["train_wps"] == pytest.approx(row["train_wps"], abs=0.06)
        runs = figures["models"][name]["train_wps_runs"]
        assert len(runs) == 2 and row["train_wps"] == pytest.approx(sum(runs) / 2, abs=0.06)  # median of two
        assert re.search(rf"^{name}: words/s per run \d+, \d+; sentences/s per run [\d.]+, [\d.]+$", stdout, re.M)
    assert figures["decode_sentences"] == 10 and figures["device"] == "cpu" and figures["repeats"] == 2


def test_ratios_are_printed_and_match_the_table(bench):
    stdout, _ = bench
    rows = table_rows(stdout)
    for label, key, rel in (("training words/s", "train_wps", 1e-3), ("decode sentences/s", "decode_sent_per_s", 1e-2)):
        found = re.search(rf"^ratio pgn_lstm / lstm, {label}: ([\d.]+) \(target >= 1\.0: (met|MISSED)\)$", stdout,
                          flags=re.M)
        assert found, stdout
        ratio = float(found.group(1))
        assert ratio == pytest.approx(rows["pgn_lstm"][key] / rows["lstm"][key], rel=rel, abs=0.006)
        assert found.group(2) == ("met" if ratio >= 1.0 else "MISSED")
    for label in ("training peak MB", "decode peak MB"):
        assert re.search(rf"^ratio pgn_lstm / lstm, {label}: [\d.]+$", stdout, flags=re.M), stdout
    a512 = re.search(r"^ratio pgn_lstm_a512 / lstm, training words/s: ([\d.]+)$", stdout, flags=re.M)  # no target
    assert a512 and float(a512.group(1)) == pytest.approx(
        rows["pgn_lstm_a512"]["train_wps"] / rows["lstm"]["train_wps"], rel=1e-3, abs=0.006)


def test_old_name_runs_the_same_benchmark():
    result = run([sys.executable, "scripts/bench/train_throughput.py", "--help"])
    assert "--decode-sentences" in result.stdout and "--device" in result.stdout

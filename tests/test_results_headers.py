"""The header of every script that writes a docs/results file: the command as a shell takes it, then the commit,
date, machine and versions (scripts/experiments/records.py made_header, over records.provenance).  Checked for
serve_load.py, dca_scale.py, reward_speed.py, paper_scale.py, see2017_abstractiveness.py and see2017_adagrad.py
(throughput.py's in tests/test_bench.py), each report built from made-up figures: nothing is trained or timed."""
import argparse
import re
import sys
from pathlib import Path

from scripts.experiments import lib, records

MADE = re.compile(r"Made at commit [0-9a-f]{7,40}\+? on \d{4}-\d\d-\d\d \d\d:\d\d UTC: .*logical CPUs; "
                  r"(?:no GPU|GPU .*); fairseq-fixed \S+, torch \S+\.")


def assert_made(lines: list, command: str) -> None:
    """``lines`` open with made_header's three lines for ``command``."""
    assert lines[0] == f"Command: `{command}`" and lines[1] == "", lines[:3]
    assert MADE.match(lines[2]), lines[2]


def test_made_header_names_a_bench_script_by_its_path_and_quotes_its_arguments():
    lines = records.made_header("bench/x.py", ["--a", "b c"], "Seeds: 1.")
    assert_made(lines, "python scripts/bench/x.py --a 'b c'")
    assert len(lines) == 3 and lines[2].endswith(". Seeds: 1.")
    assert not records.made_header("x.py", [])[2].endswith(" ")
    assert lib.invocation("compare.py", ["--name", "a b"]) == "python scripts/experiments/compare.py --name 'a b'"


def test_serve_load_report_opens_with_its_command_commit_and_machine():
    from scripts.bench import serve_load

    argv = ["m", "--input", "docs.txt", "--options", '{"beam": 5}']
    args = argparse.Namespace(model_dir=Path("m"), input=Path("docs.txt"), options={"beam": 5}, argv=argv)
    hub = {"batch_seconds": 2.0, "single_seconds": [1.0, 1.5]}
    text = serve_load.report(args, ["a", "b"], None, hub, {1: {"latencies": [1.0, 1.2], "wall": 2.2}}, 0.5, 0.7)
    lines = text.splitlines()
    assert lines[0].startswith("# summ-serve under load")
    assert_made(lines[2:], "python scripts/bench/serve_load.py m --input docs.txt --options '{\"beam\": 5}'")
    assert lines[6].startswith("Machine: ") and "OMP_NUM_THREADS=" in lines[6]


def test_dca_scale_report_opens_with_its_command_commit_and_machine():
    from scripts.bench import dca_scale

    results = {}
    for model in ("dca_lstm", "pgn_lstm"):
        for length in (400, 800):
            results[(model, length, "train")] = {"seconds_per_step": 1.0, "peak_mb": 900.0, "idle_mb": 400.0}
            results[(model, length, "decode")] = {"seconds_per_summary": 0.5, "peak_mb": 500.0}
    args = argparse.Namespace(beam=4, summary_len=100, threads=1, steps=2, argv=["--lengths", "400,800"])
    text = dca_scale.report_text(args, results, [400, 800], ["dca_lstm", "pgn_lstm"], ((3.0,), (2.0,)), 60.0)
    lines = text.splitlines()
    assert_made(lines[2:], "python scripts/bench/dca_scale.py --lengths 400,800")
    assert "load average 3.00 before, 2.00 after" in text and "| 800 | pgn_lstm | 1.00 |" in text


def test_reward_speed_prints_its_command_commit_and_machine_first():
    from scripts.bench import reward_speed

    lines = reward_speed.header_lines(["--repeats", "1"])
    assert_made(lines, "python scripts/bench/reward_speed.py --repeats 1")
    assert lines[3].startswith("Machine: CPU: ") and "threads" in lines[3]


def test_paper_scale_dry_run_report_opens_with_its_command_commit_and_machine():
    from scripts.experiments import paper_scale

    args = argparse.Namespace(argv=["--table", "all", "--reuse"], reuse=True)
    lines = paper_scale.dry_run_header(args, 120.0)
    assert lines[0] == "# The seed tables at paper scale: dry run"
    assert_made(lines[2:], "python scripts/experiments/paper_scale.py --table all --reuse")
    assert lines[6].startswith("Machine: CPU: ") and "With --reuse" in lines[6]


def test_see2017_abstractiveness_report_opens_with_its_command_commit_and_machine():
    from scripts.experiments import see2017_abstractiveness as abstractiveness

    rows = abstractiveness.FIGURE_ROWS
    data = {"documents": 2, "figures": {key: key for key in rows},
            "systems": {name: {key: {"pooled": 1.0, "doc_mean": 1.0} for key in rows}
                        for name in (*abstractiveness.SYSTEMS, "reference")}}
    args = argparse.Namespace(out=Path("docs/results/see2017_abstractiveness"), argv=["--docs", "2"])
    text = abstractiveness.report(args, ["summ-analyze", "--a"], ["summ-analyze", "--b"], data, data)
    lines = text.splitlines()
    assert_made(lines[2:], "python scripts/experiments/see2017_abstractiveness.py --docs 2")
    assert lines[6].startswith("2 documents of ") and "    summ-analyze --a" in lines


def test_see2017_adagrad_table_opens_with_its_command_commit_and_machine():
    from scripts.experiments import see2017_adagrad

    loss = {name: [9.0, 8.5, 8.0] for name in see2017_adagrad.VARIANTS}
    args = argparse.Namespace(updates=3, argv=["--updates", "3", "--data", "scitldr"])
    lines = see2017_adagrad.loss_table(loss, loss, args, "Data: scitldr.")
    assert lines[0] == "# See et al. (2017)'s Adagrad accumulator: training loss, 3 updates"
    assert_made(lines[2:], "python scripts/experiments/see2017_adagrad.py --updates 3 --data scitldr")
    assert lines[6] == "Data: scitldr." and lines[-1] == "Mean loss over the last 3 updates: adagrad 8.500; " \
        "adagrad_acc 8.500."


def test_short_targets_report_opens_with_its_command_and_flags_rows_below_lead(monkeypatch):
    from scripts.experiments import short_targets

    def row(r1, unk):
        stutter = {"unk": unk, "doubled_first": 5.0, "with_immediate_repeat": 9.0, "with_repeat": 1.0,
                   "tokens": 12.0}
        return {"rouge": {"ROUGE-1": r1, "ROUGE-2": 5.0, "ROUGE-L": 20.0}, "stutter": stutter, "per_doc": "x"}

    rows = {f"{m}_{d}": row(30.0 if m == "after" else 20.0, 7 if d != "new" else 0) for m, d in short_targets.ROWS}
    seed = {"rows": rows, "trained_at": {"before": "abc1234", "after": "abc1234"},
            "second_step": {"before": {"doubled": {"summaries": 3, "overlap": 0.5, "p_gen": 0.2},
                                       "other": {"summaries": 7, "overlap": 0.1, "p_gen": 0.3}}},
            "unk_paths": {"generate.sh --split test": 0}}
    results = {1: seed, "references": rows["before_old"]["stutter"],
               "lead": {"name": "LEAD-1", "rouge": {"ROUGE-1": 25.0, "ROUGE-2": 9.0, "ROUGE-L": 22.0}}}
    args = argparse.Namespace(corpus="cnndm")
    monkeypatch.setattr(short_targets, "paired_intervals", lambda a, b: [(1.0, 0.5, 1.5)] * 3)  # no files read
    monkeypatch.setattr(sys, "argv", ["short_targets.py", "--seeds", "1"])
    lines = short_targets.report(args, results, 0.0).splitlines()
    assert_made(lines[2:], "python scripts/experiments/short_targets.py --seeds 1")
    text = "\n".join(lines)
    assert "| 1 | before | old | 20.00 | 5.00 | 20.00 | 7 | 5.0 | 9.0 | 1.0 | 12.0 |" in text
    assert "| | LEAD-1 | | 25.00 |" in text and "**Below LEAD-1 on ROUGE-1**: seed 1 before old" in text
    assert "seed 1 after" not in text.split("**Below LEAD-1")[1].split("\n")[0]  # 30 > 25: not flagged
    assert "inconclusive (one seed: +1.00 [+0.50, +1.50])" in text and "| generate.sh --split test | 0 |" in text


def test_eos_attention_report_pairs_the_two_copy_sides_per_decoding(monkeypatch):
    from scripts.experiments import eos_attention

    def row(doubled):
        stutter = {"unk": 0, "doubled_first": 100.0 * sum(doubled) / len(doubled), "with_immediate_repeat": 50.0,
                   "with_repeat": 0.0, "tokens": 8.0}
        return {"rouge": {"ROUGE-1": 20.0, "ROUGE-2": 10.0, "ROUGE-L": 18.0}, "stutter": stutter, "per_doc": "x",
                "indicators": [[d, 1.0] for d in doubled]}

    doubled = {"renormalise": [1.0, 1.0, 1.0, 1.0], "generate": [0.0, 0.0, 0.0, 0.0]}
    rows = {f"{s}_{d}": row(doubled[s]) for s, d in eos_attention.ROWS}
    steps = {s: {"eos_step_1": 0.9, "overlap": 0.1, "p_gen_2": 0.3, "summaries": 4} for s in eos_attention.SETTINGS}
    results = {seed: {"rows": rows, "first_steps": steps, "trained_at": {"renormalise": "abc", "generate": "abc"}}
               for seed in (1, 2)}
    results["references"] = row([0.0])["stutter"]
    results["lead"] = {"name": "LEAD-20 characters", "rouge": {"ROUGE-1": 25.0, "ROUGE-2": 9.0, "ROUGE-L": 22.0}}
    monkeypatch.setattr(eos_attention, "paired_intervals", lambda a, b: [(0.0, -0.5, 0.5)] * 3)  # no files read
    monkeypatch.setattr(sys, "argv", ["eos_attention.py", "--seeds", "1", "2"])
    lines = eos_attention.report(argparse.Namespace(max_update=600, corpus="lcsts"), results, 0.0).splitlines()
    assert_made(lines[2:], "python scripts/experiments/eos_attention.py --seeds 1 2")
    text = "\n".join(lines)
    assert "| 1 | renormalise | old | 20.00 | 10.00 | 18.00 | 0 | 100.0 | 50.0 | 0.0 | 8.0 |" in text
    doubled_row = next(line for line in lines if line.startswith("| old | first token doubled"))
    assert "B < A in every seed (2): -100.00 [-100.00, -100.00]" in doubled_row  # every summary, both seeds
    immediate = next(line for line in lines if line.startswith("| new | summary with an immediate repeat"))
    assert "+0.00" in immediate and "inconclusive" in immediate  # the same indicators: no difference
    assert "| 2 | generate | 0.90 | 0.10 | 0.30 |" in text
    assert "| | LEAD-20 characters | | 25.00 |" in text and "**Below LEAD-20 characters on ROUGE-1**: seed 1" in text


def test_immediate_repeats_report_pairs_the_ban_with_the_defaults_per_model(monkeypatch):
    from scripts.experiments import eos_attention, immediate_repeats

    def row(repeats):
        stutter = {"unk": 0, "doubled_first": 0.0, "with_immediate_repeat": 100.0 * sum(repeats) / len(repeats),
                   "with_repeat": 0.0, "tokens": 8.0}
        return {"rouge": {"ROUGE-1": 20.0, "ROUGE-2": 10.0, "ROUGE-L": 18.0}, "stutter": stutter, "per_doc": "x",
                "indicators": [[0.0, r] for r in repeats]}

    repeats = {"defaults": [1.0] * 8 + [0.0] * 2, "ban": [0.0] * 10}
    rows = {f"{m}_{d}": row(repeats[d]) for m, d in immediate_repeats.ROWS}
    group = {"steps": 5, "copy_share": 0.98, "twice": 0.84, "moved": 0.66, "same_peak": 0.14}
    mechanism = {m: {"repeat": group, "other": dict(group, steps=300, copy_share=0.8)}
                 for m in immediate_repeats.MODELS}
    results = {seed: {"rows": rows, "mechanism": mechanism, "trained_at": {"before": "abc", "after": "abc"}}
               for seed in (1, 2)}
    results["references"] = row([0.0])["stutter"]
    results["lead"] = {"name": "LEAD-1", "rouge": {"ROUGE-1": 15.0, "ROUGE-2": 9.0, "ROUGE-L": 12.0}}
    monkeypatch.setattr(eos_attention, "paired_intervals", lambda a, b: [(0.0, -0.5, 0.5)] * 3)  # no files read
    monkeypatch.setattr(sys, "argv", ["immediate_repeats.py", "--seeds", "1", "2"])
    lines = immediate_repeats.report(argparse.Namespace(corpus="cnndm"), results, 0.0).splitlines()
    assert_made(lines[2:], "python scripts/experiments/immediate_repeats.py --seeds 1 2")
    text = "\n".join(lines)
    assert "| 2 | after | ban | 20.00 | 10.00 | 18.00 | 0 | 0.0 | 0.0 | 0.0 | 8.0 |" in text
    banned = next(line for line in lines if line.startswith("| after | summary with an immediate repeat"))
    assert "B < A in every seed (2): -80.00" in banned
    assert "| 1 | before | repeat: 5 | 0.98 | 0.84 | 0.66 | 0.14 |" in text
    assert "| 1 | before | other: 300 | 0.80 |" in text and "Below LEAD-1" not in text

"""The seed tables at paper scale (scripts/experiments/paper_scale.py): flops.py's new formulas against hand
counts, the formula picked for each built model, the full run's compare.py command (each system's paper updates),
bad inputs, and the dry run of See et al.'s and Paulus et al.'s tables on a slice of ../shared/data: its printed
parameters equal the built model's count, its FLOPs flops.py's, its times and memory positive.  The dry runs use
1 document per update here (--dry-run-batch 1) and run side by side to stay short (about 3 min of CPU in all, 7 min
of wall time with both cores shared by other jobs at load 5; Paulus et al.'s RL updates decode 100 steps over 50k
words); the paper's batches are measured in docs/results/paper_scale_dry_run.md."""
import json
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, command_env
from scripts.bench import flops
from scripts.experiments import compare, paper_scale

TINY = flops.Sizes(embed=2, encoder_hidden=3, decoder_hidden=4, attention=5, out_embed=3, vocab=7)  # C = 6
EXPERIMENTS = ROOT / "scripts" / "experiments"


# ---------------------------------------------------------------------------------------------- FLOPs
def test_luong_readout_flops_equal_a_hand_count():
    """E=2, He=3 (C=6), H=4, A=5, V=7; S=3, T=2: Shi et al.'s readout, no coverage input to the attention."""
    parts = flops.pgn_lstm_luong_forward(TINY, 3, 2)
    assert parts["decoder input"] == 48  # 2 x (2*2*2 + 2*4*2): x_t = W_x [y; h~], h~ of size H
    assert parts["readout"] == 160  # 2 x 2*(6+4)*4: W_c [c_t; s_t]
    assert parts["output layer"] == 112  # 2 x 2*4*7
    assert parts["copy switch"] == 16  # 2 x 2*4
    assert parts["attention scores"] == 120  # 2 x 3 x (5 + 5 + 10): no w_c c term
    assert sum(parts.values()) == 720 + 96 + 180 + 48 + 384 + 80 + 120 + 72 + 160 + 112 + 16


def test_global_gate_gru_flops_equal_a_hand_count():
    parts = flops.global_gate_gru_forward(TINY, 3, 2)
    assert parts == {
        "encoder": 540,  # 2 directions x 3 tokens x 2*3*3*(2+3)
        "initial state": 48,  # 2*6*4
        "attention keys": 240,  # 3 x 2*6*5 + 2*6*5 (E_a u_s once)
        "decoder GRU": 576,  # 2 x 2*3*4*(2+6+4)
        "attention query": 80,  # 2 x 2*4*5
        "attention scores": 120,  # 2 x 3 x (5 + 5 + 10)
        "context": 72,  # 2 x 3 x 2*6
        "readout": 360,  # 2 x 2*(2+6+4)*(2*3) + 2*6*(2*3)
        "output layer": 84,  # 2 x 2*3*7
        "global encoding": 288,  # 3 x 2*6*6 + 3 x 2*6 + 3 x 2*6
        "selective gate": 360,  # 3 x 2*6*6 + 2*12*6
    }
    plain = flops.global_gate_gru_forward(TINY, 3, 2, selective_gate=False, global_encoding=False, copy=True)
    assert "global encoding" not in plain and "selective gate" not in plain
    assert plain["attention keys"] == 180 and plain["readout"] == 288 and plain["copy switch"] == 48


def test_self_critical_update_counts_the_encoder_once_and_the_decoder_per_pass():
    count = flops.ModelCount(partial(flops.pgn_lstm_forward, TINY))
    pairs = (np.array([3]), np.array([2]))
    encoder, decoder = 720 + 96 + 180, 2028 - 996  # pgn_lstm's hand count (tests/test_bench.py): 2028 in all
    assert flops.ml_update_flops(count, pairs, batch=1) == 3 * 2028
    assert flops.self_critical_update_flops(count, pairs, batch=2) == 2 * (3 * encoder + 2 * decoder + 6 * decoder)
    assert flops.self_critical_update_flops(count, pairs, batch=1, ml=False) == 3 * encoder + 5 * decoder
    paulus = flops.ModelCount(partial(flops.paulus_forward, TINY), flops.paulus_per_batch(TINY))
    per_batch = sum(flops.paulus_per_batch(TINY).values())
    assert flops.ml_update_flops(paulus, pairs, 4) == 3 * (4 * sum(flops.paulus_forward(TINY, 3, 2).values())
                                                           + per_batch)


def parsed(options):
    """fairseq's arguments (architecture defaults filled in) for a summarization model with these options."""
    from fairseq import options as fairseq_options

    import fairseq_plugins

    fairseq_plugins.register()
    argv = ["unused", "--user-dir", str(ROOT / "fairseq_plugins"), "--task", "summarization", *options]
    return fairseq_options.parse_args_and_arch(fairseq_options.get_training_parser(), argv)


def test_model_count_uses_the_formula_of_the_model_fairseq_builds():
    cases = {
        "pgn_lstm_paulus2017": flops.paulus_forward,
        "pgn_lstm_see2017": flops.pgn_lstm_forward,
        "pgn_lstm_shi2018": flops.pgn_lstm_luong_forward,
        "global_gate_gru_song2020": flops.global_gate_gru_forward,
        "dca_lstm_celikyilmaz2018": flops.dca_lstm_forward,
    }
    for arch, formula in cases.items():
        count = flops.model_count(parsed(["--arch", arch]), 1000)
        assert count.per_pair.func is formula, arch
    see = flops.model_count(parsed(["--arch", "pgn_lstm_see2017"]), 1000).per_pair
    assert see.args[0] == flops.Sizes(embed=128, encoder_hidden=256, decoder_hidden=256, attention=512,
                                      out_embed=256, vocab=1000)
    assert flops.model_count(parsed(["--arch", "pgn_lstm_paulus2017"]), 1000).per_batch  # the tied W_out
    song = flops.model_count(parsed(["--arch", "global_gate_gru_song2020", "--no-selective-gate"]), 1000).per_pair
    assert song.args[0].attention == 512 and song.keywords["selective_gate"] is False  # attention: C = 2 x 256
    with pytest.raises(ValueError, match="count only all together"):
        flops.model_count(parsed(["--arch", "pgn_lstm", "--intra-decoder-attention"]), 1000)
    with pytest.raises(ValueError, match="no formula for --arch lstm"):
        flops.model_count(parsed(["--arch", "lstm"]), 1000)


# ---------------------------------------------------------------------------------------------- the full run
def test_the_full_run_gives_each_system_its_papers_updates(tmp_path):
    args = compare_args(tmp_path)
    cmd = list(map(str, paper_scale.compare_command(paper_scale.SEE2017, args, {})))
    assert cmd[cmd.index("--corpus") + 1] == "raw" and cmd[cmd.index("--raw") + 1] == str(tmp_path)
    assert cmd[cmd.index("--config") + 1] == "see2017_cnndm_paper"
    variants = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--variant"]
    assert [v.split()[0] for v in variants] == ["seq2seq+attn_50k", "pointer-generator"]
    assert [compare.own_updates(v, 0)[1] for v in variants] == [600_000, 230_000]
    assert cmd[cmd.index("--continue") + 1].split()[:3] == [
        "pointer-generator+coverage", "pointer-generator", "see2017_cnndm_paper"]
    assert cmd[cmd.index("--continue-updates") + 1] == "3000"
    assert cmd[cmd.index("--launcher"):cmd.index("--launcher") + 2] == ["--launcher", "slurm"]
    shi = list(map(str, paper_scale.compare_command(paper_scale.SHI2018, args, {"w2v": "/w/v.bin"})))
    rows = [shi[i + 1] for i, arg in enumerate(shi) if arg == "--variant"]
    assert len(rows) == 7 and "--encoder-embed-path /w/v.bin --encoder-freeze-embed" in rows[2]
    assert "{w2v}" not in " ".join(shi)


def compare_args(raw: Path):
    import argparse

    return argparse.Namespace(raw=raw, work=None, threads=1, launcher="slurm", gpus=1, partition="gpu",
                              account=None, time=None, sbatch_args="")


def test_compare_takes_a_systems_own_max_update():
    assert compare.own_updates("--copy --max-update 9 --seed 2", 5) == (["--copy", "--seed", "2"], 9)
    assert compare.own_updates("--copy", 5) == (["--copy"], 5)
    with pytest.raises(SystemExit, match="--max-update needs a number of updates in '--max-update x'"):
        compare.own_updates("--max-update x", 5)


def test_compare_dry_runs_its_own_command_lines_systems():
    import argparse

    args = argparse.Namespace(name="t", config="song2020_ttnews_paper", corpus="raw", dry_run_batch=None)
    table = paper_scale.command_line_table(args, [("full", "song2020_ttnews_paper", ["--copy"], None, 7),
                                                  ("rl", "song2020_ttnews_paper", [], "full", 3)])
    assert table.batch == 32 and table.slice == "lcsts"  # the config's batch; a Chinese config: LCSTS
    assert table.systems[0] == paper_scale.System("full", "song2020_ttnews_paper", "--copy", 7)
    assert table.systems[1].parent == "full" and table.systems[1].updates == 3
    tokens = argparse.Namespace(name="t", config="cnndm_small", corpus="cnndm", dry_run_batch=None)
    with pytest.raises(SystemExit, match="cnndm_small.conf batches by tokens: give --dry-run-batch N"):
        paper_scale.command_line_table(tokens, [])


def test_the_dictionary_is_padded_to_the_papers_vocabulary_before_the_markers(tmp_path):
    settings = {"vocab_size": 6, "sp_vocab_size": None}
    (tmp_path / "prep.json").write_text(json.dumps({"settings": settings}))
    (tmp_path / "dict.txt").write_text("the 9\nof 4\n<oov-0> 0\n<oov-1> 0\n")
    lines = paper_scale.pad_dictionary(tmp_path).read_text().splitlines()
    assert lines == ["the 9", "of 4", *(f"paper_vocab_filler_{k} 0" for k in range(4)), "<oov-0> 0", "<oov-1> 0"]
    settings.update(vocab_size=30000, sp_vocab_size=3)  # sentencepiece: the pieces bound the vocabulary
    (tmp_path / "prep.json").write_text(json.dumps({"settings": settings}))
    assert len(paper_scale.pad_dictionary(tmp_path).read_text().splitlines()) == 3 + 2


def test_a_bad_batch_for_names_the_tables():
    with pytest.raises(SystemExit) as stop:
        paper_scale.main(["--table", "all", "--batch-for", "nope=2"])
    assert stop.value.code == 2


@pytest.mark.slow
def test_bad_command_lines_stop_with_the_missing_input_named(tmp_path):
    see = subprocess.run([sys.executable, EXPERIMENTS / "see2017_table1.py"], capture_output=True, text=True,
                         env=command_env())
    assert see.returncode != 0 and "--scale paper needs --raw DIR (CNN/DailyMail story files" in see.stderr
    shi = subprocess.run([sys.executable, EXPERIMENTS / "shi2018_table1.py", "--scale", "paper", "--raw",
                          str(tmp_path)], capture_output=True, text=True, env=command_env())
    assert shi.returncode == 2 and "--scale paper needs --w2v FILE" in shi.stderr


# ---------------------------------------------------------------------------------------------- the dry run
LIMIT_MIB = 3072  # the dry runs' memory limit here: a system past it is stopped (the test machine is shared)


def start_dry_run(script: str, work: Path) -> subprocess.Popen:
    """SCRIPT --dry-run at 1 document per update, started (the two tables run side by side, one per core)."""
    return subprocess.Popen([sys.executable, EXPERIMENTS / script, "--dry-run", "--dry-run-batch", "1", "--work",
                             str(work), "--dry-run-memory-limit", str(LIMIT_MIB)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=command_env())


def finished(process: subprocess.Popen, work: Path):
    """(stdout, the JSON report) of a dry run started by ``start_dry_run``."""
    stdout, stderr = process.communicate()
    assert process.returncode == 0, stderr[-3000:]
    return stdout, json.loads((work / "dry_run.json").read_text())


def built_parameters(work: Path, config: str, options: str) -> int:
    """The parameters of the model fairseq builds from the dry run's data with CONFIG and OPTIONS."""
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = parsed(paper_scale.config_array(config, "TRAIN_ARGS") + options.split())
    args.data = str(work / "data" / "bin")
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    return sum(p.numel() for p in task.build_model(cfg.model).parameters())


def printed_row(stdout: str, label: str) -> list:
    line = next(line for line in stdout.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.slow
def test_dry_run_of_see_and_paulus_prints_consistent_figures(tmp_path):
    tables = (("see2017_table1.py", paper_scale.SEE2017), ("paulus2017_table.py", paper_scale.PAULUS2017))
    started = [start_dry_run(script, tmp_path / table.name) for script, table in tables]
    for process, (_, table) in zip(started, tables):
        work = tmp_path / table.name
        stdout, report = finished(process, work)
        rows = {row["system"]: row for row in report["rows"]}
        assert list(rows) == [system.label for system in table.systems]  # every system, in order
        pairs = flops.dataset_lengths(work / "data" / "bin")
        for system in table.systems:
            row = rows[system.label]
            printed = printed_row(stdout, system.label)
            assert int(printed[2].replace(",", "")) == row["parameters"] == built_parameters(
                work, system.config, row["options"])
            assert row["vocabulary"] >= 50_000 + 4  # the paper's 50k words (+ fairseq's specials, markers)
            assert not row["stopped_over_mib"], row  # Paulus's ML row too: one W_out per step-by-step pass
            assert float(printed[5]) > 0 and all(s > 0 for s in row["seconds"]) and len(row["seconds"]) == 3
            assert row["peak_rss_mib"] > row["rss_at_start_mib"] > 0
            assert row["paper_updates"] == system.updates and row["batch"] == 1 and row["paper_batch"] == table.batch
            expected = expected_update_flops(table, system, pairs)
            assert row["flops_per_update"] == pytest.approx(expected, rel=1e-12)
            assert row["flops_total"] == pytest.approx(expected * system.updates, rel=1e-12)
            assert float(printed[9]) == pytest.approx(row["flops_total"], rel=1e-3)
        assert (work / "dry_run.md").read_text().strip() in stdout


def expected_update_flops(table, system, pairs) -> float:
    """flops.py's count of one update at the paper's batch, from the paper's sizes written out here."""
    vocab = 50_000 + 4  # regular words + fairseq's specials
    if table is paper_scale.SEE2017:
        sizes = flops.Sizes(embed=128, encoder_hidden=256, decoder_hidden=256, attention=512, out_embed=256,
                            vocab=vocab)
        copy, coverage = "--no-copy" not in system.options, "--no-coverage" not in system.options
        count = flops.ModelCount(partial(flops.pgn_lstm_forward, sizes, copy=copy, coverage=coverage))
        return flops.ml_update_flops(count, pairs, table.batch)
    sizes = flops.Sizes(embed=100, encoder_hidden=200, decoder_hidden=400, vocab=vocab)
    count = flops.ModelCount(partial(flops.paulus_forward, sizes), flops.paulus_per_batch(sizes))
    if system.parent is None:
        return flops.ml_update_flops(count, pairs, table.batch)
    gamma = float(re.search(r"--rl-gamma ([\d.]+)", system.options).group(1))
    return flops.self_critical_update_flops(count, pairs, table.batch, ml=gamma < 1)


def test_a_gpu_dry_run_reports_hours_memory_and_the_recipe_with_its_parent():
    """On a GPU the report gives each row's hours and peak memory and the continued system's time with its
    parent's: See et al.'s 230k updates and then 3k with coverage.  A row stopped for memory gets no hours."""
    table = paper_scale.TABLES["see2017_table1"]
    common = dict(options="", config="see2017_cnndm_paper", parameters=1, vocabulary=50404, peak_rss_mib=1000.0,
                  rss_at_start_mib=600.0, flops_per_update=1e11, flops_total=1e16, gpu="Test GPU", gpu_peak_gib=0.5)
    rows = [dict(common, system="seq2seq+attn_50k", paper_updates=600_000, stopped_over_mib=8192.0),
            dict(common, system="pointer-generator", paper_updates=230_000, seconds_per_update=0.2),
            dict(common, system="pointer-generator+coverage", paper_updates=3_000, seconds_per_update=0.25)]
    text = paper_scale.report_text(table, rows, 16, "cuda")
    assert "On Test GPU, at 16 documents per update (paper: 16):" in text
    assert "- pointer-generator: 12.8 h for 230,000 updates at 200.0 ms/update, peak GPU memory 0.50 GiB" in text
    assert "- pointer-generator+coverage: 0.2 h for 3,000 updates at 250.0 ms/update" in text
    assert "with pointer-generator first: 13.0 h" in text  # 230k x 0.2 s + 3k x 0.25 s
    assert "- seq2seq+attn_50k:" not in text and "on the GPU" in text
    assert "On Test GPU" not in paper_scale.report_text(table, rows[1:], 16, "cpu")

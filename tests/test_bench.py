"""scripts/bench: the analytic FLOP counts against hand counts, the OpenNMT-py peer's command lines and its log
parsing on recorded lines, the blocking rows' command lines, the report's ratios and targets, and the plumbing of
one tiny run (3 updates, 10 sentences, two models twice) on LCSTS from ../shared/data.  The figures of such a run
mean nothing: the real runs, OpenNMT-py's included, are the benchmark, not tests."""
import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from test_distributed import ROOT, run

sys.path.insert(0, str(ROOT / "scripts" / "bench"))
import flops  # noqa: E402
import throughput  # noqa: E402
from peers import onmt  # noqa: E402

TINY = flops.Sizes(embed=2, encoder_hidden=3, decoder_hidden=4, attention=5, out_embed=3, vocab=7)  # C = 6


# ---------------------------------------------------------------------------------------------- FLOPs
def test_pgn_lstm_flops_equal_a_hand_count():
    """E=2, He=3 (C=6), H=4, A=5, O=3, V=7; one pair of S=3 source and T=2 target tokens."""
    parts = flops.pgn_lstm_forward(TINY, 3, 2)
    assert parts == {
        "encoder": 2 * 3 * 120,  # 2 directions x 3 tokens x 2*4*3*(2+3)
        "initial state": 96,  # 2 x 2*6*4
        "attention keys": 180,  # 3 x 2*6*5
        "decoder input": 64,  # 2 x (2*2*2 + 2*6*2)
        "decoder LSTM": 384,  # 2 x 2*4*4*(2+4)
        "attention query": 80,  # 2 x 2*4*5
        "attention scores": 180,  # 2 x 3 x (5 + 10 + 5 + 10)
        "context": 72,  # 2 x 3 x 2*6
        "readout": 120,  # 2 x 2*(4+6)*3
        "output layer": 84,  # 2 x 2*3*7
        "copy switch": 48,  # 2 x 2*(6+4+2)
    }
    assert flops.update_flops(parts) == 3 * 2028
    no_extras = flops.pgn_lstm_forward(TINY, 3, 2, copy=False, coverage=False)
    assert "copy switch" not in no_extras and no_extras["attention scores"] == 2 * 3 * 20  # no w_c c term


def test_fairseq_lstm_and_onmt_flops_equal_a_hand_count():
    assert sum(flops.fairseq_lstm_forward(TINY, 3, 2).values()) == (
        720  # encoder
        + 96  # encoder_hidden_proj, encoder_cell_proj: 2 x 2*6*4
        + 640  # decoder LSTM, input = embedding + previous output: 2 x 2*4*4*(2+4+4)
        + 96  # input_proj: 2 x 2*4*6
        + 72 + 72  # scores and context: 2 x 3 x 2*6 each
        + 160  # output_proj: 2 x 2*(6+4)*4
        + 112)  # fc_out: 2 x 2*4*7
    onmt_sizes = flops.Sizes(embed=2, encoder_hidden=3, decoder_hidden=6, attention=6, vocab=7)
    assert sum(flops.onmt_rnn_forward(onmt_sizes, 3, 2, copy=True).values()) == (
        720  # encoder 2 x 3
        + 1344  # decoder LSTM: 2 x 2*4*6*(2+6+6)
        + 216 + 144  # linear_context once per source: 3 x 2*6*6; linear_query: 2 x 2*6*6
        + 144  # scores: 2 x 3 x (6 + 6 + 12)
        + 72  # context: 2 x 3 x 2*6
        + 288  # linear_out: 2 x 2*12*6
        + 168  # generator: 2 x 2*6*7
        + 24)  # linear_copy: 2 x 2*6
    with pytest.raises(ValueError, match="decoder size"):
        flops.onmt_rnn_forward(TINY, 3, 2)  # decoder 4 != 2 x 3: OpenNMT-py cannot build it


def test_flops_per_target_token_sums_every_pair():
    """Per-document terms (the initial state) count once per pair; the result is total work / target tokens."""
    src, tgt = np.array([3, 5, 2]), np.array([2, 4, 1])
    expected = sum(flops.update_flops(flops.pgn_lstm_forward(TINY, s, t)) for s, t in zip(src, tgt)) / 7
    got = flops.flops_per_target_token(lambda s, t: flops.pgn_lstm_forward(TINY, s, t), (src, tgt))
    assert got == pytest.approx(expected)
    with pytest.raises(ValueError):
        flops.flops_per_target_token(lambda s, t: flops.pgn_lstm_forward(TINY, s, t), (src, tgt[:2]))


# ---------------------------------------------------------------------------------------------- OpenNMT-py peer
RECORDED_TRAIN_LOG = """\
[2026-11-23 13:24:35,888 INFO]  * src vocab size = 4004
[2026-11-23 13:24:35,888 INFO]  * tgt vocab size = 4004
[2026-11-23 13:24:35,889 INFO] Starting training on CPU, could be very slow
[2026-11-23 13:24:41,645 INFO] Step  1/    3; acc: 0.4; ppl: 2903.0; xent: 8.0; lr: 0.00100; sents:      15; bsz: 1500/ 265/15; 261/ 46 tok/s;      6 sec;
[2026-11-23 13:24:43,376 INFO] Step  2/    3; acc: 0.4; ppl: 3649.0; xent: 8.2; lr: 0.00100; sents:      12; bsz: 1416/ 240/12; 818/139 tok/s;      7 sec;
[2026-11-23 13:24:45,770 INFO] Step  3/    3; acc: 0.5; ppl: 1492.4; xent: 7.3; lr: 0.00100; sents:      15; bsz: 1409/ 193/15; 588/ 81 tok/s;     10 sec;
[2026-11-23 13:24:45,772 INFO] Saving checkpoint /work/main/runs/bench/models/onmt_copy_cov/model_step_3.pt
"""


def test_onmt_training_log_is_parsed():
    assert onmt.parse_train_log(RECORDED_TRAIN_LOG) == [
        {"step": 1, "src_tok_s": 261.0, "tgt_tok_s": 46.0},
        {"step": 2, "src_tok_s": 818.0, "tgt_tok_s": 139.0},
        {"step": 3, "src_tok_s": 588.0, "tgt_tok_s": 81.0}]
    assert onmt.train_tokens_per_second(RECORDED_TRAIN_LOG) == pytest.approx((139 + 81) / 2)  # first: warm-up
    assert onmt.vocab_size(RECORDED_TRAIN_LOG) == 4004
    step_10k = "[x INFO] Step 10000/20000; acc: 55.1; ppl:  12.3; xent: 2.5; lr: 0.00100; sents:    3000; " \
               "bsz: 3900/ 700/30; 12345/2345 tok/s;   3600 sec;"
    assert onmt.parse_train_log(step_10k) == [{"step": 10000, "src_tok_s": 12345.0, "tgt_tok_s": 2345.0}]
    with pytest.raises(ValueError, match="need 2"):
        onmt.train_tokens_per_second(RECORDED_TRAIN_LOG.split("Step  2")[0])


def test_onmt_decode_output_is_parsed():
    recorded = ("[2026-11-23 13:24:52,066 INFO] PRED SCORE: -3.6635, PRED PPL: 39.00 NB SENTENCES: 10\n"
                "BENCH-DECODE sentences=10 seconds=2.5000 tokens=130\n")
    assert onmt.parse_decode(recorded) == {"decode_sentences": 10, "decode_sent_per_s": 4.0,
                                           "decode_tok_per_s": 52.0, "hyp_len": 13.0}
    with pytest.raises(ValueError, match="BENCH-DECODE"):
        onmt.parse_decode("Traceback ...\nKeyError: 'src_map'\n")


def test_onmt_train_command_has_the_benchmark_settings():
    python = Path("/w/peers/onmt/venv/bin/python")
    cmd = onmt.train_command(python, "onmt_copy_cov", Path("c.yaml"), Path("vocab.txt"), 4004, Path("m/model"),
                             updates=60, max_tokens=4000, log_interval=10, train_documents=8666)
    assert cmd[0] == "/w/peers/onmt/venv/bin/onmt_train"
    options = " ".join(cmd)
    for expected in ("-config c.yaml", "-src_vocab vocab.txt", "-src_vocab_size 4004", "-tgt_vocab_size 4004",
                     "-encoder_type brnn", "-rnn_type LSTM", "-word_vec_size 128", "-enc_hid_size 512",
                     "-dec_hid_size 512", "-global_attention mlp", "-input_feed 1", "-dropout 0.1",
                     "-copy_attn -reuse_copy_attn -coverage_attn -lambda_coverage 1", "-optim adam",
                     "-learning_rate 0.001", "-max_grad_norm 2", "-batch_type tokens -batch_size 4000",
                     "-bucket_size 8666", "-num_workers 0", "-train_steps 60", "-save_checkpoint_steps 60",
                     "-report_every 10", "-seed 1", "-save_model m/model"):
        assert f" {expected}" in f" {options}", expected
    plain = " ".join(onmt.train_command(python, "onmt", Path("c.yaml"), Path("v"), 4004, Path("m"), 60, 4000, 10,
                                        8666, hidden=256))
    assert "copy_attn" not in plain and "coverage" not in plain
    assert "-enc_hid_size 256 -dec_hid_size 256" in plain
    with pytest.raises(ValueError, match="variant"):
        onmt.train_command(python, "onmt_transformer", Path("c"), Path("v"), 1, Path("m"), 1, 1, 1, 1)
    assert onmt.checkpoint_path(Path("m/model"), 60) == Path("m/model_step_60.pt")


@pytest.mark.parametrize("min_len, block, expected_min, blocked", [
    (40, 3, 41, True),  # fixed: 40 tokens + </s> in fairseq = 41 steps = 41 OpenNMT-py tokens
    (1, 0, 1, False),  # the models' own lengths
    (10, 3, 10, True)])
def test_onmt_decode_command_matches_fairseq_lengths(min_len, block, expected_min, blocked):
    cmd = onmt.decode_command(Path("/v/bin/python"), Path("m.pt"), Path("d.src"), Path("h.txt"), beam=5,
                              max_len_b=40, min_len=min_len, batch_size=32, block_ngram_repeat=block)
    assert cmd[:3] == ["/v/bin/python", "-P", str(onmt.DECODE_DRIVER)]  # -P: peers/onmt.py must not shadow onmt
    options = " ".join(cmd[3:])
    assert (f"-model m.pt -src d.src -output h.txt -beam_size 5 -min_length {expected_min} -max_length 41 "
            "-batch_size 32 -batch_type sents -gpu -1") in options
    assert ("-block_ngram_repeat 3" in options) == blocked


def test_onmt_text_restores_markers_and_keeps_the_regular_vocabulary(tmp_path):
    prepared = tmp_path / "prepared"
    (prepared / "tok").mkdir(parents=True)
    (prepared / "dict.txt").write_text("， 10\n的 5\n<oov-0> 0\n<oov-1> 0\n", encoding="utf-8")
    (prepared / "tok" / "train.src").write_text("<oov-0> 的 <oov-1> <oov-0>\n的 ，\n", encoding="utf-8")
    (prepared / "tok" / "train.tgt").write_text("<oov-1> 的\n<unk>\n", encoding="utf-8")
    (prepared / "tok" / "train.oov").write_text("甲\t乙\n\n", encoding="utf-8")
    (prepared / "tok" / "valid.src").write_text("<oov-0> ，\n的\n", encoding="utf-8")
    (prepared / "tok" / "valid.oov").write_text("丙\n\n", encoding="utf-8")
    files = onmt.prepare_text(prepared, tmp_path / "out", decode_sentences=1)
    assert files["train.src"].read_text(encoding="utf-8") == "甲 的 乙 甲\n的 ，\n"
    assert files["train.tgt"].read_text(encoding="utf-8") == "乙 的\n<unk>\n"
    assert files["decode.src"].read_text(encoding="utf-8") == "丙 ，\n"  # only the sentences fairseq decodes
    assert files["vocab.txt"].read_text(encoding="utf-8") == "， 10\n的 5\n" and files["regular_words"] == 2


def test_onmt_install_failure_is_a_skip_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(onmt.sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(onmt.PeerUnavailable, match="creating the OpenNMT-py virtual environment"):
        onmt.ensure_venv(tmp_path)


# ---------------------------------------------------------------------------------------------- blocking rows
def bench_args(**overrides):
    args = argparse.Namespace(max_tokens=4000, updates=60, log_interval=10, device="cpu", beam=5, max_len_b=40,
                              batch_size=32, block_ngram_repeat=3, repeats=1, onmt_hidden=512, min_len=None,
                              lengths="fixed,own")
    vars(args).update(overrides)
    args.modes = throughput.decode_modes(args)
    return args


def test_blocking_rows_command_lines():
    args = bench_args()
    assert args.modes == {"fixed": 40, "own": 1}
    ours = [str(c) for c in throughput.fairseq_decode_command("pgn_lstm", args, Path("sub"), Path("m"), 1, 3)]
    line = " ".join(ours)
    assert "--task summarization" in line and "--block-ngram-repeat 3" in line
    assert "--no-repeat-ngram-size" not in line and "--min-len 1 " in line and "--beam 5" in line
    assert "--max-len-a 0 --max-len-b 40" in line and "--quiet" not in line  # hypotheses printed for rep3
    stock = " ".join(map(str, throughput.fairseq_decode_command("lstm", args, Path("sub"), Path("m"), 40, 3)))
    assert "--task translation -s src -t tgt --required-batch-size-multiple 1" in stock
    assert "--no-repeat-ngram-size 3" in stock and "--block-ngram-repeat" not in stock and "--min-len 40" in stock
    for name in ("lstm", "pgn_lstm"):
        plain = " ".join(map(str, throughput.fairseq_decode_command(name, args, Path("s"), Path("m"), 40, 0)))
        assert "ngram" not in plain
    assert bench_args(min_len=7).modes == {"own": 7} and bench_args(lengths="fixed").modes == {"fixed": 40}
    with pytest.raises(SystemExit):
        bench_args(lengths="fixed,longest")


def test_repeated_trigrams():
    assert throughput.repeated_trigram_percent([["a", "b", "c", "a", "b", "c"], ["x", "y"]]) == pytest.approx(25.0)
    assert throughput.repeated_trigram_percent([]) == 0.0


# ---------------------------------------------------------------------------------------------- report
def synthetic_results():
    """pgn_lstm twice OpenNMT-py's copy + coverage, blocking costing 4% (fixed) and 10% (own)."""
    def row(wps, mfu, fixed, fixed_blocked, own, own_blocked):
        figures = {"train_wps": wps, "train_peak_mb": 800.0, "train_mflop_per_token": 43.0,
                   "train_gflops": 43.0 * wps / 1000, "train_mfu": mfu, "train_wps_runs": [wps]}
        for mode, off, on in (("fixed", fixed, fixed_blocked), ("own", own, own_blocked)):
            for blocked, value in ((False, off), (True, on)):
                figures.update({throughput.decode_key(mode, blocked, "decode_sent_per_s"): value,
                                throughput.decode_key(mode, blocked, "hyp_len"): 41.0,
                                throughput.decode_key(mode, blocked, "rep3"): 0.0 if blocked else 20.0,
                                throughput.decode_key(mode, blocked, "decode_peak_mb"): 500.0})
        return figures

    return {"onmt_copy_cov": row(1000.0, 0.1, 10.0, 8.0, 12.0, 10.0),
            "lstm": row(1500.0, 0.2, 15.0, 15.0, 20.0, 20.0),
            "pgn_lstm": row(2000.0, 0.36, 50.0, 48.0, 60.0, 54.0)}


def test_report_ratios_and_targets():
    machine = {"description": "CPU: test", "caches": "L2 1 MiB per CPU", "peak_gflops": 290.0,
               "peak_sizes": [2048], "peak_before": 280.0, "peak_after": 290.0}
    text = throughput.report(synthetic_results(), bench_args(), Path("bin"), "valid", 200, machine, [])
    lines = set(text.splitlines())
    for expected in (
            "ratio pgn_lstm / onmt_copy_cov, training tokens/s: 2.00 (target >= 1.5: met)",
            "ratio pgn_lstm / onmt_copy_cov, decode sentences/s, fixed, blocked: 6.00 (target >= 1.5: met)",
            "MFU pgn_lstm training, percent: 36.00 (target >= 35: met)",
            "blocking cost pgn_lstm, fixed, percent of decode speed: 4.00 (target <= 5: met)",
            "blocking cost pgn_lstm, own, percent of decode speed: 10.00 (target <= 5: MISSED)",
            "ratio pgn_lstm blocked / lstm --no-repeat-ngram-size, decode sentences/s, fixed: 3.20 (target >= 2: met)",
            "ratio pgn_lstm / lstm, training words/s: 1.33 (target >= 1: met)",
            "fp32 matmul peak: 290.0 GFLOP/s (best of n = 2048; 280.0 before the runs, 290.0 after)"):
        assert expected in lines, (expected, text)
    row = re.search(r"^pgn_lstm\s+2000\.0\s+43\.00\s+86\.00\s+36\.0\s+800\.0\s+1\.00$", text, re.M)
    assert row, text
    assert re.search(r"^onmt_copy_cov\s+1000\.0 .* 0\.50$", text, re.M)  # tok/s / pgn_lstm
    assert re.search(r"^lstm\s+15\.00\s+41\.0\s+20\.0\s+500\.0\s+15\.00\s+41\.0\s+0\.0\s+0\.0\s+0\.30\s+0\.31 \*$",
                     text, re.M), text
    assert "blocks nothing on a CPU in fairseq 0.12.x" in text


# ---------------------------------------------------------------------------------------------- one tiny run
@pytest.fixture(scope="module")
def bench(shared_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    result = run([sys.executable, "scripts/bench/throughput.py", "--updates", "3", "--decode-sentences", "10",
                  "--max-tokens", "1500", "--max-len-b", "12", "--lengths", "fixed", "--device", "cpu",
                  "--work", work, "--repeats", "2", "--peak-sizes", "256", "--json", work / "figures.json"])
    return result.stdout, json.loads((work / "figures.json").read_text())


def test_tiny_run_reports_every_figure(bench):
    stdout, figures = bench
    assert figures["decode_sentences"] == 10 and figures["repeats"] == 2 and figures["modes"] == {"fixed": 12}
    assert "decoding, fixed length: the first 10 sentences of valid, beam 5, --max-len-b 12, --min-len 12" in stdout
    assert re.search(r"^CPU: .+; torch .+ with 1 threads", stdout, re.M)
    peak = figures["machine"]["peak_gflops"]
    assert peak > 0
    for name in ("lstm", "pgn_lstm"):
        model = figures["models"][name]
        runs = model["train_wps_runs"]
        assert len(runs) == 2 and model["train_wps"] == pytest.approx(sum(runs) / 2)  # median of two
        assert model["train_gflops"] == pytest.approx(model["train_mflop_per_token"] * model["train_wps"] / 1000)
        assert model["train_mfu"] == pytest.approx(model["train_gflops"] / peak)
        assert model["train_peak_mb"] > 100 and model["fixed_decode_peak_mb"] > 100  # python with torch: real RSS
        for blocked in ("", "_blocked"):
            assert model[f"fixed{blocked}_decode_sentences"] == 10  # the subset, every sentence
            assert model[f"fixed{blocked}_hyp_len"] == 13.0  # 12 tokens and </s>, every hypothesis
        row = re.search(rf"^{name}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", stdout, re.M)
        assert row and float(row.group(1)) == pytest.approx(model["train_wps"], abs=0.06), stdout
    ours = figures["models"]["pgn_lstm"]
    assert ours["fixed_blocked_rep3"] == 0.0  # the project's blocking: no trigram twice
    assert ours["fixed_rep3"] > 0.0  # a 3-update model repeats itself when it must write 12 tokens
    stock = figures["models"]["lstm"]
    assert stock["fixed_blocked_rep3"] == stock["fixed_rep3"] > 0.0  # fairseq's own blocking does nothing on a CPU
    found = re.search(r"^ratio pgn_lstm / lstm, training words/s: ([\d.]+) \(target >= 1: (met|MISSED)\)$", stdout,
                      re.M)
    assert found and float(found.group(1)) == pytest.approx(ours["train_wps"] / stock["train_wps"], abs=0.006)


def test_old_name_runs_the_same_benchmark():
    result = run([sys.executable, "scripts/bench/train_throughput.py", "--help"])
    assert "--decode-sentences" in result.stdout and "--peers" in result.stdout

"""scripts/bench: the analytic FLOP counts against hand counts (pgn_lstm, Paulus et al.'s options, dca_lstm,
fairseq's lstm, OpenNMT-py), the models the --all-models rows really build, the OpenNMT-py peer's command lines and
its log parsing on recorded lines, the blocking rows' and the new rows' command lines, the report's ratios and
targets, and the plumbing of two tiny runs on LCSTS from ../shared/data (3 updates, 10 sentences, two models
twice; then the Paulus, dca_lstm and RL rows once).  The figures of such a run mean nothing: the real runs,
OpenNMT-py's included, are the benchmark, not tests."""
import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, run
from scripts.bench import flops, throughput
from scripts.bench import throughput_measures as measures
from scripts.bench import throughput_runners as runners
from scripts.bench.peers import onmt

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


def test_paulus_flops_equal_a_hand_count():
    """E=2, He=3 (C=6), H=4, V=7 (the bilinear attentions have no inner size, the readout no projection):
    readout D = H + C + H = 14; one pair of S=3 source and T=3 target tokens."""
    parts = flops.paulus_forward(TINY, 3, 3)
    assert parts == {
        "encoder": 2 * 3 * 120,  # 2 directions x 3 tokens x 2*4*3*(2+3)
        "initial state": 96,  # 2 x 2*6*4
        "attention keys": 144,  # W^e_attn h^e_i: 3 x 2*6*4
        "decoder LSTM": 576,  # 3 x 2*4*4*(2+4): the embedding alone is the input
        "attention scores": 72,  # 3 x 3 x 2*4
        "context": 108,  # 3 x 3 x 2*6
        "intra-decoder query": 64,  # steps 2 and 3: 2 x 2*4*4
        "intra-decoder scores": 24,  # pairs t' < t: (2,1), (3,1), (3,2) = 3 x 2*4
        "intra-decoder context": 24,  # 3 x 2*4
        "output layer": 588,  # 3 x 2*14*7
        "copy switch": 84,  # 3 x 2*14
    }
    assert flops.paulus_per_batch(TINY) == {"output matrix": 392}  # tanh(W_emb W_proj): 2*7*2*14
    one_step = flops.paulus_forward(TINY, 3, 1)
    assert one_step["intra-decoder query"] == one_step["intra-decoder scores"] == 0  # c^d_1 = 0: no work


def test_dca_lstm_flops_equal_a_hand_count():
    """E=2, H=3 (agent states and each direction), Hd=4, A=5, O=3, V=7; M=2 agents, K=1 contextual layer; one
    pair of S=4 source tokens (over both agents) and T=2 target tokens."""
    parts = flops.dca_lstm_forward(TINY, 4, 2, agents=2, contextual_layers=1)
    assert parts == {
        "local BiLSTM": 960,  # 2 directions x 4 tokens x 2*4*3*(2+3)
        "local projection": 144,  # W1: 4 x 2*6*3
        "message combination": 108,  # W3 h: 4 x 2*3*3, W4 z: 2 agents x 2*3*3
        "contextual BiLSTMs": 1152,  # 2 directions x 4 x 2*4*3*(3+3)
        "contextual projections": 144,  # W2: 4 x 2*6*3
        "initial state": 72,  # cell from [c->; c<-]: 2*6*4; s_0 projected (Hd != H): 2*3*4
        "decoder LSTM": 384,  # 2 x 2*4*4*(2+4)
        "word attention keys": 120,  # 4 x 2*3*5
        "word attention query": 80,  # 2 x 2*4*5
        "word attention scores": 160,  # 2 x 4 x (5 + 5 + 10)
        "agent contexts": 48,  # 2 x 4 x 2*3
        "agent attention keys": 120,  # 2 steps x 2 agents x 2*3*5
        "agent attention query": 80,  # 2 x 2*4*5
        "agent attention scores": 80,  # 2 x 2 x (5 + 5 + 10)
        "document context": 24,  # 2 x 2 x 2*3
        "readout": 120,  # 2 x 2*(4+3+3)*3
        "output layer": 84,  # 2 x 2*3*7
        "copy switch": 48,  # 2 x (2 agents x 2*3 + 2*4 + 2*2)
    }
    plain = flops.dca_lstm_forward(TINY, 4, 2, agents=2, contextual_layers=0, contextual_agent_attention=False,
                                   copy=False)
    assert "copy switch" not in plain and plain["readout"] == 84  # 2 x 2*(4+3)*3
    assert plain["contextual BiLSTMs"] == plain["message combination"] == 0


def test_per_batch_terms_count_once_per_batch():
    src, tgt = np.array([3, 5, 2, 8]), np.array([2, 4, 1, 3])
    # fairseq's order (by target, then source length): documents 2, 0, 1, 3 costing 2, 3, 5, 8 tokens; with 10
    # tokens a batch (padded to its longest): {2, 0} (2 x 3), {1} (5: 2 x 5 > 10), {3}
    assert flops.batch_count((src, tgt), max_tokens=10) == 3
    assert flops.batch_count((src, tgt), max_tokens=100) == 1
    with pytest.raises(ValueError, match="does not fit --max-tokens 7"):
        flops.batch_count((src, tgt), max_tokens=7)
    count = flops.ModelCount(lambda s, t: flops.paulus_forward(TINY, s, t), flops.paulus_per_batch(TINY))
    per_pair = sum(flops.update_flops(flops.paulus_forward(TINY, s, t)) for s, t in zip(src, tgt))
    assert count.per_target_token((src, tgt), batches=3) == pytest.approx((per_pair + 3 * 3 * 392) / 10)
    shares = count.shares((src, tgt), batches=3)
    assert sum(shares.values()) == pytest.approx(1.0) and shares["output matrix (per batch)"] == pytest.approx(
        3 * 3 * 392 / (per_pair + 3 * 3 * 392))
    with pytest.raises(ValueError, match="number of batches"):
        count.per_target_token((src, tgt))


def test_flops_per_target_token_sums_every_pair():
    """Per-document terms (the initial state) count once per pair; the result is total work / target tokens."""
    src, tgt = np.array([3, 5, 2]), np.array([2, 4, 1])
    expected = sum(flops.update_flops(flops.pgn_lstm_forward(TINY, s, t)) for s, t in zip(src, tgt)) / 7
    got = flops.flops_per_target_token(lambda s, t: flops.pgn_lstm_forward(TINY, s, t), (src, tgt))
    assert got == pytest.approx(expected)
    with pytest.raises(ValueError):
        flops.flops_per_target_token(lambda s, t: flops.pgn_lstm_forward(TINY, s, t), (src, tgt[:2]))


# ---------------------------------------------------------------------------------------------- the new rows' models
def build_row(name: str, data_dir: Path):
    """The model of a benchmark row, built as fairseq-train builds it from the row's options and SIZES."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_plugins

    fairseq_plugins.register()
    argv = [str(data_dir), "--user-dir", str(ROOT / "fairseq_plugins"), "--task", "summarization", "-s", "src",
            "-t", "tgt", *throughput.MODELS[name], *runners.SIZES, "--optimizer", "adam", "--lr", "0.001", "--cpu"]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    return tasks.setup_task(cfg.task).build_model(cfg.model)


@pytest.fixture(scope="module")
def row_data(tmp_path_factory):
    """Dictionaries laid out as summ-prepare writes them (regular characters, the full stop, OOV markers)."""
    from conftest import tiny_dictionary

    data = tmp_path_factory.mktemp("row_data")
    dictionary = tiny_dictionary("的 是 一 了 。 ， 在", num_markers=5)
    for lang in ("src", "tgt"):
        dictionary.save(str(data / f"dict.{lang}.txt"))
    return data


def shapes(model) -> dict:
    return {name: tuple(parameter.shape) for name, parameter in model.named_parameters()}


def test_paulus_row_builds_the_stated_model(row_data):
    """The SIZES options override pgn_lstm_paulus2017's own sizes (emb 100, encoder 2 x 200, decoder 400): emb 128,
    encoder 2 x 256, decoder 256, with every Paulus option on and no coverage or input feeding."""
    from fairseq_plugins.modules.readouts import PaulusReadout

    model = build_row("pgn_lstm_paulus2017", row_data)
    got = shapes(model)
    expected = {
        "encoder.embed_tokens.weight": (7 + 4 + 5, 128),  # specials, 7 words, 5 markers
        "encoder.lstm.weight_ih_l0": (4 * 256, 128), "encoder.lstm.weight_hh_l0_reverse": (4 * 256, 256),
        "decoder.embed_tokens.weight": (16, 128),
        "decoder.lstm.weight_ih_l0": (4 * 256, 128),  # the previous word's embedding only: no input feeding
        "decoder.lstm.weight_hh_l0": (4 * 256, 256),
        "decoder.attention.weight": (256, 512),  # W^e_attn, intra-temporal (eqs 1-5)
        "decoder.intra_attention.weight": (256, 256),  # W^d_attn (eqs 6-8)
        "decoder.output_projection.proj": (128, 1024),  # W_proj of tanh(W_emb W_proj), [h; c^e; c^d] (eq 13)
        "decoder.readout.switch.proj.weight": (1, 1024),  # eq 11
    }
    assert {key: got.get(key) for key in expected} == expected
    decoder = model.decoder
    assert isinstance(decoder.readout, PaulusReadout) and not decoder.feeds_back and decoder.intra_temporal
    assert decoder.copy and not decoder.coverage and "decoder.output_projection.weight" not in got
    assert not any("coverage" in key for key in got)
    assert flops.paulus_readout_size(flops.Sizes()) == 1024  # the count's sizes are the model's


def test_dca_row_builds_the_stated_model(row_data):
    """emb 128, agent BiLSTMs 2 x 256 projected to 256, M = 3 agents split at the full stop, K = 2, decoder 256."""
    model = build_row("dca_lstm", row_data)
    got = shapes(model)
    expected = {
        "encoder.agents.local.forward_lstm.weight_ih_l0": (4 * 256, 128),
        "encoder.agents.local.backward_lstm.weight_hh_l0": (4 * 256, 256),
        "encoder.agents.local.projection.weight": (256, 512),
        "encoder.agents.contextual.1.forward_lstm.weight_ih_l0": (4 * 256, 256),
        "encoder.agents.combine.1.message.weight": (256, 256),
        "decoder.lstm.weight_ih_l0": (4 * 256, 128), "decoder.lstm.weight_hh_l0": (4 * 256, 256),
        "decoder.word_attention.key_proj.weight": (256, 256), "decoder.agent_attention.query_proj.weight": (256, 256),
        "decoder.pre_output.weight": (256, 256 + 2 * 256),  # [s_t; c*_t; c*_{t-1}]
        "decoder.switch.proj.weight": (1, 256 + 256 + 128),
    }
    assert {key: got.get(key) for key in expected} == expected
    encoder = model.encoder
    assert encoder.num_agents == runners.DCA_AGENTS == 3 and len(encoder.agents.contextual) == runners.DCA_LAYERS
    assert encoder.split == "sentences" and encoder.dictionary.index("。") in encoder.boundaries.tolist()
    assert "encoder.agents.combine.0.v1.weight" not in got and model.decoder.copy


def test_model_flops_of_the_new_rows(row_data):
    counts = throughput.model_flops(row_data)
    regular = 4 + 7  # the output layer's rows: everything before the first marker
    assert counts["pgn_lstm_paulus2017"].per_batch == {"output matrix": 2 * regular * 128 * 1024}
    assert counts["pgn_lstm_paulus2017"].per_pair(10, 5) == flops.paulus_forward(flops.Sizes(vocab=regular), 10, 5)
    assert counts["dca_lstm"].per_pair(10, 5) == flops.dca_lstm_forward(flops.Sizes(vocab=regular), 10, 5, 3, 2)
    assert not counts["dca_lstm"].per_batch and not counts["pgn_lstm"].per_batch


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


@pytest.mark.slow
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
    ours = [str(c) for c in runners.fairseq_decode_command("pgn_lstm", args, Path("sub"), Path("m"), 1, 3)]
    line = " ".join(ours)
    assert "--task summarization" in line and "--block-ngram-repeat 3" in line
    assert "--no-repeat-ngram-size" not in line and "--min-len 1 " in line and "--beam 5" in line
    assert "--max-len-a 0 --max-len-b 40" in line and "--quiet" not in line  # hypotheses printed for rep3
    stock = " ".join(map(str, runners.fairseq_decode_command("lstm", args, Path("sub"), Path("m"), 40, 3)))
    assert "--task translation -s src -t tgt --required-batch-size-multiple 1" in stock
    assert "--no-repeat-ngram-size 3" in stock and "--block-ngram-repeat" not in stock and "--min-len 40" in stock
    for name in ("lstm", "pgn_lstm"):
        plain = " ".join(map(str, runners.fairseq_decode_command(name, args, Path("s"), Path("m"), 40, 0)))
        assert "ngram" not in plain
    assert bench_args(min_len=7).modes == {"own": 7} and bench_args(lengths="fixed").modes == {"fixed": 40}
    with pytest.raises(SystemExit):
        bench_args(lengths="fixed,longest")


def test_new_rows_command_lines():
    args = bench_args()
    for name, expected in (("pgn_lstm_paulus2017", "--arch pgn_lstm_paulus2017 --criterion focal_copy_coverage "
                                                   "--coverage-lambda 0"),
                           ("dca_lstm", "--arch dca_lstm --num-agents 3 --contextual-layers 2 --criterion "
                                        "semantic_cohesion --cohesion-lambda 0.1 --coverage-lambda 0")):
        train = " ".join(map(str, runners.fairseq_train_command(name, args, Path("bin"), Path("m"))))
        assert f"--task summarization {expected} {' '.join(runners.SIZES)} --optimizer adam" in train
        assert "--max-tokens 4000 --max-update 60" in train and "--agent-boundaries" not in train  # the default
        decode = " ".join(map(str, runners.fairseq_decode_command(name, args, Path("s"), Path("m"), 40, 3)))
        assert "--task summarization" in decode and "--block-ngram-repeat 3" in decode and "--beam 5" in decode
        assert "--path m/checkpoint_last.pt" in decode and "--min-len 40" in decode


def test_training_loads_batches_in_a_worker_on_a_gpu_and_in_the_process_on_a_cpu():
    for device, workers, cpu_flag in (("cpu", "0", True), ("cuda", "1", False)):
        train = " ".join(map(str, runners.fairseq_train_command("pgn_lstm", bench_args(device=device), Path("bin"),
                                                                Path("m"))))
        assert f"--num-workers {workers} " in train + " " and ("--cpu" in train) == cpu_flag


def test_row_selection_and_the_rl_call(tmp_path):
    assert throughput.parse_args([]).models == ["lstm", "pgn_lstm"]
    assert throughput.parse_args(["--all-models"]).models == [
        "lstm", "pgn_lstm", "pgn_lstm_a512", "pgn_lstm_paulus2017", "dca_lstm"]
    assert throughput.parse_args(["--models", "pgn_lstm,dca_lstm", "--rl"]).models == ["pgn_lstm", "dca_lstm"]
    for wrong in (["--models", "pgn_lstm,transformer"], ["--models", "lstm", "--rl"], ["--rl", "--rl-batches", "0"],
                  ["--rl", "--rl-checkpoint", str(tmp_path / "missing.pt")]):
        with pytest.raises(SystemExit):
            throughput.parse_args(wrong)
    args = throughput.parse_args(["--rl", "--repeats", "3", "--max-len-b", "30", "--max-tokens", "2000",
                                  "--work", str(tmp_path)])
    assert measures.rl_call(args, Path("bin")) == dict(
        data_bin=Path("bin"), arch="pgn_lstm", checkpoint=tmp_path / "models" / "pgn_lstm" / "checkpoint_last.pt",
        extra=runners.SIZES, rl_args=["--rl-max-len-b", "30"], ml_args=["--focal-alpha", "1", "--focal-gamma", "0"],
        batches=10, rounds=3, max_tokens=2000)
    (tmp_path / "ml.pt").write_bytes(b"")
    args = throughput.parse_args(["--models", "lstm", "--rl", "--rl-checkpoint", str(tmp_path / "ml.pt")])
    assert measures.rl_call(args, Path("bin"))["checkpoint"] == tmp_path / "ml.pt"


def test_repeated_trigrams():
    assert runners.repeated_trigram_percent([["a", "b", "c", "a", "b", "c"], ["x", "y"]]) == pytest.approx(25.0)
    assert runners.repeated_trigram_percent([]) == 0.0


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


MADE = "Made at commit abc1234 on 2026-12-01 10:00 UTC: a CPU, 2 logical CPUs; no GPU."  # records.provenance's form


def test_report_ratios_and_targets():
    machine = {"command": "Command: `python scripts/bench/throughput.py`", "made": MADE, "description": "CPU: test",
               "caches": "L2 1 MiB per CPU", "peak_gflops": 290.0, "peak_sizes": [2048], "peak_before": 280.0,
               "peak_after": 290.0}
    text = throughput.report(synthetic_results(), bench_args(), Path("bin"), "valid", 200, machine, [])
    assert text.splitlines()[:3] == ["Command: `python scripts/bench/throughput.py`", MADE, "CPU: test"]
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


def test_report_of_the_new_rows_and_the_rl_row():
    machine = {"command": "Command: `python scripts/bench/throughput.py`", "made": MADE, "description": "CPU: test",
               "caches": "L2 1 MiB per CPU", "peak_gflops": 100.0, "peak_sizes": [2048], "peak_before": 100.0,
               "peak_after": 100.0}
    results = synthetic_results()
    results["pgn_lstm_paulus2017"] = dict(results["pgn_lstm"], train_wps=1500.0,
                                          train_flop_shares={"encoder": 0.4, "output layer": 0.35, "x": 0.2, "y": 0.05})
    results["dca_lstm"] = dict(results["pgn_lstm"], train_wps=700.0)
    rl = {"ml": {"updates_per_s": 4.0, "summaries_per_s": 160.0, "target_words_per_s": 3000.0},
          "rl": {"updates_per_s": 1.6, "summaries_per_s": 64.0, "target_words_per_s": 1200.0}, "ratio": 2.5,
          "rl_phases": {"encode": 0.0, "decode": 0.25, "reward": 0.0125, "ml_forward": 0.05, "rl_forward": 0.05,
                        "backward_step": 0.2},
          "ml_seconds_per_update": 0.25, "sample_len": 30.0, "greedy_len": 20.0, "reference_len": 20.0,
          "batches": 10, "rounds": 3, "checkpoint": "m/pgn_lstm/checkpoint_last.pt", "max_len_b": 40}
    text = throughput.report(results, bench_args(), Path("bin"), "valid", 200, machine, [], rl)
    lines = set(text.splitlines())
    for expected in (
            "ratio pgn_lstm_paulus2017 / pgn_lstm, training words/s: 0.75 (target >= 0.8: MISSED)",
            "ratio dca_lstm / pgn_lstm, training words/s (no target): 0.35",
            "ratio self_critical_rouge / ML update of pgn_lstm, seconds per update: 2.50 (target <= 2: MISSED)",
            "an RL update's time: encode 0 ms (0%), decode 250 ms (40%), reward 12 ms (2%), ml_forward 50 ms (8%), "
            "rl_forward 50 ms (8%), backward_step 200 ms (32%), other 62 ms (10%)",
            "mean summary tokens: sample y^s 30.0, greedy y^g 20.0, reference 20.0",
            "pgn_lstm_paulus2017 encoder 40%, output layer 35%, x 20%, y 5%"):
        assert expected in lines, (expected, text)
    assert re.search(r"^self_critical_rouge\s+1\.60\s+64\.0\s+1200\s+0\.625$", text, re.M), text
    assert re.search(r"^pgn_lstm_paulus2017\s+1500\.0\s+43\.00 .* 0\.75$", text, re.M), text
    assert "samples are longer than the references" in text  # 30 > 1.2 x 20
    rl["ratio"] = 1.5
    text = throughput.report(results, bench_args(), Path("bin"), "valid", 200, machine, [], rl)
    assert "ratio self_critical_rouge / ML update of pgn_lstm, seconds per update: 1.50 (target <= 2: met)" in text


def test_the_machine_names_the_command_and_the_commit_the_report_opens_with():
    """throughput.py's report and JSON open with the command as a shell takes it and records.made_header's commit,
    date and machine, before machine.py's description."""
    argv = ["--models", "lstm", "--device", "cpu", "--peak-sizes", "64", "--work", "runs/my bench"]
    machine = throughput.measure_machine(throughput.parse_args(argv))
    assert machine["command"] == "Command: `python scripts/bench/throughput.py --models lstm --device cpu " \
        "--peak-sizes 64 --work 'runs/my bench'`"
    assert re.match(r"Made at commit [0-9a-f]{7,40}\+? on \d{4}-\d\d-\d\d \d\d:\d\d UTC: .*logical CPUs; "
                    r"(no GPU|GPU .*); fairseq-fixed \S+, torch \S+\.$", machine["made"]), machine["made"]
    assert list(machine)[:3] == ["command", "made", "description"] and machine["description"].startswith("CPU: ")


# ---------------------------------------------------------------------------------------------- tiny runs
@pytest.fixture(scope="module")
def bench_work(tmp_path_factory):
    return tmp_path_factory.mktemp("bench")


@pytest.fixture(scope="module")
def bench(shared_data, bench_work):
    """One tiny run of every row the tests read: fairseq's lstm, pgn_lstm, the --all-models rows Paulus and
    dca_lstm, and the RL row (medians over --repeats are tested on median_run itself)."""
    work = bench_work
    result = run([sys.executable, "scripts/bench/throughput.py", "--models",
                  "lstm,pgn_lstm,pgn_lstm_paulus2017,dca_lstm", "--rl", "--rl-batches", "2", "--updates", "3",
                  "--decode-sentences", "10", "--max-tokens", "1500", "--max-len-b", "12", "--lengths", "fixed",
                  "--device", "cpu", "--work", work, "--repeats", "1", "--peak-sizes", "256",
                  "--json", work / "figures.json"])
    return result.stdout, json.loads((work / "figures.json").read_text())


def test_median_run_takes_each_figures_median_and_keeps_the_runs():
    from scripts.bench.throughput_report import median_run

    runs = [{"train_wps": 100.0, "fixed_decode_sent_per_s": 9.0, "train_peak_mb": 500.0},
            {"train_wps": 300.0, "fixed_decode_sent_per_s": 7.0, "train_peak_mb": 520.0},
            {"train_wps": 200.0, "fixed_decode_sent_per_s": 8.0, "train_peak_mb": 900.0}]
    merged = median_run(runs)
    assert merged["train_wps"] == 200.0 and merged["fixed_decode_sent_per_s"] == 8.0
    assert merged["train_peak_mb"] == 520.0
    assert merged["train_wps_runs"] == [100.0, 300.0, 200.0]  # in run order, for the report's per-run line
    assert merged["fixed_decode_sent_per_s_runs"] == [9.0, 7.0, 8.0]
    assert median_run(runs[:2])["train_wps"] == 200.0  # two runs: their mean


@pytest.mark.slow
def test_tiny_run_reports_every_figure(bench):
    stdout, figures = bench
    assert figures["decode_sentences"] == 10 and figures["repeats"] == 1 and figures["modes"] == {"fixed": 12}
    assert "decoding, fixed length: the first 10 sentences of valid, beam 5, --max-len-b 12, --min-len 12" in stdout
    assert re.search(r"^CPU: .+; torch .+ with 1 threads", stdout, re.M)
    peak = figures["machine"]["peak_gflops"]
    assert peak > 0
    for name in ("lstm", "pgn_lstm"):
        model = figures["models"][name]
        assert model["train_wps_runs"] == [model["train_wps"]]  # one run
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


@pytest.mark.slow
def test_old_name_runs_the_same_benchmark():
    result = run([sys.executable, "scripts/bench/train_throughput.py", "--help"])
    assert "--decode-sentences" in result.stdout and "--peers" in result.stdout


@pytest.mark.slow
def test_tiny_run_of_the_new_rows_and_the_rl_row(bench):
    stdout, figures = bench
    assert list(figures["models"]) == ["lstm", "pgn_lstm", "pgn_lstm_paulus2017", "dca_lstm"]
    for name in ("pgn_lstm", "pgn_lstm_paulus2017", "dca_lstm"):
        model = figures["models"][name]
        assert model["train_wps"] > 0 and model["train_mfu"] > 0
        for blocked in ("", "_blocked"):
            assert model[f"fixed{blocked}_decode_sentences"] == 10 and model[f"fixed{blocked}_hyp_len"] == 13.0
        assert model["fixed_blocked_rep3"] == 0.0  # the project's blocking works for every architecture
        assert sum(model["train_flop_shares"].values()) == pytest.approx(1.0)
    models = figures["models"]
    assert "output matrix (per batch)" in models["pgn_lstm_paulus2017"]["train_flop_shares"]
    assert models["dca_lstm"]["train_mflop_per_token"] > models["pgn_lstm"]["train_mflop_per_token"]  # 3 layers
    found = re.search(r"^ratio pgn_lstm_paulus2017 / pgn_lstm, training words/s: ([\d.]+) \(target >= 0\.8: "
                      r"(met|MISSED)\)$", stdout, re.M)
    ratio = models["pgn_lstm_paulus2017"]["train_wps"] / models["pgn_lstm"]["train_wps"]
    assert found and float(found.group(1)) == pytest.approx(ratio, abs=0.006), stdout
    assert (found.group(2) == "met") == (round(ratio, 2) >= 0.8)
    assert re.search(r"^ratio dca_lstm / pgn_lstm, training words/s \(no target\): [\d.]+$", stdout, re.M), stdout
    rl = figures["rl"]
    assert rl["batches"] == 2 and rl["rounds"] == 1 and rl["max_len_b"] == 12
    assert rl["checkpoint"].endswith("models/pgn_lstm/checkpoint_last.pt")
    assert rl["ratio"] == pytest.approx(rl["ml"]["updates_per_s"] / rl["rl"]["updates_per_s"])
    assert 0 < rl["sample_len"] <= 13 and set(rl["rl_phases"]) == {"encode", "decode", "reward", "ml_forward",
                                                                   "rl_forward", "backward_step"}
    found = re.search(r"^ratio self_critical_rouge / ML update of pgn_lstm, seconds per update: ([\d.]+) "
                      r"\(target <= 2: (met|MISSED)\)$", stdout, re.M)
    assert found and float(found.group(1)) == pytest.approx(rl["ratio"], abs=0.006), stdout
    assert re.search(r"^an RL update's time: encode \d+ ms \(\d+%\), decode \d+ ms \(\d+%\), reward", stdout,
                     re.M), stdout


# ---------------------------------------------------------------------------------------------- step_ops.py
def test_step_ops_counts_top_level_operators_once():
    """A composite operator (linear: addmm inside) counts once, a view counts, and nothing else is counted."""
    import torch

    from scripts.bench import step_ops

    x, w = torch.randn(3, 4), torch.randn(5, 4)
    with torch.profiler.profile() as prof:
        torch.nn.functional.linear(x, w).view(-1).mul_(2)
    assert step_ops.top_level_ops(prof.events()) == ["aten::linear", "aten::view", "aten::mul_"]


@pytest.mark.slow
def test_step_ops_finds_the_fused_decoder_step_cheaper(bench, bench_work):
    """On the tiny LCSTS data: a training step of the fused decoder is well under the module-by-module one's
    operations; a beam step of the project's search is under one of fairseq's loop; an update of foreach_adam
    launches a handful of operations, fairseq's adam 7 per tensor; no CUDA kernels on a CPU; a clear error for
    steps the batch lacks."""
    data = bench_work / "lcsts_char" / "bin"
    out = bench_work / "ops.json"
    result = run([sys.executable, "scripts/bench/step_ops.py", "--models", "pgn_lstm,pgn_lstm_modules",
                  "--data-bin", data, "--max-tokens", "1500", "--steps", "4", "--repeats", "1", "--json", out])
    rows = json.loads(out.read_text())["rows"]
    fused, modules = rows["pgn_lstm"], rows["pgn_lstm_modules"]
    assert 0 < fused["training"]["ops"] < 0.6 * modules["training"]["ops"]
    assert 0 < fused["training"]["launching"] <= fused["training"]["ops"]
    assert fused["beam"]["ops"] > 0 and fused["training"]["kernels"] is None
    assert "| pgn_lstm | training |" in result.stdout and "| pgn_lstm_modules | beam |" in result.stdout
    fairseq_out = bench_work / "ops_fairseq_search.json"
    run([sys.executable, "scripts/bench/step_ops.py", "--models", "pgn_lstm", "--data-bin", data, "--passes", "beam",
         "--repeats", "1", "--fairseq-beam-search", "--json", fairseq_out])
    fairseq_search = json.loads(fairseq_out.read_text())["rows"]["pgn_lstm"]["beam"]
    assert 0 < fused["beam"]["ops"] < 0.8 * fairseq_search["ops"]  # generation/beam_search.py: fewer per step
    foreach_out = bench_work / "ops_foreach_adam.json"
    run([sys.executable, "scripts/bench/step_ops.py", "--models", "pgn_lstm_foreach_adam", "--data-bin", data,
         "--passes", "update", "--repeats", "1", "--json", foreach_out])
    foreach = json.loads(foreach_out.read_text())["rows"]["pgn_lstm_foreach_adam"]["update"]
    assert 0 < foreach["launching"] <= 8 < 0.1 * fused["update"]["launching"]  # fairseq's adam: 7 per tensor
    too_long = run([sys.executable, "scripts/bench/step_ops.py", "--models", "pgn_lstm", "--data-bin", data,
                    "--max-tokens", "1500", "--steps", "500", "--passes", "training"], check=False)
    assert too_long.returncode != 0 and "--steps must be at most half of that" in too_long.stderr
    missing = run([sys.executable, "scripts/bench/step_ops.py", "--data-bin", bench_work / "nothing"], check=False)
    assert missing.returncode != 0 and "no binarized data in" in missing.stderr


@pytest.mark.slow
def test_host_profile_covers_the_updates_after_the_warm_up(bench, bench_work):
    """train_host_profile.py on the tiny LCSTS data, on the CPU: the updates after the warm-up, fairseq's
    train_step among the profiled functions, no checkpoint; too few updates for the warm-up and missing data are
    clear errors."""
    data, save = bench_work / "lcsts_char" / "bin", bench_work / "host_profile"
    result = run([sys.executable, "scripts/bench/train_host_profile.py", "--device", "cpu", "--data-bin", data,
                  "--max-tokens", "1500", "--updates", "4", "--warmup", "2", "--work", save])
    assert re.search(r"--max-tokens 1500: updates 3 to 4, [\d.]+ s wall, [\d.]+ ms per update", result.stdout)
    assert "trainer.py" in result.stdout and "(train_step)" in result.stdout
    assert "who calls the synchronising methods" in result.stdout and not list(save.glob("*.pt"))
    short = run([sys.executable, "scripts/bench/train_host_profile.py", "--device", "cpu", "--data-bin", data,
                 "--max-tokens", "1500", "--updates", "2", "--warmup", "2"], check=False)
    assert short.returncode != 0 and "only 2 updates ran, none after the 2 of warm-up" in short.stderr
    missing = run([sys.executable, "scripts/bench/train_host_profile.py", "--data-bin", bench_work / "nothing"],
                  check=False)
    assert missing.returncode != 0 and "no binarized data in" in missing.stderr


def test_graph_ceiling_needs_a_gpu_and_three_numbers_a_shape():
    """scripts/bench/graph_ceiling.py (the GPU tier runs it for real): without a GPU it stops at once and says
    why; with one, a shape that is not BxTxS is refused by name."""
    import torch

    result = run([sys.executable, "scripts/bench/graph_ceiling.py", "--shapes", "4x6"], check=False)
    assert result.returncode != 0
    expected = "'4x6' is not a shape BxTxS" if torch.cuda.is_available() else "needs a GPU (torch sees none)"
    assert expected in result.stderr

"""global_gate_gru (Song & Zhao 2020): each equation block on hand-sized tensors, the ablation switches,
incremental decoding, the criterion, and a few-update run on the shipped Chinese CSL sample."""
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import (assert_incremental_equals_full, run, slice_corpus, stub_task, tiny_batch, tiny_dictionary,
                      tiny_gru)
from fairseq_plugins.text.markers import marker

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = [{}, {"no_selective_gate": True}, {"no_global_encoding": True},
            {"no_selective_gate": True, "no_global_encoding": True}]
GATE = {"encoder.gate.proj.weight", "encoder.gate.proj.bias"}
GLOBAL = {"encoder.global_encoding.u_s", "encoder.global_encoding.proj.weight", "encoder.global_encoding.proj.bias",
          "decoder.global_key_proj.weight", "decoder.readout_global.weight"}


@pytest.fixture
def dictionary():
    return tiny_dictionary()


batch = tiny_batch


# ---------------------------------------------------------------------------------------------- modules
def test_maxout_picks_the_pairwise_max():
    from fairseq_plugins.modules.maxout import Maxout

    r = torch.tensor([[1.0, 3.0, -2.0, -5.0, 0.0, 0.5], [4.0, -4.0, 7.0, 7.5, -1.0, -3.0]])  # 2 x 6
    expected = torch.tensor([[3.0, -2.0, 0.5], [4.0, 7.5, -1.0]])  # max(r_{2j-1}, r_{2j})   (eq 16)
    assert torch.equal(Maxout(2)(r), expected)
    assert Maxout(2)(torch.randn(2, 3, 10)).shape == (2, 3, 5)
    assert torch.equal(Maxout(3)(torch.tensor([1.0, 9.0, 2.0, 0.0, -1.0, -2.0])), torch.tensor([9.0, 0.0]))
    with pytest.raises(ValueError):
        Maxout(2)(torch.zeros(7))


def test_document_representation_by_hand():
    """Eqs 5-7 with W_s = I, b_s = 0, u_s = (1, 0): scores are tanh(h_i1), D = sum alpha_i h_i, padding ignored."""
    from fairseq_plugins.modules.selective_gate import GlobalDocumentEncoding

    module = GlobalDocumentEncoding(2)
    with torch.no_grad():
        module.proj.weight.copy_(torch.eye(2))
        module.proj.bias.zero_()
        module.u_s.copy_(torch.tensor([1.0, 0.0]))
    h1 = [math.atanh(0.5), 2.0]  # u_1 = (0.5, tanh 2): score 0.5
    states = torch.tensor([[h1, [0.0, 1.0], [9.0, 9.0]]])  # 1 x 3 x 2; the third position is padding
    mask = torch.tensor([[False, False, True]])
    document, alpha = module(states, mask)
    a1 = math.exp(0.5) / (math.exp(0.5) + 1.0)  # softmax(0.5, 0)   (eq 6)
    torch.testing.assert_close(alpha, torch.tensor([[a1, 1.0 - a1, 0.0]]))
    torch.testing.assert_close(document, torch.tensor([[a1 * h1[0], a1 * h1[1] + (1.0 - a1) * 1.0]]))  # eq 7
    # Random sizes: alpha is a distribution over the non-padding positions.
    torch.manual_seed(0)
    module = GlobalDocumentEncoding(6)
    mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    document, alpha = module(torch.randn(2, 5, 6), mask)
    assert document.shape == (2, 6) and alpha.shape == (2, 5)
    torch.testing.assert_close(alpha.sum(dim=1), torch.ones(2))
    assert (alpha[mask] == 0).all() and (alpha[~mask] > 0).all()
    assert module.global_vector(3).shape == (3, 6)


def test_masked_mean_ignores_padding():
    from fairseq_plugins.modules.selective_gate import masked_mean

    states = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])  # 1 x 3 x 2
    torch.testing.assert_close(masked_mean(states, torch.tensor([[False, False, True]])), torch.tensor([[2.0, 3.0]]))
    torch.testing.assert_close(masked_mean(states, None), torch.tensor([[104 / 3, 106 / 3]]))


@pytest.mark.parametrize("global_dim", [4, 0])
def test_selective_gate_matches_the_concatenated_formula(global_dim):
    """Eqs 8-9: g = sigmoid(W_g [h_i; u_s; D] + b_g) in (0, 1), h' = g h; the per-document split equals the
    plain concatenation.  Without global encoding the gate reads [h_i; D]."""
    from fairseq_plugins.modules.selective_gate import SelectiveGate

    torch.manual_seed(1)
    gate = SelectiveGate(4, global_dim)
    states, document = torch.randn(2, 3, 4), torch.randn(2, 4)  # B x S x C, B x C
    global_vector = torch.randn(4).expand(2, 4) if global_dim else None
    gated, g = gate(states, document, global_vector)
    assert gated.shape == g.shape == (2, 3, 4)
    assert ((g > 0) & (g < 1)).all()
    parts = [states] + ([global_vector.unsqueeze(1).expand(2, 3, 4)] if global_dim else []) \
        + [document.unsqueeze(1).expand(2, 3, 4)]
    expected = torch.sigmoid(gate.proj(torch.cat(parts, dim=2)))  # eq 8, literally
    torch.testing.assert_close(g, expected)
    torch.testing.assert_close(gated, expected * states)  # eq 9
    with pytest.raises(ValueError):
        gate(states, document, None if global_dim else torch.randn(2, 4))


# ---------------------------------------------------------------------------------------------- model
def test_encoder_states_are_the_bidirectional_gru_of_each_document(dictionary):
    """Eqs 1-4 (and padding): with neither gate nor global encoding, the batched, left-padded encoder gives
    what a bidirectional GRU with the same weights gives on each document alone; zeros at padding; D is the
    mean of the states."""
    torch.manual_seed(2)
    model = tiny_gru(dictionary, no_selective_gate=True, no_global_encoding=True).eval()
    encoder = model.encoder
    bigru = torch.nn.GRU(8, 6, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name, param in encoder.gru_forward.named_parameters():
            getattr(bigru, name).copy_(param)
            getattr(bigru, name + "_reverse").copy_(getattr(encoder.gru_backward, name))
    src, lengths, _ = batch(dictionary)
    out = encoder(src, lengths)
    assert out["outputs"].shape == (2, 5, 12) and out["document"].shape == (2, 12)
    assert "global" not in out
    for row, length in enumerate(lengths.tolist()):
        tokens = src[row, src.size(1) - length:] if row == 1 else src[row, :length]
        alone = bigru(encoder.embed_tokens(encoder.as_unk(tokens)).unsqueeze(0))[0][0]  # length x 12
        torch.testing.assert_close(out["outputs"][row, :length], alone)  # right-padded, positions line up
        torch.testing.assert_close(out["document"][row], alone.mean(dim=0))
    assert (out["outputs"][1, 3:] == 0).all()
    assert out["padding_mask"].tolist() == [[False] * 5, [False, False, False, True, True]]


def test_reverse_within_lengths():
    from fairseq_plugins.models.global_gate_gru import reverse_within_lengths

    assert reverse_within_lengths(torch.tensor([3, 5, 1]), 5).tolist() == [
        [2, 1, 0, 3, 4], [4, 3, 2, 1, 0], [0, 1, 2, 3, 4]]


def test_decoder_attention_and_initial_state_by_hand(dictionary):
    """Eqs 10, 18, 13: the first step's attention, from s_0 = tanh(W_d D + b_d) and the keys
    U_a h'_i + b + E_a u_s, recomputed by hand; every step's attention sums to 1 and is 0 at padding."""
    torch.manual_seed(3)
    model = tiny_gru(dictionary).eval()
    src, lengths, prev = batch(dictionary)
    encoder_out = model.encoder(src, lengths)
    attn = model(src, lengths, prev)[1]["attn"][0]  # B x T x S
    assert attn.shape == (2, 4, 5)
    torch.testing.assert_close(attn.sum(dim=2), torch.ones(2, 4))
    assert (attn[1, :, 3:] == 0).all() and (attn[0] > 0).all()

    dec, att = model.decoder, model.decoder.attention
    s0 = torch.tanh(dec.init_state(encoder_out["document"]))  # eq 10
    h_gated, u_s = encoder_out["outputs"], model.encoder.global_encoding.u_s
    features = att.query_proj(s0).unsqueeze(1) + att.key_proj(h_gated) + dec.global_key_proj(u_s)  # eq 18
    scores = att.v(torch.tanh(features)).squeeze(2).masked_fill(encoder_out["padding_mask"], float("-inf"))
    torch.testing.assert_close(attn[:, 0], torch.softmax(scores, dim=1))  # eq 13


def decoder_by_hand(dictionary, **options):
    """A tiny model's decoder run over a batch, and what computing it by hand starts from: the decoder, its
    outputs (states, contexts, attention: B x T x D), the input words w_{t-1} (markers as <unk>), s_1 from s_0
    (eq 10) and c_0 = 0 (eq 11), and the keys, values and mask the attention reads."""
    torch.manual_seed(9)
    model = tiny_gru(dictionary, **options).eval()
    src, lengths, prev = batch(dictionary)
    encoder_out = model.encoder(src, lengths)
    _, states, contexts, attn = model.decoder.extract_features(prev, encoder_out)
    dec = model.decoder
    words = dec.embed_tokens(prev.masked_fill(prev >= dec.num_regular, dictionary.unk()))  # B x T x E
    s0 = torch.tanh(dec.init_state(encoder_out["document"]))  # eq 10
    s1 = dec.cell(torch.cat([words[:, 0], torch.zeros(2, 12)], dim=1), s0)
    memory = (dec.initial_state(encoder_out)["keys"], encoder_out["outputs"])
    return dec, (states, contexts, attn), words, s1, memory, encoder_out["padding_mask"]


def test_decoder_recurrence_by_hand(dictionary):
    """Eq 11: s_t = GRU([w_{t-1}; c_{t-1}], s_{t-1}) with c_0 = 0 (markers embedded as <unk>), and the
    attention of step t reads s_{t-1}."""
    dec, (states, contexts, attn), words, s1, (keys, values), mask = decoder_by_hand(dictionary)
    s2 = dec.cell(torch.cat([words[:, 1], contexts[:, 0]], dim=1), s1)
    torch.testing.assert_close(states[:, 0], s1)
    torch.testing.assert_close(states[:, 1], s2)
    again, _ = dec.attention(keys, values, s1, None, mask)
    torch.testing.assert_close(attn[:, 1], again)


def test_current_attention_query_by_hand(dictionary):
    """--attention-query current: s_t = GRU([w_{t-1}; c_{t-1}], s_{t-1}) first (eq 11), then alpha_t and c_t from
    s_t (Luong's order); the default reads s_{t-1}.  An unknown value stops at start-up."""
    dec, (states, contexts, attn), words, s1, (keys, values), mask = decoder_by_hand(
        dictionary, attention_query="current")
    a1, c1 = dec.attention(keys, values, s1, None, mask)
    s2 = dec.cell(torch.cat([words[:, 1], c1], dim=1), s1)
    a2, _ = dec.attention(keys, values, s2, None, mask)
    torch.testing.assert_close(states[:, 0], s1)
    torch.testing.assert_close(attn[:, 0], a1)
    torch.testing.assert_close(contexts[:, 0], c1)
    torch.testing.assert_close(states[:, 1], s2)
    torch.testing.assert_close(attn[:, 1], a2)
    with pytest.raises(ValueError, match="--attention-query must be previous or current, not 'next'"):
        tiny_gru(dictionary, attention_query="next")


def test_readout_maxout_and_output_by_hand(dictionary):
    """Eqs 19, 16, 17: logits = W_o maxout(W_r [w_{t-1}; c_t; s_t; u_s]) from the recurrence's outputs."""
    torch.manual_seed(4)
    model = tiny_gru(dictionary).eval()
    src, lengths, prev = batch(dictionary)
    encoder_out = model.encoder(src, lengths)
    embedded, states, contexts, attn = model.decoder.extract_features(prev, encoder_out)
    torch.testing.assert_close(contexts, torch.bmm(attn, encoder_out["outputs"]))  # eq 14
    dec = model.decoder
    u_s = model.encoder.global_encoding.u_s.expand(2, 4, -1)
    weight = torch.cat([dec.readout.weight, dec.readout_global.weight], dim=1)  # W_r over [w; c; s; u_s]
    r = F.linear(torch.cat([embedded, contexts, states, u_s], dim=2), weight, dec.readout.bias)  # eq 19
    m = torch.maximum(r[..., 0::2], r[..., 1::2])  # eq 16
    logits, _ = model(src, lengths, prev)
    torch.testing.assert_close(logits, dec.output_projection(m))  # eq 17 (before the softmax)


def test_ablation_flags_remove_exactly_their_parameters(dictionary):
    shapes = {}
    for options in VARIANTS:
        model = tiny_gru(dictionary, **options)
        shapes[tuple(options)] = {name: p.shape for name, p in model.named_parameters()}
    full = set(shapes[()])
    assert GATE | GLOBAL <= full
    assert full - set(shapes[("no_selective_gate",)]) == GATE
    assert full - set(shapes[("no_global_encoding",)]) == GLOBAL
    assert full - set(shapes[("no_selective_gate", "no_global_encoding")]) == GATE | GLOBAL
    assert all(set(names) <= full for names in shapes.values())  # no flag adds anything
    # Only the gate's W_g loses the u_s columns; every other kept parameter keeps its shape.
    no_global = shapes[("no_global_encoding",)]
    assert no_global["encoder.gate.proj.weight"] == (12, 24) and shapes[()]["encoder.gate.proj.weight"] == (12, 36)
    for variant in shapes.values():
        for name, shape in variant.items():
            assert name == "encoder.gate.proj.weight" or shape == shapes[()][name], name


@pytest.mark.parametrize("options", VARIANTS + [{"share_decoder_input_output_embed": True, "decoder_out_embed_dim": 8}])
def test_distribution_over_the_extended_vocabulary(dictionary, options):
    """Width len(dictionary) for beam search, probability 0 / log-probability -inf on markers; a marker
    target is scored as <unk>, by get_target_probs and get_targets."""
    torch.manual_seed(5)
    model = tiny_gru(dictionary, **options).eval()
    src, lengths, prev = batch(dictionary)
    net_output = model(src, lengths, prev)
    num_regular = model.decoder.num_regular
    assert num_regular == len(dictionary) - 4 and net_output[0].shape == (2, 4, num_regular)
    probs = model.get_normalized_probs(net_output, log_probs=False)
    log_probs = model.get_normalized_probs(net_output, log_probs=True)
    assert probs.shape == log_probs.shape == (2, 4, len(dictionary))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4))
    assert (probs[..., num_regular:] == 0).all() and torch.isneginf(log_probs[..., num_regular:]).all()
    assert torch.isfinite(log_probs[..., :num_regular]).all()
    target = torch.cat([prev[:, 1:], torch.full((2, 1), dictionary.eos())], dim=1)  # holds <oov-0>
    as_unk = target.masked_fill(target >= num_regular, dictionary.unk())
    assert (target >= num_regular).any()
    torch.testing.assert_close(model.get_target_probs(net_output, target), probs.gather(2, as_unk.unsqueeze(2))[..., 0])
    assert torch.equal(model.get_targets({"target": target}, net_output), as_unk)


CURRENT_QUERY = [{"attention_query": "current"}, {"copy": True, "attention_query": "current"}]


@pytest.mark.parametrize("options", VARIANTS + CURRENT_QUERY)
def test_incremental_decoding_equals_full_forward_with_reordering(dictionary, options):
    torch.manual_seed(6)
    model = tiny_gru(dictionary, **options).eval()
    assert_incremental_equals_full(model, *batch(dictionary))  # the two rows swap halfway, as in beam search


def test_focal_copy_coverage_runs_as_plain_nll(dictionary):
    """The criterion needs no coverage nor p_gen from this model: coverage loss 0, p_gen 1, and with
    alpha 1, gamma 0 the loss is eq 16's mean NLL per summary, markers scored as <unk>."""
    from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion

    torch.manual_seed(7)
    model = tiny_gru(dictionary).train()
    src, lengths, prev = batch(dictionary)
    target = torch.tensor([[4, dictionary.index(marker(0)), 5, 2], [dictionary.index(marker(2)), 8, 2, 1]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target, "ntokens": 7, "id": torch.tensor([0, 1])}
    task = stub_task(dictionary)()
    loss, sample_size, log = FocalCopyCoverageCriterion(task, 0.25, 1.0, 1.0, "sequence", False)(model, sample)
    assert math.isfinite(loss.item()) and sample_size == 2
    assert log["coverage"].item() == 0 and log["p_gen"].item() == pytest.approx(7.0)
    loss.backward()
    for name in ("encoder.global_encoding.u_s", "encoder.gate.proj.weight", "decoder.readout_global.weight"):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name

    model.eval()
    nll_loss, _, _ = FocalCopyCoverageCriterion(task, 1.0, 0.0, 0.0, "sequence", False)(model, sample)
    log_probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
    target_unk = target.masked_fill(target >= model.decoder.num_regular, dictionary.unk())
    nll = -log_probs.gather(2, target_unk.unsqueeze(2))[..., 0]  # B x T
    mask = target.ne(dictionary.pad()).float()
    expected = ((nll * mask).sum(1) / mask.sum(1)).sum()
    torch.testing.assert_close(nll_loss, expected)


def test_beam_search_never_emits_a_marker(dictionary):
    """Even when <unk> is penalised away, the -inf markers are never chosen (no copy switch)."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(8)
    model = tiny_gru(dictionary).eval()
    src, lengths, _ = batch(dictionary)
    generator = SequenceGenerator([model], dictionary, beam_size=3, max_len_b=6, min_len=3, unk_penalty=100.0)
    hypos = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    for beams in hypos:
        assert len(beams) == 3
        for hypo in beams:
            assert (hypo["tokens"] < model.decoder.num_regular).all()
            assert math.isfinite(hypo["score"].item())


# ---------------------------------------------------------------------------------------------- --copy
COPY = {"copy": True}


@pytest.mark.parametrize("options", [COPY, dict(COPY, no_selective_gate=True, no_global_encoding=True)])
def test_copy_distribution_over_the_extended_vocabulary(dictionary, options):
    """--copy: eq 17 as P_vocab in See et al.'s mixture; sums to 1 over the extended vocabulary, a marker in the
    source gets (only) copy mass, one in no source none, </s> no copy mass, and the copy side is the attention
    over the (gated) encoder states."""
    torch.manual_seed(10)
    model = tiny_gru(dictionary, eos_attention="generate", **options).eval()
    assert {"decoder.switch.proj.weight", "decoder.switch.proj.bias"} <= set(dict(model.named_parameters()))
    src, lengths, prev = batch(dictionary)
    logits, extra = model(src, lengths, prev)
    probs = model.get_normalized_probs((logits, extra), log_probs=False)
    assert probs.shape == (2, 4, len(dictionary))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4))
    m0, m1 = dictionary.index(marker(0)), dictionary.index(marker(1))
    p_gen, attn, src_right = extra["p_gen"][..., 0], extra["attn"][0], extra["src_tokens"]
    assert ((p_gen > 0) & (p_gen < 1)).all() and (probs[..., m1] == 0).all()
    held = attn.masked_fill(src_right.ne(dictionary.eos()).unsqueeze(1), 0.0).sum(-1)  # B x T   a_</s>
    expected = (1 - p_gen) * (attn * src_right.eq(m0).unsqueeze(1)).sum(-1)  # only copying makes m0
    torch.testing.assert_close(probs[..., m0], expected)
    assert (probs[..., m0] > 0).all()
    eos_generated = (p_gen + (1 - p_gen) * held) * torch.softmax(logits, -1)[..., dictionary.eos()]  # the sentinel
    torch.testing.assert_close(probs[..., dictionary.eos()], eos_generated)
    target = torch.cat([prev[:, 1:], torch.full((2, 1), dictionary.eos())], dim=1)  # holds <oov-0>, now copyable
    torch.testing.assert_close(model.get_target_probs((logits, extra), target),
                               probs.gather(2, target.unsqueeze(2))[..., 0])
    assert torch.equal(model.get_targets({"target": target}, (logits, extra)), target)  # markers stay markers


def test_copy_incremental_decoding_equals_full_forward_with_reordering(dictionary):
    test_incremental_decoding_equals_full_forward_with_reordering(dictionary, COPY)


def test_copy_beam_search_copies_a_source_marker(dictionary):
    """With p_gen forced to 0 and uniform attention, only copying produces words: the source's most frequent
    token, a marker, comes out."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(11)
    model = tiny_gru(dictionary, copy=True).eval()
    with torch.no_grad():
        model.decoder.switch.proj.weight.zero_()
        model.decoder.switch.proj.bias.fill_(-200.0)
        model.decoder.attention.v.weight.zero_()
    m0 = dictionary.index(marker(0))
    src = torch.tensor([[m0, 4, m0, m0, dictionary.eos()]])
    generator = SequenceGenerator([model], dictionary, beam_size=2, max_len_b=3, min_len=3)
    hypo = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([5])}})[0][0]
    assert hypo["tokens"][:3].tolist() == [m0, m0, m0]


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def csl_sp(tmp_path_factory):
    """The first 300 / 30 / 20 CSL documents, through preprocess.sh with sentencepiece units."""
    work = tmp_path_factory.mktemp("csl_gru")
    raw = slice_corpus("csl", work / "raw", (("train", 300), ("valid", 30), ("test", 20)))
    data = work / "data"
    run(["./preprocess.sh", "-c", "csl_gru_test", raw, data])
    return work, data


@pytest.mark.slow
def test_few_updates_on_chinese_csl_with_sentencepiece(csl_sp):
    """preprocess.sh (sentencepiece) -> plain fairseq-train --arch global_gate_gru -> generate.sh."""
    work, data = csl_sp
    assert (data / "sp.model").is_file()
    first = (data / "tok" / "train.src").read_text(encoding="utf-8").split("\n")[0].split()
    assert any(len(piece.lstrip("\u2581")) > 1 for piece in first)  # pieces, not single characters

    save = work / "plain"
    train = run(["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
                 "--arch", "global_gate_gru", "--encoder-embed-dim", "32", "--encoder-hidden-size", "24",
                 "--decoder-hidden-size", "32", "--criterion", "focal_copy_coverage", "--optimizer", "adam",
                 "--lr", "0.002", "--batch-size", "16", "--max-update", "4", "--save-dir", save,
                 "--no-epoch-checkpoints", "--log-format", "simple", "--seed", "1"])
    log = train.stdout + train.stderr
    assert re.search(r"num_updates[ =]4\b", log), log[-2000:]
    valid = re.findall(r"valid on 'valid' subset \| loss ([\d.]+) .*coverage 0 \| p_gen 1 ", log)
    assert valid and math.isfinite(float(valid[-1])), log[-2000:]

    out = work / "test.sum"
    run(["./generate.sh", "-c", "csl_gru_test", "--split", "test", "--checkpoint", "checkpoint_last.pt",
         "--output", out, data, save])
    summaries = out.read_text(encoding="utf-8").split("\n")
    assert summaries[-1] == "" and len(summaries) - 1 == 20  # one line per test document
    assert any(line.strip() for line in summaries)
    assert not any(token in "".join(summaries) for token in ("<oov-", "</s>", "\u2581"))


@pytest.mark.slow
def test_copy_trains_through_plain_fairseq_train(csl_sp):
    """A few updates of global_gate_gru_small --copy through plain fairseq-train: the copy switch is used (p_gen
    logged below 1) and the validation loss is finite."""
    work, data = csl_sp
    train = run(["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
                 "--arch", "global_gate_gru_small", "--copy", "--encoder-embed-dim", "32", "--encoder-hidden-size",
                 "24", "--decoder-hidden-size", "32", "--criterion", "focal_copy_coverage", "--optimizer", "adam",
                 "--lr", "0.002", "--batch-size", "16", "--max-update", "3", "--save-dir", work / "copy",
                 "--no-save", "--log-format", "simple", "--seed", "1"])
    log = train.stdout + train.stderr
    assert "copy=True" in log and re.search(r"num_updates[ =]3\b", log), log[-2000:]
    valid = re.findall(r"valid on 'valid' subset \| loss ([\d.]+) .*\| p_gen ([\d.]+) ", log)
    assert valid and math.isfinite(float(valid[-1][0])) and 0 < float(valid[-1][1]) < 1, log[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("config, embed_dim, paper_schedule", [
    ("song2020_lcsts", 512, True), ("song2020_lcsts_sp_cpu", 128, True), ("song2020_lcsts_cpu", 128, False)])
def test_song2020_configs_train(csl_sp, config, embed_dim, paper_schedule):
    """The paper config (sizes of global_gate_gru_song2020, lr halved on plateau, batches of 32), its CPU-sized
    control and the CPU-scale config (lcsts_char's batches and fixed learning rate) run through train.sh; the
    ablation flags go through as extra options."""
    work, data = csl_sp
    # --force-config: the LCSTS configs' models on the CSL sample (their own PREP_ARGS differ from its)
    train = run(["./train.sh", "-c", config, "--force-config", data, work / config, "--max-update", "2",
                 "--no-global-encoding"])
    log = train.stdout + train.stderr
    assert re.search(r"num_updates[ =]2\b", log), log[-2000:]
    assert f"Embedding({len((data / 'dict.txt').read_text(encoding='utf-8').splitlines()) + 4}, {embed_dim}" in log
    assert "global encoding=False, selective gate=True, output layer tied to the embeddings=" in log
    assert "'lr': [0.001]" in log
    if paper_schedule:
        assert re.search(r"'lr_scheduler': \{'_name': 'reduce_lr_on_plateau', 'lr_shrink': 0\.5,", log)
        assert "'batch_size': 32," in log
        assert "output layer tied to the embeddings=False" in log and "(output_projection): Linear" in log
        assert "attention query=previous" in log  # eq 12 as printed
    else:
        assert "'_name': 'fixed'" in log and "'max_tokens': 4000," in log
        # W_o is the embedding matrix, as in fairseq's lstm it is compared with (which ties it itself)
        assert "output layer tied to the embeddings=True" in log and "output_projection" not in log
        assert "attention query=current" in log  # Luong's concat attention, which the paper's text names
        assert re.search(r"valid on 'valid' subset .*\| rouge_l [\d.]+ ", log), log[-2000:]

@pytest.mark.parametrize("model, copies_by_default", [("pgn_lstm", True), ("dca_lstm", True),
                                                      ("global_gate_gru", False)])
def test_every_model_spells_its_copy_switch_copy_and_no_copy(model, copies_by_default):
    """--copy and --no-copy on every architecture, each keeping its paper's default (See et al. and Celikyilmaz et
    al. copy; Song & Zhao do not)."""
    import argparse
    import importlib

    module = importlib.import_module(f"fairseq_plugins.models.{model}")
    model_class = next(cls for name, cls in vars(module).items() if name.endswith("Model")
                       and getattr(cls, "__module__", "") == module.__name__)
    parser = argparse.ArgumentParser()
    model_class.add_args(parser)

    def copies(*argv):
        args = parser.parse_args(list(argv))
        return args.copy if hasattr(args, "copy") else not args.no_copy

    assert copies() is copies_by_default
    assert copies("--copy") is True and copies("--no-copy") is False
    assert copies("--no-copy", "--copy") is True  # the last one wins, as fairseq reads options

"""Paulus et al. (2017) as options of pgn_lstm: the whole-sequence training pass equals incremental decoding
(also after beam reordering) with every option on and in combination with the existing ones, the shared output
projection, options that do not combine, the preset, and a few updates through fairseq-train and
fairseq-generate with trigram blocking."""
import argparse
import contextlib
import re

import pytest
import torch

from conftest import ROOT, assert_incremental_equals_full, output, run, slice_corpus, tiny_batch, tiny_dictionary
from conftest import tiny_model

PAULUS = dict(decoder_readout="paulus", intra_temporal_attention=True, intra_decoder_attention=True,
              shared_output_projection=True, no_coverage=True)
COMBINATIONS = {
    "paulus": PAULUS,
    "paulus, 2 layers, embed-norm, dropout": dict(PAULUS, decoder_layers=2, embed_norm=True, dropout=0.3),
    "paulus + coverage loss": dict(PAULUS, no_coverage=False, no_coverage_attention=True),
    "paulus readout, coverage attention": dict(decoder_readout="paulus", intra_decoder_attention=True),
    "paulus, no copy": dict(PAULUS, no_copy=True),
    "see readout + temporal + intra-decoder": dict(intra_temporal_attention=True, intra_decoder_attention=True,
                                                   no_coverage_attention=True, shared_output_projection=True),
    "luong readout + temporal + intra-decoder": dict(decoder_readout="luong", embed_norm=True, no_coverage=True,
                                                     intra_temporal_attention=True, intra_decoder_attention=True),
}


@pytest.fixture
def dictionary():
    return tiny_dictionary()


@pytest.mark.parametrize("options", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_incremental_decoding_equals_the_whole_sequence_pass(dictionary, options):
    torch.manual_seed(0)
    model = tiny_model(dictionary, **options).eval()
    src, lengths, prev = tiny_batch(dictionary)
    prev = torch.cat([prev, prev[:, 1:]], dim=1)  # 7 steps
    assert_incremental_equals_full(model, src, lengths, prev)  # the two rows swap at step 2, as in beam search
    full = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(2, prev.size(1)))


def test_beam_reordering_within_each_source_keeps_the_keys_and_reorders_the_histories(dictionary):
    """Two hypotheses per source, reordered within their source at every step (as beam search does): each final
    row equals the whole-sequence pass over its own history, the running temporal sums and the cached decoder
    states having followed it; the projected keys are never copied."""
    from fairseq_plugins.modules.temporal_attention import KEYS

    torch.manual_seed(3)
    model = tiny_model(dictionary, **PAULUS).eval()
    src, lengths, _ = tiny_batch(dictionary)
    expand = torch.tensor([0, 0, 1, 1])
    encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, lengths), expand)
    tokens = torch.randint(4, 11, (4, 6), generator=torch.Generator().manual_seed(3))  # B' x T decoder inputs
    tokens[:, 0] = dictionary.eos()
    state, inputs, outputs = {}, [], []
    orders = [torch.tensor([1, 0, 3, 2]), torch.tensor([0, 0, 2, 3]), torch.tensor([1, 1, 3, 3])]
    for t in range(tokens.size(1)):
        inputs.append(tokens[:, t:t + 1])
        out = model.decoder(torch.cat(inputs, dim=1), encoder_out, incremental_state=state)
        outputs.append(model.get_normalized_probs(out, log_probs=True))
        if t < len(orders):
            keys = model.decoder.load_state(encoder_out, state)[KEYS]
            model.decoder.reorder_incremental_state(state, orders[t])
            assert model.decoder.load_state(encoder_out, state)[KEYS] is keys
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, orders[t])
            inputs = [column.index_select(0, orders[t]) for column in inputs]
            outputs = [column.index_select(0, orders[t]) for column in outputs]
    full = model(src[expand], lengths[expand], torch.cat(inputs, dim=1))
    torch.testing.assert_close(torch.cat(outputs, dim=1), model.get_normalized_probs(full, log_probs=True),
                               atol=1e-5, rtol=1e-5)


def test_paulus_options_are_the_paper_blocks(dictionary):
    """With every option on: no input feeding (one LSTM), the temporal attention is the copy distribution and
    has the paper's normalisation (a^1 is a plain softmax, later steps are penalised by the past), the
    intra-decoder context is 0 at t = 1, and the readout reads [h^d_t; c^e_t; c^d_t]."""
    from fairseq_plugins.modules.intra_decoder_attention import IntraDecoderAttention
    from fairseq_plugins.modules.temporal_attention import IntraTemporalAttention

    torch.manual_seed(1)
    model = tiny_model(dictionary, **PAULUS).eval()
    decoder = model.decoder
    assert isinstance(decoder.attention, IntraTemporalAttention) and not hasattr(decoder, "layers")
    assert isinstance(decoder.intra_attention, IntraDecoderAttention) and not hasattr(decoder, "input_from_feed")
    src, lengths, prev = tiny_batch(dictionary)
    encoder_out = model.encoder(src, lengths)
    steps = decoder.extract_features(prev, encoder_out)
    enc_units, hidden = encoder_out["outputs"].size(2), decoder.hidden_size
    assert steps["contexts"].size(2) == enc_units + hidden  # [c^e_t; c^d_t]
    assert torch.all(steps["contexts"][:, 0, enc_units:] == 0)  # c^d_1 = 0
    scores = torch.einsum("btd,de,bse->bts", steps["states"], decoder.attention.weight, encoder_out["outputs"])
    scores = scores.masked_fill(encoder_out["padding_mask"].unsqueeze(1), float("-inf"))
    torch.testing.assert_close(steps["attn"][:, 0], torch.softmax(scores[:, 0], dim=-1))  # eqs 1-4 at t = 1
    previous = torch.logsumexp(scores[:, :1].masked_fill(torch.isinf(scores[:, :1]), 0.0), dim=1)  # L_1
    torch.testing.assert_close(steps["attn"][:, 1], torch.softmax(scores[:, 1] - previous, dim=-1))  # t = 2
    torch.testing.assert_close(steps["contexts"][..., :enc_units], torch.bmm(steps["attn"], encoder_out["outputs"]))
    logits, extra = model(src, lengths, prev)
    features = torch.cat([steps["states"], steps["contexts"]], dim=2)  # [h^d_t; c^e_t; c^d_t]
    torch.testing.assert_close(logits, decoder.output_projection(features))  # eq 9
    switch = decoder.readout.switch.proj
    torch.testing.assert_close(extra["p_gen_logit"], switch(features))  # eq 11 (as p_gen = 1 - p(u_t = 1))


@pytest.mark.parametrize("options", [PAULUS, {}], ids=["paulus", "see"])
def test_training_with_the_models_own_predictions(dictionary, options):
    """--own-prediction-prob (Paulus et al. section 6.1): with probability 1 the decoder reads its own greedy
    predictions (the forward pass equals one over the greedy inputs), with 0 the reference words; gradients
    flow; in evaluation the option does nothing."""
    torch.manual_seed(4)
    src, lengths, prev = tiny_batch(dictionary)
    model = tiny_model(dictionary, **dict(options, own_prediction_prob=1.0)).train()
    logits, extra = model(src, lengths, prev)
    greedy = model.get_normalized_probs((logits, extra), log_probs=True).argmax(-1)  # B x T
    own_inputs = torch.cat([prev[:, :1], greedy[:, :-1]], dim=1)  # </s>, then each step's prediction
    model.decoder.own_prediction_prob = 0.0
    again_logits, again_extra = model(src, lengths, own_inputs)
    torch.testing.assert_close(logits, again_logits)
    torch.testing.assert_close(extra["attn"][0], again_extra["attn"][0])
    assert set(extra) == set(again_extra)
    logits.sum().backward()
    assert model.decoder.embed_tokens.weight.grad.abs().sum() > 0
    model.decoder.own_prediction_prob = 1.0
    model.eval()  # teacher forcing: not the output over the model's own inputs (no dropout: train = eval)
    assert not torch.equal(model(src, lengths, prev)[0], model(src, lengths, own_inputs)[0])
    torch.testing.assert_close(model(src, lengths, own_inputs)[0], logits.detach())


def test_own_predictions_compute_the_tied_output_matrix_once_per_pass(dictionary, monkeypatch):
    """Step by step (own predictions), W_out = tanh(W_emb W_proj) (eq 13) is computed once for the whole pass,
    not once per step (each step's copy was kept for the backward pass: about 24 GB an update at paper
    scale), with the same gradients as computing it at every step."""
    from fairseq_plugins.modules.shared_projection import SharedOutputProjection
    torch.manual_seed(5)
    src, lengths, prev = tiny_batch(dictionary)
    model = tiny_model(dictionary, **dict(PAULUS, own_prediction_prob=1.0)).train()
    grads, calls = [], []
    compute = SharedOutputProjection._compute
    monkeypatch.setattr(SharedOutputProjection, "_compute", lambda self: calls.append(1) or compute(self))
    for held in (True, False):
        if not held:  # the per-step reference: the block does not hold the matrix
            monkeypatch.setattr(SharedOutputProjection, "held", lambda self: contextlib.nullcontext())
        calls.clear()
        model.zero_grad()
        torch.manual_seed(6)  # the same own-prediction draws
        logits, _ = model(src, lengths, prev)
        logits.logsumexp(-1).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
        assert len(calls) == (1 if held else prev.size(1))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
    assert model.decoder.output_projection._held is None  # released after the pass


def test_shared_projection_has_no_free_output_matrix_and_its_gradient_reaches_the_embeddings():
    dictionary = tiny_dictionary(" ".join(f"w{i}" for i in range(40)))  # more words than any other size
    torch.manual_seed(2)
    model = tiny_model(dictionary, **PAULUS)
    decoder = model.decoder
    vocab = decoder.num_regular
    named = dict(model.named_parameters())
    assert {name for name in named if name.startswith("decoder.output_projection.")} == {
        "decoder.output_projection.proj", "decoder.output_projection.bias"}
    matrices = [name for name, p in named.items() if p.dim() == 2 and max(p.shape) >= vocab]  # V x d or larger
    assert matrices == ["encoder.embed_tokens.weight", "decoder.embed_tokens.weight"]  # only the embeddings
    plain = tiny_model(dictionary, **dict(PAULUS, shared_output_projection=False))
    assert dict(plain.named_parameters())["decoder.output_projection.weight"].shape == (vocab, 6 * 2 + 7 * 2)
    src, lengths, prev = tiny_batch(dictionary)
    logits, _ = model(src, lengths, prev)
    unseen = dictionary.index("w39")  # neither in the sources nor among the decoder inputs
    assert not (src == unseen).any() and not (prev == unseen).any()
    logits[..., unseen].sum().backward()
    grad = decoder.embed_tokens.weight.grad
    assert grad is not None and grad[unseen].abs().sum() > 0  # only eq 13 connects that row to the loss
    weight = torch.tanh(decoder.embed_tokens.weight[:vocab] @ decoder.output_projection.proj)  # eq 13
    features = torch.randn(3, weight.size(1))
    expected = features @ weight.T + decoder.output_projection.bias
    torch.testing.assert_close(decoder.output_projection(features), expected)


@pytest.mark.parametrize("options, names", [
    (dict(intra_temporal_attention=True), ("--intra-temporal-attention", "--coverage-attention")),
    (dict(PAULUS, share_decoder_input_output_embed=True, decoder_embed_dim=8),
     ("--share-decoder-input-output-embed", "--shared-output-projection")),
])
def test_options_that_do_not_combine_fail_at_start_up(dictionary, options, names):
    with pytest.raises(ValueError) as error:
        tiny_model(dictionary, **options)
    assert all(name in str(error.value) for name in names), error.value


def test_preset_sizes_and_options(dictionary):
    from fairseq_plugins.models.pgn_lstm import pgn_lstm_paulus2017

    args = argparse.Namespace()
    pgn_lstm_paulus2017(args)
    assert (args.encoder_embed_dim, args.decoder_embed_dim, args.encoder_hidden_size, args.decoder_hidden_size) == (
        100, 100, 200, 400)
    assert args.intra_temporal_attention and args.intra_decoder_attention and args.shared_output_projection
    assert args.decoder_readout == "paulus" and args.no_coverage and not args.no_copy


# ---------------------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_preset_trains_and_generates_with_trigram_blocking(tmp_path):
    raw = slice_corpus("scitldr", tmp_path / "raw", (("train", 60), ("valid", 8), ("test", 6)))
    data = tmp_path / "data"
    run(["./preprocess.sh", raw, data])
    user_dir = ROOT / "fairseq_plugins"
    log = output(["fairseq-train", data / "bin", "--user-dir", user_dir, "--task", "summarization", "--arch",
                  "pgn_lstm_paulus2017", "--criterion", "focal_copy_coverage", "--focal-alpha", "1",
                  "--focal-gamma", "0", "--coverage-lambda", "0", "--optimizer", "adam", "--lr", "0.001",
                  "--max-tokens", "2000", "--max-update", "3", "--save-dir", tmp_path / "model",
                  "--no-epoch-checkpoints", "--log-format", "simple", "--seed", "1"])
    assert re.search(r"num_updates[ =]3\b", log), log[-2000:]
    assert "readout=paulus, intra-temporal attention=True, intra-decoder attention=True, shared output " \
           "projection=True" in log
    assert "Embedding(" in log and re.search(r"Embedding\(\d+, 100, padding_idx=1\)", log)
    generated = output(["fairseq-generate", data / "bin", "--user-dir", user_dir, "--task", "summarization",
                        "--path", tmp_path / "model" / "checkpoint_last.pt", "--gen-subset", "test", "--beam", "3",
                        "--max-len-b", "20", "--min-len", "12", "--batch-size", "4", "--block-ngram-repeat", "3"])
    hypotheses = re.findall(r"^H-\d+\t\S+\t(.*)$", generated, flags=re.M)
    assert len(hypotheses) == 6
    for hypothesis in hypotheses:
        tokens = hypothesis.split()
        trigrams = [tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)]
        assert len(trigrams) == len(set(trigrams)), hypothesis  # no trigram twice

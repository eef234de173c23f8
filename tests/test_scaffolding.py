"""The scaffolding the architectures share (modules/factories.py, extended_vocabulary.py, copy_mixture.py,
step_state.py): initialisation, embeddings, the final distribution with one or several copy sources, the
decoder state between steps, the decoder states exposed to criterions, and the checkpoint parameter names."""
import argparse
import ast

import pytest
import torch

from conftest import ROOT, tiny_batch, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.modules import beam_reorder
from fairseq_plugins.modules.copy_mixture import CopyMixture, merge_copy_sources
from fairseq_plugins.modules.extended_vocabulary import ExtendedVocabularyOutput
from fairseq_plugins.modules.factories import GRU, LSTM, Embedding, GRUCell, Linear, LSTMCell, build_embeddings


@pytest.fixture
def dictionary():
    return tiny_dictionary()


def test_model_files_import_no_other_model_file():
    for path in (ROOT / "fairseq_plugins" / "models").glob("*.py"):
        if path.name == "__init__.py":  # registers them all
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("fairseq_plugins.models"), f"{path.name} imports {node.module}"


def test_factories_initialise_as_documented():
    torch.manual_seed(0)
    embedding = Embedding(10, 16, padding_idx=1)
    assert torch.all(embedding.weight[1] == 0) and embedding.weight[0].abs().sum() > 0
    linear = Linear(5, 3)
    assert torch.all(linear.bias == 0) and linear.weight.abs().max() <= (6 / 8) ** 0.5
    for rnn in (LSTM(4, 3, bidirectional=True), LSTMCell(4, 3), GRU(4, 3), GRUCell(4, 3)):
        values = torch.cat([p.flatten() for p in rnn.parameters()])
        assert values.abs().max() <= 0.1 and values.abs().max() > 0.05
    assert LSTM(4, 3, num_layers=1, dropout=0.5).dropout == 0.0  # no dropout after the last layer
    assert LSTM(4, 3, num_layers=2, dropout=0.5).dropout == 0.5


def test_build_embeddings_shares_and_checks(dictionary):
    other = tiny_dictionary("a b c", num_markers=1)
    args = argparse.Namespace(encoder_embed_dim=6, decoder_embed_dim=6, share_all_embeddings=True)
    encoder_embed, decoder_embed = build_embeddings(args, dictionary, dictionary)
    assert encoder_embed is decoder_embed and encoder_embed.weight.shape == (len(dictionary), 6)
    with pytest.raises(ValueError, match="--share-all-embeddings needs a joined dictionary"):
        build_embeddings(args, dictionary, other)
    with pytest.raises(ValueError, match="equal embedding sizes"):
        build_embeddings(argparse.Namespace(**dict(vars(args), decoder_embed_dim=4)), dictionary, dictionary)
    args.share_all_embeddings = False
    encoder_embed, decoder_embed = build_embeddings(args, dictionary, other)
    assert encoder_embed is not decoder_embed and decoder_embed.weight.shape == (len(other), 6)


# The parameter names are the checkpoint format: checkpoints trained before the scaffolding moved to modules/
# must keep loading.  These lists were read from the models as they were before (git: HEAD of that change).
PGN_KEYS = """encoder.embed_tokens.weight encoder.lstm.weight_ih_l0 encoder.lstm.weight_hh_l0 encoder.lstm.bias_ih_l0
encoder.lstm.bias_hh_l0 encoder.lstm.weight_ih_l0_reverse encoder.lstm.weight_hh_l0_reverse
encoder.lstm.bias_ih_l0_reverse encoder.lstm.bias_hh_l0_reverse decoder.embed_tokens.weight
decoder.reduce_hidden.weight decoder.reduce_hidden.bias decoder.reduce_cell.weight decoder.reduce_cell.bias
decoder.input_from_embed.weight decoder.input_from_embed.bias decoder.input_from_feed.weight
decoder.layers.0.weight_ih decoder.layers.0.weight_hh decoder.layers.0.bias_ih decoder.layers.0.bias_hh
decoder.attention.coverage_weight decoder.attention.key_proj.weight decoder.attention.key_proj.bias
decoder.attention.query_proj.weight decoder.attention.v.weight decoder.output_projection.weight
decoder.output_projection.bias""".split()
SEE_KEYS = "decoder.readout.pre_output.weight decoder.readout.pre_output.bias".split()
SWITCH_KEYS = "decoder.readout.switch.proj.weight decoder.readout.switch.proj.bias".split()
LUONG_KEYS = """encoder.embed_norm.weight encoder.embed_norm.bias decoder.embed_norm.weight decoder.embed_norm.bias
decoder.readout.attentional.weight decoder.readout.attentional.bias""".split()
GRU_KEYS = """encoder.embed_tokens.weight encoder.gru_forward.weight_ih_l0 encoder.gru_forward.weight_hh_l0
encoder.gru_forward.bias_ih_l0 encoder.gru_forward.bias_hh_l0 encoder.gru_backward.weight_ih_l0
encoder.gru_backward.weight_hh_l0 encoder.gru_backward.bias_ih_l0 encoder.gru_backward.bias_hh_l0
encoder.gate.proj.weight encoder.gate.proj.bias decoder.embed_tokens.weight decoder.init_state.weight
decoder.init_state.bias decoder.cell.weight_ih decoder.cell.weight_hh decoder.cell.bias_ih decoder.cell.bias_hh
decoder.attention.key_proj.weight decoder.attention.key_proj.bias decoder.attention.query_proj.weight
decoder.attention.v.weight decoder.readout.weight decoder.readout.bias decoder.output_projection.weight
decoder.output_projection.bias""".split()
PAULUS_KEYS = """encoder.embed_tokens.weight encoder.lstm.weight_ih_l0 encoder.lstm.weight_hh_l0 encoder.lstm.bias_ih_l0
encoder.lstm.bias_hh_l0 encoder.lstm.weight_ih_l0_reverse encoder.lstm.weight_hh_l0_reverse
encoder.lstm.bias_ih_l0_reverse encoder.lstm.bias_hh_l0_reverse decoder.embed_tokens.weight
decoder.reduce_hidden.weight decoder.reduce_hidden.bias decoder.reduce_cell.weight decoder.reduce_cell.bias
decoder.lstm.weight_ih_l0 decoder.lstm.weight_hh_l0 decoder.lstm.bias_ih_l0 decoder.lstm.bias_hh_l0
decoder.attention.weight decoder.intra_attention.weight decoder.output_projection.proj decoder.output_projection.bias
""".split() + SWITCH_KEYS  # pgn_lstm_paulus2017's options (written when they were added)
PAULUS = dict(decoder_readout="paulus", intra_temporal_attention=True, intra_decoder_attention=True,
              shared_output_projection=True, no_coverage=True)
GRU_COPY_KEYS = "decoder.switch.proj.weight decoder.switch.proj.bias".split()
GLOBAL_KEYS = """encoder.global_encoding.u_s encoder.global_encoding.proj.weight encoder.global_encoding.proj.bias
decoder.global_key_proj.weight decoder.readout_global.weight""".split()


@pytest.mark.parametrize("build, options, expected", [
    (tiny_model, {}, PGN_KEYS + SEE_KEYS + SWITCH_KEYS),
    (tiny_model, {"no_copy": True}, PGN_KEYS + SEE_KEYS),
    (tiny_model, {"decoder_readout": "luong", "embed_norm": True}, PGN_KEYS + LUONG_KEYS + SWITCH_KEYS),
    (tiny_model, {"no_coverage_attention": True}, sorted(set(PGN_KEYS) - {"decoder.attention.coverage_weight"})
     + SEE_KEYS + SWITCH_KEYS),
    (tiny_model, PAULUS, PAULUS_KEYS),
    (tiny_gru, {}, GRU_KEYS + GLOBAL_KEYS),
    (tiny_gru, {"copy": True}, GRU_KEYS + GLOBAL_KEYS + GRU_COPY_KEYS),
    (tiny_gru, {"no_global_encoding": True}, GRU_KEYS),
])
def test_checkpoint_parameter_names_are_unchanged(dictionary, build, options, expected):
    model = build(dictionary, **options)
    assert sorted(model.state_dict()) == sorted(expected)
    model.load_state_dict({key: torch.zeros_like(value) for key, value in model.state_dict().items()}, strict=True)


@pytest.mark.parametrize("build, options, cell", [
    (tiny_model, {"decoder_layers": 2}, lambda decoder: decoder.layers[-1]),
    (tiny_gru, {}, lambda decoder: decoder.cell),
])
def test_decoder_states_are_the_top_recurrent_states(dictionary, build, options, cell):
    """extra["decoder_states"] (B x T x H) is s_t of the top recurrent layer at every step."""
    torch.manual_seed(1)
    model = build(dictionary, **options).eval()
    src, lengths, prev = tiny_batch(dictionary)
    seen = []
    hook = cell(model.decoder).register_forward_hook(
        lambda module, inputs, output: seen.append(output[0] if isinstance(output, tuple) else output)
    )
    try:
        states = model(src, lengths, prev)[1]["decoder_states"]
    finally:
        hook.remove()
    assert states.shape == (2, prev.size(1), model.decoder.hidden_size)
    assert torch.equal(states, torch.stack(seen, dim=1))


def test_extended_output_without_copy_is_exact_in_generation_and_floored_in_losses(dictionary):
    """Without copying a marker has probability 0: generation's distribution (``probs``) gives it exactly -inf
    whatever ``log_floor``, and the losses' path scores a marker target as <unk> (``targets``)."""
    torch.manual_seed(2)
    num_regular, ext_size = 6, 9
    logits = torch.randn(2, 3, num_regular)
    floored = ExtendedVocabularyOutput(num_regular, ext_size, 3, copy=False)
    exact = ExtendedVocabularyOutput(num_regular, ext_size, 3, copy=False, log_floor=None)
    net_output = (logits, {})
    torch.testing.assert_close(floored.probs(net_output, False), exact.probs(net_output, False))
    log_floored, log_exact = floored.probs(net_output, True), exact.probs(net_output, True)
    assert torch.all(log_exact[..., num_regular:] == float("-inf"))
    assert torch.equal(log_floored, log_exact)
    target = torch.tensor([[0, 7, 2], [5, 6, 8]])
    assert torch.equal(floored.targets(target), torch.tensor([[0, 3, 2], [5, 3, 3]]))


def test_several_copy_sources_mix_into_one_distribution():
    """Two sources with their own switches and attention, mixed by weights: the distribution sums to 1, a word
    in both sources gets copy mass from both, ``mix_at`` equals a gather from ``mix``, and one source with
    weight 1 is exactly eq 9 (``full`` / ``at``)."""
    torch.manual_seed(3)
    num_regular, ext_size = 6, 9
    mixture = CopyMixture(num_regular, ext_size)
    logits = torch.randn(1, 2, num_regular)  # B x T x V_reg
    weights = torch.tensor([[[0.25, 0.75], [0.5, 0.5]]])  # B x T x M
    p_gen = torch.tensor([[[0.2, 0.6], [0.9, 0.4]]])  # B x T x M
    attn = torch.softmax(torch.randn(1, 2, 2, 3), dim=-1)  # B x T x M x S
    src_tokens = torch.tensor([[[7, 2, 4], [7, 5, 5]]])  # B x M x S: marker 7 in both sources
    generate, copy, tokens = merge_copy_sources(weights, p_gen, attn, src_tokens)
    probs = mixture.mix(logits, generate, copy, tokens)  # B x T x V_ext
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 2))
    copied = weights * (1 - p_gen)  # B x T x M: each source's copy share
    both = copied[..., 0] * attn[..., 0, 0] + copied[..., 1] * attn[..., 1, 0]  # marker 7 at position 0 of each
    torch.testing.assert_close(probs[..., 7], both)
    assert torch.all(probs[..., 8] == 0)  # a marker in neither source
    words = torch.tensor([[7, 5]])
    torch.testing.assert_close(mixture.mix_at(logits, generate, copy, tokens, words),
                               probs.gather(2, words.unsqueeze(2)).squeeze(2))

    one = merge_copy_sources(torch.ones(1, 2, 1), p_gen[..., :1], attn[:, :, :1], src_tokens[:, :1])
    logit = torch.log(p_gen[..., :1]) - torch.log1p(-p_gen[..., :1])  # B x T x 1: p_gen = sigmoid(logit)
    single = (attn[:, :, 0], logit, src_tokens[:, 0])  # B x T x S, B x T x 1, B x S
    torch.testing.assert_close(mixture.mix(logits, *one), mixture.log_full(logits, *single).exp())
    torch.testing.assert_close(mixture.mix_at(logits, *one, words), mixture.log_at(logits, *single, words).exp())


@pytest.mark.parametrize("eos_attention", ["generate", "renormalise"])
def test_one_copy_source_with_an_uncopyable_eos_is_eq_9(eos_attention):
    """merge_copy_sources with one source of weight 1 and </s> (2) uncopyable gives CopyMixture's distribution
    with the same eos_attention, also for a source of </s> alone (row 1: it generates only)."""
    torch.manual_seed(5)
    num_regular, ext_size = 6, 9
    mixture = CopyMixture(num_regular, ext_size, uncopyable=2, eos_attention=eos_attention)
    logits = torch.randn(2, 3, num_regular)
    p_gen = torch.rand(2, 3, 1) * 0.8 + 0.1  # B x T x 1
    src = torch.tensor([[7, 4, 7, 2], [2, 1, 1, 1]])  # B x S: a repeated marker; </s> alone
    attn = torch.softmax(torch.randn(2, 3, 4).masked_fill(src.eq(1).unsqueeze(1), float("-inf")), -1)
    merged = merge_copy_sources(torch.ones(2, 3, 1), p_gen, attn.unsqueeze(2), src.unsqueeze(1), uncopyable=2,
                                eos_attention=eos_attention)
    logit = torch.log(p_gen) - torch.log1p(-p_gen)  # p_gen = sigmoid(logit)
    torch.testing.assert_close(mixture.mix(logits, *merged), mixture.log_full(logits, attn, logit, src).exp())
    torch.testing.assert_close(mixture.mix(logits, *merged)[1, :, :num_regular], logits[1].softmax(-1))


def test_extended_output_reads_copy_weights_when_given(dictionary):
    """A decoder mixing several copy sources puts ``copy_weights`` in its extra output; probs and target_probs
    then use ``CopyMixture.mix``."""
    torch.manual_seed(4)
    output = ExtendedVocabularyOutput(6, 9, 3, copy=True)
    logits = torch.randn(1, 2, 6)
    generate, copy, tokens = merge_copy_sources(
        torch.full((1, 2, 2), 0.5), torch.full((1, 2, 2), 0.3), torch.softmax(torch.randn(1, 2, 2, 3), -1),
        torch.tensor([[[7, 2, 4], [7, 5, 5]]]),
    )
    extra = {"p_gen": generate, "copy_weights": copy, "src_tokens": tokens, "attn": [None]}
    expected = output.mixture.mix(logits, generate, copy, tokens)
    torch.testing.assert_close(output.probs((logits, extra), log_probs=False), expected)
    target = torch.tensor([[7, 8]])
    expected_at_target = expected.gather(2, target.unsqueeze(2))[..., 0]  # B x T
    torch.testing.assert_close(output.target_probs((logits, extra), target), expected_at_target)


@pytest.mark.parametrize("build, options", [(tiny_model, {"decoder_layers": 2}), (tiny_gru, {})])
def test_step_state_reorders_rows_and_keeps_source_only_entries(dictionary, build, options):
    """reorder_incremental_state: every entry follows new_order along its batch dimension (dim 1 for pgn_lstm's
    L x B x H), and the attention keys stay the same tensor while every row keeps its source."""
    torch.manual_seed(5)
    model = build(dictionary, **options).eval()
    src, lengths, prev = tiny_batch(dictionary)
    encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, lengths), torch.tensor([0, 0, 1, 1]))
    state = {}
    model.decoder(prev.repeat_interleave(2, dim=0)[:, :1], encoder_out, incremental_state=state)
    before = model.decoder.load_state(encoder_out, state)

    within = torch.tensor([1, 0, 3, 2])  # rows swap inside each source
    model.decoder.reorder_incremental_state(state, within)
    after = model.decoder.load_state(encoder_out, state)
    assert after["keys"] is before["keys"]
    dims = model.decoder.state_batch_dims
    for key, value in before.items():
        torch.testing.assert_close(after[key], value.index_select(dims.get(key, 0), within), rtol=0, atol=0)

    across = torch.tensor([2, 2, 0, 1])  # rows change source
    model.decoder.reorder_incremental_state(state, across)
    moved = model.decoder.load_state(encoder_out, state)
    assert torch.equal(moved["keys"], after["keys"].index_select(0, across))
    assert moved[beam_reorder.SOURCE_ROW].tolist() == [1, 1, 0, 0]

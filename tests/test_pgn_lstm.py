"""pgn_lstm: the final distribution, incremental decoding, copying and numerical safety."""
import math

import pytest
import torch

from conftest import assert_incremental_equals_full, stub_task, tiny_batch, tiny_dictionary, tiny_model
from fairseq_plugins.text.markers import marker
from fairseq_plugins.text.restore import restore_tokens


@pytest.fixture
def dictionary():
    return tiny_dictionary()


batch = tiny_batch


def set_switch(model, bias):
    """Force p_gen = sigmoid(bias) whatever the inputs."""
    with torch.no_grad():
        model.decoder.readout.switch.proj.weight.zero_()
        model.decoder.readout.switch.proj.bias.fill_(bias)


LUONG = {"decoder_readout": "luong", "embed_norm": True}


@pytest.mark.parametrize("options", [{}, {"no_copy": True}, {"no_coverage": True}, {"decoder_layers": 2}, LUONG])
def test_final_distribution_sums_to_one_over_extended_vocabulary(dictionary, options):
    torch.manual_seed(0)
    model = tiny_model(dictionary, **options).eval()
    src, lengths, prev = batch(dictionary)
    probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
    assert probs.shape == (2, 4, len(dictionary))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4))
    assert (probs >= 0).all()


def test_markers_only_reachable_by_copying(dictionary):
    torch.manual_seed(0)
    model = tiny_model(dictionary).eval()
    src, lengths, prev = batch(dictionary)
    probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
    m0, m1 = dictionary.index(marker(0)), dictionary.index(marker(1))
    assert (probs[:, :, m0] > 0).all()  # <oov-0> is in both sources
    assert (probs[:, :, m1] == 0).all()  # <oov-1> is in neither


@pytest.mark.parametrize("eos_attention", ["generate", "renormalise"])
def test_copy_mass_follows_the_formula(dictionary, eos_attention):
    """Eq 9 by hand: P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i, the copy side over the source
    without its </s>: its attention joins p_gen's share (the sentinel) or the attention is renormalised over the
    other positions."""
    torch.manual_seed(1)
    model = tiny_model(dictionary, eos_attention=eos_attention).eval()
    src, lengths, prev = batch(dictionary)
    logits, extra = model(src, lengths, prev)
    probs = model.get_normalized_probs((logits, extra), log_probs=False)
    p_gen, attn, src_right = extra["p_gen"][0, :, 0], extra["attn"][0], extra["src_tokens"]
    p_vocab = torch.softmax(logits, -1)
    word = 4  # "a", in the first source at position 0 only
    assert src_right[0, 0] == word and src_right[0, 4] == dictionary.eos()
    if eos_attention == "generate":
        generate, copied = p_gen + (1 - p_gen) * attn[0, :, 4], (1 - p_gen) * attn[0, :, 0]  # a_</s> at position 4
    else:
        copyable = attn[0].sum(-1) - attn[0, :, 4]  # T: all but </s> (position 4)
        generate, copied = p_gen, (1 - p_gen) * attn[0, :, 0] / copyable
    torch.testing.assert_close(probs[0, :, word], generate * p_vocab[0, :, word] + copied)


def test_target_probs_match_full_distribution(dictionary):
    """The training path (P at the target only) equals a gather from the full distribution."""
    torch.manual_seed(2)
    for options in ({}, {"no_copy": True}):
        model = tiny_model(dictionary, **options).eval()
        src, lengths, prev = batch(dictionary)
        target = torch.cat([prev[:, 1:], torch.full((2, 1), dictionary.eos())], dim=1)
        net_output = model(src, lengths, prev)
        full = model.get_normalized_probs(net_output, log_probs=False)
        if options:  # without copying, a marker target is scored as <unk>
            target_for_full = target.masked_fill(target >= model.decoder.num_regular, dictionary.unk())
        else:
            target_for_full = target
        expected = full.gather(2, target_for_full.unsqueeze(2)).squeeze(2)
        torch.testing.assert_close(model.get_target_probs(net_output, target), expected)


def test_left_and_right_padding_give_the_same_result(dictionary):
    torch.manual_seed(3)
    model = tiny_model(dictionary).eval()
    src, lengths, prev = batch(dictionary)
    right = torch.tensor([[4, 5, src[0, 2], 6, 2], [7, src[1, 3], 2, 1, 1]])
    left_probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
    right_probs = model.get_normalized_probs(model(right, lengths, prev), log_probs=False)
    torch.testing.assert_close(left_probs, right_probs)


@pytest.mark.parametrize("options", [{}, {"no_copy": True, "no_coverage": True}, {"decoder_layers": 2}, LUONG])
def test_incremental_decoding_equals_full_forward_with_reordering(dictionary, options):
    torch.manual_seed(4)
    model = tiny_model(dictionary, **options).eval()
    assert_incremental_equals_full(model, *batch(dictionary))  # the two rows swap halfway, as in beam search


@pytest.mark.parametrize("options", [{}, LUONG])
@pytest.mark.parametrize("bias", [200.0, -200.0])
def test_gradients_finite_when_p_gen_is_exactly_zero_or_one(dictionary, bias, options):
    from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion

    torch.manual_seed(5)
    model = tiny_model(dictionary, **options).train()
    set_switch(model, bias)
    src, lengths, prev = batch(dictionary)
    # Targets include a marker that is absent from the source (P = 0 whatever p_gen) and, with p_gen = 1,
    # a marker that only copying could produce.
    target = torch.tensor([[4, dictionary.index(marker(0)), 5, 2], [dictionary.index(marker(0)), 8, 9, 2]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target, "ntokens": 8, "id": torch.tensor([0, 1])}

    criterion = FocalCopyCoverageCriterion(stub_task(dictionary)(), 0.25, 1.0, 1.0, "sequence", False)
    loss, _, log = criterion(model, sample)
    p_gen = model(src, lengths, prev)[1]["p_gen"]
    assert torch.all(p_gen == (1.0 if bias > 0 else 0.0))
    loss.backward()
    assert math.isfinite(loss.item())
    for name, param in model.named_parameters():
        assert param.grad is None or torch.isfinite(param.grad).all(), name


def test_copying_generates_a_source_oov_word(dictionary):
    """With p_gen forced to 0 and uniform attention, beam search can only copy; the most frequent source
    token is the OOV marker, so it is what comes out."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(6)
    model = tiny_model(dictionary).eval()
    set_switch(model, -200.0)
    with torch.no_grad():
        model.decoder.attention.v.weight.zero_()  # every source position gets the same attention
    m0 = dictionary.index(marker(0))
    src = torch.tensor([[m0, 4, m0, m0, dictionary.eos()]])
    generator = SequenceGenerator([model], dictionary, beam_size=2, max_len_b=3, min_len=3)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([5])}}
    hypo = generator.generate([model], sample)[0][0]
    assert hypo["tokens"][:3].tolist() == [m0, m0, m0]
    # ... and the marker comes back as the document's OOV word.
    tokens = dictionary.string(hypo["tokens"]).split()
    counts = {"restored": 0, "unmatched": 0}
    assert restore_tokens(tokens, ["zyzzyva"], drop_unk=False, counts=counts)[:3] == ["zyzzyva"] * 3


def parameter_names(model):
    return {name for name, _ in model.named_parameters()}


def test_embedding_normalization_adds_exactly_two_layer_norms(dictionary):
    plain, normed = tiny_model(dictionary), tiny_model(dictionary, embed_norm=True)
    added = parameter_names(normed) - parameter_names(plain)
    assert added == {f"{side}.embed_norm.{p}" for side in ("encoder", "decoder") for p in ("weight", "bias")}
    assert parameter_names(plain) <= parameter_names(normed)
    # Eq 14 on the embeddings: zero mean, unit variance per position before gamma/beta (initially 1/0).
    tokens = torch.tensor([[4, 5, 6]])
    x = normed.encoder.embed_norm(normed.encoder.embed_tokens(tokens))
    torch.testing.assert_close(x.mean(-1), torch.zeros(1, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(x.var(-1, unbiased=False), torch.ones(1, 3), atol=1e-3, rtol=0)


def test_luong_readout_replaces_only_the_readout(dictionary):
    see, luong = tiny_model(dictionary), tiny_model(dictionary, decoder_readout="luong")
    only_see, only_luong = parameter_names(see) - parameter_names(luong), parameter_names(luong) - parameter_names(see)
    assert only_see == {"decoder.readout.pre_output.weight", "decoder.readout.pre_output.bias"}
    assert only_luong == {"decoder.readout.attentional.weight", "decoder.readout.attentional.bias"}
    # The switch reads h~ only (eq 9), the feed is h~ (H wide) instead of the context (2H wide).
    assert luong.decoder.readout.switch.proj.in_features == 7
    assert luong.decoder.input_from_feed.in_features == 7 and see.decoder.input_from_feed.in_features == 12


def test_luong_attentional_state_is_eq_3(dictionary):
    torch.manual_seed(7)
    model = tiny_model(dictionary, decoder_readout="luong").eval()
    src, lengths, prev = batch(dictionary)
    steps = model.decoder.extract_features(prev, model.encoder(src, lengths))
    readout = model.decoder.readout
    expected = torch.tanh(readout.attentional(torch.cat([steps["contexts"], steps["states"]], dim=2)))
    torch.testing.assert_close(steps["feeds"], expected)


def test_pretrained_embeddings_are_loaded_and_frozen(dictionary, tmp_path):
    glove = tmp_path / "vectors.txt"
    glove.write_text("a 1 2 3 4 5 6 7 8\nc -1 -2 -3 -4 -5 -6 -7 -8\nnotindict 9 9 9 9 9 9 9 9\n", encoding="utf-8")
    model = tiny_model(dictionary, encoder_embed_path=str(glove), encoder_freeze_embed=True, share_all_embeddings=True)
    weight = model.encoder.embed_tokens.weight
    torch.testing.assert_close(weight[dictionary.index("a")], torch.arange(1.0, 9.0))
    torch.testing.assert_close(weight[dictionary.index("c")], -torch.arange(1.0, 9.0))
    assert weight[dictionary.pad()].abs().sum() == 0
    assert not weight.requires_grad and model.decoder.embed_tokens is model.encoder.embed_tokens
    with pytest.raises(ValueError, match=r"vectors.txt.*8.*16|16.*8"):
        tiny_model(dictionary, encoder_embed_dim=16, decoder_embed_dim=16, encoder_embed_path=str(glove))


@pytest.mark.parametrize("options", [{"no_copy": True}, {}])
def test_fairseq_cross_entropy_scores_markers_as_the_model_can(dictionary, options):
    """fairseq's own cross_entropy reads get_targets: without copying a marker target becomes <unk> (the only
    way the model can produce it) and the loss is finite; with copying markers stay markers, and one that is in
    its source has a finite loss.  (A marker absent from its source has probability exactly 0 there: fairseq's
    cross_entropy, which has no floor, gives it an infinite loss; summ-prepare never writes such a target.)"""
    from fairseq.criterions.cross_entropy import CrossEntropyCriterion

    torch.manual_seed(8)
    model = tiny_model(dictionary, **options).eval()
    src, lengths, prev = batch(dictionary)
    target = torch.tensor([[4, dictionary.index(marker(0)), 5, 2], [dictionary.index(marker(0)), 8, 9, 2]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target, "ntokens": 8}
    net_output = model(**sample["net_input"])
    scored = model.get_targets(sample, net_output)
    unk = target.masked_fill(target >= model.decoder.num_regular, dictionary.unk())
    assert torch.equal(scored, unk if options else target)
    loss, _, _ = CrossEntropyCriterion(stub_task(dictionary)(), sentence_avg=False)(model, sample)
    log_probs = model.get_normalized_probs(net_output, log_probs=True)
    torch.testing.assert_close(loss, -log_probs.gather(2, scored.unsqueeze(2)).sum())
    assert math.isfinite(loss.item())


def test_building_a_model_turns_on_flush_to_zero_for_the_process_and_says_so(dictionary, caplog):
    """Flush-to-zero is process-wide (modules/factories.flush_denormals): building a model, as the hub does,
    turns it on and logs it; it stays off for a process that turned it off until a model is built again."""
    subnormal = torch.tensor(1e-39)  # below float32's smallest normal number (1.2e-38)
    torch.set_flush_denormal(False)
    try:
        with caplog.at_level("INFO", logger="fairseq_plugins.modules.factories"):
            tiny_model(dictionary)
            assert (subnormal * 1.0).item() == 0.0  # flushed
            assert "flush-to-zero on for this process" in caplog.text
            caplog.clear()
            tiny_model(dictionary)
        assert "flush-to-zero" not in caplog.text  # said once, when it changed
    finally:
        torch.set_flush_denormal(True)

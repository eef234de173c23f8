"""generation/beam_search.py: fairseq's beam search in fewer operations, with the same output as fairseq's loop."""
import argparse

import pytest
import torch

from conftest import tiny_dca, tiny_dictionary, tiny_gru, tiny_model

WORDS = "a b c d e f g h i j k l ."
EOS_BIAS = {"pgn_lstm": 2.0, "global_gate_gru": 0.0, "dca_lstm": 2.0}  # </s> about as likely as a word


def build(dictionary, model, task_options=None, **generation):
    from fairseq_plugins.tasks.summarization import SummarizationConfig, SummarizationTask

    task = SummarizationTask(SummarizationConfig(**(task_options or {})), dictionary, dictionary)
    args = argparse.Namespace(**{"beam": 4, "max_len_a": 0, "max_len_b": 9, "min_len": 1, **generation})
    return task.build_generator([model], args)


def generate(generator, src, lengths, **kwargs):
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}, "id": torch.arange(src.size(0))}
    with torch.no_grad():
        return generator.generate(generator.model.models, sample, **kwargs)


def batch(dictionary, seed=0, documents=7):
    """Left-padded sources of 2..8 tokens (regular words and markers), as fairseq collates them."""
    generator = torch.Generator().manual_seed(seed)
    first, last = dictionary.nspecial, len(dictionary)
    lengths = torch.randint(2, 9, (documents,), generator=generator)
    src = torch.full((documents, int(lengths.max()) + 1), dictionary.pad())
    for row, length in enumerate(lengths.tolist()):
        src[row, -length - 1:-1] = torch.randint(first, last, (length,), generator=generator)
        src[row, -1] = dictionary.eos()
    return src, lengths + 1


def model_of(arch, dictionary):
    torch.manual_seed(11)
    build_model = {"pgn_lstm": tiny_model, "global_gate_gru": tiny_gru, "dca_lstm": tiny_dca}[arch.split(":")[0]]
    overrides = {"fused_steps": False} if arch.endswith(":modules") else {}
    model = build_model(dictionary, **overrides).eval()
    outputs = [m for m in model.decoder.modules() if isinstance(m, torch.nn.Linear)
               and m.out_features == model.decoder.num_regular and m.bias is not None]
    with torch.no_grad():  # so that hypotheses end at different steps
        outputs[-1].bias[dictionary.eos()] += EOS_BIAS[arch.split(":")[0]]
    return model


def assert_same_hypotheses(got, expected):
    """The same hypotheses in the same order: tokens equal; scores and attention equal up to float32 rounding.
    The two searches drop finished documents at different steps, so their matrix products see batches of other
    sizes, and on some CPUs (AMD's, through MKL) a row's result depends on the rows beside it by a last bit."""
    assert len(got) == len(expected)
    for hypos, reference in zip(got, expected):
        assert len(hypos) == len(reference)
        for hypo, ref in zip(hypos, reference):
            assert torch.equal(hypo["tokens"], ref["tokens"])
            for key in ("score", "positional_scores", "attention"):
                assert hypo[key].dtype == ref[key].dtype, key
                torch.testing.assert_close(hypo[key], ref[key], rtol=1e-6, atol=1e-6, msg=key)


OPTIONS = [dict(), dict(min_len=6), dict(block_ngram_repeat=2), dict(lenpen=1.7, beam=3), dict(unkpen=2.0, beam=6),
           dict(beam=1), dict(normalize_scores=False)]


@pytest.mark.parametrize("arch", ["pgn_lstm", "pgn_lstm:modules", "global_gate_gru", "dca_lstm"])
def test_the_same_hypotheses_as_fairseqs_loop(arch, monkeypatch):
    """Tokens, scores, positional scores and attention in the same order, for every option set;
    documents leave the batch at every step (a CPU's cadence) or every third (as a GPU's)."""
    from fairseq_plugins.generation import beam_search

    dictionary = tiny_dictionary(words=WORDS)
    model = model_of(arch, dictionary)
    src, lengths = batch(dictionary)
    calls = []
    search = beam_search.search
    monkeypatch.setattr(beam_search, "search", lambda *args, **kw: calls.append(1) or search(*args, **kw))
    lengths_seen = set()
    for every in (1, 3):
        monkeypatch.setattr(beam_search, "look_every", lambda device: every)
        for options in OPTIONS:
            expected = generate(build(dictionary, model, {"fairseq_beam_search": True}, **options), src, lengths)
            got = generate(build(dictionary, model, **options), src, lengths)
            assert_same_hypotheses(got, expected)
            lengths_seen |= {len(hypo["tokens"]) for hypos in got for hypo in hypos}
    assert len(calls) == 2 * len(OPTIONS)  # the project's search ran, fairseq's loop only when asked
    assert len(lengths_seen) > 3  # hypotheses finished at several steps


def test_other_searches_run_fairseqs_loop(monkeypatch):
    """Prefix tokens and sampling are fairseq's: the project's search does not apply to them."""
    from fairseq_plugins.generation import beam_search

    dictionary = tiny_dictionary(words=WORDS)
    model = model_of("pgn_lstm", dictionary)
    src, lengths = batch(dictionary, documents=3)
    monkeypatch.setattr(beam_search, "search", lambda *args, **kw: pytest.fail("beam_search.search was called"))
    prefix = torch.full((3, 1), dictionary.index("c"))
    hypos = generate(build(dictionary, model), src, lengths, prefix_tokens=prefix)
    assert all(hypo["tokens"][0] == prefix[0, 0] for hypos_ in hypos for hypo in hypos_)
    sampled = generate(build(dictionary, model, sampling=True, beam=2), src, lengths)
    assert [len(h) for h in sampled] == [2, 2, 2]


def test_min_len_above_max_len_is_refused_as_fairseq_does():
    dictionary = tiny_dictionary(words=WORDS)
    model = model_of("pgn_lstm", dictionary)
    src, lengths = batch(dictionary, documents=2)
    with pytest.raises(AssertionError, match="min_len cannot be larger than max_len"):
        generate(build(dictionary, model, min_len=12, max_len_b=9), src, lengths)


def test_reordering_within_documents_equals_the_general_reorder():
    """A step's reorder that keeps rows within their documents gives the state fairseq's reorder gives, and keeps
    what depends on the source alone as the same tensors."""
    dictionary = tiny_dictionary(words=WORDS)
    model = model_of("pgn_lstm", dictionary)
    src, lengths = batch(dictionary, documents=2)
    beam = 3
    expand = torch.arange(2).repeat_interleave(beam)
    with torch.no_grad():
        encoder_out = model.encoder.reorder_encoder_out(model.encoder(src, lengths), expand)
        states = [{}, {}]
        for state in states:
            model.decoder(torch.full((2 * beam, 1), dictionary.eos()), encoder_out, incremental_state=state)
        order = torch.tensor([2, 2, 0, 4, 3, 3])
        model.decoder.reorder_incremental_state(states[0], order)
        before = model.decoder.get_incremental_state(states[1], "state")
        model.decoder.reorder_within_documents(states[1], order)
        general, within = (model.decoder.get_incremental_state(state, "state") for state in states)
    assert general.keys() == within.keys()
    for key in general:
        assert torch.equal(general[key], within[key]), key
    assert within["keys"] is before["keys"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_copy_mixture_without_autograd_equals_it_with(dtype):
    """log_full's no-grad path gives the same values, bit for bit: repeated tokens, markers absent from the
    vocabulary side, a source of </s> alone, an attention all on </s>, a saturated switch."""
    from fairseq_plugins.modules.copy_mixture import CopyMixture

    torch.manual_seed(0)
    for uncopyable, eos_attention in ((None, "generate"), (2, "generate"), (2, "renormalise")):
        mixture = CopyMixture(50, 60, uncopyable=uncopyable, eos_attention=eos_attention)
        src = torch.randint(3, 60, (6, 9))
        src[:, -1], src[0], src[1, :4] = 2, 2, 55
        attn = torch.softmax(torch.randn(6, 3, 9) * 3, -1)
        attn[2, :, :-1], attn[2, :, -1] = 0.0, 1.0
        logits, logit = torch.randn(6, 3, 50), torch.randn(6, 3, 1) * 5
        logit[3] = 100.0
        logits, attn, logit = logits.to(dtype), attn.to(dtype), logit.to(dtype)
        with_grad = mixture.log_full(logits.requires_grad_(), attn, logit, src)
        with torch.no_grad():
            without = mixture.log_full(logits, attn, logit, src)
            one_step = mixture.log_full(logits[:, :1], attn[:, :1], logit[:, :1], src)
        assert without.dtype == with_grad.dtype
        assert torch.equal(without, with_grad.detach())
        assert torch.equal(one_step, with_grad.detach()[:, :1])


def test_dropout_dispatches_nothing_in_evaluation():
    from fairseq_plugins.modules.factories import Dropout

    x = torch.ones(1000)
    dropout = Dropout(0.5)
    assert dropout.eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    dropped = dropout.train()(x)
    assert 0 < int((dropped == 0).sum()) < 1000

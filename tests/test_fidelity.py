"""Fidelity fixes from the equation-by-equation review: eq 9 in log space, </s> not copyable,
Shi et al.'s attention without coverage, coverage as a second training phase (See et al.)."""
import math
import re

import pytest
import torch

from conftest import (ROOT, command_env, output, run, slice_corpus, stub_task, tiny_batch, tiny_dictionary,
                      tiny_model)
from fairseq_plugins.modules.copy_mixture import CopyMixture
from fairseq_plugins.modules.extended_vocabulary import LOG_FLOOR, ExtendedVocabularyOutput

NUM_REGULAR, EXT_SIZE, EOS, PAD = 8, 12, 2, 1


@pytest.fixture
def dictionary():
    return tiny_dictionary()


def mixture_inputs(seed=0, dtype=torch.float32):
    """Logits spread over ~60 nats, attention, switch logits and sources with a repeated word, a repeated
    marker (9), a marker in no source (10, 11), </s> and padding."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(2, 3, NUM_REGULAR, generator=g) * 15).to(dtype)  # B x T x V_reg
    src = torch.tensor([[5, 9, 5, 7, 9, EOS], [6, 9, 4, EOS, PAD, PAD]])  # B x S
    scores = torch.randn(2, 3, 6, generator=g) * 3
    scores = scores.masked_fill(src.eq(PAD).unsqueeze(1), float("-inf"))
    attn = torch.softmax(scores, dim=2).to(dtype)  # B x T x S, 0 at padding
    switch_logit = (torch.randn(2, 3, 1, generator=g) * 4).to(dtype)  # B x T x 1
    return logits, attn, switch_logit, src


def direct_log_probs(logits, attn, switch_logit, src, copy_eos, eos_attention="generate"):
    """Eq 9 as printed, in float64 probabilities: p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i, then its
    log (-inf where it is 0).  Unless ``copy_eos``, </s> is not copied: its attention joins p_gen's share
    ("generate") or the attention is renormalised without it ("renormalise")."""
    logits, attn, switch_logit = logits.double(), attn.double(), switch_logit.double()
    p_gen = torch.sigmoid(switch_logit)  # B x T x 1
    probs = torch.zeros(*logits.shape[:2], EXT_SIZE, dtype=torch.float64)
    copy = attn if copy_eos else attn.masked_fill(src.eq(EOS).unsqueeze(1), 0.0)
    if copy_eos or eos_attention == "renormalise":
        copy = copy / copy.sum(dim=2, keepdim=True)
    else:
        p_gen = p_gen + (1 - p_gen) * (attn - copy).sum(dim=2, keepdim=True)  # p_gen + (1 - p_gen) a_</s>
    probs[..., :NUM_REGULAR] = p_gen * torch.softmax(logits, dim=-1)
    copy_share = 1 - torch.sigmoid(switch_logit)  # B x T x 1
    for b in range(src.size(0)):
        for i, token in enumerate(src[b].tolist()):
            probs[b, :, token] += copy_share[b, :, 0] * copy[b, :, i]
    return torch.log(probs)


# ---------------------------------------------------------------------------------------------- eq 9, log space
@pytest.mark.parametrize("uncopyable, eos_attention", [(EOS, "generate"), (EOS, "renormalise"), (None, "generate")])
def test_log_space_eq_9_equals_the_direct_float64_computation(uncopyable, eos_attention):
    logits, attn, switch_logit, src = mixture_inputs(seed=1)
    mixture = CopyMixture(NUM_REGULAR, EXT_SIZE, uncopyable=uncopyable, eos_attention=eos_attention)
    log_probs = mixture.log_full(logits, attn, switch_logit, src)  # B x T x V_ext
    expected = direct_log_probs(logits, attn, switch_logit, src, uncopyable is None, eos_attention)
    finite = torch.isfinite(expected)
    assert (~finite).any() and (expected[finite] < -20).any()  # exact zeros and tiny values are both tested
    torch.testing.assert_close(log_probs[finite].double(), expected[finite], rtol=1e-5, atol=1e-5)
    assert torch.isneginf(log_probs[~finite]).all()  # markers in no source: exactly -inf
    torch.testing.assert_close(torch.logsumexp(log_probs, dim=2), torch.zeros(2, 3), rtol=0, atol=1e-5)
    words = torch.tensor([[5, 9, 10], [EOS, 4, 3]])  # repeated word, repeated marker, absent marker, </s>
    at = mixture.log_at(logits, attn, switch_logit, src, words)
    torch.testing.assert_close(at, log_probs.gather(2, words.unsqueeze(2)).squeeze(2))
    floored = mixture.log_full(logits, attn, switch_logit, src, zero=math.log(LOG_FLOOR))
    assert torch.equal(floored[finite], log_probs[finite])
    assert (floored[~finite] == math.log(LOG_FLOOR)).all()


@pytest.mark.parametrize("eos_attention", ["generate", "renormalise"])
def test_log_space_gradients_equal_the_direct_formula_with_repeated_source_words(eos_attention):
    """Each distinct source word's copy mass is combined once: d log P / d inputs are autograd's of the direct
    float64 formula, also for words at several source positions."""
    inputs = [t.double().requires_grad_() for t in mixture_inputs(seed=2)[:3]]
    src = mixture_inputs(seed=2)[3]
    chosen = torch.tensor([5, 9, 4, 7, EOS, 0])  # words whose log P we differentiate (all finite)
    mixture = CopyMixture(NUM_REGULAR, EXT_SIZE, uncopyable=EOS, eos_attention=eos_attention)
    got = mixture.log_full(*inputs, src)[..., chosen]
    got_grads = torch.autograd.grad(got.sum(), inputs)
    want = direct_log_probs(*inputs, src, False, eos_attention)[..., chosen]
    want_grads = torch.autograd.grad(want[torch.isfinite(want)].sum(), inputs)
    torch.testing.assert_close(got[torch.isfinite(want)], want[torch.isfinite(want)])
    for got_grad, want_grad in zip(got_grads, want_grads):
        torch.testing.assert_close(got_grad, want_grad)


def test_a_word_with_probability_1e_minus_20_still_gets_a_gradient():
    """Eq 9 used to run in probabilities with a 1e-12 clamp before the log: no gradient below it."""
    logits = torch.zeros(1, 1, NUM_REGULAR)
    logits[0, 0, 3] = -46.0 + math.log(NUM_REGULAR - 1)  # P_vocab(3) = e^-46 / (1 + e^-46) ~ 1e-20
    logits.requires_grad_()
    src = torch.tensor([[5, 9, EOS]])
    attn = torch.tensor([[[0.5, 0.3, 0.2]]])
    extra = {"attn": [attn], "p_gen_logit": torch.zeros(1, 1, 1), "src_tokens": src}
    output = ExtendedVocabularyOutput(NUM_REGULAR, EXT_SIZE, unk_idx=3, copy=True, eos=EOS, eos_attention="generate")
    word = torch.tensor([[3]])
    log_prob = output.target_log_probs((logits, extra), word)  # what a criterion takes the log-loss of
    # p_gen = 0.5, plus (1 - p_gen) times the attention on </s>: 0.6; word 3 is not in the source
    assert math.isclose(log_prob.item(), math.log(0.6) - 46.0, rel_tol=1e-5)
    (grad,) = torch.autograd.grad(log_prob.sum(), logits)
    assert torch.isfinite(grad).all() and grad[0, 0, 3] > 0.99  # d log P(3) / d logit_3 = 1 - P_vocab(3)
    full = output.probs((logits, extra), log_probs=True)  # the path fairseq's own criterions take
    (grad,) = torch.autograd.grad(full[0, 0, 3], logits)
    assert torch.isfinite(grad).all() and grad[0, 0, 3] > 0.99
    assert output.target_probs((logits, extra), word).item() == pytest.approx(0.6 * math.exp(-46.0), rel=1e-4)


@pytest.mark.parametrize("logit", [200.0, -200.0])
def test_saturated_switch_keeps_both_sides_finite(logit):
    """p_gen = sigmoid(+-200) is exactly 1 or 0 in float32; in log space the other side is e^-200 times its
    distribution, finite, with finite gradients."""
    logits, attn, _, src = mixture_inputs(seed=3)
    logits.requires_grad_()
    switch = torch.full((2, 3, 1), logit, requires_grad=True)
    log_probs = CopyMixture(NUM_REGULAR, EXT_SIZE, uncopyable=EOS).log_full(logits, attn, switch, src)
    reachable = log_probs[..., [5, 7, 9]]  # in the first source: vocabulary words and a marker
    assert torch.isfinite(reachable[0]).all()
    reachable[0].sum().backward()
    assert torch.isfinite(logits.grad).all() and torch.isfinite(switch.grad).all()


# ---------------------------------------------------------------------------------------------- </s> not copyable
@pytest.mark.parametrize("eos_attention", ["generate", "renormalise"])
def test_eos_gets_no_copy_mass(dictionary, eos_attention):
    """P(</s>) comes from P_vocab alone, weighted by p_gen plus, with the sentinel, (1 - p_gen) a_</s>."""
    torch.manual_seed(4)
    model = tiny_model(dictionary, eos_attention=eos_attention).eval()
    src, lengths, prev = tiny_batch(dictionary)
    logits, extra = model(src, lengths, prev)
    log_probs = model.get_normalized_probs((logits, extra), log_probs=True)  # B x T x V_ext
    eos = dictionary.eos()
    attn, src_right = extra["attn"][0], extra["src_tokens"]  # the attention itself still covers </s>
    at_eos = src_right.eq(eos).unsqueeze(1).expand_as(attn)
    assert (attn[at_eos] > 0).all()
    p_gen = torch.sigmoid(extra["p_gen_logit"][..., 0])  # B x T
    if eos_attention == "generate":
        p_gen = p_gen + (1 - p_gen) * attn.masked_fill(~at_eos, 0.0).sum(-1)
    torch.testing.assert_close(log_probs[..., eos], p_gen.log() + logits.log_softmax(-1)[..., eos])
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2, 4))


def test_attention_held_on_eos_generates_instead_of_copying_its_remainder():
    """An attention of 1 - 1e-6 on </s> and 1e-6 on one word: renormalised, that word gets the whole copy side,
    (1 - p_gen); with the sentinel it gets (1 - p_gen) 1e-6 and the rest generates.  Moving attention from the
    words to </s> changes nothing renormalised and lowers every copy with the sentinel."""
    src = torch.tensor([[5, 6, EOS]])
    attn = torch.tensor([[[1e-6, 0.0, 1 - 1e-6]]], dtype=torch.float64)
    logits, logit = torch.zeros(1, 1, NUM_REGULAR, dtype=torch.float64), torch.zeros(1, 1, 1, dtype=torch.float64)
    renormalised = CopyMixture(NUM_REGULAR, EXT_SIZE, EOS, "renormalise").log_full(logits, attn, logit, src).exp()
    sentinel = CopyMixture(NUM_REGULAR, EXT_SIZE, EOS, "generate").log_full(logits, attn, logit, src).exp()
    vocab = 1 / NUM_REGULAR  # P_vocab is uniform
    assert renormalised[0, 0, 5].item() == pytest.approx(0.5 * vocab + 0.5)
    assert sentinel[0, 0, 5].item() == pytest.approx(vocab * (1 - 0.5e-6) + 0.5e-6)
    spread = torch.tensor([[[0.3, 0.2, 0.5]]], dtype=torch.float64)
    held = torch.tensor([[[0.06, 0.04, 0.9]]], dtype=torch.float64)  # the same ratios, more on </s>
    for mode, change in (("renormalise", 0.0), ("generate", -1.0)):
        mixture = CopyMixture(NUM_REGULAR, EXT_SIZE, EOS, mode)
        before, after = (mixture.log_full(logits, a, logit, src).exp()[0, 0, 5].item() for a in (spread, held))
        assert math.copysign(1.0, after - before) == change if change else after == pytest.approx(before)


def test_a_bad_eos_attention_is_refused():
    with pytest.raises(ValueError, match="eos_attention must be one of"):
        CopyMixture(NUM_REGULAR, EXT_SIZE, EOS, "sentinel")


@pytest.mark.parametrize("arch", ["pgn_lstm", "global_gate_gru", "dca_lstm"])
def test_fairseq_train_renormalises_unless_asked_and_older_options_renormalise(arch):
    """fairseq-train records --eos-attention renormalise unless told generate; options saved before it existed
    (no such attribute) build the renormalising model they were trained as; a value outside the choices is
    refused."""
    import argparse

    from fairseq import options
    from fairseq.models import ARCH_CONFIG_REGISTRY

    import fairseq_plugins

    fairseq_plugins.register()

    def parsed(*extra):
        parser = options.get_training_parser()
        return options.parse_args_and_arch(parser, ["DATA", "--user-dir", str(ROOT / "fairseq_plugins"), "--task",
                                                    "summarization", "--arch", arch, *extra]).eos_attention

    assert parsed() == "renormalise"
    assert parsed("--eos-attention", "generate") == "generate"
    with pytest.raises(SystemExit):
        parsed("--eos-attention", "sentinel")
    saved = argparse.Namespace()  # a checkpoint's options from before the option
    ARCH_CONFIG_REGISTRY[arch](saved)
    assert saved.eos_attention == "renormalise"


def test_an_empty_source_generates_only(dictionary):
    """A source of </s> alone has nothing to copy: P(w) = P_vocab(w) whatever the switch, no NaN forward or
    backward, and beam search runs."""
    from fairseq.sequence_generator import SequenceGenerator

    from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion

    torch.manual_seed(5)
    model = tiny_model(dictionary).train()
    src, lengths = torch.tensor([[dictionary.eos()]]), torch.tensor([1])
    prev = torch.tensor([[dictionary.eos(), 4, 5]])
    logits, extra = model(src, lengths, prev)
    log_probs = model.get_normalized_probs((logits, extra), log_probs=True)
    torch.testing.assert_close(log_probs[..., : model.decoder.num_regular], logits.log_softmax(-1))
    target = torch.tensor([[4, 5, dictionary.eos()]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target, "ntokens": 3, "id": torch.tensor([0])}

    loss, _, _ = FocalCopyCoverageCriterion(stub_task(dictionary)(), 1.0, 0.0, 1.0, "sequence", False)(model, sample)
    loss.backward()
    assert math.isfinite(loss.item())
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    generator = SequenceGenerator([model], dictionary, beam_size=2, max_len_b=4)
    hypos = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    assert all(math.isfinite(h["score"].item()) for h in hypos[0])


# ---------------------------------------------------------------------------------------------- Shi et al.: eq 4
def test_coverage_vector_without_coverage_attention(dictionary):
    """--no-coverage-attention: the attention is eq 1 (the --no-coverage model's, with the same weights) while
    the coverage c^t = sum_{t' < t} a^t' is still accumulated and exposed for the coverage loss."""
    torch.manual_seed(6)
    plain = tiny_model(dictionary, no_coverage=True).eval()
    model = tiny_model(dictionary, no_coverage_attention=True).eval()
    assert model.decoder.coverage and not model.decoder.coverage_attention
    assert model.decoder.attention.coverage_weight is None
    model.load_state_dict(plain.state_dict(), strict=True)  # the same parameters
    src, lengths, prev = tiny_batch(dictionary)
    logits, extra = model(src, lengths, prev)
    plain_logits, plain_extra = plain(src, lengths, prev)
    torch.testing.assert_close(extra["attn"][0], plain_extra["attn"][0])
    torch.testing.assert_close(logits, plain_logits)
    attn = extra["attn"][0]
    torch.testing.assert_close(extra["coverage"], attn.cumsum(dim=1) - attn)  # eq 10, before each step
    assert extra["coverage"][:, 1:].sum() > 0 and "coverage" not in plain_extra


def test_shi2018_preset_attends_without_coverage_unless_asked():
    from fairseq import options

    import fairseq_plugins

    fairseq_plugins.register()  # this file imported the package before fairseq

    def parsed(*extra):
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(parser, ["DATA", "--user-dir", str(ROOT / "fairseq_plugins"), "--task",
                                                    "summarization", *extra])
        return args.no_coverage, args.no_coverage_attention

    assert parsed("--arch", "pgn_lstm_shi2018") == (False, True)
    assert parsed("--arch", "pgn_lstm_shi2018", "--coverage-attention") == (False, False)
    assert parsed("--arch", "pgn_lstm") == (False, False)
    assert parsed("--arch", "pgn_lstm", "--no-coverage-attention") == (False, True)


# ---------------------------------------------------------------------------------------------- coverage, phase 2
def test_a_checkpoint_without_coverage_loads_with_fresh_coverage_parameters(dictionary, caplog):
    torch.manual_seed(7)
    phase1 = tiny_model(dictionary, no_coverage=True)
    phase2 = tiny_model(dictionary)
    weights = {key: value + 1.0 for key, value in phase1.state_dict().items()}
    with caplog.at_level("WARNING"):
        phase2.load_state_dict(weights, strict=True)
    assert "newly initialised decoder.attention.coverage_weight" in caplog.text
    assert torch.all(phase2.decoder.attention.coverage_weight == 0)  # as initialised: eq 11 starts as eq 1
    for key, value in phase2.state_dict().items():
        if key != "decoder.attention.coverage_weight":
            assert torch.equal(value, weights[key]), key
    with pytest.raises(RuntimeError, match="decoder.reduce_cell.bias"):  # any other missing key still fails
        tiny_model(dictionary).load_state_dict({k: v for k, v in weights.items() if k != "decoder.reduce_cell.bias"})
    with pytest.raises(RuntimeError, match="decoder.extra"):  # ... and so does an unexpected one
        tiny_model(dictionary).load_state_dict(dict(weights, **{"decoder.extra": torch.zeros(1)}))
    coverage_weights = {key: torch.ones_like(value) for key, value in phase2.state_dict().items()}
    tiny_model(dictionary).load_state_dict(coverage_weights)  # a checkpoint with coverage: loads as it is
    with pytest.raises(RuntimeError, match="coverage_weight"):  # and not into a model without coverage
        tiny_model(dictionary, no_coverage=True).load_state_dict(coverage_weights)


@pytest.mark.slow
def test_coverage_as_a_second_phase_through_train_sh(tmp_path):
    """The documented two commands (configs/see2017_coverage_phase2.conf) for a few updates each."""
    raw = slice_corpus("scitldr", tmp_path / "raw", (("train", 60), ("valid", 8), ("test", 2)))
    data = tmp_path / "data"
    run(["./preprocess.sh", "-c", "dtu_common", raw, data])
    tiny = ["--max-update", "2", "--encoder-hidden-size", "16", "--decoder-hidden-size", "32", "--max-tokens", "2000"]
    log1 = output(["./train.sh", "-c", "dtu_pointer", data, tmp_path / "m1", *tiny])
    assert "copy=True, coverage=False" in log1 and re.search(r"num_updates[ =]2\b", log1)
    phase2 = ["./train.sh", "-c", "see2017_coverage_phase2", data, tmp_path / "m2", *tiny[2:]]
    missing = run(phase2, check=False, env={k: v for k, v in command_env().items() if k != "PHASE1"})
    assert missing.returncode != 0 and "PHASE1" in missing.stderr
    phase1 = tmp_path / "m1" / "checkpoint_best.pt"
    log2 = output([*phase2, "--max-update", "2"], env=command_env(PHASE1=str(phase1)))
    assert "copy=True, coverage=True, coverage attention=True" in log2
    assert "newly initialised decoder.attention.coverage_weight" in log2
    assert re.search(r"Loaded checkpoint \S+m1/checkpoint_best.pt", log2), log2[-3000:]
    assert re.search(r"num_updates[ =]2\b", log2)  # phase 2 counts its own updates
    train_lines = [line for line in log2.splitlines() if "| coverage " in line and "train" in line]
    assert train_lines and not re.search(r"\| coverage 0 \|", train_lines[-1])  # the coverage loss is on

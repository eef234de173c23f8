"""Mixed precision on the CPU: every architecture and criterion in float16 and bfloat16 against float32.

fairseq's ``--fp16`` and ``--bf16`` run the whole model in the half type (``model.half()`` / ``.bfloat16()``,
float32 master weights in the optimizer).  These tests do the same with tiny models on the CPU: the forward and
backward pass of pgn_lstm (See et al.'s copy + coverage, and Paulus et al.'s intra-temporal and intra-decoder
attentions, shared output projection, with and without coverage), global_gate_gru (with and without its copy
switch) and dca_lstm (agent attention, multi-agent pointer), under focal_copy_coverage, semantic_cohesion and
self_critical_rouge, on a batch with left padding, a one-token document and copied OOV markers.

Tolerances (stated once, here): log P(w) within ``LOG_PROB_TOL`` (absolute, nats) of float32 wherever float32's
is finite, and -inf exactly where float32's is; losses within ``LOSS_RTOL`` (relative).  Measured on this batch:
at most 6e-4 (float16) and 6e-3 (bfloat16) for log P, so the tolerances leave a 10x margin; bfloat16 has 8
mantissa bits against float16's 11.
"""
import pytest
import torch

from conftest import stub_task, tiny_dca, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.criterions.self_critical_rouge import SelfCriticalRougeConfig, SelfCriticalRougeCriterion
from fairseq_plugins.criterions.semantic_cohesion import SemanticCohesionCriterion
from fairseq_plugins.generation.sampling import teacher_forcing_input
from fairseq_plugins.modules.copy_mixture import GenerationSwitch
from fairseq_plugins.text.markers import marker

DICT = tiny_dictionary("a b c d e f g h i j . <q>")  # a..j = 4..13, . = 14, <q> = 15, markers 16..19
PAD, EOS, DOT = DICT.pad(), DICT.eos(), DICT.index(".")
MARKERS = [DICT.index(marker(k)) for k in range(4)]
HALF = (torch.float16, torch.bfloat16)
LOG_PROB_TOL = {torch.float16: 1e-2, torch.bfloat16: 5e-2}
LOSS_RTOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2}


Task = stub_task(DICT, skips_nonfinite_updates=True)


PAULUS = dict(decoder_readout="paulus", intra_temporal_attention=True, intra_decoder_attention=True,
              shared_output_projection=True)
MODELS = {
    "pgn_lstm": lambda: tiny_model(DICT),
    "pgn_lstm_paulus": lambda: tiny_model(DICT, no_coverage=True, **PAULUS),
    "pgn_lstm_paulus_coverage": lambda: tiny_model(DICT, no_coverage_attention=True, **PAULUS),
    "global_gate_gru": lambda: tiny_gru(DICT),
    "global_gate_gru_copy": lambda: tiny_gru(DICT, copy=True),
    "dca_lstm": lambda: tiny_dca(DICT),
}


def focal(**options):
    args = dict(focal_alpha=0.25, focal_gamma=1.0, coverage_lambda=1.0, loss_average="sequence", sentence_avg=False)
    args.update(options)
    return FocalCopyCoverageCriterion(Task(), **args)


def cohesion():
    return SemanticCohesionCriterion(Task(), focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0,
                                     loss_average="sequence", sentence_avg=False, cohesion_lambda=0.5)


def self_critical():
    return SelfCriticalRougeCriterion(Task(), SelfCriticalRougeConfig(
        focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence", on_nonfinite="stop",
        rl_max_len_b=6, rl_gamma=0.9))


CRITERIONS = {"focal_copy_coverage": focal, "semantic_cohesion": cohesion, "self_critical_rouge": self_critical}


def batch(src_len=40, tgt_len=16):
    """Three documents: a full one, a left-padded one, a one-token one; sentences end with '.', every target
    copies an OOV marker of its source."""
    g = torch.Generator().manual_seed(5)
    src = torch.randint(4, DOT, (3, src_len), generator=g)  # B x S
    src[:, 6::7] = DOT
    src[:, 3], src[:, -2], src[:, -1] = MARKERS[0], MARKERS[1], EOS
    src[1, :15] = PAD
    src[2, :-2] = PAD
    tgt = torch.randint(4, DOT, (3, tgt_len), generator=g)  # B x T
    tgt[:, 4::5] = DOT
    tgt[:, 2], tgt[:, -1] = MARKERS[1], EOS
    tgt[1, 2] = MARKERS[0]
    tgt[2, 4], tgt[2, 5:] = EOS, PAD
    return {"net_input": {"src_tokens": src, "src_lengths": src.ne(PAD).sum(dim=1),
                          "prev_output_tokens": teacher_forcing_input(tgt, PAD, EOS)},
            "target": tgt, "ntokens": int(tgt.ne(PAD).sum()), "id": torch.arange(3)}


def twins(name, dtype, scale=1.0):
    """The float32 model and a copy of it in ``dtype`` (same weights, times ``scale``), both in training mode."""
    torch.manual_seed(0)
    model = MODELS[name]().train()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(scale)
    half = MODELS[name]()
    half.load_state_dict(model.state_dict())
    return model, half.to(dtype).train()


def log_probs(model, sample):
    return model.get_normalized_probs(model(**sample["net_input"]), log_probs=True)  # B x T x V_ext


def assert_close_log_probs(half_lp, full_lp, tol):
    finite = torch.isfinite(full_lp)
    assert torch.equal(torch.isfinite(half_lp), finite), "P(w) = 0 at other words than in float32"
    assert torch.equal(torch.isneginf(half_lp), torch.isneginf(full_lp))
    assert (half_lp.float()[finite] - full_lp[finite]).abs().max().item() <= tol


def assert_finite_gradients(model):
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert len(grads) > 5
    bad = [name for name, grad in grads.items() if not torch.isfinite(grad).all()]
    assert not bad, f"non-finite gradients: {bad}"
    assert any(grad.abs().sum() > 0 for grad in grads.values())


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", MODELS)
def test_log_probs_are_float32_s_within_the_tolerance(name, dtype):
    full, half = twins(name, dtype)
    sample = batch()
    assert_close_log_probs(log_probs(half, sample), log_probs(full, sample), LOG_PROB_TOL[dtype])


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", MODELS)
def test_large_weights_keep_float32_s_zeros(name, dtype):
    """Weights 6x their initialisation push the switch and the attention towards saturation: P(w) must still be
    0 exactly where float32's is, and finite elsewhere (before the fix, dca_lstm's half-precision sigmoid made
    1 - p_gen exactly 0 and lost copy mass that float32 keeps).  At 8x float32 saturates itself (1 - sigmoid(l)
    is 0 in float32 from l ~ 16.6), so its zeros are no reference there."""
    full, half = twins(name, dtype, scale=6.0)
    sample = batch()
    half_lp, full_lp = log_probs(half, sample), log_probs(full, sample)
    assert torch.equal(torch.isfinite(half_lp), torch.isfinite(full_lp))
    assert not torch.isnan(half_lp).any()


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("criterion", CRITERIONS)
@pytest.mark.parametrize("name", MODELS)
def test_loss_and_gradients_are_finite_and_close_to_float32(name, criterion, dtype):
    full, half = twins(name, dtype)
    sample = batch()
    losses, logs = [], []
    for model in (full, half):
        torch.manual_seed(1)  # the same samples for self_critical_rouge
        loss, _, log = CRITERIONS[criterion]()(model, sample)
        loss.backward()
        assert torch.isfinite(loss)
        assert_finite_gradients(model)
        losses.append(loss.item())
        logs.append(log)
    key = "ml_loss" if criterion == "self_critical_rouge" else "loss"  # the sampled summaries may differ
    assert float(logs[1][key]) == pytest.approx(float(logs[0][key]), rel=LOSS_RTOL[dtype])
    if criterion != "self_critical_rouge":
        assert losses[1] == pytest.approx(losses[0], rel=LOSS_RTOL[dtype])


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_intra_temporal_running_log_sum_exp_step_by_step(dtype):
    """Incremental decoding (what beam search runs) carries L_t = log sum_t' exp(e_t') from step to step
    (Paulus et al. eqs 3-4); in half precision it must give the full pass's log-probabilities."""
    from conftest import decode_incrementally

    full, half = twins("pgn_lstm_paulus_coverage", dtype)
    net_input = batch()["net_input"]
    src, lengths, prev = net_input["src_tokens"], net_input["src_lengths"], net_input["prev_output_tokens"]
    steps, _ = decode_incrementally(half.eval(), src, lengths, prev)
    assert_close_log_probs(steps, log_probs(full.eval(), batch()), LOG_PROB_TOL[dtype])


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_generation_switch_keeps_the_copy_side_of_a_saturated_logit(dtype):
    switch = GenerationSwitch([2]).to(dtype)
    with torch.no_grad():
        switch.proj.weight.fill_(5.0)
        switch.proj.bias.zero_()
    p_gen = switch(torch.ones(1, 2, dtype=dtype))  # logit 10: sigmoid rounds to 1 in both half types
    assert p_gen.dtype == torch.float32
    assert 0 < (1 - p_gen).item() == pytest.approx(torch.sigmoid(torch.tensor(-10.0)).item(), rel=1e-2)


@pytest.mark.parametrize("criterion", CRITERIONS)
@pytest.mark.parametrize("name", ["global_gate_gru", "global_gate_gru_copy"])
def test_autocast_as_amp_keeps_losses_and_gradients_finite(name, criterion):
    """``--amp`` runs the float32 model under autocast.  On the CPU that is bfloat16 autocast; torch 2.13's CPU
    nn.LSTM cannot run under it at all (oneDNN: "could not create a primitive descriptor for the LSTM forward
    propagation primitive", for any LSTM, outside this project's code), so only the GRU model is checked here;
    the LSTM models are covered in bfloat16 by the tests above (the whole model in the half type)."""
    full, _ = twins(name, torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.manual_seed(1)
        loss, _, _ = CRITERIONS[criterion]()(full, batch())
    loss.backward()
    assert torch.isfinite(loss)
    assert_finite_gradients(full)

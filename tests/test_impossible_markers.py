"""Markers no model can produce (a marker absent from the source; every marker without copying) have log P = -inf
at generation, so neither beam search nor the RL sampler ever emits one, while the losses still floor them
(modules/extended_vocabulary.py), for every architecture with and without its copy mechanism."""
import argparse
import math

import pytest
import torch

from conftest import stub_task, tiny_gru, tiny_model
from fairseq_plugins.modules.extended_vocabulary import LOG_FLOOR
from fairseq_plugins.text.markers import marker
from test_dca_lstm import DICT, build as tiny_dca

PAD, EOS = DICT.pad(), DICT.eos()
A, B, C = (DICT.index(w) for w in "abc")
M0 = DICT.index(marker(0))
MARKERS = torch.arange(M0, len(DICT))  # M0 .. M3
SOURCE = torch.tensor([[A, B, M0, C, EOS], [PAD, PAD, M0, M0, EOS]])  # left-padded, as fairseq collates
LENGTHS = torch.tensor([5, 3])
PREV = torch.tensor([[EOS, A, M0, B], [EOS, M0, A, A]])

ARCHS = [("pgn_lstm", True), ("pgn_lstm", False), ("dca_lstm", True), ("dca_lstm", False),
         ("global_gate_gru", True), ("global_gate_gru", False)]


def build(arch, copy):
    torch.manual_seed(1)
    if arch == "pgn_lstm":
        model = tiny_model(DICT, no_copy=not copy)
    elif arch == "dca_lstm":
        model = tiny_dca(no_copy=not copy)
    else:
        model = tiny_gru(DICT, copy=copy)
    return model.eval()


def impossible(copy):
    """B x V_ext bool: the markers the model can never produce in each row of SOURCE."""
    rows = torch.zeros(SOURCE.size(0), len(DICT), dtype=torch.bool)
    rows[:, M0:] = True
    if copy:
        rows[:, M0:] = ~(SOURCE.unsqueeze(2) == MARKERS).any(dim=1)  # copying makes source markers possible
    return rows


def bias_to_one_word(model, word=A, margin=50.0, switch=15.0):
    """P_vocab all but certain of ``word`` (every other regular word at log P_vocab ~ -2 margin: -100, far below
    the old floor log(1e-12) = -27.6), and p_gen = sigmoid(switch) (15: the copy side is tiny too, log ~ -16)."""
    decoder = model.decoder
    with torch.no_grad():
        decoder.output_projection.weight.zero_()
        decoder.output_projection.bias.fill_(-margin)
        decoder.output_projection.bias[word] = margin
        gate = getattr(decoder, "switch", None) or getattr(getattr(decoder, "readout", None), "switch", None)
        if gate is not None:
            gate.proj.weight.zero_()
            gate.proj.bias.fill_(switch)
    return model


# ---------------------------------------------------------------------------------------------- distributions
@pytest.mark.parametrize("arch,copy", ARCHS)
def test_generation_gives_impossible_markers_minus_inf_and_zero(arch, copy):
    model = build(arch, copy)
    net_output = model(SOURCE, LENGTHS, PREV)
    log_probs = model.get_normalized_probs(net_output, log_probs=True)  # B x T x V_ext
    probs = model.get_normalized_probs(net_output, log_probs=False)  # B x T x V_ext
    never = impossible(copy).unsqueeze(1).expand_as(log_probs)  # B x T x V_ext
    assert never.any() and (never.sum() < never.numel())
    assert torch.isneginf(log_probs[never]).all(), log_probs[never].unique()
    assert (probs[never] == 0).all()
    assert torch.isfinite(log_probs[~never]).all()  # every regular word, and a copyable marker
    torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:2]))
    torch.testing.assert_close(log_probs.exp(), probs)


@pytest.mark.parametrize("arch,copy", ARCHS)
def test_losses_still_floor_an_impossible_marker_target(arch, copy):
    """A target that is an impossible marker: log P floored at log(1e-12) with copying (scored as <unk>
    without), so focal_copy_coverage's loss is finite and so are its gradients."""
    from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion

    model = build(arch, copy).train()
    m1 = DICT.index(marker(1))  # in neither source
    target = torch.tensor([[A, m1, B, EOS], [m1, M0, A, EOS]])
    net_output = model(SOURCE, LENGTHS, PREV)
    log_p = model.get_target_log_probs(net_output, target)  # B x T
    if copy:
        assert (log_p[target == m1] == math.log(LOG_FLOOR)).all()
    else:
        unk = target.masked_fill(target >= M0, DICT.unk())
        torch.testing.assert_close(log_p, model.get_target_log_probs(net_output, unk))
    assert torch.isfinite(log_p).all()
    sample = {"net_input": {"src_tokens": SOURCE, "src_lengths": LENGTHS, "prev_output_tokens": PREV},
              "target": target, "ntokens": 8, "id": torch.arange(2)}
    loss, _, _ = FocalCopyCoverageCriterion(stub_task(DICT)(), 1.0, 0.0, 0.0, "sequence", False)(model, sample)
    assert math.isfinite(loss.item())
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


# ---------------------------------------------------------------------------------------------- decoding
def task_generator(model, **generation):
    """The summarization task's generator, as fairseq-generate builds it."""
    from fairseq_plugins.tasks.summarization import SummarizationConfig, SummarizationTask

    task = SummarizationTask(SummarizationConfig(), DICT, DICT)
    options = {"beam": 5, "nbest": 5, "max_len_a": 0, "max_len_b": 3, "min_len": 1, **generation}
    return task.build_generator([model], argparse.Namespace(**options))


def emitted_impossible(hypos, copy):
    """How many hypotheses hold a marker their source cannot produce; asserts every score is a number."""
    never, count = impossible(copy), 0
    for row, beams in enumerate(hypos):
        assert len(beams) == 5
        for hypo in beams:
            assert not torch.isnan(hypo["positional_scores"]).any() and math.isfinite(float(hypo["score"]))
            count += int(never[row, hypo["tokens"]].any())
    return count


@pytest.mark.parametrize("arch,copy", ARCHS)
def test_beam_search_never_emits_an_impossible_marker(arch, copy):
    """Every word but one is far below the old floor, so a finite score made the impossible markers the beam's
    next-best candidates; at -inf they never are, and no score becomes NaN."""
    model = bias_to_one_word(build(arch, copy))
    sample = {"net_input": {"src_tokens": SOURCE, "src_lengths": LENGTHS}, "id": torch.arange(2)}
    with torch.no_grad():
        hypos = task_generator(model).generate([model], sample)
    assert emitted_impossible(hypos, copy) == 0


@pytest.mark.parametrize("arch,copy", ARCHS)
def test_the_rl_sampler_never_draws_an_impossible_marker(arch, copy):
    """self_critical_rouge's sampler draws from get_normalized_probs(log_probs=False): exactly 0 there."""
    from fairseq_plugins.generation.sampling import free_run

    model = bias_to_one_word(build(arch, copy), margin=2.0, switch=0.0)  # every possible word gets drawn
    rows = 64
    documents = torch.arange(2).repeat(rows // 2)  # R
    net_input = {"src_tokens": SOURCE, "src_lengths": LENGTHS}
    run = free_run(model, net_input, torch.zeros(rows, dtype=torch.bool), torch.full((rows,), 6),
                   source_rows=documents, generator=torch.Generator().manual_seed(0))
    assert not run.nonfinite.any() and torch.isfinite(run.log_probs).all()
    drawn = run.tokens.masked_fill(run.tokens.eq(PAD), A)  # R x T
    assert not impossible(copy)[documents.unsqueeze(1), drawn].any()
    assert (drawn >= M0).any() == copy  # a copyable marker is drawn, the sampler is not simply avoiding markers

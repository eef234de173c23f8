"""Training modes inside the criterions: no module with parameters runs in eval mode while a gradient flows.

cuDNN's recurrent backward refuses a module in eval mode ("cudnn RNN backward can only be called in training
mode"), so a criterion that switched dropout off with ``model.eval()`` crashed every RL run on a GPU.  The CPU
cannot see that crash; these tests see its cause: every call of a module with parameters made with gradient
enabled is recorded with the module's ``training`` flag, for every architecture x criterion pair.  They also
check that dropout really is off where the criterion says (modules/training_switches.py), that the recurrent
layers' inter-layer dropout comes back, and that y^s is scored by an exact teacher-forced pass even with
``--rl-dropout`` on a model that feeds back its own predictions.
"""
from typing import List, Tuple

import pytest
import torch
import torch.nn as nn

from conftest import stub_task, tiny_dca, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.criterions.self_critical_rouge import SelfCriticalRougeConfig, SelfCriticalRougeCriterion
from fairseq_plugins.criterions.semantic_cohesion import (
    SelfCriticalCohesionConfig,
    SelfCriticalCohesionCriterion,
    SemanticCohesionCriterion,
)
from fairseq_plugins.generation.sampling import teacher_forcing_input
from fairseq_plugins.modules.training_switches import dropout_off, own_predictions_off
from fairseq_plugins.text.markers import marker

DICT = tiny_dictionary("a b c d e f g . <q>")
PAD, EOS, DOT = DICT.pad(), DICT.eos(), DICT.index(".")
M0, M1 = DICT.index(marker(0)), DICT.index(marker(1))

PAULUS = dict(decoder_readout="paulus", intra_temporal_attention=True, intra_decoder_attention=True,
              shared_output_projection=True, no_coverage=True, own_prediction_prob=0.25)
TWO_LAYERS = dict(encoder_layers=2, decoder_layers=2, encoder_embed_dim=7, decoder_embed_dim=7,
                  decoder_out_embed_dim=7)
ARCHS = {  # every architecture, with dropout (and inter-layer dropout where it has layers)
    "pgn_lstm": lambda: tiny_model(DICT, dropout=0.3),
    "pgn_lstm_two_layers": lambda: tiny_model(DICT, dropout=0.3, **TWO_LAYERS),
    "pgn_lstm_paulus": lambda: tiny_model(DICT, dropout=0.3, **PAULUS),
    "global_gate_gru": lambda: tiny_gru(DICT, dropout=0.3, copy=True),
    "dca_lstm": lambda: tiny_dca(DICT, dropout=0.3),
}


Task = stub_task(DICT, skips_nonfinite_updates=True)


ML_OPTIONS = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence")
RL_OPTIONS = dict(ML_OPTIONS, on_nonfinite="stop", rl_max_len_b=6, rl_gamma=0.9)


def self_critical(**options):
    return SelfCriticalRougeCriterion(Task(), SelfCriticalRougeConfig(**RL_OPTIONS, **options))


CRITERIONS = {
    "focal_copy_coverage": lambda: FocalCopyCoverageCriterion(Task(), sentence_avg=False, **ML_OPTIONS),
    "semantic_cohesion": lambda: SemanticCohesionCriterion(Task(), sentence_avg=False, cohesion_lambda=0.5,
                                                           **ML_OPTIONS),
    "self_critical_rouge": self_critical,
    "self_critical_rouge_scored_in_sampling": lambda: self_critical(rl_score_in_sampling=True),
    "self_critical_rouge_rl_dropout": lambda: self_critical(rl_dropout=True),
    "self_critical_cohesion": lambda: SelfCriticalCohesionCriterion(Task(), SelfCriticalCohesionConfig(
        **RL_OPTIONS, cohesion_lambda=0.5)),
}


def batch():
    """Two documents of two sentences (the second left-padded), both targets copying a marker."""
    src = torch.tensor([[4, 5, M0, 6, DOT, 7, 8, M1, DOT, EOS], [PAD, PAD, PAD, 9, M0, DOT, 10, 4, DOT, EOS]])
    tgt = torch.tensor([[4, M0, DOT, 7, M1, DOT, EOS], [M0, 10, DOT, 4, DOT, EOS, PAD]])
    return {"net_input": {"src_tokens": src, "src_lengths": src.ne(PAD).sum(dim=1),
                          "prev_output_tokens": teacher_forcing_input(tgt, PAD, EOS)},
            "target": tgt, "ntokens": int(tgt.ne(PAD).sum()), "id": torch.arange(2)}


def record_modes(model: nn.Module) -> List[Tuple[str, bool]]:
    """(module name, its training flag) for every call, made with gradient enabled, of a module that has
    parameters of its own."""
    calls: List[Tuple[str, bool]] = []
    for name, module in model.named_modules():
        if any(True for _ in module.parameters(recurse=False)):
            module.register_forward_pre_hook(
                lambda m, _, name=name: calls.append((name, m.training)) if torch.is_grad_enabled() else None)
    return calls


def dropout_rates(model: nn.Module) -> list:
    return [m.p for m in model.modules() if isinstance(m, nn.Dropout)] + \
        [m.dropout for m in model.modules() if isinstance(m, nn.RNNBase)]


@pytest.mark.parametrize("criterion", CRITERIONS)
@pytest.mark.parametrize("arch", ARCHS)
def test_no_module_with_parameters_runs_in_eval_mode_with_gradient(arch, criterion):
    torch.manual_seed(0)
    model = ARCHS[arch]().train()
    rates = dropout_rates(model)
    calls = record_modes(model)
    loss, _, _ = CRITERIONS[criterion]()(model, batch())
    loss.backward()
    recurrent = {name for name, module in model.named_modules() if isinstance(module, nn.RNNBase)}
    assert recurrent & {name for name, _ in calls}, "no recurrent layer ran with gradient"
    in_eval = sorted({name for name, training in calls if not training})
    assert not in_eval, f"modules in eval mode with gradient enabled: {in_eval}"
    assert all(module.training for module in model.modules())  # every mode is back
    assert dropout_rates(model) == rates  # and every dropout rate


def test_dropout_off_is_the_eval_mode_network_with_every_module_in_training_mode():
    """Two layers (inter-layer dropout in nn.LSTM) and dropout 0.5: inside ``dropout_off`` the output is
    deterministic and equals eval mode's; no module changes mode except the parameterless dropout ones."""
    torch.manual_seed(0)
    model = tiny_model(DICT, dropout=0.5, **TWO_LAYERS).train()
    net_input = batch()["net_input"]
    with torch.no_grad():
        model.eval()
        expected = model(**net_input)[0]
        model.train()
        noisy = model(**net_input)[0]
        with dropout_off(model):
            assert all(m.training for m in model.modules() if any(True for _ in m.parameters(recurse=False)))
            assert all(m.dropout == 0 for m in model.modules() if isinstance(m, nn.RNNBase))
            first, second = model(**net_input)[0], model(**net_input)[0]
    assert not torch.allclose(noisy, expected, atol=1e-3)  # dropout does act outside the block
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)
    assert model.encoder.lstm.dropout == 0.5 and all(m.training for m in model.modules())


def test_switches_restore_the_model_after_an_exception_and_do_nothing_when_not_asked():
    model = tiny_model(DICT, dropout=0.5, **TWO_LAYERS, **PAULUS).train()
    with pytest.raises(RuntimeError):
        with dropout_off(model), own_predictions_off(model):
            assert model.decoder.own_prediction_prob == 0
            raise RuntimeError("inside")
    assert model.decoder.own_prediction_prob == 0.25 and model.encoder.lstm.dropout == 0.5
    assert all(m.training for m in model.modules())
    with dropout_off(model, off=False), own_predictions_off(model, off=False):
        assert model.decoder.own_prediction_prob == 0.25 and model.encoder.lstm.dropout == 0.5
        assert all(m.training for m in model.modules())


@pytest.mark.parametrize("rl_dropout", [False, True])
def test_y_s_is_scored_by_an_exact_teacher_forced_pass_on_a_model_that_feeds_back_its_predictions(rl_dropout):
    """Paulus et al.'s model reads its own previous prediction with probability 0.25 in training (here 1.0, and
    no dropout, so any difference is the feeding): the RL pass over y^s must read y^s itself, with or without
    --rl-dropout; the ML pass keeps the feeding."""
    torch.manual_seed(0)
    model = tiny_model(DICT, dropout=0.0, **dict(PAULUS, own_prediction_prob=1.0)).train()
    sample = batch()
    scr = self_critical(rl_dropout=rl_dropout)
    torch.manual_seed(1)
    sampled, _ = scr.decode(model, sample)
    scored = scr.sample_log_probs(model, sample, sampled)
    assert scored.requires_grad
    decoded = torch.arange(sampled.tokens.size(1)).unsqueeze(0) < sampled.lengths.unsqueeze(1)
    torch.testing.assert_close(scored, sampled.log_probs * decoded, atol=1e-5, rtol=1e-5)
    reference = model(**sample["net_input"])[0]  # training mode: the model's own predictions fed back
    with own_predictions_off(model):
        exact = model(**sample["net_input"])[0]
    assert not torch.allclose(reference, exact, atol=1e-4)  # the feeding acts in the ML pass
    assert model.decoder.own_prediction_prob == 1.0

"""semantic_cohesion: L_SEM on hand-made states, its place in the loss for every architecture, the direction of
its gradient, and its composition with self_critical_rouge."""
import argparse

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.criterions.semantic_cohesion import (
    SelfCriticalCohesionConfig,
    SelfCriticalCohesionCriterion,
    SemanticCohesionCriterion,
    semantic_cohesion,
)
from fairseq_plugins.generation.sampling import teacher_forcing_input
from fairseq_plugins.text.markers import marker

DICT = tiny_dictionary("a b c d e f g . 。")  # a..g = 4..10, . = 11, 。 = 12, markers 13..16
PAD, EOS = DICT.pad(), DICT.eos()
A, B, C, D, E = (DICT.index(w) for w in "abcde")
DOT, ZH_STOP = DICT.index("."), DICT.index("。")
M0 = DICT.index(marker(0))


class Task:
    source_dictionary = DICT
    target_dictionary = DICT
    skips_nonfinite_updates = True


def cohesion(**options) -> SemanticCohesionCriterion:
    args = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence", sentence_avg=False,
                cohesion_lambda=0.5)
    args.update(options)
    return SemanticCohesionCriterion(Task(), **args)


def focal(**options) -> FocalCopyCoverageCriterion:
    args = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence", sentence_avg=False)
    args.update(options)
    return FocalCopyCoverageCriterion(Task(), **args)


def tiny_dca(**overrides):
    import fairseq_plugins  # noqa: F401
    from fairseq_plugins.models.dca_lstm import DCALSTMModel

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, attention_dim=5, dropout=0.0)
    options.update(overrides)
    return DCALSTMModel.build_model(argparse.Namespace(**options), Task())


MODELS = {"pgn_lstm": lambda: tiny_model(DICT), "global_gate_gru": lambda: tiny_gru(DICT), "dca_lstm": tiny_dca}


def sample(target=None):
    src = torch.tensor([[A, B, DOT, M0, C, ZH_STOP, EOS], [PAD, PAD, PAD, D, M0, DOT, EOS]])
    if target is None:  # three sentences; one sentence ("d <oov-0>" without a delimiter)
        target = torch.tensor([[A, DOT, B, C, ZH_STOP, M0, DOT, EOS], [D, M0, EOS, PAD, PAD, PAD, PAD, PAD]])
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([7, 4]),
                          "prev_output_tokens": teacher_forcing_input(target, PAD, EOS)},
            "target": target, "ntokens": int(target.ne(PAD).sum()), "id": torch.tensor([0, 1])}


def is_end(target):
    return torch.isin(target, torch.tensor([DOT, ZH_STOP]))


# ---------------------------------------------------------------------------------------------- L_SEM
def test_l_sem_is_the_sum_of_cosines_of_consecutive_sentence_end_states():
    torch.manual_seed(0)
    states = torch.randn(1, 9, 4)
    target = torch.tensor([[A, DOT, B, C, DOT, DOT, D, E, EOS]])  # "a ." "b c . ." "d e" </s>
    cos = lambda i, j: F.cosine_similarity(states[0, i], states[0, j], dim=0)  # noqa: E731
    # after: the states that have read each sentence's last token (steps 2, 6, and 8, which predicts </s>)
    expected_after = cos(6, 2) + cos(8, 6)
    torch.testing.assert_close(semantic_cohesion(states, target, is_end(target), PAD, EOS, "after")[0],
                               expected_after)
    # at: the states that predict each sentence's end (steps 1, 5, and 8, which predicts </s>)
    expected_at = cos(5, 1) + cos(8, 5)
    torch.testing.assert_close(semantic_cohesion(states, target, is_end(target), PAD, EOS, "at")[0], expected_at)


@pytest.mark.parametrize("target", [[A, B, DOT, EOS, PAD], [A, B, C, EOS, PAD], [A, DOT, DOT, ZH_STOP, EOS],
                                    [EOS, PAD, PAD, PAD, PAD]])
@pytest.mark.parametrize("state", ["after", "at"])
def test_l_sem_is_zero_for_one_sentence(target, state):
    states = torch.randn(1, 5, 3)
    target = torch.tensor([target])
    assert semantic_cohesion(states, target, is_end(target), PAD, EOS, state).item() == 0.0


def test_l_sem_per_summary_in_a_padded_batch():
    torch.manual_seed(1)
    states = torch.randn(2, 6, 3)
    target = torch.tensor([[A, DOT, B, ZH_STOP, EOS, PAD], [A, B, DOT, C, EOS, PAD]])
    got = semantic_cohesion(states, target, is_end(target), PAD, EOS)
    cos = lambda b, i, j: F.cosine_similarity(states[b, i], states[b, j], dim=0)  # noqa: E731
    torch.testing.assert_close(got, torch.stack([cos(0, 4, 2), cos(1, 4, 3)]))


# ---------------------------------------------------------------------------------------------- the criterion
@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("loss_average", ["sequence", "token"])
def test_loss_is_the_ml_loss_plus_lambda_times_the_mean_l_sem(arch, loss_average):
    torch.manual_seed(2)
    model = MODELS[arch]().eval()
    batch = sample()
    net_output = model(**batch["net_input"])
    ml, sample_size, _ = focal(loss_average=loss_average).compute_loss(model, batch, net_output)
    loss, size, terms = cohesion(loss_average=loss_average, cohesion_lambda=0.5).compute_loss(
        model, batch, net_output)
    l_sem = semantic_cohesion(net_output[1]["decoder_states"], batch["target"], is_end(batch["target"]), PAD, EOS)
    assert l_sem[0] != 0 and l_sem[1] == 0  # three sentences, then one
    assert size == sample_size
    # Divided by the sample size: the ML average plus lambda times L_SEM's mean over the 2 summaries.
    torch.testing.assert_close(loss / size, ml / sample_size + 0.5 * l_sem.sum() / 2)
    torch.testing.assert_close(terms["cohesion"], l_sem.sum())


def test_minimising_l_sem_makes_consecutive_sentence_states_less_similar():
    torch.manual_seed(3)
    model = tiny_dca().train()
    batch = sample()
    criterion = cohesion(focal_alpha=0.0, cohesion_lambda=1.0)  # the ML part weighs 0: L_SEM alone
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def l_sem():
        states = model(**batch["net_input"])[1]["decoder_states"]
        return semantic_cohesion(states, batch["target"], is_end(batch["target"]), PAD, EOS).sum()

    before = l_sem().item()
    loss, _, _ = criterion(model, batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert l_sem().item() < before


def test_forward_logs_cohesion_and_reduces_it_per_summary():
    from fairseq import metrics

    torch.manual_seed(4)
    model = tiny_dca().eval()
    batch = sample()
    criterion = cohesion()
    _, _, logging_output = criterion(model, batch)
    assert "cohesion" in logging_output and "nll" in logging_output
    with metrics.aggregate() as agg:
        SemanticCohesionCriterion.reduce_metrics([logging_output, logging_output])
    assert agg.get_smoothed_values()["cohesion"] == pytest.approx(float(logging_output["cohesion"]) / 2, abs=1e-4)


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="--cohesion-sentence-end"):
        cohesion(cohesion_sentence_end="; :")
    with pytest.raises(ValueError, match="--cohesion-lambda"):
        cohesion(cohesion_lambda=-1.0)

    class NoStates(torch.nn.Module):
        def forward(self, **net_input):
            return torch.zeros(2, 8, 5), {"attn": [torch.zeros(2, 8, 7)]}

        def get_target_probs(self, net_output, target):
            return torch.full(target.shape, 0.5)

    with pytest.raises(ValueError, match="decoder_states"):
        cohesion().compute_loss(NoStates(), sample(), NoStates()())


def test_self_critical_cohesion_uses_semantic_cohesion_as_its_ml_part():
    """gamma = 0: self_critical_cohesion's loss is semantic_cohesion's (L_MLE-SEM, no RL code of its own)."""
    torch.manual_seed(5)
    model = tiny_dca().eval()
    batch = sample()
    cfg = SelfCriticalCohesionConfig(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence",
                                     on_nonfinite="stop", rl_gamma=0.0, rl_max_len_b=4, cohesion_lambda=0.5)
    rl = SelfCriticalCohesionCriterion(Task(), cfg)
    assert isinstance(rl.ml, SemanticCohesionCriterion) and rl.ml.cohesion_lambda == 0.5
    loss, sample_size, logging_output = rl(model, batch)
    expected, expected_size, _ = cohesion(cohesion_lambda=0.5)(model, batch)
    assert sample_size == expected_size
    torch.testing.assert_close(loss, expected)
    assert "cohesion" in logging_output

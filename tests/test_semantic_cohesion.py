"""semantic_cohesion: L_SEM on hand-made states, its place in the loss for every architecture, the direction of
its gradient, and its composition with self_critical_rouge."""

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same_gradients, stub_task, tiny_dca, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.criterions.self_critical_rouge import SelfCriticalRougeConfig, SelfCriticalRougeCriterion
from fairseq_plugins.criterions.semantic_cohesion import (
    SelfCriticalCohesionConfig,
    SelfCriticalCohesionCriterion,
    SemanticCohesionCriterion,
    semantic_cohesion,
)
from fairseq_plugins.generation.sampling import FreeRun, teacher_forcing_input
from fairseq_plugins.modules.sentence_states import pair_cosines
from fairseq_plugins.text.markers import marker

DICT = tiny_dictionary("a b c d e f g . 。 <q>")  # a..g = 4..10, . = 11, 。 = 12, <q> = 13, markers 14..17
PAD, EOS = DICT.pad(), DICT.eos()
A, B, C, D, E = (DICT.index(w) for w in "abcde")
DOT, ZH_STOP, Q = DICT.index("."), DICT.index("。"), DICT.index("<q>")
M0 = DICT.index(marker(0))


Task = stub_task(DICT, skips_nonfinite_updates=True)


def cohesion(**options) -> SemanticCohesionCriterion:
    args = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence", sentence_avg=False,
                cohesion_lambda=0.5)
    args.update(options)
    return SemanticCohesionCriterion(Task(), **args)


def focal(**options) -> FocalCopyCoverageCriterion:
    args = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence", sentence_avg=False)
    args.update(options)
    return FocalCopyCoverageCriterion(Task(), **args)


MODELS = {"pgn_lstm": lambda: tiny_model(DICT), "global_gate_gru": lambda: tiny_gru(DICT), "dca_lstm": lambda: tiny_dca(DICT)}


def sample(target=None):
    src = torch.tensor([[A, B, DOT, M0, C, ZH_STOP, EOS], [PAD, PAD, PAD, D, M0, DOT, EOS]])
    if target is None:  # three sentences; one sentence ("d <oov-0>" without a delimiter)
        target = torch.tensor([[A, DOT, B, C, ZH_STOP, M0, DOT, EOS], [D, M0, EOS, PAD, PAD, PAD, PAD, PAD]])
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([7, 4]),
                          "prev_output_tokens": teacher_forcing_input(target, PAD, EOS)},
            "target": target, "ntokens": int(target.ne(PAD).sum()), "id": torch.tensor([0, 1])}


def is_end(target):
    return torch.isin(target, torch.tensor([DOT, ZH_STOP, Q]))


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
    # separator: the states that emit each sentence's first end token (steps 1, 4, and 8, which predicts </s>)
    expected_separator = cos(4, 1) + cos(8, 4)
    torch.testing.assert_close(semantic_cohesion(states, target, is_end(target), PAD, EOS, "separator")[0],
                               expected_separator)
    # word: the states that emit each sentence's last word (steps 0, 3 and 7)
    expected_word = cos(3, 0) + cos(7, 3)
    torch.testing.assert_close(semantic_cohesion(states, target, is_end(target), PAD, EOS, "word")[0],
                               expected_word)


def test_readings_with_the_q_separator_of_cnndm_references():
    """'a . <q> b c . </s>': the run '. <q>' ends one sentence; after = the state that has read '<q>' (it
    predicts the next sentence's first word, not '<q>'), word = the one that emits 'a', separator = the one that
    emits '.'."""
    torch.manual_seed(6)
    states = torch.randn(1, 7, 4)
    target = torch.tensor([[A, DOT, Q, B, C, DOT, EOS]])
    cos = lambda i, j: F.cosine_similarity(states[0, i], states[0, j], dim=0)  # noqa: E731
    for state, (first, second) in {"after": (3, 6), "word": (0, 4), "separator": (1, 5)}.items():
        got = semantic_cohesion(states, target, is_end(target), PAD, EOS, state)[0]
        torch.testing.assert_close(got, cos(second, first), msg=state)


@pytest.mark.parametrize("form", ["cosine", "squared", "positive"])
def test_forms_of_the_summed_term(form):
    torch.manual_seed(7)
    states = torch.randn(1, 9, 4)
    target = torch.tensor([[A, DOT, B, C, DOT, DOT, D, E, EOS]])
    cosine, pairs = pair_cosines(states, target, is_end(target), PAD, EOS)
    expected = {"cosine": cosine, "squared": cosine ** 2, "positive": cosine.clamp(min=0)}[form][pairs].sum()
    torch.testing.assert_close(semantic_cohesion(states, target, is_end(target), PAD, EOS, form=form)[0], expected)


@pytest.mark.parametrize("form, bound", [("squared", 0.5), ("cosine", None)])
def test_minimising_the_default_form_keeps_the_sentence_before_last_apart(form, bound):
    """Minimising the sum of raw cosines of consecutive sentence ends drives s'_q towards
    s'_{q-2} (cos -> +1); the default cos^2 makes consecutive ends orthogonal and keeps cos(s'_q, s'_{q-2})
    below 0.5."""
    torch.manual_seed(8)
    target = torch.tensor([[A, DOT, B, DOT, C, DOT, D, DOT, E, DOT, EOS]])  # 5 sentences
    states = torch.randn(1, target.size(1), 16, requires_grad=True)
    optimizer = torch.optim.Adam([states], lr=0.05)
    for _ in range(400):
        optimizer.zero_grad()
        semantic_cohesion(states, target, is_end(target), PAD, EOS, form=form).sum().backward()
        optimizer.step()
    with torch.no_grad():
        adjacent, _ = pair_cosines(states, target, is_end(target), PAD, EOS, distance=1)
        before_last, _ = pair_cosines(states, target, is_end(target), PAD, EOS, distance=2)
    if bound is None:
        assert (adjacent < -0.95).all() and (before_last > 0.9).all()
    else:
        assert adjacent.abs().max() < 0.05 and before_last.max() < bound


@pytest.mark.parametrize("target", [[A, B, DOT, EOS, PAD], [A, B, C, EOS, PAD], [A, DOT, DOT, ZH_STOP, EOS],
                                    [EOS, PAD, PAD, PAD, PAD], [A, DOT, Q, EOS, PAD]])
@pytest.mark.parametrize("state", ["after", "word", "separator"])
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
def test_loss_is_the_ml_loss_plus_lambda_l_sem_at_the_papers_scale(arch, loss_average):
    """Lambda weighs each summary's L_SEM against its *summed* NLL (the paper's L_MLE), and the
    two are divided by the same count: the summary's T with sequence averaging, the batch's tokens with token."""
    torch.manual_seed(2)
    model = MODELS[arch]().eval()
    batch = sample()
    net_output = model(**batch["net_input"])
    ml, sample_size, _ = focal(loss_average=loss_average).compute_loss(model, batch, net_output)
    loss, size, terms = cohesion(loss_average=loss_average, cohesion_lambda=0.5).compute_loss(
        model, batch, net_output)
    l_sem = semantic_cohesion(net_output[1]["decoder_states"], batch["target"], is_end(batch["target"]), PAD, EOS,
                              form="squared")
    assert l_sem[0] != 0 and l_sem[1] == 0  # three sentences, then one
    assert size == sample_size
    lengths = batch["target"].ne(PAD).sum(dim=1).float()  # T per summary: 8 and 3
    if loss_average == "sequence":  # mean over summaries of (L_MLE + lambda L_SEM) / T
        expected = ml / sample_size + (0.5 * l_sem / lengths).sum() / 2
    else:  # (sum of L_MLE + lambda L_SEM) / target tokens
        expected = ml / sample_size + 0.5 * l_sem.sum() / lengths.sum()
    torch.testing.assert_close(loss / size, expected)
    torch.testing.assert_close(terms["cohesion"], l_sem.sum())


def test_minimising_l_sem_makes_consecutive_sentence_states_less_similar():
    torch.manual_seed(3)
    model = tiny_dca(DICT).train()
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
    model = tiny_dca(DICT).eval()
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
    model = tiny_dca(DICT).eval()
    batch = sample()
    for mix in ("averages", "paper"):
        cfg = SelfCriticalCohesionConfig(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0,
                                         loss_average="sequence", on_nonfinite="stop", rl_gamma=0.0, rl_max_len_b=4,
                                         cohesion_lambda=0.5, rl_mix=mix)
        rl = SelfCriticalCohesionCriterion(Task(), cfg)
        assert isinstance(rl.ml, SemanticCohesionCriterion) and rl.ml.cohesion_lambda == 0.5
        loss, sample_size, logging_output = rl(model, batch)
        assert "cohesion" in logging_output
        if mix == "averages":  # the ML part's own average
            expected, expected_size, _ = cohesion(cohesion_lambda=0.5)(model, batch)
            assert sample_size == expected_size
            torch.testing.assert_close(loss, expected)
        else:  # the paper's L_MLE + lambda L_SEM summed over each summary, per document
            expected, _, _ = cohesion(cohesion_lambda=0.5, loss_average="token")(model, batch)
            assert sample_size == 2
            torch.testing.assert_close(loss, expected)


def test_self_critical_cohesion_adds_lambda_l_sem_of_the_sampled_summaries():
    """Under self_critical_cohesion the sampled summary's own sentence ends get lambda L_SEM too,
    at L_rl's scale (gamma = 1: the loss is L_rl + lambda L_SEM(y^s), both per-summary sums, over documents)."""
    torch.manual_seed(9)
    model = tiny_dca(DICT).eval()
    batch = sample()
    tokens = torch.tensor([[A, DOT, B, DOT, EOS], [C, D, DOT, EOS, PAD]])  # y^s: two sentences, then one
    sampled = FreeRun(tokens, torch.tensor([5, 4]), torch.zeros(2, 5), torch.zeros(2, dtype=torch.bool))
    greedy = FreeRun(tokens[:, :2], torch.tensor([2, 2]), torch.zeros(2, 2), torch.zeros(2, dtype=torch.bool))

    def loss_with(cohesion_lambda):
        cfg = SelfCriticalCohesionConfig(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0,
                                         loss_average="sequence", on_nonfinite="stop", rl_gamma=1.0,
                                         cohesion_lambda=cohesion_lambda)
        rl = SelfCriticalCohesionCriterion(Task(), cfg)
        rl.decode = lambda model, sample, encoder_out=None: (sampled, greedy)
        return rl(model, batch)

    loss, size, logging_output = loss_with(0.5)
    loss_without, _, _ = loss_with(0.0)
    states = model(**dict(batch["net_input"], prev_output_tokens=teacher_forcing_input(tokens, PAD, EOS)))[1][
        "decoder_states"]
    l_sem = semantic_cohesion(states, tokens, is_end(tokens), PAD, EOS, form="squared")
    assert l_sem[0] > 0 and l_sem[1] == 0
    torch.testing.assert_close(logging_output["cohesion_sample"], l_sem.sum())
    torch.testing.assert_close(loss - loss_without, 0.5 * l_sem.sum() * size / 2)


@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("cohesion_lambda", [0.0, 0.5])
def test_paper_mix_gradient_is_gamma_grad_l_rl_plus_one_minus_gamma_grad_summed_nll(arch, cohesion_lambda):
    """--rl-mix paper (the default): the gradient of the batch loss is
    gamma grad L_rl + (1 - gamma) grad sum_t nll_t (Paulus et al. eq 16 with eqs 14-15 as sums over each
    summary), with L_rl = sum_docs (r(y^g) - r(y^s)) sum_t log p(y^s_t), for self_critical_rouge (lambda = 0);
    for self_critical_cohesion (lambda > 0) plus lambda L_SEM of the reference in the ML term and of y^s in the
    RL term.  Relative tolerance 1e-5 (float32 sums in another order)."""
    torch.manual_seed(10)
    model = MODELS[arch]().eval()
    batch = sample()
    tokens = torch.tensor([[A, DOT, B, DOT, EOS], [C, D, DOT, EOS, PAD]])
    sampled = FreeRun(tokens, torch.tensor([5, 4]), torch.zeros(2, 5), torch.zeros(2, dtype=torch.bool))
    greedy = FreeRun(tokens[:, :2], torch.tensor([2, 2]), torch.zeros(2, 2), torch.zeros(2, dtype=torch.bool))
    gamma = 0.75
    options = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=0.0, loss_average="sequence",
                   on_nonfinite="stop", rl_gamma=gamma)
    if cohesion_lambda:  # self_critical_cohesion
        rl = SelfCriticalCohesionCriterion(Task(), SelfCriticalCohesionConfig(**options,
                                                                              cohesion_lambda=cohesion_lambda))
    else:  # self_critical_rouge
        rl = SelfCriticalRougeCriterion(Task(), SelfCriticalRougeConfig(**options))
    rl.decode = lambda model, sample, encoder_out=None: (sampled, greedy)
    loss, sample_size, _ = rl(model, batch)
    assert sample_size == 2
    got = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)

    factor, _, _ = rl.reward_factors(sampled, greedy, batch["target"])  # B x T: r(y^g) - r(y^s)
    teacher = dict(batch["net_input"], prev_output_tokens=teacher_forcing_input(tokens, PAD, EOS))
    on_sample = model(**teacher)
    log_p = model.get_target_log_probs(on_sample, tokens) * tokens.ne(PAD)  # B x T
    l_rl = (factor.float() * log_p).sum()
    on_reference = model(**batch["net_input"])
    target = batch["target"]
    nll = -(model.get_target_log_probs(on_reference, target) * target.ne(PAD)).sum()
    sem = lambda out, toks: semantic_cohesion(out[1]["decoder_states"], toks, is_end(toks), PAD, EOS,  # noqa: E731
                                              form="squared").sum()
    expected_loss = gamma * (l_rl + cohesion_lambda * sem(on_sample, tokens)) \
        + (1 - gamma) * (nll + cohesion_lambda * sem(on_reference, target))
    expected = torch.autograd.grad(expected_loss, list(model.parameters()), allow_unused=True)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-5)
    assert_same_gradients(got, expected, model)

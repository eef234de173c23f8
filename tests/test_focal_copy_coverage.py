"""focal_copy_coverage: the loss is the one the papers define."""
import math

import pytest
import torch

from conftest import stub_task, tiny_dictionary, tiny_model
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion, coverage_loss, focal_loss
from fairseq_plugins.criterions.nonfinite import NonFiniteLossError
from fairseq_plugins.text.markers import marker


def test_coverage_loss_hand_computed():
    # Two steps over three source words.  c^0 = 0, c^1 = a^0.
    a0 = torch.tensor([0.5, 0.3, 0.2])
    a1 = torch.tensor([0.1, 0.6, 0.3])
    attn = torch.stack([a0, a1]).unsqueeze(0)  # 1 x 2 x 3
    cov = torch.stack([torch.zeros(3), a0]).unsqueeze(0)
    # step 0: sum min(a, 0) = 0; step 1: min(.1,.5) + min(.6,.3) + min(.3,.2) = .1 + .3 + .2 = .6
    torch.testing.assert_close(coverage_loss(attn, cov), torch.tensor([[0.0, 0.6]]))


def test_focal_loss_values():
    log_p = torch.log(torch.tensor([0.9, 0.5, 1e-12]))  # the models floor an exact 0 at 1e-12
    focal, nll = focal_loss(log_p, alpha=0.25, gamma=1.0)
    expected = torch.tensor([0.25 * 0.1 * -math.log(0.9), 0.25 * 0.5 * -math.log(0.5), 0.25 * 1.0 * -math.log(1e-12)])
    torch.testing.assert_close(focal, expected)
    assert torch.isfinite(nll).all()
    focal1, nll1 = focal_loss(log_p, alpha=1.0, gamma=0.0)
    torch.testing.assert_close(focal1, nll1)


def make_sample(dictionary):
    pad, eos, m0 = dictionary.pad(), dictionary.eos(), dictionary.index(marker(0))
    src = torch.tensor([[4, 5, m0, 6, eos], [pad, pad, 7, m0, eos]])
    prev = torch.tensor([[eos, 4, m0, 5], [eos, m0, 8, pad]])
    target = torch.tensor([[4, m0, 5, eos], [m0, 8, eos, pad]])
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([5, 3]), "prev_output_tokens": prev},
            "target": target, "ntokens": 7, "id": torch.tensor([0, 1])}


Task = stub_task(tiny_dictionary())


@pytest.fixture
def model():
    torch.manual_seed(0)
    return tiny_model(Task.target_dictionary).eval()


def reference_terms(model, sample):
    """NLL and coverage per token, computed independently from the full distribution."""
    net_output = model(**sample["net_input"])
    probs = model.get_normalized_probs(net_output, log_probs=False)
    target = sample["target"]
    p = probs.gather(2, target.unsqueeze(2)).squeeze(2)
    attn, cov = net_output[1]["attn"][0], net_output[1]["coverage"]
    cov_t = torch.minimum(attn, cov).sum(2)
    return -torch.log(p), cov_t, target.ne(Task.target_dictionary.pad()).float()


def test_alpha1_gamma0_is_see_et_al_nll_plus_coverage(model):
    sample = make_sample(Task.target_dictionary)
    nll, cov, mask = reference_terms(model, sample)
    lam = 0.7
    criterion = FocalCopyCoverageCriterion(Task(), 1.0, 0.0, lam, "sequence", False)
    loss, sample_size, log = criterion(model, sample)
    # See et al. eq 13 averaged over each summary's steps (eq 7 / Shi eq 16), summed over the batch.
    per_summary = ((nll + lam * cov) * mask).sum(1) / mask.sum(1)
    torch.testing.assert_close(loss, per_summary.sum())
    assert sample_size == 2
    torch.testing.assert_close(log["nll"], (nll * mask).sum())


def test_lambda0_drops_coverage_and_token_average(model):
    sample = make_sample(Task.target_dictionary)
    nll, cov, mask = reference_terms(model, sample)
    criterion = FocalCopyCoverageCriterion(Task(), 1.0, 0.0, 0.0, "token", False)
    loss, sample_size, _ = criterion(model, sample)
    torch.testing.assert_close(loss, (nll * mask).sum())
    assert sample_size == 7


def test_focal_weights_easy_tokens_down(model):
    sample = make_sample(Task.target_dictionary)
    nll, _, mask = reference_terms(model, sample)
    criterion = FocalCopyCoverageCriterion(Task(), 0.25, 2.0, 0.0, "token", False)
    loss, _, _ = criterion(model, sample)
    p = torch.exp(-nll)
    torch.testing.assert_close(loss, (0.25 * (1 - p) ** 2 * nll * mask).sum())


def test_non_finite_loss_is_reported_with_the_batch(model):
    sample = make_sample(Task.target_dictionary)
    with torch.no_grad():
        model.decoder.readout.pre_output.weight.fill_(float("nan"))
    criterion = FocalCopyCoverageCriterion(Task(), 0.25, 1.0, 1.0, "sequence", False)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss nan in validation on a batch of 2 samples "
                                                 r"\(dataset ids 0, 1\); terms: focal=nan"):
        criterion(model, sample)  # the fixture's model is in eval mode; no task told it the update
    criterion.current_update = 4  # as the summarization task's train_step does
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss nan at update 4 on a batch of 2 samples "
                                                 r"\(dataset ids 0, 1\).*still those after update 3"):
        criterion(model.train(), sample)


def test_a_target_of_probability_1e_20_still_gets_a_gradient(model):
    """The loss takes log P from the model's log-space eq 9: no floor cuts the gradient of an unlikely word."""
    sample = make_sample(Task.target_dictionary)
    word = Task.target_dictionary.index("g")  # in no source of the sample: only P_vocab can produce it
    sample["target"][0, 0] = word
    with torch.no_grad():
        model.decoder.output_projection.bias[word] = -60.0  # P_vocab(g) around e^-60 = 1e-26
    criterion = FocalCopyCoverageCriterion(Task(), 1.0, 0.0, 0.0, "token", False)
    loss, _, _ = criterion(model, sample)
    log_p = model.get_target_log_probs(model(**sample["net_input"]), sample["target"])[0, 0]
    assert -70 < float(log_p) < -40  # far below the old floor log(1e-12) = -27.6, and finite
    loss.backward()
    grad = model.decoder.output_projection.bias.grad[word]
    assert torch.isfinite(grad) and float(grad) < -0.5  # raising the bias lowers the loss

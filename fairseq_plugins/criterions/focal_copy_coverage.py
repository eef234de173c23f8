"""``focal_copy_coverage``: focal loss on the copy distribution plus the coverage loss.

Shi et al. (2018), "A Normalized Encoder-Decoder Model for Abstractive Summarization Using Focal Loss",
Shi eqs 12-16, for target word w_t with final probability P(w_t) (See eq 9 for a pointer model):
    focal_t    = -alpha (1 - P(w_t))^gamma log P(w_t)                   (focal loss, Shi eqs 14-15)
    covloss_t  = sum_i min(a_i^t, c_i^t)                                (coverage loss, Shi eq 12; See eq 12)
    loss_t     = focal_t + lambda covloss_t                             (Shi eq 13, focal_t for the NLL)
    loss       = (1/T) sum_{t=0}^{T-1} loss_t                           (Shi eq 16: mean over the summary's steps)
With ``alpha=1, gamma=0`` this is exactly See et al.'s NLL + coverage loss (See eqs 6, 7 and 13); ``lambda=0``
turns the coverage loss off.

The weight of the two terms (Shi eq 16 as the paper writes it): alpha and (1 - P)^gamma <= 1 scale only the word
term, not covloss_t.  With the paper's alpha = 0.25 the coverage loss therefore weighs at least 4x more, relative
to the word term, than in the NLL rows with the same lambda (and more still where gamma > 0 shrinks the word
term of well-predicted words).  ``--coverage-lambda 0.25`` (lambda scaled by alpha) restores the NLL rows'
balance at gamma = 0: configs/shi2018_lcsts_row7.conf, a variant of Table 1's row (6).

Averaging: by default (``--loss-average sequence``) each summary's loss is the mean over its T steps (Shi eq 16)
and the batch loss is the mean over summaries (fairseq's sample_size = number of summaries).  ``token``
averages over all target tokens of the batch instead, as fairseq's own criterions do.

Logged separately (per target token): nll_loss (base 2, so ppl = 2^nll), focal, coverage, p_gen (mean).

A non-finite training loss is never back-propagated: ``--on-nonfinite stop|skip`` (raise, or skip the update),
the ``NonFinitePolicy`` mixin of ``criterions/nonfinite.py``.

Reused, not copied, by ``self_critical_rouge``: ``compute_loss`` (the loss of a teacher-forced output, without
the non-finite policy) with ``reduce_terms`` (its logged terms) is the ML part of that criterion's mixed
objective.
"""
import logging
import math
from dataclasses import dataclass, field

import torch
from omegaconf import II

from fairseq import metrics, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from fairseq_plugins.criterions.nonfinite import ON_NONFINITE, NonFinitePolicy
from fairseq_plugins.modules.target_scores import target_log_probs

LOSS_AVERAGE = ChoiceEnum(["sequence", "token"])

logger = logging.getLogger(__name__)


@dataclass
class FocalCopyCoverageConfig(FairseqDataclass):
    focal_alpha: float = field(default=0.25, metadata={"help": "alpha of the focal loss (1 with gamma 0 = NLL)"})
    focal_gamma: float = field(default=1.0, metadata={"help": "gamma of the focal loss (0 = weighted NLL)"})
    coverage_lambda: float = field(default=1.0, metadata={"help": "weight of the coverage loss (0 = off)"})
    loss_average: LOSS_AVERAGE = field(
        default="sequence", metadata={"help": "sequence: Shi eq 16, mean over each summary's steps; token: over tokens"}
    )
    on_nonfinite: ON_NONFINITE = field(
        default="stop",
        metadata={"help": "non-finite training loss: stop (raise, naming the update and samples) or skip the "
                          "update (parameters and optimizer state unchanged; needs --task summarization)"},
    )
    sentence_avg: bool = II("optimization.sentence_avg")


def focal_loss(log_prob, alpha: float, gamma: float):
    """-alpha (1 - p)^gamma log p, elementwise, from log p (Shi eq 15).  Returns (focal, nll)."""
    nll = -log_prob
    weight = (1.0 - log_prob.exp()).clamp(min=0.0).pow(gamma) if gamma != 0 else torch.ones_like(nll)
    return alpha * weight * nll, nll


def coverage_loss(attn, coverage):
    """sum_i min(a_i^t, c_i^t) per step (See eq 12).  attn, coverage: B x T x S -> B x T."""
    return torch.minimum(attn, coverage).sum(dim=2)


@register_criterion("focal_copy_coverage", dataclass=FocalCopyCoverageConfig)
class FocalCopyCoverageCriterion(NonFinitePolicy, FairseqCriterion):
    """The ML loss.  ``compute_loss(model, sample, net_output)`` is the loss of a teacher-forced net_output
    without the non-finite policy: self_critical_rouge uses it as the ML part of its mixed objective
    (Paulus eq 16), with ``reduce_terms`` logging its terms."""

    nonfinite_name = "focal_copy_coverage"
    nonfinite_logger = logger

    def __init__(self, task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg,
                 on_nonfinite="stop"):
        super().__init__(task)
        self.alpha = focal_alpha
        self.gamma = focal_gamma
        self.coverage_lambda = coverage_lambda
        self.per_sequence = loss_average == "sequence"
        self.padding_idx = task.target_dictionary.pad()
        self.init_nonfinite(task, on_nonfinite)

    def forward(self, model, sample, reduce=True):
        net_output = model(**sample["net_input"])
        loss, sample_size, term_sums = self.compute_loss(model, sample, net_output)
        logging_output = self.make_logging_output(
            loss.data, sample["ntokens"], sample["target"].size(0), sample_size,
            {name: value.data for name, value in term_sums.items()}, skipped=0)
        if not torch.isfinite(loss):
            return self.handle_nonfinite(model, sample, loss, term_sums, logging_output)
        return loss, sample_size, logging_output

    def compute_loss(self, model, sample, net_output):
        """The loss of ``net_output`` (the model's teacher-forced output on ``sample``): (loss summed over the
        batch, sample size, {term: its sum over the batch's target tokens}).  Finite or not."""
        target = sample["target"]  # B x T
        mask = target.ne(self.padding_idx).float()  # B x T
        terms = self.token_terms(model, net_output, target)  # each B x T
        loss_t = terms["focal"] + self.coverage_lambda * terms["coverage"]  # Shi eq 13
        if self.per_sequence:
            lengths = mask.sum(dim=1).clamp(min=1.0)  # T per summary
            loss = ((loss_t * mask).sum(dim=1) / lengths).sum()  # Shi eq 16, summed over the batch
            sample_size = target.size(0)
        else:
            loss = (loss_t * mask).sum()
            sample_size = int(mask.sum().item())
        return loss, sample_size, {name: (value * mask).sum() for name, value in terms.items()}

    def make_logging_output(self, loss, ntokens, nsentences, sample_size, term_sums, skipped):
        """The same keys, in the same order and of the same types, for a normal and a skipped batch: fairseq
        all-reduces the logging outputs of the workers as one flat buffer built in key order."""
        logging_output = {"loss": loss, "ntokens": ntokens, "nsentences": nsentences, "sample_size": sample_size}
        logging_output.update(term_sums)
        if self.logging_skips:
            logging_output["nonfinite_skipped"] = skipped
        return logging_output

    def token_terms(self, model, net_output, target):
        """Per-token focal loss, NLL, coverage loss and p_gen (zeros where the model has none)."""
        focal, nll = focal_loss(target_log_probs(model, net_output, target), self.alpha, self.gamma)  # B x T
        extra = net_output[1]
        coverage = extra.get("coverage")
        cov = coverage_loss(extra["attn"][0], coverage) if coverage is not None else torch.zeros_like(nll)
        p_gen = extra["p_gen"].squeeze(2) if "p_gen" in extra else torch.ones_like(nll)
        return {"focal": focal, "nll": nll, "coverage": cov, "p_gen": p_gen.float()}

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        total = sum(log.get("loss", 0) for log in logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        metrics.log_scalar("loss", total / max(sample_size, 1) / math.log(2), sample_size, round=3)
        cls.reduce_terms(logging_outputs)
        cls.reduce_nonfinite(logging_outputs)

    @staticmethod
    def reduce_terms(logging_outputs) -> None:
        """Logs the terms of ``compute_loss`` (nll_loss in base 2, ppl, focal, coverage, p_gen per token)."""
        total = lambda key: sum(log.get(key, 0) for log in logging_outputs)  # noqa: E731
        ntokens = total("ntokens")
        metrics.log_scalar("nll_loss", total("nll") / max(ntokens, 1) / math.log(2), ntokens, round=3)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["nll_loss"].avg))
        for key in ("focal", "coverage", "p_gen"):
            metrics.log_scalar(key, total(key) / max(ntokens, 1), ntokens, round=4)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

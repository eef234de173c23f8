"""``semantic_cohesion``: the ML loss plus Celikyilmaz et al. (2018)'s semantic cohesion loss.

Deep Communicating Agents, "mixed objective" (our notes, ../shared/papers/DCA_AND_PAULUS.md, DCA objectives):
    L_SEM     = sum_{q=2}^{Q} cos(s'_q, s'_{q-1})                                         [C]
    L_MLE-SEM = L_MLE + lambda L_SEM                                                      [U: exact form; lambda
                                                                                           unknown]
where s'_q is the decoder state at the end of the q-th sentence of the summary (Q sentences; L_SEM = 0 when
Q < 2) and L_MLE = -sum_t log p(y_t | ...) is summed over the summary's tokens.  Under teacher forcing the
sentences are the reference's; under ``self_critical_cohesion`` also the sampled summary's own.

The sign.  +lambda L_SEM is added to a loss that is minimised, so training makes the states at the ends of
consecutive sentences less similar: a decoder that is in the same state at the end of two consecutive sentences
tends to produce the same sentence twice.

Scale (``--cohesion-lambda`` is the paper's lambda).  L_MLE and L_SEM are both per-summary sums, and they are
added as such before any averaging: with ``--loss-average sequence`` (default) each summary's
L_MLE + lambda L_SEM is divided by its T target tokens (focal_copy_coverage's mean over steps, Shi eq 16) and
the batch loss is the mean over summaries; with ``token`` the batch's sum of L_MLE + lambda L_SEM is divided by
the batch's target tokens.  Either way lambda weighs L_SEM against the *summed* NLL of the summary, as in the
paper.

The form (``--cohesion-form``).  ``cosine`` is the paper's term.  Minimising a sum of raw cosines of
consecutive pairs drives each pair towards cos = -1, and then s'_q points the same way as s'_{q-2} (a chain
that alternates between two directions): a mechanism for repeating the sentence before last, the opposite of
the term's purpose.  ``squared`` (default) sums cos^2, whose optimum is orthogonal consecutive states and which
leaves cos(s'_q, s'_{q-2}) free (tests/test_semantic_cohesion.py; docs/design.md: why it is the default).
``positive`` sums max(cos, 0): only similar states are pushed apart, any non-positive cosine is left alone.

Sentences (``--cohesion-sentence-end``, default ``. ! ? 。 ！ ？ <q>``, tokens looked up in the target
dictionary; ``<q>`` is the sentence separator of the project's CNN/DM references).  A run of these tokens
(``. <q>``, ``! ?``) ends one sentence; text after the last run, before ``</s>``, is the last sentence.  A
summary with no such token (or a single sentence) has Q = 1 and L_SEM = 0.

Which state is s'_q (``--cohesion-state``, [U]).  Under teacher forcing the decoder state s_t of step t has read
target tokens 0..t-1 and predicts token t.  For a sentence whose last word is at position w, followed by the
run of end tokens at positions w+1..e:
  * ``word``: s_w, the state that emits the sentence's last word;
  * ``separator``: s_{w+1}, the state that emits the first end token (``.``);
  * ``after`` (default): s_{e+1}, the state that has read the whole run, which predicts the next sentence's
    first word (or ``</s>``).
For a last sentence without end tokens, ``separator`` and ``after`` take the state that predicts ``</s>``.
``separator`` pushes apart states that must all predict the same token (``.``), against the NLL;
with ``<q>`` among the end tokens, ``after`` does not (without it, on CNN/DM it would be the state predicting
``<q>``).  The default reading was chosen by a measurement (docs/design.md).  A sentence whose state does not
exist (a truncated summary ending in an end token, with ``after``) is left out.  The states come from the
model's ``extra["decoder_states"]`` (B x T x H), which every architecture of the project exposes (pgn_lstm,
global_gate_gru, dca_lstm).

Logged: ``cohesion`` (mean L_SEM per summary, in the chosen form) besides the ML part's terms; ``nll_loss``
stays the ML part's per-token NLL, so it compares with systems trained without the term.

With reinforcement learning.  ``self_critical_cohesion`` is ``self_critical_rouge`` with this criterion as its
ML part (its ``ml_criterion_class`` hook): L = gamma (L_rl + lambda L_SEM(y^s)) + (1 - gamma) L_MLE-SEM, all
options of both.  L_SEM(y^s) is the cohesion of the sampled summary's own sentence ends ("as the decoder
generates"), computed on the decoder states of the steps that sampled y^s (generation/sampling.py; those of the
teacher-forced pass that scores y^s when it comes without them), and joins L_rl at its scale
(both per-summary sums); logged as ``cohesion_sample``.  ``--no-sample-cohesion`` leaves L_SEM(y^s) out (the
reference's L_SEM stays in the ML part): the term carries gamma's weight against L_rl's per-token factors
|r(y^g) - r(y^s)| (a few hundredths), where in ML training it weighs against per-token NLL terms of weight 1, so it
is far stronger relative to the likelihood under RL than under ML; the ablation measures what it does.  The RL
code is self_critical_rouge's own.
"""
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.dataclass import ChoiceEnum

from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageConfig, FocalCopyCoverageCriterion
from fairseq_plugins.criterions.self_critical_rouge import SelfCriticalRougeConfig, SelfCriticalRougeCriterion
from fairseq_plugins.modules.sentence_states import COHESION_STATES, DEFAULT_SENTENCE_END, delimiter_ids, pair_cosines

COHESION_FORMS = ("squared", "cosine", "positive")


@dataclass
class SemanticCohesionConfig(FocalCopyCoverageConfig):
    cohesion_lambda: float = field(
        default=1.0, metadata={"help": "the paper's lambda of L_MLE + lambda L_SEM, L_MLE summed over the summary's "
                                       "tokens (0 = the ML loss alone; the paper's value is not known to us)"})
    cohesion_sentence_end: str = field(
        default=DEFAULT_SENTENCE_END, metadata={"help": "tokens that end a summary sentence, space-separated (those "
                                                        "in the target dictionary are used)"})
    cohesion_state: ChoiceEnum(list(COHESION_STATES)) = field(
        default="after", metadata={"help": "s'_q: the state that has read the sentence's end tokens (after), the "
                                           "one that emits its last word (word) or its first end token "
                                           "(separator) [interpretation]"})
    cohesion_form: ChoiceEnum(list(COHESION_FORMS)) = field(
        default="squared", metadata={"help": "the summed term: cos^2 (squared: optimum orthogonal), the paper's "
                                             "cos (cosine: optimum -1), or max(cos, 0) (positive)"})


def cohesion_term(cosine: Tensor, form: str) -> Tensor:
    """The summed term of L_SEM for consecutive pairs' cosines (module docstring, ``--cohesion-form``)."""
    if form == "cosine":
        return cosine  # the paper's
    if form == "squared":
        return cosine.pow(2)
    if form == "positive":
        return cosine.clamp(min=0.0)
    raise ValueError(f"unknown --cohesion-form {form!r} (choose from {', '.join(COHESION_FORMS)})")


def semantic_cohesion(states: Tensor, target: Tensor, is_end: Tensor, pad: int, eos: int, state: str = "after",
                      form: str = "cosine") -> Tensor:
    """L_SEM = sum_{q=2}^{Q} term(cos(s'_q, s'_{q-1})) of each summary (term: ``cohesion_term``).  B.

    states: B x T x H decoder states (s_t predicts target[:, t]); target, is_end: B x T."""
    cosine, pairs = pair_cosines(states, target, is_end, pad, eos, state)  # B x each
    return (cohesion_term(cosine, form) * pairs).sum(dim=1)  # B


@register_criterion("semantic_cohesion", dataclass=SemanticCohesionConfig)
class SemanticCohesionCriterion(FocalCopyCoverageCriterion):
    """L_MLE + lambda L_SEM, the ML part being focal_copy_coverage's (module docstring).  Its ``compute_loss`` and
    ``reduce_terms`` keep focal_copy_coverage's interface, so it can be the ML part of self_critical_rouge."""

    nonfinite_name = "semantic_cohesion"

    def __init__(self, task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg,
                 on_nonfinite="stop", cohesion_lambda=1.0, cohesion_sentence_end=DEFAULT_SENTENCE_END,
                 cohesion_state="after", cohesion_form="squared"):
        super().__init__(task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg, on_nonfinite)
        if not math.isfinite(cohesion_lambda) or cohesion_lambda < 0:
            raise ValueError(f"--cohesion-lambda must be a finite number >= 0, not {cohesion_lambda}")
        if cohesion_state not in COHESION_STATES:
            raise ValueError(f"unknown --cohesion-state {cohesion_state!r} (choose from {', '.join(COHESION_STATES)})")
        cohesion_term(torch.zeros(1), cohesion_form)  # names a bad --cohesion-form now, not at the first batch
        self.cohesion_lambda = cohesion_lambda
        self.cohesion_state = cohesion_state
        self.cohesion_form = cohesion_form
        dictionary = task.target_dictionary
        self.eos = dictionary.eos()
        self.delimiters = delimiter_ids(dictionary, cohesion_sentence_end)

    def cohesion(self, model, net_output, tokens: Tensor) -> Tensor:
        """L_SEM of each summary in ``tokens`` (B x T, a target or a sample), from the decoder states of the
        teacher-forced ``net_output`` over them.  B."""
        states = net_output[1].get("decoder_states")
        if states is None:
            raise ValueError(f"semantic_cohesion needs the decoder states: {type(model).__name__}'s decoder output "
                             f"has no extra['decoder_states'] (B x T x H)")
        is_end = torch.isin(tokens, self.delimiters.to(tokens.device))  # B x T
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.cohesion_lambda > 0):
            return semantic_cohesion(states, tokens, is_end, self.padding_idx, self.eos, self.cohesion_state,
                                     self.cohesion_form)  # B

    def compute_loss(self, model, sample, net_output):
        """(L_MLE + lambda L_SEM summed over the batch at the ML part's scale, sample size, term sums)."""
        loss, sample_size, terms = super().compute_loss(model, sample, net_output)
        target = sample["target"]  # B x T
        cohesion = self.cohesion(model, net_output, target)  # B
        if self.per_sequence:  # each summary's (L_MLE + lambda L_SEM) / T, as the ML part divides its L_MLE
            scale = 1.0 / target.ne(self.padding_idx).sum(dim=1).clamp(min=1).to(cohesion.dtype)  # B
        else:  # the batch's sum of L_MLE + lambda L_SEM, divided by its target tokens (the sample size)
            scale = torch.ones_like(cohesion)  # B
        loss = loss + self.cohesion_lambda * (cohesion * scale).sum()
        terms["cohesion"] = cohesion.sum()
        return loss, sample_size, terms

    @staticmethod
    def reduce_terms(logging_outputs) -> None:
        """focal_copy_coverage's terms, and ``cohesion``: L_SEM per summary."""
        FocalCopyCoverageCriterion.reduce_terms(logging_outputs)
        summaries = sum(log.get("nsentences", 0) for log in logging_outputs)
        total = sum(log.get("cohesion", 0) for log in logging_outputs)
        metrics.log_scalar("cohesion", total / max(summaries, 1), summaries, round=4)


@dataclass
class SelfCriticalCohesionConfig(SelfCriticalRougeConfig, SemanticCohesionConfig):
    no_sample_cohesion: bool = field(
        default=False, metadata={"help": "leave lambda L_SEM(y^s) of the sampled summaries out of L_rl (the "
                                         "reference's L_SEM stays in the ML part); default: in, as the paper's "
                                         "'as the decoder generates'"})


@register_criterion("self_critical_cohesion", dataclass=SelfCriticalCohesionConfig)
class SelfCriticalCohesionCriterion(SelfCriticalRougeCriterion):
    """gamma (L_rl + lambda L_SEM(y^s)) + (1 - gamma) L_MLE-SEM: self_critical_rouge with semantic_cohesion as its
    ML part, and the cohesion of the sampled summaries (module docstring)."""

    ml_criterion_class = SemanticCohesionCriterion
    nonfinite_name = "self_critical_cohesion"

    def sample_penalty(self, model, net_output, sampled):
        """lambda L_SEM of the sampled summaries' own sentence ends (summed over the batch), and that sum (logged
        even with --no-sample-cohesion, which leaves it out of the loss)."""
        cohesion = self.ml.cohesion(model, net_output, sampled.tokens).sum()
        weight = 0.0 if self.cfg.no_sample_cohesion else self.ml.cohesion_lambda
        return weight * cohesion, {"cohesion_sample": cohesion}

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        summaries = sum(log.get("nsentences", 0) for log in logging_outputs)
        total = sum(log.get("cohesion_sample", 0) for log in logging_outputs)
        metrics.log_scalar("cohesion_sample", total / max(summaries, 1), summaries, round=4)

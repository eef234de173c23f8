"""``semantic_cohesion``: the ML loss plus Celikyilmaz et al. (2018)'s semantic cohesion loss.

Deep Communicating Agents, "mixed objective" (our notes, ../shared/papers/DCA_AND_PAULUS.md, DCA objectives):
    L_SEM     = sum_{q=2}^{Q} cos(s'_q, s'_{q-1})                                         [C]
    L_MLE-SEM = L_MLE + lambda L_SEM                                                      [U: exact form; lambda
                                                                                           unknown, 0.1 a guess]
where s'_q is the decoder state at the end of the q-th sentence of the summary (Q sentences; L_SEM = 0 when
Q < 2).  Under teacher forcing the sentences are the reference's.

The sign.  The notes (and the paper) add +lambda L_SEM to a loss that is minimised, so training makes the states
at the ends of consecutive sentences *less* similar (cosine towards 0 or below).  That is the paper's intent:
the term is there to stop the decoder from repeating itself, and a decoder that is in the same state at the end
of two consecutive sentences tends to produce the same sentence twice.  So no sign is flipped here: minimising
the sum of cosines is exactly "consecutive sentence states should be dissimilar".

Sentences (``--cohesion-sentence-end``, default ``. ! ? 。 ！ ？``, tokens looked up in the target dictionary).  A
sentence ends at a delimiter not followed by another delimiter (``! ?`` or ``. . .`` end one sentence, at the
last one); text after the last delimiter, before ``</s>``, is the last sentence.  A summary with no delimiter
(or a single sentence) has Q = 1 and L_SEM = 0.

Which state is s'_q (``--cohesion-state``, [U]).  Under teacher forcing the decoder state s_t of step t has read
target tokens 0..t-1 and predicts token t:
  * ``after`` (default): the state that has read the sentence's last token, its delimiter included, i.e. the
    state at the step after it.  This is our reading of "the hidden state produced with the period as input"
    in a published summary of the paper (papers/seeds/003_*.txt).  For a last sentence without a delimiter,
    the state that has read its last word (the one that predicts ``</s>``).
  * ``at``: the state that predicts the sentence's end: its delimiter, or ``</s>`` for a last sentence
    without one.
A sentence whose state does not exist (a truncated reference ending in a delimiter with no ``</s>`` after it,
with ``after``) is left out.  The states come from the model's ``extra["decoder_states"]`` (B x T x H), which
every architecture of the project exposes (pgn_lstm, global_gate_gru, dca_lstm).

Scale.  The ML part is ``focal_copy_coverage``'s own ``compute_loss`` with all its options (this criterion
subclasses it, nothing is copied).  L_SEM is one number per summary.  Whatever ``--loss-average``, the loss
fairseq back-propagates (the criterion's loss divided by its sample size) is the ML part's average plus lambda
times the mean of L_SEM over the batch's summaries.  Logged: ``cohesion`` (mean L_SEM per summary) besides the ML
part's terms.

With reinforcement learning.  ``self_critical_cohesion`` is ``self_critical_rouge`` with this criterion as its
ML part (its ``ml_criterion_class`` hook): L = gamma L_rl + (1 - gamma) L_MLE-SEM, all options of both; the RL
code is self_critical_rouge's own.
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.dataclass import ChoiceEnum

from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageConfig, FocalCopyCoverageCriterion
from fairseq_plugins.criterions.self_critical_rouge import SelfCriticalRougeConfig, SelfCriticalRougeCriterion

COHESION_STATES = ("after", "at")
DEFAULT_SENTENCE_END = ". ! ? 。 ！ ？"
COSINE_EPS = 1e-8


@dataclass
class SemanticCohesionConfig(FocalCopyCoverageConfig):
    cohesion_lambda: float = field(
        default=0.1, metadata={"help": "lambda of L_MLE + lambda L_SEM (0 = the ML loss alone; the paper's value is "
                                       "not known to us)"})
    cohesion_sentence_end: str = field(
        default=DEFAULT_SENTENCE_END, metadata={"help": "tokens that end a summary sentence, space-separated (those "
                                                        "in the target dictionary are used)"})
    cohesion_state: ChoiceEnum(list(COHESION_STATES)) = field(
        default="after", metadata={"help": "s'_q: the decoder state after reading the sentence's last token (after) "
                                           "or the one that predicts it (at) [interpretation]"})


def sentence_end_steps(target: Tensor, is_delimiter: Tensor, pad: int, eos: int, state: str = "after"):
    """The decoder step whose state is s'_q, for every sentence end of every summary.

    Args:
        target: B x T target tokens (``</s>`` then padding after each summary).
        is_delimiter: B x T, True at sentence-ending tokens.
        state: "after" or "at" (module docstring).
    Returns:
        steps B x T (the step of s'_q at the position of the sentence's last token) and ends B x T (True at the
        last token of each sentence whose state exists).
    """
    if state not in COHESION_STATES:
        raise ValueError(f"unknown --cohesion-state {state!r} (choose from {', '.join(COHESION_STATES)})")
    steps_total = target.size(1)
    valid = target.ne(pad)  # B x T
    content = valid & target.ne(eos)  # B x T: summary tokens
    shift = lambda x: torch.cat([x[:, 1:], x.new_zeros(x.size(0), 1)], dim=1)  # noqa: E731  x[t+1], False at end
    delimiter = is_delimiter & content
    delimiter_end = delimiter & ~shift(delimiter)  # the last delimiter of a run
    unterminated = content & ~shift(content) & ~delimiter  # last word of a last sentence without a delimiter
    positions = torch.arange(steps_total, device=target.device).unsqueeze(0).expand_as(target)  # B x T
    next_step = (delimiter_end | unterminated) if state == "after" else unterminated  # B x T: s_{t+1}, else s_t
    steps = positions + next_step.long()  # B x T
    exists = ~next_step | shift(valid)  # the chosen step is one of the summary's steps
    return steps.clamp(max=steps_total - 1), (delimiter_end | unterminated) & exists


def semantic_cohesion(states: Tensor, target: Tensor, is_delimiter: Tensor, pad: int, eos: int,
                      state: str = "after") -> Tensor:
    """L_SEM = sum_{q=2}^{Q} cos(s'_q, s'_{q-1}) of each summary.  B.

    states: B x T x H decoder states (s_t predicts target[:, t]); target, is_delimiter: B x T."""
    steps, ends = sentence_end_steps(target, is_delimiter, pad, eos, state)  # B x T each
    count = ends.sum(dim=1)  # B: Q
    width = int(count.max()) if count.numel() else 0
    if width < 2:
        return states.new_zeros(target.size(0), dtype=torch.float32)
    order = torch.sort((~ends).int(), dim=1, stable=True).indices[:, :width]  # B x Q: sentence ends first, in order
    chosen = steps.gather(1, order)  # B x Q: the step of s'_q
    ends_states = states.gather(1, chosen.unsqueeze(2).expand(-1, -1, states.size(2))).float()  # B x Q x H
    cosine = F.cosine_similarity(ends_states[:, 1:], ends_states[:, :-1], dim=2, eps=COSINE_EPS)  # B x
    pairs = torch.arange(1, width, device=target.device).unsqueeze(0) < count.unsqueeze(1)  # B x
    return (cosine * pairs).sum(dim=1)  # B


def delimiter_ids(dictionary, words: str, option: str = "--cohesion-sentence-end") -> Tensor:
    """Dictionary ids of the space-separated ``words`` it has; ValueError naming ``option`` when it has none."""
    ids = sorted({dictionary.index(word) for word in words.split()} - {dictionary.unk()})
    if not ids:
        raise ValueError(f"{option} {words!r}: none of these tokens is in the target dictionary, so no summary "
                         f"could have more than one sentence and L_SEM would always be 0")
    return torch.tensor(ids, dtype=torch.long)


@register_criterion("semantic_cohesion", dataclass=SemanticCohesionConfig)
class SemanticCohesionCriterion(FocalCopyCoverageCriterion):
    """L_MLE + lambda L_SEM, the ML part being focal_copy_coverage's (module docstring).  Its ``compute_loss`` and
    ``reduce_terms`` keep focal_copy_coverage's interface, so it can be the ML part of self_critical_rouge."""

    nonfinite_name = "semantic_cohesion"

    def __init__(self, task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg,
                 on_nonfinite="stop", cohesion_lambda=0.1, cohesion_sentence_end=DEFAULT_SENTENCE_END,
                 cohesion_state="after"):
        super().__init__(task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg, on_nonfinite)
        if not math.isfinite(cohesion_lambda) or cohesion_lambda < 0:
            raise ValueError(f"--cohesion-lambda must be a finite number >= 0, not {cohesion_lambda}")
        if cohesion_state not in COHESION_STATES:
            raise ValueError(f"unknown --cohesion-state {cohesion_state!r} (choose from {', '.join(COHESION_STATES)})")
        self.cohesion_lambda = cohesion_lambda
        self.cohesion_state = cohesion_state
        dictionary = task.target_dictionary
        self.eos = dictionary.eos()
        self.delimiters = delimiter_ids(dictionary, cohesion_sentence_end)

    def compute_loss(self, model, sample, net_output):
        """(L_MLE + lambda L_SEM summed over the batch at the ML part's scale, sample size, term sums)."""
        loss, sample_size, terms = super().compute_loss(model, sample, net_output)
        states = net_output[1].get("decoder_states")
        if states is None:
            raise ValueError(f"semantic_cohesion needs the decoder states: {type(model).__name__}'s decoder output "
                             f"has no extra['decoder_states'] (B x T x H)")
        target = sample["target"]  # B x T
        is_delimiter = torch.isin(target, self.delimiters.to(target.device))  # B x T
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.cohesion_lambda > 0):
            cohesion = semantic_cohesion(states, target, is_delimiter, self.padding_idx, self.eos,
                                         self.cohesion_state)  # B
        documents = target.size(0)
        # lambda times the mean over summaries, once divided by sample_size (documents or target tokens).
        loss = loss + self.cohesion_lambda * cohesion.sum() * (sample_size / documents)
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
    pass


@register_criterion("self_critical_cohesion", dataclass=SelfCriticalCohesionConfig)
class SelfCriticalCohesionCriterion(SelfCriticalRougeCriterion):
    """gamma L_rl + (1 - gamma) L_MLE-SEM: self_critical_rouge with semantic_cohesion as its ML part."""

    ml_criterion_class = SemanticCohesionCriterion
    nonfinite_name = "self_critical_cohesion"

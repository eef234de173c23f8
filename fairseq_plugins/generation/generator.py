"""The project's beam-search generator: fairseq's ``SequenceGenerator`` plus n-gram blocking that works on every
device, and a GNMT-style coverage penalty.  Plain beam search with one model runs as generation/beam_search.py,
the same search in fewer operations per step and without waiting for the device inside the loop; everything
else (ensembles, prefix tokens, constraints, sampling...) runs fairseq's own loop.

``--task summarization`` builds it (``SummarizationTask.build_generator``), so ``fairseq-generate``,
``fairseq-interactive``, ``generate.sh``, the hub API, the Slurm generation array and validation-time
generation (``--eval-rouge``, ``--eval-accuracy``) all get it from the same options:

    --block-ngram-repeat N   no hypothesis produces an n-gram twice (Paulus et al. 2017, N = 3); banned
                             continuations get probability 0 before the beam is chosen (ngram_blocking.py)
    --block-immediate-repeat 1
                             no token directly after itself ("w w", which trigram blocking lets through once);
                             the tokens of --block-ignore may follow themselves (ngram_blocking.py); 0: off
    --block-ignore TOKENS    n-grams containing one of these tokens may repeat (OpenNMT-py
                             ``-ignore_when_blocking``), e.g. ". , \\""; ``<unk>`` is always ignored
    --allow-unk              let summaries hold ``<unk>``; by default the search never produces it (its
                             log-probability is -inf at every step, fairseq's ``--unkpen`` made infinite), so
                             the model writes its next-best word, and source OOV words are still copied through
                             their markers
    --fairseq-beam-search    run fairseq's own loop even where beam_search.py applies (same output; for
                             comparisons)
    --coverage-penalty BETA  cp = BETA * sum_i log(min(sum_t a_i^t, 1.0)) added to each finished
                             hypothesis's score (Wu et al. 2016, "Google's Neural Machine Translation System",
                             Wu eq 14; OpenNMT-py ``-coverage_penalty wu -beta BETA``)

An empty document (an empty or blank input line, whose source is ``</s>`` alone) gets an empty summary (and a line
in the log at INFO level), never text the model invents from nothing.

fairseq's own ``--no-repeat-ngram-size N`` reads a pad-filled buffer on a CPU and blocks nothing there (fairseq
0.12.x, issue 5206): under this generator it means ``--block-ngram-repeat N``.

The coverage penalty.  Wu et al. score a complete hypothesis Y of source X as
    s(Y, X) = log P(Y | X) / lp(Y) + cp(X; Y),   cp(X; Y) = beta * sum_{i=1}^{|X|} log(min(sum_{t=1}^{|Y|} a_i^t, 1.0))
where a^t is the attention at output step t.  Here lp is fairseq's length normalisation (``--lenpen``: the
score is the summed log-probability divided by |Y|^lenpen), and cp is added to the score of every finished
hypothesis, which re-ranks the beam's finished candidates; it does not change which partial hypotheses the
beam keeps.  The sum runs over the source's real tokens (its ``</s>`` included, padding excluded); a source
word whose attention underflowed to exactly 0 counts as ``COVERAGE_EPS``, so the penalty stays finite.  It
needs a model that returns its attention (``extra["attn"]``), as every model of this project does.

``--print-alignment`` (``SummarizationGeneratorWithAlignment``): fairseq's alignment extraction over this same
search, each attention read against its source in the order the model attends.
"""
import logging
import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

from fairseq import utils
from fairseq.sequence_generator import SequenceGenerator, SequenceGeneratorWithAlignment

from fairseq_plugins.generation import beam_search
from fairseq_plugins.generation.ngram_blocking import NGramBlocker, ignore_ids

logger = logging.getLogger(__name__)

COVERAGE_EPS = 1e-10  # floor of a source word's summed attention inside the log of the coverage penalty


class SummarizationGenerator(SequenceGenerator):
    """fairseq's beam search with n-gram blocking and a coverage penalty.

    Args (beyond ``SequenceGenerator``'s):
        block_ngram_repeat: n of the n-gram blocking (0 = off).
        block_immediate_repeat: 1 = no token directly after itself, 0 = off.
        block_ignore: space-separated tokens whose n-grams are never blocked.
        coverage_penalty: beta of the coverage penalty (0 = off).
        fairseq_beam_search: always fairseq's loop, never beam_search.py.
        allow_unk: let hypotheses hold ``<unk>`` (off: its unk penalty is infinite, so it is never chosen).
    """

    def __init__(self, models, tgt_dict, block_ngram_repeat: int = 0, block_ignore: Optional[str] = None,
                 coverage_penalty: float = 0.0, fairseq_beam_search: bool = False, allow_unk: bool = False,
                 block_immediate_repeat: int = 0, **kwargs):
        super().__init__(models, tgt_dict, **kwargs)
        self.fairseq_beam_search = fairseq_beam_search
        if not allow_unk:
            self.unk_penalty = math.inf
        if block_ngram_repeat < 0:
            raise ValueError(f"--block-ngram-repeat must be >= 0, not {block_ngram_repeat}")
        if block_immediate_repeat not in (0, 1):
            raise ValueError(f"--block-immediate-repeat must be 1 (on) or 0 (off), not {block_immediate_repeat}")
        if block_ngram_repeat > 0 or block_immediate_repeat:
            self.repeat_ngram_blocker = NGramBlocker(block_ngram_repeat, ignore_ids(tgt_dict, block_ignore),
                                                     immediate=bool(block_immediate_repeat))
        elif block_ignore:
            raise ValueError("--block-ignore needs --block-ngram-repeat N (N > 0) or --block-immediate-repeat 1")
        if coverage_penalty < 0 or not math.isfinite(coverage_penalty):
            raise ValueError(f"--coverage-penalty must be a finite number >= 0, not {coverage_penalty}")
        self.coverage_penalty = coverage_penalty

    def _generate(self, sample: Dict[str, Dict[str, Tensor]], prefix_tokens: Optional[Tensor] = None,
                  constraints: Optional[Tensor] = None, bos_token: Optional[int] = None):
        if self.fairseq_beam_search or not beam_search.applies(self, sample, prefix_tokens, constraints):
            finalized = super()._generate(sample, prefix_tokens, constraints, bos_token)
        else:
            finalized = beam_search.search(self, sample, bos_token)
        empty_sources_get_empty_summaries(finalized, sample["net_input"]["src_tokens"], self.pad, self.eos)
        if self.coverage_penalty > 0:
            source_lengths = sample["net_input"]["src_tokens"].ne(self.pad).sum(dim=1)  # B
            for hypos, length in zip(finalized, source_lengths.tolist()):
                add_coverage_penalty(hypos, length, self.coverage_penalty)
        return finalized


def empty_sources_get_empty_summaries(finalized: List[List[Dict[str, Tensor]]], src_tokens: Tensor, pad: int,
                                      eos: int) -> None:
    """A document with no token (its source is ``</s>`` alone: an empty or blank input line) gets the empty
    summary, score 0, as each of its hypotheses, instead of text the model would invent from nothing; an INFO
    line counts them.  In place.  src_tokens: B x S."""
    words = (src_tokens.ne(pad) & src_tokens.ne(eos)).sum(dim=1)  # B
    empty = (words == 0).nonzero().flatten().tolist()
    for row in empty:
        for hypo in finalized[row]:
            attention = hypo.get("attention")
            hypo.update(tokens=hypo["tokens"].new_tensor([eos]), score=torch.zeros_like(hypo["score"]),
                        positional_scores=hypo["positional_scores"].new_zeros(1),
                        attention=attention[:, :1] if attention is not None and attention.numel() else attention)
    if empty:
        logger.info("%d empty document%s in this batch: empty summary", len(empty), "s" if len(empty) > 1 else "")


def add_coverage_penalty(hypos: List[Dict[str, Tensor]], source_length: int, beta: float) -> None:
    """Adds cp (module docstring) to each hypothesis's ``score`` and re-sorts them, best first.  In place."""
    for hypo in hypos:
        attention = hypo["attention"]  # S x T
        if attention.numel() == 0:
            raise ValueError("--coverage-penalty needs a model that returns its attention (extra['attn'])")
        hypo["coverage_penalty"] = coverage_penalty(attention, source_length, beta)
        hypo["score"] = hypo["score"] + hypo["coverage_penalty"]
    hypos.sort(key=lambda hypo: float(hypo["score"]), reverse=True)


def coverage_penalty(attention: Tensor, source_length: int, beta: float) -> Tensor:
    """beta * sum_i log(min(sum_t a_i^t, 1)) over the source's real positions (Wu et al. 2016, Wu eq 14).

    attention: S x T, S >= source_length.  Which S positions are real depends on the model: pgn_lstm (and
    fairseq's lstm) attend in right-padded order, a transformer in the dataset's left-padded order; the real
    positions are the contiguous block of ``source_length`` that carries the attention (padding gets none)."""
    coverage = attention.float().sum(dim=1)  # S: sum_t a_i^t
    if attends_left_padded(attention, source_length):
        coverage = coverage[coverage.size(0) - source_length:]  # the real tokens are the last source_length
    else:
        coverage = coverage[:source_length]
    return beta * torch.log(coverage.clamp(min=COVERAGE_EPS, max=1.0)).sum()


def attends_left_padded(attention: Tensor, source_length: int) -> bool:
    """Does ``attention`` (S x T) attend to a padded source's real tokens last, as a transformer does in the
    dataset's left-padded order?  pgn_lstm, the project's other recurrent encoders and fairseq's lstm attend in
    right-padded order.  Padding gets no attention, so the real tokens are the block of ``source_length``
    positions that carries it; False when there is no padding."""
    coverage = attention.float().sum(dim=1)  # S
    padding = coverage.size(0) - source_length
    return padding > 0 and bool(coverage[source_length:].sum() > coverage[:padding].sum())


class SummarizationGeneratorWithAlignment(SequenceGeneratorWithAlignment, SummarizationGenerator):
    """--print-alignment: fairseq's alignment extraction over the project's search.  fairseq's class calls
    ``_generate`` of the next class in line, here SummarizationGenerator's (blocking, coverage penalty), and
    then reads each hypothesis's attention against its source."""

    def _prepare_batch_for_alignment(self, sample, hypothesis):
        """fairseq's batch for the extraction, with each source in the order its hypothesis's attention uses.
        fairseq pairs the attention with the dataset's left-padded source, which is right for a transformer;
        a model that attends in right-padded order (``attends_left_padded`` False) would otherwise get an
        alignment shifted by its source's padding."""
        src_tokens, src_lengths, prev_output_tokens, tgt_tokens = super()._prepare_batch_for_alignment(
            sample, hypothesis)  # src_tokens: (B * beam) x S, left-padded
        right_padded = utils.convert_padding_direction(src_tokens, self.pad, left_to_right=True)  # (B * beam) x S
        hypos = [hypo for sentence in hypothesis for hypo in sentence]
        for row, (hypo, length) in enumerate(zip(hypos, src_tokens.ne(self.pad).sum(dim=1).tolist())):
            if length < src_tokens.size(1) and not attends_left_padded(hypo["attention"], length):
                src_tokens[row] = right_padded[row]
        return src_tokens, src_lengths, prev_output_tokens, tgt_tokens

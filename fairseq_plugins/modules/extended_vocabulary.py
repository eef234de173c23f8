"""The extended vocabulary: regular words ``[0, num_regular)`` followed by per-document OOV markers
``[num_regular, len(dictionary))`` (fairseq_plugins/text/markers.py).

A marker stands for a different word in every document, so it has no embedding or output row of its own:
it is read as ``<unk>`` (``MarkerAsUnk``), and a model without a copy mechanism gives it probability 0
(``RegularVocabularyOutput``), which makes fairseq's beam search (it needs a distribution of width
len(dictionary)) never produce one.  ``ExtendedVocabularyOutput`` gives a decoder's final distribution over
the extended vocabulary, with or without copying; ``ExtendedVocabularyModel`` exposes it to fairseq and the
criterions.

Impossible words.  A word that no side can produce (every marker without copying, a marker absent from the
source with it) has P(w) = 0.  Generation sees that exactly: ``get_normalized_probs`` gives it log P = -inf
(probability 0), so beam search, fairseq's sampling and the RL sampler (generation/sampling.py) never emit
one, however unlikely the possible words are.  Only the loss path (``get_target_log_probs``, what the
criterions take the log-loss of) floors it at log(``LOG_FLOOR``): a finite loss with no gradient through that
token, for a target the model cannot produce.  fairseq's own ``cross_entropy`` reads ``get_normalized_probs``,
so there such a target (with copying: a target marker absent from its source) costs an infinite loss; the data
never has one, as summ-prepare only writes a target marker for a word of the (truncated) source.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.modules.copy_mixture import DEFAULT_EOS_ATTENTION, NEG_INF, TINY, CopyMixture

LOG_FLOOR = 1e-12  # the losses' floor for log P(target): P is exactly 0 for markers absent from a source


class MarkerAsUnk(nn.Module):
    """Maps per-document OOV marker ids (>= num_regular) to ``<unk>`` before an embedding lookup."""

    def __init__(self, num_regular: int, unk_idx: int):
        super().__init__()
        self.num_regular = num_regular
        self.unk_idx = unk_idx

    def forward(self, tokens: Tensor) -> Tensor:
        return tokens.masked_fill(tokens >= self.num_regular, self.unk_idx)


class RegularVocabularyOutput(nn.Module):
    """softmax over the regular words, widened to the extended vocabulary with zero probability on markers.

    Args:
        num_regular: number of regular words (the logits' last dimension).
        ext_size: size of the extended vocabulary (len(dictionary)).
        unk_idx: ``<unk>``, the word a marker target is scored as.
    """

    def __init__(self, num_regular: int, ext_size: int, unk_idx: int):
        super().__init__()
        self.num_markers = ext_size - num_regular
        self.as_unk = MarkerAsUnk(num_regular, unk_idx)

    def log_probs(self, logits: Tensor, zero: float = NEG_INF) -> Tensor:
        """B x T x V_reg logits -> B x T x V_ext log-probabilities; markers get ``zero`` (default -inf)."""
        log_p = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # B x T x V_reg
        return F.pad(log_p, (0, self.num_markers), value=zero)  # B x T x V_ext

    def target_log_probs(self, logits: Tensor, target: Tensor) -> Tensor:
        """log P(target) for B x T target ids; a marker target is scored as ``<unk>``.  Returns B x T."""
        log_p = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # B x T x V_reg
        return log_p.gather(2, self.as_unk(target).unsqueeze(2)).squeeze(2)  # B x T


class ExtendedVocabularyOutput(nn.Module):
    """A decoder's final distribution P(w) over the extended vocabulary, from its ``(logits, extra)`` output.

    With ``copy``, See eq 9 in log space through ``CopyMixture`` (modules/copy_mixture.py), reading
    from ``extra``:
        p_gen_logit: B x T x 1, the switch's logit l, p_gen = sigmoid(l) the weight of P_vocab (a model that
            only gives ``p_gen``, B x T x 1, gets clamped logs of p_gen and 1 - p_gen instead);
        src_tokens: B x S, the ids the copy side can produce (right-padded, extended vocabulary);
        attn: [B x T x S], the attention, whose (1 - p_gen) share is the copy side (See eq 9); ``</s>`` is never
            copied (``eos``: its attention generates or is renormalised away, ``eos_attention``, copy_mixture.py);
        copy_weights (optional): B x T x S, the copy mass of every position, replacing (1 - p_gen) a^t when a
            model mixes several copy sources (``merge_copy_sources``; src_tokens then holds all their tokens,
            and p_gen is the total weight of P_vocab).
    Without ``copy``, P_vocab widened with zeros for the markers (``RegularVocabularyOutput``), a marker target
    being scored as ``<unk>``.  ``logits`` (B x T x V_reg) are the scores whose softmax is P_vocab.

    Args:
        num_regular: number of regular words (the logits' last dimension).
        ext_size: size of the extended vocabulary (len(dictionary)).
        unk_idx: ``<unk>``.
        copy: the pointer-generator mixture (True) or P_vocab alone (False).
        log_floor: in the loss path only (``target_log_probs``), a log-probability that is exactly -inf (P(w)
            = 0: a marker absent from the source, a word both sides rule out) becomes log(log_floor), finite;
            every other log-probability is exact, however small (default 1e-12).  None: exact there too.  The
            full distribution (``probs``, what generation reads) is always exact: -inf where P(w) = 0.
        eos: the token the copy side never produces (default None: every source token is copyable).
        eos_attention: where the attention on ``eos`` goes, "generate" or "renormalise" (see copy_mixture.py).
    """

    def __init__(self, num_regular: int, ext_size: int, unk_idx: int, copy: bool,
                 log_floor: Optional[float] = LOG_FLOOR, eos: Optional[int] = None,
                 eos_attention: str = DEFAULT_EOS_ATTENTION):
        super().__init__()
        self.copy = copy
        self.log_floor = log_floor
        self.zero_log = NEG_INF if log_floor is None else math.log(log_floor)  # a loss's log P(target) if 0
        self.as_unk = MarkerAsUnk(num_regular, unk_idx)
        if copy:
            self.mixture = CopyMixture(num_regular, ext_size, uncopyable=eos, eos_attention=eos_attention)
        else:
            self.vocab_output = RegularVocabularyOutput(num_regular, ext_size, unk_idx)

    def probs(self, net_output, log_probs: bool) -> Tensor:
        """P(w), or log P(w), for every word of the extended vocabulary, exact: 0 / -inf where P(w) = 0 (never
        floored, so that no search can choose a word the model cannot produce).  B x T x V_ext."""
        log_p = self.log_probs(net_output, NEG_INF)  # B x T x V_ext
        return log_p if log_probs else log_p.exp()

    def log_probs(self, net_output, zero: float) -> Tensor:
        """log P(w) over the extended vocabulary, ``zero`` where P(w) = 0: See eq 9, or log P_vocab with ``zero``
        for the markers.  B x T x V_ext."""
        logits, extra = net_output
        if not self.copy:
            return self.vocab_output.log_probs(logits, zero)
        if "copy_weights" in extra:
            return self.mixture.log_mix(logits, self.log_generate(extra), extra["copy_weights"], None,
                                        extra["src_tokens"], zero=zero)
        return self.mixture.log_full(logits, extra["attn"][0], self.switch_logit(extra), extra["src_tokens"],
                                     zero=zero)  # See eq 9

    def target_log_probs(self, net_output, target: Tensor) -> Tensor:
        """log P(target) for B x T target ids, floored at log(``log_floor``) where P is 0 (for the losses),
        without building the full distribution.  B x T.  Without copying, a marker target cannot be produced:
        it is scored as ``<unk>`` (as in See et al.'s baseline, where every OOV word is UNK)."""
        return self.log_probs_at(net_output, target, self.zero_log)

    def target_probs(self, net_output, target: Tensor) -> Tensor:
        """P(target) for B x T target ids (exactly 0 where it cannot be produced).  B x T."""
        return self.log_probs_at(net_output, target, NEG_INF).exp()

    def log_probs_at(self, net_output, target: Tensor, zero: float) -> Tensor:
        logits, extra = net_output
        if not self.copy:
            return self.vocab_output.target_log_probs(logits, target)
        if "copy_weights" in extra:
            return self.mixture.log_mix_at(logits, self.log_generate(extra), extra["copy_weights"], None,
                                           extra["src_tokens"], target, zero=zero)
        return self.mixture.log_at(logits, extra["attn"][0], self.switch_logit(extra), extra["src_tokens"],
                                   target, zero=zero)  # See eq 9

    @staticmethod
    def switch_logit(extra) -> Tensor:
        """l with p_gen = sigmoid(l), B x T x 1: ``extra["p_gen_logit"]``, or logit(p_gen) from a clamped p_gen."""
        if "p_gen_logit" in extra:
            return extra["p_gen_logit"]
        p_gen = extra["p_gen"].float().clamp(min=TINY, max=1.0 - 1e-7)
        return torch.log(p_gen) - torch.log1p(-p_gen)  # B x T x 1

    @staticmethod
    def log_generate(extra) -> Tensor:
        """log of the total weight of P_vocab, B x T x 1, for several copy sources (a clamped log)."""
        return torch.log(extra["p_gen"].float().clamp(min=TINY))

    def targets(self, target: Tensor) -> Tensor:
        """The targets as ``probs`` can score them: as they are with copying, markers as ``<unk>`` without."""
        return target if self.copy else self.as_unk(target)


class ExtendedVocabularyModel:
    """Mixin for a ``FairseqEncoderDecoderModel`` (listed before it) whose decoder has ``extended_output``, an
    ``ExtendedVocabularyOutput``: fairseq's ``get_normalized_probs`` and the criterions' ``get_target_probs``."""

    def get_normalized_probs(self, net_output, log_probs: bool, sample=None) -> Tensor:
        """log P(w) or P(w) over the extended vocabulary, exact: -inf / 0 for a word the model cannot produce
        (what beam search and sampling read).  B x T x V_ext."""
        return self.decoder.extended_output.probs(net_output, log_probs)

    def get_target_probs(self, net_output, target: Tensor) -> Tensor:
        """P(target) per position (B x T), for the criterions."""
        return self.decoder.extended_output.target_probs(net_output, target)

    def get_target_log_probs(self, net_output, target: Tensor) -> Tensor:
        """log P(target) per position (B x T), exact (with its gradient) however small P is, except that an
        exact zero is floored at log(``LOG_FLOOR``) (``get_normalized_probs`` keeps it -inf): what a criterion
        should take the log-loss of."""
        return self.decoder.extended_output.target_log_probs(net_output, target)

    def get_targets(self, sample, net_output) -> Tensor:
        """Targets for fairseq's own criterions (cross_entropy): without copying, markers become ``<unk>``
        (only a copy mechanism can produce a marker)."""
        return self.decoder.extended_output.targets(sample["target"])

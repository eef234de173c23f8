"""The extended vocabulary: regular words ``[0, num_regular)`` followed by per-document OOV markers
``[num_regular, len(dictionary))`` (fairseq_plugins/text/markers.py).

A marker stands for a different word in every document, so it has no embedding or output row of its own:
it is read as ``<unk>`` (``MarkerAsUnk``), and a model without a copy mechanism gives it probability 0
(``RegularVocabularyOutput``), which makes fairseq's beam search (it needs a distribution of width
len(dictionary)) never produce one.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


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

    def probs(self, logits: Tensor, log_probs: bool) -> Tensor:
        """B x T x V_reg logits -> B x T x V_ext (log-)probabilities; markers get 0 (-inf)."""
        if log_probs:
            log_p = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # B x T x V_reg
            return F.pad(log_p, (0, self.num_markers), value=float("-inf"))  # B x T x V_ext
        return F.pad(F.softmax(logits, dim=-1, dtype=torch.float32), (0, self.num_markers))  # B x T x V_ext

    def target_probs(self, logits: Tensor, target: Tensor) -> Tensor:
        """P(target) for B x T target ids; a marker target is scored as ``<unk>``.  Returns B x T."""
        log_p = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # B x T x V_reg
        return log_p.gather(2, self.as_unk(target).unsqueeze(2)).squeeze(2).exp()  # B x T

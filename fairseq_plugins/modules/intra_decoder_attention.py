"""Intra-decoder attention (Paulus, Xiong & Socher 2017, section 2.2): each decoder step attends to the
decoder's own previous states, so the model sees what it has already said.

With decoder states h^d_t:
    e^d_tt'  = h^d_t^T W^d_attn h^d_t'                     for t' < t            (Paulus eq 6)
    a^d_tt'  = exp(e^d_tt') / sum_{j<t} exp(e^d_tj)                              (Paulus eq 7)
    c^d_t    = sum_{t'<t} a^d_tt' h^d_t'                                          (Paulus eq 8)
    c^d_1    = 0   (no past state)

Two forms give the same numbers:
  * ``IntraDecoderAttention.forward``: every step at once from B x T x H states, one batched matmul for the
    scores and ONE causal mask (row t sees t' < t only).  Step t = 1 has no past, so the scores are computed
    for the queries t = 2..T against the states t' = 1..T-1 only ((T-1) x (T-1), where "t' < t" is the lower
    triangle with its diagonal); no softmax row is ever all -inf (no NaN, forward or backward), and a zero
    row is put in front afterwards: c^d_1 = 0 exactly, with no gradient.
  * ``IntraDecoderAttention.step``: one step, with the past states cached batch-first (B x (t-1) x H, growing
    by one state per step) in a state dictionary that beam search reorders with
    modules/beam_reorder.reorder_rows.

The query side is projected, q_t = h^d_t^T W^d_attn (one H x H product per step), so the cache holds the raw
states, which are both the keys and the values.  Target padding is not masked: fairseq pads targets on the
right, and a causal attention never lets a real step see a later (padded) one.
"""
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.temporal_attention import BilinearWeight, normalisation_dtype

PAST = "decoder_past"  # B x (t-1) x H   h^d_1 .. h^d_{t-1} (batch-first, grows by one per step)


def causal_mask(length: int, device=None) -> Tensor:
    """The causal mask of ``IntraDecoderAttention.forward``, (T-1) x (T-1) for ``length`` = T - 1: True where
    attention is blocked.  Row r is the query step t = r + 2 and column c the past step t' = c + 1, so t' < t
    (strictly lower triangular in t, t') is c <= r: everything above the diagonal is blocked."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(diagonal=1)  # (T-1) x (T-1)


class IntraDecoderAttention(nn.Module):
    """Paulus et al.'s intra-decoder attention (Paulus eqs 6-8).

    The parameter ``weight`` is W^d_attn (H x H, no bias): e^d_tt' = h^d_t^T W^d_attn h^d_t'.

    Args:
        hidden_size: size of a decoder state h^d_t (H).
    """

    SOURCE_ONLY = ()  # no state entry depends on the source alone: the cache is reordered with every beam step

    def __init__(self, hidden_size: int):
        super().__init__()
        if hidden_size <= 0:
            raise ValueError(f"IntraDecoderAttention: hidden_size must be positive, got {hidden_size}")
        self.hidden_size = hidden_size
        self.weight = BilinearWeight(hidden_size, hidden_size)  # W^d_attn   H x H

    def check_size(self, states: Tensor) -> None:
        if states.size(-1) != self.hidden_size:
            raise ValueError(f"IntraDecoderAttention: decoder states of size {states.size(-1)}, "
                             f"expected hidden_size = {self.hidden_size}")

    def forward(self, states: Tensor) -> Tuple[Tensor, Tensor]:
        """All steps at once.

        Args:
            states: B x T x H, h^d_1 .. h^d_T.
        Returns:
            attn: B x T x T, a^d_tt' (normalisation dtype: float32 for half inputs); row t sums to 1 over
                t' < t and is 0 elsewhere; row 1 is all 0.
            context: B x T x H, c^d_t (the states' dtype); c^d_1 = 0 exactly.
        """
        self.check_size(states)
        past = states[:, :-1]  # B x (T-1) x H   h^d_1 .. h^d_{T-1}: the states something comes after
        queries = torch.matmul(states[:, 1:], self.weight)  # B x (T-1) x H   q_t = h^d_t^T W^d_attn, t >= 2
        scores = torch.bmm(queries, past.transpose(1, 2))  # B x (T-1) x (T-1)   (Paulus eq 6)
        scores = scores.to(normalisation_dtype(scores.dtype))  # B x (T-1) x (T-1)
        blocked = causal_mask(past.size(1), states.device)  # (T-1) x (T-1)
        attn = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=2)  # B x (T-1) x (T-1)   (Paulus eq 7)
        context = torch.bmm(attn.to(states.dtype), past)  # B x (T-1) x H   (Paulus eq 8)
        context = F.pad(context, (0, 0, 1, 0))  # B x T x H   c^d_1 = 0
        return F.pad(attn, (0, 1, 1, 0)), context  # B x T x T, B x T x H

    def initial_state(self, like: Tensor, source_row: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """The state before the first step.

        Args:
            like: B x H, any tensor with the decoder states' batch size, size, dtype and device (e.g. h^d_0).
            source_row: B, the source of each row (default: row i comes from source i).
        Returns a dict, every entry batch-first:
            PAST ("decoder_past"): B x 0 x H;  SOURCE_ROW ("source_row"): B.
        """
        self.check_size(like)
        bsz = like.size(0)
        return {
            PAST: like.new_zeros(bsz, 0, self.hidden_size),  # B x 0 x H
            SOURCE_ROW: source_row if source_row is not None else source_rows(bsz, like.device),  # B
        }

    def step(self, state: Tensor, cache: Dict[str, Tensor]) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
        """One decoder step t.

        Args:
            state: B x H, h^d_t.
            cache: a dict holding PAST (B x (t-1) x H; from ``initial_state``, a previous ``step``, or the
                decoder's own state dict that includes it; other entries are passed through).
        Returns:
            attn: B x (t-1), a^d_tt' (normalisation dtype; B x 0 at t = 1).
            context: B x H, c^d_t (0 at t = 1).
            cache: a new dict: ``cache`` with h^d_t appended to PAST (B x t x H).
        """
        self.check_size(state)
        past = cache[PAST]  # B x (t-1) x H
        if past.size(1) == 0:
            attn = state.new_zeros(state.size(0), 0, dtype=normalisation_dtype(state.dtype))  # B x 0
            context = torch.zeros_like(state)  # B x H   c^d_1 = 0
        else:
            query = torch.matmul(state, self.weight)  # B x H   q_t = h^d_t^T W^d_attn
            scores = torch.bmm(past, query.unsqueeze(2)).squeeze(2)  # B x (t-1)   (Paulus eq 6)
            attn = torch.softmax(scores.to(normalisation_dtype(scores.dtype)), dim=1)  # B x (t-1)   (Paulus eq 7)
            context = torch.bmm(attn.to(past.dtype).unsqueeze(1), past).squeeze(1)  # B x H   (Paulus eq 8)
        return attn, context, dict(cache, **{PAST: torch.cat([past, state.unsqueeze(1)], dim=1)})  # B x t x H

    def reorder_state(self, cache: Dict[str, Tensor], new_order: Tensor) -> Dict[str, Tensor]:
        """``cache`` for the rows ``new_order`` (beam search), via modules/beam_reorder.reorder_rows."""
        return reorder_rows(cache, new_order, source_only=self.SOURCE_ONLY)

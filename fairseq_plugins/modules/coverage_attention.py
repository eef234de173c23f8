"""Additive (Bahdanau) attention with an optional coverage input.

See, Liu & Manning (2017), "Get To The Point":
    e_i^t = v^T tanh(W_h h_i + W_s s_t + b_attn)                       (eq 1)
    e_i^t = v^T tanh(W_h h_i + W_s s_t + w_c c_i^t + b_attn)           (eq 11, with coverage)
    a^t   = softmax(e^t)                                                (eq 2)
    h*_t  = sum_i a_i^t h_i                                             (eq 3)
    c^t   = sum_{t' < t} a^{t'}                                         (eq 10)

The source side ``W_h h_i + b_attn`` does not depend on the decoder step, so it is computed once per source
(``project_keys``) and only the cheap step-dependent terms are added inside the decoder loop.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor


class CoverageAttention(nn.Module):
    """Additive attention over encoder states, optionally conditioned on a coverage vector.

    Args:
        key_dim: size of an encoder state h_i.
        query_dim: size of a decoder state s_t.
        attn_dim: size of the hidden layer inside tanh (default: key_dim).
        coverage: add the ``w_c c_i^t`` term of eq 11.
    """

    def __init__(self, key_dim: int, query_dim: int, attn_dim: Optional[int] = None, coverage: bool = True):
        super().__init__()
        attn_dim = attn_dim or key_dim
        self.key_proj = nn.Linear(key_dim, attn_dim, bias=True)  # W_h, b_attn
        self.query_proj = nn.Linear(query_dim, attn_dim, bias=False)  # W_s
        self.coverage_weight = nn.Parameter(torch.zeros(attn_dim)) if coverage else None  # w_c
        self.v = nn.Linear(attn_dim, 1, bias=False)  # v
        self.coverage = coverage

    def project_keys(self, keys: Tensor) -> Tensor:
        """W_h h_i + b_attn for every source position.  keys: B x S x key_dim -> B x S x attn_dim."""
        return self.key_proj(keys)

    def forward(
        self,
        projected_keys: Tensor,
        values: Tensor,
        query: Tensor,
        coverage: Optional[Tensor],
        padding_mask: Optional[Tensor],
    ) -> Tuple[Tensor, Tensor]:
        """One decoder step (batch-first, so the context is one batched matrix product).

        Args:
            projected_keys: B x S x A, from ``project_keys``.
            values: B x S x C, the encoder states h_i.
            query: B x Q, the decoder state s_t.
            coverage: B x S, c^t (ignored when coverage is off).
            padding_mask: B x S, True at source padding (or None).
        Returns:
            attn: B x S, a^t (zero at padding, sums to 1 over the source).
            context: B x C, h*_t.
        """
        # W_h h_i + b + W_s s_t (+ w_c c_i^t) as one batched product: [1, c_i] @ [W_s s_t; w_c] added to the
        # keys, which is a single pass over B x S x A instead of one per term (the step's hot spot).
        bsz, src_len, attn_dim = projected_keys.size()
        step_terms = [self.query_proj(query)]  # B x A
        step_weights = [projected_keys.new_ones(bsz, src_len)]  # B x S
        if self.coverage:
            step_terms.append(self.coverage_weight.expand(bsz, attn_dim))  # B x A
            step_weights.append(coverage)  # B x S
        features = torch.baddbmm(
            projected_keys, torch.stack(step_weights, dim=2), torch.stack(step_terms, dim=1)
        )  # B x S x A   (inside tanh of eq 1 / eq 11)
        scores = self.v(torch.tanh(features)).squeeze(2)  # B x S   (eq 1 / eq 11)
        if padding_mask is not None:
            scores = scores.float().masked_fill(padding_mask, float("-inf")).type_as(scores)  # FP16-safe
        attn = torch.softmax(scores, dim=1)  # B x S   (eq 2)
        context = torch.bmm(attn.unsqueeze(1), values).squeeze(1)  # B x C   (eq 3)
        return attn, context

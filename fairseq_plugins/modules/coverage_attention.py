"""Additive (Bahdanau) attention with an optional coverage input.

See, Liu & Manning (2017), "Get To The Point":
    e_i^t = v^T tanh(W_h h_i + W_s s_t + b_attn)                       (See eq 1)
    e_i^t = v^T tanh(W_h h_i + W_s s_t + w_c c_i^t + b_attn)           (See eq 11, with coverage)
    a^t   = softmax(e^t)                                                (See eq 2)
    h*_t  = sum_i a_i^t h_i                                             (See eq 3)
    c^t   = sum_{t' < t} a^{t'}                                         (See eq 10)

The source side ``W_h h_i + b_attn`` does not depend on the decoder step, so it is computed once per source
(``project_keys``); inside the decoder loop the scores come from accelerated/additive_scores.py, which never keeps
the B x S x A tensor inside tanh in memory.  Keys and values read at every step have their gradient summed
in one buffer (accelerated/step_gradient.py): pass the values through ``share_across_steps`` before the loop.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_plugins.accelerated.additive_scores import additive_scores
from fairseq_plugins.accelerated.step_gradient import share_across_steps, step_gradient
from fairseq_plugins.modules.factories import TorchLinear


class CoverageAttention(nn.Module):
    """Additive attention over encoder states, optionally conditioned on a coverage vector.

    Args:
        key_dim: size of an encoder state h_i.
        query_dim: size of a decoder state s_t.
        attn_dim: size of the hidden layer inside tanh (default: key_dim).
        coverage: add the ``w_c c_i^t`` term of See eq 11.
    """

    def __init__(self, key_dim: int, query_dim: int, attn_dim: Optional[int] = None, coverage: bool = True):
        super().__init__()
        attn_dim = attn_dim or key_dim
        self.key_proj = TorchLinear(key_dim, attn_dim, bias=True)  # W_h, b_attn
        self.query_proj = TorchLinear(query_dim, attn_dim, bias=False)  # W_s
        self.coverage_weight = nn.Parameter(torch.zeros(attn_dim)) if coverage else None  # w_c
        self.v = TorchLinear(attn_dim, 1, bias=False)  # v
        self.coverage = coverage

    def project_keys(self, keys: Tensor, offset: Optional[Tensor] = None) -> Tensor:
        """W_h h_i + b_attn (+ offset) for every source position: keys B x S x key_dim, offset B x attn_dim
        (a per-document term, e.g. Song & Zhao's E_a u_s) -> B x S x attn_dim.

        Computed once per source; their gradient is summed over the decoder steps in one buffer."""
        projected = self.key_proj(keys)  # B x S x A
        if offset is not None:
            projected = projected + offset.unsqueeze(1)
        return share_across_steps(projected)

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
        scores = additive_scores(
            projected_keys, self.query_proj(query), coverage if self.coverage else None, self.coverage_weight,
            self.v.weight.view(-1),
        )  # B x S   (See eq 1 / See eq 11; accelerated/additive_scores.py)
        if padding_mask is not None:
            scores = scores.masked_fill(padding_mask, float("-inf"))  # B x S (-inf exists in every float dtype)
        attn = torch.softmax(scores, dim=1)  # B x S   (See eq 2)
        with torch.autocast(device_type=values.device.type, enabled=False):  # one dtype: the values'
            context = WeightedSum.apply(attn.to(values.dtype), values, step_gradient(values))  # B x C   (See eq 3)
        return attn, context


class WeightedSum(torch.autograd.Function):
    """h*_t = sum_i a_i^t h_i (See eq 3) as one batched product, whose backward adds dL/dh_i = a_i^t dL/dh*_t into
    the values' StepGradient in place (accelerated/step_gradient.py) when the values come through
    ``share_across_steps``, instead of returning a fresh B x S x C gradient at every step."""

    @staticmethod
    def forward(ctx, attn, values, values_gradient):
        """attn: B x S, values: B x S x C -> B x C."""
        ctx.save_for_backward(attn, values)
        ctx.values_gradient = values_gradient
        return torch.bmm(attn.unsqueeze(1), values).squeeze(1)  # B x C

    @staticmethod
    @torch.autocast(device_type="cuda", enabled=False)
    @torch.autocast(device_type="cpu", enabled=False)
    def backward(ctx, grad_context):
        attn, values = ctx.saved_tensors
        grad_context = grad_context.to(values.dtype).unsqueeze(1)  # B x 1 x C
        grad_attn = torch.bmm(grad_context, values.transpose(1, 2)).squeeze(1) if ctx.needs_input_grad[0] else None
        grad_values = None
        if ctx.needs_input_grad[1]:
            outer = (attn.unsqueeze(2).to(grad_context.dtype), grad_context)  # B x S x 1, B x 1 x C
            if ctx.values_gradient is not None:
                ctx.values_gradient.buffer(values).baddbmm_(*outer)  # sum over steps of a_i dL/dh*
            else:
                grad_values = torch.bmm(*outer)  # B x S x C
        return grad_attn, grad_values, None

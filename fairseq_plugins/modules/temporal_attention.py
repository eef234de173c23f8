"""Intra-temporal attention over the input (Paulus, Xiong & Socher 2017, "A Deep Reinforced Model for
Abstractive Summarization", section 2.1).

With encoder states h^e_i and decoder states h^d_t:
    e_ti   = h^d_t^T W^e_attn h^e_i                                          (Paulus eqs 1-2)
    e'_ti  = exp(e_ti)                                    at t = 1           (Paulus eq 3)
    e'_ti  = exp(e_ti) / sum_{j<t} exp(e_ji)              at t > 1           (Paulus eq 3)
    a_ti   = e'_ti / sum_j e'_tj                                             (Paulus eq 4)
    c^e_t  = sum_i a_ti h^e_i                                                (Paulus eq 5)

A source position that earlier steps attended to strongly is penalised at later steps; a_t is also the copy
distribution p(y_t = x_i | u_t = 1) of Paulus eq 10.

Log space.  exp(e_ti) overflows float32 once e_ti > 88 and the sum over past steps grows with t, so Paulus eq 3 is
never computed as written.  With the running log-sum-exp of the past scores

    L_{t-1,i} = log sum_{j<t} exp(e_ji)      (logcumsumexp over t),

log e'_ti = e_ti - L_{t-1,i}, and Paulus eq 4 is a softmax over the source of these logits:

    a_t = softmax_i(e_t - L_{t-1})   for t > 1,      a_1 = softmax_i(e_1).

Every quantity stays of the size of the scores themselves.  The denominator is the sum of the *exponentiated
raw scores* of the past steps, not of the past normalised weights (a mistake seen in a public
reimplementation).  Padded source positions get -inf only in the final softmax (FP16-safe: no large finite
constant); L keeps their finite scores, so no -inf - (-inf) = NaN appears, and since the softmax gives them
weight 0 (and gradient 0) their scores influence nothing.  Every row must have at least one unpadded source
position (fairseq sources always end with EOS).  The normalisation runs in at least float32.

Two forms give the same numbers:
  * ``IntraTemporalAttention.forward``: every step at once, for decoder states known in advance (queries
    B x T x H_d): one batched matmul for the scores, ``torch.logcumsumexp`` over t, no loop over steps.
  * ``IntraTemporalAttention.step``: one decoder step, carrying L_{t-1} (B x S) and the number of steps done
    (B) in a state dictionary that beam search reorders with modules/beam_reorder.reorder_rows.  The projected
    encoder side W^e_attn h^e_i (B x S x H_d, computed once per source by ``project_keys``) rides in the same
    dictionary as a source-only entry, so the beam does not copy it while hypotheses stay within their source.

Inside a training loop the step form sums the gradients of the projected keys and of the encoder states over
the steps in one buffer each (accelerated/step_gradient.py) when they come through ``share_across_steps``
(``project_keys`` does so for the keys).
"""
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.accelerated.step_gradient import share_across_steps, step_gradient
from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.coverage_attention import WeightedSum

KEYS = "temporal_keys"  # B x S x H_d   W^e_attn h^e_i (source-only)
RUNNING = "temporal_running"  # B x S   L_{t-1}: log sum_{j<t} exp(e_ji) (batch-first)
STEPS = "temporal_steps"  # B   decoder steps done so far, t - 1 (batch-first, long)


def BilinearWeight(out_features: int, in_features: int) -> nn.Parameter:
    """An out x in matrix for a bilinear score, Xavier-uniform initialised."""
    weight = nn.Parameter(torch.empty(out_features, in_features))
    nn.init.xavier_uniform_(weight)
    return weight


def normalisation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the temporal normalisation runs in: float32 for half inputs, else the input's."""
    return torch.promote_types(dtype, torch.float32)


def masked_softmax(logits: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
    """softmax over the last dimension with padded positions set to -inf first (weight exactly 0 there).

    logits: ... x S; padding_mask: broadcastable to logits, True at padding, or None."""
    if padding_mask is not None:
        logits = logits.masked_fill(padding_mask, float("-inf"))  # ... x S   (FP16-safe: no finite constant)
    return torch.softmax(logits, dim=-1)  # ... x S


def temporal_weights(scores: Tensor, padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Paulus eqs 3-4 for all steps at once, in log space.

    Args:
        scores: B x T x S, e_ti (Paulus eqs 1-2).
        padding_mask: B x S, True at source padding (default None: no padding).
    Returns:
        attn: B x T x S, a_ti in the normalisation dtype (rows sum to 1, 0 at padding).
        running: B x T x S, L_t = log sum_{j<=t} exp(e_ji) (its last step continues in ``temporal_step_weights``).
    """
    scores = scores.to(normalisation_dtype(scores.dtype))  # B x T x S
    running = torch.logcumsumexp(scores, dim=1)  # B x T x S   L_t
    previous = F.pad(running[:, :-1], (0, 0, 1, 0))  # B x T x S   L_{t-1}; 0 at t = 1 (a constant cancels)
    mask = padding_mask.unsqueeze(1) if padding_mask is not None else None  # B x 1 x S
    attn = masked_softmax(scores - previous, mask)  # B x T x S   (Paulus eqs 3-4: log e'_ti = e_ti - L_{t-1,i})
    return attn, running


def temporal_step_weights(scores: Tensor, running: Tensor, steps: Tensor,
                          padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Paulus eqs 3-4 for one step t, in log space.

    Args:
        scores: B x S, e_t (Paulus eqs 1-2).
        running: B x S, L_{t-1} (ignored in the rows where ``steps`` is 0).
        steps: B, t - 1, the number of steps already done in each row.
        padding_mask: B x S, True at source padding (default None).
    Returns:
        attn: B x S, a_t in the normalisation dtype.
        running: B x S, L_t = log(exp(L_{t-1}) + exp(e_t)), or e_1 at t = 1.
    """
    scores = scores.to(normalisation_dtype(scores.dtype))  # B x S
    running = running.to(scores.dtype)  # B x S
    first = steps.eq(0).unsqueeze(1)  # B x 1   t = 1: no past step
    previous = running.masked_fill(first, 0.0)  # B x S   L_{t-1}, 0 at t = 1
    attn = masked_softmax(scores - previous, padding_mask)  # B x S   (Paulus eqs 3-4)
    running = torch.where(first, scores, torch.logaddexp(previous, scores))  # B x S   L_t
    return attn, running


class StepScores(torch.autograd.Function):
    """e_ti = q_t . k_i for one step (q_t = h^d_t, k_i = W^e_attn h^e_i), whose backward adds
    dL/dk_i = dL/de_ti q_t into the keys' StepGradient (accelerated/step_gradient.py) when the keys come through
    ``share_across_steps``, instead of returning a fresh B x S x H_d gradient at every step."""

    @staticmethod
    def forward(ctx, keys, query, keys_gradient):
        """keys: B x S x H_d, query: B x H_d -> B x S."""
        ctx.save_for_backward(keys, query)
        ctx.keys_gradient = keys_gradient
        return torch.bmm(keys, query.unsqueeze(2)).squeeze(2)  # B x S

    @staticmethod
    @torch.autocast(device_type="cuda", enabled=False)
    @torch.autocast(device_type="cpu", enabled=False)
    def backward(ctx, grad_scores):
        keys, query = ctx.saved_tensors
        grad_scores = grad_scores.to(keys.dtype)  # B x S
        grad_query = torch.bmm(grad_scores.unsqueeze(1), keys).squeeze(1) if ctx.needs_input_grad[1] else None
        grad_keys = None
        if ctx.needs_input_grad[0]:
            outer = (grad_scores.unsqueeze(2), query.unsqueeze(1))  # B x S x 1, B x 1 x H_d
            if ctx.keys_gradient is not None:
                ctx.keys_gradient.buffer(keys).baddbmm_(*outer)  # sum over steps of dL/de_ti q_t
            else:
                grad_keys = torch.bmm(*outer)  # B x S x H_d
        return grad_keys, grad_query, None


class IntraTemporalAttention(nn.Module):
    """Paulus et al.'s intra-temporal attention over the encoder states (Paulus eqs 1-5).

    The parameter ``weight`` is W^e_attn (query_dim x key_dim), so e_ti = h^d_t^T W^e_attn h^e_i with no bias.
    The queries are whatever decoder state the caller passes as h^d_t (the paper: the decoder LSTM's output
    at step t, after the step).

    Args:
        key_dim: size of an encoder state h^e_i (H_e).
        query_dim: size of a decoder state h^d_t (H_d).
    """

    SOURCE_ONLY = (KEYS,)  # the state entries that depend on the source alone (for reorder_rows)

    def __init__(self, key_dim: int, query_dim: int):
        super().__init__()
        if key_dim <= 0 or query_dim <= 0:
            raise ValueError(f"IntraTemporalAttention: key_dim and query_dim must be positive, "
                             f"got {key_dim} and {query_dim}")
        self.key_dim = key_dim
        self.query_dim = query_dim
        self.weight = BilinearWeight(query_dim, key_dim)  # W^e_attn   H_d x H_e

    def project_keys(self, encoder_states: Tensor) -> Tensor:
        """W^e_attn h^e_i for every source position, once per source: B x S x H_e -> B x S x H_d.

        Returned through ``share_across_steps``: the step form sums its gradient over the steps in one buffer."""
        if encoder_states.size(-1) != self.key_dim:
            raise ValueError(f"IntraTemporalAttention: encoder states of size {encoder_states.size(-1)}, "
                             f"expected key_dim = {self.key_dim}")
        return share_across_steps(F.linear(encoder_states, self.weight))  # B x S x H_d   (half of Paulus eq 2)

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor,
                padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
        """All decoder steps at once (the decoder states must not depend on the contexts).

        Args:
            queries: B x T x H_d, h^d_1 .. h^d_T.
            keys: B x S x H_d, from ``project_keys``.
            values: B x S x H_e, the encoder states h^e_i.
            padding_mask: B x S, True at source padding (default None).
        Returns:
            attn: B x T x S, a_ti (normalisation dtype: float32 for half inputs).
            context: B x T x H_e, c^e_t (the values' dtype).
            state: {RUNNING: B x S, L_T;  STEPS: B, all T}: the step form continues from it (merge it into a
                state from ``initial_state``).
        """
        scores = torch.bmm(queries.to(keys.dtype), keys.transpose(1, 2))  # B x T x S   (Paulus eqs 1-2)
        attn, running = temporal_weights(scores, padding_mask)  # B x T x S   (Paulus eqs 3-4)
        context = torch.bmm(attn.to(values.dtype), values)  # B x T x H_e   (Paulus eq 5)
        steps = torch.full((queries.size(0),), queries.size(1), dtype=torch.long, device=queries.device)  # B
        return attn, context, {RUNNING: running[:, -1], STEPS: steps}

    def initial_state(self, keys: Tensor, source_row: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """The state before the first step.

        Args:
            keys: B x S x H_d, from ``project_keys``.
            source_row: B, the source of each row (default: row i comes from source i).
        Returns a dict, every entry batch-first (dimension 0 is the row):
            KEYS ("temporal_keys"): B x S x H_d, source-only;
            RUNNING ("temporal_running"): B x S, L_{t-1} (zeros: unused at t = 1);
            STEPS ("temporal_steps"): B, zeros (long);
            SOURCE_ROW ("source_row"): B.
        """
        bsz, src_len, _ = keys.size()
        return {
            KEYS: keys,  # B x S x H_d
            RUNNING: keys.new_zeros(bsz, src_len, dtype=normalisation_dtype(keys.dtype)),  # B x S
            STEPS: torch.zeros(bsz, dtype=torch.long, device=keys.device),  # B
            SOURCE_ROW: source_row if source_row is not None else source_rows(bsz, keys.device),  # B
        }

    def step(self, query: Tensor, values: Tensor, state: Dict[str, Tensor],
             padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
        """One decoder step t.

        Args:
            query: B x H_d, h^d_t.
            values: B x S x H_e, the encoder states h^e_i (through ``share_across_steps`` to sum their gradient
                over the steps in one buffer).
            state: a dict holding KEYS, RUNNING and STEPS (from ``initial_state``, a previous ``step``, or the
                decoder's own state dict that includes them; other entries are passed through).
            padding_mask: B x S, True at source padding (default None).
        Returns:
            attn: B x S, a_t (normalisation dtype).
            context: B x H_e, c^e_t (the values' dtype).
            state: a new dict: ``state`` with RUNNING = L_t and STEPS + 1.
        """
        keys = state[KEYS]  # B x S x H_d
        with torch.autocast(device_type=keys.device.type, enabled=False):  # one dtype: the keys'
            scores = StepScores.apply(keys, query.to(keys.dtype), step_gradient(keys))  # B x S   (Paulus eqs 1-2)
        attn, running = temporal_step_weights(scores, state[RUNNING], state[STEPS], padding_mask)  # (Paulus eqs 3-4)
        with torch.autocast(device_type=values.device.type, enabled=False):  # one dtype: the values'
            context = WeightedSum.apply(attn.to(values.dtype), values, step_gradient(values))  # B x H_e  (Paulus eq 5)
        return attn, context, dict(state, **{RUNNING: running, STEPS: state[STEPS] + 1})

    def reorder_state(self, state: Dict[str, Tensor], new_order: Tensor) -> Dict[str, Tensor]:
        """``state`` for the rows ``new_order`` (beam search): modules/beam_reorder.reorder_rows, the keys kept
        as they are while every row stays within its source."""
        return reorder_rows(state, new_order, source_only=self.SOURCE_ONLY)

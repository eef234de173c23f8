"""The two attentions of the deep communicating agents' decoder (Celikyilmaz et al. 2018, section 2.2).

At decoder step t, with decoder state s_t and the top-layer agent states h_{a,i} (numbers as in our notes,
../shared/papers/DCA_AND_PAULUS.md; (~) = inferred there):
    l_a^t  = softmax_i(v2^T tanh(W5 h_{a,i} + W6 s_t + b1))      word attention inside agent a  (~Celikyilmaz eq 8)
    c_a^t  = sum_i l_{a,i}^t h_{a,i}                             agent context                  (~Celikyilmaz eq 9, [U])
    g^t    = softmax_a(v3^T tanh(W7 c_a^t + W8 s_t + b2))        agent attention                (~Celikyilmaz eq 10)
    c*_t   = sum_a g_a^t c_a^t                                   document context               (~Celikyilmaz eq 11)

Masking.  Word attention is a softmax over each agent's own tokens: padding gets weight exactly 0.  An empty
agent (a document shorter than M units) has no token: its row is computed over finite dummy scores and then
set to 0 (masking all of a row with -inf would give NaN, and NaN times 0 is still NaN in the backward pass);
its context is 0 and the agent attention masks it out with -inf (the last agent always holds the final
``</s>``, so every row of g^t has at least one agent).  Masking is done in float32 (FP16-safe).

Cost.  The decoder does not feed the attention back into its LSTM (no input feeding in the paper), so the
attention of all T steps is computed after the recurrence: the word-attention scores step by step through
accelerated/additive_scores.py (the B*M x S_a x A tensor inside tanh stays in cache, never in memory), then one
softmax and one batched product for all steps.  Everything is linear in the document length.
"""
from typing import Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_plugins.accelerated.additive_scores import additive_scores
from fairseq_plugins.accelerated.step_gradient import share_across_steps
from fairseq_plugins.modules.factories import TorchLinear


def masked_softmax(scores: Tensor, padding_mask: Tensor, dim: int) -> Tensor:
    """softmax over ``dim`` with ``padding_mask`` (True = excluded) set to -inf, in float32."""
    return torch.softmax(scores.float().masked_fill(padding_mask, float("-inf")), dim=dim)


class AgentWordAttention(nn.Module):
    """Additive attention over each agent's tokens, one context per agent (~Celikyilmaz eqs 8-9).

    Args:
        key_dim: H, the size of an agent state h_{a,i}.
        query_dim: size of the decoder state s_t.
        attn_dim: size inside the tanh.
    """

    def __init__(self, key_dim: int, query_dim: int, attn_dim: int):
        super().__init__()
        self.key_proj = TorchLinear(key_dim, attn_dim, bias=True)  # W5, b1
        self.query_proj = TorchLinear(query_dim, attn_dim, bias=False)  # W6
        self.v = TorchLinear(attn_dim, 1, bias=False)  # v2

    def project_keys(self, states: Tensor) -> Tensor:
        """W5 h_{a,i} + b1, once per source: B x M x S_a x H -> B x M x S_a x A."""
        return self.key_proj(states)

    def forward(self, keys: Tensor, values: Tensor, queries: Tensor, padding_mask: Tensor,
                nonempty: Tensor) -> Tuple[Tensor, Tensor]:
        """All decoder steps at once.

        Args:
            keys: B x M x S_a x A (``project_keys``); values: B x M x S_a x H, the agent states.
            queries: B x T x Q, the decoder states s_t.
            padding_mask: B x M x S_a, True at padding; nonempty: B x M, False for an empty agent.
        Returns:
            attn l: B x T x M x S_a (each non-empty agent's row sums to 1; 0 at padding and for empty agents);
            contexts c_a: B x T x M x H.
        """
        bsz, agents, width, attn_dim = keys.shape
        steps = queries.size(1)
        flat_keys = share_across_steps(keys.reshape(bsz * agents, width, attn_dim))  # (B*M) x S_a x A
        projected = self.query_proj(queries)  # B x T x A   (W6 s_t)
        v = self.v.weight.view(-1)
        queries_by_agent = projected.repeat_interleave(agents, dim=0).unbind(1)  # T x ((B*M) x A)
        scores = torch.stack([additive_scores(flat_keys, query, None, None, v) for query in queries_by_agent],
                             dim=1)  # (B*M) x T x S_a   (~Celikyilmaz eq 8, before the softmax)
        row_empty = ~nonempty.reshape(-1, 1, 1)  # (B*M) x 1 x 1
        mask = padding_mask.reshape(bsz * agents, 1, width) & ~row_empty  # empty rows: finite dummy scores
        attn = masked_softmax(scores, mask, dim=2).masked_fill(row_empty, 0.0)  # (B*M) x T x S_a   (~Celikyilmaz eq 8)
        contexts = torch.bmm(attn.to(values.dtype), values.reshape(bsz * agents, width, -1))  # (~Celikyilmaz eq 9)
        attn = attn.view(bsz, agents, steps, width).transpose(1, 2)  # B x T x M x S_a
        contexts = contexts.view(bsz, agents, steps, -1).transpose(1, 2)  # B x T x M x H
        return attn, contexts


class AgentAttention(nn.Module):
    """Additive attention over the agents' contexts, giving the document context (~Celikyilmaz eqs 10-11).

    Args:
        context_dim: H; query_dim: size of s_t; attn_dim: size inside the tanh.
    """

    def __init__(self, context_dim: int, query_dim: int, attn_dim: int):
        super().__init__()
        self.context_proj = TorchLinear(context_dim, attn_dim, bias=True)  # W7, b2
        self.query_proj = TorchLinear(query_dim, attn_dim, bias=False)  # W8
        self.v = TorchLinear(attn_dim, 1, bias=False)  # v3

    def forward(self, contexts: Tensor, queries: Tensor, nonempty: Tensor) -> Tuple[Tensor, Tensor]:
        """contexts: B x T x M x H; queries: B x T x Q; nonempty: B x M.
        Returns g: B x T x M (sums to 1 over the non-empty agents, 0 for empty ones) and c*: B x T x H."""
        hidden = torch.tanh(self.context_proj(contexts) + self.query_proj(queries).unsqueeze(2))  # B x T x M x A
        scores = self.v(hidden).squeeze(3)  # B x T x M
        weights = masked_softmax(scores, ~nonempty.unsqueeze(1), dim=2)  # B x T x M   (~Celikyilmaz eq 10)
        document = (weights.to(contexts.dtype).unsqueeze(3) * contexts).sum(dim=2)  # B x T x H   (~Celikyilmaz eq 11)
        return weights, document

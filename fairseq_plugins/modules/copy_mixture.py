"""The pointer-generator's generation switch and final (copy + generate) distribution.

See, Liu & Manning (2017):
    p_gen = sigmoid(w_h*^T h*_t + w_s^T s_t + w_x^T x_t + b_ptr)                  (eq 8)
    P(w)  = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t                 (eq 9)

P(w) is defined over the *extended* vocabulary: the regular words ``[0, num_regular)`` (where P_vocab lives)
followed by the per-document OOV markers ``[num_regular, ext_size)``, which only copying can produce.
Two ways to evaluate eq 9 are kept side by side:
  * ``full``: the whole distribution (beam search, tests);
  * ``at``: P(w) at given words only (training), which avoids materialising a B x T x V copy scatter.

Several copy sources (for example one per encoder agent, each with its own switch, mixed by weights that sum to
1) have the same form with general weights,
    P(w) = g_t P_vocab(w) + sum_{j: x_j = w} k_tj,
over the concatenation x of the sources' tokens: ``mix`` / ``mix_at``, with ``merge_copy_sources`` computing
g_t and k_t from per-source switches, attentions and mixing weights.
"""
from typing import List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class GenerationSwitch(nn.Module):
    """p_gen of eq 8, from the context vector, the decoder state and the decoder input.

    Args:
        input_dims: sizes of the tensors concatenated as the switch's input (e.g. [context, state, input]).
    """

    def __init__(self, input_dims: List[int]):
        super().__init__()
        self.proj = nn.Linear(sum(input_dims), 1)  # [w_h*; w_s; w_x], b_ptr

    def forward(self, *inputs: Tensor) -> Tensor:
        """inputs: ... x d_k each -> p_gen: ... x 1, in (0, 1)."""
        return torch.sigmoid(self.proj(torch.cat(inputs, dim=-1)))  # eq 8


class CopyMixture(nn.Module):
    """Eq 9 over the extended vocabulary.

    Args:
        num_regular: number of words that P_vocab covers (the logits' last dimension).
        ext_size: size of the extended vocabulary (regular words + OOV markers).
    """

    def __init__(self, num_regular: int, ext_size: int):
        super().__init__()
        self.num_regular = num_regular
        self.ext_size = ext_size

    def full(self, logits: Tensor, attn: Tensor, p_gen: Tensor, src_tokens: Tensor) -> Tensor:
        """P(w) for every w of the extended vocabulary.

        Args:
            logits: B x T x V_reg, the scores whose softmax is P_vocab.
            attn: B x T x S, the attention a^t.
            p_gen: B x T x 1.
            src_tokens: B x S, source token ids (extended vocabulary; padding gets zero attention).
        Returns:
            B x T x V_ext probabilities (each row sums to 1).
        """
        return self.mix(logits, p_gen, (1.0 - p_gen) * attn.float(), src_tokens)  # eq 9

    def at(self, logits: Tensor, attn: Tensor, p_gen: Tensor, src_tokens: Tensor, words: Tensor) -> Tensor:
        """P(w) at ``words`` (B x T) only; same arguments as ``full``.  Returns B x T."""
        copy_prob = self.copy_at(attn.float(), src_tokens, words)  # B x T
        p_gen = p_gen.squeeze(2)  # B x T
        return p_gen * self.vocab_at(logits, words) + (1.0 - p_gen) * copy_prob  # eq 9

    def mix(self, logits: Tensor, generate: Tensor, copy: Tensor, tokens: Tensor) -> Tensor:
        """P(w) = generate P_vocab(w) + sum_{j: tokens_j = w} copy_j for every w of the extended vocabulary.

        Args:
            logits: B x T x V_reg; generate: B x T x 1, the weight of P_vocab;
            copy: B x T x S', the copy mass of each source position (float32);
            tokens: B x S', the ids at those positions (generate + copy.sum(-1) = 1 gives a distribution).
        Returns:
            B x T x V_ext.
        """
        bsz, tgt_len, _ = logits.size()
        probs = generate * F.softmax(logits, dim=-1, dtype=torch.float32)  # B x T x V_reg
        probs = F.pad(probs, (0, self.ext_size - self.num_regular))  # B x T x V_ext
        index = tokens.unsqueeze(1).expand(bsz, tgt_len, tokens.size(1))  # B x T x S'
        return probs.scatter_add(2, index, copy)

    def mix_at(self, logits: Tensor, generate: Tensor, copy: Tensor, tokens: Tensor, words: Tensor) -> Tensor:
        """``mix`` at ``words`` (B x T) only; same arguments.  Returns B x T."""
        return generate.squeeze(2) * self.vocab_at(logits, words) + self.copy_at(copy, tokens, words)

    def vocab_at(self, logits: Tensor, words: Tensor) -> Tensor:
        """P_vocab(w) at ``words`` (B x T), 0 for markers.  B x T."""
        log_vocab = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # B x T x V_reg
        regular = words < self.num_regular  # B x T
        vocab_prob = log_vocab.gather(2, words.clamp(max=self.num_regular - 1).unsqueeze(2)).squeeze(2).exp()
        return vocab_prob * regular  # B x T   (markers have no P_vocab)

    @staticmethod
    def copy_at(weights: Tensor, tokens: Tensor, words: Tensor) -> Tensor:
        """sum_{j: tokens_j = w} weights_j at ``words`` (B x T); weights B x T x S', tokens B x S'.  B x T."""
        same = tokens.unsqueeze(1) == words.unsqueeze(2)  # B x T x S'
        return (weights * same).sum(dim=2)  # B x T


def merge_copy_sources(weights: Tensor, p_gen: Tensor, attn: Tensor, src_tokens: Tensor) -> Tuple[Tensor, Tensor,
                                                                                                     Tensor]:
    """Several copy sources k = 1..M, each a pointer-generator over its own tokens, mixed by ``weights``:
        P(w) = sum_k weights_k [p_gen_k P_vocab(w) + (1 - p_gen_k) sum_{i: x_ki = w} a_ki],
    written as ``CopyMixture.mix``'s (generate, copy, tokens).

    Args:
        weights: B x T x M (each row sums to 1); p_gen: B x T x M; attn: B x T x M x S (rows sum to 1);
        src_tokens: B x M x S.
    Returns:
        generate B x T x 1 (sum_k weights_k p_gen_k), copy B x T x (M*S), tokens B x (M*S).
    """
    bsz, tgt_len = weights.shape[:2]
    generate = (weights * p_gen).sum(dim=2, keepdim=True)  # B x T x 1
    copy = (weights * (1.0 - p_gen)).unsqueeze(3) * attn.float()  # B x T x M x S
    return generate, copy.reshape(bsz, tgt_len, -1), src_tokens.reshape(bsz, -1)

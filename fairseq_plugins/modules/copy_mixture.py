"""The pointer-generator's generation switch and final (copy + generate) distribution, in log space.

See, Liu & Manning (2017):
    p_gen = sigmoid(w_h*^T h*_t + w_s^T s_t + w_x^T x_t + b_ptr)                  (See eq 8)
    P(w)  = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t                 (See eq 9)

P(w) is defined over the *extended* vocabulary: the regular words ``[0, num_regular)`` (where P_vocab lives)
followed by the per-document OOV markers ``[num_regular, ext_size)``, which only copying can produce.

Log space.  See eq 9 is computed as a log-sum-exp of its two terms,
    log P(w) = logaddexp(log p_gen + log P_vocab(w),  log(1 - p_gen) + log sum_{i: w_i = w} a_i^t),
with log p_gen = logsigmoid(l) and log(1 - p_gen) = logsigmoid(-l) from the switch's logit l and log P_vocab
from log_softmax, so a word with P(w) far below float32's smallest normal number keeps a finite log-probability
and a gradient, and p_gen saturating at exactly 0 or 1 costs nothing.  A word that neither side can produce (a
marker absent from the source) gets exactly -inf; every log and logaddexp is guarded so that such entries give
zero gradients, never NaN.  The mixture always runs in float32 (or float64 for float64 inputs).  The attention
arrives as probabilities: copy mass below float32's range (about 1e-38, denormals being flushed) is already 0.

Uncopyable tokens.  fairseq appends ``</s>`` to every source, so the attention covers it (it is part of the
context) but See et al.'s model, whose sources have no stop token, can never copy it.  ``CopyMixture(...,
uncopyable=eos)`` takes it out of the copy distribution, and ``eos_attention`` says where its attention goes:
  * ``"generate"``: to the generation side, as the sentinel of Merity et al. (2017, Pointer Sentinel
    Mixture Models), whose softmax mass gates the vocabulary distribution:
        P(w) = (p_gen + (1 - p_gen) a_</s>) P_vocab(w) + (1 - p_gen) sum_{i: w_i = w, w_i != </s>} a_i^t;
    an attention held on ``</s>`` therefore generates, and a word is copied only from the attention on it (which
    coverage then records, See eq 10);
  * ``"renormalise"`` (the default): over the other positions, a_i / sum_{j: w_j != </s>} a_j, so that a copy is
    drawn from whatever attention is left beside ``</s>``, however little.
A source with nothing copyable (only ``</s>``, an empty document) puts all its mass on generation either way
(P(w) = P_vocab(w)), whatever the switch.

Two ways to evaluate See eq 9 are kept side by side:
  * ``log_full``: the whole distribution (beam search, tests); without autograd (a search) it runs as
    ``log_full_no_grad``, the same values in about a third of the operations: no guards for gradients, and
    what depends on the source alone computed once per batch;
  * ``log_at``: log P(w) at given words only (training), which avoids materialising a B x T x V copy scatter.

Several copy sources (for example one per encoder agent, each with its own switch, mixed by weights that sum to
1) have the same form with general weights,
    P(w) = g_t P_vocab(w) + sum_{j: x_j = w} k_tj,
over the concatenation x of the sources' tokens: ``log_mix`` / ``log_mix_at`` (``mix`` / ``mix_at`` give the
probabilities), with ``merge_copy_sources`` computing g_t and k_t from per-source switches, attentions and mixing
weights.  There g_t comes as a probability, so its log is a clamped log.
"""
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.modules.factories import TorchLinear

TINY = 1e-30  # the clamp of a log taken of a probability (not of a logit): only merge_copy_sources' g_t
NEG_INF = float("-inf")
EOS_ATTENTION = ("generate", "renormalise")  # where the attention on an uncopyable token goes (module docstring)
DEFAULT_EOS_ATTENTION = "renormalise"  # also what options saved before the choice existed were trained with


class GenerationSwitch(nn.Module):
    """p_gen of See eq 8, from the context vector, the decoder state and the decoder input.

    Args:
        input_dims: sizes of the tensors concatenated as the switch's input (e.g. [context, state, input]).
    """

    def __init__(self, input_dims: List[int]):
        super().__init__()
        self.proj = TorchLinear(sum(input_dims), 1)  # [w_h*; w_s; w_x], b_ptr

    def logit(self, *inputs: Tensor) -> Tensor:
        """inputs: ... x d_k each -> the logit l of p_gen = sigmoid(l): ... x 1."""
        return self.proj(torch.cat(inputs, dim=-1))  # See eq 8, before the sigmoid

    def forward(self, *inputs: Tensor) -> Tensor:
        """inputs: ... x d_k each -> p_gen: ... x 1, in (0, 1), float32 for half inputs."""
        # Half-precision fix: the sigmoid runs in float32.  In float16 sigmoid(l) rounds to exactly 1 from l ~ 7.6
        # (bfloat16: ~5.5), so 1 - p_gen, the whole copy side of a multi-source pointer, would be 0.
        logit = self.logit(*inputs)  # ... x 1
        return torch.sigmoid(logit.to(mixture_dtype(logit.dtype)))  # See eq 8


def safe_log(x: Tensor) -> Tensor:
    """log x for x >= 0, exactly -inf where x == 0, with a zero (not NaN) gradient there."""
    positive = x > 0
    return torch.where(positive, torch.log(torch.where(positive, x, torch.ones_like(x))), NEG_INF)


def safe_logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(exp a + exp b), -inf where both are -inf, with zero (not NaN) gradients there."""
    both = torch.isneginf(a) & torch.isneginf(b)
    result = torch.logaddexp(a.masked_fill(both, 0.0), b.masked_fill(both, 0.0))
    return result.masked_fill(both, NEG_INF)


def mixture_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half inputs, else the input's."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def first_occurrences(tokens: Tensor) -> Tuple[Tensor, Tensor]:
    """For each position j of each row of ``tokens`` (B x S): the position of the first occurrence of its token
    in the row (``group``, B x S) and whether j is that first occurrence (``first``, B x S bool).  A stable sort
    per row, O(S log S): no B x S x S comparison and nothing of the vocabulary's size."""
    src_len = tokens.size(1)
    ordered, order = tokens.sort(dim=1, stable=True)  # B x S: equal tokens adjacent, in source order
    starts = torch.ones_like(ordered, dtype=torch.bool)  # B x S: a run of equal tokens starts here
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    positions = torch.arange(src_len, device=tokens.device).expand_as(ordered)  # B x S
    run_start = torch.where(starts, positions, 0).cummax(dim=1).values  # B x S: sorted index of the run start
    group = torch.empty_like(order).scatter_(1, order, order.gather(1, run_start))  # B x S
    return group, group == positions


class CopyMixture(nn.Module):
    """See eq 9 over the extended vocabulary, in log space.

    Args:
        num_regular: number of words that P_vocab covers (the logits' last dimension).
        ext_size: size of the extended vocabulary (regular words + OOV markers).
        uncopyable: a token id the copy side never produces (``</s>``: see the module docstring), or None.
        eos_attention: where the attention on ``uncopyable`` goes: "generate" (to P_vocab, a sentinel) or
            "renormalise" (over the other positions); see the module docstring.

    Every method takes ``zero``, the value given to log P(w) where P(w) = 0 exactly (default -inf, what beam
    search needs; a finite floor keeps a loss finite); every other value is exact.
    """

    def __init__(self, num_regular: int, ext_size: int, uncopyable: Optional[int] = None,
                 eos_attention: str = DEFAULT_EOS_ATTENTION):
        super().__init__()
        if eos_attention not in EOS_ATTENTION:
            raise ValueError(f"eos_attention must be one of {EOS_ATTENTION}, not {eos_attention!r}")
        self.num_regular = num_regular
        self.ext_size = ext_size
        self.uncopyable = uncopyable
        self.sentinel = eos_attention == "generate"
        self._occurrences = None  # (tokens, its version, first_occurrences(tokens)): beam search reuses them
        self._operands = None  # (tokens, its version, source_operands(tokens)): likewise

    # ------------------------------------------------------------------ See eq 9 from the switch logit
    def log_full(self, logits: Tensor, attn: Tensor, switch_logit: Tensor, src_tokens: Tensor,
                 zero: float = NEG_INF) -> Tensor:
        """log P(w) for every w of the extended vocabulary.

        Args:
            logits: B x T x V_reg, the scores whose softmax is P_vocab.
            attn: B x T x S, the attention a^t.
            switch_logit: B x T x 1, l with p_gen = sigmoid(l).
            src_tokens: B x S, source token ids (extended vocabulary; padding gets zero attention).
        Returns:
            B x T x V_ext log-probabilities (logsumexp of each row is 0; ``zero`` where P(w) = 0).
        """
        if zero == NEG_INF and not torch.is_grad_enabled():
            return self.log_full_no_grad(logits, attn, switch_logit, src_tokens)
        terms = self.switch_terms(attn, switch_logit, src_tokens)
        return self.log_mix(logits, *terms, src_tokens, zero=zero)  # See eq 9

    def log_full_no_grad(self, logits: Tensor, attn: Tensor, switch_logit: Tensor, src_tokens: Tensor) -> Tensor:
        """``log_full`` (zero = -inf) when nothing needs a gradient: the same values, bit for bit, in fewer
        operations.  Each source token gets the copy mass of all its occurrences (instead of the first one
        only), so that every occurrence writes the same value into the distribution."""
        bsz, tgt_len, _ = logits.size()
        dtype = mixture_dtype(attn.dtype)
        operands = self.source_operands(src_tokens)  # B x 1 x S each
        if tgt_len > 1:
            operands = [t.expand(bsz, tgt_len, t.size(2)) for t in operands]  # B x T x S each
        index, group, regular_index, marker, uncopyable = operands
        logit, copy, logits = (t if t.dtype == dtype else t.to(dtype) for t in (switch_logit, attn, logits))
        log_generate, log_copy_scale = F.logsigmoid(logit), F.logsigmoid(-logit)  # B x T x 1 each
        if self.uncopyable is not None and self.sentinel:  # as switch_terms
            held = copy.masked_fill(~uncopyable, 0.0).sum(dim=2, keepdim=True)  # B x T x 1   a_</s>
            log_generate = torch.logaddexp(log_generate, log_copy_scale + held.log())  # B x T x 1
            copy = copy.masked_fill(uncopyable, 0.0)  # B x T x S
        elif self.uncopyable is not None:
            copy = copy.masked_fill(uncopyable, 0.0)  # B x T x S
            copyable = copy.sum(dim=2, keepdim=True)  # B x T x 1
            nothing = copyable.eq(0)  # B x T x 1
            log_generate = log_generate.masked_fill(nothing, 0.0)
            log_copy_scale = (log_copy_scale - copyable.log()).masked_fill(nothing, 0.0)
        log_vocab = logits - (torch.logsumexp(logits, dim=-1, keepdim=True) - log_generate)  # B x T x V_reg
        mass = torch.zeros_like(copy).scatter_add_(2, group, copy).gather(2, group)  # B x T x S
        log_copy = mass.log_() + log_copy_scale  # B x T x S
        generated = log_vocab.gather(2, regular_index).masked_fill_(marker, NEG_INF)  # B x T x S
        combined = torch.logaddexp(generated, log_copy)  # B x T x S   (See eq 9)
        return F.pad(log_vocab, (0, self.ext_size - self.num_regular), value=NEG_INF).scatter_(2, index, combined)

    def source_operands(self, tokens: Tensor) -> Tuple[Tensor, ...]:
        """What ``log_full_no_grad`` reads of the source ``tokens`` (B x S), each B x 1 x S: the ids, the
        position of each id's first occurrence, the ids clamped to the regular words, which are markers, and
        which are uncopyable; kept while the same, unmodified tensor comes back (as ``first_occurrences``)."""
        kept = self._operands
        if kept is not None and kept[0] is tokens and kept[1] == tokens._version:
            return kept[2]
        group, _ = self.first_occurrences(tokens)  # B x S
        uncopyable = tokens.eq(self.uncopyable) if self.uncopyable is not None else torch.zeros_like(tokens).bool()
        result = tuple(t.unsqueeze(1) for t in (tokens, group, tokens.clamp(max=self.num_regular - 1),
                                                tokens >= self.num_regular, uncopyable))
        self._operands = (tokens, tokens._version, result)
        return result

    def log_at(self, logits: Tensor, attn: Tensor, switch_logit: Tensor, src_tokens: Tensor, words: Tensor,
               zero: float = NEG_INF) -> Tensor:
        """log P(w) at ``words`` (B x T) only; same arguments as ``log_full``.  Returns B x T."""
        terms = self.switch_terms(attn, switch_logit, src_tokens)
        return self.log_mix_at(logits, *terms, src_tokens, words, zero=zero)  # See eq 9

    def switch_terms(self, attn: Tensor, switch_logit: Tensor, src_tokens: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """See eq 9's weights in log space: (log p_gen, the copy weights, log of their scale), the copy side being
        exp(scale) * copy.  Without an uncopyable token: (logsigmoid(l), a^t, logsigmoid(-l)); with one, a^t is
        zero at its positions, and its attention either joins p_gen (the sentinel) or is spread over the others by
        the scale; rows with nothing copyable generate only.  Shapes: B x T x 1, B x T x S, B x T x 1."""
        dtype = mixture_dtype(attn.dtype)
        logit, copy = switch_logit.to(dtype), attn.to(dtype)  # B x T x 1, B x T x S
        log_generate, log_copy_scale = F.logsigmoid(logit), F.logsigmoid(-logit)  # log p_gen, log(1 - p_gen)
        if self.uncopyable is None:
            return log_generate, copy, log_copy_scale
        uncopyable = src_tokens.eq(self.uncopyable).unsqueeze(1)  # B x 1 x S
        if self.sentinel:
            held = copy.masked_fill(~uncopyable, 0.0).sum(dim=2, keepdim=True)  # B x T x 1   a_</s>
            log_generate = torch.logaddexp(log_generate, log_copy_scale + safe_log(held))  # p_gen + (1-p_gen) a_</s>
            return log_generate, copy.masked_fill(uncopyable, 0.0), log_copy_scale
        copy = copy.masked_fill(uncopyable, 0.0)  # B x T x S
        copyable = copy.sum(dim=2, keepdim=True)  # B x T x 1   sum_{j: w_j != </s>} a_j
        nothing = copyable.eq(0)  # B x T x 1   (an empty source: generate only)
        log_generate = log_generate.masked_fill(nothing, 0.0)  # B x T x 1
        log_copy_scale = (log_copy_scale - safe_log(copyable)).masked_fill(nothing, 0.0)  # B x T x 1
        return log_generate, copy, log_copy_scale

    # ------------------------------------------------------------------ general weights
    def log_mix(self, logits: Tensor, log_generate: Tensor, copy: Tensor, log_copy_scale: Optional[Tensor],
                tokens: Tensor, zero: float = NEG_INF) -> Tensor:
        """log P(w), P(w) = generate P_vocab(w) + scale sum_{j: tokens_j = w} copy_j, for every w of the extended
        vocabulary.

        Args:
            logits: B x T x V_reg; log_generate: B x T x 1, the log-weight of P_vocab;
            copy: B x T x S', the copy mass of each source position (non-negative);
            log_copy_scale: B x T x 1, log of a factor of all the copy masses (None: 0);
            tokens: B x S', the ids at those positions (generate + scale copy.sum(-1) = 1 gives a distribution).
        Returns:
            B x T x V_ext, ``zero`` where P(w) = 0.

        Only the words in ``tokens`` need the log-sum-exp: every other word is log generate + log P_vocab (or
        ``zero`` for a marker).  The copy mass of each distinct token is summed at its first position
        (``first_occurrences``), combined there, and written into the distribution from that position only, so
        that its gradient is counted once.
        """
        bsz, tgt_len, _ = logits.size()
        dtype = mixture_dtype(copy.dtype)
        logits = logits.to(dtype)  # B x T x V_reg
        normaliser = torch.logsumexp(logits, dim=-1, keepdim=True) - log_generate.to(dtype)  # B x T x 1
        log_vocab = logits - normaliser  # B x T x V_reg   log p_gen + log P_vocab (one pass, not two)
        group, first = self.first_occurrences(tokens)  # B x S', B x S'
        index = tokens.unsqueeze(1).expand(bsz, tgt_len, tokens.size(1))  # B x T x S'
        group = group.unsqueeze(1).expand_as(index)  # B x T x S'
        mass = torch.zeros_like(copy, dtype=dtype).scatter_add(2, group, copy.to(dtype))  # B x T x S'
        log_copy = safe_log(mass)  # B x T x S'   log sum_{j: x_j = x_i} copy_j at each first position i
        if log_copy_scale is not None:
            log_copy = log_copy + log_copy_scale.to(dtype)
        combined = safe_logaddexp(self.gather_regular(log_vocab, index), log_copy)  # B x T x S'   (See eq 9)
        combined = combined.masked_fill(torch.isneginf(combined), zero)
        # Later occurrences write the same value, without gradient (scatter_ with repeated ids is fine then).
        combined = torch.where(first.unsqueeze(1), combined, combined.gather(2, group).detach())  # B x T x S'
        markers = log_vocab.new_full((bsz, tgt_len, self.ext_size - self.num_regular), zero)  # B x T x M
        return torch.cat([log_vocab, markers], dim=2).scatter_(2, index, combined)  # B x T x V_ext

    def log_mix_at(self, logits: Tensor, log_generate: Tensor, copy: Tensor, log_copy_scale: Optional[Tensor],
                   tokens: Tensor, words: Tensor, zero: float = NEG_INF) -> Tensor:
        """``log_mix`` at ``words`` (B x T) only; same arguments.  Returns B x T."""
        dtype = mixture_dtype(copy.dtype)
        log_vocab = F.log_softmax(logits, dim=-1, dtype=dtype)  # B x T x V_reg
        log_vocab = self.gather_regular(log_vocab, words.unsqueeze(2)).squeeze(2) + log_generate.squeeze(2).to(dtype)
        log_copy = safe_log(self.copy_at(copy.to(dtype), tokens, words))  # B x T
        if log_copy_scale is not None:
            log_copy = log_copy + log_copy_scale.squeeze(2).to(dtype)
        result = safe_logaddexp(log_vocab, log_copy)  # B x T   (See eq 9)
        return result.masked_fill(torch.isneginf(result), zero)

    def mix(self, logits: Tensor, generate: Tensor, copy: Tensor, tokens: Tensor) -> Tensor:
        """P(w) = generate P_vocab(w) + sum_{j: tokens_j = w} copy_j with the weights as probabilities (generate:
        B x T x 1; see ``merge_copy_sources``).  B x T x V_ext probabilities."""
        return self.log_mix(logits, torch.log(generate.clamp(min=TINY)), copy, None, tokens).exp()

    def mix_at(self, logits: Tensor, generate: Tensor, copy: Tensor, tokens: Tensor, words: Tensor) -> Tensor:
        """``mix`` at ``words`` (B x T) only.  Returns B x T probabilities."""
        return self.log_mix_at(logits, torch.log(generate.clamp(min=TINY)), copy, None, tokens, words).exp()

    def gather_regular(self, log_vocab: Tensor, index: Tensor) -> Tensor:
        """log_vocab (B x T x V_reg) at ``index`` (B x T x K), -inf for markers (no P_vocab).  B x T x K."""
        regular = index < self.num_regular  # B x T x K
        gathered = log_vocab.gather(2, index.clamp(max=self.num_regular - 1))  # B x T x K
        return gathered.masked_fill(~regular, NEG_INF)

    def first_occurrences(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        """``first_occurrences(tokens)``, kept while the same, unmodified tensor comes back: beam search passes
        the encoder's source tokens at every step (modules/beam_reorder.py keeps them while the hypotheses stay
        within their documents)."""
        kept = self._occurrences
        if kept is not None and kept[0] is tokens and kept[1] == tokens._version:
            return kept[2]
        result = first_occurrences(tokens)
        self._occurrences = (tokens, tokens._version, result)
        return result

    @staticmethod
    def copy_at(weights: Tensor, tokens: Tensor, words: Tensor) -> Tensor:
        """sum_{j: tokens_j = w} weights_j at ``words`` (B x T); weights B x T x S', tokens B x S'.  B x T."""
        same = tokens.unsqueeze(1) == words.unsqueeze(2)  # B x T x S'
        return (weights * same).sum(dim=2)  # B x T


def add_eos_attention_arg(parser) -> None:
    """A model's ``--eos-attention`` option; ``eos_attention_of`` reads it."""
    parser.add_argument("--eos-attention", choices=EOS_ATTENTION, default=DEFAULT_EOS_ATTENTION,
                        help="where the copy side puts the attention on the source's </s>, which it cannot copy: "
                             "renormalise (the default) spreads it over the other positions; generate adds it to "
                             "p_gen's share, as a pointer sentinel (Merity et al. 2017), so that a word is copied "
                             "only from the attention on it (docs/results/eos_attention.md: fewer doubled first "
                             "words, inconclusive, and ROUGE lower in one seed of two)")


def eos_attention_of(args) -> str:
    """``--eos-attention`` of a model's options; "renormalise" for options saved before it existed, which is
    what those models were trained with."""
    return getattr(args, "eos_attention", None) or DEFAULT_EOS_ATTENTION


def merge_copy_sources(weights: Tensor, p_gen: Tensor, attn: Tensor, src_tokens: Tensor,
                       uncopyable: Optional[int] = None, eos_attention: str = DEFAULT_EOS_ATTENTION
                       ) -> Tuple[Tensor, Tensor, Tensor]:
    """Several copy sources k = 1..M, each a pointer-generator over its own tokens, mixed by ``weights``:
        P(w) = sum_k weights_k [p_gen_k P_vocab(w) + (1 - p_gen_k) sum_{i: x_ki = w} a_ki],
    written as ``CopyMixture.mix``'s (generate, copy, tokens).

    Args:
        weights: B x T x M (each row sums to 1); p_gen: B x T x M; attn: B x T x M x S (rows sum to 1);
        src_tokens: B x M x S;
        uncopyable: a token id never copied (``</s>``, as ``CopyMixture(uncopyable=...)``);
        eos_attention: where each source's attention on it goes: "generate" adds (1 - p_gen_k) a_k</s> to
            p_gen_k (the sentinel), "renormalise" spreads it over the source's other positions; a source with
            nothing else to copy generates only (its p_gen_k counts as 1) either way.
    Returns:
        generate B x T x 1 (sum_k weights_k p_gen_k), copy B x T x (M*S), tokens B x (M*S).
    """
    bsz, tgt_len = weights.shape[:2]
    attn = attn.float()  # B x T x M x S
    copy_share = 1.0 - p_gen  # B x T x M   each source's 1 - p_gen_k
    if uncopyable is not None and eos_attention == "generate":
        masked = src_tokens.eq(uncopyable).unsqueeze(1)  # B x 1 x M x S
        held = attn.masked_fill(~masked, 0.0).sum(dim=3)  # B x T x M   a_k</s>
        p_gen = p_gen + copy_share * held  # B x T x M
        attn = attn.masked_fill(masked, 0.0)  # B x T x M x S
    elif uncopyable is not None:
        attn = attn.masked_fill(src_tokens.eq(uncopyable).unsqueeze(1), 0.0)  # B x T x M x S
        copyable = attn.sum(dim=3, keepdim=True)  # B x T x M x 1
        nothing = copyable.eq(0)  # B x T x M x 1   (a source holding only </s>)
        attn = attn / copyable.masked_fill(nothing, 1.0)  # B x T x M x S
        p_gen = p_gen.masked_fill(nothing.squeeze(3), 1.0)  # B x T x M
    generate = (weights * p_gen).sum(dim=2, keepdim=True)  # B x T x 1
    copy = (weights * copy_share).unsqueeze(3) * attn  # B x T x M x S   (zero where nothing is copyable)
    return generate, copy.reshape(bsz, tgt_len, -1), src_tokens.reshape(bsz, -1)

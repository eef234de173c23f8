"""ROUGE on token ids, batched: the reward of self-critical training (criterions/self_critical_rouge.py).

What is scored.  A hypothesis (a sampled or greedy summary) and its reference are rows of token ids of the
target dictionary.  ``</s>`` and padding are not tokens of the summary: they are dropped wherever they are.
Two ids match when they are equal, so a per-document OOV marker ``<oov-K>`` matches exactly the same word of the
same document (summ-prepare numbers a document's OOV words once, for its source and its target).  ``<unk>``
stands for many different words, so it never matches anything, not even another ``<unk>``; it still counts in
the length.

The scores are those of the project's exact ROUGE (scoring/rouge_python.py: ``RougeScorer(stem=False)``) given
the ids as words, with each summary as ONE sentence (no sentence splitting):
  * ROUGE-N: clipped n-gram matches, F1 = P R / (0.5 P + 0.5 R) with P = hits / hypothesis n-grams and
    R = hits / reference n-grams (0 when both are 0);
  * ROUGE-L: with one sentence on each side ROUGE-1.5.5's summary-level union LCS is the plain longest common
    subsequence, so hits = LCS(hypothesis, reference), P = hits / |hypothesis|, R = hits / |reference|.
    (Several sentences would make it the union LCS over sentence pairs, which this module does not compute:
    a sentence-split reward would need rouge_python.)
These equalities are tested on random cases (tests/test_rouge_reward.py); F1 is computed with the same
floating-point operations as rouge_python, so the values are identical, not just close.

Prefix scores.  ``RougeReward.prefix_scores`` gives the score of every prefix of the hypothesis against the
whole reference (the k-th column: the first k counted tokens), at no extra cost: the LCS dynamic programme
passes through every prefix, and a clipped n-gram count grows one hypothesis n-gram at a time (the i-th
n-gram is a hit when its rank among equal earlier n-grams of the hypothesis is within the reference's count).
Sentence-level rewards (Celikyilmaz et al. 2018, r(o_q) = r(o_1..o_q) - r(o_1..o_{q-1})) are differences of
these.

Speed (scripts/bench/reward_speed.py measures it).  Two exact LCS implementations:
  * ``torch``: the LCS table filled one anti-diagonal at a time, every document of the batch at once (cells on
    an anti-diagonal do not depend on each other): N + M steps of a few tensor operations, on any device;
  * ``bits``: the bit-parallel LCS of Allison & Dix (1986) in Hyyro's (2004) form, one Python integer as the
    bit vector over the reference: one addition, one subtraction and three logical operations per hypothesis
    token, whatever the reference length (CPU only).
``auto`` (the default) takes ``bits`` for CPU tensors and ``torch`` on a GPU.  ROUGE-N is always torch: a
fixed number of batched comparisons of all hypothesis n-grams with all reference n-grams.
"""
import re
from typing import Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

LCS_BACKENDS = ("auto", "torch", "bits")
_TYPE = re.compile(r"rouge([1-9]|L)\Z")

# Values given to positions that must never match.  Each side has its own, so that neither padding nor <unk>
# of the hypothesis can equal padding or <unk> of the reference.
HYP_PAD, REF_PAD, HYP_UNK, REF_UNK = -1, -2, -3, -4


def parse_reward(spec: str) -> Dict[str, float]:
    """``"rougeL"`` -> {"rougeL": 1.0}; ``"rouge1=0.3,rouge2=0.3,rougeL=0.4"`` -> a weighted mix of F1s.

    Types are rouge1..rouge9 and rougeL; a weight must be a positive number.  Raises ValueError naming the
    option otherwise."""
    weights: Dict[str, float] = {}
    for part in spec.replace(" ", "").split(","):
        name, _, weight = part.partition("=")
        if not _TYPE.match(name):
            raise ValueError(f"--rl-reward {spec!r}: unknown ROUGE type {name!r} (rouge1..rouge9, rougeL; a mix "
                             f"is written rouge1=0.5,rougeL=0.5)")
        try:
            value = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"--rl-reward {spec!r}: weight {weight!r} of {name} is not a number") from None
        if not value > 0 or value == float("inf"):
            raise ValueError(f"--rl-reward {spec!r}: weight of {name} must be a positive number, not {weight}")
        if name in weights:
            raise ValueError(f"--rl-reward {spec!r}: {name} is given twice")
        weights[name] = value
    return weights


def counted_tokens(tokens: Tensor, pad: int, eos: int, unk: int, pad_value: int, unk_value: int
                   ) -> Tuple[Tensor, Tensor]:
    """Drop ``</s>`` and padding, keeping the order; ``<unk>`` becomes ``unk_value`` (never matches).

    Returns the counted tokens moved to the left, ``pad_value`` after them (B x T), and their number (B)."""
    counted = tokens.ne(pad) & tokens.ne(eos)  # B x T
    positions = torch.arange(tokens.size(1), device=tokens.device)  # T
    order = torch.argsort((~counted).long() * tokens.size(1) + positions, dim=1)  # B x T: counted ones first
    lengths = counted.sum(dim=1)  # B
    left = tokens.gather(1, order)  # B x T
    left = left.masked_fill(left.eq(unk), unk_value)
    left = left.masked_fill(positions.unsqueeze(0) >= lengths.unsqueeze(1), pad_value)  # B x T
    width = int(lengths.max()) if lengths.numel() else 0
    return left[:, :width], lengths


def f1(hits: Tensor, hyp_count: Tensor, ref_count: Tensor) -> Tensor:
    """ROUGE-1.5.5's F with alpha 0.5, as rouge_python computes it (same operations, float64)."""
    hits, hyp_count, ref_count = hits.double(), hyp_count.double(), ref_count.double()
    recall = torch.where(ref_count > 0, hits / ref_count.clamp(min=1), torch.zeros_like(hits))
    precision = torch.where(hyp_count > 0, hits / hyp_count.clamp(min=1), torch.zeros_like(hits))
    denominator = 0.5 * precision + 0.5 * recall
    return torch.where(precision + recall > 0, precision * recall / denominator.clamp(min=1e-300),
                       torch.zeros_like(hits))


def lcs_prefixes_torch(hyp: Tensor, ref: Tensor) -> Tensor:
    """LCS(hyp[:k], ref) for k = 0..N, every row at once: B x N and B x M -> B x (N+1).

    The table c[i][j] = LCS(hyp[:i], ref[:j]) is filled one anti-diagonal d = i + j at a time; a diagonal is
    held as a vector over i.  c[i][j] = c[i-1][j-1] + 1 on a match, else max(c[i-1][j], c[i][j-1]); cells
    off the table (j < 0 or j > M) hold 0 and are never read by cells on it.  Values that must not match
    (padding, <unk>) simply never do, so the whole padded reference can be used."""
    bsz, n = hyp.shape
    m = ref.size(1)
    out = hyp.new_zeros(bsz, n + 1, dtype=torch.int32)  # B x (N+1)
    if n == 0 or m == 0:
        return out
    i = torch.arange(n + 1, device=hyp.device)  # N+1
    d = torch.arange(n + m + 1, device=hyp.device).unsqueeze(1)  # D x 1: every anti-diagonal
    j = d - i  # D x (N+1): the column of each cell of each diagonal
    on_table = (i >= 1) & (j >= 1) & (j <= m)  # D x (N+1)
    hyp_i = torch.cat([hyp.new_full((bsz, 1), HYP_PAD), hyp], dim=1)  # B x (N+1): hyp_i[:, i] = hyp[i-1]
    ref_j = ref[:, (j - 1).clamp(0, m - 1)]  # B x D x (N+1): ref[j-1] for every cell
    match = hyp_i.unsqueeze(1).eq(ref_j) & on_table  # B x D x (N+1)
    on_table = on_table.int()
    diag2 = out.new_zeros(bsz, n + 1)  # diagonal d-2
    diag1 = out.new_zeros(bsz, n + 1)  # diagonal d-1
    for k in range(2, n + m + 1):
        up_left = F.pad(diag2[:, :-1], (1, 0))  # c[i-1][j-1]
        up = F.pad(diag1[:, :-1], (1, 0))  # c[i-1][j]
        cell = torch.where(match[:, k], up_left + 1, torch.maximum(up, diag1))  # c[i][j] (diag1: c[i][j-1])
        cell.mul_(on_table[k])  # off-table cells hold 0
        row = k - m  # the cell (row, M) of this diagonal is LCS(hyp[:row], ref)
        if 1 <= row <= n:
            out[:, row] = cell[:, row]
        diag2, diag1 = diag1, cell
    return out


def lcs_prefixes_bits(hyp: List[List[int]], ref: List[List[int]]) -> List[List[int]]:
    """LCS(hyp[:k], ref) for k = 0..len(hyp), per document, by the bit-parallel LCS (Allison & Dix 1986;
    Hyyro 2004).  V has one bit per reference position; after each hypothesis token c,
        U = V & match[c];  V = (V + U) | (V - U)   (V - U = V & ~match[c])
    and the LCS so far is the number of zero bits of V among the M low bits.  Negative ids never match."""
    out = []
    for h, r in zip(hyp, ref):
        match: Dict[int, int] = {}
        for j, token in enumerate(r):
            if token >= 0:
                match[token] = match.get(token, 0) | (1 << j)
        full = (1 << len(r)) - 1
        v, prefix, m = full, [0], len(r)
        for token in h:
            u = v & match.get(token, 0)
            v = ((v + u) | (v - u)) & full
            prefix.append(m - v.bit_count())
        out.append(prefix)
    return out


def ngram_prefix_hits(hyp: Tensor, ref: Tensor, n: int) -> Tensor:
    """Clipped n-gram hits of every prefix of hyp: B x N and B x M -> B x (N+1), column k for hyp[:k].

    The i-th hypothesis n-gram is a hit when it is the r-th occurrence of its n-gram in the hypothesis and the
    reference has at least r occurrences; summed over i this is sum_g min(count_hyp(g), count_ref(g))."""
    bsz, length = hyp.shape
    hits = hyp.new_zeros(bsz, length + 1, dtype=torch.int32)
    grams_h, grams_r = length - n + 1, ref.size(1) - n + 1
    if grams_h <= 0 or grams_r <= 0:
        return hits
    same_hr = torch.ones(bsz, grams_h, grams_r, dtype=torch.bool, device=hyp.device)  # B x Nh x Nr
    same_hh = torch.ones(bsz, grams_h, grams_h, dtype=torch.bool, device=hyp.device)  # B x Nh x Nh
    for k in range(n):
        h = hyp[:, k:k + grams_h]  # B x Nh: the k-th token of each hypothesis n-gram
        same_hr &= h.unsqueeze(2).eq(ref[:, k:k + grams_r].unsqueeze(1))
        same_hh &= h.unsqueeze(2).eq(h.unsqueeze(1))
    in_ref = same_hr.sum(dim=2)  # B x Nh: reference occurrences of each hypothesis n-gram
    rank = torch.tril(same_hh.int()).sum(dim=2)  # B x Nh: occurrences up to and including this one
    hit = (rank <= in_ref).int()  # B x Nh
    hits[:, n:] = hit.cumsum(dim=1)  # the prefix of k tokens holds the first k - n + 1 n-grams
    return hits


class RougeReward:
    """ROUGE F1 (or a weighted mix) of hypotheses against references, on token ids.

    Args:
        weights: ROUGE type -> weight, e.g. {"rougeL": 1.0} (see ``parse_reward``); the reward is
            sum_type weight * F1_type.
        pad, eos, unk: the target dictionary's special ids.
        lcs_backend: "auto", "torch" or "bits" (see the module docstring).
    """

    def __init__(self, weights: Dict[str, float], pad: int, eos: int, unk: int, lcs_backend: str = "auto"):
        if lcs_backend not in LCS_BACKENDS:
            raise ValueError(f"lcs_backend must be one of {LCS_BACKENDS}, not {lcs_backend!r}")
        if not weights:
            raise ValueError("a ROUGE reward needs at least one ROUGE type")
        self.weights = dict(weights)
        self.pad, self.eos, self.unk = pad, eos, unk
        self.lcs_backend = lcs_backend

    def __call__(self, hyp: Tensor, ref: Tensor) -> Tensor:
        """The reward of each hypothesis: B x T and B x R ids -> B (float64)."""
        scores, lengths = self.prefix_scores(hyp, ref)
        return scores.gather(1, lengths.unsqueeze(1)).squeeze(1)

    def prefix_scores(self, hyp: Tensor, ref: Tensor) -> Tuple[Tensor, Tensor]:
        """The reward of every prefix of each hypothesis: B x (N+1) float64, column k for the first k counted
        tokens (N = the longest hypothesis), and the number of counted tokens of each hypothesis (B)."""
        if hyp.size(0) != ref.size(0):
            raise ValueError(f"{hyp.size(0)} hypotheses but {ref.size(0)} references")
        hyp, hyp_len = counted_tokens(hyp, self.pad, self.eos, self.unk, HYP_PAD, HYP_UNK)  # B x N, B
        ref, ref_len = counted_tokens(ref, self.pad, self.eos, self.unk, REF_PAD, REF_UNK)  # B x M, B
        k = torch.arange(hyp.size(1) + 1, device=hyp.device).unsqueeze(0)  # 1 x (N+1): prefix lengths
        prefix_len = torch.minimum(k, hyp_len.unsqueeze(1))  # B x (N+1): tokens in each prefix
        total = torch.zeros(hyp.size(0), hyp.size(1) + 1, dtype=torch.float64, device=hyp.device)
        for rouge_type, weight in self.weights.items():
            if rouge_type == "rougeL":
                hits = self.lcs_prefixes(hyp, ref)
                score = f1(hits, prefix_len, ref_len.unsqueeze(1))
            else:
                n = int(rouge_type[5:])
                hits = ngram_prefix_hits(hyp, ref, n)
                score = f1(hits, (prefix_len - n + 1).clamp(min=0), (ref_len - n + 1).clamp(min=0).unsqueeze(1))
            total += weight * score
        return total, hyp_len

    def lcs_prefixes(self, hyp: Tensor, ref: Tensor) -> Tensor:
        backend = self.lcs_backend
        if backend == "auto":
            backend = "bits" if hyp.device.type == "cpu" else "torch"
        if backend == "torch":
            return lcs_prefixes_torch(hyp, ref)
        rows = lcs_prefixes_bits(hyp.tolist(), ref.tolist())
        return torch.tensor(rows, dtype=torch.int32).reshape(hyp.size(0), hyp.size(1) + 1)

"""N-gram blocking during beam search: no hypothesis may produce an n-gram it already contains.

Paulus, Xiong & Socher (2017), section 2.5: "during beam search, we force our decoder to never output the same
trigram more than once in the same summary", by giving such a continuation probability 0 (log-probability
-inf) at the step where it would be produced, before the beam is chosen.  OpenNMT-py calls it
``-block_ngram_repeat N`` with ``-ignore_when_blocking``.

At a step where hypothesis r has generated y_1 .. y_L, the continuation w is banned when some earlier n-gram
equals the candidate (y_{L-n+2}, ..., y_L, w):

    banned_r = { y_{j+n-1} : 1 <= j <= L-n+1,  (y_j, ..., y_{j+n-2}) = (y_{L-n+2}, ..., y_L) }

except when that n-gram contains an *ignored* token: ``--block-ignore`` tokens (punctuation, say), ``<unk>``,
which stands for a different unknown word each time, and the sentence separators (``<q>``), which end sentences
rather than say anything, so that a summary may have as many sentences as it needs.  A per-document OOV marker (``<oov-K>``) is the same id for
every occurrence of the same source word, so comparing ids compares words, and a repeated copied word is
blocked like any other.

All rows (batch x beam) and all earlier positions are handled by a few tensor operations per step (an unfold
into n-grams, one comparison, one ``scatter_reduce``): no Python loop over hypotheses or positions, no
host-device synchronisation, the same code on a CPU and a GPU.  ``banned_reference`` is the plain
double-loop definition, kept for the tests.

Immediate repeats (``--block-immediate-repeat 1``): no token directly after itself, banned_r = { y_L } unless y_L
is ignored.  This is the one repeat that trigram blocking lets through at its first occurrence ("w w").  A
pointer-generator makes it by copying: after it copies w from one position of the source, coverage (See eq 10)
marks that position only, and its attention moves to another occurrence of w in the source and copies w again
(docs/results/immediate_repeats_lcsts.md measures it).
"""
import math
from typing import Iterable, List, Optional, Set

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_plugins.text.tokenization import SENTENCE_SEPARATORS


class NGramBlocker(nn.Module):
    """Sets the log-probability of every continuation that would repeat an n-gram to -inf.

    A drop-in for fairseq's ``NGramRepeatBlock``: ``SequenceGenerator`` calls it as
    ``lprobs = blocker(tokens, lprobs, bsz, beam_size, step)`` right before choosing the beam.

    Args:
        n: the n-gram size (3 for Paulus et al.); n = 1 bans every token already generated; 0: no n-gram
            blocking (``immediate`` alone).
        ignore: token ids never blocked: an n-gram containing one of them may repeat (``<unk>`` belongs here).
        immediate: also ban each hypothesis's last token, so that no token follows itself.
    """

    def __init__(self, n: int, ignore: Iterable[int] = (), immediate: bool = False):
        super().__init__()
        if n < 0 or (n == 0 and not immediate):
            raise ValueError(f"n-gram blocking needs n >= 1, not {n}")
        self.n = n
        self.immediate = immediate
        self.register_buffer("ignore", torch.tensor(sorted(set(ignore)), dtype=torch.long), persistent=False)

    def forward(self, tokens: Tensor, lprobs: Tensor, bsz: int, beam_size: int, step: int) -> Tensor:
        """tokens: R x (max_len + 2), the beam's token buffer (column 0 is the start symbol, columns 1..step the
        tokens generated so far); lprobs: R x V, this step's log-probabilities; R = bsz * beam_size.
        Returns lprobs with the banned continuations at -inf (in place)."""
        generated = tokens[:, 1 : step + 1]  # R x L
        return self.block(generated, lprobs)

    def block(self, generated: Tensor, lprobs: Tensor) -> Tensor:
        """generated: R x L tokens so far (no start symbol); lprobs: R x V.  Bans in place; returns lprobs."""
        if self.immediate and generated.size(1) > 0:
            self.block_last(generated[:, -1:], lprobs)
        n, length = self.n, generated.size(1)
        if n == 0 or length < n:
            return lprobs  # no n-gram blocking, or no complete earlier n-gram yet
        ngrams = generated.unfold(1, n, 1)  # R x W x n, W = L - n + 1 earlier n-grams
        suffix = generated[:, length - n + 1 :]  # R x (n-1): the candidate n-gram's first n-1 tokens
        match = (ngrams[:, :, : n - 1] == suffix.unsqueeze(1)).all(dim=2)  # R x W
        if self.ignore.numel() > 0:
            ignored = torch.isin(ngrams, self.ignore.to(ngrams.device)).any(dim=2)  # R x W
            match &= ~ignored
        # min(lprob, -inf) where an earlier n-gram matches, min(lprob, +inf) = lprob elsewhere: duplicates of the
        # same banned word are harmless, and nothing is read back to the host.
        ban = torch.full(match.shape, math.inf, dtype=lprobs.dtype, device=lprobs.device)  # R x W
        ban.masked_fill_(match, -math.inf)
        return lprobs.scatter_reduce_(1, ngrams[:, :, n - 1], ban, reduce="amin", include_self=True)

    def block_last(self, last: Tensor, lprobs: Tensor) -> Tensor:
        """last: R x 1, each hypothesis's last token; lprobs: R x V.  Bans it in place (unless ignored)."""
        ban = torch.full(last.shape, -math.inf, dtype=lprobs.dtype, device=lprobs.device)  # R x 1
        if self.ignore.numel() > 0:
            ban.masked_fill_(torch.isin(last, self.ignore.to(last.device)), math.inf)
        return lprobs.scatter_reduce_(1, last, ban, reduce="amin", include_self=True)


def banned_reference(generated: List[int], n: int, ignore: Set[int] = frozenset(),
                     immediate: bool = False) -> Set[int]:
    """The banned continuations of one hypothesis, by the definition (for tests)."""
    banned = {generated[-1]} - set(ignore) if immediate and generated else set()
    if n == 0:
        return banned
    suffix = generated[len(generated) - n + 1 :] if n > 1 else []
    for j in range(len(generated) - n + 1):
        ngram = generated[j : j + n]
        if ngram[: n - 1] == suffix and not (set(ngram) & ignore):
            banned.add(ngram[-1])
    return banned


def ignore_ids(dictionary, tokens: Optional[str]) -> List[int]:
    """Dictionary ids of ``--block-ignore`` tokens (space-separated, in the raw text's units), plus ``<unk>`` and
    the sentence separators the dictionary has.

    A token is looked up as given and, for sentencepiece dictionaries, also with the word-start mark
    (``.`` -> ``▁.``), so the user writes punctuation as it appears in text.  A token the dictionary does not
    have can never be generated as such; it raises ValueError naming it, since it is most likely a typo."""
    ids = {dictionary.unk()} | {dictionary.index(sep) for sep in SENTENCE_SEPARATORS if sep in dictionary.indices}
    for token in (tokens or "").split():
        found = [dictionary.index(t) for t in (token, "\u2581" + token) if t in dictionary.indices]
        if not found:
            raise ValueError(f"--block-ignore: token {token!r} is not in the target dictionary "
                             f"({len(dictionary)} entries), so it can never be generated")
        ids.update(found)
    return sorted(ids)

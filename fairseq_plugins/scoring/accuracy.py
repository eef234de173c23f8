"""Word accuracy of a generated summary (Shi et al. 2018, Shi eq 17):

    acc = (1/N) sum_i |w_pred^i ∩ w_target^i| / |w_target^i|

The intersection is taken over multisets (a word counts as often as it occurs in both, as ROUGE-1 recall
does), on the model's own units (words, characters or pieces); ``<unk>`` never matches.  Summaries with an
empty target are left out of the mean.
"""
from collections import Counter
from typing import Optional, Sequence


def summary_accuracy(predicted: Sequence, target: Sequence, unk=None) -> Optional[float]:
    """|pred ∩ target| / |target| for one summary, or None when the target is empty."""
    if not target:
        return None
    overlap = Counter(predicted) & Counter(target)
    if unk is not None:
        overlap.pop(unk, None)
    return sum(overlap.values()) / len(target)

"""Whether a model's decoding lengths fit its data: the generation bounds against the lengths of the training
targets that ``summ-prepare`` records in prep.json (``target_lengths``: percentiles in tokens, as the model
learned them).

A config's bounds are tuned to its own corpus; on another corpus they can contradict the data.  Two rules, each
a warning that names the figures (``generate.sh`` and the hub say it once; the bounds are left as given, since
the user or the config chose them):

* ``--min-len`` above the 25th percentile: the search may not stop where a quarter of the references do, so
  short summaries are padded out (often by repeating words);
* ``--max-len-b`` below the 99th percentile (with ``--max-len-a 0``): more than 1 % of the summaries the model
  learned are longer than the search may write.

A prep.json of an older ``summ-prepare`` has no ``target_lengths``: nothing to check.
"""
from typing import Dict, List, Optional

LOW_PERCENTILE = "p25"
HIGH_PERCENTILE = "p99"


def length_warnings(target_lengths: Optional[Dict], min_len: int = 1, max_len_a: float = 0,
                    max_len_b: int = 200) -> List[str]:
    """The warnings (possibly none) for decoding with these bounds a model whose training targets have
    ``target_lengths`` (prep.json's record; None: not recorded)."""
    if not target_lengths:
        return []
    low, high, median = target_lengths[LOW_PERCENTILE], target_lengths[HIGH_PERCENTILE], target_lengths["p50"]
    warnings = []
    if min_len > max(low, 1):
        warnings.append(f"--min-len {min_len} is above the length of a quarter of the training summaries "
                        f"(25th percentile {low} tokens, median {median}): the summaries will be longer than "
                        f"many references; a lower --min-len (e.g. --min-len {max(low, 1)}) fits the data")
    if not max_len_a and max_len_b < high:
        warnings.append(f"--max-len-b {max_len_b} is below the length of the longest 1 % of the training summaries "
                        f"(99th percentile {high} tokens, longest {target_lengths['max']}): some summaries will be "
                        f"cut; --max-len-b {high} fits the data")
    return warnings

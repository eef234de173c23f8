"""summ-rouge-significance: is system B's ROUGE really different from system A's?  A paired bootstrap over the
test documents.

    summ-rouge --refs REFS --hyps A.txt --lang zh --per-doc A.tsv     (and the same for B)
    summ-rouge-significance A.tsv B.tsv [--resamples 10000] [--seed 1]

(``python scripts/rouge_significance.py`` is the same command.)

The inputs are summ-rouge's per-document scores (official ROUGE-1.5.5 ``-d``), for the same documents in the
same order.  For each metric (ROUGE-1/2/L F1) the script prints the difference B - A of the mean over documents
(summ-rouge's "F1 mean over documents (exact)"), its 95% percentile interval over resamples of the documents with
replacement (the same resampled documents for both systems: the test is paired), and the share of resamples in
which B does not beat A (Koehn 2004, "Statistical significance tests for machine translation evaluation": the
approximate one-sided p-value of "B is better").  ROUGE-1.5.5's own interval (``-c 95 -r 1000``) is per system
and says nothing about a difference between two systems on the same documents.  Exit status: 0 success,
1 runtime failure, 2 usage or bad input (a malformed table, tables of different lengths, --resamples below 1).
"""
import csv
from pathlib import Path

import numpy as np

from fairseq_plugins.text.textio import UserError

PROG = "summ-rouge-significance"
METRICS = ("rouge-1-f", "rouge-2-f", "rouge-l-f")
CHUNK = 500  # resamples drawn at once


def read_per_doc(path: Path) -> np.ndarray:
    """docs x 3 array of F1 (fractions) from a summ-rouge --per-doc TSV; a malformed line stops with its number."""
    if not Path(path).is_file():
        raise UserError(f"{path}: no such file")
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    if not rows or any(metric not in rows[0] for metric in METRICS):
        raise UserError(f"{path}:1: not a summ-rouge --per-doc table (needs the columns doc, {', '.join(METRICS)})")
    columns = [rows[0].index(metric) for metric in METRICS]
    scores = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            if row[0] != str(number - 2):
                raise ValueError(f"document {row[0]!r} where {number - 2} was expected")
            scores.append([float(row[column]) for column in columns])
        except (IndexError, ValueError) as error:
            raise UserError(f"{path}:{number}: bad per-document line ({error})") from None
    if not scores:
        raise UserError(f"{path}: no documents")
    return np.asarray(scores)  # D x 3


def paired_bootstrap(a: np.ndarray, b: np.ndarray, resamples: int, seed: int):
    """For each column: (mean difference B - A, 2.5th and 97.5th percentiles of the resampled difference, share
    of resamples with difference <= 0).  a, b: D x M per-document scores of the same documents."""
    diff = b - a  # D x M
    rng = np.random.default_rng(seed)
    # In blocks of resamples, so that memory stays bounded on large test sets (CNN/DM: 11,490 documents).
    blocks = [min(CHUNK, resamples - start) for start in range(0, resamples, CHUNK)]
    # each block: k x D document picks, the same for every metric -> k x M mean differences
    resampled = np.concatenate([diff[rng.integers(0, len(diff), size=(size, len(diff)))].mean(axis=1)
                                for size in blocks])  # R x M
    low, high = np.percentile(resampled, [2.5, 97.5], axis=0)
    not_better = (resampled <= 0).mean(axis=0)
    return diff.mean(axis=0), low, high, not_better

#!/usr/bin/env python
"""Paired bootstraps between the systems of compare.py work folders, one folder per seed of the same systems, and
each comparison's verdict over the seeds by the project's rule (lib.verdict), as a markdown section.

    python scripts/experiments/paired_bootstraps.py WORK [WORK ...] --pair B=A [--pair B=A ...]
                                                     [--decode beam ...] [--table] [--out FILE]

For every pair, decoding and folder: official ROUGE-1.5.5's per-document F1 of WORK/outputs/B.DECODE.txt and
A.DECODE.txt against the test references (``summ-rouge --per-doc``, cached in WORK/logs/), B - A in ROUGE points
with its 95 % interval over 10,000 paired resamples of the test documents (fairseq_plugins/scoring/significance.py,
seed 1).  A direction holds only when every folder (two or more) shows it with an interval that excludes zero;
one folder gives "inconclusive (one seed)".  The section says how many intervals it prints.  ``--table`` puts each
WORK/results.md (compare.py's tables) before the section.
"""
import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lib import Experiment, paired_intervals, per_doc_rouge, verdict, work_language  # noqa: E402

RESAMPLES = 10000


def tabulated(exp: Experiment) -> set:
    """SYSTEM.DECODE of every row of WORK/results.json: the systems compare.py's printed table vouches for."""
    results = exp.work / "results.json"
    if not results.is_file():
        exp.fail(f"{results} not found: {exp.work} is not a finished compare.py run")
    rows = json.loads(results.read_text(encoding="utf-8"))["rows"]
    return {f"{row['system']}.{row['decode']}" for row in rows if row.get("decode")}


def per_doc(exp: Experiment, name: str, lang: str) -> Path:
    """WORK/logs/rouge_NAME.per_doc.tsv: official ROUGE-1.5.5 per-document F1 of outputs/NAME.txt, for a system
    and decoding of the folder's table only."""
    hyps = exp.work / "outputs" / f"{name}.txt"
    if name not in tabulated(exp) or not hyps.is_file():
        exp.fail(f"{name}: not a system and decoding of {exp.work}'s table (results.json), or {hyps} is missing")
    return per_doc_rouge(exp, name, lang)


def intervals(exp: Experiment, a: str, b: str, lang: str):
    """[(difference, low, high)] of B - A in ROUGE points for ROUGE-1, -2 and -L."""
    return paired_intervals(per_doc(exp, a, lang), per_doc(exp, b, lang), RESAMPLES)


def section(exps, pairs, decodes, command: str) -> str:
    """The markdown section: one row per pair and decoding, each score's verdict over the folders (seeds)."""
    count = len(pairs) * len(decodes) * len(exps)
    lines = ["## Paired bootstraps", "", f"Written by `{command}`.", "",
             f"B - A in ROUGE points, 95 % interval over {RESAMPLES:,} paired resamples of the test documents, "
             f"per seed ({len(exps)}): {count} intervals of 3 scores each ({3 * count} in all), none corrected for "
             "their number. A direction holds only when every seed, two or more, shows it with an interval that "
             "excludes zero; otherwise inconclusive.", "",
             "| B | A | decoding | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|---|"]
    langs = [work_language(exp.work) for exp in exps]  # each folder's corpus, read once
    for decode in decodes:
        for b, a in pairs:
            runs = [intervals(exp, f"{a}.{decode}", f"{b}.{decode}", lang) for exp, lang in zip(exps, langs)]
            cells = [verdict([run[metric] for run in runs]) for metric in range(3)]
            lines.append(f"| {b} | {a} | {decode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_pair(text: str):
    b, sep, a = text.partition("=")
    if not sep or not a or not b:
        raise argparse.ArgumentTypeError(f"{text!r}: give B=A (two system labels)")
    return b, a


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path, nargs="+", help="compare.py work folders, one per seed")
    parser.add_argument("--pair", type=parse_pair, action="append", required=True, metavar="B=A")
    parser.add_argument("--decode", action="append", help="decoding labels (default: beam)")
    parser.add_argument("--table", action="store_true", help="WORK/results.md first")
    parser.add_argument("--out", type=Path, help="write here as well as to stdout")
    args = parser.parse_args(argv)
    exps = [Experiment("paired_bootstraps", work) for work in args.work]
    command = "python scripts/experiments/paired_bootstraps.py " + " ".join(
        shlex.quote(str(a)) for a in (argv if argv is not None else sys.argv[1:]))
    text = section(exps, args.pair, args.decode or ["beam"], command)
    if args.table:
        tables = [(work / "results.md").read_text(encoding="utf-8").rstrip("\n") for work in args.work]
        text = "\n\n".join(tables) + "\n\n" + text
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")


if __name__ == "__main__":
    main()

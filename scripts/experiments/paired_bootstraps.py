#!/usr/bin/env python
"""Paired bootstraps between the systems of one compare.py work folder, and each comparison's verdict by the
project's rule (lib.verdict), as a markdown section that follows the folder's table.

    python scripts/experiments/paired_bootstraps.py WORK --pair B=A [--pair B=A ...] [--decode beam ...]
                                                     [--table] [--out FILE]

For every pair and decoding: official ROUGE-1.5.5's per-document F1 of WORK/outputs/B.DECODE.txt and
A.DECODE.txt against the test references (``summ-rouge --per-doc``, cached in WORK/logs/), B - A in ROUGE points
with its 95 % interval over 10,000 paired resamples of the test documents (fairseq_plugins/scoring/significance.py, seed 1).
One work folder is one seed, so every verdict here is "inconclusive (one seed)" by the rule; the section says how
many intervals it prints.  ``--table`` puts WORK/results.md (compare.py's table) before the section.
"""
import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lib import Experiment, verdict  # noqa: E402  (lib puts this checkout's fairseq_plugins first on sys.path)

from fairseq_plugins.scoring.significance import paired_bootstrap, read_per_doc  # noqa: E402

RESAMPLES = 10000


def per_doc(exp: Experiment, name: str, lang: str) -> Path:
    """WORK/logs/rouge_NAME.per_doc.tsv: official ROUGE-1.5.5 per-document F1 of outputs/NAME.txt."""
    table = exp.logs / f"rouge_{name}.per_doc.tsv"
    hyps = exp.work / "outputs" / f"{name}.txt"
    if not hyps.is_file():
        exp.fail(f"{hyps} not found: no system and decoding of that name in {exp.work}")
    if not table.is_file():
        exp.run(["summ-rouge", "--refs", exp.work / "data" / "ref" / "test.tgt", "--hyps", hyps, "--lang", lang,
                 "--per-doc", table], f"rouge_{name}.per_doc.log")
    return table


def intervals(exp: Experiment, a: str, b: str, lang: str):
    """[(difference, low, high)] of B - A in ROUGE points for ROUGE-1, -2 and -L."""
    delta, low, high, _ = paired_bootstrap(read_per_doc(per_doc(exp, a, lang)), read_per_doc(per_doc(exp, b, lang)),
                                           RESAMPLES, 1)
    return [(100 * d, 100 * lo, 100 * hi) for d, lo, hi in zip(delta, low, high)]


def section(exp: Experiment, pairs, decodes, command: str) -> str:
    lang = json.loads((exp.work / "data" / "prep.json").read_text(encoding="utf-8"))["settings"]["lang"]
    count = len(pairs) * len(decodes)
    lines = ["## Paired bootstraps", "", f"Written by `{command}`.", "",
             f"B - A in ROUGE points, 95 % interval over {RESAMPLES:,} paired resamples of the test documents: "
             f"{count} comparisons x 3 scores = {3 * count} intervals, none corrected for their number. One "
             "trained model per system (one seed), so each verdict is inconclusive by the rule (every seed, two "
             "or more, with an interval that excludes zero).", "",
             "| B | A | decoding | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|---|"]
    for decode in decodes:
        for b, a in pairs:
            runs = intervals(exp, f"{a}.{decode}", f"{b}.{decode}", lang)
            lines.append(f"| {b} | {a} | {decode} | " + " | ".join(verdict([run]) for run in runs) + " |")
    return "\n".join(lines) + "\n"


def parse_pair(text: str):
    b, sep, a = text.partition("=")
    if not sep or not a or not b:
        raise argparse.ArgumentTypeError(f"{text!r}: give B=A (two system labels)")
    return b, a


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path)
    parser.add_argument("--pair", type=parse_pair, action="append", required=True, metavar="B=A")
    parser.add_argument("--decode", action="append", help="decoding labels (default: beam)")
    parser.add_argument("--table", action="store_true", help="WORK/results.md first")
    parser.add_argument("--out", type=Path, help="write here as well as to stdout")
    args = parser.parse_args(argv)
    exp = Experiment("paired_bootstraps", args.work)
    command = "python scripts/experiments/paired_bootstraps.py " + " ".join(
        shlex.quote(str(a)) for a in (argv if argv is not None else sys.argv[1:]))
    text = section(exp, args.pair, args.decode or ["beam"], command)
    if args.table:
        text = (args.work / "results.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n" + text
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")


if __name__ == "__main__":
    main()

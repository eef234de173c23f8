"""``files2rouge`` (and ``summ-files2rouge``): options and entry point (fairseq_plugins/scoring/files2rouge.py)."""
from __future__ import annotations
import argparse
import sys
from typing import Sequence

from fairseq_plugins.cli.common import finish_parser, report_error
from fairseq_plugins.scoring.files2rouge import DEFAULT_ROUGE_N, run


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="files2rouge",
                                description="Calculating ROUGE score between two files (line-by-line)")
    p.add_argument("reference", help="Path of references file")
    p.add_argument("summary", help="Path of summary file")
    p.add_argument("-v", "--verbose", action="store_true", help="Prints ROUGE logs")
    p.add_argument("-n", "--rouge_n", type=int, default=DEFAULT_ROUGE_N, help="Maximum n_gram size to consider")
    p.add_argument("-nol", "--no_rouge_l", action="store_true", help="Do not calculate ROUGE-L")
    p.add_argument("-a", "--args", help="ROUGE Arguments")
    p.add_argument("-s", "--saveto", "-o", "--output", dest="saveto", help="File to save scores")
    p.add_argument("-e", "--eos", dest="eos", default=".",
                   help='End of sentence separator (for multisentence). Default: "."')
    p.add_argument("-m", "--stemming", action="store_true", help="DEPRECATED: stemming is now default behavior")
    p.add_argument("-nm", "--no_stemming", action="store_true", help="Switch off stemming")
    p.add_argument("-ir", "--ignore_empty_reference", action="store_true")
    p.add_argument("-is", "--ignore_empty_summary", action="store_true")
    p.add_argument("-i", "--ignore_empty", action="store_true", help="both -ir and -is (older files2rouge)")
    finish_parser(p)
    args = p.parse_args(argv)
    if args.stemming:
        p.error("files2rouge uses stemming by default so --stemming is deprecated. "
                "You can turn it off with -nm/--no_stemming")
    try:
        run(args.reference, args.summary, rouge_args=args.args, verbose=args.verbose, saveto=args.saveto,
            rouge_n=args.rouge_n, no_rouge_l=args.no_rouge_l, eos=args.eos,
            ignore_empty_reference=args.ignore_empty_reference or args.ignore_empty,
            ignore_empty_summary=args.ignore_empty_summary or args.ignore_empty,
            stemming=not args.no_stemming)
    except (ValueError, RuntimeError, OSError) as e:
        print(file=sys.stderr)
        return report_error(p.prog, e)  # 2: bad input; 1: ROUGE-1.5.5 failed
    return 0


if __name__ == "__main__":
    sys.exit(main())

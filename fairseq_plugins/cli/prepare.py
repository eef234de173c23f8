"""``summ-prepare``: its options and entry point (the preparation is in fairseq_plugins/text/prepare.py)."""
import argparse
import sys

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.text import prepare as _library
from fairseq_plugins.text.prepare import PROG, UNITS, apply, build
from fairseq_plugins.text.textio import no_stdout
from fairseq_plugins.text.tokenization import LANGS


# ----------------------------------------------------------------------------------------------- CLI
def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    b = parser.add_argument_group("build mode")
    b.add_argument("--raw-dir", help="directory with {split}.src and {split}.tgt")
    b.add_argument("--output-dir", "--out-dir", dest="out_dir", help="output directory (tok/, dict.txt, prep.json)")
    b.add_argument("--lang", choices=LANGS, default="en")
    b.add_argument("--unit", choices=UNITS,
                   help="tokenization unit (default: keep for en, char for zh); en: keep|word|sp, "
                        "zh: char|jieba|keep|sp")
    b.add_argument("--lowercase", action="store_true", help="lower-case the text first (word always does)")
    b.add_argument("--sp-vocab-size", type=int, default=8000, help="sentencepiece pieces (soft limit)")
    b.add_argument("--sp-model-type", choices=("unigram", "bpe"), default="unigram")
    b.add_argument("--max-source-len", type=int, default=400, help="truncate sources to this many tokens (0: no limit)")
    b.add_argument("--max-target-len", type=int, default=100, help="truncate targets to this many tokens (0: no limit)")
    b.add_argument("--vocab-size", type=int, default=50000, help="regular vocabulary size (markers come on top)")
    b.add_argument("--num-markers", type=int, help="number of <oov-K> markers (default: --max-source-len)")
    b.add_argument("--splits", default="train,valid,test", help="comma-separated; must include train")
    b.add_argument("--min-count", type=int, default=1, help="minimum train frequency of a vocabulary token")
    a = parser.add_argument_group("apply mode")
    a.add_argument("--apply", metavar="PREP_JSON", help="tokenize and mark new text with these saved settings")
    a.add_argument("--input", help="raw text, one document a line (- for stdin)")
    a.add_argument("--output-prefix", "--out-prefix", dest="out_prefix", metavar="PREFIX",
                   help="write PREFIX.src and PREFIX.oov")
    a.add_argument("--whole", action="store_true",
                   help="keep every token (no --max-source-len truncation): text to analyse as the model's input "
                        "is tokenized, e.g. references for summ-analyze, not text for the model")
    return finish_parser(parser)


def _main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.apply:
        if args.raw_dir or args.out_dir:
            parser.error("--apply does not take --raw-dir/--out-dir")
        if not args.input or not args.out_prefix:
            parser.error("--apply needs --input and --output-prefix")
    elif args.whole:
        parser.error("--whole is an apply-mode option (with --apply PREP_JSON)")
    if args.apply:
        no_stdout("--output-prefix", args.out_prefix)
        apply(args)
    else:
        if not args.raw_dir or not args.out_dir:
            parser.error("give --raw-dir and --output-dir (or --apply PREP_JSON --input FILE --output-prefix P)")
        no_stdout("--output-dir", args.out_dir)
        build(args)


def main(argv=None):
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())

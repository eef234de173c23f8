"""``summ-restore``: its options and entry point (the restoration is in fairseq_plugins/text/restore.py)."""
import argparse
import sys

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.text import restore as _library
from fairseq_plugins.text.restore import PROG, restore


def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prep", required=True, help="prep.json written by summ-prepare (language, unit)")
    parser.add_argument("--oov", help="the .oov file of the generated inputs (one line per document)")
    parser.add_argument("--generate-output", required=True, help="fairseq-generate/-interactive output (- = stdin)")
    parser.add_argument("-o", "--output", "--out", required=True,
                        help="the summaries, one per document, in id order (- = stdout)")
    parser.add_argument("--num-docs", type=int, help="expected number of documents (checked against --oov)")
    parser.add_argument("--tokens-output", "--tokens-out",
                        help="also write the restored tokens (before detokenization)")
    parser.add_argument("--drop-unk", action="store_true", help="remove <unk> from the summaries")
    parser.add_argument("--no-detok", action="store_true",
                        help="write the text ROUGE scores (tokens separated by spaces), not detokenized English")
    return finish_parser(parser)


def _main(argv):
    restore(build_parser().parse_args(argv))


def main(argv=None):
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())

"""``summ-convert``: its options and entry point (the conversions are in fairseq_plugins/text/convert.py)."""
import argparse
import sys

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.text import convert as _library
from fairseq_plugins.text.convert import PROG, cmd_jsonl, cmd_lcsts, cmd_parallel, cmd_split, cmd_story, cmd_tsv


# ----------------------------------------------------------------------------------------------- CLI
def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    finish_parser(parser)
    sub = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")

    def common(p, target_sep=True):
        p.add_argument("--output-prefix", "--out-prefix", dest="out_prefix", required=True,
                       help="write PREFIX.src and PREFIX.tgt")
        if target_sep:
            p.add_argument("--sent-sep", metavar="TOKEN",
                           help="join target sentences with ' TOKEN ' (e.g. '<q>'); default: a single space")

    p = sub.add_parser("story", help="CNN/DailyMail .story files (article, then @highlight sentences)")
    p.add_argument("inputs", nargs="+", help=".story files or directories of them (sorted by name)")
    p.add_argument("--url-list", help="convert exactly the stories of this URL list, in its order "
                                      "(story file name = sha1 of the URL)")
    p.add_argument("--fix-missing-period", action="store_true",
                   help="add '.' to lines that do not end with punctuation (as See et al. 2017)")
    common(p)
    p.set_defaults(func=cmd_story)

    p = sub.add_parser("jsonl", help="JSON lines (.gz accepted); a field is a string or a list of sentences")
    path_help = (": a key, or a dotted path a.b.c into nested objects (a key that itself has dots is taken as it is "
                 "where it exists)")
    p.add_argument("input", help="file, file.gz or - for stdin")
    p.add_argument("--src-field", required=True, help="field of the source" + path_help)
    p.add_argument("--tgt-field", help="field of the target" + path_help)
    p.add_argument("--no-target", action="store_true", help="write PREFIX.src only")
    p.add_argument("--target-index", type=int, metavar="K",
                   help="the target field is a list of alternative references: PREFIX.tgt gets reference K")
    p.add_argument("--all-targets", action="store_true",
                   help="the target field is a list of references: also write PREFIX.tgt.all, one JSON array "
                        "of all references per line (PREFIX.tgt gets reference --target-index, default 0)")
    p.add_argument("--id-field", help="field also written to PREFIX.ids" + path_help)
    common(p)
    p.set_defaults(func=cmd_jsonl)

    p = sub.add_parser("tsv", help="tab-separated columns, no quoting (LCSTS: summary/text; CSL: task/abstract/title)")
    p.add_argument("input", help="file, file.gz or - for stdin")
    p.add_argument("--src-col", type=int, required=True, help="0-based column of the source")
    p.add_argument("--tgt-col", type=int, help="0-based column of the target")
    p.add_argument("--no-target", action="store_true", help="write PREFIX.src only")
    p.add_argument("--num-cols", type=int, help="expected number of columns (default: that of the first line)")
    p.add_argument("--header", action="store_true", help="skip the first line")
    common(p, target_sep=False)
    p.set_defaults(func=cmd_tsv)

    p = sub.add_parser("lcsts", help="the LCSTS release (PART_I/II/III.txt: <doc> records of <summary> and "
                                     "<short_text>, PART_II/III with <human_label>)")
    p.add_argument("input", help="file, file.gz or - for stdin")
    p.add_argument("--min-score", type=int, metavar="N",
                   help="keep only documents whose human score is at least N (Hu et al.'s test set: 3), saying "
                        "how many were left out")
    p.add_argument("--scores", action="store_true", help="also write the human scores to PREFIX.score")
    common(p, target_sep=False)
    p.set_defaults(func=cmd_lcsts)

    p = sub.add_parser("parallel", help="two line-aligned files (validated, whitespace normalized, copied)")
    p.add_argument("src")
    p.add_argument("tgt", nargs="?", help="optional target file")
    p.add_argument("--split-target-on", metavar="STR",
                   help="the target sentences are separated by STR (e.g. '##SENT##'): rejoin them with a "
                        "space or --sent-sep")
    common(p)
    p.set_defaults(func=cmd_parallel)

    p = sub.add_parser("split", help="split converted pairs into train/valid/test deterministically, keeping "
                                     "documents with the same normalized source or target in one split")
    p.add_argument("--in-prefix", nargs="+", required=True, help="PREFIX.src/PREFIX.tgt pairs, concatenated")
    p.add_argument("--output-dir", "--out-dir", dest="out_dir", required=True)
    p.add_argument("--sizes", default="test=200,valid=200", help="NAME=COUNT,... filled in this order")
    p.add_argument("--rest", default="train", help="name of the split that gets the remaining documents")
    p.add_argument("--seed", default="summ-convert", help="string mixed into the hash that orders documents")
    p.set_defaults(func=cmd_split)
    return parser


def _main(argv):
    args = build_parser().parse_args(argv)
    args.func(args)


def main(argv=None):
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())

"""``python -m fairseq_plugins.cli.length_fit PREP_JSON [GENERATION OPTIONS...]``:
generate.sh's check of its decoding lengths against the training targets' (fairseq_plugins/runtime/length_fit.py).
The options are fairseq's, as generate.sh passes them (the last of each counts; the others are ignored).
"""
import argparse
import sys

from fairseq_plugins.runtime.length_fit import length_warnings
from fairseq_plugins.text.prepare import load_prep
from fairseq_plugins.text.textio import UserError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="length_fit", description=__doc__.split("\n")[2])
    parser.add_argument("prep", help="the data's prep.json")
    parser.add_argument("--prog", default="length_fit", help="the command the warnings name")
    parser.add_argument("--min-len", type=int, default=1)
    parser.add_argument("--max-len-a", type=float, default=0)
    parser.add_argument("--max-len-b", type=int, default=200)
    args, _ = parser.parse_known_args(argv)
    try:
        prep, _ = load_prep(args.prep)
    except UserError as err:
        print(f"{args.prog}: error: {err}", file=sys.stderr)
        return 2
    for warning in length_warnings(prep.get("target_lengths"), args.min_len, args.max_len_a, args.max_len_b):
        print(f"{args.prog}: warning: {warning}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

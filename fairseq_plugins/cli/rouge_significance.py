"""``summ-rouge-significance``: its options and entry point (fairseq_plugins/scoring/significance.py)."""
import argparse
import sys
from pathlib import Path

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.scoring import significance as _library
from fairseq_plugins.scoring.significance import METRICS, PROG, paired_bootstrap, read_per_doc
from fairseq_plugins.text.textio import UserError


def positive(text: str) -> int:
    """argparse type: an integer of at least 1 (0 resamples would give no interval at all)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _main(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path, help="per-document scores of system A (the baseline)")
    parser.add_argument("b", type=Path, help="per-document scores of system B")
    parser.add_argument("--resamples", type=positive, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    finish_parser(parser)
    args = parser.parse_args(argv)
    a, b = read_per_doc(args.a), read_per_doc(args.b)
    if len(a) != len(b):
        raise UserError(f"{args.a} has {len(a)} documents and {args.b} {len(b)}: score both on the same references")
    delta, low, high, not_better = paired_bootstrap(a, b, args.resamples, args.seed)
    print(f"B = {args.b}\nA = {args.a}\n{len(a)} documents, {args.resamples} paired resamples (seed {args.seed})")
    print("metric     B - A   95% interval        share of resamples with B <= A")
    for i, metric in enumerate(METRICS):
        name = metric[:-2].upper()
        print(f"{name:<9} {100 * delta[i]:+6.2f}   [{100 * low[i]:+6.2f}, {100 * high[i]:+6.2f}]   {not_better[i]:.4f}")


def main(argv=None):
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())

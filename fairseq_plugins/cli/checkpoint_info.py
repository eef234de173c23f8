"""``python -m fairseq_plugins.cli.checkpoint_info``:
which checkpoint and why (fairseq_plugins/runtime/checkpoint_info.py).
"""
import argparse
import sys

from fairseq_plugins.cli.common import finish_parser
from fairseq_plugins.runtime import checkpoint_info as _library
from fairseq_plugins.runtime.checkpoint_info import PROG, read_facts, run_summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__.split("\n\n")[0])
    finish_parser(parser)
    parser.add_argument("path", help="a checkpoint file, or with --run a SAVE_DIR")
    parser.add_argument("--run", action="store_true", help="describe the best and the last checkpoint of SAVE_DIR")
    args = parser.parse_args(argv)
    try:
        print(run_summary(args.path) if args.run else read_facts(args.path).describe())
    except FileNotFoundError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``summ-average-checkpoints``: its options and entry point (fairseq_plugins/runtime/average_checkpoints.py)."""
import argparse
import sys
from pathlib import Path

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.runtime import average_checkpoints as _library
from fairseq_plugins.runtime.average_checkpoints import PROG, average, last_checkpoints, num_updates, save_atomically


def _main(argv) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--save-dir", type=Path, help="a run's checkpoint directory (with --last)")
    source.add_argument("--inputs", type=Path, nargs="+", help="checkpoint files to average")
    parser.add_argument("--last", type=int, help="how many of the run's last checkpoints")
    parser.add_argument("--epochs", action="store_true", help="average checkpointE.pt files, not checkpoint_E_U.pt")
    parser.add_argument("-o", "--output", type=Path, required=True)
    finish_parser(parser)
    args = parser.parse_args(argv)
    if str(args.output) == "-":
        parser.error("--output -: a checkpoint is binary; give a file name")
    if args.save_dir is not None:
        if not args.last or args.last < 1:
            parser.error("--save-dir needs --last N")
        paths = last_checkpoints(args.save_dir, args.last, args.epochs)
    else:
        paths = args.inputs

    import fairseq_plugins

    fairseq_plugins.register()  # allow-lists the classes of a fairseq checkpoint for safe loading
    print(f"{PROG}: averaging {len(paths)}: {' '.join(p.name for p in paths)}", file=sys.stderr)
    state = average(paths)
    save_atomically(state, args.output)
    print(f"{PROG}: wrote {args.output} (the configuration of the input with {num_updates(state)} updates)",
          file=sys.stderr)


def main(argv=None) -> int:
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())

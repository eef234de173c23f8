"""``summ-package``: its options and entry point (fairseq_plugins/inference/package.py)."""
import argparse
import sys

from fairseq_plugins.cli.common import finish_parser
from fairseq_plugins.inference import package as _library
from fairseq_plugins.inference.package import CHECKPOINT, MANIFEST, PROG, PackageError, package, verify
from fairseq_plugins.runtime.checkpoint_info import read_facts


# ---------------------------------------------------------------------------------------------- command
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("save_dir", help="a train.sh SAVE_DIR (or 'verify' followed by a package)")
    parser.add_argument("out", help="the package directory to write (must not exist)")
    parser.add_argument("--checkpoint", default=CHECKPOINT, help="checkpoint file in SAVE_DIR")
    parser.add_argument("--data-dir", help="preprocess.sh's DATA_DIR, where files SAVE_DIR lacks are looked up")
    parser.add_argument("--rouge", metavar="FILE", help="the model's measured test ROUGE (generate.sh --score's "
                                                        "or summ-rouge's report), copied into the model card")
    return finish_parser(parser)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["verify"] and len(argv) == 2:
            verify(argv[1])
            return 0
        args = build_parser().parse_args(argv)
        out = package(args.save_dir, args.out, args.checkpoint, args.data_dir, args.rouge)
        print(f"{PROG}: wrote {out} (checked by {out / MANIFEST}) from {read_facts(out / CHECKPOINT).describe()}",
              file=sys.stderr)
        return 0
    except (PackageError, FileNotFoundError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

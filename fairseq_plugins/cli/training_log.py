"""``python -m fairseq_plugins.cli.training_log``:
train.sh's reader of fairseq-train's output (fairseq_plugins/runtime/training_log.py).
"""
import argparse
import sys

from fairseq_plugins.cli.common import finish_parser
from fairseq_plugins.runtime import training_log as _library
from fairseq_plugins.runtime.training_log import PROG, Progress, failure_excerpt, follow, ignore_stop_signals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__.split("\n\n")[0])
    finish_parser(parser)
    parser.add_argument("--log", required=True, help="the log file; appended to")
    parser.add_argument("--echo", action="store_true", help="every line on stderr as well")
    parser.add_argument("--failure", type=int, metavar="LINE",
                        help="read nothing: show on stderr what explains the failed run whose log starts at LINE "
                             "of --log (its last traceback, its errors, else its last lines)")
    parser.add_argument("--tuned-epochs", type=int, default=0, metavar="N",
                        help="the epochs the config's budget is: a run that trains fewer is told so at its end")
    parser.add_argument("--config-name", default="the config", help="the config's name, for that note")
    args = parser.parse_args(argv)
    if args.failure is not None:
        with open(args.log, encoding="utf-8", errors="replace") as log:
            lines = log.read().splitlines()[args.failure - 1:]
        print("\n".join(failure_excerpt(lines)), file=sys.stderr)
        return 0
    ignore_stop_signals()
    try:
        log = open(args.log, "a", encoding="utf-8")
    except OSError as err:
        print(f"{PROG}: error: cannot write the log {args.log}: {err.strerror}", file=sys.stderr)
        return 2
    with log:
        source = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
        progress = Progress(tuned_epochs=args.tuned_epochs, config_name=args.config_name)
        follow(source, log, sys.stderr, echo=args.echo, progress=progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())

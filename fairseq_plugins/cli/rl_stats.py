"""``summ-rl-stats``: its options and entry point (fairseq_plugins/criterions/self_critical_stats.py)."""
import argparse
import json
import torch

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.criterions import self_critical_stats as _library
from fairseq_plugins.criterions.self_critical_stats import PROG, criterion, split_stats
from fairseq_plugins.viz.attention_stats import load


def body(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT")
    parser.add_argument("--data", required=True, help="preprocess.sh's DATA_DIR/bin")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--max-tokens", type=int, default=6000)
    parser.add_argument("--reward", default="rougeL", help="as self_critical_rouge's --rl-reward")
    parser.add_argument("--max-len-a", type=float, default=0.0, help="as --rl-max-len-a")
    parser.add_argument("--max-len-b", type=int, default=100, help="as --rl-max-len-b")
    parser.add_argument("--baseline-block-ngram", type=int, default=0, help="as --rl-baseline-block-ngram")
    parser.add_argument("--seed", type=int, default=1, help="seed of the samples")
    finish_parser(parser)
    args = parser.parse_args(argv)
    for checkpoint in args.checkpoints:
        torch.manual_seed(args.seed)  # the same samples' randomness for every checkpoint
        model, task = load(checkpoint, args.data, args.split)
        stats = split_stats(model, task, args.split, args.max_tokens, criterion(task, args))
        print(json.dumps({"checkpoint": checkpoint, "split": args.split, **stats}), flush=True)


def main(argv=None):
    return run_cli(PROG, body, argv)


if __name__ == "__main__":
    raise SystemExit(main())

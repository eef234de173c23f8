"""``summ-attention-stats``: its options and entry point (fairseq_plugins/viz/attention_stats.py)."""
import argparse
import json
import math
import sys
import numpy as np
import torch

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.modules.sentence_states import COHESION_STATES, DEFAULT_SENTENCE_END, delimiter_ids
from fairseq_plugins.text.textio import UserError
from fairseq_plugins.viz import attention_stats as _library
from fairseq_plugins.viz.attention_stats import PROG, load, means, sample_sums


def body(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("bin_dir", help="preprocess.sh's DATA_DIR/bin")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--max-batches", type=int, help="stop after this many batches (default: the whole split)")
    parser.add_argument("--cohesion-state", choices=COHESION_STATES, default="after",
                        help="which decoder state ends a sentence, for end_cos_1/2 (semantic_cohesion's readings)")
    finish_parser(parser)
    args = parser.parse_args(argv)
    model, task = load(args.checkpoint, args.bin_dir, args.split)
    dictionary = task.target_dictionary
    pad, eos = dictionary.pad(), dictionary.eos()
    try:
        end_ids = delimiter_ids(dictionary, DEFAULT_SENTENCE_END)  # semantic_cohesion's sentence ends
    except ValueError:  # a dictionary without them: no sentence-end cosines
        end_ids = torch.zeros(0, dtype=torch.long)
    dataset = task.dataset(args.split)
    sizes = dataset.num_tokens_vec(np.arange(len(dataset)))  # what batching by --max-tokens counts
    if len(sizes) and sizes.max() > args.max_tokens:
        raise UserError(f"{args.bin_dir}: document {int(sizes.argmax()) + 1} of split {args.split!r} has "
                        f"{int(sizes.max())} tokens, more than --max-tokens {args.max_tokens}")
    batches = task.get_batch_iterator(dataset, max_tokens=args.max_tokens, seed=1,
                                      ignore_invalid_inputs=False).next_epoch_itr(shuffle=False)
    totals = {}
    with torch.no_grad():
        for index, sample in enumerate(batches):
            if args.max_batches is not None and index >= args.max_batches:
                break
            for key, value in sample_sums(model, sample, pad, eos, end_ids, args.cohesion_state).items():
                totals[key] = totals.get(key, 0) + value
    count = totals.pop("tokens", 0)
    if count == 0:
        raise UserError(f"{args.bin_dir}: split {args.split!r} has no target tokens")
    report = means(totals, count)
    report.update(split=args.split, target_tokens=count)
    print(json.dumps(report))
    if not math.isfinite(report["entropy"]):
        raise UserError("the attention has non-finite values")


def main(argv=None):
    return run_cli(PROG, body, argv)


if __name__ == "__main__":
    sys.exit(main())

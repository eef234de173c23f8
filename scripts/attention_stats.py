#!/usr/bin/env python
"""Is a model using its attention?  Teacher-forces the reference summaries of a split and reports how focused the
attention over the source is.

    python scripts/attention_stats.py CHECKPOINT BIN_DIR [--split valid] [--max-tokens 4000] [--max-batches N]

CHECKPOINT is a fairseq checkpoint (train.sh's SAVE_DIR/checkpoint_best.pt, or fairseq's own lstm); BIN_DIR is
preprocess.sh's DATA_DIR/bin.  Over every target token (padding excluded) it prints, as one JSON line:
  entropy          mean entropy of the attention (nats),
  uniform_entropy  the same for a uniform attention over each source (mean ln S): entropy near it = no focus,
  max_weight       mean largest attention weight,
  attended_is_target  share of target tokens whose most-attended source token is that very token.
A model whose attention stays near uniform after training is a language model fed a mean of the source; the
controls of docs/results/song2020_no_copy_controls.md show how that looks and what fixed it there.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

try:
    import fairseq_plugins
except ImportError:  # run from a checkout without the editable install
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import fairseq_plugins

from fairseq_plugins.text.textio import UserError, run_cli

PROG = "attention_stats.py"


def batch_sums(attn: torch.Tensor, src_tokens: torch.Tensor, target: torch.Tensor, pad: int) -> dict:
    """Sums over the non-padding target tokens of one batch.  attn: B x T x S (rows sum to 1 over the source),
    src_tokens: B x S right-padded, target: B x T."""
    tokens = target.ne(pad)  # B x T
    source_length = src_tokens.ne(pad).sum(dim=1, keepdim=True).expand_as(target).float()  # B x T
    entropy = -(attn * attn.clamp_min(1e-30).log()).sum(dim=2)  # B x T
    attended = src_tokens.gather(1, attn.argmax(dim=2))  # B x T
    return {
        "tokens": int(tokens.sum()),
        "entropy": float(entropy[tokens].sum()),
        "uniform_entropy": float(source_length.log()[tokens].sum()),
        "max_weight": float(attn.max(dim=2).values[tokens].sum()),
        "attended_is_target": float(attended.eq(target)[tokens].sum()),
    }


def attention_of(net_output, batch_size: int, target_length: int) -> torch.Tensor:
    """B x T x S from a decoder's second output: this project's models (``extra["attn"]``, a list) or fairseq's
    lstm (the tensor itself)."""
    extra = net_output[1]
    attn = extra if torch.is_tensor(extra) else (extra or {}).get("attn")
    if isinstance(attn, list):
        attn = attn[0] if attn else None
    if attn is None:
        raise UserError("the model returns no attention over the source")
    if attn.size(0) != batch_size or attn.size(1) != target_length:
        raise UserError(f"unexpected attention shape {tuple(attn.shape)} for {batch_size} summaries of "
                        f"{target_length} tokens")
    return attn.float()


def load(checkpoint: str, bin_dir: str, split: str):
    from fairseq import checkpoint_utils

    for path, what in ((checkpoint, "checkpoint"), (bin_dir, "data directory")):
        if not os.path.exists(path):
            raise UserError(f"{path}: no such {what}")
    fairseq_plugins.register()  # the plugin models, and torch's safe loading of fairseq checkpoints
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": bin_dir})
    try:
        task.load_dataset(split)
    except FileNotFoundError as err:
        raise UserError(f"{bin_dir}: no split {split!r} ({err})") from err
    return models[0].eval(), task


def body(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("bin_dir", help="preprocess.sh's DATA_DIR/bin")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--max-batches", type=int, help="stop after this many batches (default: the whole split)")
    args = parser.parse_args(argv)
    from fairseq import utils

    model, task = load(args.checkpoint, args.bin_dir, args.split)
    pad = task.target_dictionary.pad()
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
            target = sample["target"]  # B x T
            net_output = model(**sample["net_input"])
            attn = attention_of(net_output, *target.shape)  # B x T x S
            src = utils.convert_padding_direction(sample["net_input"]["src_tokens"], pad, left_to_right=True)
            for key, value in batch_sums(attn, src, target, pad).items():
                totals[key] = totals.get(key, 0) + value
    count = totals.pop("tokens", 0)
    if count == 0:
        raise UserError(f"{args.bin_dir}: split {args.split!r} has no target tokens")
    report = {key: round(value / count, 4) for key, value in totals.items()}
    report.update(split=args.split, target_tokens=count)
    print(json.dumps(report))
    if not math.isfinite(report["entropy"]):
        raise UserError("the attention has non-finite values")


if __name__ == "__main__":
    sys.exit(run_cli(PROG, body))

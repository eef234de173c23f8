#!/usr/bin/env python3
"""Average the weights of the last N fairseq checkpoints of a run (or of given files) into one checkpoint.

    python scripts/average_checkpoints.py --save-dir SAVE_DIR --last N [--epochs] --output averaged.pt
    python scripts/average_checkpoints.py --inputs a.pt b.pt c.pt --output averaged.pt

fairseq's own scripts/average_checkpoints.py lives in its source tree and is not part of the installed
package (fairseq-fixed ships no `scripts` module and no importable averaging function), hence this script.
--last N takes the N checkpoint_E_U.pt files with the most updates (written by --save-interval-updates), or
with --epochs the N checkpointE.pt files of the last epochs.  Every floating-point tensor of the "model"
state is averaged (in float64, stored back in its own dtype); other tensors must be equal in all inputs.
The rest of the output (configuration, update count...) is the newest input's, without its optimizer state:
the result is for fairseq-generate / generate.sh --checkpoint, not for resuming training.  Inputs are read
with torch's safe loading (the plugin's allow-list, fairseq_plugins.register()); the output is written
atomically (temporary file, fsync, rename).
"""
import argparse
import os
import re
import sys
from pathlib import Path

import torch


def last_checkpoints(save_dir: Path, count: int, epochs: bool) -> list:
    pattern = re.compile(r"checkpoint(\d+)\.pt" if epochs else r"checkpoint_\d+_(\d+)\.pt")
    found = sorted((int(m.group(1)), p) for p in save_dir.iterdir() if (m := pattern.fullmatch(p.name)))
    kind = "checkpointE.pt (epoch)" if epochs else "checkpoint_E_U.pt (--save-interval-updates)"
    if len(found) < count:
        sys.exit(f"average_checkpoints: {count} {kind} files wanted, {len(found)} found in {save_dir}")
    return [path for _, path in found[-count:]]


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def average(paths: list) -> dict:
    sums, newest = {}, None
    for path in paths:
        state = load(path)
        model = state["model"]
        if sums and model.keys() != sums.keys():
            sys.exit(f"average_checkpoints: {path} has other parameters than {paths[0]}")
        for name, tensor in model.items():
            if tensor.is_floating_point():
                sums[name] = sums[name] + tensor.double() if name in sums else tensor.double()
            elif name in sums and not torch.equal(sums[name], tensor):
                sys.exit(f"average_checkpoints: non-float tensor {name} differs in {path}")
            else:
                sums[name] = tensor
        newest = state
    newest["model"] = {name: (value / len(paths)).to(newest["model"][name].dtype)
                       if value.is_floating_point() else value for name, value in sums.items()}
    newest.pop("last_optimizer_state", None)
    return newest


def save_atomically(state: dict, output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, output)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--save-dir", type=Path, help="a run's checkpoint directory (with --last)")
    source.add_argument("--inputs", type=Path, nargs="+", help="checkpoint files to average")
    parser.add_argument("--last", type=int, help="how many of the run's last checkpoints")
    parser.add_argument("--epochs", action="store_true", help="average checkpointE.pt files, not checkpoint_E_U.pt")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.save_dir is not None:
        if not args.last or args.last < 1:
            parser.error("--save-dir needs --last N")
        paths = last_checkpoints(args.save_dir, args.last, args.epochs)
    else:
        paths = args.inputs

    import fairseq_plugins

    fairseq_plugins.register()  # allow-lists the classes of a fairseq checkpoint for safe loading
    print(f"average_checkpoints: averaging {len(paths)}: {' '.join(p.name for p in paths)}", file=sys.stderr)
    save_atomically(average(paths), args.output)
    print(f"average_checkpoints: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

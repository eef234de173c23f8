"""summ-average-checkpoints: average the weights of the last N fairseq checkpoints of a run (or of given files).

    summ-average-checkpoints --save-dir SAVE_DIR --last N [--epochs] --output averaged.pt
    summ-average-checkpoints --inputs a.pt b.pt c.pt --output averaged.pt

(``python scripts/average_checkpoints.py`` is the same command.)

fairseq's own scripts/average_checkpoints.py lives in its source tree and is not part of the installed
package (fairseq-fixed ships no `scripts` module and no importable averaging function), hence this command.
--last N takes the N checkpoint_E_U.pt files with the most updates (written by --save-interval-updates), or
with --epochs the N checkpointE.pt files of the last epochs.  Every floating-point tensor of the "model"
state is averaged (in float64, stored back in its own dtype); the inputs must hold the same parameters with the
same shapes (a different shape is an error, never broadcast), and other tensors must be equal in all inputs.
The rest of the output (configuration, update count...) is that of the input with the most updates (the last
of them on a tie), whatever the order of the arguments, without its optimizer state: the result is for
fairseq-generate / generate.sh --checkpoint, not for resuming training.  Inputs are read with torch's safe
loading (the plugin's allow-list, fairseq_plugins.register()); the output is written atomically (temporary
file, fsync, rename).  Exit status: 0 success, 1 runtime failure, 2 usage or bad input.
"""
import os
import re
from pathlib import Path

import torch

from fairseq_plugins.text.textio import UserError

PROG = "summ-average-checkpoints"


def last_checkpoints(save_dir: Path, count: int, epochs: bool) -> list:
    pattern = re.compile(r"checkpoint(\d+)\.pt" if epochs else r"checkpoint_\d+_(\d+)\.pt")
    found = sorted((int(m.group(1)), p) for p in save_dir.iterdir() if (m := pattern.fullmatch(p.name)))
    kind = "checkpointE.pt (epoch)" if epochs else "checkpoint_E_U.pt (--save-interval-updates)"
    if len(found) < count:
        raise UserError(f"{count} {kind} files wanted, {len(found)} found in {save_dir}")
    return [path for _, path in found[-count:]]


def load(path: Path) -> dict:
    if not Path(path).is_file():
        raise UserError(f"{path}: no such checkpoint")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, not a checkpoint, or a class outside the allow-list
        raise UserError(f"{path}: cannot read it as a fairseq checkpoint ({err})") from None


def num_updates(state: dict) -> int:
    """The updates a checkpoint was trained for (fairseq's optimizer_history), 0 when it does not say."""
    history = state.get("optimizer_history") or [{}]
    return int(history[-1].get("num_updates", 0))


def add_model(sums: dict, model: dict, path, first) -> None:
    """Add one input's parameters to ``sums`` (float64 for floating point; others must be equal)."""
    if sums and model.keys() != sums.keys():
        raise UserError(f"{path} has other parameters than {first}")
    for name, tensor in model.items():
        if name in sums and tensor.shape != sums[name].shape:
            raise UserError(f"{path}: {name} has shape {tuple(tensor.shape)}, {first} {tuple(sums[name].shape)}: "
                            "checkpoints of different models cannot be averaged")
        if tensor.is_floating_point():
            sums[name] = sums[name] + tensor.double() if name in sums else tensor.double()
        elif name in sums and not torch.equal(sums[name], tensor):
            raise UserError(f"non-float tensor {name} differs in {path}")
        else:
            sums[name] = tensor


def average(paths: list) -> dict:
    """The mean of the inputs' parameters, in the rest of the input with the most updates (the last on a tie)."""
    sums, kept, kept_updates = {}, None, -1
    for path in paths:
        state = load(path)
        add_model(sums, state["model"], path, paths[0])
        if num_updates(state) >= kept_updates:
            kept, kept_updates = state, num_updates(state)
    kept["model"] = {name: (value / len(paths)).to(kept["model"][name].dtype)
                     if value.is_floating_point() else value for name, value in sums.items()}
    kept.pop("last_optimizer_state", None)
    return kept


def save_atomically(state: dict, output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, output)

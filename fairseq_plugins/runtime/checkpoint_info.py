"""Which checkpoint a command uses, and why: its update, its validation figure and the measure that chose it.

    python -m fairseq_plugins.cli.checkpoint_info SAVE_DIR/checkpoint_best.pt   # one line about it
    python -m fairseq_plugins.cli.checkpoint_info --run SAVE_DIR                 # best and last of a run

fairseq keeps ``checkpoint_best.pt`` by ``--best-checkpoint-metric`` (by default the validation ``loss``, which
for this project's criterions includes the auxiliary terms: coverage, focal weighting) and ``checkpoint_last.pt``
after the last update.  ``generate.sh``, ``summ-serve``, ``summ-package`` and ``train.sh``'s end of run print
these lines, so that a user sees which model they decode and by what it was chosen.  Each figure is read from
the checkpoint itself (its update count, the validation value it was saved with, the run's options), with
torch's safe loading and without reading the weights into memory.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


PROG = "checkpoint_info"


@dataclass
class CheckpointFacts:
    name: str  # the file's name
    updates: Optional[int]
    value: Optional[float]  # the validation value of the metric it was saved with (None: not validated)
    metric: str  # --best-checkpoint-metric of the run
    maximize: bool

    def describe(self) -> str:
        where = f"{self.name}: update {self.updates if self.updates is not None else '?'}"
        if self.value is None:
            return f"{where}, not validated"
        line = f"{where}, validation {self.metric} {self.value:.4g}"
        if self.name.startswith("checkpoint_best"):
            line += f" (the {'highest' if self.maximize else 'lowest'} {self.metric} of the run's validations)"
        if self.metric == "loss":
            line += "; the loss includes the criterion's auxiliary terms (coverage, focal weighting)"
        return line


def read_facts(path) -> CheckpointFacts:
    """The facts of one fairseq checkpoint (FileNotFoundError when there is none)."""
    import torch

    from fairseq_plugins.runtime.checkpoint_safety import allow_fairseq_checkpoints

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    allow_fairseq_checkpoints()
    return facts_of_state(torch.load(path, map_location="cpu", weights_only=True, mmap=True), path.name)


def facts_of_state(state, name: str) -> CheckpointFacts:
    """The facts of a checkpoint already loaded (its ``cfg`` a dict or fairseq's DictConfig)."""
    checkpoint_cfg = (state.get("cfg") or {}).get("checkpoint") or {}
    history = state.get("optimizer_history") or [{}]
    value = (state.get("extra_state") or {}).get("val_loss")
    return CheckpointFacts(name=name, updates=history[-1].get("num_updates"),
                           value=None if value is None else float(value),
                           metric=checkpoint_cfg.get("best_checkpoint_metric", "loss"),
                           maximize=bool(checkpoint_cfg.get("maximize_best_checkpoint_metric", False)))


def run_summary(save_dir) -> str:
    """Two lines: the best and the last checkpoint of a run (those that exist)."""
    save_dir = Path(save_dir)
    lines = []
    for label, name in (("best", "checkpoint_best.pt"), ("last", "checkpoint_last.pt")):
        if (save_dir / name).is_file():
            lines.append(f"{label}: {read_facts(save_dir / name).describe()}")
    return "\n".join(lines) if lines else f"no checkpoint in {save_dir}"

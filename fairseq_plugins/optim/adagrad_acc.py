"""``adagrad_acc``: Adagrad whose accumulator starts at a given value (See et al.'s recipe).

See, Liu & Manning (2017), "Get To The Point", section 5 (Experiments): "We train using Adagrad with learning
rate 0.15 and an initial accumulator value of 0.1", with gradient clipping at a maximum norm of 2:

    fairseq-train DATA --user-dir fairseq_plugins --optimizer adagrad_acc --lr 0.15 \
        --adagrad-initial-accumulator 0.1 --clip-norm 2.0 ...

Adagrad, per parameter entry, with gradient g_t and learning rate lr:
    G_t = G_0 + sum_{k<=t} g_k^2                  (the accumulator)
    w_t = w_{t-1} - lr g_t / (sqrt(G_t) + eps)
fairseq's own ``adagrad`` starts at G_0 = 0.  Its first update is then lr g_1 / |g_1| = lr sign(g_1): every
parameter with a non-zero gradient moves by about the full learning rate (0.15), whatever the size of its
gradient, which is larger than most initial weights.  With G_0 = 0.1 the first update is
lr g_1 / sqrt(0.1 + g_1^2), about 0.47 g_1 for lr 0.15 and a small gradient: a step proportional to the
gradient, as in plain SGD, until the squared gradients outgrow the initial 0.1.

The update is torch.optim.Adagrad's (``initial_accumulator_value`` = ``--adagrad-initial-accumulator``,
``eps`` = torch's 1e-10, which is negligible next to sqrt(0.1); See et al.'s TensorFlow Adagrad has none).  Its
state (the accumulator ``sum`` and the ``step`` count of every parameter) is what fairseq saves in
``checkpoint_last.pt`` and restores on resume.  The learning rate is set by any fairseq ``--lr-scheduler``
(``fixed``, ``inverse_sqrt``...), as for fairseq's ``adagrad``.
"""
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import List

import torch
from omegaconf import II

from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer

SEE2017_INITIAL_ACCUMULATOR = 0.1  # See et al. (2017), section 5


@dataclass
class AdagradAccConfig(FairseqDataclass):
    adagrad_initial_accumulator: float = field(
        default=SEE2017_INITIAL_ACCUMULATOR,
        metadata={"help": "initial value of Adagrad's sum of squared gradients (See et al. 2017: 0.1; "
                          "0 = fairseq's adagrad)"},
    )
    weight_decay: float = field(default=0.0, metadata={"help": "weight decay (L2 penalty added to the gradient)"})
    lr: List[float] = II("optimization.lr")


def first_lr(lr) -> float:
    """fairseq's ``--lr`` is a list (one value per epoch for the fixed schedule); the optimizer starts at the first."""
    return float(lr[0]) if isinstance(lr, Collection) else float(lr)


def check_options(initial_accumulator: float, weight_decay: float, lr: float) -> None:
    """Raise ValueError naming the option when a value is out of range (torch's own messages name no option)."""
    checks = (
        ("--adagrad-initial-accumulator", initial_accumulator),
        ("--weight-decay", weight_decay),
        ("--lr", lr),
    )
    for option, value in checks:
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"adagrad_acc: {option} must be a finite number >= 0, got {value}")


@register_optimizer("adagrad_acc", dataclass=AdagradAccConfig)
class AdagradWithAccumulator(FairseqOptimizer):
    """torch.optim.Adagrad with fairseq's configuration and a configurable initial accumulator.

    Options: ``--lr`` (first value; default fairseq's 0.25, See et al. 0.15), ``--weight-decay`` (default 0),
    ``--adagrad-initial-accumulator`` (default 0.1, See et al.'s value; must be >= 0).
    """

    def __init__(self, cfg: AdagradAccConfig, params):
        super().__init__(cfg)
        config = self.optimizer_config
        check_options(config["initial_accumulator_value"], config["weight_decay"], config["lr"])
        self._optimizer = torch.optim.Adagrad(params, **config)

    @property
    def optimizer_config(self):
        """torch.optim.Adagrad's arguments from the fairseq options."""
        return {
            "lr": first_lr(self.cfg.lr),
            "weight_decay": self.cfg.weight_decay,
            "initial_accumulator_value": self.cfg.adagrad_initial_accumulator,
        }

    @property
    def supports_flat_params(self):
        return False

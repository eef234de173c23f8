"""``foreach_adam``: fairseq's ``adam``, same options, arithmetic and saved state, in multi-tensor operations.

    fairseq-train DATA --user-dir fairseq_plugins --optimizer foreach_adam --adam-betas '(0.9, 0.999)' ...

fairseq's ``adam`` without apex (fairseq/optim/adam.py's ``Adam``, what fairseq runs on a CPU and on a GPU without
NVIDIA's apex) updates one parameter tensor at a time: 7 arithmetic operations per tensor, 224 kernel launches per
update for the 32 tensors of the benchmark's ``pgn_lstm`` (scripts/bench).  On a GPU each launch costs microseconds
whatever its size, so that loop is a fixed cost of every update.  This optimizer makes the same update with
``torch._foreach_*`` operations over all tensors that share a device, a dtype and a step count: 7 operations per
update, one more each for weight decay, amsgrad and fp16/bf16 parameters.  On a GPU each one is a few multi-tensor
kernels.  On a CPU, where launches are cheap and all tensors at once leave the caches between operations (35-45 %
slower than fairseq's loop on this project's 2-core machine), the same operations run tensor by tensor, as in fairseq.
Gradient clipping (``--clip-norm``) likewise takes the norms of all tensors in one operation on a GPU.

The update (Kingma & Ba 2015, Algorithm 1, in fairseq's form, with Loshchilov & Hutter's decoupled weight decay as
fairseq applies it), for gradient g, step t, learning rate lr:
    m_t = beta1 m_{t-1} + (1 - beta1) g                                      (first moment)
    v_t = beta2 v_{t-1} + (1 - beta2) g^2                                    (second moment)
    w  <- w - lr wd w                                                        (when --weight-decay > 0)
    w  <- w - lr sqrt(1 - beta2^t) / (1 - beta1^t) * m_t / (sqrt(v_t) + eps)
eps is added to sqrt(v_t), not to the bias-corrected one, as in fairseq (torch.optim.Adam adds it to
sqrt(v_t / (1 - beta2^t)), a different update).  Each operation is the one fairseq's loop runs, so on a CPU the
parameters and moments are bit-identical to fairseq's ``adam`` (tests/test_foreach_adam.py); on a GPU the
multi-tensor kernels may round differently in the last bit.  fp16 and bf16 parameters (--memory-efficient-fp16)
are updated in float32 copies and written back, as fairseq does.  The state of each parameter (``step``,
``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq``) has fairseq's names and dtypes.
"""
import math
from collections import defaultdict
from dataclasses import dataclass

import torch
from fairseq import utils
from fairseq.optim import register_optimizer
from fairseq.optim.adam import FairseqAdam, FairseqAdamConfig
from fairseq.optim.fairseq_optimizer import FairseqOptimizer

HALF = (torch.float16, torch.bfloat16)


@dataclass
class ForeachAdamConfig(FairseqAdamConfig):
    pass


@register_optimizer("foreach_adam", dataclass=ForeachAdamConfig)
class FairseqForeachAdam(FairseqAdam):
    """fairseq's ``adam`` options (``--adam-betas``, ``--adam-eps``, ``--weight-decay``, ``--lr``) on ForeachAdam."""

    def __init__(self, cfg: ForeachAdamConfig, params):
        FairseqOptimizer.__init__(self, cfg)
        if cfg.fp16_adam_stats:
            raise ValueError("--optimizer foreach_adam keeps its moments in float32: --fp16-adam-stats needs "
                             "fairseq's adam with NVIDIA apex's FusedAdam")
        self._optimizer = ForeachAdam(params, **self.optimizer_config)

    def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
        """fairseq's ``clip_grad_norm_`` (the L2 norm of all gradients in float32; each gradient scaled by
        min(1, max_norm / (norm + 1e-6)) when max_norm > 0), its per-tensor norms in one multi-tensor operation
        where the update runs all at once (a GPU: one launch instead of one per tensor).  Elsewhere, and for
        fairseq's expert parameters or gradients on several devices, fairseq's own."""
        grads = [p.grad.detach() for p in self.params if p.grad is not None]
        if (len(grads) < 2 or not all_at_once(grads[0].device) or len({g.device for g in grads}) > 1
                or any(hasattr(p, "expert") for p in self.params)):
            return utils.clip_grad_norm_(self.params, max_norm, aggregate_norm_fn)
        total_norm = torch.norm(torch.stack(torch._foreach_norm(grads, 2, dtype=torch.float32)))
        if aggregate_norm_fn is not None:
            total_norm = aggregate_norm_fn(total_norm)
        if max_norm > 0:
            torch._foreach_mul_(grads, (float(max_norm) / (total_norm + 1e-6)).clamp_(max=1))
        return total_norm


def all_at_once(device: torch.device) -> bool:
    """Whether each operation runs over all tensors at once (a GPU: one launch) or tensor by tensor (a CPU: each
    tensor stays in the caches through its update)."""
    return device.type != "cpu"


class ForeachAdam(torch.optim.Optimizer):
    """Adam in fairseq's form, each step a few multi-tensor operations (module docstring).

    Args:
        params: the parameters, or parameter groups.
        lr: learning rate.
        betas: (beta1, beta2), the moments' decay rates.
        eps: added to sqrt(v_t).
        weight_decay: decoupled weight decay (w <- w - lr wd w).
        amsgrad: normalize by the running maximum of v_t (Reddi et al. 2018).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))

    @property
    def supports_memory_efficient_fp16(self):
        return True

    @property
    def supports_flat_params(self):
        return True

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for (device, _, _), params in self.same_kind(group).items():
                for chunk in [params] if all_at_once(device) else ([p] for p in params):
                    self.update(group, chunk)
        return loss

    def same_kind(self, group) -> dict:
        """The group's parameters that have a gradient, by (device, dtype, step): each set shares one bias
        correction and one multi-tensor operation."""
        kinds = defaultdict(list)
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("foreach_adam does not support sparse gradients (as fairseq's adam)")
            kinds[(p.device, p.dtype, self.state[p].get("step", 0))].append(p)
        return kinds

    def update(self, group, params) -> None:
        """One Adam step of ``params``, which share a device, a dtype and a step count."""
        amsgrad = group.get("amsgrad", False)
        beta1, beta2 = group["betas"]
        grads = [p.grad.float() if p.grad.dtype in HALF else p.grad for p in params]
        weights = [p.float() if p.dtype in HALF else p for p in params]  # float32 copies of fp16/bf16 ones
        states = [self.moments(p, w, amsgrad) for p, w in zip(params, weights)]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)  # m_t
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)  # v_t
        if amsgrad:
            maxima = [s["max_exp_avg_sq"] for s in states]
            torch._foreach_maximum_(maxima, exp_avg_sqs)
            exp_avg_sqs = maxima
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denom, group["eps"])
        step = states[0]["step"]
        step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        if group["weight_decay"] != 0:
            torch._foreach_add_(weights, weights, alpha=-group["weight_decay"] * group["lr"])
        torch._foreach_addcdiv_(weights, exp_avgs, denom, value=-step_size)
        halves = [(p, w) for p, w in zip(params, weights) if p.dtype in HALF]
        if halves:
            torch._foreach_copy_([p for p, _ in halves], [w for _, w in halves])

    def moments(self, param, weight, amsgrad: bool) -> dict:
        """The parameter's state, created at its first step (zeros like its float32 weight) or moved to that
        weight's device and dtype (a loaded checkpoint's), its step count advanced."""
        state = self.state[param]
        names = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if amsgrad else [])
        if not state:
            state["step"] = 0
            for name in names:
                state[name] = torch.zeros_like(weight)
        else:
            for name in names:
                if state[name].dtype != weight.dtype or state[name].device != weight.device:
                    state[name] = state[name].to(weight)
        state["step"] += 1
        return state

"""Training precision of the summarization task: bfloat16 through autocast, and fairseq's ``--bf16`` refused early.

fairseq 0.12.x's ``--bf16`` (and ``--memory-efficient-bf16``) is a TPU option: ``options.parse_args_and_arch``
sets ``--tpu`` with it, and the trainer then asks torch_xla for its device.  Without torch_xla that fails once
the model is built, as ``AttributeError: 'NoneType' object has no attribute 'xla_device'``, on a GPU and on a
CPU alike.

On a GPU (or a CPU), bfloat16 training goes through ``--bf16-autocast``: the task's train and valid steps run
the criterion under ``torch.autocast(dtype=torch.bfloat16)``, so matrix products and recurrent layers run in
bfloat16 while the weights, their gradients and the optimizer stay float32.  No loss scaler is needed:
bfloat16 has float32's exponent range.  fairseq's own train step cannot be reused for it, because it enters
``torch.cuda.amp.autocast(enabled=False)`` around the criterion whenever ``--amp`` is off, which switches an
outer CUDA autocast off again.
"""
import contextlib
import importlib.util
from typing import Iterator

import torch

BF16_REFUSED = (
    "--bf16 is a TPU option in fairseq 0.12.x (it sets --tpu and needs torch_xla, which is not installed). "
    "For bfloat16 on a GPU use --bf16-autocast (bfloat16 autocast in the summarization task's train step, "
    "float32 weights, no loss scaler); for float16, --fp16 or --amp.")


def check_precision_options(args, bf16_autocast: bool) -> None:
    """Raise a ValueError that names the working option for a precision request that cannot work: fairseq's
    ``--bf16`` without torch_xla, or ``--bf16-autocast`` together with another half-precision route.
    ``args`` is the training run's namespace (what a legacy model's config is)."""
    fairseq_bf16 = getattr(args, "bf16", False) or getattr(args, "memory_efficient_bf16", False)
    if fairseq_bf16 and importlib.util.find_spec("torch_xla") is None:
        raise ValueError(BF16_REFUSED)
    others = [name for name in ("fp16", "memory_efficient_fp16", "amp", "bf16") if getattr(args, name, False)]
    if bf16_autocast and others:
        flags = ", ".join("--" + name.replace("_", "-") for name in others)
        raise ValueError(f"--bf16-autocast cannot be combined with {flags}: choose one half-precision route")


def device_type(model: torch.nn.Module) -> str:
    """'cuda' or 'cpu': where the model's parameters are."""
    return next(model.parameters()).device.type


@contextlib.contextmanager
def bf16_autocast(model: torch.nn.Module, enabled: bool) -> Iterator[None]:
    """bfloat16 autocast on the model's device inside the block when ``enabled``."""
    if not enabled:
        yield
        return
    with torch.autocast(device_type=device_type(model), dtype=torch.bfloat16):
        yield


def autocast_train_step(sample, model, criterion, optimizer, update_num, ignore_grad=False):
    """fairseq's ``FairseqTask.train_step`` with the forward pass under bfloat16 autocast: (loss, sample size,
    logging output).  The backward pass runs outside autocast, on the graph autocast recorded."""
    model.train()
    model.set_num_updates(update_num)
    with torch.autograd.profiler.record_function("forward"), bf16_autocast(model, True):
        loss, sample_size, logging_output = criterion(model, sample)
    if ignore_grad:
        loss *= 0
    with torch.autograd.profiler.record_function("backward"):
        optimizer.backward(loss)
    return loss, sample_size, logging_output

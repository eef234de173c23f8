"""One gradient buffer for a tensor that every decoder step reads.

The attention reads the same encoder-side tensors at every decoder step: the projected keys (B x S x A) and
the encoder states (values, B x S x C).  Left to autograd, each step's backward pass returns a fresh gradient
of that size and autograd adds them up: T allocations and T additions through main memory per batch.  Here
the steps' backward functions add their share into one buffer (``StepGradient``, allocated once per batch,
at the first addition), and the identity function ``ShareAcrossSteps`` placed between the tensor and the
steps hands the sum to autograd.  Autograd runs that node after every step that used its output (it depends
on all of them), so the sum is complete by then.

    shared = share_across_steps(keys)          # before the decoder loop
    ...                                        # steps pass step_gradient(shared) to their autograd functions

Rows that leave the batch (a free-running decode with gradient, generation/sampling.py) take the rest of the
steps to a subset of the rows: ``select_rows(shared, index)`` gives them their own buffer, which is added
into the parent's rows once, when autograd is done with the subset.  Left to ``index_select``, each such
reordering would cost a zero-filled gradient of the parent's full size and one more addition of it.
"""
from typing import Optional

import torch
from torch import Tensor


class StepGradient:
    """The gradient of one tensor summed over the decoder steps (allocated at the first addition)."""

    def __init__(self):
        self.total: Optional[Tensor] = None

    def buffer(self, like: Tensor) -> Tensor:
        """The running sum, shaped like ``like`` (zeros the first time)."""
        if self.total is None:
            self.total = torch.zeros_like(like)
        return self.total

    def add(self, like: Tensor, start: int, end: int, rows: Tensor, whole: bool = False) -> None:
        """Adds ``rows`` to rows [start, end) of the sum (``whole``: they are all its rows)."""
        total = self.buffer(like)
        (total if whole else total[start:end]).add_(rows)

    def take(self) -> Optional[Tensor]:
        total, self.total = self.total, None
        return total


class ShareAcrossSteps(torch.autograd.Function):
    """Identity whose backward returns the StepGradient's sum (plus any gradient from other uses)."""

    @staticmethod
    def forward(ctx, tensor, gradient: StepGradient):
        ctx.gradient = gradient
        ctx.set_materialize_grads(False)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        total = ctx.gradient.take()
        if total is None:
            return grad, None
        return (total if grad is None else total.add_(grad)), None


def share_across_steps(tensor: Tensor) -> Tensor:
    """``tensor``, to be read at many decoder steps, with its gradient summed in one buffer; ``tensor`` itself
    when no gradient is needed, or when it already comes through ``share_across_steps`` (a decoder that wraps
    its memory at every incremental step then keeps adding into the buffer of the first wrap)."""
    if not (tensor.requires_grad and torch.is_grad_enabled()) or step_gradient(tensor) is not None:
        return tensor
    gradient = StepGradient()
    shared = ShareAcrossSteps.apply(tensor, gradient)
    shared.step_gradient = gradient
    return shared


class RowsOfShared(torch.autograd.Function):
    """``tensor.index_select(0, index)`` for a tensor that comes through ``share_across_steps``, itself read at
    many steps: its steps add into ``rows_gradient``, and the backward adds that sum (plus any gradient from
    other uses) into rows ``index`` of the parent's StepGradient, returning nothing to autograd.  Autograd runs
    the parent's ``ShareAcrossSteps`` after this node (it depends on it), so the parent's sum is complete."""

    @staticmethod
    def forward(ctx, tensor, index, parent: StepGradient, rows_gradient: StepGradient):
        ctx.parent, ctx.rows_gradient, ctx.index = parent, rows_gradient, index
        ctx.like = tensor  # the parent's shape, for its buffer (nothing of it is read)
        ctx.set_materialize_grads(False)
        return tensor.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        total = ctx.rows_gradient.take()
        if grad is not None:
            total = grad if total is None else total.add_(grad)
        if total is not None:
            ctx.parent.buffer(ctx.like).index_add_(0, ctx.index, total)
        return None, None, None, None


def select_rows(tensor: Tensor, index: Tensor, dim: int = 0) -> Tensor:
    """``tensor.index_select(dim, index)``; for a tensor from ``share_across_steps`` (rows, ``dim`` 0) the rows
    share one buffer of their own, summed into the parent's (``RowsOfShared``)."""
    parent = step_gradient(tensor)
    if parent is None or dim != 0 or not torch.is_grad_enabled():
        return tensor.index_select(dim, index)
    gradient = StepGradient()
    rows = RowsOfShared.apply(tensor, index, parent, gradient)
    rows.step_gradient = gradient
    return rows


def step_gradient(tensor: Tensor) -> Optional[StepGradient]:
    """The StepGradient of a tensor from ``share_across_steps``, else None."""
    return getattr(tensor, "step_gradient", None)


def share_each(tensors):
    """A dict's tensors that need a gradient through ``share_across_steps`` (a new dict; anything else, and a
    ``tensors`` that is no dict, as it is): e.g. an encoder output read at every step of incremental decoding
    with gradient (generation/sampling.py)."""
    if not isinstance(tensors, dict):
        return tensors
    return {key: share_across_steps(value) if torch.is_tensor(value) else value for key, value in tensors.items()}

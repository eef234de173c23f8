"""The additive attention score with coverage, computed block by block in cache.

    e_i^t = v^T tanh(k_i + q_t + w_c c_i^t)          (See et al. 2017, See eq 11; See eq 1 without the coverage term)

where k_i = W_h h_i + b_attn (computed once per source), q_t = W_s s_t (once per step) and c^t the coverage.

Why a custom autograd function: the tensor inside tanh is B x S x A, the largest one of a decoder step.  Written
as plain tensor operations, every step allocates it twice (sum, tanh), makes five passes over it through main
memory and keeps the tanh output alive until the backward pass, which then makes about nine more (the tanh and
linear backward, the accumulation of the keys' gradient): docs/design.md has the measurement.

Here the batch is processed a few rows at a time, so each block (<= ``BLOCK_FLOATS`` floats per thread, by
default a share of the L2 cache: accelerated/cpu_cache.py) stays in the CPU cache from the sum to the dot product
with v; nothing of size B x S x A is kept for the backward pass.  The backward pass recomputes tanh block by
block and adds the keys' gradient, still in cache, to the sum over all steps (accelerated/step_gradient.py):

    t = tanh(f),  f = k + q + w_c c
    dL/df = (1 - t^2) * (dL/de  outer  v)
    dL/dk = dL/df,   dL/dq = sum_i dL/df,   dL/dc = dL/df . w_c,   dL/dw_c = sum_{b,i} c * dL/df,
    dL/dv = sum_{b,i} dL/de * t

On a GPU the whole batch is one block (there, fewer and larger kernels are what counts).
"""
import threading
from typing import Optional

import torch
from torch import Tensor

from fairseq_plugins.accelerated.cpu_cache import block_size
from fairseq_plugins.accelerated.precision import outside_autocast
from fairseq_plugins.accelerated.step_gradient import StepGradient, step_gradient

# Floats per thread in one block.  None: from this CPU's L2 cache (cpu_cache.block_size, read at the first
# CPU call).  Tests and scripts/bench/block_sweep.py set it to try other sizes.
BLOCK_FLOATS = None


def _block_rows(keys: Tensor) -> int:
    """Rows per block: about BLOCK_FLOATS per CPU thread (torch splits each block's operations over its
    threads); the whole batch on a GPU."""
    bsz, src_len, attn_dim = keys.size()
    if keys.device.type != "cpu":
        return bsz
    floats = BLOCK_FLOATS if BLOCK_FLOATS is not None else block_size()[0]
    return max(1, min(bsz, floats * torch.get_num_threads() // max(1, src_len * attn_dim)))


_workspaces = threading.local()


def _block_buffer(keys: Tensor, rows: int) -> Tensor:
    """A rows x S x A scratch block, reused from call to call (per thread, device and dtype): allocating a
    fresh one at every step made the allocator hand memory back to the kernel and fault it in again, about
    10,000 page faults per training step on LCSTS batches.  The same shape as the last call's gets the same
    view (no new tensor operation at every step)."""
    _, src_len, attn_dim = keys.size()
    shape = (rows, src_len, attn_dim)
    if capturing(keys):  # a CUDA graph keeps its own: a cached block could later be freed under the graph
        return keys.new_empty(shape)
    cache = _workspaces.__dict__.setdefault("blocks", {})
    key = (keys.device, keys.dtype)
    flat, view = cache.get(key, (None, None))
    if view is not None and tuple(view.shape) == shape:
        return view
    if flat is None or flat.numel() < rows * src_len * attn_dim:
        flat = keys.new_empty(rows * src_len * attn_dim)
    view = flat[: rows * src_len * attn_dim].view(shape)
    cache[key] = (flat, view)
    return view


def capturing(tensor: Tensor) -> bool:
    """Whether a CUDA graph is being captured on the current stream of TENSOR's GPU (accelerated/step_graphs.py)."""
    return tensor.is_cuda and torch.cuda.is_current_stream_capturing()


def _ones_like(tensor: Tensor) -> Tensor:
    """A tensor of ones of ``tensor``'s shape, dtype and device, kept between calls (read, never written):
    at every decoding step the same shape comes back."""
    if capturing(tensor):
        return torch.ones_like(tensor)
    cache = _workspaces.__dict__.setdefault("ones", {})
    key = (tuple(tensor.shape), tensor.dtype, tensor.device)
    if key not in cache:
        cache.clear()
        cache[key] = torch.ones(key[0], dtype=tensor.dtype, device=tensor.device)
    return cache[key]


def scores_operands(query: Tensor, coverage: Optional[Tensor], coverage_weight: Optional[Tensor]):
    """[1, c_i] and [q; w_c] (B x S x 2, B x 2 x A), so that k + q + w_c c is one ``baddbmm``; only [q] without
    coverage (``coverage_weight`` None: no weights, k + q)."""
    if coverage_weight is None:
        return None, query.unsqueeze(1)  # k + q: no weights
    bsz, attn_dim = query.size()
    coverage = coverage if coverage.dtype == query.dtype else coverage.to(query.dtype)
    return ones_and(coverage), torch.stack([query, coverage_weight.expand(bsz, attn_dim)], dim=1)  # B x 2 x A


def ones_and(coverage: Tensor) -> Tensor:
    """[1, c_i]: B x S -> B x S x 2, the first of the scores' operands."""
    return torch.stack([_ones_like(coverage), coverage], dim=2)


def _tanh_block(out: Tensor, keys: Tensor, weights: Optional[Tensor], terms: Tensor) -> Tensor:
    """out <- tanh(k + q + w_c c) for one block of rows (``weights`` None: tanh(k + q)); n x S x A.

    On a CPU, in float32/float64, as tanh(f) = 2 sigmoid(2f) - 1 with the 2f from the same ``baddbmm``: torch's
    CPU tanh runs at scalar speed whatever the vector instruction set, its sigmoid about ten times faster
    (docs/design.md).  The identity is exact; in float32 it costs at most 2e-7 absolute error
    (near f = 0).  Half precision and GPUs keep torch's tanh (there the cancellation near 0 would cost
    digits, and the GPU's tanh is fast)."""
    if keys.device.type == "cpu" and keys.dtype in (torch.float32, torch.float64):
        if weights is None:
            torch.add(keys, terms, out=out).mul_(2.0)  # 2f
        else:
            torch.baddbmm(keys, weights, terms, beta=2.0, alpha=2.0, out=out)  # 2f
        return out.sigmoid_().mul_(2.0).sub_(1.0)  # 2 sigmoid(2f) - 1 = tanh(f)
    if weights is None:
        return torch.add(keys, terms, out=out).tanh_()
    return torch.baddbmm(keys, weights, terms, out=out).tanh_()


def scores_step(keys: Tensor, operands, v: Tensor) -> Tensor:
    """e = v^T tanh(k + q + w_c c), block by block, without autograd: B x S.  keys: B x S x A (contiguous);
    operands: ``scores_operands``' pair; v: A; all of the keys' dtype."""
    bsz, src_len, attn_dim = keys.size()
    weights, terms = operands
    rows = _block_rows(keys)
    block = _block_buffer(keys, rows)
    if rows >= bsz:  # one block (a GPU, or a small batch)
        return torch.matmul(_tanh_block(block, keys, weights, terms), v)  # B x S
    scores = keys.new_empty(bsz, src_len)  # B x S
    for start in range(0, bsz, rows):
        end = min(start + rows, bsz)
        tanh = _tanh_block(block[: end - start], keys[start:end], _rows(weights, start, end), terms[start:end])
        torch.mv(tanh.view(-1, attn_dim), v, out=scores[start:end].view(-1))  # v^T tanh(...)
    return scores


def _rows(tensor: Optional[Tensor], start: int, end: int) -> Optional[Tensor]:
    return None if tensor is None else tensor[start:end]


class ScoreGradients:
    """Where ``scores_backward_step`` adds the gradients of the step-independent inputs: dL/dk (a StepGradient,
    or ``keys`` to write a fresh B x S x A tensor), and dL/dv and dL/dw_c per batch row (B x 1 x A each; summed
    over the rows by ``totals``)."""

    def __init__(self, keys: Tensor, coverage: bool, key_gradient: Optional[StepGradient]):
        bsz, _, attn_dim = keys.size()
        self.key_gradient, self.all_keys = key_gradient, keys
        self.keys = torch.empty_like(keys) if key_gradient is None else None  # B x S x A
        self.v = keys.new_zeros(bsz, 1, attn_dim)  # B x 1 x A
        self.coverage_weight = keys.new_zeros(bsz, 1, attn_dim) if coverage else None  # B x 1 x A

    def totals(self):
        """dL/dk (None when added to the StepGradient), dL/dv (A), dL/dw_c (A or None)."""
        weight = None if self.coverage_weight is None else self.coverage_weight.sum(dim=(0, 1))
        return self.keys, self.v.sum(dim=(0, 1)), weight


def scores_backward_step(grad_scores: Tensor, keys: Tensor, operands, coverage_weight: Optional[Tensor], v: Tensor,
                         grads: ScoreGradients):
    """The backward of ``scores_step`` for dL/de = ``grad_scores`` (B x S), tanh recomputed block by block,
    with f = k + q + w_c c and t = tanh(f):

        dL/df = (1 - t^2) (dL/de outer v),  dL/dk = dL/df,  [dL/dq; per-row dL/dw_c] = [1, c]^T dL/df,
        dL/dc = dL/df w_c,  per-row dL/dv = dL/de^T t

    Adds dL/dk, dL/dv and dL/dw_c into ``grads``.  Returns dL/dq (B x A) and dL/dc (B x S; None without
    coverage)."""
    bsz = keys.size(0)
    weights, terms = operands
    grad_scores = grad_scores.to(keys.dtype).unsqueeze(2)  # B x S x 1
    rows = _block_rows(keys)
    if rows >= bsz:  # one block (a GPU, or a small batch)
        return _block_backward(grad_scores, keys, weights, terms, coverage_weight, v, grads, 0, bsz)
    parts = [_block_backward(grad_scores[start:start + rows], keys[start:start + rows],
                             _rows(weights, start, start + rows), terms[start:start + rows], coverage_weight, v,
                             grads, start, min(start + rows, bsz))
             for start in range(0, bsz, rows)]
    grad_query = torch.cat([query for query, _ in parts])
    return grad_query, (None if weights is None else torch.cat([coverage for _, coverage in parts]))


def _block_backward(grad_e, keys, weights, terms, coverage_weight, v, grads: ScoreGradients, start: int,
                    end: int):
    """``scores_backward_step`` for rows [start, end): grad_e n x S x 1, keys n x S x A, weights n x S x 2
    (or None), terms n x K x A."""
    whole = start == 0 and end == grads.v.size(0)
    tanh = _tanh_block(_block_buffer(keys, end - start), keys, weights, terms)  # n x S x A   t
    grad_v = grads.v if whole else grads.v[start:end]
    grad_v.baddbmm_(grad_e.transpose(1, 2), tanh)  # n x 1 x A   sum_i dL/de_i t_i
    out = tanh if grads.keys is None else (grads.keys if whole else grads.keys[start:end])
    grad_f = torch.addcmul(grad_e, tanh.mul_(tanh), grad_e, value=-1.0, out=out).mul_(v)  # (1 - t^2) dL/de v
    if grads.key_gradient is not None:
        grads.key_gradient.add(grads.all_keys, start, end, grad_f, whole)
    if weights is None:
        return grad_f.sum(dim=1), None  # n x A
    both = torch.bmm(weights.transpose(1, 2), grad_f)  # n x 2 x A   [dL/dq; sum_i c_i dL/df_i]
    (grads.coverage_weight if whole else grads.coverage_weight[start:end]).add_(both[:, 1:])
    return both[:, 0], torch.matmul(grad_f, coverage_weight)  # n x A, n x S


class AdditiveScores(torch.autograd.Function):
    """e = v^T tanh(k + q + w_c c) for every batch row and source position: B x S.  See the module docstring."""

    @staticmethod
    def forward(ctx, keys, query, coverage, coverage_weight, v, key_gradient):
        """keys: B x S x A; query: B x A; coverage: B x S or None; coverage_weight: A or None; v: A;
        key_gradient: the StepGradient that sums dL/dk over the steps, or None to return dL/dk."""
        keys = keys.contiguous()
        ctx.save_for_backward(keys, query, coverage, coverage_weight, v)
        ctx.key_gradient = key_gradient
        return scores_step(keys, scores_operands(query, coverage, coverage_weight), v)

    @staticmethod
    @outside_autocast
    def backward(ctx, grad_scores):
        keys, query, coverage, coverage_weight, v = ctx.saved_tensors
        grads = ScoreGradients(keys, coverage_weight is not None, ctx.key_gradient)
        operands = scores_operands(query, coverage, coverage_weight)
        grad_query, grad_coverage = scores_backward_step(grad_scores, keys, operands, coverage_weight, v, grads)
        grad_keys, grad_v, grad_weight = grads.totals()
        if grad_coverage is not None:
            grad_coverage = grad_coverage.to(coverage.dtype)
        return grad_keys, grad_query, grad_coverage, grad_weight, grad_v, None


def additive_scores(keys: Tensor, query: Tensor, coverage: Optional[Tensor], coverage_weight: Optional[Tensor],
                    v: Tensor) -> Tensor:
    """e_i = v^T tanh(k_i + q + w_c c_i)  (See eq 11; See eq 1 when ``coverage`` is None).

    Args:
        keys: B x S x A, the projected encoder states k_i = W_h h_i + b_attn (through ``share_across_steps``
            when they are attended to at several steps).
        query: B x A, the projected decoder state q = W_s s_t.
        coverage: B x S, c^t, or None for no coverage term.
        coverage_weight: A, w_c (ignored without coverage).
        v: A.
    Returns:
        B x S scores (before masking and softmax).
    """
    if coverage is None:
        coverage_weight = None
    # One dtype inside (under mixed precision the query or v may differ from the keys), autocast off: the
    # function's own operations write into preallocated blocks of the keys' dtype.
    query, coverage, coverage_weight, v = (None if t is None else t.to(keys.dtype)
                                           for t in (query, coverage, coverage_weight, v))
    with torch.autocast(device_type=keys.device.type, enabled=False):
        return AdditiveScores.apply(keys, query, coverage, coverage_weight, v, step_gradient(keys))

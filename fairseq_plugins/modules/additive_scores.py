"""The additive attention score with coverage, computed block by block in cache.

    e_i^t = v^T tanh(k_i + q_t + w_c c_i^t)          (See et al. 2017, eq 11; eq 1 without the coverage term)

where k_i = W_h h_i + b_attn (computed once per source), q_t = W_s s_t (once per step) and c^t the coverage.

Why a custom autograd function: the tensor inside tanh is B x S x A, the largest one of a decoder step.  Written
as plain tensor operations, every step allocates it twice (sum, tanh), makes five passes over it through main
memory and keeps the tanh output alive until the backward pass, which then makes about nine more (the tanh and
linear backward, the accumulation of the keys' gradient).  Measured on a 2-core CPU at B x S x A = 160 x 110
x 512, one forward step took 38 ms that way and 7 ms here.

Here the batch is processed a few rows at a time, so each block (<= ``BLOCK_FLOATS`` floats per thread, by
default a share of the L2 cache: modules/cpu_cache.py) stays in the CPU cache from the sum to the dot product
with v; nothing of size B x S x A is kept for the backward pass.  The backward pass recomputes tanh block by
block and adds the keys' gradient, still in cache, to the sum over all steps (modules/step_gradient.py):

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

from fairseq_plugins.modules.cpu_cache import block_size
from fairseq_plugins.modules.step_gradient import step_gradient

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
    10,000 page faults per training step on LCSTS batches."""
    _, src_len, attn_dim = keys.size()
    size = rows * src_len * attn_dim
    cache = _workspaces.__dict__.setdefault("blocks", {})
    key = (keys.device, keys.dtype)
    if key not in cache or cache[key].numel() < size:
        cache[key] = keys.new_empty(size)
    return cache[key][:size].view(rows, src_len, attn_dim)


def _step_operands(keys: Tensor, query: Tensor, coverage: Optional[Tensor], coverage_weight: Optional[Tensor]):
    """[1, c_i] and [q; w_c] (B x S x 2, B x 2 x A), so that k + q + w_c c is one ``baddbmm``; only [1] and [q]
    without coverage."""
    bsz, src_len, attn_dim = keys.size()
    weights = [keys.new_ones(bsz, src_len)]  # B x S
    terms = [query]  # B x A
    if coverage is not None:
        weights.append(coverage.to(keys.dtype))  # B x S
        terms.append(coverage_weight.expand(bsz, attn_dim))  # B x A
    return torch.stack(weights, dim=2), torch.stack(terms, dim=1)  # B x S x K, B x K x A


def _tanh_block(out: Tensor, keys: Tensor, weights: Tensor, terms: Tensor) -> Tensor:
    """out <- tanh(k + q + w_c c) for one block of rows; n x S x A.

    On a CPU, in float32/float64, as tanh(f) = 2 sigmoid(2f) - 1 with the 2f from the same ``baddbmm``: torch's
    CPU tanh runs at scalar speed (measured 0.4 G floats/s on one AMD EPYC core, torch 2.13, whatever the
    vector instruction set), its sigmoid about ten times faster, and tanh was the largest single operator of a
    pgn_lstm training step (16% of it).  The identity is exact; in float32 it costs at most 2e-7 absolute error
    (near f = 0).  Half precision and GPUs keep torch's tanh (there the cancellation near 0 would cost
    digits, and the GPU's tanh is fast)."""
    if keys.device.type == "cpu" and keys.dtype in (torch.float32, torch.float64):
        torch.baddbmm(keys, weights, terms, beta=2.0, alpha=2.0, out=out)  # 2f
        return out.sigmoid_().mul_(2.0).sub_(1.0)  # 2 sigmoid(2f) - 1 = tanh(f)
    return torch.baddbmm(keys, weights, terms, out=out).tanh_()


class AdditiveScores(torch.autograd.Function):
    """e = v^T tanh(k + q + w_c c) for every batch row and source position: B x S.  See the module docstring."""

    @staticmethod
    def forward(ctx, keys, query, coverage, coverage_weight, v, key_gradient):
        """keys: B x S x A; query: B x A; coverage: B x S or None; coverage_weight: A or None; v: A;
        key_gradient: the StepGradient that sums dL/dk over the steps, or None to return dL/dk."""
        keys = keys.contiguous()
        bsz, src_len, attn_dim = keys.size()
        weights, terms = _step_operands(keys, query, coverage, coverage_weight)
        rows = _block_rows(keys)
        block = _block_buffer(keys, rows)
        scores = keys.new_empty(bsz, src_len)  # B x S
        for start in range(0, bsz, rows):
            end = min(start + rows, bsz)
            tanh = _tanh_block(block[: end - start], keys[start:end], weights[start:end], terms[start:end])
            torch.mv(tanh.view(-1, attn_dim), v, out=scores[start:end].view(-1))  # v^T tanh(...)
        ctx.save_for_backward(keys, query, coverage, coverage_weight, v)
        ctx.key_gradient = key_gradient
        return scores

    @staticmethod
    @torch.autocast(device_type="cuda", enabled=False)
    @torch.autocast(device_type="cpu", enabled=False)
    def backward(ctx, grad_scores):
        keys, query, coverage, coverage_weight, v = ctx.saved_tensors
        bsz, src_len, attn_dim = keys.size()
        grad_scores = grad_scores.contiguous().to(keys.dtype)  # B x S
        weights, terms = _step_operands(keys, query, coverage, coverage_weight)
        rows = _block_rows(keys)
        block = _block_buffer(keys, rows)
        shared = ctx.key_gradient
        grad_keys = None if shared is not None else torch.empty_like(keys)  # B x S x A: dL/df = dL/dk
        grad_query = query.new_empty(bsz, attn_dim)  # B x A
        grad_coverage = keys.new_empty(bsz, src_len) if coverage is not None else None  # B x S
        grad_v = v.new_zeros(attn_dim)
        grad_weight = v.new_zeros(attn_dim) if coverage is not None else None
        neg_v = v.neg()
        for start in range(0, bsz, rows):
            end = min(start + rows, bsz)
            tanh = _tanh_block(block[: end - start], keys[start:end], weights[start:end], terms[start:end])
            grad_e = grad_scores[start:end].unsqueeze(2)  # n x S x 1
            grad_v.addmv_(tanh.view(-1, attn_dim).t(), grad_e.reshape(-1))  # sum dL/de * t
            out = tanh if shared is not None else grad_keys[start:end]
            grad_f = torch.mul(tanh.mul_(tanh).sub_(1.0), grad_e, out=out).mul_(neg_v)  # (1 - t^2)(dL/de outer v)
            torch.sum(grad_f, dim=1, out=grad_query[start:end])
            if coverage is not None:
                flat_f = grad_f.view(-1, attn_dim)  # nS x A
                torch.mv(flat_f, coverage_weight, out=grad_coverage[start:end].view(-1))
                grad_weight.addmv_(flat_f.t(), weights[start:end, :, 1].reshape(-1))  # sum c * dL/df
            if shared is not None:
                shared.add(keys, start, end, grad_f)
        if grad_coverage is not None:
            grad_coverage = grad_coverage.to(coverage.dtype)
        return grad_keys, grad_query, grad_coverage, grad_weight, grad_v, None


def additive_scores(keys: Tensor, query: Tensor, coverage: Optional[Tensor], coverage_weight: Optional[Tensor],
                    v: Tensor) -> Tensor:
    """e_i = v^T tanh(k_i + q + w_c c_i)  (See et al. eq 11; eq 1 when ``coverage`` is None).

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

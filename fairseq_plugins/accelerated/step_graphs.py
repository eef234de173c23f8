"""The fused recurrence (accelerated/fused_steps.py) as CUDA graphs: each batch shape's forward and backward loops
captured once, then replayed.

On a GPU a step of the loop is a few dozen small kernels whose launches cost the host more than their arithmetic
costs the GPU.  A CUDA graph records the kernels of the whole loop once and replays them with one launch.  A graph
is tied to the shapes and addresses of its tensors, so:
  * shapes are rounded up to buckets (``BUCKETS``: documents and steps to multiples of 8, source positions to
    a multiple of 16), and batches of similar sizes share a graph.  The padding is inert: padded source positions
    are masked, padded rows attend to zeros, padded steps come after the real ones and get no gradient;
  * each captured shape keeps static tensors: a call copies its inputs in, replays, and copies the results out,
    so the next batch can reuse the graph while autograd still holds this one's results.  What the backward
    reads is kept per call, and copied back in before the backward's replay;
  * ``GraphCache`` keeps the captured shapes up to a memory budget, dropping the least recently used.

The numbers are the eager loop's, up to the order of floating-point sums in the padded products
(tests/test_step_graphs.py).  ``Replayed(eager=True)`` runs the same copies and the loops themselves instead of
a graph: the bookkeeping tested on a CPU.
"""
from collections import OrderedDict
from typing import List, NamedTuple, Optional

import torch
from torch import Tensor

from fairseq_plugins.accelerated.fused_steps import (BackwardInputs, Memory, OutputGradients, StepWeights,
                                                  backward_loop, check_shapes, computation_inputs, gradient_sizes,
                                                  loop_inputs, run_loop)
from fairseq_plugins.accelerated.precision import outside_autocast

BUCKETS = (8, 8, 16)  # documents, steps, source positions are rounded up to multiples of these
MEMORY_SHARE = 0.5  # of the GPU's memory, at most, for the captured shapes of one GraphCache


def round_up(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


class Shape(NamedTuple):
    bsz: int
    steps: int
    source: int

    def bucket(self) -> "Shape":
        return Shape(*(round_up(size, multiple) for size, multiple in zip(self, BUCKETS)))


def copy_tree(dest, src) -> None:
    """Copies the tensors of SRC into those of DEST, two nests of tuples, lists, dicts and None alike."""
    if isinstance(dest, Tensor):
        dest.copy_(src)
    elif isinstance(dest, dict):
        for key in dest:
            copy_tree(dest[key], src[key])
    elif isinstance(dest, (list, tuple)):
        for d, s in zip(dest, src):
            copy_tree(d, s)


class Replayed:
    """A function of static tensors, captured as a CUDA graph (or, ``eager``, run again at each replay), with
    the results of its capture: each replay rewrites them in place."""

    def __init__(self, fn, eager: bool = False):
        self.fn, self.eager = fn, eager
        if eager:
            self.outputs = fn()
            return
        side = torch.cuda.Stream()  # cuBLAS's and the allocator's first calls must not be captured
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = fn()

    def replay(self):
        if self.eager:
            copy_tree(self.outputs, self.fn())
        else:
            self.graph.replay()
        return self.outputs


def fill(static: Tensor, real: Optional[Tensor]) -> None:
    """static <- zeros, with REAL in its leading corner (nothing: all zeros)."""
    static.zero_()
    if real is not None:
        static[tuple(slice(0, size) for size in real.shape)].copy_(real)


def fill_mask(static: Tensor, real: Optional[Tensor], shape: Shape) -> None:
    """The padded batch's mask: the real rows' mask, True at the padded source positions of real rows; padded
    rows unmasked (they attend uniformly to zero keys and values, and stay finite)."""
    static.zero_()
    static[:shape.bsz, shape.source:] = True
    if real is not None:
        static[:shape.bsz, :shape.source].copy_(real)


def corner(tensor: Tensor, sizes: tuple) -> Tensor:
    """The leading SIZES of TENSOR's first dimensions, as a new tensor."""
    return tensor[tuple(slice(0, size) for size in sizes)].clone()


class Saved(NamedTuple):
    """What one call's backward reads that its forward made, padded, as copies: the cell activations, the cells,
    tanh of the cells (None on a GPU), the coverage weights [1, c^t] and the per-step score operands [q; w_c]
    stacked (B x T x K x A), and the outputs states, contexts, attn."""

    acts: Tensor
    cells: Tensor
    tanh_cells: Optional[Tensor]
    coverage_weights: Tensor
    terms: Tensor
    outputs: List[Tensor]


class Call(NamedTuple):
    """One call's real inputs (references, no copies) and shape, for its backward."""

    weights: StepWeights
    memory: Memory
    start: List[Tensor]
    shape: Shape
    number: int


class Captured:
    """One bucket's forward and backward loops and their static tensors (module docstring).

    Args:
        bucket: the padded shape (documents, steps, source positions).
        gates_x, weights, memory, start: a call's tensors, for the other sizes and the dtype (accelerated/fused_steps).
        accumulate: add each step's attention to the coverage (See eq 10).
        eager: run the loops instead of replaying graphs (a CPU's test of the bookkeeping).
    """

    def __init__(self, bucket: Shape, gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor],
                 accumulate: bool, eager: bool = False):
        self.bucket, self.accumulate, self.calls, self.loaded = bucket, accumulate, 0, None
        bsz, steps, source = bucket
        zeros = gates_x.detach().new_zeros
        self.gates_x = zeros(bsz, steps, gates_x.size(2))
        self.weights = StepWeights(*(None if w is None else w.detach().clone() for w in weights))
        self.memory = Memory(zeros(bsz, source, memory.keys.size(2)), zeros(bsz, source, memory.values.size(2)),
                             torch.zeros(bsz, source, dtype=torch.bool, device=gates_x.device))
        self.start = [zeros(bsz, start[0].size(1)), zeros(bsz, start[1].size(1)), zeros(bsz, start[2].size(1)),
                      zeros(bsz, source)]
        self.forward_graph = Replayed(self.forward_program, eager)
        self.saved_in = self.twin(self.keep(*self.forward_graph.outputs))
        self.grads_in = [torch.zeros_like(x) for x in self.forward_graph.outputs[0][:4]] + [
            torch.zeros_like(self.start[1]), torch.zeros_like(self.start[3])]
        self.backward_graph = Replayed(self.backward_program, eager)

    def forward_program(self):
        saved = {}
        outputs = run_loop(self.gates_x, self.weights, self.memory, self.start, self.accumulate, saved)
        return outputs, saved

    def backward_program(self):
        saved = backward_inputs(self.saved_in, self.accumulate, self.weights, self.memory, self.start)
        return backward_loop(saved, self.grads_in[:4], self.grads_in[4], self.grads_in[5])

    @staticmethod
    def keep(outputs, saved: dict) -> Saved:
        """Copies of what the backward reads, from the forward's static outputs and saved tensors."""
        terms = torch.stack([pair[1] for pair in saved["operands"]], dim=1)  # B x T x K x A
        return Saved(saved["acts"].clone(), saved["cells"].clone(),
                     None if saved["tanh_cells"] is None else saved["tanh_cells"].clone(),
                     saved["coverage_weights"].clone(), terms, [x.clone() for x in outputs[:3]])

    @staticmethod
    def twin(saved: Saved) -> Saved:
        return Saved(*(None if x is None else torch.zeros_like(x) for x in saved[:5]),
                     [torch.zeros_like(x) for x in saved.outputs])

    def load(self, weights: StepWeights, memory: Memory, start: List[Tensor], shape: Shape) -> None:
        """Copies a call's inputs into the static ones (gates_x apart): what both loops read."""
        fill(self.memory.keys, memory.keys)
        fill(self.memory.values, memory.values)
        fill_mask(self.memory.padding_mask, memory.padding_mask, shape)
        for static, real in zip(self.start, start):
            fill(static, real)
        for static, real in zip(self.weights, weights):
            if static is not None:
                static.copy_(real)

    def forward(self, gates_x, weights: StepWeights, memory: Memory, start: List[Tensor]):
        """Replays the forward for a call: (run_loop's outputs for its real shape, what its backward needs)."""
        shape = Shape(gates_x.size(0), gates_x.size(1), memory.keys.size(1))
        self.calls += 1
        fill(self.gates_x, gates_x)
        self.load(weights, memory, start, shape)
        self.loaded = self.calls
        outputs, saved = self.forward_graph.replay()
        return self.real_outputs(outputs, saved, shape), (self.keep(outputs, saved),
                                                           Call(weights, memory, start, shape, self.calls))

    def real_outputs(self, outputs, saved: dict, shape: Shape):
        """run_loop's outputs for the real shape, as new tensors: states, contexts, attn, coverage (B x T x .),
        and the last cell and coverage (after step T, not after the padded steps)."""
        bsz, steps, source = shape
        states, contexts, attn, coverage, _, _ = outputs
        last_coverage = (saved["coverage_weights"][:bsz, steps, :source, 1] if self.accumulate
                         else self.start[3][:bsz, :source]).clone()
        return (corner(states, (bsz, steps)), corner(contexts, (bsz, steps)), corner(attn, shape),
                corner(coverage, shape), saved["cells"][:bsz, steps - 1].clone(), last_coverage)

    def backward(self, kept: Saved, call: Call, grad_outputs, grad_cell, grad_last_coverage):
        """The gradients of a call's inputs (FusedSteps.backward's, after ``accumulate``)."""
        shape = call.shape
        if (grad_cell is not None or grad_last_coverage is not None) and shape.steps != self.bucket.steps:
            return eager_backward(kept, call, self.accumulate, grad_outputs, grad_cell, grad_last_coverage)
        if self.loaded != call.number:  # another call's forward replayed since: its inputs are loaded
            self.load(call.weights, call.memory, call.start, shape)
            self.loaded = call.number
        copy_tree(self.saved_in, kept)
        for static, real in zip(self.grads_in, [*grad_outputs, grad_cell, grad_last_coverage]):
            fill(static, real)
        grads = self.backward_graph.replay()
        real = gradient_sizes(*shape)
        return tuple(None if g is None else corner(g, cut) if cut else g.clone() for g, cut in zip(grads, real))


def backward_inputs(saved: Saved, accumulate: bool, weights: StepWeights, memory: Memory, start: List[Tensor]
                    ) -> BackwardInputs:
    """What backward_loop reads (run_loop's ``saved`` and FusedSteps' inputs and outputs), from one call's kept
    tensors and the loop's inputs."""
    return BackwardInputs(saved.acts, saved.cells, saved.tanh_cells, operands(saved), accumulate, weights, memory,
                          start, *saved.outputs[:3])


def operands(saved: Saved) -> list:
    """The per-step score operands ([1, c^t], [q; w_c]) as run_loop kept them, views of the stacked copies
    (without a coverage weight, (None, [q]))."""
    steps = saved.terms.size(1)
    if saved.terms.size(2) == 1:
        return [(None, saved.terms[:, t]) for t in range(steps)]
    return [(saved.coverage_weights[:, t], saved.terms[:, t]) for t in range(steps)]


def eager_backward(kept: Saved, call: Call, accumulate: bool, grad_outputs, grad_cell, grad_last_coverage):
    """backward_loop on the real parts of a call's copies, without a graph: for a gradient of the last cell or
    coverage when the steps were padded (the graph's loop would add it after the padded steps)."""
    bsz, steps, source = call.shape
    real = Saved(corner(kept.acts, (bsz, steps)), corner(kept.cells, (bsz, steps)),
                 None if kept.tanh_cells is None else corner(kept.tanh_cells, (bsz, steps)),
                 corner(kept.coverage_weights, (bsz, steps + 1, source)), corner(kept.terms, (bsz, steps)),
                 [corner(kept.outputs[0], (bsz, steps)), corner(kept.outputs[1], (bsz, steps)),
                  corner(kept.outputs[2], call.shape)])
    saved = backward_inputs(real, accumulate, call.weights, call.memory, call.start)
    return backward_loop(saved, grad_outputs, grad_cell, grad_last_coverage)


class GraphCache:
    """The captured shapes of one decoder, least recently used first out beyond ``max_bytes`` of GPU memory.

    Args:
        max_bytes: the budget (default: ``MEMORY_SHARE`` of the GPU's memory, read at the first capture).
        eager: capture nothing, run the loops (tests on a CPU).
    """

    def __init__(self, max_bytes: Optional[int] = None, eager: bool = False):
        self.max_bytes, self.eager = max_bytes, eager
        self.entries = OrderedDict()  # key -> (Captured, bytes)
        self.captures = 0

    def __deepcopy__(self, memo):  # a copy of the model (fairseq's EMA, say) starts with no graphs
        return GraphCache(self.max_bytes, self.eager)

    def __getstate__(self):
        return {"max_bytes": self.max_bytes, "eager": self.eager}

    def __setstate__(self, state):
        self.__init__(**state)

    def takes(self, gates_x: Tensor, weights: StepWeights) -> bool:
        """Whether this call is a graph's: a training pass (with a gradient) of several steps, on a GPU."""
        return (torch.is_grad_enabled() and weights.feed is not None and (gates_x.is_cuda or self.eager)
                and not (gates_x.is_cuda and torch.cuda.is_current_stream_capturing()))

    def entry(self, gates_x, weights: StepWeights, memory: Memory, start, accumulate: bool) -> Captured:
        shape = Shape(gates_x.size(0), gates_x.size(1), memory.keys.size(1))
        bucket = shape.bucket()
        key = (bucket, gates_x.dtype, gates_x.device, tuple(gates_x.shape[2:]), tuple(memory.keys.shape[2:]),
               tuple(memory.values.shape[2:]), tuple(weights.feed.shape), weights.coverage is None, accumulate)
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key][0]
        before = 0 if self.eager else torch.cuda.memory_allocated(gates_x.device)
        captured = Captured(bucket, gates_x, weights, memory, start, accumulate, self.eager)
        used = 0 if self.eager else torch.cuda.memory_allocated(gates_x.device) - before
        self.entries[key] = (captured, used)
        self.captures += 1
        self.evict(gates_x.device)
        return captured

    def evict(self, device) -> None:
        if self.eager:
            return
        if self.max_bytes is None:
            self.max_bytes = int(MEMORY_SHARE * torch.cuda.get_device_properties(device).total_memory)
        while len(self.entries) > 1 and sum(used for _, used in self.entries.values()) > self.max_bytes:
            self.entries.popitem(last=False)


class GraphedSteps(torch.autograd.Function):
    """FusedSteps through a GraphCache's captured shapes: the same inputs (after the cache and ``accumulate``)
    and outputs."""

    @staticmethod
    def forward(ctx, cache, accumulate, gates_x, w_feed, w_hidden, w_query, w_coverage, v, keys, values,
                padding_mask, hidden, cell, feed, coverage):
        weights, memory, start = loop_inputs(w_feed, w_hidden, w_query, w_coverage, v, keys, values, padding_mask,
                                             hidden, cell, feed, coverage)
        captured = cache.entry(gates_x, weights, memory, start, accumulate)
        outputs, (kept, call) = captured.forward(gates_x, weights, memory, start)
        ctx.captured, ctx.kept, ctx.call = captured, kept, call
        ctx.set_materialize_grads(False)
        return outputs

    @staticmethod
    @outside_autocast
    def backward(ctx, *grads):
        grads = OutputGradients.of(grads)
        grads = ctx.captured.backward(ctx.kept, ctx.call, grads.per_step, grads.cell, grads.last_coverage)
        ctx.kept = ctx.call = None
        return (None, None, *grads)


def graphed_steps(cache: GraphCache, gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor],
                  accumulate: bool):
    """fused_steps' recurrence and outputs through CACHE's graphs (``GraphCache.takes`` must hold)."""
    check_shapes(gates_x, weights, memory, start)
    gates_x, weights, memory, start, device = computation_inputs(gates_x, weights, memory, start)
    with torch.autocast(device_type=device, enabled=False):
        return GraphedSteps.apply(cache, accumulate, gates_x, *weights, *memory, *start)

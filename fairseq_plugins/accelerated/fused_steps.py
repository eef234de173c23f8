"""The recurrence of See et al.'s decoder as one autograd function with a hand-written backward pass.

One-layer LSTM with input feeding and the additive attention with coverage (See, Liu & Manning 2017), per step t:
    z_t     = G[t] + W_f h*_{t-1} + W_hh s_{t-1}       gates i, f, g, o (torch's order) of the LSTM, where
                                                        G[t] = W_ih (W_x,y y_{t-1} + b_x) + b_ih + b_hh and
                                                        W_f = W_ih W_x,h*: x_t = W_x [y_{t-1}; h*_{t-1}] + b_x
    c_t     = sigma(f) * c_{t-1} + sigma(i) * tanh(g)   LSTM cell
    s_t     = sigma(o) * tanh(c_t)
    e^t     = v^T tanh(k + W_s s_t + w_c c^t)           (See eq 11; See eq 1 without the coverage term)
    a^t     = softmax(e^t), padding masked              (See eq 2)
    h*_t    = sum_i a_i^t h_i                           (See eq 3)
    c^{t+1} = c^t + a^t                                 (See eq 10)

Why one function.  Written as modules, a step is about a hundred small tensor operations with autograd
recording each; on a GPU every one is a kernel launch of a few microseconds on a batch whose arithmetic takes
less, so the step costs its launches whatever the batch.  Here the forward loop runs without autograd and
keeps only what the backward needs (the gate activations, tanh c_t and the attention operands, B x 4H, B x H
and B x S per step), and the backward runs the steps in reverse with their derivatives written out: about a
third of the operations per step.  Everything that does not depend on the recurrence runs once for all steps
outside the loops: G (one matrix product), the gate derivatives, the weight gradients (one product each over
all steps), the gradient of the encoder states (one batched product).  The scores use accelerated/additive_scores.py
(cache-sized blocks on a CPU, one block on a GPU).

The derivatives of the cell, with i, f, g, o the activated gates and dL/dc_t carried back from step t + 1:
    dL/dc_t += dL/ds_t * o * (1 - tanh(c_t)^2)
    dL/dz = [dL/dc_t * g * i(1-i),  dL/dc_t * c_{t-1} * f(1-f),  dL/dc_t * i * (1-g^2),  dL/ds_t * tanh(c_t) * o(1-o)]
    dL/dc_{t-1} = dL/dc_t * f,   [dL/ds_{t-1}, dL/dh*_{t-1}] += dL/dz [W_hh, W_f]
and of the attention: dL/da^t += dL/dc^{t+1} + dL/dh*_t h^T, dL/de^t = softmax's backward, then
additive_scores.scores_backward.
"""
from typing import List, NamedTuple, Optional

import torch
from torch import Tensor

from fairseq_plugins.accelerated import torch_ops
from fairseq_plugins.accelerated.additive_scores import ScoreGradients, ones_and, scores_backward_step, scores_step
from fairseq_plugins.accelerated.precision import outside_autocast
from fairseq_plugins.accelerated.step_gradient import StepGradient


class StepWeights(NamedTuple):
    """The parameters the loop reads, all of the computation's dtype."""

    feed: Optional[Tensor]  # 4H x F   W_f = W_ih W_x,h* (None: one step whose gates_x holds it)
    hidden: Tensor  # 4H x H   W_hh
    query: Tensor  # A x H   W_s
    coverage: Optional[Tensor]  # A   w_c (None: See eq 1, no coverage term)
    v: Tensor  # A


class Memory(NamedTuple):
    """What every step attends to."""

    keys: Tensor  # B x S x A   W_h h_i + b_attn
    values: Tensor  # B x S x C   h_i
    padding_mask: Optional[Tensor]  # B x S, True at padding


class BackwardInputs(NamedTuple):
    """What ``backward_loop`` reads: ``run_loop``'s intermediate tensors (its ``saved``), the loop's inputs and
    its first three outputs."""

    acts: Tensor  # B x T x 4H   [sigma(i), sigma(f), tanh(g), sigma(o)]
    cells: Tensor  # B x T x H   c_t
    tanh_cells: Optional[Tensor]  # B x T x H   tanh(c_t) (None: torch's cell kernels keep what they need)
    operands: list  # per step, the score operands ([1, c^t], [q; w_c])
    accumulate: bool  # whether c^{t+1} = c^t + a^t (See eq 10)
    weights: StepWeights
    memory: Memory
    start: List[Tensor]  # s_0, c_0, h*_0, c^1
    states: Tensor  # B x T x H   s_t
    contexts: Tensor  # B x T x C   h*_t
    attn: Tensor  # B x T x S   a^t


class OutputGradients(NamedTuple):
    """The gradients of the loop's six outputs, as autograd passes them to a backward (None: zero)."""

    per_step: List[Optional[Tensor]]  # of states, contexts, attn and coverage, B x T x D each
    cell: Optional[Tensor]  # of the last cell c_T, B x H
    last_coverage: Optional[Tensor]  # of c^{T+1}, B x S

    @classmethod
    def of(cls, grads) -> "OutputGradients":
        return cls(list(grads[:4]), grads[4], grads[5])


def loop_inputs(w_feed, w_hidden, w_query, w_coverage, v, keys, values, padding_mask, hidden, cell, feed, coverage):
    """The flat inputs of the autograd functions (``FusedSteps``, step_graphs' ``GraphedSteps``) as the loop takes
    them: (StepWeights, Memory, start)."""
    return (StepWeights(w_feed, w_hidden, w_query, w_coverage, v), Memory(keys.contiguous(), values, padding_mask),
            [hidden, cell, feed, coverage])


def gradient_sizes(bsz: int, steps: int, source: int) -> list:
    """For each gradient ``backward_loop`` returns, in its order, the size of its real part where a padded call
    computes it larger (None: the gradient of a weight, whole)."""
    return [(bsz, steps), None, None, None, None, None, (bsz, source), (bsz, source), None, (bsz,), (bsz,), (bsz,),
            (bsz, source)]


def cell_kernels(tensor: Tensor) -> bool:
    """Whether the LSTM cell runs as torch's fused cell kernels (forward, backward) on this tensor's device:
    CUDA has them (aten::_thnn_fused_lstm_cell, the kernels of nn.LSTMCell on a GPU; accelerated/torch_ops.py checks
    that this torch does), a CPU does not."""
    return tensor.is_cuda and torch_ops.FUSED_CELL


def kernel_cell(input_gates: Tensor, hidden_gates: Tensor, cell: Tensor):
    """torch's fused cell: z = input_gates + hidden_gates (B x 4H, order i, f, g, o) and c_{t-1} (B x H) ->
    s_t, c_t (B x H) and the activations [sigma(i), sigma(f), tanh(g), sigma(o)] (B x 4H)."""
    return torch.ops.aten._thnn_fused_lstm_cell(input_gates, hidden_gates, cell)


def kernel_cell_backward(d_state: Tensor, d_cell: Tensor, cell_before: Tensor, cell_after: Tensor, acts: Tensor):
    """Its backward: dL/ds_t and dL/dc_t (from later steps), c_{t-1}, c_t and the activations -> dL/dz_t
    (B x 4H) and dL/dc_{t-1} (B x H)."""
    d_gates, d_before, _ = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(d_state, d_cell, cell_before,
                                                                              cell_after, acts, False)
    return d_gates, d_before


class StepViews(NamedTuple):
    """Where one step writes its results: views of the loop's buffers, or None for a fresh tensor (``FRESH``:
    a step of beam search, whose buffers would cost more operations than the step)."""

    score_weights: Optional[Tensor] = None  # B x S x 2   [1, c^t], the scores' operand (its column 1 is c^t)
    context: Optional[Tensor] = None  # B x 1 x C   h*_t
    coverage: Optional[Tensor] = None  # B x S   c^{t+1}
    gates: Optional[Tensor] = None  # B x 4H   z_t   (the composed cell's; torch's cell kernel keeps its own)
    acts: Optional[Tensor] = None  # B x 4H   [sigma(i), sigma(f), tanh(g), sigma(o)]
    gate: Optional[tuple] = None  # acts' four B x H parts
    candidate_in: Optional[Tensor] = None  # B x H   g, z_t's third part
    cell: Optional[Tensor] = None  # B x H   c_t
    tanh_cell: Optional[Tensor] = None  # B x H   tanh(c_t)
    state: Optional[Tensor] = None  # B x H   s_t


FRESH = StepViews()


class Buffers:
    """The loop's per-step tensors, allocated once for all steps (B x T x D each) and cut into per-step views
    beforehand (``steps``: a ``StepViews`` a step), so that a step writes its results in place and creates no
    view of its own."""

    def __init__(self, gates_x: Tensor, values: Tensor, coverage: Tensor):
        bsz, steps, four = gates_x.shape
        size = four // 4
        empty = gates_x.new_empty
        self.contexts = empty(bsz, steps, values.size(2))  # h*_t
        # [1, c^t] for t = 1 .. T+1: the coverage column is the running sum (See eq 10), the ones the scores' bias
        self.weights = empty(bsz, steps + 1, coverage.size(1), 2)
        self.weights[:, :, :, 0] = 1.0
        self.weights[:, 0, :, 1] = coverage
        per_step = [{"context": context, "score_weights": weights, "coverage": after} for context, weights, after
                    in zip(self.contexts.split(1, dim=1), self.weights.unbind(1), self.coverage().unbind(1)[1:])]
        if not cell_kernels(gates_x):  # the cell composed of tensor operations, written in place (``composed_cell``)
            self.gates = empty(bsz, steps, four)  # z_t
            self.acts = empty(bsz, steps, four)  # sigma(i), sigma(f), tanh(g), sigma(o)
            self.cells = empty(bsz, steps, size)  # c_t
            self.tanh_cells = empty(bsz, steps, size)  # tanh(c_t)
            self.states = empty(bsz, steps, size)  # s_t
            cell_views = zip(self.gates.unbind(1), self.acts.unbind(1), self.gates[:, :, 2 * size:3 * size].unbind(1),
                             self.cells.unbind(1), self.tanh_cells.unbind(1), self.states.unbind(1))
            for views, (gates, acts, candidate_in, cell, tanh_cell, state) in zip(per_step, cell_views):
                views.update(gates=gates, acts=acts, gate=acts.chunk(4, dim=1), candidate_in=candidate_in, cell=cell,
                             tanh_cell=tanh_cell, state=state)
        self.steps = [StepViews(**views) for views in per_step]

    def coverage(self) -> Tensor:
        """c^t for t = 1 .. T+1: B x (T + 1) x S."""
        return self.weights[:, :, :, 1]


class StepConstants(NamedTuple):
    """The weights as every step reads them, laid out once before the steps."""

    feed_t: Optional[Tensor]  # F x 4H   W_f^T (None: gates_x holds the feed)
    hidden_t: Tensor  # H x 4H   W_hh^T
    query_t: Tensor  # H x A   W_s^T
    coverage_rows: Optional[Tensor]  # B x A   w_c for every row (None: See eq 1, no coverage term)
    v: Tensor  # A

    @classmethod
    def of(cls, weights: StepWeights, bsz: int) -> "StepConstants":
        return cls(None if weights.feed is None else weights.feed.t(), weights.hidden.t(), weights.query.t(),
                   None if weights.coverage is None else weights.coverage.expand(bsz, -1), weights.v)


def see_step(gates_x_t: Tensor, feed: Tensor, hidden: Tensor, cell: Tensor, coverage: Tensor, fixed: StepConstants,
             memory: Memory, accumulate: bool, out: StepViews):
    """One step of the recurrence of the module docstring, the only statement of its forward: G[t] (B x 4H),
    h*_{t-1} (B x F), s_{t-1}, c_{t-1} (B x H) and c^t (B x S) -> s_t, c_t, the activations (B x 4H), a^t (B x S),
    h*_t (B x 1 x C), c^{t+1} (B x S; c^t unless ``accumulate``) and the scores' operands, written into ``out``."""
    hidden, cell, acts = lstm_cell(gates_x_t, feed, hidden, cell, fixed, out)
    query = torch.mm(hidden, fixed.query_t)  # B x A   W_s s_t
    if fixed.coverage_rows is None:
        operands = (None, query.unsqueeze(1))  # k + q
    else:  # [1, c^t], [q; w_c]
        ones_and_coverage = out.score_weights if out.score_weights is not None else ones_and(coverage)
        operands = (ones_and_coverage, torch.stack([query, fixed.coverage_rows], dim=1))
    scores = scores_step(memory.keys, operands, fixed.v)  # B x S   (See eq 11 / See eq 1)
    if memory.padding_mask is not None:
        scores = scores.masked_fill_(memory.padding_mask, float("-inf"))
    attn = torch.softmax(scores, dim=1)  # B x S   (See eq 2)
    context = torch.bmm(attn.unsqueeze(1), memory.values, out=out.context)  # B x 1 x C   (See eq 3)
    if accumulate:
        coverage = torch.add(coverage, attn, out=out.coverage)  # c^{t+1} = c^t + a^t   (See eq 10)
    return hidden, cell, acts, attn, context, coverage, operands


def lstm_cell(gates_x_t: Tensor, feed: Tensor, hidden: Tensor, cell: Tensor, fixed: StepConstants, out: StepViews):
    """z_t = G[t] + W_f h*_{t-1} + W_hh s_{t-1} and the LSTM cell, through torch's fused cell kernel where the device
    has it, else ``composed_cell``.  Returns s_t, c_t and the activations [sigma(i), sigma(f), tanh(g), sigma(o)]."""
    if cell_kernels(gates_x_t):
        input_gates = gates_x_t if fixed.feed_t is None else torch.addmm(gates_x_t, feed, fixed.feed_t)
        return kernel_cell(input_gates, torch.mm(hidden, fixed.hidden_t), cell)
    if fixed.feed_t is None:
        gates = torch.addmm(gates_x_t, hidden, fixed.hidden_t, out=out.gates)  # z_t
    else:
        gates = torch.addmm(gates_x_t, feed, fixed.feed_t, out=out.gates).addmm_(hidden, fixed.hidden_t)  # z_t
    return composed_cell(gates, cell, out)


def composed_cell(gates: Tensor, cell: Tensor, out: StepViews):
    """The LSTM cell in tensor operations (a CPU has no fused cell kernel): z_t (B x 4H) and c_{t-1} (B x H) ->
    s_t, c_t and the activations, written into ``out``."""
    size = cell.size(1)
    acts = torch.sigmoid(gates, out=out.acts)  # sigma(i), sigma(f), ., sigma(o)
    in_gate, forget, candidate, out_gate = out.gate if out.gate is not None else acts.chunk(4, dim=1)  # B x H each
    candidate_in = out.candidate_in if out.candidate_in is not None else gates[:, 2 * size:3 * size]
    torch.tanh(candidate_in, out=candidate)  # tanh(g), in the place of sigma(g)
    cell = torch.addcmul(forget * cell, in_gate, candidate, out=out.cell)  # B x H   c_t
    hidden = torch.mul(out_gate, torch.tanh(cell, out=out.tanh_cell), out=out.state)  # B x H   s_t
    return hidden, cell, acts


def run_loop(gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor], accumulate: bool,
             saved: Optional[dict] = None):
    """The forward loop.  gates_x: B x T x 4H (G); start: [s_0, c_0, h*_0, c^1], B x H, B x H, B x F, B x S;
    ``accumulate``: add a^t to the coverage (See eq 10).  With ``saved`` (a dict), keeps there what the backward
    reads.  Returns states B x T x H, contexts B x T x C, attn B x T x S, coverage (c^t before each step)
    B x T x S, and the last cell c_T and coverage c^{T+1} (B x H, B x S)."""
    hidden, cell, feed, coverage = start
    buffers = Buffers(gates_x, memory.values, coverage)
    fixed = StepConstants.of(weights, hidden.size(0))
    kernel = cell_kernels(gates_x)  # torch's cell kernel returns its outputs, stacked after the loop
    attns, operands, kernel_outputs = [], [], []
    for gates_x_t, out in zip(gates_x.unbind(1), buffers.steps):
        hidden, cell, acts, attn, context, coverage, pair = see_step(gates_x_t, feed, hidden, cell, coverage, fixed,
                                                                     memory, accumulate, out)
        feed = context.squeeze(1)  # B x C   h*_t, fed to the next step
        attns.append(attn)
        operands.append(pair)
        if kernel:
            kernel_outputs.append((hidden, cell, acts))
    attn = torch.stack(attns, dim=1)  # B x T x S
    if kernel:
        states, all_cells, acts = (torch.stack(parts, dim=1) for parts in zip(*kernel_outputs))  # B x T x (H, H, 4H)
        tanh_cells = None
    else:
        states, all_cells, acts, tanh_cells = buffers.states, buffers.cells, buffers.acts, buffers.tanh_cells
    if saved is not None:  # coverage_weights: [1, c^t] for t = 1 .. T+1, which the operands' first halves view
        saved.update(acts=acts, tanh_cells=tanh_cells, cells=all_cells, operands=operands,
                     coverage_weights=buffers.weights)
    if not accumulate:  # c^t stays c^1 (copies: an input returned as an output would alias it)
        return states, buffers.contexts, attn, coverage.unsqueeze(1).expand_as(attn).clone(), cell, coverage.clone()
    return states, buffers.contexts, attn, buffers.coverage()[:, :-1], cell, coverage


def one_step(gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor], accumulate: bool):
    """``run_loop`` for one step without a gradient (a step of beam search; ``gates_x`` holds the feed), in fresh
    tensors.  Same arguments and results."""
    hidden, cell, feed, coverage = start
    fixed = StepConstants.of(weights, hidden.size(0))
    hidden, cell, _, attn, context, after, _ = see_step(gates_x[:, 0], feed, hidden, cell, coverage, fixed, memory,
                                                        accumulate, FRESH)
    return hidden.unsqueeze(1), context, attn.unsqueeze(1), coverage.unsqueeze(1), cell, after


def cell_derivatives(acts: Tensor, tanh_cells: Tensor, cells_before: Tensor):
    """For all steps at once (each B x T x .): the factors of dL/dc_t in dL/dz[:, :3H] (B x T x 3 x H), of
    dL/ds_t in dL/dz[:, 3H:] (B x T x H), and ds_t/dc_t = o (1 - tanh(c_t)^2) (B x T x H)."""
    in_gate, forget, candidate, out_gate = acts.chunk(4, dim=2)
    by_cell = torch.stack([candidate * in_gate * (1 - in_gate),  # through sigma(i)
                           cells_before * forget * (1 - forget),  # through sigma(f)
                           in_gate * (1 - candidate * candidate)], dim=2)  # through tanh(g)
    by_state = tanh_cells * out_gate * (1 - out_gate)  # through sigma(o)
    to_cell = out_gate * (1 - tanh_cells * tanh_cells)  # ds_t/dc_t
    return by_cell, by_state, to_cell


class FusedSteps(torch.autograd.Function):
    """The loop of ``run_loop`` with the backward of the module docstring.  Inputs after ``accumulate``:
    gates_x, W_f, W_hh, W_s, w_c (or None), v, keys, values, padding_mask, s_0, c_0, h*_0, c^1."""

    @staticmethod
    def forward(ctx, accumulate, gates_x, w_feed, w_hidden, w_query, w_coverage, v, keys, values, padding_mask,
                hidden, cell, feed, coverage):
        weights, memory, start = loop_inputs(w_feed, w_hidden, w_query, w_coverage, v, keys, values, padding_mask,
                                             hidden, cell, feed, coverage)
        saved = {}
        outputs = run_loop(gates_x, weights, memory, start, accumulate, saved)
        # Inputs and outputs through save_for_backward (an output kept as an attribute of ctx would be a
        # reference cycle); the loop's own intermediate tensors as an attribute.
        ctx.save_for_backward(*weights, *memory, *start, *outputs[:3])
        ctx.intermediate = dict(saved, accumulate=accumulate)
        ctx.set_materialize_grads(False)
        return outputs

    @staticmethod
    @outside_autocast
    def backward(ctx, *grads):
        tensors, kept, grads = ctx.saved_tensors, ctx.intermediate, OutputGradients.of(grads)
        saved = BackwardInputs(kept["acts"], kept["cells"], kept["tanh_cells"], kept["operands"], kept["accumulate"],
                               StepWeights(*tensors[:5]), Memory(*tensors[5:8]), list(tensors[8:12]), *tensors[12:15])
        return (None, *backward_loop(saved, grads.per_step, grads.cell, grads.last_coverage))


def per_step(tensor: Optional[Tensor], like: Tensor) -> List[Tensor]:
    """A B x T x D gradient (None: zeros like ``like``) cut into its T steps."""
    return (tensor if tensor is not None else torch.zeros_like(like)).unbind(1)


def backward_loop(s: BackwardInputs, grad_outputs: List[Optional[Tensor]], grad_cell: Optional[Tensor],
                  grad_last_coverage: Optional[Tensor]):
    """The gradients of ``FusedSteps``' inputs (after ``accumulate``) from those of its outputs: per step
    (states, contexts, attn, coverage; None: zero) and of the last cell and coverage."""
    weights, memory, states, contexts, attn = s.weights, s.memory, s.states, s.contexts, s.attn
    hidden0, cell0, feed0, coverage0 = s.start
    bsz, steps, size = states.shape
    grad_states, grad_contexts, grad_attn = (per_step(g, x) for g, x in zip(grad_outputs, (states, contexts, attn)))
    grad_coverage = grad_outputs[3].unbind(1) if grad_outputs[3] is not None else None
    cells_before = torch.cat([cell0.unsqueeze(1), s.cells[:, :-1]], dim=1)  # B x T x H   c_{t-1}
    kernel = s.tanh_cells is None  # torch's fused LSTM cell kernels (CUDA)
    if kernel:
        cells_before, cells_after, acts = cells_before.unbind(1), s.cells.unbind(1), s.acts.unbind(1)
    else:
        by_cell, by_state, to_cell = (x.unbind(1) for x in cell_derivatives(s.acts, s.tanh_cells, cells_before))
        forget = s.acts[:, :, size:2 * size].unbind(1)  # sigma(f)
    feeds = weights.feed is not None
    recurrent = torch.cat([weights.hidden, weights.feed], dim=1) if feeds else weights.hidden  # 4H x (H + F)
    if kernel:
        gate_rows = [None] * steps  # dL/dz_t, B x 4H each, from the kernel
    else:
        d_gates = states.new_empty(bsz, steps, 4 * size)  # dL/dz_t = dL/dG[t]
        gate_rows = d_gates.unbind(1)  # B x 4H each
        gate_parts = [(g[:, :3 * size].view(bsz, 3, size), g[:, 3 * size:]) for g in gate_rows]
    d_hidden, d_feed = torch.zeros_like(hidden0), torch.zeros_like(feed0)  # from step t + 1
    d_cell = grad_cell if grad_cell is not None else torch.zeros_like(cell0)
    d_coverage = grad_last_coverage if grad_last_coverage is not None else torch.zeros_like(coverage0)
    grads = ScoreGradients(memory.keys, weights.coverage is not None, StepGradient())
    d_queries, d_contexts = [None] * steps, [None] * steps
    values_t, attn_rows = memory.values.transpose(1, 2), attn.split(1, dim=1)  # B x C x S, T x (B x 1 x S)
    for t in reversed(range(steps)):
        d_context = grad_contexts[t] + d_feed  # B x C   (h*_t is also the next step's feed)
        through_coverage = grad_attn[t] + d_coverage if s.accumulate else grad_attn[t]  # c^{t+1} = c^t + a^t
        d_attn = torch.baddbmm(through_coverage.unsqueeze(1), d_context.unsqueeze(1), values_t)  # See eqs 3, 10
        d_scores = torch_ops.softmax_backward(d_attn, attn_rows[t], 2).squeeze(1)  # B x S   (See eq 2)
        d_query, d_cov_scores = scores_backward_step(d_scores, memory.keys, s.operands[t], weights.coverage,
                                                     weights.v, grads)
        if grad_coverage is not None:
            d_coverage = d_coverage + grad_coverage[t]
        if d_cov_scores is not None:
            d_coverage = d_coverage + d_cov_scores  # dL/dc^t
        d_state = torch.addmm(grad_states[t] + d_hidden, d_query, weights.query)  # B x H   dL/ds_t
        if kernel:  # dL/dz_t and dL/dc_{t-1} in one kernel
            gate_rows[t], d_cell = kernel_cell_backward(d_state, d_cell, cells_before[t], cells_after[t], acts[t])
        else:
            d_cell = torch.addcmul(d_cell, d_state, to_cell[t])  # B x H   dL/dc_t
            torch.mul(d_cell.unsqueeze(1), by_cell[t], out=gate_parts[t][0])  # dL/d(i, f, g)
            torch.mul(d_state, by_state[t], out=gate_parts[t][1])  # dL/do
            d_cell = d_cell * forget[t]  # dL/dc_{t-1}
        if feeds:
            d_hidden, d_feed = torch.mm(gate_rows[t], recurrent).split([size, feed0.size(1)], dim=1)
        else:
            d_hidden = torch.mm(gate_rows[t], recurrent)
        d_queries[t], d_contexts[t] = d_query, d_context
    if kernel:
        d_gates = torch.stack(gate_rows, dim=1)  # B x T x 4H
    before = torch.cat([hidden0.unsqueeze(1), states[:, :-1]], dim=1).flatten(0, 1)  # BT x H   s_{t-1}
    flat_gates = d_gates.flatten(0, 1).t()  # 4H x BT
    _, d_v, d_weight = grads.totals()  # dL/dk is summed in grads.key_gradient
    return (
        d_gates,
        torch.mm(flat_gates, feeds_before(feed0, contexts)) if feeds else None,  # dL/dW_f
        torch.mm(flat_gates, before),  # dL/dW_hh
        torch.mm(torch.stack(d_queries, dim=1).flatten(0, 1).t(), states.flatten(0, 1)),  # dL/dW_s
        d_weight,
        d_v,
        grads.key_gradient.take(),  # dL/dk, summed over the steps
        torch.bmm(attn.transpose(1, 2), torch.stack(d_contexts, dim=1)),  # dL/dh_i = sum_t a_i^t dL/dh*_t
        None,
        d_hidden,
        d_cell,
        d_feed,
        d_coverage,
    )


def feeds_before(feed0: Tensor, contexts: Tensor) -> Tensor:
    """h*_{t-1} for every step, flattened: BT x F."""
    return torch.cat([feed0.unsqueeze(1), contexts[:, :-1]], dim=1).flatten(0, 1)


def check_shapes(gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor]) -> None:
    """A clear error where the sizes do not fit together (the loop would fail deep inside, or worse, not)."""
    hidden, _, feed, coverage = start
    bsz, size = hidden.shape
    keys, values = memory.keys, memory.values
    problems = []
    if gates_x.dim() != 3 or gates_x.size(0) != bsz or gates_x.size(2) != 4 * size:
        problems.append(f"gates_x is {tuple(gates_x.shape)}, not B x T x 4 x the hidden size ({bsz} x T x {4 * size})")
    if keys.shape[:2] != values.shape[:2] or keys.size(0) != bsz:
        problems.append(f"keys {tuple(keys.shape)} and values {tuple(values.shape)} differ in B x S (B = {bsz})")
    if coverage.shape != keys.shape[:2]:
        problems.append(f"coverage is {tuple(coverage.shape)}, the keys' B x S is {tuple(keys.shape[:2])}")
    if weights.feed is not None and (feed.size(1) != values.size(2) or weights.feed.shape != (4 * size, feed.size(1))):
        problems.append(f"the feed {tuple(feed.shape)} and its weight {tuple(weights.feed.shape)} do not fit the "
                        f"context size {values.size(2)}")
    if problems:
        raise ValueError("fused_steps: " + "; ".join(problems))


def computation_inputs(gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor]):
    """The loop's inputs in the dtype it runs in: the keys', or float32 under autocast (the coverage sums up to
    T attentions: bfloat16's 8 bits would lose the small ones).  Returns them and the device type."""
    device = memory.keys.device.type
    dtype = torch.float32 if torch.is_autocast_enabled(device) else memory.keys.dtype
    cast = [x if x is None or x.dtype == dtype else x.to(dtype)
            for x in (gates_x, *weights, memory.keys, memory.values, *start)]
    gates_x, weights, keys, values, start = cast[0], StepWeights(*cast[1:6]), cast[6], cast[7], cast[8:]
    return gates_x, weights, Memory(keys, values, memory.padding_mask), start, device


def fused_steps(gates_x: Tensor, weights: StepWeights, memory: Memory, start: List[Tensor], accumulate: bool):
    """The recurrence over all steps of ``gates_x`` (B x T x 4H): ``run_loop``'s outputs, with the hand-written
    backward when a gradient is needed, in ``computation_inputs``' dtype."""
    check_shapes(gates_x, weights, memory, start)
    gates_x, weights, memory, start, device = computation_inputs(gates_x, weights, memory, start)
    with torch.autocast(device_type=device, enabled=False):
        if not torch.is_grad_enabled():
            one = gates_x.size(1) == 1 and weights.feed is None
            return (one_step if one else run_loop)(gates_x, weights, memory, start, accumulate)
        return FusedSteps.apply(accumulate, gates_x, *weights, *memory, *start)

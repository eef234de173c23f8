#!/usr/bin/env python
"""What CUDA graphs would give the fused decoder recurrence: its forward + backward over T steps (training) and
one step without a gradient (beam search), run eagerly and as a captured CUDA graph replayed, on random inputs
of the benchmark's sizes (emb 128, encoder 2 x 256, decoder 256, attention 256) at the batch shapes of
--max-tokens 4000 and 64000 on LCSTS characters.

A replay launches the captured kernels without the host's per-operation work, so its time is about the kernels'
own: the floor that capturing the loop (torch.cuda.CUDAGraph, or torch.compile's "reduce-overhead") could reach.
The last column compares the replay's results (states and contexts, or the gradients) with an eager call's.
What it would cost is not measured here: a capture per batch shape, and memory held per captured shape.

    python scripts/bench/graph_ceiling.py [--shapes 40x25x100,640x25x100] [--repeats 20] [--json FILE]

SHAPE is BxTxS: documents, target steps, source positions.  Needs a GPU.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from fairseq_plugins.accelerated.fused_steps import Memory, StepWeights, fused_steps
from fairseq_plugins.accelerated.step_graphs import Replayed

HIDDEN, ATTENTION, CONTEXT, BEAM = 256, 256, 512, 5


def random_inputs(bsz: int, steps: int, source: int, grad: bool):
    """gates_x, the step weights, the memory and the start of the recurrence, as pgn_lstm passes them."""
    device = torch.device("cuda")

    def rand(*shape, scale=0.1):
        return (torch.randn(*shape, device=device) * scale).requires_grad_(grad)

    weights = StepWeights(feed=rand(4 * HIDDEN, CONTEXT) if steps > 1 else None, hidden=rand(4 * HIDDEN, HIDDEN),
                          query=rand(ATTENTION, HIDDEN), coverage=rand(ATTENTION), v=rand(ATTENTION))
    memory = Memory(keys=rand(bsz, source, ATTENTION), values=rand(bsz, source, CONTEXT), padding_mask=None)
    start = [rand(bsz, HIDDEN), rand(bsz, HIDDEN), rand(bsz, CONTEXT), torch.zeros(bsz, source, device=device)]
    return rand(bsz, steps, 4 * HIDDEN), weights, memory, start


def training_pass(inputs):
    """Forward over all steps and the gradients of every input that has one, from a fixed weighting of the
    states and contexts (a loss's stand-in)."""
    gates_x, weights, memory, start = inputs
    states, contexts, *_ = fused_steps(gates_x, weights, memory, start, accumulate=True)
    loss = states.sum() + 0.5 * contexts.sum()
    leaves = [x for x in (gates_x, *weights, memory.keys, memory.values, *start) if x is not None and x.requires_grad]
    return torch.autograd.grad(loss, leaves)


def beam_pass(inputs):
    gates_x, weights, memory, start = inputs
    with torch.no_grad():
        return fused_steps(gates_x, weights, memory, start, accumulate=True)


def timed(fn, repeats: int) -> float:
    """Median milliseconds of FN over REPEATS calls, each between CUDA events."""
    times = []
    for _ in range(repeats):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times)


def largest_difference(graph_outputs, eager_outputs) -> float:
    """The largest absolute difference between the replay's results and an eager call's (the same inputs)."""
    pairs = [(a, b) for a, b in zip(graph_outputs, eager_outputs) if a is not None and b is not None]
    return max(float((a.float() - b.float()).abs().max()) for a, b in pairs)


def measure(name: str, fn, steps: int, repeats: int) -> dict:
    eager = timed(fn, repeats)
    try:
        replayed = Replayed(fn)  # captured as --cuda-graphs captures the loops
        graph, error = timed(replayed.replay, repeats), None
        difference = largest_difference(replayed.outputs, fn())
    except Exception as failure:  # the capture itself is what is measured: a failure is a result
        graph, difference, error = None, None, f"{type(failure).__name__}: {failure}"
    row = {"pass": name, "steps": steps, "eager_ms": eager, "graph_ms": graph, "error": error,
           "max_difference": difference}
    row["eager_ms_per_step"] = eager / steps
    row["graph_ms_per_step"] = None if graph is None else graph / steps
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="40x25x100,640x25x100", help="BxTxS, comma-separated")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("graph_ceiling: needs a GPU (torch sees none): CUDA graphs capture GPU kernels only")
    shapes = []
    for text in args.shapes.split(","):
        try:
            shapes.append(tuple(int(part) for part in text.split("x")))
        except ValueError:
            shapes = None
        if not shapes or len(shapes[-1]) != 3 or min(shapes[-1]) < 1:
            sys.exit(f"graph_ceiling: {text!r} is not a shape BxTxS of three positive numbers")
    torch.manual_seed(1)
    rows = []
    for bsz, steps, source in shapes:
        train = random_inputs(bsz, steps, source, grad=True)
        rows.append(dict(measure("training (forward + backward)", lambda: training_pass(train), steps, args.repeats),
                         shape=f"{bsz}x{steps}x{source}"))
        beam = random_inputs(bsz * BEAM, 1, source, grad=False)
        rows.append(dict(measure("beam step (no gradient)", lambda: beam_pass(beam), 1, args.repeats),
                         shape=f"{bsz * BEAM}x1x{source}"))
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}; medians of {args.repeats} calls\n")
    print("| pass | B x T x S | eager ms/step | graph ms/step | eager / graph | max abs(graph - eager) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        graph = row["graph_ms_per_step"]
        cells = ([f"{graph:.3f}", f"{row['eager_ms_per_step'] / graph:.1f}x", f"{row['max_difference']:.2e}"]
                 if graph else [f"capture failed: {row['error']}", "-", "-"])
        print(f"| {row['pass']} | {row['shape']} | {row['eager_ms_per_step']:.3f} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

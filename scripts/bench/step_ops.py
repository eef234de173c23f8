#!/usr/bin/env python
"""What one decoder step costs: tensor operations, GPU kernels, latency and memory, per model.

A recurrent decoder on a GPU is launch-bound when each of its steps is a chain of small kernels: the step then
costs its launches (a few microseconds each) whatever the batch.  This script measures, for each model, one
decoder step of (and one optimizer step):
  * training: forward + criterion + backward on the first training batch of --max-tokens tokens per batch;
  * beam search: one step of the project's generator (generation/beam_search.py; fairseq's SequenceGenerator
    loop with --fairseq-beam-search, and always for fairseq's lstm), --beam, 32 sentences of the valid split at
    fixed length;
  * the update: one step of the row's optimizer (fairseq's adam; pgn_lstm_foreach_adam: --optimizer foreach_adam)
    after a backward pass, once per update whatever the length (its table line counts per update, not per step);
the first two as the difference between the same pass at two target lengths (T1 and T2 = 2 T1 steps, so that
what does not depend on the length, the encoder and the optimizer's setup, cancels), divided by T2 - T1:
  ops/step       aten operators called from Python or autograd (torch.profiler's top-level "aten::" events,
                 views included: each costs the host a dispatch);
  launching      of them, those that are not views or metadata (what may launch a kernel);
  kernels/step   CUDA kernels launched (torch.profiler's CUDA activity; GPU only);
  ms/step        wall milliseconds, synchronised, from the fastest of --repeats calls at each length (the
                 least disturbed); "-" where the longer pass was not slower (noise larger than the steps);
and the peak GPU memory of a training pass (torch.cuda.max_memory_allocated, GPU only).

On a CPU the attention's scores run as one block and foreach_adam's operations over all tensors at once, the paths
a GPU takes (accelerated/additive_scores.py cuts the batch into cache-sized blocks on a CPU, optim/foreach_adam.py
goes tensor by tensor there; both add operations and are right for a CPU), so the CPU's counts stand in for a
GPU's.

    python scripts/bench/step_ops.py [--models pgn_lstm,pgn_lstm_modules,lstm] [--data-bin DIR]
        [--device cpu|cuda] [--max-tokens 4000] [--steps 8] [--beam 5] [--passes training,beam,update]
        [--repeats 5] [--fairseq-beam-search] [--json FILE]

pgn_lstm_modules is pgn_lstm with --no-fused-steps (its decoder module by module): the before of the fused
recurrence (accelerated/fused_steps.py), in the same run.  --data-bin defaults to throughput.py's LCSTS preparation
(runs/bench/lcsts_char/bin; throughput.py makes it).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

from scripts.bench.profile_step import build, move_to, synchronize, train_batches
from scripts.bench.throughput_runners import ROOT, TRAIN_FLAGS

METADATA = {  # operators that launch no kernel: views, shape queries, no-op conversions, allocations
    "aten::view", "aten::select", "aten::slice", "aten::unsqueeze", "aten::squeeze", "aten::t", "aten::transpose",
    "aten::permute", "aten::expand", "aten::expand_as", "aten::as_strided", "aten::reshape", "aten::_unsafe_view",
    "aten::_reshape_alias", "aten::alias", "aten::unbind", "aten::split", "aten::split_with_sizes", "aten::chunk",
    "aten::narrow", "aten::detach", "aten::detach_", "aten::view_as", "aten::flatten", "aten::contiguous",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::to", "aten::lift_fresh", "aten::result_type", "aten::promote_types", "aten::size", "aten::stride",
    "aten::numel", "aten::dim", "aten::is_nonzero", "aten::type_as",
}


def top_level_ops(events) -> list:
    """The names of the "aten::" events that no other "aten::" event encloses."""
    names = []
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:
            names.append(event.name)
    return names


def count(fn, device: str) -> dict:
    """Operators, launching operators and CUDA kernels of one call of ``fn``."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device != "cpu":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        fn()
        synchronize(device)
    events = prof.events()
    names = top_level_ops(events)
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA) if device != "cpu" else None
    return {"ops": len(names), "launching": sum(1 for n in names if n not in METADATA), "kernels": kernels}


def seconds(fn, device: str, repeats: int) -> float:
    """The fewest wall seconds of ``fn`` (synchronised) over ``repeats`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def per_step(make, lengths, device: str, repeats: int) -> dict:
    """(count at T2 - count at T1) / (T2 - T1) for every figure; ``make(T)`` gives the pass at length T."""
    short, long = (make(length) for length in lengths)
    steps = lengths[1] - lengths[0]
    low, high = count(short, device), count(long, device)
    result = {key: None if low[key] is None else (high[key] - low[key]) / steps for key in low}
    difference = seconds(long, device, repeats) - seconds(short, device, repeats)
    result["ms"] = 1000 * difference / steps if difference > 0 else None
    return result


def cut(batch: dict, length: int) -> dict:
    """The batch with its first ``length`` target steps."""
    net_input = dict(batch["net_input"], prev_output_tokens=batch["net_input"]["prev_output_tokens"][:, :length])
    target = batch["target"][:, :length].contiguous()
    return dict(batch, net_input=net_input, target=target, ntokens=int(target.ne(1).sum()))


def training(model, criterion, batch, args) -> dict:
    model.train()

    def make(length):
        short = cut(batch, length)

        def step():
            model.zero_grad(set_to_none=True)
            loss, _, _ = criterion(model, short)
            loss.backward()
        return step

    if batch["target"].size(1) < 2 * args.steps:
        sys.exit(f"step_ops: the first batch's targets have {batch['target'].size(1)} steps; --steps must be at "
                 f"most half of that")
    figures = per_step(make, (args.steps, 2 * args.steps), args.device, args.repeats)
    if args.device != "cpu":
        torch.cuda.reset_peak_memory_stats()
        make(batch["target"].size(1))()
        synchronize(args.device)
        figures["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return figures


def beam_search(cfg, task, model, args) -> dict:
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    batch = move_to(dataset.collater([dataset[i] for i in range(min(32, len(dataset)))]), args.device)
    model.eval()

    def make(length):
        generator = task.build_generator([model], argparse.Namespace(
            beam=args.beam, max_len_a=0, max_len_b=length, min_len=length, block_ngram_repeat=0,
            fairseq_beam_search=args.fairseq_beam_search))

        def search():
            with torch.no_grad():
                task.inference_step(generator, [model], batch)
        return search

    return per_step(make, (10, 20), args.device, args.repeats)


def optimizer_update(cfg, model, criterion, batch, args) -> dict:
    """One step of the row's fairseq optimizer (``--optimizer``) on the gradients of the batch, after a first step
    that creates its state: operations, launching operations and kernels of the step, and its milliseconds."""
    from fairseq import optim

    model.train()
    model.zero_grad(set_to_none=True)
    criterion(model, batch)[0].backward()
    optimizer = optim.build_optimizer(cfg.optimizer, [p for p in model.parameters() if p.requires_grad])
    optimizer.step()
    figures = count(optimizer.step, args.device)
    figures["ms"] = 1000 * seconds(optimizer.step, args.device, args.repeats)
    return figures


def table(rows: dict, args) -> str:
    reference = rows.get("pgn_lstm_modules")
    lines = [f"device {args.device} ({torch.cuda.get_device_name(0) if args.device != 'cpu' else 'CPU'}), "
             f"{torch.get_num_threads()} threads, --max-tokens {args.max_tokens}, beam {args.beam}, torch "
             f"{torch.__version__}", "",
             "| model | pass | ops/step | launching | kernels/step | ms/step | ops vs pgn_lstm_modules |",
             "|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        for part, figures in row.items():
            ratio = f"{figures['ops'] / reference[part]['ops']:.2f}" if reference else "-"
            kernels = "-" if figures["kernels"] is None else f"{figures['kernels']:.0f}"
            label = "update (per update, not per step)" if part == "update" else part
            lines.append(f"| {name} | {label} | {figures['ops']:.0f} | {figures['launching']:.0f} | {kernels} | "
                         f"{'-' if figures['ms'] is None else format(figures['ms'], '.3f')} | {ratio} |")
    peaks = [f"{name} {row['training']['peak_gib']:.2f} GiB" for name, row in rows.items()
             if "peak_gib" in row.get("training", {})]
    if peaks:
        lines += ["", "peak GPU memory of a training pass (the whole first batch): " + ", ".join(peaks)]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="pgn_lstm,pgn_lstm_modules,lstm")
    parser.add_argument("--data-bin", type=Path, default=ROOT / "runs" / "bench" / "lcsts_char" / "bin")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=8, help="T1: the passes run T1 and 2 T1 target steps")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--passes", default="training,beam,update",
                        help="which passes to measure (comma-separated)")
    parser.add_argument("--fairseq-beam-search", action="store_true",
                        help="beam search by fairseq's own loop (the project's models; fairseq's lstm always)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per pass (the fastest is used)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if not (args.data_bin / "dict.src.txt").is_file():
        sys.exit(f"step_ops: no binarized data in {args.data_bin} (run throughput.py once, or give --data-bin)")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("step_ops: --device cuda, but torch sees no GPU")
    import fairseq_plugins.accelerated.additive_scores as additive_scores
    import fairseq_plugins.optim.foreach_adam as foreach_adam

    additive_scores.BLOCK_FLOATS = 1 << 40  # one block: the GPU's path (module docstring)
    foreach_adam.all_at_once = lambda device: True  # each operation over all tensors: the GPU's path
    rows = {}
    for name in args.models.split(","):
        cfg, task, model, criterion = build(name, args.data_bin, args.max_tokens, TRAIN_FLAGS.get(name, []),
                                            args.device)
        batch = train_batches(cfg, task, 1, args.device)[0]
        rows[name] = {}
        if "training" in args.passes:
            rows[name]["training"] = training(model, criterion, batch, args)
        if "beam" in args.passes:
            rows[name]["beam"] = beam_search(cfg, task, model, args)
        if "update" in args.passes:
            rows[name]["update"] = optimizer_update(cfg, model, criterion, batch, args)
        del model, criterion
    print(table(rows, args))
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "max_tokens": args.max_tokens, "beam": args.beam,
                                         "steps": args.steps, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

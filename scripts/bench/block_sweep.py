#!/usr/bin/env python
"""How the attention kernel's cache block size affects speed on this CPU.

accelerated/additive_scores.py computes v^T tanh(k + q + w_c c) a few batch rows at a time, so that each block
stays in the CPU cache between the operations that read it.  The block size per thread comes from the cache
sizes the kernel reads from sysfs (``accelerated/cpu_cache.py``).  This script measures the alternatives side by
side, in turns (a drifting machine affects them alike):

  * ``--mode kernel``: forward + backward of the scores over T decoder steps with coverage, on random tensors
    shaped like one LCSTS training batch (B x S x A = 37 x 106 x 256, T = 19 by default): milliseconds per
    decoder step;
  * ``--mode train``: pgn_lstm training steps (profile_step.py's Trainer, throughput.py's sizes) on the
    benchmark's LCSTS batches: target words/s.

    python scripts/bench/block_sweep.py [--mode kernel|train] [--blocks 16,32,64,128,256,512,1024,0]
        [--rounds 5] [--batch 37 --src-len 106 --attn-dim 256 --steps 19] [--batches 8]

--blocks are KiB of float32 per thread; 0 means the whole batch as one block (no blocking).  The cache sizes
of this CPU and the kernel's own choice are printed first.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from fairseq_plugins.accelerated import additive_scores as scores_module
from fairseq_plugins.accelerated.cpu_cache import block_size
from fairseq_plugins.accelerated.step_gradient import share_across_steps
from scripts.bench.machine import cache_sizes, describe_machine

ROOT = Path(__file__).resolve().parents[2]

WHOLE_BATCH = 1 << 40  # floats: more than any batch, so one block


def floats_for(kib: int) -> int:
    return WHOLE_BATCH if kib == 0 else kib * 1024 // 4


def kernel_step_ms(bsz: int, src_len: int, attn_dim: int, steps: int) -> float:
    """Forward + backward of the coverage attention scores over ``steps`` decoder steps; ms per step."""
    generator = torch.Generator().manual_seed(0)
    keys_leaf = torch.randn(bsz, src_len, attn_dim, generator=generator, requires_grad=True)
    queries = torch.randn(steps, bsz, attn_dim, generator=generator, requires_grad=True)
    coverage_weight = torch.randn(attn_dim, generator=generator, requires_grad=True)
    v = torch.randn(attn_dim, generator=generator, requires_grad=True)
    start = time.perf_counter()
    keys = share_across_steps(keys_leaf * 1.0)  # B x S x A, a non-leaf as the projected keys are
    coverage = keys.new_zeros(bsz, src_len)  # B x S
    loss = 0.0
    for query in queries:
        attn = torch.softmax(scores_module.additive_scores(keys, query, coverage, coverage_weight, v), dim=1)
        loss = loss + attn[:, 0].sum()
        coverage = coverage + attn
    loss.backward()
    return (time.perf_counter() - start) * 1000 / steps


def sweep(blocks, rounds: int, measure) -> dict:
    """measure() under each block size, in turns, ``rounds`` times; the median per block size."""
    saved = scores_module.BLOCK_FLOATS
    results = {kib: [] for kib in blocks}
    try:
        for kib in blocks:  # warm-up: allocate each size's workspace once
            scores_module.BLOCK_FLOATS = floats_for(kib)
            measure()
        for _ in range(rounds):
            for kib in blocks:
                scores_module.BLOCK_FLOATS = floats_for(kib)
                results[kib].append(measure())
    finally:
        scores_module.BLOCK_FLOATS = saved
    return {kib: statistics.median(values) for kib, values in results.items()}


def train_measure(batches: int, data_bin: Path):
    from scripts.bench.profile_step import Trainer, build, train_batches

    cfg, task, model, criterion = build("pgn_lstm", data_bin, 4000, [])
    batches = train_batches(cfg, task, batches + 1)
    trainer = Trainer(model, criterion)
    trainer.step(batches[0])
    return lambda: trainer.words_per_second(batches[1:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["kernel", "train"], default="kernel")
    parser.add_argument("--blocks", default="16,32,64,128,256,512,1024,0",
                        help="KiB of float32 per thread, comma-separated; 0: the whole batch as one block")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=37, help="kernel mode: batch rows B")
    parser.add_argument("--src-len", type=int, default=106, help="kernel mode: source length S")
    parser.add_argument("--attn-dim", type=int, default=256, help="kernel mode: attention size A")
    parser.add_argument("--steps", type=int, default=19, help="kernel mode: decoder steps T")
    parser.add_argument("--batches", type=int, default=8, help="train mode: training batches per round")
    parser.add_argument("--data-bin", type=Path, default=ROOT / "runs" / "bench" / "lcsts_char" / "bin")
    args = parser.parse_args(argv)
    try:
        blocks = [int(b) for b in args.blocks.split(",")]
    except ValueError:
        parser.error(f"--blocks must be integers (KiB per thread), got {args.blocks!r}")
    if any(b < 0 for b in blocks):
        parser.error("--blocks must be >= 0")
    print(describe_machine())
    floats, why = block_size()
    print(f"caches: {cache_sizes().describe()}; the kernel's block: {floats * 4 // 1024} KiB per thread ({why})")
    if args.mode == "kernel":
        shape = f"B x S x A = {args.batch} x {args.src_len} x {args.attn_dim}, {args.steps} steps"
        results = sweep(blocks, args.rounds,
                        lambda: kernel_step_ms(args.batch, args.src_len, args.attn_dim, args.steps))
        unit, better = "ms per decoder step (forward + backward)", min
    else:
        if not (args.data_bin / "dict.src.txt").exists():
            sys.exit(f"block_sweep: no binarized data in {args.data_bin} (run throughput.py once, or give --data-bin)")
        shape = f"pgn_lstm on {args.data_bin}, {args.batches} batches of --max-tokens 4000"
        results = sweep(blocks, args.rounds, train_measure(args.batches, args.data_bin))
        unit, better = "training target words/s", max
    best = better(results.values())
    print(f"{shape}; {torch.get_num_threads()} threads; medians of {args.rounds} rounds")
    print(f"{'block per thread':>17} {unit}")
    for kib, value in results.items():
        label = "whole batch" if kib == 0 else f"{kib} KiB"
        print(f"{label:>17} {value:10.2f}  ({value / best:.2f} of the best)")


if __name__ == "__main__":
    main()

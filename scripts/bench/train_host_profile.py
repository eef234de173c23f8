#!/usr/bin/env python
"""Where fairseq-train's host time goes: one benchmark row's training (throughput.py's fairseq-train command,
the same options and data) run in-process under cProfile.

On a GPU a small recurrent model is launch-bound: the host issues kernels and waits at each synchronisation
(``.item()``, ``.tolist()``, ``.cpu()``, a copy to the host), so the host's profile is the update's profile.
The report gives the profiled updates' wall time, the functions with the most time of their own and the most time
below them, and who calls the synchronising methods.

    python scripts/bench/train_host_profile.py [--model pgn_lstm] [--device cuda] [--max-tokens 4000]
        [--updates 60] [--warmup 10] [--data-bin runs/bench/lcsts_char/bin] [--work DIR] [--stats FILE.pstats]

Only the updates after the warm-up are profiled: the start-up (imports, CUDA's initialisation, the first
cuDNN calls) would otherwise hide the steady state.
"""
import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

from scripts.bench.throughput_runners import MODELS, ROOT, fairseq_train_command

SYNCS = r"method 'item'|method 'tolist'|method 'cpu'|synchronize|method 'to' of|_local_scalar_dense"


def train_argv(model: str, device: str, max_tokens: int, updates: int, data_bin: Path, save_dir: Path) -> list:
    """fairseq-train's argv for MODEL, as throughput.py builds it (logging every 10 updates), saving no
    checkpoint."""
    options = argparse.Namespace(max_tokens=max_tokens, updates=updates, log_interval=10, device=device)
    return [str(part) for part in fairseq_train_command(model, options, data_bin, save_dir)] + ["--no-save"]


def profile_training(argv: list, warmup: int) -> tuple:
    """Runs fairseq-train with ARGV in this process, its log on stderr, under cProfile from update WARMUP + 1 to
    the end (start-up, CUDA's initialisation and the first updates left out); returns (profiler, updates
    profiled, their wall seconds)."""
    with contextlib.redirect_stdout(sys.stderr):  # fairseq_cli.train logs to the stdout of its import time
        from fairseq import trainer
        from fairseq_cli.train import cli_main

        import fairseq_plugins

        fairseq_plugins.register()  # imported before fairseq (through throughput_runners), so not yet registered
        profiler, window = cProfile.Profile(), {"calls": 0, "start": None}
        train_step = trainer.Trainer.train_step

        def counted_train_step(self, *args, **kwargs):
            window["calls"] += 1
            if window["calls"] == warmup + 1:
                synchronize()
                window["start"] = time.perf_counter()
                profiler.enable()
            return train_step(self, *args, **kwargs)

        sys.argv = argv
        trainer.Trainer.train_step = counted_train_step
        try:
            cli_main()
        finally:
            profiler.disable()
            synchronize()
            trainer.Trainer.train_step = train_step
    if window["start"] is None:
        sys.exit(f"train_host_profile: only {window['calls']} updates ran, none after the {warmup} of warm-up")
    return profiler, window["calls"] - warmup, time.perf_counter() - window["start"]


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def report(profiler: cProfile.Profile, rows: int = 30) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    for key, title in (("tottime", "own time"), ("cumulative", "time with callees")):
        out.write(f"\n## the {rows} functions with the most {title}\n")
        stats.sort_stats(key).print_stats(rows)
    out.write("\n## who calls the synchronising methods\n")
    stats.sort_stats("tottime").print_callers(SYNCS)
    return out.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pgn_lstm", choices=sorted(MODELS))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10, help="updates run before the profile starts")
    parser.add_argument("--data-bin", type=Path, default=ROOT / "runs" / "bench" / "lcsts_char" / "bin")
    parser.add_argument("--work", type=Path, help="fairseq-train's --save-dir (default: a temporary folder)")
    parser.add_argument("--stats", type=Path, help="also write the raw profile here (pstats format)")
    parser.add_argument("--rows", type=int, default=30)
    args = parser.parse_args(argv)
    if not (args.data_bin / "dict.src.txt").is_file():
        sys.exit(f"train_host_profile: no binarized data in {args.data_bin} (run throughput.py once, or give "
                 f"--data-bin)")
    with tempfile.TemporaryDirectory() as scratch:
        save_dir = args.work or Path(scratch)
        command = train_argv(args.model, args.device, args.max_tokens, args.updates, args.data_bin, save_dir)
        profiler, updates, seconds = profile_training(command, args.warmup)
    print(f"# fairseq-train under cProfile: {args.model}, {args.device}, --max-tokens {args.max_tokens}: "
          f"updates {args.warmup + 1} to {args.warmup + updates}, {seconds:.2f} s wall, "
          f"{1000 * seconds / updates:.1f} ms per update (cProfile's own overhead included)\n")
    print("    " + " ".join(command))
    print(report(profiler, args.rows))
    if args.stats:
        profiler.dump_stats(str(args.stats))


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Where fairseq-train's host time goes: one benchmark row's training (throughput.py's fairseq-train command,
the same options and data) run in-process under cProfile.

On a GPU a small recurrent model is launch-bound: the host issues kernels and waits at each synchronisation
(``.item()``, ``.tolist()``, ``.cpu()``, a copy to the host), so the host's profile is the update's profile.
The report gives the updates' wall time, the functions with the most time of their own and the most time
below them, and who calls the synchronising methods.

    python scripts/bench/train_host_profile.py [--model pgn_lstm] [--device cuda] [--max-tokens 4000]
        [--updates 60] [--data-bin runs/bench/lcsts_char/bin] [--work DIR] [--stats FILE.pstats]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput_runners import MODELS, ROOT, fairseq_train_command  # noqa: E402

SYNCS = r"method 'item'|method 'tolist'|method 'cpu'|synchronize|method 'to' of|_local_scalar_dense"


def train_argv(model: str, device: str, max_tokens: int, updates: int, data_bin: Path, save_dir: Path) -> list:
    """fairseq-train's argv for MODEL, as throughput.py builds it (logging every 10 updates)."""
    options = argparse.Namespace(max_tokens=max_tokens, updates=updates, log_interval=10, device=device)
    return [str(part) for part in fairseq_train_command(model, options, data_bin, save_dir)]


def profile_training(argv: list) -> tuple:
    """Runs fairseq-train with ARGV in this process under cProfile, its log on stderr; returns (profiler, wall
    seconds)."""
    with contextlib.redirect_stdout(sys.stderr):  # fairseq_cli.train logs to the stdout of its import time
        from fairseq_cli.train import cli_main

        import fairseq_plugins

        fairseq_plugins.register()  # imported before fairseq (through throughput_runners), so not yet registered
        sys.argv = argv
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.runcall(cli_main)
    return profiler, time.perf_counter() - start


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
        profiler, seconds = profile_training(command)
    print(f"# fairseq-train under cProfile: {args.model}, {args.device}, --max-tokens {args.max_tokens}, "
          f"{args.updates} updates, {seconds:.1f} s wall (start-up included)\n")
    print("    " + " ".join(command))
    print(report(profiler, args.rows))
    if args.stats:
        profiler.dump_stats(str(args.stats))


if __name__ == "__main__":
    main()

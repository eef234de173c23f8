#!/usr/bin/env python
"""Training throughput: pgn_lstm (copy + coverage) against fairseq's built-in ``lstm``.

Both models train on the same binarized data with the same sizes, seed, batches (--max-tokens) and number of
updates; the figure is fairseq's own target words per second (``wps``) of the logged intervals after the
first (warm-up) one.  Target: pgn_lstm / lstm >= 1.0.

    python scripts/bench/train_throughput.py [--updates 60] [--max-tokens 4000] [--work runs/bench]

Default data: LCSTS PART_II from ../shared/data (Chinese characters; research use only, so it is read from
there and never shipped), prepared once into WORK/lcsts_char with the project's pipeline.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LCSTS = ROOT.parent / "shared" / "data" / "lcsts_part2"

# emb 128, bidirectional encoder 2 x 256, decoder 256, one layer each, same dropout.
SIZES = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-hidden-size", "256",
         "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256", "--dropout", "0.1"]
MODELS = {
    "lstm": ["--arch", "lstm", "--encoder-bidirectional", "--criterion", "cross_entropy"],
    "pgn_lstm": ["--arch", "pgn_lstm", "--criterion", "focal_copy_coverage"],
}


def run(cmd, **kwargs):
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, **kwargs)


def prepare_lcsts(work: Path, bin_dir: Path) -> None:
    """Convert and binarize LCSTS PART_II (characters) unless already done."""
    if (bin_dir / "train.src-tgt.src.bin").exists():
        return
    if not LCSTS.is_dir():
        sys.exit(f"train_throughput: {LCSTS} not found (needs ../shared/data beside the repository)")
    raw = work / "raw"
    for split, name in (("train", "train"), ("valid", "val")):
        run(["summ-convert", "tsv", str(LCSTS / f"{name}.tsv"), "--src-col", "1", "--tgt-col", "0",
             "--out-prefix", str(raw / split)])
    prepared = work / "prepared"
    run(["summ-prepare", "--raw-dir", str(raw), "--out-dir", str(prepared), "--lang", "zh", "--unit", "char",
         "--vocab-size", "4000", "--max-source-len", "150", "--max-target-len", "40", "--splits", "train,valid"])
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--srcdict", str(prepared / "dict.txt"), "--trainpref", str(prepared / "tok" / "train"),
         "--validpref", str(prepared / "tok" / "valid"), "--destdir", str(bin_dir), "--workers", "2"])


def train_wps(name: str, bin_dir: Path, updates: int, max_tokens: int, log_every: int):
    cmd = ["fairseq-train", str(bin_dir), "--user-dir", str(ROOT / "fairseq_plugins"), "--task", "summarization",
           *MODELS[name], *SIZES, "--optimizer", "adam", "--lr", "0.001", "--clip-norm", "2.0",
           "--max-tokens", str(max_tokens), "--max-update", str(updates), "--seed", "1",
           "--disable-validation", "--no-save", "--log-format", "simple", "--log-interval", str(log_every),
           "--num-workers", "0", "--cpu"]
    start = time.time()
    out = run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    elapsed = time.time() - start
    wps = [float(m) for m in re.findall(r"train_inner .* wps=([\d.]+)", out)]
    if len(wps) < 2:
        sys.exit(f"train_throughput: too few logged intervals for {name}; raise --updates\n{out[-2000:]}")
    return statistics.mean(wps[1:]), elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench")
    parser.add_argument("--data-bin", type=Path, help="use this binarized data instead of LCSTS")
    args = parser.parse_args()
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}:{os.environ['PATH']}"

    bin_dir = args.data_bin or args.work / "lcsts_char" / "bin"
    if args.data_bin is None:
        prepare_lcsts(args.work / "lcsts_char", bin_dir)
    results = {name: train_wps(name, bin_dir, args.updates, args.max_tokens, args.log_interval) for name in MODELS}

    print(f"\nTraining throughput ({args.updates} updates, --max-tokens {args.max_tokens}, data {bin_dir})")
    print(f"{'model':<12} {'target words/s':>15} {'wall s':>8}")
    for name, (wps, elapsed) in results.items():
        print(f"{name:<12} {wps:>15.0f} {elapsed:>8.1f}")
    ratio = results["pgn_lstm"][0] / results["lstm"][0]
    print(f"ratio pgn_lstm / lstm = {ratio:.2f}  (target >= 1.0: {'met' if ratio >= 1.0 else 'MISSED'})")


if __name__ == "__main__":
    main()

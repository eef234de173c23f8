#!/usr/bin/env python
"""Throughput and peak memory: pgn_lstm (copy + coverage) against fairseq's built-in ``lstm``.

One invocation trains both models on the same binarized data with the same sizes, seed, batches (--max-tokens)
and number of updates, then decodes the same N sentences with each (beam search, same --beam, --max-len-b and
--batch-size), and prints one table:

- training target words/s: fairseq's own ``wps`` of the logged intervals after the first (warm-up) one;
- decode sentences/s: fairseq-generate's "Translated N sentences ... (X sentences/s" line, which times the
  generation only (not the start-up or the model loading); tokens/s and the mean hypothesis length (with </s>)
  come from the same line.  By default --min-len equals --max-len-b, so every hypothesis of both models has
  the same length and the ratio compares the same number of decoding steps: briefly trained models otherwise
  stop at arbitrary, different lengths (one may emit </s> at once, the other run to the limit).  Give
  --min-len 1 for the models' own lengths;
- peak resident memory (RSS) of each training and decoding process, from the kernel (os.wait4's rusage of
  that child process; fairseq runs with --num-workers 0, so there is no data-loader process).  On a GPU this is
  host memory only.

Targets: pgn_lstm / lstm >= 1.0 for training words/s and for decode sentences/s.  pgn_lstm's default attention
size is the decoder's hidden size (256 here); --all-models adds ``pgn_lstm_a512``, the same model with See et
al.'s attention size 2 x 256 (as pgn_lstm_see2017 has), for reference.  --repeats N runs every model N times,
in turns, and reports medians: single 60-update runs on a virtual machine vary by about 10%.

    python scripts/bench/throughput.py [--updates 60] [--max-tokens 4000] [--decode-sentences 200]
        [--beam 5] [--max-len-b 40] [--min-len N] [--batch-size 32] [--device auto|cpu|cuda]
        [--work runs/bench] [--data-bin DIR] [--decode-subset SPLIT] [--repeats N] [--all-models] [--json FILE]

Default data: LCSTS PART_II from ../shared/data (Chinese characters; research use only, so it is read from
there and never shipped), prepared once into WORK/lcsts_char with the project's pipeline; its valid split is
decoded.  --data-bin uses any binarized data of the project instead (its test split if it has one).  The
number of threads is torch's default unless OMP_NUM_THREADS is set; on a machine busy with other jobs set
OMP_NUM_THREADS=1 (and expect the figures to mean little).
"""
import argparse
import json
import os
import re
import shutil
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
    "pgn_lstm": ["--arch", "pgn_lstm", "--criterion", "focal_copy_coverage"],  # attention size 256 (default)
    # See et al.'s attention size, 2 x 256 (pgn_lstm_see2017 uses it): reported, not the target
    "pgn_lstm_a512": ["--arch", "pgn_lstm", "--attention-dim", "512", "--criterion", "focal_copy_coverage"],
}
TARGETS = ("lstm", "pgn_lstm")  # the ratio the target is about
TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in [\d.]+s "
                        r"\(([\d.]+) sentences/s, ([\d.]+) tokens/s\)")


def fail(message: str):
    sys.exit(f"throughput: {message}")


def run(cmd, **kwargs):
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def run_measured(cmd, log: Path):
    """Run CMD with its output in LOG; returns (output, wall seconds, peak RSS of the process in MB)."""
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    start = time.time()
    with log.open("w") as out:
        process = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own resource usage, peak RSS included
    elapsed = time.time() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text(errors="replace")
    if process.returncode != 0:
        fail(f"{Path(str(cmd[0])).name} failed ({process.returncode}), log {log}:\n{output[-3000:]}")
    kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024  # Linux: KiB, macOS: bytes
    return output, elapsed, kib / 1024


def prepare_lcsts(work: Path, bin_dir: Path) -> None:
    """Convert and binarize LCSTS PART_II (characters) unless already done."""
    if (bin_dir / "train.src-tgt.src.bin").exists():
        return
    if not LCSTS.is_dir():
        fail(f"{LCSTS} not found (needs ../shared/data beside the repository, or give --data-bin)")
    raw = work / "raw"
    for split, name in (("train", "train"), ("valid", "val")):
        run(["summ-convert", "tsv", LCSTS / f"{name}.tsv", "--src-col", "1", "--tgt-col", "0",
             "--out-prefix", raw / split])
    prepared = work / "prepared"
    run(["summ-prepare", "--raw-dir", raw, "--out-dir", prepared, "--lang", "zh", "--unit", "char",
         "--vocab-size", "4000", "--max-source-len", "150", "--max-target-len", "40", "--splits", "train,valid"])
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--srcdict", prepared / "dict.txt", "--trainpref", prepared / "tok" / "train",
         "--validpref", prepared / "tok" / "valid", "--destdir", bin_dir, "--workers", "2"])


def make_decode_subset(bin_dir: Path, split: str, count: int, out_dir: Path) -> int:
    """The first COUNT sentence pairs of BIN_DIR's SPLIT, binarized as OUT_DIR's test split (same dictionaries).
    Returns how many there are."""
    from fairseq.data import Dictionary, data_utils, indexed_dataset

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    sizes = []
    for lang in ("src", "tgt"):
        shutil.copy(bin_dir / f"dict.{lang}.txt", out_dir / f"dict.{lang}.txt")
        dictionary = Dictionary.load(str(bin_dir / f"dict.{lang}.txt"))
        dataset = data_utils.load_indexed_dataset(str(bin_dir / f"{split}.src-tgt.{lang}"), dictionary)
        if dataset is None:
            fail(f"no {split} split in {bin_dir} (files {split}.src-tgt.{lang}.*)")
        prefix = str(out_dir / f"test.src-tgt.{lang}")
        builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=len(dictionary))
        sizes.append(min(count, len(dataset)))
        for index in range(sizes[-1]):
            builder.add_item(dataset[index])
        builder.finalize(prefix + ".idx")
    return min(sizes)


def device_flags(device: str) -> list:
    return ["--cpu"] if device == "cpu" else []


def train(name: str, args, bin_dir: Path, save_dir: Path) -> dict:
    if save_dir.exists():
        shutil.rmtree(save_dir)  # fairseq-train would resume from an old checkpoint_last.pt
    save_dir.mkdir(parents=True)
    cmd = ["fairseq-train", bin_dir, "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
           *MODELS[name], *SIZES, "--optimizer", "adam", "--lr", "0.001", "--clip-norm", "2.0",
           "--max-tokens", args.max_tokens, "--max-update", args.updates, "--seed", "1",
           "--disable-validation", "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple",
           "--log-interval", args.log_interval, "--num-workers", "0", *device_flags(args.device)]
    output, elapsed, peak_mb = run_measured(cmd, save_dir / "train.log")
    wps = [float(m) for m in re.findall(r"train_inner .* wps=([\d.]+)", output)]
    if len(wps) < 2:
        fail(f"too few logged intervals for {name} (need 2): raise --updates or lower --log-interval\n"
             f"{output[-2000:]}")
    if not (save_dir / "checkpoint_last.pt").exists():
        fail(f"{name}: no checkpoint_last.pt in {save_dir}")
    return {"train_wps": statistics.mean(wps[1:]), "train_wall_s": elapsed, "train_peak_mb": peak_mb}


def decode(name: str, args, subset_dir: Path, save_dir: Path) -> dict:
    cmd = ["fairseq-generate", subset_dir, "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
           "--path", save_dir / "checkpoint_last.pt", "--gen-subset", "test", "--beam", args.beam,
           "--max-len-a", "0", "--max-len-b", args.max_len_b, "--min-len", args.min_len,
           "--batch-size", args.batch_size,
           "--num-workers", "0", "--quiet", *device_flags(args.device)]
    output, elapsed, peak_mb = run_measured(cmd, save_dir / "decode.log")
    found = TRANSLATED.search(output)
    if not found:
        fail(f"no 'Translated N sentences' line from fairseq-generate for {name}\n{output[-2000:]}")
    sentences, tokens = (int(found.group(k).replace(",", "")) for k in (1, 2))
    return {"decode_sentences": sentences, "decode_sent_per_s": float(found.group(3)),
            "decode_tok_per_s": float(found.group(4)), "hyp_len": tokens / max(sentences, 1),
            "decode_wall_s": elapsed, "decode_peak_mb": peak_mb}


def median_run(runs: list) -> dict:
    """Per figure, the median over the repeated runs of one model (and the runs' words/s and sentences/s)."""
    merged = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    merged["train_wps_runs"] = [run["train_wps"] for run in runs]
    merged["decode_sent_per_s_runs"] = [run["decode_sent_per_s"] for run in runs]
    return merged


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def report(results: dict, args, bin_dir: Path, split: str, sentences: int) -> str:
    threads = os.environ.get("OMP_NUM_THREADS", "torch default")
    lines = [
        f"Throughput on {args.device} (OMP_NUM_THREADS={threads}), data {bin_dir}",
        f"training: {args.updates} updates, --max-tokens {args.max_tokens}; decoding: the first {sentences} "
        f"sentences of {split}, beam {args.beam}, --max-len-b {args.max_len_b}, --min-len {args.min_len}, "
        f"--batch-size {args.batch_size}; medians of {args.repeats} run(s) per model, taken in turns",
        "",
        f"{'model':<14} {'train words/s':>14} {'train peak MB':>14} {'decode sent/s':>14} {'decode tok/s':>13} "
        f"{'hyp len':>8} {'decode peak MB':>15}",
    ]
    for name, r in results.items():
        lines.append(f"{name:<14} {r['train_wps']:>14.1f} {r['train_peak_mb']:>14.1f} "
                     f"{r['decode_sent_per_s']:>14.2f} {r['decode_tok_per_s']:>13.1f} {r['hyp_len']:>8.1f} "
                     f"{r['decode_peak_mb']:>15.1f}")
    if args.repeats > 1:
        lines.append("")
        for name, r in results.items():
            lines.append(f"{name}: words/s per run {', '.join(f'{x:.0f}' for x in r['train_wps_runs'])}; "
                         f"sentences/s per run {', '.join(f'{x:.2f}' for x in r['decode_sent_per_s_runs'])}")
    lstm = results["lstm"]
    lines.append("")
    for name in (n for n in results if n != "lstm"):
        target = " (target >= 1.0: {})" if name == "pgn_lstm" else ""
        for label, key in (("training words/s", "train_wps"), ("decode sentences/s", "decode_sent_per_s")):
            ratio = results[name][key] / lstm[key]
            lines.append(f"ratio {name} / lstm, {label}: {ratio:.2f}"
                         + target.format("met" if ratio >= 1.0 else "MISSED"))
        for label, key in (("training peak MB", "train_peak_mb"), ("decode peak MB", "decode_peak_mb")):
            lines.append(f"ratio {name} / lstm, {label}: {results[name][key] / lstm[key]:.2f}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=60, help="training updates per model")
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--log-interval", type=int, help="default: updates/4, at most 10 (wps needs 2 intervals)")
    parser.add_argument("--decode-sentences", type=int, default=200, help="how many sentences to decode")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-len-b", type=int, default=40, help="maximum summary length (with --max-len-a 0)")
    parser.add_argument("--min-len", type=int, help="minimum summary length (default: --max-len-b, fixed length)")
    parser.add_argument("--batch-size", type=int, default=32, help="decoding batch size")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: cuda when torch sees a GPU, else cpu")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench")
    parser.add_argument("--data-bin", type=Path, help="use this binarized data instead of LCSTS")
    parser.add_argument("--decode-subset", help="split to decode from (default: test if present, else valid)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="train and decode each model this many times, in turns; medians are reported")
    parser.add_argument("--all-models", action="store_true",
                        help="also pgn_lstm with See et al.'s attention size 512 (pgn_lstm_a512)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    args.log_interval = args.log_interval or max(1, min(10, args.updates // 4))
    args.min_len = args.max_len_b if args.min_len is None else args.min_len
    if not 1 <= args.min_len <= args.max_len_b:
        parser.error("--min-len must be between 1 and --max-len-b")
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}:{os.environ['PATH']}"
    args.device = resolve_device(args.device)

    bin_dir = args.data_bin or args.work / "lcsts_char" / "bin"
    if args.data_bin is None:
        prepare_lcsts(args.work / "lcsts_char", bin_dir)
    split = args.decode_subset or ("test" if (bin_dir / "test.src-tgt.src.bin").exists() else "valid")
    subset_dir = args.work / "decode_subset"
    sentences = make_decode_subset(bin_dir, split, args.decode_sentences, subset_dir)

    names = list(MODELS) if args.all_models else list(TARGETS)
    runs = {name: [] for name in names}
    for repeat in range(args.repeats):  # the models take turns, so a drifting machine affects them alike
        for name in names:
            save_dir = args.work / "models" / name
            runs[name].append({**train(name, args, bin_dir, save_dir), **decode(name, args, subset_dir, save_dir)})
    results = {name: median_run(name_runs) for name, name_runs in runs.items()}
    print()
    print(report(results, args, bin_dir, split, sentences))
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "updates": args.updates,
                                         "max_tokens": args.max_tokens, "decode_split": split,
                                         "decode_sentences": sentences, "beam": args.beam,
                                         "max_len_b": args.max_len_b, "min_len": args.min_len,
                                         "batch_size": args.batch_size, "repeats": args.repeats,
                                         "models": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()

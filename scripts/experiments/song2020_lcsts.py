#!/usr/bin/env python
"""Song & Zhao (2020), Table 2 at CPU scale: global encoding + selective gate and its two ablations on LCSTS.

    python scripts/experiments/song2020_lcsts.py [--minutes 12 | --max-update N] [--work runs/song2020_lcsts]
                                                  [--config song2020_lcsts_cpu] [--valid-size 500] [--threads N]

Steps, all through the project's own scripts:
  1. LCSTS PART_II from ../shared/data/lcsts_part2 (research use only: read from there, written only under
     WORK, never into the repository): train.tsv (8,666 pairs) is the training set; val.tsv (1,000 pairs) is
     split in file order, the first --valid-size pairs for validation (checkpoint selection, lr decay) and the
     rest for the test set.
  2. preprocess.sh (sentencepiece units trained on the training split: see the config).
  3. train.sh three times with the same budget: the full model, --no-selective-gate, --no-global-encoding.
     The budget is wall-clock minutes per run (fairseq's --stop-time-hours; validation time counts) or, with
     --max-update, a fixed number of updates.  Equal minutes are an equal CPU budget only on an otherwise idle
     machine; the number of updates each run reached is reported.  Every step runs with
     OMP_NUM_THREADS=--threads (default 1: while other jobs used the 2 cores, a training step with torch's 2
     threads took 3.9 s, with 1 thread 0.6 s).
  4. generate.sh on the test split with checkpoint_best.pt (lowest validation loss), then official ROUGE-1.5.5
     (summ-rouge --lang zh): Chinese ROUGE is computed on characters mapped to integer ids, whatever the
     training unit (here sentencepiece pieces), so the scores compare with character-level systems.
  5. A LEAD baseline: the first N characters of each source (whitespace removed), N = the mean length in
     characters of the *training* references (rounded), so no test statistic is used.
The result table goes to WORK/results.md (and stdout); logs of every step to WORK/logs/.
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
VARIANTS = {  # name: (Table 2 row, extra fairseq-train options)
    "full": ("global encoding + selective gate", []),
    "no_gate": ("w/o selective gate", ["--no-selective-gate"]),
    "no_global": ("w/o global encoding", ["--no-global-encoding"]),
}
ROUGE_ROW = re.compile(r"^(ROUGE-(?:1|2|L))\s+([\d.]+)\s+\[", re.M)


def log(message: str) -> None:
    print(f"song2020_lcsts: {message}", file=sys.stderr, flush=True)


def run(cmd, log_file: Path, stdout=None) -> float:
    """Run a command with its stderr (and stdout unless redirected) in log_file; returns the wall time."""
    log(" ".join(map(str, cmd)) + f"   (log: {log_file})")
    start = time.time()
    with log_file.open("w", encoding="utf-8") as err:
        result = subprocess.run(list(map(str, cmd)), cwd=ROOT, stdout=stdout or err, stderr=err,
                                stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace")[-3000:]
        sys.exit(f"song2020_lcsts: failed ({result.returncode}): {cmd[0]}\n{tail}")
    return time.time() - start


def read_lines(path: Path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def write_lines(path: Path, lines) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def chars(text: str) -> str:
    return "".join(text.split())


def prepare_raw(raw: Path, valid_size: int, logs: Path) -> dict:
    """train.tsv -> raw/train.*, val.tsv -> raw/valid.* (first valid_size pairs) and raw/test.* (the rest)."""
    if not LCSTS.is_dir():
        sys.exit(f"song2020_lcsts: {LCSTS} not found (needs ../shared/data beside the repository)")
    raw.mkdir(parents=True, exist_ok=True)
    run(["summ-convert", "tsv", LCSTS / "train.tsv", "--src-col", "1", "--tgt-col", "0",
         "--out-prefix", raw / "train"], logs / "convert_train.log")
    run(["summ-convert", "tsv", LCSTS / "val.tsv", "--src-col", "1", "--tgt-col", "0",
         "--out-prefix", raw / "heldout"], logs / "convert_val.log")
    counts = {"train": len(read_lines(raw / "train.src"))}
    for side in ("src", "tgt"):
        lines = read_lines(raw / f"heldout.{side}")
        if not 0 < valid_size < len(lines):
            sys.exit(f"song2020_lcsts: --valid-size must be in 1..{len(lines) - 1}")
        write_lines(raw / f"valid.{side}", lines[:valid_size])
        write_lines(raw / f"test.{side}", lines[valid_size:])
        (raw / f"heldout.{side}").unlink()
        counts["valid"], counts["test"] = valid_size, len(lines) - valid_size
    return counts


def rouge(refs: Path, hyps: Path, log_file: Path) -> dict:
    """Official ROUGE-1.5.5 F1 (percent) via summ-rouge --lang zh."""
    with (log_file.with_suffix(".out")).open("w", encoding="utf-8") as out:
        run(["summ-rouge", "--refs", refs, "--hyps", hyps, "--lang", "zh"], log_file, stdout=out)
    table = log_file.with_suffix(".out").read_text(encoding="utf-8")
    scores = {name: float(value) for name, value in ROUGE_ROW.findall(table)}
    if set(scores) != {"ROUGE-1", "ROUGE-2", "ROUGE-L"}:
        sys.exit(f"song2020_lcsts: could not read ROUGE-1/2/L F1 from summ-rouge's output:\n{table}")
    return scores


def train_log_facts(log_file: Path) -> dict:
    text = log_file.read_text(encoding="utf-8", errors="replace")
    updates = re.findall(r"num_updates[ =](\d+)", text)
    best = re.findall(r"\| valid on 'valid' subset \| loss ([\d.]+)", text)
    epochs = re.findall(r"\| valid \| epoch (\d+)", text)
    return {"updates": int(updates[-1]) if updates else 0,
            "best_valid_loss": min(map(float, best)) if best else None,
            "epochs": int(epochs[-1]) if epochs else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, default=12.0,
                        help="wall-clock training budget per run (default 12: about 40 min in all on 2 cores)")
    budget.add_argument("--max-update", type=int, help="fixed number of updates per run instead of --minutes")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "song2020_lcsts")
    parser.add_argument("--config", default="song2020_lcsts_cpu", help="config in configs/ (default: %(default)s)")
    parser.add_argument("--valid-size", type=int, default=500, help="pairs of val.tsv used for validation")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of: "
                        + ", ".join(VARIANTS))
    parser.add_argument("--output", type=Path, help="markdown result file (default: WORK/results.md)")
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP_NUM_THREADS for every step (0: torch's choice, one per core; default: %(default)s, "
                             "much faster when other jobs share the cores)")
    parser.add_argument("--reuse-data", action="store_true",
                        help="keep WORK/data from an earlier run (same config and --valid-size!)")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants: {', '.join(unknown)}")
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}:{os.environ['PATH']}"
    if args.threads > 0:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    work = args.work.resolve()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    output = args.output or work / "results.md"
    budget_args = (["--max-update", str(args.max_update)] if args.max_update is not None
                   else ["--max-update", "0", "--stop-time-hours", f"{args.minutes / 60:.6f}"])
    budget_text = (f"{args.max_update} updates per run" if args.max_update is not None
                   else f"{args.minutes:g} wall-clock minutes per run (--stop-time-hours)")
    started = time.time()

    # 1-2. Data (prepared again on every run unless --reuse-data: it takes about a minute).
    data, raw = work / "data", work / "raw"
    if args.reuse_data and (data / "bin" / "dict.src.txt").is_file():
        log(f"reusing prepared data in {data}")
        counts = {split: len(read_lines(raw / f"{split}.src")) for split in ("train", "valid", "test")}
        prep_seconds = 0.0
    else:
        shutil.rmtree(data, ignore_errors=True)
        counts = prepare_raw(raw, args.valid_size, logs)
        prep_seconds = run([ROOT / "preprocess.sh", "-c", args.config, raw, data], logs / "preprocess.log")
    prep = json.loads((data / "prep.json").read_text(encoding="utf-8"))["settings"]
    units = prep["unit"]
    if units == "sp":
        units = f"sentencepiece {prep['sp_model_type']}, {prep['sp_vocab_size']} pieces (soft limit), trained on " \
                "the training split"

    # 3-4. Train and evaluate every variant with the same budget.
    refs = data / "ref" / "test.tgt"
    rows = []
    for name in variants:
        label, options = VARIANTS[name]
        model = work / "models" / name
        shutil.rmtree(model, ignore_errors=True)  # a fresh run: never resume a run with another budget
        train_seconds = run([ROOT / "train.sh", "-c", args.config, data, model, *options, *budget_args],
                            logs / f"train_{name}.log")
        hyps = work / f"test.{name}.txt"
        gen_seconds = run([ROOT / "generate.sh", "-c", args.config, "--split", "test", "--output", hyps,
                           data, model], logs / f"generate_{name}.log")
        if len(read_lines(hyps)) != counts["test"]:
            sys.exit(f"song2020_lcsts: {hyps} does not have one line per test document")
        rows.append(dict(label=label, options=" ".join(options) or "(none)",
                         rouge=rouge(refs, hyps, logs / f"rouge_{name}.log"),
                         train_min=train_seconds / 60, gen_min=gen_seconds / 60,
                         **train_log_facts(logs / f"train_{name}.log")))

    # 5. LEAD baseline.
    lead_n = round(statistics.mean(len(chars(t)) for t in read_lines(raw / "train.tgt")))
    lead = work / "test.lead.txt"
    write_lines(lead, [chars(src)[:lead_n] for src in read_lines(raw / "test.src")])
    lead_rouge = rouge(refs, lead, logs / "rouge_lead.log")

    # Report.
    total_min = (time.time() - started) / 60
    fmt = lambda r: " | ".join(f"{r[m]:.2f}" for m in ("ROUGE-1", "ROUGE-2", "ROUGE-L"))  # noqa: E731
    lines = [
        "# Song & Zhao (2020) Table 2 at CPU scale: LCSTS PART_II",
        "",
        f"Config `configs/{args.config}.conf`; budget: {budget_text}; threads: "
        f"{args.threads or 'torch default'} (on {os.cpu_count()} cores); units: {units}.",
        f"Data: `../shared/data/lcsts_part2`: train.tsv ({counts['train']} pairs) for training; val.tsv split in "
        f"file order, the first {counts['valid']} pairs for validation (checkpoint_best.pt, lr decay), the other "
        f"{counts['test']} pairs for the test set below.",
        "ROUGE: official ROUGE-1.5.5 F1 (percent) via `summ-rouge --lang zh`, computed on **characters mapped to "
        "integer ids, regardless of the training unit** (the models generate sentencepiece pieces, which are "
        "joined back into text before scoring).",
        f"LEAD: the first {lead_n} characters of the source (whitespace removed); {lead_n} = mean length in "
        "characters of the training references.",
        "",
        "| system | extra options | ROUGE-1 | ROUGE-2 | ROUGE-L | updates | epochs | best valid loss | train min |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| LEAD-{lead_n} (characters) | | {fmt(lead_rouge)} | | | | |",
    ]
    for r in rows:
        best = f"{r['best_valid_loss']:.3f}" if r["best_valid_loss"] is not None else "n/a"
        lines.append(f"| {r['label']} | `{r['options']}` | {fmt(r['rouge'])} | {r['updates']} | {r['epochs']} | "
                     f"{best} | {r['train_min']:.1f} |")
    lines += [
        "",
        f"Total wall time {total_min:.1f} min (preprocessing {prep_seconds / 60:.1f} min, generation "
        f"{sum(r['gen_min'] for r in rows):.1f} min, beam search as in the config's GEN_ARGS).",
        "Validation loss: focal_copy_coverage with alpha 1, gamma 0 = NLL per summary (base 2).",
        "Not comparable with the paper's numbers: the paper trains on LCSTS PART_I (2.4M pairs) on a GPU and tests "
        "on PART_III; this is 8.7k training pairs and a CPU budget.",
        "",
    ]
    output.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    log(f"wrote {output} ({total_min:.1f} min in all)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""See et al. (2017)'s optimizer: Adagrad with the initial accumulator 0.1 vs fairseq's Adagrad (accumulator 0).

    python scripts/experiments/see2017_adagrad.py [--updates 200] [--data cnndm | scitldr] [--docs N]
        [--config dtu_pointer] [--arch pgn_lstm_see2017] [--max-tokens N] [--vocab-size N]
        [--train-args "..."] [--work runs/see2017_adagrad]

See et al. train with Adagrad, lr 0.15, initial accumulator 0.1 (section 5).  fairseq's ``adagrad`` starts the
accumulator at 0, so its first update moves every parameter by about lr; the plugin's ``adagrad_acc``
(fairseq_plugins/optim/adagrad_acc.py) starts it at 0.1.  This script trains the same model twice, on the same
data with the same seed (so the same initial weights and the same batches, in the same order), for --updates
updates each:
  adagrad      --optimizer adagrad --lr 0.15                                       (accumulator 0)
  adagrad_acc  --optimizer adagrad_acc --lr 0.15 --adagrad-initial-accumulator 0.1 (See et al.)
Everything else is the config's TRAIN_ARGS (default configs/dtu_pointer.conf: See et al.'s pointer-generator,
the phase of their recipe that precedes coverage, pgn_lstm_see2017, clip-norm 2) with --arch, --max-tokens
and --train-args applied after them.  Validation and checkpoints are off: only the training loss is compared.

Data (--data):
  cnndm    ../shared/data/cnndm_see2017/part_a.jsonl.gz (research use only: read from there, written only under
           WORK): the first --docs CNN/DailyMail articles (lower-cased, PTB-tokenized, truncated as See et al.
           released them) with their reference highlights, converted with `summ-convert jsonl` and split with
           `summ-convert split` (100 valid, 100 test, the rest train).  These are test-set documents of
           CNN/DM, used here only to compare two optimizers on the same batches, not to evaluate anything.
  scitldr  the shipped data/scitldr (its train/valid/test splits; --docs limits the training split).
Both are then prepared by preprocess.sh with the config's PREP_ARGS (vocabulary --vocab-size if given).

Writes, under WORK:
  loss_curves.png    the training loss of both runs per update (and a 10-update moving mean)
  loss_table.md      the command, commit and machine, then the loss every 10 updates (at that update and the
                     mean of the 10 updates ending there)
  losses.csv         every update's loss and nll_loss for both runs
  logs/              every command's output
  models/VARIANT/    each run's training record (scripts/experiments/records.py; the runs save no checkpoint):
                     a run is reused when its record (options, config, data, code) is what this one would train
The loss is fairseq's logged ``loss`` of focal_copy_coverage: per summary, the mean over its steps, in bits
(base 2); with the DTU configs' alpha 1, gamma 0 it is See et al.'s NLL (+ coverage loss if the config has it).
Threads: torch uses one thread per core unless OMP_NUM_THREADS is set; on a shared machine set it to 1.
"""
import argparse
import csv
import os
import re
import shlex
import sys
from pathlib import Path

from scripts.experiments.corpora import CNNDM, cnndm_lines, require
from scripts.experiments.lib import ROOT, Experiment, config_array
from scripts.experiments.records import made_header, train_or_reuse, training_record

SCITLDR = ROOT / "data" / "scitldr"
LR = "0.15"  # See et al. (2017), section 5
VARIANTS = {  # name: (label, optimizer options)
    "adagrad": ("fairseq adagrad (accumulator 0)", ["--optimizer", "adagrad", "--lr", LR]),
    "adagrad_acc": ("adagrad_acc (accumulator 0.1, See et al.)",
                    ["--optimizer", "adagrad_acc", "--lr", LR, "--adagrad-initial-accumulator", "0.1"]),
}
OPTIMIZER_OPTIONS = ("--optimizer", "--lr", "--adagrad-initial-accumulator", "--weight-decay", "--wd")
TRAIN_LINE = re.compile(r"\| train_inner \| .*?\bloss=([\d.]+|nan|inf), nll_loss=([\d.]+|nan|inf),"
                        r".*?\bnum_updates=(\d+)")
VALID_AND_TEST = 100  # documents of the CNN/DM slice held out as valid and test (preprocess.sh needs them)


def without_options(args: list, names) -> list:
    """args with every ``--name VALUE`` of the given option names removed (all of them take one value)."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif arg.split("=", 1)[0] in names:
            continue
        else:
            kept.append(arg)
    return kept


# ------------------------------------------------------------------------------------------------ data
def raw_cnndm(exp: Experiment, raw: Path, docs: int) -> None:
    require(CNNDM, exp.fail, "; or use --data scitldr")
    if docs <= 2 * VALID_AND_TEST:
        exp.fail(f"--docs must be more than {2 * VALID_AND_TEST} for cnndm ({VALID_AND_TEST} valid + "
                 f"{VALID_AND_TEST} test + training), got {docs}")
    raw.mkdir(parents=True, exist_ok=True)
    head = raw / "part_a.head.jsonl"
    with head.open("w", encoding="utf-8") as out:
        out.writelines(cnndm_lines(docs))
    exp.run(["summ-convert", "jsonl", head, "--src-field", "article", "--tgt-field", "reference",
             "--out-prefix", raw / "all"], "convert.log")
    exp.run(["summ-convert", "split", "--in-prefix", raw / "all", "--out-dir", raw,
             "--sizes", f"valid={VALID_AND_TEST},test={VALID_AND_TEST}", "--rest", "train"], "split.log")


def raw_scitldr(raw: Path, docs) -> None:
    raw.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            lines = (SCITLDR / f"{split}.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
            if split == "train" and docs:
                lines = lines[:docs]
            (raw / f"{split}.{side}").write_text("".join(lines), encoding="utf-8")


def prepare(exp: Experiment, args) -> Path:
    """Raw splits and preprocess.sh, each skipped when already done for the same settings."""
    name = f"{args.data}-docs{args.docs or 'all'}-{args.config}" + (f"-v{args.vocab_size}" if args.vocab_size else "")
    raw, data = exp.work / "raw" / name, exp.work / "data" / name
    if not (raw / "train.tgt").exists():
        raw_cnndm(exp, raw, args.docs or 10_000) if args.data == "cnndm" else raw_scitldr(raw, args.docs)
    if not (data / "bin" / "dict.src.txt").exists():
        config = args.config
        if args.vocab_size:  # a config that is the chosen one with another vocabulary size (last value wins)
            config = exp.work / f"{args.config}.v{args.vocab_size}.conf"
            source = ROOT / "configs" / f"{args.config}.conf"
            config.write_text(f'source "{source}"\nPREP_ARGS+=(--vocab-size {args.vocab_size})\n', encoding="utf-8")
        exp.run([ROOT / "preprocess.sh", "-c", config, raw, data], f"preprocess-{name}.log")
    return data


# -------------------------------------------------------------------------------------------- training
def train(exp: Experiment, variant: str, data: Path, base_args: list, args):
    """One fairseq-train run (reused when its training record matches); returns {update: (loss, nll_loss)} from
    its log."""
    options = [*base_args, *VARIANTS[variant][1], "--max-update", str(args.updates), "--log-interval", "1",
               "--log-format", "simple", "--disable-validation", "--no-save"]
    log_name = f"train-{variant}.log"
    train_or_reuse(exp, variant, exp.work / "models" / variant, log_name, training_record(args.config, options, data),
                   ["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", *options], saves=False)
    log_file = exp.logs / log_name
    losses = {int(n): (float(loss), float(nll)) for loss, nll, n in
              TRAIN_LINE.findall(log_file.read_text(encoding="utf-8", errors="replace"))}
    missing = sorted(set(range(1, args.updates + 1)) - set(losses))
    if missing:
        exp.fail(f"{log_file} has no loss for updates {missing[:5]}... (log format changed?)")
    return losses


# --------------------------------------------------------------------------------------------- outputs
def moving_mean(values, window=10):
    return [sum(values[max(0, i - window + 1):i + 1]) / len(values[max(0, i - window + 1):i + 1])
            for i in range(len(values))]


def write_outputs(curves: dict, args, setup: str) -> None:
    updates = list(range(1, args.updates + 1))
    names = list(VARIANTS)
    with (args.work / "losses.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["update"] + [f"{n}_{k}" for n in names for k in ("loss", "nll_loss")])
        for u in updates:
            writer.writerow([u] + [v for n in names for v in curves[n][u]])
    loss = {n: [curves[n][u][0] for u in updates] for n in names}
    mean = {n: moving_mean(loss[n]) for n in names}
    lines = loss_table(loss, mean, args, setup)
    (args.work / "loss_table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    plot_curves(loss, mean, updates, args.work / "loss_curves.png")


def loss_table(loss: dict, mean: dict, args, setup: str) -> list:
    """loss_table.md: the title, the command, commit and machine (records.made_header), ``setup``, the loss of both
    runs every 10 updates with its 10-update mean (``loss``, ``mean``: per variant, one value an update), and the
    mean over the last 10 updates."""
    names = list(VARIANTS)
    rows = [u for u in range(1, args.updates + 1) if u == 1 or u % 10 == 0 or u == args.updates]
    lines = [
        f"# See et al. (2017)'s Adagrad accumulator: training loss, {args.updates} updates",
        "",
        *made_header("see2017_adagrad.py", args.argv),
        "",
        setup,
        "",
        "Training loss (bits per summary step, fairseq's logged `loss`) at each update, and the mean of the 10",
        "updates ending there.  Both runs have the same initial weights and the same batches in the same order.",
        "",
        "| update | " + " | ".join(f"{VARIANTS[n][0]}" for n in names) + " | "
        + " | ".join(f"10-update mean, {n}" for n in names) + " |",
        "|---:|" + "---:|" * (2 * len(names)),
    ]
    for u in rows:
        lines.append(f"| {u} | " + " | ".join(f"{loss[n][u - 1]:.3f}" for n in names) + " | "
                     + " | ".join(f"{mean[n][u - 1]:.3f}" for n in names) + " |")
    last = min(10, args.updates)
    return lines + ["", f"Mean loss over the last {last} updates: "
                    + "; ".join(f"{n} {sum(loss[n][-last:]) / last:.3f}" for n in names) + "."]


def plot_curves(loss: dict, mean: dict, updates: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for n, color in zip(VARIANTS, ("tab:red", "tab:blue")):
        ax.plot(updates, loss[n], color=color, alpha=0.3, linewidth=0.8)
        ax.plot(updates, mean[n], color=color, linewidth=2, label=f"{VARIANTS[n][0]} (10-update mean)")
    ax.set_xlabel("update")
    ax.set_ylabel("training loss (bits per summary step)")
    ax.set_title("Adagrad, lr 0.15: initial accumulator 0 (fairseq) vs 0.1 (See et al. 2017)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=200, help="updates per run (default 200)")
    parser.add_argument("--data", choices=("cnndm", "scitldr"), default="cnndm")
    parser.add_argument("--docs", type=int, help="cnndm: documents read from part_a (default all 10,000, of "
                        "which 200 are held out); scitldr: training documents (default all)")
    parser.add_argument("--config", default="dtu_pointer", help="a configs/dtu_*.conf name (default dtu_pointer)")
    parser.add_argument("--arch", help="override the config's --arch (e.g. pgn_lstm_small for a CPU-sized model)")
    parser.add_argument("--max-tokens", type=int, help="override the config's --max-tokens")
    parser.add_argument("--vocab-size", type=int, help="override the config's vocabulary size (preprocessing)")
    parser.add_argument("--train-args", default="", help="more fairseq-train options for both runs, one string")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "see2017_adagrad")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.updates < 1:
        parser.error(f"--updates must be >= 1, got {args.updates}")
    if args.docs is not None and args.docs < 1:
        parser.error(f"--docs must be >= 1, got {args.docs}")
    exp = Experiment("see2017_adagrad", args.work, threads=0)  # torch's threads, or OMP_NUM_THREADS if set
    args.work = exp.work
    data = prepare(exp, args)
    base_args = without_options(config_array(args.config, "TRAIN_ARGS"), OPTIMIZER_OPTIONS)
    if args.arch:
        base_args += ["--arch", args.arch]
    if args.max_tokens:
        base_args += ["--max-tokens", str(args.max_tokens)]
    base_args += shlex.split(args.train_args)
    curves = {variant: train(exp, variant, data, base_args, args) for variant in VARIANTS}

    first = {n: curves[n][1][0] for n in VARIANTS}
    if len(set(first.values())) != 1:  # same weights and batch: update 1's loss is computed before any step
        exp.log(f"warning: update 1 losses differ ({first}): the two runs did not start from the same model/batch")
    setup = (f"Data: {args.data} ({data.name}); config {args.config}; fairseq-train options besides the "
             f"optimizer: `{' '.join(base_args)}`; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}.")
    write_outputs(curves, args, setup)
    exp.log(f"wrote {args.work / 'loss_curves.png'}, {args.work / 'loss_table.md'} and {args.work / 'losses.csv'}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Shi et al. (2018), Table 1 at CPU scale: seven pgn_lstm rows and fairseq's lstm with the same budget each, over
one or more seeds, against LEAD-20.

    python scripts/experiments/shi2018_table1.py [--updates 600 | --budget-minutes 8] [--rows 1,...,7] [--seeds 1,2]
                                                 [--work runs/shi2018] [--archive DEST.tar.xz]
    python scripts/experiments/shi2018_table1.py --scale paper --raw DIR --w2v FILE [--launcher slurm ...]
    python scripts/experiments/shi2018_table1.py --scale paper --dry-run [--dry-run-batch N]

``--scale paper``: the seven rows at the paper's scale (configs/shi2018_lcsts_paper.conf: LCSTS PART_I, jieba
words, 60k vocabulary, nothing truncated, embeddings 400, encoder 2 x 600, decoder 1200, Adam 1e-3, batches of 2,
100,000 updates; the rows' options are those of configs/shi2018_lcsts_row*.conf), through compare.py on DIR
(summ-convert of PART_I, II and III into train, valid and test), the word2vec rows reading --w2v (400-dimensional,
scripts/train_word2vec.py --dim 400 on that data); compare.py's table (official ROUGE) replaces table1.md.
``--dry-run`` budgets it (scripts/experiments/paper_scale.py).

Rows (configs/shi2018_lcsts_row*.conf): (1) baseline, (2) + word2vec, (3) + fixed word2vec, (4) normalized,
(5) normalized + word2vec + NLL, (6) normalized + word2vec + focal loss; and ours, (7) row 6 with the coverage
loss weight lambda scaled by alpha (0.25), so that coverage weighs against the word term as in rows (1)-(5).
The trivial baselines beside them: LEAD-20 (the source's first 20 characters) and fairseq's ``lstm`` with the rows'
data, sizes and budget (configs/shi2018_lcsts_lstm.conf); a row below either is flagged.

Data: LCSTS PART_II from ../shared/data (research use only: read from there, never shipped).  train.tsv is the
training set; val.tsv is split in two: its first 500 pairs validate (accuracy curves, best checkpoint) and
the other 500 are the test set.  Units: jieba words; word2vec (scripts/train_word2vec.py) is trained on the
sources and targets of every split, in the same tokenization.

Each row trains, once per seed (--seeds; train.sh's --seed), for the same number of updates (--updates; the same
batches for one seed, so the same computation for every row but the frozen-embedding one, and immune to other load
on the machine) or, with --budget-minutes, the same fairseq training time (--stop-time-hours), validating every 150
updates with greedy summaries (accuracy, eq 17, on jieba words); the best-accuracy checkpoint then summarizes
the test set (beam 5).  Writes WORK/table1.md: a generated header (command, commit, machine, versions, seeds,
budget), one line per row and seed (updates, epochs, train minutes, accuracy; NLPCC-style ROUGE-2/-4/-SU4;
ROUGE-1/2/L, all official ROUGE-1.5.5 F1 on characters mapped to ids; the trivial baselines it is below), and
Table 1's steps as paired bootstraps with the project's verdict over the seeds (lib.verdict);
WORK/results.json (the same figures) and WORK/accuracy_curves.png (like the paper's Fig. 6, the first seed).
``--archive DEST.tar.xz`` then packs what the table is made of (no checkpoints, no data): the table, results.json,
the summaries, the per-document ROUGE of every interval and the training logs.

Run again over the same WORK, a row is reused only when its training record (scripts/experiments/records.py:
its train.sh options, budget and seed included, its config's text, the data's prep.json, the word2vec file's
SHA-256 and the code: train.sh, the configs it sources and fairseq_plugins/, with fairseq's and torch's versions) is
what this run would train; an interrupted row with the same record resumes from its checkpoint_last.pt and adds to
WORK/logs/train_NAME.log, so its curve and best accuracy cover the whole training; any other row is trained from
scratch (said on stderr).  Its test summaries are reused only under compare.py's decode record.  Threads:
--threads (default: torch's, one per core).
"""
import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

from scripts.experiments import compare, paper_scale, slurm_launcher
from scripts.experiments.corpora import lcsts_raw
from scripts.experiments.lib import (ROOT, Experiment, lead, pack, paired_intervals, per_doc_rouge, read_lines,
                                     train_facts, verdict, write_lines)
from scripts.experiments.records import provenance, sha256, train_or_reuse, training_record

ROWS = {
    1: "baseline",
    2: "+ word2vec",
    3: "+ fixed word2vec",
    4: "normalized",
    5: "normalized + word2vec + NLL",
    6: "normalized + word2vec + focal loss",
    7: "(ours) row 6 with lambda scaled by alpha (0.25)",
}
CONTROL = "lstm"  # fairseq's lstm at the rows' budget: configs/shi2018_lcsts_lstm.conf
LEAD_SIZE = 20  # characters: the mean LCSTS summary is about 18
STEPS = [("row2", "row1"), ("row3", "row2"), ("row4", "row1"), ("row5", "row4"), ("row6", "row5"), ("row7", "row6"),
         ("row1", CONTROL)]  # B - A: Table 1's steps, then the baseline against fairseq's lstm
COLUMNS = ["NLPCC R-2", "NLPCC R-4", "NLPCC R-SU4", "R-1", "R-2", "R-L"]
VALID_LINE = re.compile(r"valid on 'valid' subset .*\| accuracy ([\d.]+) .*\| num_updates (\d+)")
ARCHIVED = ("table1.md", "results.json", "outputs/*.txt", "logs/rouge_*.per_doc.tsv", "logs/train_*.log")


def config(label: str) -> str:
    return "shi2018_lcsts_lstm" if label == CONTROL else f"shi2018_lcsts_{label}"


def description(label: str) -> str:
    return "fairseq's lstm (no copy, no coverage)" if label == CONTROL else ROWS[int(label[3:])]


def prepare(exp: Experiment):
    """Raw splits, preprocessing and word2vec under WORK, each skipped when already there."""
    raw, data, w2v = exp.work / "raw", exp.work / "data", exp.work / "w2v.bin"
    if not (raw / "test.tgt").exists():
        lcsts_raw(exp, raw, valid_size=500)
    if not (data / "bin" / "dict.src.txt").exists():
        exp.run([ROOT / "preprocess.sh", "-c", "shi2018_lcsts", raw, data], "preprocess.log")
    if not w2v.exists():
        exp.run([sys.executable, ROOT / "scripts" / "train_word2vec.py", "--prep", data / "prep.json",
                 "--raw-dir", raw, "--dim", "128", "--out", w2v], "word2vec.log")
    return data, w2v


def train(exp: Experiment, label: str, seed: int, data: Path, w2v: Path, budget: list) -> Path:
    """Trains LABEL (row1..row7, lstm) with SEED into WORK/models/LABEL.seedSEED, or resumes it, or reuses it
    (``train_or_reuse``, by its record with the word2vec file's digest); returns that folder."""
    name, options = f"{label}.seed{seed}", [*budget, "--seed", str(seed)]
    model = exp.work / "models" / name
    want = training_record(config(label), options, data, inputs={"W2V": sha256([w2v])})
    train_or_reuse(exp, name, model, f"train_{name}.log", want,
                   [ROOT / "train.sh", "-c", config(label), data, model, *options])
    return model


def read_curve(log: Path) -> list:
    """[(updates, accuracy)] of every validation in the log, in update order; an update validated twice (a
    resumed run repeating the steps after its last checkpoint) keeps its latest value."""
    points = {int(n): float(acc) for acc, n in VALID_LINE.findall(log.read_text(encoding="utf-8"))}
    return sorted(points.items())


def run_system(exp: Experiment, label: str, seed: int, data: Path, w2v: Path, budget: list, n_test: int) -> dict:
    """``train``, then the best checkpoint summarizes the test set (beam 5, reused under compare.py's decode
    record): the system's line of results.json."""
    model, name = train(exp, label, seed, data, w2v, budget), f"{label}.seed{seed}"
    hyps = exp.work / "outputs" / f"{name}.txt"
    hyps.parent.mkdir(exist_ok=True)
    compare.decode(exp, [ROOT / "generate.sh", "--verbose", "--no-detok", "-c", config(label), "--split", "test",
                         "--output", hyps, data, model], data, model, hyps, f"generate_{name}.log", n_test)
    log = exp.logs / f"train_{name}.log"
    facts = train_facts(log)
    return {"system": label, "seed": seed, "curve": read_curve(log), "updates": facts["updates"],
            "epochs": facts["epochs"], "train_min": float((model / "train_seconds").read_text()) / 60,
            "scores": score(data / "ref" / "test.tgt", hyps)}


def lead_row(exp: Experiment) -> dict:
    hyps = exp.work / "outputs" / "lead.txt"
    hyps.parent.mkdir(exist_ok=True)
    write_lines(hyps, lead(read_lines(exp.work / "raw" / "test.src"), "zh", LEAD_SIZE))
    return {"system": f"LEAD-{LEAD_SIZE}", "seed": None, "scores": score(exp.work / "data" / "ref" / "test.tgt", hyps)}


def score(refs: Path, hyps: Path):
    from fairseq_plugins.scoring import rouge155

    references = refs.read_text(encoding="utf-8").splitlines()
    hypotheses = hyps.read_text(encoding="utf-8").splitlines()
    plain = rouge155.score(references, hypotheses, lang="zh")
    nlpcc = rouge155.score(references, hypotheses, lang="zh", nlpcc=True)
    return {"R-1": plain["rouge-1"]["f"], "R-2": plain["rouge-2"]["f"], "R-L": plain["rouge-l"]["f"],
            "NLPCC R-2": nlpcc["rouge-2"]["f"], "NLPCC R-4": nlpcc["rouge-4"]["f"],
            "NLPCC R-SU4": nlpcc["rouge-su4"]["f"]}


def below_baselines(results: list) -> dict:
    """(system, seed) -> the trivial baselines whose ROUGE-1 it is below: LEAD-20, and fairseq's lstm of the same
    seed.  A row below one is an untrained model or a bad setup until a control explains it."""
    bases = [r for r in results if r["seed"] is None or r["system"] == CONTROL]
    flags = {}
    for row in results:
        if row["seed"] is None:  # LEAD-20 itself
            continue
        below = [base for base in bases if base is not row and base["seed"] in (None, row["seed"])
                 and row["scores"]["R-1"] < base["scores"]["R-1"]]
        flags[(row["system"], row["seed"])] = ", ".join(f"**{name_of(base)}**" for base in below)
    return flags


def name_of(row: dict) -> str:
    return row["system"] if row["seed"] is None else f"{row['system']} seed {row['seed']}"


def table_lines(results: list) -> list:
    flags = below_baselines(results)
    lines = ["| system | model | seed | updates | epochs | train min | accuracy | " + " | ".join(COLUMNS)
             + " | below a trivial baseline |", "|" + "---|" * (len(COLUMNS) + 8)]
    for row in results:
        values = " | ".join(f"{100 * row['scores'][c]:.2f}" for c in COLUMNS)
        if row["seed"] is None:
            lines.append(f"| {row['system']} | the source's first {LEAD_SIZE} characters | | | | | | {values} | |")
            continue
        best = max((acc for _, acc in row["curve"]), default=float("nan"))
        epochs = "" if row["epochs"] is None else f"{row['epochs']:.1f}"
        lines.append(f"| {row['system']} | {description(row['system'])} | {row['seed']} | {row['updates']} | "
                     f"{epochs} | {row['train_min']:.1f} | {best:.2f} | {values} | "
                     f"{flags[(row['system'], row['seed'])]} |")
    return lines


def steps_section(exp: Experiment, results: list, seeds: list) -> list:
    """Table 1's steps (STEPS, those whose two rows ran) as paired bootstraps of ROUGE-1/2/L per seed, with the
    verdict over the seeds."""
    ran = {row["system"] for row in results}
    steps = [(b, a) for b, a in STEPS if b in ran and a in ran]
    count = len(steps) * len(seeds)
    lines = ["## Table 1's steps", "",
             f"B - A in ROUGE points (official ROUGE-1.5.5 per-document F1, characters mapped to ids), 95 % interval "
             f"over 10,000 paired resamples of the {len(read_lines(exp.work / 'raw' / 'test.src'))} test pairs, per "
             f"seed ({len(seeds)}): {count} intervals of 3 scores each ({3 * count} in all), none corrected for "
             "their number. A direction holds only when every seed, two or more, shows it with an interval that "
             "excludes zero; otherwise inconclusive.", "",
             "| B | A | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|"]
    for b, a in steps:
        runs = [paired_intervals(*(per_doc_rouge(exp, f"{x}.seed{seed}", "zh") for x in (a, b))) for seed in seeds]
        cells = [verdict([run[metric] for run in runs]) for metric in range(3)]
        lines.append(f"| {b} ({description(b)}) | {a} ({description(a)}) | " + " | ".join(cells) + " |")
    return lines


def header(exp: Experiment, seeds: list, budget: str, threads) -> list:
    command = "python scripts/experiments/shi2018_table1.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    counts = {split: len(read_lines(exp.work / "raw" / f"{split}.src")) for split in ("train", "valid", "test")}
    return [
        f"# Shi et al. (2018) Table 1 at CPU scale: LCSTS PART_II, {budget} of training each", "",
        f"Command: `{command}`", "",
        provenance(f"Seeds: {', '.join(map(str, seeds))} (train.sh --seed; one line per row and seed)."), "",
        f"Corpus: LCSTS PART_II, {counts['train']} training, {counts['valid']} validation, {counts['test']} test "
        "pairs; jieba words (configs/shi2018_lcsts.conf). Budget: " + budget + " per row and seed; the epochs column "
        f"counts passes over the {counts['train']} training pairs; threads: {threads or 'torch default'}.",
        "Accuracy: eq 17 on jieba words, best validation value (greedy). ROUGE: official ROUGE-1.5.5 F1 (%) on the "
        "test pairs, characters mapped to ids, whatever the training unit; beam 5.", ""]


def write_table(exp: Experiment, results: list, seeds: list, budget: str, threads, started: float) -> None:
    lines = [*header(exp, seeds, budget, threads), *table_lines(results), "",
             *steps_section(exp, results, seeds), "",
             f"Wall time of this invocation {(time.time() - started) / 60:.1f} min (a reused system adds none; the "
             "train min column is each system's own training)."]
    (exp.work / "table1.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (exp.work / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))


def archive(work: Path, dest: Path) -> list:
    """Packs the files of ARCHIVED in WORK into DEST (a .tar.xz) under their paths in WORK; returns those paths."""
    return pack(work, ARCHIVED, dest)


def plot_curves(work: Path, results: list):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = min(row["seed"] for row in results if row["seed"] is not None)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in results:
        if row["seed"] == first and row["curve"]:
            label = f"{row['system']}: {description(row['system'])}"
            ax.plot(*zip(*row["curve"]), marker="o", markersize=3, label=label)
    ax.set_xlabel("updates")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(f"Accuracy during training (cf. Shi et al. 2018, Fig. 6), seed {first}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(work / "accuracy_curves.png", dpi=120)


def parse_list(parser, text: str, allowed=None) -> list:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        parser.error(f"{text!r}: give numbers separated by commas")
    if allowed is not None and not set(values) <= set(allowed):
        parser.error(f"{text!r}: rows are {min(allowed)} to {max(allowed)}")
    if len(set(values)) != len(values):
        parser.error(f"{text!r}: a number is repeated")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=600, help="updates per row (the configs' 600)")
    parser.add_argument("--budget-minutes", type=float, help="training time per row, instead of --updates")
    parser.add_argument("--rows", default="1,2,3,4,5,6,7")
    parser.add_argument("--seeds", default="1", help="train.sh --seed of each row's trainings, e.g. 1,2")
    parser.add_argument("--work", type=Path, help="work folder (default runs/shi2018; --scale paper: "
                                                  "runs/shi2018_table1_paper, dry run runs/shi2018_table1_dry_run)")
    parser.add_argument("--threads", type=int, help="torch threads per training (default: one per core; --scale "
                        "paper: compare.py's --threads, default 1)")
    parser.add_argument("--w2v", type=Path, help="--scale paper: the word2vec file of rows 2, 3, 5, 6 and 7")
    parser.add_argument("--archive", type=Path, metavar="DEST.tar.xz",
                        help="then pack what the table is made of into DEST (no checkpoints, no data)")
    paper_scale.add_options(parser)
    slurm_launcher.add_options(parser)
    args = parser.parse_args()
    if args.scale == "paper" or args.dry_run:
        if not (args.dry_run or args.w2v):
            parser.error("--scale paper needs --w2v FILE (rows 2, 3, 5, 6 and 7 start from word2vec)")
        args.threads = args.threads or 1
        return paper_scale.run(paper_scale.SHI2018, args, {"w2v": args.w2v})
    rows, seeds = parse_list(parser, args.rows, ROWS), parse_list(parser, args.seeds)
    if args.archive and not args.archive.name.endswith(".tar.xz"):
        parser.error(f"--archive {args.archive}: give a .tar.xz file")
    run_table(args, rows, seeds)


def run_table(args, rows: list, seeds: list) -> None:
    started = time.time()
    exp = Experiment("shi2018_table1", args.work or ROOT / "runs" / "shi2018", args.threads or 0)
    data, w2v = prepare(exp)
    exp.env["W2V"] = str(w2v)  # rows 2, 3, 5, 6 and 7 read it, in training and in generate.sh
    if args.budget_minutes:
        budget = ["--stop-time-hours", f"{args.budget_minutes / 60:.4f}", "--max-update", "10000000"]
        budget_text = f"{args.budget_minutes:g} minutes"
    else:
        budget, budget_text = ["--max-update", str(args.updates)], f"{args.updates} updates"
    n_test = len(read_lines(exp.work / "raw" / "test.src"))
    results = [lead_row(exp)]
    for seed in seeds:
        for label in [CONTROL, *(f"row{row}" for row in rows)]:
            results.append(run_system(exp, label, seed, data, w2v, budget, n_test))
    write_table(exp, results, seeds, budget_text, args.threads, started)
    plot_curves(exp.work, results)
    print(f"\nwrote {exp.work / 'table1.md'} and {exp.work / 'accuracy_curves.png'}")
    if args.archive:
        archive(exp.work, args.archive)
        print(f"packed {args.archive}")


if __name__ == "__main__":
    main()

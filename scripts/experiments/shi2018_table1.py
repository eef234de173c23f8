#!/usr/bin/env python
"""Shi et al. (2018), Table 1 at CPU scale: six pgn_lstm variants with the same CPU budget each.

    python scripts/experiments/shi2018_table1.py [--updates 1200 | --budget-minutes 8] [--rows 1,...,7]
                                                 [--work runs/shi2018]
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

Data: LCSTS PART_II from ../shared/data (research use only: read from there, never shipped).  train.tsv is the
training set; val.tsv is split in two: its first 500 pairs validate (accuracy curves, best checkpoint) and
the other 500 are the test set.  Units: jieba words; word2vec (scripts/train_word2vec.py) is trained on the
sources and targets of every split, in the same tokenization.

Each row trains for the same number of updates (--updates; the same batches, so the same computation for
every row but the frozen-embedding one, and immune to other load on the machine) or, with --budget-minutes, the
same fairseq training time (--stop-time-hours), validating every 150
updates with greedy summaries (accuracy, eq 17, on jieba words); the best-accuracy checkpoint then summarizes
the test set (beam 5).  Writes WORK/table1.md (accuracy; NLPCC-style ROUGE-2/-4/-SU4; ROUGE-1/2/L, all
official ROUGE-1.5.5 F1 on characters mapped to ids) and WORK/accuracy_curves.png (like the paper's Fig. 6).

Run again over the same WORK, a row is reused only when its training record (scripts/experiments/records.py:
its train.sh options, budget included, its config's text, the data's prep.json, the word2vec file's SHA-256 and
the code: train.sh, the configs it sources and fairseq_plugins/, with fairseq's and torch's versions) is what this
run would train; an interrupted row with the same record resumes from its checkpoint_last.pt and adds to
WORK/logs/train_rowN.log, so its curve and best accuracy cover the whole training; any other row is trained from
scratch (said on stderr).  Threads: --threads (default: torch's, one per core).
"""
import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_scale  # noqa: E402
import slurm_launcher  # noqa: E402
from corpora import lcsts_raw  # noqa: E402
from lib import ROOT, Experiment  # noqa: E402
from records import sha256, train_or_reuse, training_record  # noqa: E402

ROWS = {
    1: "baseline",
    2: "+ word2vec",
    3: "+ fixed word2vec",
    4: "normalized",
    5: "normalized + word2vec + NLL",
    6: "normalized + word2vec + focal loss",
    7: "(ours) row 6 with lambda scaled by alpha (0.25)",
}
VALID_LINE = re.compile(r"valid on 'valid' subset .*\| accuracy ([\d.]+) .*\| num_updates (\d+)")


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


def train(exp: Experiment, row: int, data: Path, w2v: Path, budget: list) -> list:
    """Trains row ROW, or resumes it, or reuses it (``train_or_reuse``, by its record with the word2vec file's
    digest); returns its validation curve, [(updates, accuracy)], read from its whole log."""
    config, model, log_name = f"shi2018_lcsts_row{row}", exp.work / f"row{row}", f"train_row{row}.log"
    want = training_record(config, budget, data, inputs={"W2V": sha256([w2v])})
    train_or_reuse(exp, f"row {row}", model, log_name, want, [ROOT / "train.sh", "-c", config, data, model, *budget])
    return read_curve(exp.logs / log_name)


def read_curve(log: Path) -> list:
    """[(updates, accuracy)] of every validation in the log, in update order; an update validated twice (a
    resumed run repeating the steps after its last checkpoint) keeps its latest value."""
    points = {int(n): float(acc) for acc, n in VALID_LINE.findall(log.read_text(encoding="utf-8"))}
    return sorted(points.items())


def train_and_test(exp: Experiment, row: int, data: Path, w2v: Path, budget: list):
    """(the row's test-set summaries, its validation curve): ``train``, then the best checkpoint summarizes."""
    curve = train(exp, row, data, w2v, budget)
    hyps = exp.work / f"row{row}.test.txt"
    exp.run([ROOT / "generate.sh", "--no-detok", "-c", f"shi2018_lcsts_row{row}", "--split", "test", "--output", hyps,
             data, exp.work / f"row{row}"], f"generate_row{row}.log")
    return hyps, curve


def score(refs: Path, hyps: Path):
    from fairseq_plugins.scoring import rouge155

    references = refs.read_text(encoding="utf-8").splitlines()
    hypotheses = hyps.read_text(encoding="utf-8").splitlines()
    plain = rouge155.score(references, hypotheses, lang="zh")
    nlpcc = rouge155.score(references, hypotheses, lang="zh", nlpcc=True)
    return {"R-1": plain["rouge-1"]["f"], "R-2": plain["rouge-2"]["f"], "R-L": plain["rouge-l"]["f"],
            "NLPCC R-2": nlpcc["rouge-2"]["f"], "NLPCC R-4": nlpcc["rouge-4"]["f"],
            "NLPCC R-SU4": nlpcc["rouge-su4"]["f"]}


def write_table(work: Path, results, budget: str):
    columns = ["NLPCC R-2", "NLPCC R-4", "NLPCC R-SU4", "R-1", "R-2", "R-L"]
    lines = [
        f"# Shi et al. (2018) Table 1 at CPU scale: LCSTS PART_II, {budget} of training each",
        "",
        "Accuracy: eq 17 on jieba words, best validation value (500 pairs, greedy). ROUGE: official ROUGE-1.5.5",
        "F1 (%) on the 500 test pairs, characters mapped to ids, whatever the training unit; beam 5.",
        "",
        "| row | model | updates | accuracy | " + " | ".join(columns) + " |",
        "|---|---|---|---|" + "---|" * len(columns),
    ]
    for row, (curve, scores) in results.items():
        best = max((acc for _, acc in curve), default=float("nan"))
        updates = curve[-1][0] if curve else 0
        values = " | ".join(f"{100 * scores[c]:.2f}" for c in columns)
        lines.append(f"| ({row}) | {ROWS[row]} | {updates} | {best:.2f} | {values} |")
    (work / "table1.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def plot_curves(work: Path, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row, (curve, _) in results.items():
        if curve:
            ax.plot(*zip(*curve), marker="o", markersize=3, label=f"({row}) {ROWS[row]}")
    ax.set_xlabel("updates")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title("Accuracy during training (cf. Shi et al. 2018, Fig. 6)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(work / "accuracy_curves.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=1200, help="updates per row")
    parser.add_argument("--budget-minutes", type=float, help="training time per row, instead of --updates")
    parser.add_argument("--rows", default="1,2,3,4,5,6,7")
    parser.add_argument("--work", type=Path, help="work folder (default runs/shi2018; --scale paper: "
                                                  "runs/shi2018_table1_paper, dry run runs/shi2018_table1_dry_run)")
    parser.add_argument("--threads", type=int, help="torch threads per training (default: one per core; --scale "
                        "paper: compare.py's --threads, default 1)")
    parser.add_argument("--w2v", type=Path, help="--scale paper: the word2vec file of rows 2, 3, 5, 6 and 7")
    paper_scale.add_options(parser)
    slurm_launcher.add_options(parser)
    args = parser.parse_args()
    if args.scale == "paper" or args.dry_run:
        if not (args.dry_run or args.w2v):
            parser.error("--scale paper needs --w2v FILE (rows 2, 3, 5, 6 and 7 start from word2vec)")
        args.threads = args.threads or 1
        return paper_scale.run(paper_scale.SHI2018, args, {"w2v": args.w2v})
    exp = Experiment("shi2018_table1", args.work or ROOT / "runs" / "shi2018", args.threads or 0)
    data, w2v = prepare(exp)
    exp.env["W2V"] = str(w2v)  # rows 2, 3, 5, 6 and 7 read it, in training and in generate.sh
    if args.budget_minutes:
        budget = ["--stop-time-hours", f"{args.budget_minutes / 60:.4f}", "--max-update", "10000000"]
        budget_text = f"{args.budget_minutes:g} minutes"
    else:
        budget, budget_text = ["--max-update", str(args.updates)], f"{args.updates} updates"
    results = {}
    for row in (int(r) for r in args.rows.split(",")):
        hyps, curve = train_and_test(exp, row, data, w2v, budget)
        results[row] = (curve, score(data / "ref" / "test.tgt", hyps))
    write_table(exp.work, results, budget_text)
    plot_curves(exp.work, results)
    print(f"\nwrote {exp.work / 'table1.md'} and {exp.work / 'accuracy_curves.png'}")


if __name__ == "__main__":
    main()

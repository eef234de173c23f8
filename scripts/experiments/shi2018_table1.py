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

Run again over the same WORK, a row is reused only when WORK/rowN/train_command.json (its train.sh command line,
budget included, the word2vec path, the text of its configs and the code: compare.py's fingerprint of train.sh,
the configs and fairseq_plugins/, with fairseq's and torch's versions) is what this run would train; an interrupted
row with the same record resumes from its checkpoint_last.pt and adds to WORK/rowN.train.log, so its curve and
best accuracy cover the whole training; any other row is trained from scratch (said on stderr and in the log).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_scale  # noqa: E402
import slurm_launcher  # noqa: E402
from records import code_record, comparable, training_code  # noqa: E402
from corpora import LCSTS, lcsts_convert, require  # noqa: E402
from lib import run_logged  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
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
SOURCED = re.compile(r"^\s*source\s.*?([\w.-]+\.conf)\W*$", re.M)  # a config sourcing another one
RECORD = "train_command.json"  # beside the model: what it was trained with


def run(cmd, log=None, env=None):
    """Runs ``cmd``; with ``log``, its output is appended there (a resumed training adds to its curve), train.sh's
    whole log included (TRAIN_VERBOSE=1: the curve is read from it).  A failure raises CalledProcessError."""
    env = dict(os.environ if env is None else env, TRAIN_VERBOSE="1")
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    if log is None:
        subprocess.run(cmd, check=True, env=env)
        return
    status, _ = run_logged(cmd, Path(log), env, append=True, header=True)
    if status != 0:
        raise subprocess.CalledProcessError(status, cmd)


def say(message: str, log: Path, mode: str = "a") -> None:
    """``message`` on stderr and in the training log (``mode`` "w" starts the log anew)."""
    print(message, file=sys.stderr, flush=True)
    with open(log, mode, encoding="utf-8") as out:
        print(message, file=out)


def prepare(work: Path):
    """Raw splits, preprocessing and word2vec, each skipped when already there."""
    raw, data, w2v = work / "raw", work / "data", work / "w2v.bin"
    if not (raw / "test.tgt").exists():
        require(LCSTS, lambda message: sys.exit(f"shi2018_table1: {message}"))
        run(list(map(str, lcsts_convert("train.tsv", raw / "train"))))
        run(list(map(str, lcsts_convert("val.tsv", raw / "val"))))
        for side in ("src", "tgt"):
            lines = (raw / f"val.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
            (raw / f"valid.{side}").write_text("".join(lines[:500]), encoding="utf-8")
            (raw / f"test.{side}").write_text("".join(lines[500:]), encoding="utf-8")
    if not (data / "bin" / "dict.src.txt").exists():
        run([str(ROOT / "preprocess.sh"), "-c", "shi2018_lcsts", str(raw), str(data)])
    if not w2v.exists():
        run([sys.executable, str(ROOT / "scripts" / "train_word2vec.py"), "--prep", str(data / "prep.json"),
             "--raw-dir", str(raw), "--dim", "128", "--out", str(w2v)])
    return data, w2v


def config_texts(config: str) -> dict:
    """The text of configs/CONFIG.conf and of every config it sources, by file name."""
    texts, todo = {}, [f"{config}.conf"]
    while todo:
        name = todo.pop()
        if name not in texts:
            texts[name] = (ROOT / "configs" / name).read_text(encoding="utf-8")
            todo += SOURCED.findall(texts[name])
    return texts


def recorded_command(model: Path):
    """What MODEL/train_command.json says the model was trained with; None without a (readable) record."""
    try:
        return json.loads((model / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def train(row: int, work: Path, data: Path, w2v: Path, budget: list) -> list:
    """Trains row ROW, or resumes it, or reuses it; returns its validation curve, [(updates, accuracy)].

    The row's full training command, with the text of its configs and the word2vec file, is recorded next to
    the model.  A finished row is reused, and an interrupted one resumed (from checkpoint_last.pt, its log
    appended to), only when that record is the same; otherwise, e.g. with another budget, the row is trained
    from scratch, since resuming would mix two trainings in one model and one curve."""
    model, log = work / f"row{row}", work / f"row{row}.train.log"
    config = f"shi2018_lcsts_row{row}"
    cmd = [str(ROOT / "train.sh"), "-c", config, str(data), str(model), *budget]
    wanted = {"command": cmd, "W2V": str(w2v), "configs": config_texts(config),
              "code": code_record(training_code(config))}
    if not start(row, model, log, wanted):
        return read_curve(log)
    run(cmd, log=log, env=dict(os.environ, W2V=str(w2v)))
    (model / "done").touch()
    return read_curve(log)


def start(row: int, model: Path, log: Path, wanted: dict) -> bool:
    """Gets MODEL ready for the training ``wanted`` records and says which way it goes: False when a finished
    model has the same record (reuse it), else True, with MODEL and LOG removed unless the record is the same
    (then train.sh resumes), and the record written."""
    recorded = recorded_command(model)
    same = recorded is not None and comparable(recorded) == comparable(wanted)  # code compared without the commit
    if same and (model / "done").exists():
        print(f"row {row}: reusing {model} (trained with the same command and configs)", file=sys.stderr)
        return False
    if not same and (model.exists() or log.exists()):
        why = ("no record of its training command" if recorded is None
               else "trained with another command or configs, or on other code")
        say(f"row {row}: {model}: {why}: training from scratch", log, mode="w")
        shutil.rmtree(model, ignore_errors=True)
    elif model.exists():
        say(f"row {row}: resuming the interrupted training in {model}", log)
    model.mkdir(parents=True, exist_ok=True)
    (model / RECORD).write_text(json.dumps(wanted, indent=1) + "\n", encoding="utf-8")
    return True


def read_curve(log: Path) -> list:
    """[(updates, accuracy)] of every validation in the log, in update order; an update validated twice (a
    resumed run repeating the steps after its last checkpoint) keeps its latest value."""
    points = {int(n): float(acc) for acc, n in VALID_LINE.findall(log.read_text(encoding="utf-8"))}
    return sorted(points.items())


def train_and_test(row: int, work: Path, data: Path, w2v: Path, budget: list):
    """(the row's test-set summaries, its validation curve): ``train``, then the best checkpoint summarizes."""
    curve = train(row, work, data, w2v, budget)
    hyps = work / f"row{row}.test.txt"
    config = f"shi2018_lcsts_row{row}"
    run([str(ROOT / "generate.sh"), "--no-detok", "-c", config, "--split", "test", "--output", str(hyps), str(data),
         str(work / f"row{row}")], env=dict(os.environ, W2V=str(w2v)))
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
    parser.add_argument("--threads", type=int, default=1, help="--scale paper: compare.py's --threads")
    parser.add_argument("--w2v", type=Path, help="--scale paper: the word2vec file of rows 2, 3, 5, 6 and 7")
    paper_scale.add_options(parser)
    slurm_launcher.add_options(parser)
    args = parser.parse_args()
    if args.scale == "paper" or args.dry_run:
        if not (args.dry_run or args.w2v):
            parser.error("--scale paper needs --w2v FILE (rows 2, 3, 5, 6 and 7 start from word2vec)")
        return paper_scale.run(paper_scale.SHI2018, args, {"w2v": args.w2v})
    args.work = (args.work or ROOT / "runs" / "shi2018").resolve()  # its commands run from the repository root
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}:{os.environ['PATH']}"
    args.work.mkdir(parents=True, exist_ok=True)

    data, w2v = prepare(args.work)
    if args.budget_minutes:
        budget = ["--stop-time-hours", f"{args.budget_minutes / 60:.4f}", "--max-update", "10000000"]
        budget_text = f"{args.budget_minutes:g} minutes"
    else:
        budget, budget_text = ["--max-update", str(args.updates)], f"{args.updates} updates"
    results = {}
    for row in (int(r) for r in args.rows.split(",")):
        hyps, curve = train_and_test(row, args.work, data, w2v, budget)
        results[row] = (curve, score(data / "ref" / "test.tgt", hyps))
    write_table(args.work, results, budget_text)
    plot_curves(args.work, results)
    print(f"\nwrote {args.work / 'table1.md'} and {args.work / 'accuracy_curves.png'}")


if __name__ == "__main__":
    main()

"""Which checkpoint does a newcomer get by default, and is it a good one?  Two corpora the project does not ship,
a newcomer's budget, the default checkpoint against the better of the best-by-loss and the last one.

    python scripts/experiments/checkpoint_choice.py [--work runs/checkpoint_choice] [--seeds 1 2]
        [--updates 300] [--out docs/results/checkpoint_choice.md] [--archive DEST.tar.xz]
    python scripts/experiments/checkpoint_choice.py --report WORK_OR_ARCHIVE [--out FILE]

Corpora (from ../shared/data, converted with summ-convert as a user would):
  aclsum   English ACL abstracts -> the "challenge" summary (100 / 50 / 100), config scitldr_small;
  csl      Chinese scientific abstracts -> title: ydli_dev + clge_val to train (2,000), the first 200 of ydli_test
           to validate, its other 800 to test; config lcsts_char.
For each corpus and seed two runs train ``--updates`` updates with the same data and seed:
  the config as shipped (its checkpoint_best.pt: the default of generate.sh, summ-serve and summ-package), and
  the config with ``--best-checkpoint-metric loss`` (fairseq's default measure: the old default of scitldr_small).
Validation never changes the weights, so both runs should end on the same checkpoint_last.pt; the report says
whether they do.  Each of the
three checkpoints summarizes the test split with the config's GEN_ARGS; official ROUGE-1.5.5 scores it, and a
paired bootstrap (10,000 resamples of the test documents, seed 1) compares the default with the better of the
other two.  A finished step is not run again (resumable; a training only when its record matches,
scripts/experiments/records.py).

The run writes WORK/results.json (each checkpoint's scores and update, the LEAD baselines, the command and where it
ran) and the report from it; the intervals are computed from the per-document scores.  ``--archive DEST.tar.xz``
packs what the report is made of (results.json, summaries, per-document scores, training logs; no checkpoints,
no data); ``--report`` rebuilds the report from a work folder or such an archive.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

from scripts.experiments.corpora import aclsum_raw, csl_raw
from scripts.experiments.lib import (ARCHIVE_SUFFIX, ROOT, Experiment, invocation, lead, official_rouge, pack,
                                     paired_intervals, read_lines, unpack, write_lines)
from scripts.experiments.records import provenance, train_or_reuse, training_record

CORPORA = {"aclsum": ("scitldr_small", "en"), "csl": ("lcsts_char", "zh")}
LEAD = {"aclsum": 1, "csl": 20}  # the trivial baseline: the first sentence (English) or 20 characters (Chinese)
CHECKPOINTS = {"default": ("shipped", "checkpoint_best.pt"), "best_by_loss": ("by_loss", "checkpoint_best.pt"),
               "last": ("shipped", "checkpoint_last.pt")}
# what the report is made of, without checkpoints or data
ARCHIVED = ("results.json", "*/seed*/*.sum", "*/seed*/*.tsv", "*/lead*.txt", "logs/train_*.log")


def prepared(exp: Experiment, corpus: str) -> Path:
    config, _ = CORPORA[corpus]
    data = exp.work / corpus / "data"
    if not (data / "bin" / "dict.src.txt").is_file():
        raw = exp.work / corpus / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        (aclsum_raw if corpus == "aclsum" else csl_raw)(exp, raw)
        exp.run(["./preprocess.sh", "-c", config, raw, data], f"preprocess_{corpus}.log")
    return data


BY_LOSS = """source "{root}/configs/{config}.conf"
# {config} with fairseq's default choice of checkpoint_best.pt: the lowest validation loss
kept=() skip=0
for option in "${{TRAIN_ARGS[@]}}"; do
    if [[ $skip == 1 ]]; then skip=0; continue; fi
    case "$option" in
        --maximize-best-checkpoint-metric) continue ;;
        --best-checkpoint-metric) skip=1; continue ;;
    esac
    kept+=("$option")
done
TRAIN_ARGS=("${{kept[@]}}")
"""


def config_file(exp: Experiment, corpus: str, run: str) -> str:
    """The shipped config's name, or for the by_loss run a config file that sources it and drops its choice of
    checkpoint_best.pt (fairseq's default, the validation loss, applies)."""
    config, _ = CORPORA[corpus]
    if run == "shipped":
        return config
    path = exp.work / f"{config}_by_loss.conf"
    path.write_text(BY_LOSS.format(root=ROOT, config=config), encoding="utf-8")
    return str(path)


def trained(exp: Experiment, corpus: str, seed: int, updates: int, run: str) -> Path:
    """The run's model folder, trained, resumed or reused by its training record (records.train_or_reuse)."""
    model, config, data = exp.work / corpus / f"seed{seed}" / run, config_file(exp, corpus, run), prepared(exp, corpus)
    options = ["--max-update", str(updates), "--seed", str(seed)]
    train_or_reuse(exp, f"{corpus} seed {seed} {run}", model, f"train_{corpus}_{seed}_{run}.log",
                   training_record(config, options, data),
                   ["./train.sh", "-c", config, "--force-config", data, model, *options])
    return model


def scored(exp: Experiment, corpus: str, seed: int, updates: int, which: str) -> Dict:
    """Official ROUGE of one checkpoint on the test split, its update, and its per-document scores (a path in
    WORK)."""
    config, lang = CORPORA[corpus]
    run, checkpoint = CHECKPOINTS[which]
    model = trained(exp, corpus, seed, updates, run)
    data = prepared(exp, corpus)
    name = f"{corpus}_{seed}_{which}"
    summaries = exp.work / corpus / f"seed{seed}" / f"{which}.sum"
    if not summaries.is_file():
        exp.run(["./generate.sh", "--split", "test", "--checkpoint", checkpoint, "--no-detok",  # the model's GEN_ARGS
                 "--output", summaries, data, model], f"generate_{name}.log")
    per_doc = exp.work / corpus / f"seed{seed}" / f"{which}.tsv"
    exp.run(["summ-rouge", "--refs", data / "ref" / "test.tgt", "--hyps", summaries, "--lang", lang,
             "--per-doc", per_doc], f"rouge_doc_{name}.log")
    info = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "fairseq_plugins.cli.checkpoint_info",
                           model / checkpoint], cwd=ROOT, env=exp.env, capture_output=True, text=True).stdout
    update = re.search(r"update (\d+)", info)
    return {"rouge": official_rouge(exp, data / "ref" / "test.tgt", summaries, lang, name),
            "update": int(update.group(1)) if update else None, "per_doc": str(per_doc.relative_to(exp.work))}


def lead_rouge(exp: Experiment, corpus: str) -> Dict[str, float]:
    """Official ROUGE of LEAD-N on the test split (lib.lead on the raw sources)."""
    _, lang = CORPORA[corpus]
    summaries = exp.work / corpus / f"lead{LEAD[corpus]}.txt"
    write_lines(summaries, lead(read_lines(exp.work / corpus / "raw" / "test.src"), lang, LEAD[corpus]))
    return official_rouge(exp, prepared(exp, corpus) / "ref" / "test.tgt", summaries, lang, f"{corpus}_lead")


def same_weights(a: Path, b: Path) -> bool:
    import torch

    from fairseq_plugins.runtime.checkpoint_safety import allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    first, second = (torch.load(path, map_location="cpu", weights_only=True)["model"] for path in (a, b))
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def measured(exp: Experiment, args, command: str) -> Dict:
    """Trains, decodes and scores every corpus and seed of ``args``: the content of WORK/results.json."""
    rows = []
    for corpus in args.corpora:
        for seed in args.seeds:
            row = {"corpus": corpus, "seed": seed}
            for which in CHECKPOINTS:
                row[which] = scored(exp, corpus, seed, args.updates, which)
            row["same_last"] = same_weights(*(exp.work / corpus / f"seed{seed}" / run / "checkpoint_last.pt"
                                              for run in ("shipped", "by_loss")))
            rows.append(row)
            exp.log(json.dumps({which: row[which]["rouge"] for which in CHECKPOINTS}))
    leads = {corpus: lead_rouge(exp, corpus) for corpus in args.corpora}
    return {"command": command, "made": provenance("Each row trains with the seed its line gives."),
            "updates": args.updates, "rows": rows, "leads": leads}


def better_of(row: Dict) -> str:
    """The checkpoint, other than the default, with the higher test ROUGE-L."""
    return max(("best_by_loss", "last"), key=lambda which: row[which]["rouge"]["ROUGE-L"])


def report(results: Dict, work: Path) -> str:
    """The markdown report of results.json (``results``) of the work folder WORK: one row per corpus and seed,
    with default - the better of the other two, ROUGE-L, and its paired interval (from the per-document
    scores)."""
    lines = ["# Which checkpoint a newcomer gets by default", "",
             f"Made by `{results['command']}`.", "", results["made"], "",
             "Each run trains the corpus's config (aclsum: `scitldr_small`, CSL: `lcsts_char`) for "
             f"{results['updates']} updates. `default` is the config's own checkpoint_best.pt (what generate.sh, "
             "summ-serve and summ-package decode); `best_by_loss` is the best checkpoint by fairseq's default measure, "
             "the validation loss with its coverage term (a second run, same seed); `last` is checkpoint_last.pt. "
             "Official ROUGE-1.5.5 F1 on the test split; the last column is default minus the better of the other two "
             "(by ROUGE-L), ROUGE-L, with its 95 % interval over 10,000 paired resamples of the test documents "
             f"({len(results['rows'])} intervals, none corrected for their number).", "",
             "| corpus | seed | default (update) | best_by_loss (update) | last (update) | default - better, R-L |",
             "|---|---|---|---|---|---|"]
    below = []
    for row in results["rows"]:
        cells = [f"{row[w]['rouge']['ROUGE-1']:.2f} / {row[w]['rouge']['ROUGE-2']:.2f} / "
                 f"{row[w]['rouge']['ROUGE-L']:.2f} ({row[w]['update']})" for w in CHECKPOINTS]
        better = better_of(row)
        d, lo, hi = paired_intervals(work / row[better]["per_doc"], work / row["default"]["per_doc"])[2]
        below += [row] if hi < 0 else []
        lines.append(f"| {row['corpus']} | {row['seed']} | " + " | ".join(cells)
                     + f" | {d:+.2f} [{lo:+.2f}, {hi:+.2f}] vs {better} |")
    lines += ["", "The trivial baseline on the same test documents: "
              + "; ".join(f"{corpus} LEAD-{LEAD[corpus]}{' characters' if corpus == 'csl' else ''} "
                          f"{r['ROUGE-1']:.2f} / {r['ROUGE-2']:.2f} / {r['ROUGE-L']:.2f}"
                          for corpus, r in results["leads"].items())
              + ". These are newcomer budgets on small corpora: the table is about which checkpoint is kept, not "
                "about how good the models are."]
    rows = results["rows"]
    lines += ["", "The two runs of each row end on identical weights (checkpoint_last.pt): "
              + ("yes, in every row." if all(r["same_last"] for r in rows) else
                 "no, in rows " + ", ".join(f"{r['corpus']} seed {r['seed']}" for r in rows if not r["same_last"])
                 + " (their best_by_loss comes from a run that differs)."), ""]
    lines += ["Within noise: the interval of every row includes 0 or lies above it." if not below else
              "Not within noise in every row: the default is below in "
              + ", ".join(f"{r['corpus']} seed {r['seed']}" for r in below) + ".", ""]
    return "\n".join(lines)


def rebuilt(path: Path) -> str:
    """The report of a work folder or of an archive of one (``--archive``)."""
    with tempfile.TemporaryDirectory() as unpacked:
        work = unpack(path, Path(unpacked)) if path.name.endswith(ARCHIVE_SUFFIX) else path
        results = work / "results.json"
        if not results.is_file():
            sys.exit(f"checkpoint_choice: {results.relative_to(work)} not in {path}: not a finished run of this script")
        return report(json.loads(results.read_text(encoding="utf-8")), work)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "checkpoint_choice")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "checkpoint_choice.md")
    parser.add_argument("--archive", type=Path, metavar="DEST.tar.xz", help="then pack what the report is made of")
    parser.add_argument("--report", type=Path, metavar="WORK_OR_ARCHIVE", help="only rebuild the report")
    args = parser.parse_args(argv)
    if args.archive and not args.archive.name.endswith(ARCHIVE_SUFFIX):
        parser.error(f"--archive {args.archive}: give a {ARCHIVE_SUFFIX} file")
    if args.report:
        text = rebuilt(args.report)
    else:
        exp = Experiment("checkpoint_choice", args.work)
        results = measured(exp, args, invocation("checkpoint_choice.py", argv))
        (exp.work / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        text = report(results, exp.work)
        if args.archive:
            exp.log(f"{len(pack(exp.work, ARCHIVED, args.archive))} files packed into {args.archive}")
    args.out.write_text(text, encoding="utf-8")
    print(f"checkpoint_choice: wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

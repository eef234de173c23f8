"""Which checkpoint does a newcomer get by default, and is it a good one?  Two corpora the project does not ship,
a newcomer's budget, the default checkpoint against the better of the best-by-loss and the last one.

    python scripts/experiments/checkpoint_choice.py [--work runs/checkpoint_choice] [--seeds 1 2]
        [--updates 300] [--out docs/results/checkpoint_choice.md]

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
paired bootstrap (summ-rouge-significance) compares the default with the better of the other two.  A finished
step is not run again (resumable; a training only when its record matches, scripts/experiments/records.py);
the report is rebuilt from the per-document scores.
"""
import argparse
import json
import re
import subprocess
from pathlib import Path
from typing import Dict, List

from corpora import aclsum_raw, csl_raw
from lib import ROOT, Experiment, lead, official_rouge, read_lines, write_lines
from records import train_or_reuse, training_record

CORPORA = {"aclsum": ("scitldr_small", "en"), "csl": ("lcsts_char", "zh")}
LEAD = {"aclsum": 1, "csl": 20}  # the trivial baseline: the first sentence (English) or 20 characters (Chinese)
CHECKPOINTS = {"default": ("shipped", "checkpoint_best.pt"), "best_by_loss": ("by_loss", "checkpoint_best.pt"),
               "last": ("shipped", "checkpoint_last.pt")}
DIFF_ROW = re.compile(r"^(ROUGE-(?:1|2|L))\s+([-+\d.]+)\s+\[\s*([-+\d.]+),\s*([-+\d.]+)\]", re.M)


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
    """Official ROUGE of one checkpoint on the test split, its per-document table and its update."""
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
    return {"rouge": official_rouge(exp, data / "ref" / "test.tgt", summaries, lang, name), "per_doc": per_doc,
            "update": int(update.group(1)) if update else None, "summaries": summaries}


def lead_rouge(exp: Experiment, corpus: str) -> Dict[str, float]:
    """Official ROUGE of LEAD-N on the test split (lib.lead on the raw sources)."""
    _, lang = CORPORA[corpus]
    summaries = exp.work / corpus / f"lead{LEAD[corpus]}.txt"
    write_lines(summaries, lead(read_lines(exp.work / corpus / "raw" / "test.src"), lang, LEAD[corpus]))
    return official_rouge(exp, prepared(exp, corpus) / "ref" / "test.tgt", summaries, lang, f"{corpus}_lead")


def paired(exp: Experiment, a: Path, b: Path, name: str) -> Dict[str, tuple]:
    """B - A per metric (percent) with its 95 % paired-bootstrap interval (summ-rouge-significance)."""
    out = exp.logs / f"significance_{name}.out"
    exp.run(["summ-rouge-significance", a, b, "--seed", "1"], f"significance_{name}.log", stdout=out)
    return {m: (float(d), float(lo), float(hi)) for m, d, lo, hi in DIFF_ROW.findall(out.read_text())}


def same_weights(a: Path, b: Path) -> bool:
    import torch

    from fairseq_plugins.runtime.checkpoint_safety import allow_fairseq_checkpoints

    allow_fairseq_checkpoints()
    first, second = (torch.load(path, map_location="cpu", weights_only=True)["model"] for path in (a, b))
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def report(rows: List[Dict], leads: Dict[str, Dict], args, commit: str) -> str:
    lines = ["# Which checkpoint a newcomer gets by default", "",
             f"Made by `python scripts/experiments/checkpoint_choice.py --updates {args.updates} --seeds "
             f"{' '.join(map(str, args.seeds))}` at commit {commit}, on 2 CPU cores (one thread a job).", "",
             "Each run trains the corpus's config (aclsum: `scitldr_small`, CSL: `lcsts_char`) for "
             f"{args.updates} updates. `default` is the config's own checkpoint_best.pt (what generate.sh, "
             "summ-serve and summ-package decode); `best_by_loss` is the best checkpoint by fairseq's default measure, "
             "the validation loss with its coverage term (a second run, same seed); `last` is checkpoint_last.pt. "
             "Official ROUGE-1.5.5 F1 on the test split; the last column is default minus the better of the other two "
             "(by ROUGE-L), ROUGE-L, with its 95 % paired-bootstrap interval over test documents.", "",
             "| corpus | seed | default (update) | best_by_loss (update) | last (update) | default - better, R-L |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        cells = [f"{row[w]['rouge']['ROUGE-1']:.2f} / {row[w]['rouge']['ROUGE-2']:.2f} / "
                 f"{row[w]['rouge']['ROUGE-L']:.2f} ({row[w]['update']})" for w in CHECKPOINTS]
        d, lo, hi = row["diff"]["ROUGE-L"]
        lines.append(f"| {row['corpus']} | {row['seed']} | " + " | ".join(cells)
                     + f" | {d:+.2f} [{lo:+.2f}, {hi:+.2f}] vs {row['better']} |")
    lines += ["", "The trivial baseline on the same test documents: "
              + "; ".join(f"{corpus} LEAD-{LEAD[corpus]}{' characters' if corpus == 'csl' else ''} "
                          f"{r['ROUGE-1']:.2f} / {r['ROUGE-2']:.2f} / {r['ROUGE-L']:.2f}" for corpus, r in leads.items())
              + ". These are newcomer budgets on small corpora: the table is about which checkpoint is kept, not "
                "about how good the models are."]
    lines += ["", "The two runs of each row end on identical weights (checkpoint_last.pt): "
              + ("yes, in every row." if all(r["same_last"] for r in rows) else
                 "no, in rows " + ", ".join(f"{r['corpus']} seed {r['seed']}" for r in rows if not r["same_last"])
                 + " (their best_by_loss comes from a run that differs)."), ""]
    lines += ["Within noise: the interval of every row includes 0 or lies above it."
              if all(r["diff"]["ROUGE-L"][2] >= 0 for r in rows) else
              "Not within noise in every row: see the rows whose interval lies below 0.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "checkpoint_choice")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "checkpoint_choice.md")
    args = parser.parse_args()
    exp = Experiment("checkpoint_choice", args.work)
    rows = []
    for corpus in args.corpora:
        for seed in args.seeds:
            row = {"corpus": corpus, "seed": seed}
            for which in CHECKPOINTS:
                row[which] = scored(exp, corpus, seed, args.updates, which)
            row["same_last"] = same_weights(*(exp.work / corpus / f"seed{seed}" / run / "checkpoint_last.pt"
                                              for run in ("shipped", "by_loss")))
            other = max(("best_by_loss", "last"), key=lambda w: row[w]["rouge"]["ROUGE-L"])
            row["better"] = other
            row["diff"] = paired(exp, row[other]["per_doc"], row["default"]["per_doc"], f"{corpus}_{seed}")
            rows.append(row)
            exp.log(json.dumps({k: (v["rouge"] if isinstance(v, dict) and "rouge" in v else v)
                                for k, v in row.items() if k != "diff"}))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    leads = {corpus: lead_rouge(exp, corpus) for corpus in args.corpora}
    args.out.write_text(report(rows, leads, args, commit), encoding="utf-8")
    exp.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()

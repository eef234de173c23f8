"""The attention on the source's </s>: renormalised away from the copy side, or given to generation (a sentinel).

    python scripts/experiments/eos_attention.py [--corpus cnndm|lcsts] [--work WORK] [--seeds 1 2]
        [--max-update 600] [--out docs/results/eos_attention.md] [--reuse-stale]

fairseq appends </s> to every source.  The pointer-generator attends to it but never copies it; where its attention
goes is ``--eos-attention`` (modules/copy_mixture.py):
  renormalise  the copy side is the attention renormalised over the other positions, so a copy is drawn from
               whatever attention is left beside </s>, however little, and coverage (See eq 10) records </s>;
  generate     the attention on </s> joins p_gen's share, P(w) = (p_gen + (1 - p_gen) a_</s>) P_vocab(w) +
               (1 - p_gen) sum_{i: w_i = w, w_i != </s>} a_i (the sentinel of Merity et al. 2017): a word is
               copied only from the attention on it, which coverage then records.
The corpora are short_targets.py's (its data folder, runs/short_targets/data or runs/short_targets_lcsts/data, is
made or reused): CNN/DailyMail leads -> first highlight, where every model puts its first step's attention on </s>,
or LCSTS in jieba words.  For each seed, both settings are trained by ./train.sh DATA MODEL --max-update UPDATES
--eos-attention SETTING with everything else the default config's (short_targets.py's *before* budget), and
decoded by ./generate.sh --split test --no-detok with the defaults ("new") and with the decoding of before
(--allow-unk --block-ngram-repeat 0, "old").  ROUGE is official ROUGE-1.5.5, the paired intervals 95 % bootstraps
over the test documents per seed (ROUGE and the per-summary stutter indicators), the verdicts the project's rule.
Each model's beam summaries are teacher-forced through it (Summarizer.summarize_with_details) to read its attention
on </s> at the first step, the share of the second step's attention already held by the first,
sum_i min(a_1i, a_2i), and p_gen (See eq 8) at the second step.
"""
import argparse
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from fairseq_plugins.scoring import summary_stats
from fairseq_plugins.scoring.significance import paired_bootstrap
from scripts.experiments.lib import (ROOT, Experiment, kept_or_made, official_rouge, pack_beside, paired_intervals,
                                     read_lines, shown_intervals, verdict, write_report)
from scripts.experiments.records import made_header, read_record, train_or_reuse, training_record
from scripts.experiments.short_targets import (BEFORE_UPDATES, CORPORA, DECODINGS, UNK, UNK_SLOT, as_a_user,
                                               config_of, exp_raw, lead_figures, model_tokens, prepared,
                                               reference_figures, seed_options, seed_table, stutter_figures)

SETTINGS = ("renormalise", "generate")
ROWS = [(setting, decoding) for setting in SETTINGS for decoding in ("old", "new")]
INDICATORS = [("doubled_first", "first token doubled"), ("with_immediate_repeat", "summary with an immediate repeat")]
ARCHIVED = ("seed*/*.sum", "seed*/*.json", "logs/rouge_*.per_doc.tsv", "logs/rouge_*.out", "logs/train_*.terminal")


def corpus_parser(name: str, doc: str) -> argparse.ArgumentParser:
    """The options of an experiment NAME over short_targets.py's corpora: --corpus, --work, --data-work, --seeds,
    --out, --reuse-stale (``corpus_paths`` fills the folders' defaults in)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="cnndm")
    parser.add_argument("--work", type=Path, help=f"default: runs/{name} (cnndm), runs/{name}_lcsts")
    parser.add_argument("--data-work", type=Path, help="short_targets.py's work folder for the corpus, whose data/ "
                        "is made or reused (default: runs/short_targets, runs/short_targets_lcsts)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, help=f"default: docs/results/{name}.md (cnndm), "
                        f"docs/results/{name}_lcsts.md")
    parser.add_argument("--reuse-stale", action="store_true",
                        help="reuse finished trainings made by older code (the report names their commit)")
    return parser


def corpus_paths(args, name: str):
    """``args`` with the default work, data and report paths of experiment NAME for its corpus."""
    suffix = "" if args.corpus == "cnndm" else f"_{args.corpus}"
    args.work = args.work or ROOT / "runs" / f"{name}{suffix}"
    args.data_work = args.data_work or ROOT / "runs" / f"short_targets{suffix}"
    args.out = args.out or ROOT / "docs" / "results" / f"{name}{suffix}.md"
    return args


def parse_args():
    parser = corpus_parser("eos_attention", __doc__)
    parser.add_argument("--max-update", type=int, default=BEFORE_UPDATES,
                        help="the training budget (short_targets.py's before budget by default)")
    return corpus_paths(parser.parse_args(), "eos_attention")


def trained(exp: Experiment, config: str, data: Path, seed: int, setting: str, updates: int, stale: bool) -> Path:
    model = exp.work / f"seed{seed}" / setting
    options = ["--max-update", str(updates), "--eos-attention", setting, *seed_options(seed)]
    train_or_reuse(as_a_user(exp), f"seed {seed} {setting}", model, f"train_{seed}_{setting}.terminal",
                   training_record(config, options, data), [ROOT / "train.sh", data, model, *options],
                   reuse_stale=stale)
    return model


def decoded(exp: Experiment, model: Path, data: Path, summaries: Path, decoding: str) -> Path:
    if not summaries.is_file() or summaries.stat().st_mtime < (model / "checkpoint_best.pt").stat().st_mtime:
        exp.run(["./generate.sh", "--split", "test", "--no-detok", "--output", summaries, data, model,
                 *DECODINGS[decoding]], f"generate_{summaries.parent.name}_{summaries.stem}.log")
    return summaries


def indicators(lines: List[str], tokenize) -> np.ndarray:
    """D x len(INDICATORS): each summary's doubled first token and immediate repeat (0 or 1), in model tokens."""
    rows = []
    for line in lines:
        units = " ".join(tokenize(line.replace(UNK, UNK_SLOT))).replace(UNK_SLOT, UNK)
        counts = summary_stats.summary_counts(units, "en")
        rows.append([float(counts[key][0] > 0) for key, _ in INDICATORS])
    return np.array(rows)


def figures(exp: Experiment, data: Path, summaries: Path, name: str, lang: str) -> Dict:
    lines, tokenize = read_lines(summaries), model_tokens(data)
    per_doc = exp.logs / f"rouge_{name}.per_doc.tsv"
    exp.run(["summ-rouge", "--refs", data / "ref" / "test.tgt", "--hyps", summaries, "--lang", lang,
             "--per-doc", per_doc], f"rouge_{name}.per_doc.log")
    return {"rouge": official_rouge(exp, data / "ref" / "test.tgt", summaries, lang, name), "per_doc": str(per_doc),
            "stutter": stutter_figures(lines, tokenize), "indicators": indicators(lines, tokenize).tolist()}


def first_steps(model: Path, data: Path) -> Dict[str, float]:
    """Teacher-forced through the model, its beam summaries (defaults) of the test documents: mean attention on
    </s> at step 1, mean overlap of steps 1 and 2, mean p_gen at step 2, and how many summaries were read."""
    from fairseq_plugins.inference.hub import Summarizer

    summarizer = Summarizer.from_pretrained(model, data_dir=data, device="cpu")
    eos, overlap, p_gen = [], [], []
    for details in summarizer.summarize_with_details(read_lines(exp_raw(data) / "test.src"), detok=False):
        first = details.attention[0]
        eos.append(float(first[-1]))  # the source's last position is its </s>
        if len(details.summary_tokens) >= 3:  # two tokens and </s>
            overlap.append(float(first.clip(max=details.attention[1]).sum()))
            p_gen.append(float(details.p_gen[1]) if details.p_gen is not None else float("nan"))
    return {"eos_step_1": float(np.mean(eos)), "overlap": float(np.mean(overlap)), "p_gen_2": float(np.mean(p_gen)),
            "summaries": len(eos)}


def seed_results(exp: Experiment, data_exp: Experiment, corpus: str, data: Path, seed: int, updates: int,
                 stale: bool) -> Dict:
    """One seed's rows and first-step figures, kept in WORK/seedS/results.json while newer than its models."""
    config = config_of(data_exp, corpus)  # short_targets.py's config
    models = {setting: trained(exp, config, data, seed, setting, updates, stale) for setting in SETTINGS}

    def make():
        rows = {f"{s}_{d}": figures(exp, data, decoded(exp, models[s], data, exp.work / f"seed{seed}" / f"{s}_{d}.sum",
                                                       d), f"{seed}_{s}_{d}", CORPORA[corpus][3]) for s, d in ROWS}
        return {"rows": rows, "first_steps": {s: first_steps(models[s], data) for s in SETTINGS},
                "trained_at": {s: read_record(models[s])["code"]["commit"] for s in SETTINGS}}

    return kept_or_made(exp.work / f"seed{seed}" / "results.json", models.values(), make)


def indicator_intervals(a: Dict, b: Dict) -> List[tuple]:
    """[(difference, low, high)] of B - A in percentage points for each of INDICATORS: a paired bootstrap."""
    delta, low, high, _ = paired_bootstrap(np.array(a["indicators"]), np.array(b["indicators"]), 10000, 1)
    return [(100 * d, 100 * lo, 100 * hi) for d, lo, hi in zip(delta, low, high)]


def paired_rows(results: Dict, seeds: List[int], label: str, a: str, b: str) -> List[str]:
    """The lines of a pair table (| LABEL | measure | per seed | verdict |) for rows A -> B in every seed: the
    INDICATORS in percentage points, then ROUGE-1/2/L."""
    pairs = [(results[s]["rows"][a], results[s]["rows"][b]) for s in seeds]
    runs = [indicator_intervals(x, y) + paired_intervals(Path(x["per_doc"]), Path(y["per_doc"])) for x, y in pairs]
    names = [f"{name}, % of summaries" for _, name in INDICATORS] + ["ROUGE-1", "ROUGE-2", "ROUGE-L"]
    lines = []
    for index, name in enumerate(names):
        per_seed = [run[index] for run in runs]
        lines.append(f"| {label} | {name} | {shown_intervals(per_seed)} | {verdict(per_seed)} |")
    return lines


def opening(title: str, script: str, results: Dict, seeds: List[int], started: float) -> List[str]:
    """A report's first lines: its title, made_header's command, commit and machine, and the commits each seed's
    models were trained at (results[seed]["trained_at"])."""
    lines = [f"# {title}", ""]
    lines += made_header(script, note=f"seeds {', '.join(map(str, seeds))}; "
                         f"{(time.time() - started) / 60:.0f} min this run")
    trained_at = "; ".join(f"seed {s}: " + ", ".join(f"{k} {v}" for k, v in results[s]["trained_at"].items())
                           for s in seeds)
    return lines + ["", f"Trained at commits {trained_at}.", ""]


def report(args, results: Dict, started: float) -> str:
    seeds = sorted(seed for seed in results if isinstance(seed, int))
    lines = opening("Where the attention on the source's </s> goes: renormalised away, or to generation",
                    "eos_attention.py", results, seeds, started)
    lines += [f"{CORPORA[args.corpus][0]}; `./train.sh DATA MODEL --max-update {args.max_update} --eos-attention "
              "SETTING`.  *old*: decoded `--allow-unk --block-ngram-repeat 0`; *new*: decoded with the defaults.  "
              "ROUGE: official ROUGE-1.5.5 F1 on the 500 test documents (`--no-detok`; Chinese: characters as ids).",
              ""]
    lines += seed_table(results, seeds, ROWS, first="--eos-attention")
    lines += ["", "## renormalise -> generate (B - A, 95 % paired bootstrap per seed)", "",
              "| decoding | measure | per seed | verdict |", "|---|---|---|---|"]
    for decoding in ("old", "new"):
        lines += paired_rows(results, seeds, decoding, f"renormalise_{decoding}", f"generate_{decoding}")
    lines += ["", "## The first two steps, teacher-forced (each model's summaries with the defaults)", "",
              "| seed | --eos-attention | attention on </s> at step 1 | overlap of steps 1 and 2 | p_gen at step 2 |",
              "|---|---|---|---|---|"]
    for seed in seeds:
        for setting, f in results[seed]["first_steps"].items():
            lines.append(f"| {seed} | {setting} | {f['eos_step_1']:.2f} | {f['overlap']:.2f} | {f['p_gen_2']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    args = parse_args()
    started = time.time()
    exp, data_exp = Experiment("eos_attention", args.work), Experiment("short_targets", args.data_work)
    data = prepared(data_exp, args.corpus)
    results = {"references": reference_figures(data), "lead": lead_figures(data_exp, data, args.corpus)}
    for seed in args.seeds:
        results[seed] = seed_results(exp, data_exp, args.corpus, data, seed, args.max_update, args.reuse_stale)
        write_report(exp, args.out, report(args, results, started), f"seed {seed} done")
    pack_beside(exp.work, ARCHIVED, args.out)


if __name__ == "__main__":
    main()

"""A word written twice in a row ("w w"): where a pointer-generator's immediate repeats come from, and what
banning them in the search (--block-immediate-repeat 1) does.

    python scripts/experiments/immediate_repeats.py [--corpus cnndm|lcsts] [--data-work WORK] [--seeds 1 2]
        [--out docs/results/immediate_repeats.md] [--reuse-stale]

The models are short_targets.py's (its work folder, runs/short_targets or runs/short_targets_lcsts, is made or
reused): for each seed, *before* (600 updates) and *after* (./train.sh with nothing else), on CNN/DailyMail
leads -> first highlight or LCSTS in jieba words.  Each is decoded by ./generate.sh --split test --no-detok with
the defaults without the ban (*defaults*: trigram blocking, no <unk>, --block-immediate-repeat 0) and with it
(*ban*: --block-immediate-repeat 1, the default config's since the models of the committed reports were trained).

Where the repeats come from: each model's *defaults* summaries are teacher-forced through it, and at every
step that repeats the previous token (a word), and at every other word step, the script reads
  copy share     the share of the word's probability P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: x_i = w} a_i
                 (See eq 9) that comes from copying;
  twice          whether w occurs twice or more in the source;
  peak moved     whether the previous step's attention peak and this step's lie on two different occurrences
                 of w;
  same peak      whether the step's attention peak is the previous step's.
ROUGE is official ROUGE-1.5.5, the paired intervals 95 % bootstraps over the test documents per seed (ROUGE and
the per-summary stutter indicators), the verdicts the project's rule (lib.verdict).  The report is rebuilt every
run; what it is made of is packed beside it in docs/results/NAME/run.tar.xz.
"""
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from fairseq_plugins.scoring import summary_stats
from scripts.experiments.eos_attention import corpus_parser, corpus_paths, figures, opening, paired_rows
from scripts.experiments.lib import Experiment, kept_or_made, pack_beside, read_lines, write_report
from scripts.experiments.records import read_record
from scripts.experiments.short_targets import (BEFORE_UPDATES, CORPORA, config_of, exp_raw, lead_figures, prepared,
                                               reference_figures, seed_table, trained)

DECODINGS = {"defaults": ["--block-immediate-repeat", "0"], "ban": ["--block-immediate-repeat", "1"]}
MODELS = ("before", "after")
ROWS = [(model, decoding) for model in MODELS for decoding in DECODINGS]
MECHANISM = [("copy_share", "copy share of P(w)"), ("twice", "w twice or more in the source"),
             ("moved", "peak moved to another occurrence of w"), ("same_peak", "same attention peak")]
ARCHIVED = ("seed*/*.sum", "seed*/*.json", "logs/rouge_*.per_doc.tsv", "logs/rouge_*.out")


def parse_args():
    return corpus_paths(corpus_parser("immediate_repeats", __doc__).parse_args(), "immediate_repeats")


def decoded(exp: Experiment, model: Path, data: Path, summaries: Path, decoding: str) -> Path:
    if not summaries.is_file() or summaries.stat().st_mtime < (model / "checkpoint_best.pt").stat().st_mtime:
        summaries.parent.mkdir(parents=True, exist_ok=True)
        exp.run(["./generate.sh", "--split", "test", "--no-detok", "--output", summaries, data, model,
                 *DECODINGS[decoding]], f"generate_{summaries.parent.name}_{summaries.stem}.log")
    return summaries


def teacher_forced(details, model):
    """One summary (``details``: Summarizer.summarize_with_details') through the model: the source and summary
    ids (1 x S, T), P(w) over the extended vocabulary (T x V_ext), P_vocab (T x V_reg), p_gen (T), a^t (T x S)."""
    import torch

    from fairseq_plugins.inference.hub import forced_inputs

    dictionary = model.decoder.dictionary
    tokens = torch.tensor([dictionary.index(token) for token in details.summary_markers])
    src, lengths, prev = forced_inputs(model, torch.tensor([dictionary.index(t) for t in details.source_markers]),
                                       tokens)
    with torch.no_grad():
        logits, extra = model(src, lengths, prev)
        full = model.get_normalized_probs((logits, extra), log_probs=False)[0]
    return src, tokens, full, torch.softmax(logits[0].float(), dim=-1), extra["p_gen"][0, :, 0], extra["attn"][0][0]


def step_rows(details, model) -> List[tuple]:
    """(repeats the previous token, copy share, twice, moved, same peak: the module docstring's measures) for each
    word step of one summary after its first."""
    src, tokens, full, vocab, p_gen, attn = teacher_forced(details, model)
    rows = []
    for t in range(1, tokens.size(0)):
        word = int(tokens[t])
        if word == model.decoder.dictionary.eos() or not summary_stats.is_word(details.summary_tokens[t]):
            continue
        generated = float(p_gen[t] * vocab[t, word]) if word < vocab.size(1) else 0.0
        copied = min(1.0, max(0.0, 1.0 - generated / max(float(full[t, word]), 1e-30)))  # rounding aside
        holds = src[0] == word  # S
        peak, previous_peak = int(attn[t].argmax()), int(attn[t - 1].argmax())
        moved = bool(holds[peak]) and bool(holds[previous_peak]) and peak != previous_peak
        rows.append((word == int(tokens[t - 1]), copied, float(int(holds.sum()) >= 2), float(moved),
                     float(peak == previous_peak)))
    return rows


def where_repeats_come_from(model_dir: Path, data: Path) -> Dict[str, Dict[str, float]]:
    """MECHANISM's means over the repeat steps and over the other word steps of the model's *defaults* summaries."""
    from fairseq_plugins.inference.hub import Summarizer

    summarizer = Summarizer.from_pretrained(model_dir, data_dir=data, device="cpu")
    model = summarizer.model.eval()
    documents = read_lines(exp_raw(data) / "test.src")
    rows = [row for details in summarizer.summarize_with_details(documents, detok=False, block_immediate_repeat=0)
            for row in step_rows(details, model)]
    groups = {"repeat": [r[1:] for r in rows if r[0]], "other": [r[1:] for r in rows if not r[0]]}
    return {name: dict(steps=len(group), **{key: float(np.mean([r[i] for r in group])) if group else float("nan")
                                            for i, (key, _) in enumerate(MECHANISM)})
            for name, group in groups.items()}


def seed_results(exp: Experiment, data_exp: Experiment, corpus: str, data: Path, seed: int, stale: bool) -> Dict:
    """One seed's rows and mechanism figures, kept in WORK/seedS/results.json while newer than its models."""
    models = trained(data_exp, config_of(data_exp, corpus), data, seed, BEFORE_UPDATES, stale)

    def make():
        rows = {f"{m}_{d}": figures(exp, data, decoded(exp, models[m], data, exp.work / f"seed{seed}" / f"{m}_{d}.sum",
                                                       d), f"{seed}_{m}_{d}", CORPORA[corpus][3]) for m, d in ROWS}
        return {"rows": rows, "mechanism": {m: where_repeats_come_from(models[m], data) for m in MODELS},
                "trained_at": {m: read_record(models[m])["code"]["commit"] for m in MODELS}}

    return kept_or_made(exp.work / f"seed{seed}" / "results.json", models.values(), make)


def report(args, results: Dict, started: float) -> str:
    seeds = sorted(seed for seed in results if isinstance(seed, int))
    lines = opening("Immediate repeats: where they come from, and the search that bans them", "immediate_repeats.py",
                    results, seeds, started)
    lines += [f"{CORPORA[args.corpus][0]}; short_targets.py's models: *before* `./train.sh DATA MODEL --max-update "
              f"{BEFORE_UPDATES} --eos-attention renormalise`, *after* `./train.sh DATA MODEL`.  *defaults*: decoded "
              "with the defaults and `--block-immediate-repeat 0`; *ban*: with `--block-immediate-repeat 1`.  "
              "ROUGE: official ROUGE-1.5.5 "
              "F1 on the 500 test documents (`--no-detok`; Chinese: characters as ids).", ""]
    lines += seed_table(results, seeds, ROWS)
    lines += ["", "## defaults -> ban (B - A, 95 % paired bootstrap per seed)", "",
              "| model | measure | per seed | verdict |", "|---|---|---|---|"]
    for model in MODELS:
        lines += paired_rows(results, seeds, model, f"{model}_defaults", f"{model}_ban")
    lines += ["", "## Where the repeats come from (each model's *defaults* summaries, teacher-forced)", "",
              "Means over the steps that write the previous token again (*repeat*) and over the other word steps "
              "(*other*).", "",
              "| seed | model | steps | " + " | ".join(name for _, name in MECHANISM) + " |",
              "|" + "---|" * (3 + len(MECHANISM))]
    for seed in seeds:
        for model in MODELS:
            for group in ("repeat", "other"):
                f = results[seed]["mechanism"][model][group]
                lines.append(f"| {seed} | {model} | {group}: {f['steps']} | "
                             + " | ".join(f"{f[key]:.2f}" for key, _ in MECHANISM) + " |")
    return "\n".join(lines) + "\n"


def main():
    args = parse_args()
    started = time.time()
    exp, data_exp = Experiment("immediate_repeats", args.work), Experiment("short_targets", args.data_work)
    data = prepared(data_exp, args.corpus)
    results = {"references": reference_figures(data), "lead": lead_figures(data_exp, data, args.corpus)}
    for seed in args.seeds:
        results[seed] = seed_results(exp, data_exp, args.corpus, data, seed, args.reuse_stale)
        write_report(exp, args.out, report(args, results, started), f"seed {seed} done")
    pack_beside(exp.work, ARCHIVED, args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Song & Zhao (2020), Table 2 at CPU scale on LCSTS PART_II, with the controls that show it learns.

    python scripts/experiments/song2020_lcsts.py [--updates 2000] [--work runs/song2020_lcsts] [--threads 1]
                                                 [--part main|controls|both] [--only LABEL,LABEL...] [--seed N]
                                                 [--launcher local|slurm [--partition P --gpus N --time T ...]]
    python scripts/experiments/song2020_lcsts.py --scale paper --raw DIR [--launcher slurm ...]
    python scripts/experiments/song2020_lcsts.py --scale paper --dry-run [--dry-run-batch N]

``--scale paper``: the paper's three rows (full, - selective gate, - global encoding) on NLPCC 2017 TTNews (DIR:
summ-convert of the release, split) with configs/song2020_ttnews_paper.conf (global_gate_gru_song2020, Adam 1e-3
halved on plateau, batches of 32; units, lengths and the 20 epochs are chosen there), through compare.py;
``--dry-run`` budgets it (scripts/experiments/paper_scale.py).

The paper evaluates on TTNews (NLPCC 2017, 50k training pairs), which is not available here; LCSTS PART_II
(8.7k training pairs, ../shared/data, research use only) is the Chinese news corpus this project has.  Its
Table 2 removes the components cumulatively: the full model, "- selective gate", then "- global encoding",
whose scores are exactly those of its attentional Seq2Seq baseline (the model without both).

Two runs of scripts/experiments/compare.py, every system with the same number of updates, batches (4,000
tokens) and seed, the best checkpoint by validation ROUGE-L (greedy), beam 5 (in the main part also greedy
decoding), official ROUGE on characters:
  main      (WORK/main, characters, configs/song2020_lcsts_cpu.conf):
            the paper's three rows, each without and with ``--copy`` (the project's pointer: LCSTS summaries copy
            most of their characters); our extra row "no global encoding, gate kept"; and the controls: fairseq's
            built-in lstm (configs/lcsts_char_lstm.conf) and pgn_lstm without copy and coverage at the same sizes,
            which every row must beat, and the full model with the paper's learning-rate halving at every
            validation that does not improve (patience 0); LEAD-18 (18 = the training references' mean length).
            Every system's output layer is its embedding matrix: fairseq's lstm ties it whenever the embeddings
            are shared, and with theirs free the rows without copy stalled where it learned
            (docs/results/song2020_no_copy_controls.md).
  controls  (WORK/controls, sentencepiece, 8,000 pieces, configs/song2020_lcsts_sp_cpu.conf): the paper's units
            and schedule (the setup of the first CPU-scale run, which did not learn), the full model with the
            main run's config on these units (which also ties W_o and attends with s_t, unlike the paper's), and
            the two baseline controls on these units.  Last run before the tie and the query change.
The tables go to WORK/main/results.md and WORK/controls/results.md.  ``--only`` trains and scores only the
systems with these labels (for example half of them in another WORK, side by side on a second core).
``--seed N`` (other than the configs' 1) trains every system with that seed, labelled LABEL_seedN: at this scale
two seeds of one system differ by more than some rows do (docs/results/song2020_table2_lcsts.md, made by
scripts/experiments/paired_bootstraps.py from two seeds with their archives).
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

from scripts.experiments import paper_scale, slurm_launcher

ROOT = Path(__file__).resolve().parents[2]
# global_gate_gru_small's sizes, the output layer tied to the embeddings as in the other systems of the table
SMALL_PGN = ("--no-copy --no-coverage --coverage-lambda 0 --encoder-hidden-size 128 "
             "--share-decoder-input-output-embed --decoder-out-embed-dim 128")
PLATEAU = "--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 0"
MAIN = [  # (label, config, extra options)
    ("full", "song2020_lcsts_cpu", ""),
    ("no_gate", "song2020_lcsts_cpu", "--no-selective-gate"),
    ("seq2seq", "song2020_lcsts_cpu", "--no-selective-gate --no-global-encoding"),
    ("full+copy", "song2020_lcsts_cpu", "--copy"),
    ("no_gate+copy", "song2020_lcsts_cpu", "--no-selective-gate --copy"),
    ("seq2seq+copy", "song2020_lcsts_cpu", "--no-selective-gate --no-global-encoding --copy"),
    ("ours:gate_only", "song2020_lcsts_cpu", "--no-global-encoding"),
    ("control:fairseq_lstm", "lcsts_char_lstm", ""),
    ("control:pgn_lstm_no_copy", "lcsts_char", SMALL_PGN),
    ("control:full_lr_patience_0", "song2020_lcsts_cpu", PLATEAU),
]
# beam 5 is the table's decoding; greedy (the decoding that selects the checkpoints) shows the model apart from
# the search: at 2000 updates beam search helped fairseq's lstm far more than the GRU rows without copy
MAIN_DECODES = ("beam", "greedy --beam 1")
CONTROLS = [
    ("full:paper_units_and_schedule", "song2020_lcsts_sp_cpu", ""),
    ("full:fixed_lr", "song2020_lcsts_cpu", ""),
    ("control:fairseq_lstm", "lcsts_char_lstm", ""),
    ("control:pgn_lstm_no_copy", "lcsts_char", SMALL_PGN),
]


def compare(name, config, systems, args, lead=None, decodes=("beam",)):
    systems = [system for system in systems if not args.only or system[0] in args.only]
    if args.seed != 1:
        systems = [(f"{label}_seed{args.seed}", system_config, f"{extra} --seed {args.seed}".strip())
                   for label, system_config, extra in systems]
    if not systems:
        return
    cmd = [sys.executable, ROOT / "scripts" / "experiments" / "compare.py", "--name", name, "--corpus", "lcsts",
           "--config", config, "--updates", str(args.updates), "--threads", str(args.threads),
           "--work", args.work / name.split("_")[-1], *slurm_launcher.passthrough(args)]
    for label, system_config, extra in systems:
        cmd += ["--variant", f"{label} {system_config} {extra}"]
    for decode in decodes:
        cmd += ["--decode", decode]
    if lead:
        cmd += ["--lead", str(lead)]
    subprocess.run(list(map(str, cmd)), check=True, cwd=ROOT, env=dict(os.environ))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=2000, help="training updates of every system")
    parser.add_argument("--work", type=Path, help="work folder (default runs/song2020_lcsts; --scale paper: "
                                                  "runs/song2020_ttnews_paper, dry run runs/song2020_ttnews_dry_run)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--part", choices=("main", "controls", "both"), default="both")
    parser.add_argument("--only", type=lambda text: [label for label in text.split(",") if label],
                        help="comma-separated labels of the systems to run (default: all of the part)")
    parser.add_argument("--seed", type=int, default=1, help="training seed of every system (the configs' is 1)")
    slurm_launcher.add_options(parser)  # passed on to compare.py (--launcher slurm: each part submits its jobs)
    paper_scale.add_options(parser)
    args = parser.parse_args()
    if args.scale == "paper" or args.dry_run:
        return paper_scale.run(paper_scale.SONG2020, args)
    args.work = args.work or ROOT / "runs" / "song2020_lcsts"
    known = {label for label, _, _ in MAIN + CONTROLS}
    unknown = [label for label in args.only or [] if label not in known]
    if unknown:
        parser.error(f"--only: unknown system {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if args.part in ("main", "both"):
        compare("song2020_lcsts_main", "song2020_lcsts_cpu", MAIN, args, lead=18, decodes=MAIN_DECODES)
    if args.part in ("controls", "both"):
        compare("song2020_lcsts_controls", "song2020_lcsts_sp_cpu", CONTROLS, args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Celikyilmaz et al. (2018), the poster's ablation of deep communicating agents at CPU scale on CNN/DailyMail.

    python scripts/experiments/dca2018_cnndm.py [--updates 1000] [--rl-updates 300] [--work runs/dca2018_cnndm]
                                                [--threads 1] [--only LABEL,LABEL...] [--seed N] [--controls]
                                                [--launcher local|slurm [--partition P --gpus N --time T ...]]
    python scripts/experiments/dca2018_cnndm.py --report WORK [WORK ...] [--out docs/results/dca2018_cnndm.md]
    python scripts/experiments/dca2018_cnndm.py --archive WORK DEST.tar.xz
    python scripts/experiments/dca2018_cnndm.py --scale paper --raw DIR | --dry-run   (paper_scale.py's DCA2018)

One run of scripts/experiments/compare.py on CNN/DM from ../shared/data (9,200 training, 300 validation, 500
test documents; sources of up to 800 tokens, summaries of up to 100; configs/cnndm_small.conf's preprocessing).
Every system has the same sizes (embeddings 64, hidden 128, shared embeddings), batches (6,000 tokens), Adam,
seed and number of updates, keeps its best checkpoint by validation ROUGE-L (greedy) and is decoded with beam 4
three ways: no blocking, trigram blocking (Paulus et al.'s rule, the ``<q>`` sentence separator taking part, so
a trigram ". <q> the" blocks a sentence-initial word after the same sentence end), and trigram blocking with
``--block-ignore "<q>"`` (trigrams spanning a sentence separator may repeat).

The rows (the poster's, DCA_AND_PAULUS.md; the label's number is the poster's row):
  1 single_mle            pgn_lstm, no coverage (the single-agent baseline), NLL
  2 single_sem            the same + semantic_cohesion (lambda 1 in the paper's form, cos^2, s'_q read "after")
  2 single_sem_word       row 2 with s'_q read as the state that emits the sentence's last word
  2 single_sem_separator  row 2 with s'_q read as the state that emits the sentence's end token
  3 agents_no_comm        dca_lstm_small, 3 agents, no communication, no contextual agent attention, + SEM
  4 agents_comm           + communication
  5 agents_comm_caa       + contextual agent attention (the full model)
  6 rl                    row 5 fine-tuned with self_critical_cohesion for --rl-updates updates
  ref pgn_coverage        pgn_lstm with coverage (See et al.), NLL + coverage loss
and LEAD-3.  The three readings of row 2 are the measurement that chose semantic_cohesion's default reading.
``--controls`` adds row 5 with the old semantic_cohesion (the cohesion checks of the earlier form and scale)
and a one-agent dca_lstm (against row 2: does the multi-agent code reduce to a single agent?), fairseq's own
``lstm`` at the same budget (configs/cnndm_lstm.conf: the trivial baseline every row must beat), and four controls
of row 6, each from row 5 for --rl-updates updates at row 6's learning rate (RL_CONTROLS): row 5 continued with
its own loss (the reward or the extra updates?), RL with gamma 0.97, RL without the sampled summaries' L_SEM, and
RL with a trigram-blocked greedy baseline.

Our rows 3 and 4 differ from the poster's in one respect: the poster adds communication and the multi-agent
pointer in one step (row 4).  Rows 1-2 copy (pgn_lstm's pointer); a row 3 that could not copy would lose to
them for that reason alone, so our row 3 keeps the multi-agent pointer and row 4 adds communication only.

``--only`` trains and scores only the systems with these labels (for example half of them in another WORK, side
by side on a second core; row 6 needs row 5 in the same WORK).  ``--seed N`` (other than 1) trains every system
with that seed, labelled LABEL_seedN.  compare.py reuses a finished system only when its training record
matches exactly, so a table resumes from its finished systems.  ``--report`` writes one table from the work
folders of several runs (scripts/experiments/dca2018_report.py: paired bootstraps, the cohesion checks, seed
means, verdicts); ``--archive WORK DEST.tar.xz`` packs what the report reads of a run into one archive
(docs/results/dca2018_cnndm/) so the table can be rebuilt without the work folder.
"""
import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from scripts.experiments import paper_scale, slurm_launcher

SIZES = "--encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-hidden-size 128 --decoder-hidden-size 128"
SINGLE = f"{SIZES} --no-coverage --coverage-lambda 0"
SEM = "--criterion semantic_cohesion --cohesion-lambda 1"
ROWS = [  # (label, config, extra options)
    ("1:single_mle", "cnndm_small", SINGLE),
    ("2:single_sem", "cnndm_small", f"{SINGLE} {SEM}"),
    ("2:single_sem_word", "cnndm_small", f"{SINGLE} {SEM} --cohesion-state word"),
    ("2:single_sem_separator", "cnndm_small", f"{SINGLE} {SEM} --cohesion-state separator"),
    ("3:agents_no_comm", "dca_lstm_cnndm_small", "--no-communication --no-contextual-agent-attention"),
    ("4:agents_comm", "dca_lstm_cnndm_small", "--no-contextual-agent-attention"),
    ("5:agents_comm_caa", "dca_lstm_cnndm_small", ""),
    ("ref:pgn_coverage", "cnndm_small", SIZES),
]
# Run with --controls (or named in --only): the earlier semantic_cohesion (raw cosine, "after" the
# delimiter without <q>, lambda 0.1 on the per-token mean ~ 6 in the paper's form), for the cohesion checks before
# and after the fix; one agent of dca_lstm (does it equal row 2?); fairseq's lstm, the baseline every row must beat.
CONTROLS = [
    ("control:5_old_sem", "dca_lstm_cnndm_small",
     "--cohesion-form cosine --cohesion-state after --cohesion-sentence-end '. ! ? 。 ！ ？' --cohesion-lambda 6"),
    ("control:dca_one_agent", "dca_lstm_cnndm_small",
     "--num-agents 1 --no-communication --no-contextual-agent-attention"),
    ("control:fairseq_lstm", "cnndm_lstm", ""),
]
RL_OPTIONS = "--criterion self_critical_cohesion --rl-reward rougeL --rl-max-len-b 100 --lr 0.0001"
RL = ("6:rl", "5:agents_comm_caa", "dca_lstm_cnndm_small", f"{RL_OPTIONS} --rl-gamma 0.9984")
# The controls of row 6 (with --controls, or named in --only), each from row 5 for as many updates at the RL run's
# learning rate: row 5 continued with its own ML + SEM loss (continued training or the reward?); RL with gamma 0.97
# (DCA_AND_PAULUS.md's guess for the DCA paper, where Paulus et al.'s 0.9984 leaves the ML part ~0.002 of the
# weight: does RL keep the ML part's progress?); RL without the sampled summaries' L_SEM (does that term, far
# stronger against the likelihood under RL than under ML, cause the repeats?); RL with a greedy baseline decoded
# with trigram blocking, as the test-time beam search (the plain argmax baseline runs to the length limit).
RL_CONTROLS = [
    ("control:6_ml_continued", "5:agents_comm_caa", "dca_lstm_cnndm_small", "--lr 0.0001"),
    ("control:6_rl_gamma_0.97", "5:agents_comm_caa", "dca_lstm_cnndm_small", f"{RL_OPTIONS} --rl-gamma 0.97"),
    ("control:6_rl_no_sample_sem", "5:agents_comm_caa", "dca_lstm_cnndm_small",
     f"{RL_OPTIONS} --rl-gamma 0.9984 --no-sample-cohesion"),
    ("control:6_rl_blocked_baseline", "5:agents_comm_caa", "dca_lstm_cnndm_small",
     f"{RL_OPTIONS} --rl-gamma 0.9984 --rl-baseline-block-ngram 3"),
]
DECODES = ("beam", "beam+block --block-ngram-repeat 3", "beam+block_no_q --block-ngram-repeat 3 --block-ignore '<q>'")


def seeded(label: str, extra: str, seed: int):
    return (label, extra) if seed == 1 else (f"{label}_seed{seed}", f"{extra} --seed {seed}".strip())


def declared():
    """Every system the script can train: label -> (config, options, parent label or None)."""
    plain = {label: (config, extra, None) for label, config, extra in ROWS + CONTROLS}
    continued = {label: (config, extra, parent) for label, parent, config, extra in [RL] + RL_CONTROLS}
    return {**plain, **continued}


def selected_controls(args, rows):
    """The control rows of ``rows`` to run: all with --controls, those named in --only."""
    return [row for row in rows if (args.controls and not args.only) or (args.only and row[0] in args.only)]


def command(args):
    """The compare.py command line of the systems selected by --only and --seed."""
    cmd = [sys.executable, ROOT / "scripts" / "experiments" / "compare.py", "--name", "dca2018_cnndm",
           "--corpus", "cnndm", "--config", "cnndm_small", "--updates", str(args.updates),
           "--threads", str(args.threads), "--work", args.work, "--lead", "3", *slurm_launcher.passthrough(args)]
    wanted = lambda label: not args.only or label in args.only  # noqa: E731
    for label, config, extra in ROWS + selected_controls(args, CONTROLS):
        if wanted(label):
            name, options = seeded(label, extra, args.seed)
            cmd += ["--variant", f"{name} {config} {options}"]
    for label, parent, config, extra in ([RL] if wanted(RL[0]) else []) + selected_controls(args, RL_CONTROLS):
        if not wanted(parent):
            raise SystemExit(f"dca2018_cnndm.py: --only {label} needs its parent {parent} in the same run")
        child, child_extra = seeded(label, extra, args.seed)
        cmd += ["--continue", f"{child} {seeded(parent, '', args.seed)[0]} {config} {child_extra}"]
    if any("--continue" == part for part in cmd):
        cmd += ["--continue-updates", str(args.rl_updates)]
    for decode in DECODES:
        cmd += ["--decode", decode]
    return cmd


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=1000, help="training updates of rows 1-5 and the reference")
    parser.add_argument("--rl-updates", type=int, default=300, help="self-critical updates of row 6")
    parser.add_argument("--work", type=Path, help="work folder (default runs/dca2018_cnndm)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", type=lambda text: [label for label in text.split(",") if label],
                        help="comma-separated labels of the systems to run (default: all)")
    parser.add_argument("--seed", type=int, default=1, help="training seed of every system (the configs' is 1)")
    parser.add_argument("--controls", action="store_true", help="also the control systems (CONTROLS)")
    parser.add_argument("--report", type=Path, nargs="+", metavar="WORK",
                        help="write the report of these finished work folders instead of running")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "dca2018_cnndm.md")
    parser.add_argument("--archive", type=Path, nargs=2, metavar=("WORK", "DEST"),
                        help="pack what the report reads of WORK (no checkpoints, no data) into DEST, a .tar.xz "
                             "that --report then reads as a work folder")
    paper_scale.add_options(parser)
    slurm_launcher.add_options(parser)  # passed on to compare.py
    args = parser.parse_args()
    if args.scale == "paper" or args.dry_run:
        return paper_scale.run(paper_scale.DCA2018, args)
    args.work = args.work or ROOT / "runs" / "dca2018_cnndm"
    if args.archive:
        from scripts.experiments.dca2018_report import archive

        copies = archive(*args.archive)
        print(f"dca2018_cnndm: {len(copies)} files packed into {args.archive[1]}", file=sys.stderr)
        return
    if args.report:
        from scripts.experiments.dca2018_report import report

        text = report(args.report, args.out, "python scripts/experiments/dca2018_cnndm.py "
                      + " ".join(shlex.quote(a) for a in sys.argv[1:]), declared())
        print(text)
        return
    known = {label for label, _, _ in ROWS + CONTROLS} | {RL[0]} | {label for label, *_ in RL_CONTROLS}
    unknown = [label for label in args.only or [] if label not in known]
    if unknown:
        parser.error(f"--only: unknown system {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    subprocess.run(list(map(str, command(args))), check=True, cwd=ROOT, env=dict(os.environ))


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Paulus, Xiong & Socher (2017), their CNN/DailyMail table at the paper's scale: the ML model with
intra-attention, ML+RL and RL, with LEAD-3.

    python scripts/experiments/paulus2017_table.py --raw DIR [--work runs/paulus2017_table_paper] [--threads 1]
                                                   [--launcher local|slurm [--partition P --gpus N --time T ...]]
    python scripts/experiments/paulus2017_table.py --dry-run [--dry-run-batch N] [--work DIR]

One run of scripts/experiments/compare.py (``--corpus raw --raw DIR``; DIR from the CNN/DM story files by
``summ-convert story`` and ``summ-convert split``): the ML model with configs/paulus2017_cnndm_paper.conf (the
paper's sizes, 50k vocabulary, 800/100 tokens, Adam 1e-3, batches of 50, own predictions fed back with probability
0.25), then from its best checkpoint ML+RL (gamma 0.9984) and RL (gamma 1) with
configs/paulus2017_cnndm_rl_paper.conf (ROUGE-L reward, Adam 1e-4); beam 5 with trigram blocking. The numbers of
updates are not in the notes at hand (/work/shared/papers/DCA_AND_PAULUS.md): 75,000 ML updates (See et al.'s 12.8
epochs at batch 50) and 25,000 for each RL phase are chosen, in scripts/experiments/paper_scale.py's PAULUS2017.
--dry-run budgets the run (see paper_scale.py; its ML row, with own predictions, passes the memory limit:
docs/results/paper_scale_dry_run.md).
The CPU-scale runs of this model are on LCSTS (docs/results/lcsts_paulus_and_rl.md).
"""
from scripts.experiments import paper_scale

if __name__ == "__main__":
    paper_scale.table_main(paper_scale.PAULUS2017, __doc__)

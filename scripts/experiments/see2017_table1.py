#!/usr/bin/env python
"""See et al. (2017), Table 1 at the paper's scale on CNN/DailyMail: the attentional baseline, the
pointer-generator and the pointer-generator with coverage, with LEAD-3.

    python scripts/experiments/see2017_table1.py --raw DIR [--work runs/see2017_table1_paper] [--threads 1]
                                                 [--launcher local|slurm [--partition P --gpus N --time T ...]]
    python scripts/experiments/see2017_table1.py --dry-run [--dry-run-batch N] [--work DIR]

One run of scripts/experiments/compare.py (``--corpus raw --raw DIR``; DIR from the CNN/DM story files by
``summ-convert story`` and ``summ-convert split``) with configs/see2017_cnndm_paper.conf (section 5 of the paper:
pgn_lstm_see2017, 50k vocabulary, 400/100 tokens, Adagrad 0.15 with accumulator 0.1, batches of 16) and the
paper's updates: 600,000 for the baseline (50k vocabulary), 230,000 for the pointer-generator, 3,000 more with
coverage from the pointer-generator's best checkpoint (compare.py --continue); beam 4, summaries up to 120
tokens.  The rows are scripts/experiments/paper_scale.py's SEE2017.  --dry-run builds the three systems and
trains each 3 updates on a slice of ../shared/data (paper_scale.py's docstring) to budget the run.  The CPU-scale
runs of these models are configs/dtu_*.conf and scripts/experiments/see2017_adagrad.py.
"""
from scripts.experiments import paper_scale

if __name__ == "__main__":
    paper_scale.table_main(paper_scale.SEE2017, __doc__)

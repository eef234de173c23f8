"""Commands that read checkpoints or per-document scores, installed as ``summ-*`` (pyproject.toml):

    summ-average-checkpoints   average_checkpoints.py   one checkpoint from the last N of a run
    summ-rouge-significance    rouge_significance.py    paired bootstrap of two systems' ROUGE
    summ-visualize-attention   visualize_attention.py   attention, copying and coverage of one summary (HTML, PNG)
    summ-attention-stats       attention_stats.py       how focused a model's attention is on a split

The scripts of the same names in ``scripts/`` are kept for old command lines and imports.
"""

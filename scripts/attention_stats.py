#!/usr/bin/env python
"""Kept for old command lines and imports: `summ-attention-stats` (fairseq_plugins/cli/attention_stats.py, library
fairseq_plugins/viz/attention_stats.py), with the same command line and the same importable names."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout, installed or not
from fairseq_plugins.viz.attention_stats import *  # noqa: E402,F401,F403
from fairseq_plugins.cli.attention_stats import *  # noqa: E402,F401,F403
from fairseq_plugins.cli.attention_stats import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

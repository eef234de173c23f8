#!/usr/bin/env python
"""Kept for old command lines and imports: `summ-attention-stats` (fairseq_plugins/cli/attention_stats.py, library
fairseq_plugins/viz/attention_stats.py), with the same command line and the same importable names."""
import sys

from fairseq_plugins.viz.attention_stats import *  # noqa: F401,F403
from fairseq_plugins.cli.attention_stats import *  # noqa: F401,F403
from fairseq_plugins.cli.attention_stats import main

if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Kept for old command lines and imports: `summ-visualize-attention` (fairseq_plugins/cli/visualize_attention.py),
with the same command line and the same importable names."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout, installed or not
from fairseq_plugins.cli.visualize_attention import *  # noqa: E402,F401,F403
from fairseq_plugins.cli.visualize_attention import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

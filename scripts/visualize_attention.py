#!/usr/bin/env python
"""Kept for old command lines and imports: `summ-visualize-attention` (fairseq_plugins/cli/visualize_attention.py),
with the same command line and the same importable names."""
import sys

from fairseq_plugins.cli.visualize_attention import *  # noqa: F401,F403
from fairseq_plugins.cli.visualize_attention import main

if __name__ == "__main__":
    sys.exit(main())

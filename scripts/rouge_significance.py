#!/usr/bin/env python
"""Kept for old command lines and imports: `summ-rouge-significance` (fairseq_plugins/cli/rouge_significance.py,
library fairseq_plugins/scoring/significance.py), with the same command line and the same importable names."""
import sys

from fairseq_plugins.scoring.significance import *  # noqa: F401,F403
from fairseq_plugins.cli.rouge_significance import *  # noqa: F401,F403
from fairseq_plugins.cli.rouge_significance import main

if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Kept for old command lines and imports: `summ-average-checkpoints` (fairseq_plugins/cli/average_checkpoints.py,
library fairseq_plugins/runtime/average_checkpoints.py), with the same command line and the same importable names."""
import sys

from fairseq_plugins.runtime.average_checkpoints import *  # noqa: F401,F403
from fairseq_plugins.cli.average_checkpoints import *  # noqa: F401,F403
from fairseq_plugins.cli.average_checkpoints import main

if __name__ == "__main__":
    sys.exit(main())

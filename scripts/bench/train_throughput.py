#!/usr/bin/env python
"""Former name of scripts/bench/throughput.py, kept so that existing commands work: it runs throughput.py with
the same options (training words/s, decode sentences/s and peak memory of pgn_lstm against fairseq's ``lstm``).

    python scripts/bench/train_throughput.py [throughput.py options]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import main  # noqa: E402

if __name__ == "__main__":
    main()

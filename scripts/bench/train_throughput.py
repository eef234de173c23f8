#!/usr/bin/env python
"""Former name of scripts/bench/throughput.py, kept so that existing commands work: it runs throughput.py with
the same options (training words/s, decode sentences/s and peak memory of pgn_lstm against fairseq's ``lstm``).

    python scripts/bench/train_throughput.py [throughput.py options]
"""
from scripts.bench.throughput import main

if __name__ == "__main__":
    main()

"""The experiment runners (python scripts/experiments/NAME.py) and their libraries: lib, records, corpora."""

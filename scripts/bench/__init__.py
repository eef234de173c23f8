"""The benchmarks (python scripts/bench/NAME.py) and their libraries: machine, flops, throughput_runners, peers."""

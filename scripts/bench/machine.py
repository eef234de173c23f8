#!/usr/bin/env python
"""What the benchmark ran on: the CPU, its caches, the thread count, and its measured fp32 matrix-multiply peak.

Every table of throughput.py starts with these lines, because its ratios depend on the CPU (the same command
gave pgn_lstm / lstm training 1.22 on one AMD EPYC and 0.98 on another).

The peak is measured, not taken from a data sheet: torch.mm on n x n float32 matrices for a few sizes, on the
benchmark's device (on a CPU with the thread count the models use: torch's default, or OMP_NUM_THREADS), timed
over a few products after a warm-up; the best GFLOP/s over sizes and repeats is the peak (2 n^3 FLOPs per
product).  Model FLOPs utilisation (MFU) divides a model's achieved GFLOP/s by it.

    python scripts/bench/machine.py [--sizes 1024,2048,3072] [--repeats 3]
"""
import argparse
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from fairseq_plugins.accelerated.cpu_cache import CacheLevel, read_cpu_caches

PEAK_SIZES = (1024, 2048, 3072)


@dataclass
class Caches:
    """The data caches of CPU 0, from sysfs."""

    levels: List[CacheLevel]

    def describe(self) -> str:
        if not self.levels:
            return "cache sizes unknown (no /sys/devices/system/cpu/cpu0/cache)"
        return ", ".join(f"L{c.level} {format_bytes(c.size_bytes)}"
                         + (f" shared by {c.shared_cpus} CPUs" if c.shared_cpus > 1 else " per CPU")
                         for c in self.levels)


def cache_sizes() -> Caches:
    return Caches(read_cpu_caches())


def format_bytes(size: int) -> str:
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    return f"{size >> 10} KiB"


def cpu_model(cpuinfo: str = None) -> str:
    """'model name (family F, model M, stepping S)' from /proc/cpuinfo (the name alone can be as vague as
    'AMD EPYC' on a virtual machine; the family tells the generation), else platform.processor()."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or platform.machine()
    fields: Dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block only
            continue
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    details = [f"{label} {fields[key]}" for key, label in (("cpu family", "family"), ("model", "model"),
                                                            ("stepping", "stepping")) if key in fields]
    flags = set(fields.get("flags", "").split())
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    return f"{name} ({', '.join(details + ([vector] if vector else []))})" if details or vector else name


def thread_setting() -> str:
    return os.environ.get("OMP_NUM_THREADS", "unset: torch's default")


def describe_machine() -> str:
    import torch

    return (f"CPU: {cpu_model()}; {os.cpu_count()} logical CPUs; torch {torch.__version__} with "
            f"{torch.get_num_threads()} threads (OMP_NUM_THREADS {thread_setting()}), "
            f"kernels {torch.backends.cpu.get_cpu_capability()}")


def matmul_peak(sizes: Sequence[int] = PEAK_SIZES, repeats: int = 3, device: str = "cpu",
                dtype: str = "float32") -> Tuple[float, int, Dict[int, float]]:
    """The best GFLOP/s of torch.mm in ``dtype`` (float32 by default; bfloat16 on a GPU: its tensor cores'
    rate) over ``sizes`` (n x n by n x n) and ``repeats`` timed products each, after one warm-up product per
    size, on ``device``.  Returns (best GFLOP/s, its n, best GFLOP/s per n)."""
    import torch

    kind = getattr(torch, dtype)

    def sync():
        if device != "cpu":
            torch.cuda.synchronize()

    per_size = {}
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=kind)
        b = torch.randn(n, n, device=device, dtype=kind)
        out = torch.empty(n, n, device=device, dtype=kind)
        torch.mm(a, b, out=out)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            torch.mm(a, b, out=out)
            sync()
            best = min(best, time.perf_counter() - start)
        per_size[n] = 2 * n**3 / best / 1e9
    n_best = max(per_size, key=per_size.get)
    return per_size[n_best], n_best, per_size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, PEAK_SIZES)), help="matrix sizes n, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be integers, got {args.sizes!r}")
    print(describe_machine())
    print(f"caches: {cache_sizes().describe()}")
    peak, n, per_size = matmul_peak(sizes, args.repeats)
    print(f"fp32 matmul peak: {peak:.1f} GFLOP/s (n={n}; " +
          ", ".join(f"n={k}: {v:.1f}" for k, v in per_size.items()) + ")")


if __name__ == "__main__":
    main()

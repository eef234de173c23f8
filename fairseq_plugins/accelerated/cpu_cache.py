"""The CPU's data caches (from sysfs) and the attention kernel's block size per thread that follows from them.

accelerated/additive_scores.py processes the batch a few rows at a time so that each block stays in cache; how
many floats a block holds comes from here.  The caches are read once, at the first call of ``block_size``
(the first CPU attention step), not when the module is imported: importing the plugins touches no /sys file.
"""
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import List, Tuple

CPU_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
L2_FRACTION = 4  # a block takes this fraction of a thread's share of L2 (see ``block_floats_per_thread``)
FALLBACK_BLOCK_BYTES = 128 << 10  # when the L2 size cannot be read: a quarter of the smallest common L2 (512 KB)


@dataclass(frozen=True)
class CacheLevel:
    """One data (or unified) cache of a CPU: its level, size, and how many logical CPUs share it."""

    level: int
    size_bytes: int
    shared_cpus: int


def _parse_size(text: str) -> int:
    """'1024K' / '32M' / '49152' (sysfs) -> bytes."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _count_cpus(cpu_list: str) -> int:
    """'0-1,4' (sysfs shared_cpu_list) -> 3."""
    count = 0
    for part in cpu_list.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            count += int(last or first) - int(first) + 1
    return count


def read_cpu_caches(cache_dir: Path = CPU_CACHE_DIR) -> List[CacheLevel]:
    """The data and unified caches of CPU 0, by level, from sysfs (Linux); [] when they cannot be read."""
    caches = []
    try:
        for index in sorted(Path(cache_dir).glob("index*")):
            if (index / "type").read_text().strip() == "Instruction":
                continue
            caches.append(CacheLevel(int((index / "level").read_text()), _parse_size((index / "size").read_text()),
                                     max(1, _count_cpus((index / "shared_cpu_list").read_text()))))
    except (OSError, ValueError):
        return []
    return sorted(caches, key=lambda cache: cache.level)


def block_floats_per_thread(caches: List[CacheLevel]) -> Tuple[int, str]:
    """How many float32 one thread's block may hold, and why.

    Each block iteration streams three arrays of the block's size through the cache (the keys it reads, the
    block itself, read and written four or five times, and the summed key gradient in the backward pass), so
    the block takes 1 / ``L2_FRACTION`` of the L2 cache that one thread has: the L2 size divided by the logical
    CPUs sharing it (two SMT threads of one core share it; most cloud vCPUs are such threads).  A fixed 1 MB
    per thread was as large as the whole L2 of the CPU it was tuned on and twice that of CPUs with 512 KB of L2:
    see ``scripts/bench/block_sweep.py``, which measures the alternatives."""
    l2 = [cache for cache in caches if cache.level == 2]
    if not l2:
        return FALLBACK_BLOCK_BYTES // 4, f"{FALLBACK_BLOCK_BYTES >> 10} KiB: no L2 size in {CPU_CACHE_DIR}"
    share = l2[0].size_bytes // l2[0].shared_cpus
    block = max(4096, share // L2_FRACTION)
    return block // 4, (f"1/{L2_FRACTION} of the {l2[0].size_bytes >> 10} KiB L2"
                        + (f" shared by {l2[0].shared_cpus} CPUs" if l2[0].shared_cpus > 1 else " per CPU"))


@lru_cache(maxsize=None)
def block_size() -> Tuple[int, str]:
    """This CPU's (floats per thread, why), read from sysfs at the first call and kept."""
    return block_floats_per_thread(read_cpu_caches())

#!/usr/bin/env python
"""A bounded load test of summ-serve on loopback, against offline decoding of the same documents.

    python scripts/bench/serve_load.py MODEL_DIR --input docs.txt [--data-dir DATA_DIR] [--documents 64]
        [--concurrency 1,4,16,64] [--options '{"beam": 5}'] [--output docs/results/serve_load.md]

It takes the first ``--documents`` lines of ``--input`` (one raw document a line) and measures, one after the
other (never two at once, so they do not share the cores):
  1. offline: ``generate.sh --input`` on all of them (wall time, with its start-up) when ``--data-dir`` is given,
     and one in-process ``Summarizer.summarize`` call on all of them (the batch decoding the server's batcher
     approaches);
  2. a single hub call: ``summarize([doc])`` for each document, in process (the latency floor of one request);
  3. summ-serve on 127.0.0.1, for each concurrency C: every document as its own request, C requests in flight at
     a time (aiohttp's client), a fixed number of requests, so each level stops by itself.  Documents/s and the
     p50/p95/p99 latency per level.
The issue's targets, checked in the table: at concurrency 16 at least 0.7x the offline (in-process) documents/s;
p95 at concurrency 1 at most 1.5x the median single hub call.  The report opens with the command, the commit and
the machine (scripts/experiments/records.py made_header) and says how loaded the machine was (the load average before
and after), since other jobs share the cores.
"""
import argparse
import asyncio
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from scripts.experiments.records import made_header

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: List[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between the sorted values."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def offline_generate_sh(data_dir: Path, model_dir: Path, docs_file: Path, gen_args: List[str]) -> float:
    start = time.monotonic()
    subprocess.run(["./generate.sh", "--input", str(docs_file), str(data_dir), str(model_dir), *gen_args],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def hub_measurements(model_dir: Path, documents: List[str], options: Dict) -> Dict:
    """Seconds of one batch call on every document, and of a single-document call on each."""
    from fairseq_plugins.inference.hub import Summarizer

    summarizer = Summarizer.from_pretrained(model_dir, device="cpu")
    summarizer.summarize(documents[:2], **options)  # warm-up
    start = time.monotonic()
    summarizer.summarize(documents, **options)
    batch = time.monotonic() - start
    singles = []
    for document in documents:
        start = time.monotonic()
        summarizer.summarize([document], **options)
        singles.append(time.monotonic() - start)
    return {"batch_seconds": batch, "single_seconds": singles}


def start_server(model_dir: Path):
    process = subprocess.Popen([sys.executable, "-m", "fairseq_plugins.cli.serve", str(model_dir), "--port", "0"],
                               cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    for line in process.stderr:
        found = re.search(r"listening on (http://[0-9.]+:\d+)/", line)
        if found:
            return process, found.group(1)
    raise RuntimeError("summ-serve did not start")


async def load_level(url: str, documents: List[str], options: Dict, concurrency: int) -> Dict:
    """Every document as its own request, ``concurrency`` in flight; wall seconds and per-request latencies."""
    import aiohttp

    queue = list(enumerate(documents))
    latencies = [0.0] * len(documents)

    async def worker(session):
        while queue:
            i, document = queue.pop(0)
            start = time.monotonic()
            async with session.post(url + "/summarize", json={"documents": [document], "options": options}) as r:
                answer = await r.json()
                if r.status != 200:
                    raise RuntimeError(f"request {i}: {r.status} {answer}")
            latencies[i] = time.monotonic() - start

    timeout = aiohttp.ClientTimeout(total=3600)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        start = time.monotonic()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        wall = time.monotonic() - start
    return {"wall": wall, "latencies": latencies}


def server_levels(model_dir: Path, documents: List[str], options: Dict, levels: List[int]) -> Dict[int, Dict]:
    process, url = start_server(model_dir)
    try:
        asyncio.run(load_level(url, documents[:4], options, 2))  # warm-up
        return {c: asyncio.run(load_level(url, documents, options, c)) for c in levels}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(600)


def report(args, documents, offline_sh, hub, levels, load_before, load_after) -> str:
    n = len(documents)
    offline_rate = n / hub["batch_seconds"]
    single = statistics.median(hub["single_seconds"])
    lines = ["# summ-serve under load (scripts/bench/serve_load.py)", "",
             *made_header("bench/serve_load.py", args.argv), "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, OMP_NUM_THREADS="
             f"{os.environ.get('OMP_NUM_THREADS', 'unset')}; load average {load_before:.1f} before and "
             f"{load_after:.1f} after: **other jobs shared the cores**, so the figures are lower bounds and noisy.",
             "", f"Model: `{args.model_dir}`; {n} documents of `{args.input}`, decoding options "
             f"`{json.dumps(args.options)}` (the rest the model's own). One document per request.", "",
             "| decoding | documents/s | p50 latency (s) | p95 (s) | p99 (s) |", "|---|---:|---:|---:|---:|"]
    if offline_sh is not None:
        lines.append(f"| offline `generate.sh --input` (with its start-up) | {n / offline_sh:.2f} | | | |")
    lines.append(f"| offline hub, one call on all documents | {offline_rate:.2f} | | | |")
    lines.append(f"| single hub call per document | {n / sum(hub['single_seconds']):.2f} | {single:.3f} | "
                 f"{percentile(hub['single_seconds'], 95):.3f} | {percentile(hub['single_seconds'], 99):.3f} |")
    for c, level in levels.items():
        lat = level["latencies"]
        lines.append(f"| summ-serve, concurrency {c} | {n / level['wall']:.2f} | {percentile(lat, 50):.3f} | "
                     f"{percentile(lat, 95):.3f} | {percentile(lat, 99):.3f} |")
    lines += ["", "Targets:"]
    if 16 in levels:
        ratio = n / levels[16]["wall"] / offline_rate
        lines.append(f"- concurrency 16: {ratio:.2f}x the offline hub's documents/s (target at least 0.7x): "
                     f"{'met' if ratio >= 0.7 else 'not met'}")
    if 1 in levels:
        ratio = percentile(levels[1]["latencies"], 95) / single
        lines.append(f"- p95 at concurrency 1: {ratio:.2f}x the median single hub call (target at most 1.5x): "
                     f"{'met' if ratio <= 1.5 else 'not met'}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--input", type=Path, required=True, help="raw documents, one a line")
    parser.add_argument("--data-dir", type=Path, help="DATA_DIR for the generate.sh row (left out without it)")
    parser.add_argument("--documents", type=int, default=64)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--options", type=json.loads, default={}, help="decoding options as JSON")
    parser.add_argument("--output", type=Path, help="write the table here too (markdown)")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    levels = [int(c) for c in args.concurrency.split(",")]
    documents = args.input.read_text(encoding="utf-8").split("\n")[:args.documents]
    if len(documents) < args.documents or min(levels) < 1:
        parser.error(f"{args.input} has fewer than {args.documents} lines, or a concurrency below 1")
    load_before = os.getloadavg()[0]
    offline_sh = None
    if args.data_dir:
        docs_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"serve_load.{os.getpid()}.txt"
        docs_file.write_text("\n".join(documents) + "\n", encoding="utf-8")
        gen_args = [arg for key, value in args.options.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
        try:
            offline_sh = offline_generate_sh(args.data_dir, args.model_dir, docs_file, gen_args)
        finally:
            docs_file.unlink()
    hub = hub_measurements(args.model_dir, documents, args.options)
    measured = server_levels(args.model_dir, documents, args.options, levels)
    text = report(args, documents, offline_sh, hub, measured, load_before, os.getloadavg()[0])
    print(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

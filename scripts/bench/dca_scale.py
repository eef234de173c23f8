#!/usr/bin/env python
"""How dca_lstm and pgn_lstm scale with the document length: time and peak memory per training step and per
decoded summary, for 400, 800, 1,600 and 3,000-token inputs (the DCA scale table).

Documents: real CNN/DM articles from ../shared/data/cnndm_see2017/part_a.jsonl.gz (research use only: read here
at run time, never copied), concatenated into long documents and cut to each length: document i (i = 0..7) is
articles 8i, 8i+1, ... joined, so the 800-token document starts with the 400-token one; its summary is the
reference of its first article, at most 100 tokens.  The vocabulary is the 20,000 most frequent words of the
first 2,000 articles, and every other source word is a copyable OOV marker, as summ-prepare makes them.

Models, at the same sizes (configs/cnndm_small.conf and configs/dca_cnndm.conf: embeddings 128 shared, hidden
256, dropout 0.1): pgn_lstm (copy + coverage, focal_copy_coverage = See et al.'s NLL + coverage) and
dca_lstm_celikyilmaz2018 (M = 3 agents over sentence groups, K = 2 contextual layers, semantic_cohesion with
lambda 0.1).  One batch of 8 documents.

Each (model, length, phase) runs in its own process, so that its peak resident memory (the kernel's ru_maxrss of
that process) is that phase's alone:
  * train: forward, loss, backward, gradient clipping (2.0) and an Adam step on the batch; one warm-up step, then
    the median of ``--steps`` timed steps;
  * decode: beam search (the project's generator, beam ``--beam``) of the 8 documents, every hypothesis exactly
    ``--summary-len`` tokens long (min = max length, so both models decode the same number of steps); the time
    of the whole batch divided by 8, after a warm-up on one short document.
The ``idle MB`` column is the resident memory of a worker after imports and model construction, before any
batch: what a phase adds is its peak minus that.

    OMP_NUM_THREADS=1 python scripts/bench/dca_scale.py [--lengths 400,800,1600,3000] [--models dca_lstm,pgn_lstm]
        [--steps 2] [--beam 4] [--summary-len 100] [--threads 1] [--work runs/dca_scale] [--out FILE]

The report opens with the command, the commit and the machine (scripts/experiments/records.py made_header).  The
machine is shared: the load average before and after is printed with the table, and the figures are only
comparable within one run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from scripts.experiments.corpora import CNNDM, cnndm_documents, require
from scripts.experiments.records import made_header

ROOT = Path(__file__).resolve().parents[2]

BATCH = 8
ARTICLES_PER_DOCUMENT = 8
VOCAB_ARTICLES = 2000
VOCAB_SIZE = 20000
MAX_TARGET = 100
SIZES = dict(encoder_embed_dim=128, decoder_embed_dim=128, encoder_hidden_size=256, decoder_hidden_size=256,
             share_all_embeddings=True, dropout=0.1)
MODELS = {"dca_lstm": "dca_lstm_celikyilmaz2018", "pgn_lstm": "pgn_lstm"}


def fail(message: str):
    sys.exit(f"dca_scale.py: error: {message}")


# ---------------------------------------------------------------------------------------------- data
def read_articles(count: int):
    require(CNNDM, fail)
    return cnndm_documents(count)


def prepare(work: Path, lengths) -> Path:
    """The dictionary and, per length, the 8 documents (marked tokens) and summaries, in WORK/data.json."""
    from fairseq_plugins.text import markers
    from fairseq_plugins.text.prepare import MarkStats, build_vocab, mark_document

    work.mkdir(parents=True, exist_ok=True)
    articles = read_articles(max(VOCAB_ARTICLES, BATCH * ARTICLES_PER_DOCUMENT))
    counts = Counter(word for article in articles[:VOCAB_ARTICLES] for word in article["article"].split())
    num_markers = max(lengths)
    vocab_items = build_vocab(counts, VOCAB_SIZE, 1)
    with (work / "dict.txt").open("w", encoding="utf-8") as out:
        out.writelines(f"{word} {n}\n" for word, n in vocab_items)
        out.writelines(f"{markers.marker(k)} 0\n" for k in range(num_markers))
    vocab = {word for word, _ in vocab_items}
    documents = {}
    for length in lengths:
        docs = []
        for i in range(BATCH):
            group = articles[i * ARTICLES_PER_DOCUMENT:(i + 1) * ARTICLES_PER_DOCUMENT]
            words = " ".join(article["article"] for article in group).split()
            if len(words) < length:
                fail(f"documents of {length} tokens need more than {ARTICLES_PER_DOCUMENT} articles each")
            summary = " ".join(group[0]["reference"]).split()[:MAX_TARGET]
            source, target, _ = mark_document(words[:length], summary, vocab, num_markers, MarkStats())
            docs.append({"source": source, "target": target})
        documents[str(length)] = docs
    path = work / "data.json"
    path.write_text(json.dumps(documents), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- worker
def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build_model(model: str, dictionary):
    import fairseq_plugins
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    fairseq_plugins.register()
    arch = MODELS[model]

    class Task:
        source_dictionary = dictionary
        target_dictionary = dictionary
        skips_nonfinite_updates = False

    args = argparse.Namespace(**SIZES)
    ARCH_CONFIG_REGISTRY[arch](args)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, Task()), Task()


def build_criterion(model: str, task):
    common = dict(focal_alpha=1.0, focal_gamma=0.0, loss_average="sequence", sentence_avg=False)
    if model == "dca_lstm":
        from fairseq_plugins.criterions.semantic_cohesion import SemanticCohesionCriterion

        return SemanticCohesionCriterion(task, coverage_lambda=0.0, cohesion_lambda=0.1, **common)
    from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion

    return FocalCopyCoverageCriterion(task, coverage_lambda=1.0, **common)


def make_batch(docs, dictionary):
    """A fairseq-style batch: sources left-padded, targets and teacher-forcing inputs right-padded."""
    import torch
    from fairseq.data import data_utils

    from fairseq_plugins.generation.sampling import teacher_forcing_input

    encode = lambda words: dictionary.encode_line(" ".join(words), add_if_not_exist=False,  # noqa: E731
                                                 append_eos=True).long()
    sources = [encode(doc["source"]) for doc in docs]
    targets = [encode(doc["target"]) for doc in docs]
    pad, eos = dictionary.pad(), dictionary.eos()
    src = data_utils.collate_tokens(sources, pad, eos, left_pad=True)
    target = data_utils.collate_tokens(targets, pad, eos, left_pad=False)
    return {"id": torch.arange(len(docs)), "ntokens": int(target.ne(pad).sum()),
            "net_input": {"src_tokens": src, "src_lengths": torch.tensor([s.numel() for s in sources]),
                          "prev_output_tokens": teacher_forcing_input(target, pad, eos)},
            "target": target}


def worker(args) -> dict:
    import torch
    from fairseq.data import Dictionary

    torch.manual_seed(1)
    dictionary = Dictionary.load(str(args.work / "dict.txt"))
    docs = json.loads((args.work / "data.json").read_text(encoding="utf-8"))[str(args.length)]
    model, task = build_model(args.model, dictionary)
    sample = make_batch(docs, dictionary)
    result = {"idle_mb": rss_mb(), "source_tokens": int(sample["net_input"]["src_lengths"].max())}
    if args.worker == "train":
        criterion = build_criterion(args.model, task)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        model.train()
        seconds = []
        for step in range(args.steps + 1):  # the first is a warm-up
            start = time.perf_counter()
            loss, _, _ = criterion(model, sample)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
            optimizer.step()
            if step:
                seconds.append(time.perf_counter() - start)
        result.update(seconds_per_step=statistics.median(seconds), steps=len(seconds), loss=float(loss))
    else:
        from fairseq_plugins.generation.generator import SummarizationGenerator

        model.eval()
        generator = SummarizationGenerator([model], dictionary, beam_size=args.beam, max_len_a=0,
                                           max_len_b=args.summary_len, min_len=args.summary_len)
        net_input = {key: value for key, value in sample["net_input"].items() if key != "prev_output_tokens"}
        warm = {"src_tokens": net_input["src_tokens"][:1, -50:], "src_lengths": torch.tensor([50])}
        with torch.no_grad():
            generator.generate([model], {"net_input": warm})
            start = time.perf_counter()
            hypos = generator.generate([model], {"net_input": net_input})
            elapsed = time.perf_counter() - start
        lengths = [len(h[0]["tokens"]) for h in hypos]
        result.update(seconds_per_summary=elapsed / len(hypos), summary_tokens=statistics.mean(lengths))
    return result


# ---------------------------------------------------------------------------------------------- driver
def run_worker(args, model: str, length: int, phase: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", phase, "--model", model, "--length", str(length),
           "--work", str(args.work), "--steps", str(args.steps), "--beam", str(args.beam),
           "--summary-len", str(args.summary_len)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    print(f"+ {model} {length} tokens: {phase}", file=sys.stderr, flush=True)
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, cwd=ROOT)
    out, err = process.communicate()
    if process.returncode:
        fail(f"{model} {length} {phase} failed ({process.returncode}):\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_mb"] = result.pop("peak_mb_self")
    return result


def table(results, lengths, models) -> str:
    lines = ["| input tokens | model | train s/step | train peak MB | decode s/summary | decode peak MB | idle MB |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for length in lengths:
        for model in models:
            train, decode = results[(model, length, "train")], results[(model, length, "decode")]
            lines.append(f"| {length} | {model} | {train['seconds_per_step']:.2f} | {train['peak_mb']:.0f} | "
                         f"{decode['seconds_per_summary']:.2f} | {decode['peak_mb']:.0f} | {train['idle_mb']:.0f} |")
    return "\n".join(lines)


def growth(results, lengths, models) -> str:
    """Per model: each figure at the longest input over the shortest, against the length ratio."""
    first, last = lengths[0], lengths[-1]
    parts = [f"From {first} to {last} tokens (x{last / first:.1f} longer):"]
    for model in models:
        ratio = lambda phase, key: results[(model, last, phase)][key] / results[(model, first, phase)][key]  # noqa
        added = lambda phase, n: results[(model, n, phase)]["peak_mb"] - results[(model, n, "train")]["idle_mb"]  # noqa
        parts.append(f"- {model}: train time x{ratio('train', 'seconds_per_step'):.1f}, decode time "
                     f"x{ratio('decode', 'seconds_per_summary'):.1f}, memory added by a training step "
                     f"x{added('train', last) / max(added('train', first), 1e-9):.1f}, by decoding "
                     f"x{added('decode', last) / max(added('decode', first), 1e-9):.1f}")
    return "\n".join(parts)


def report_text(args, results, lengths, models, loads, seconds: float) -> str:
    """The report: the title, the command, commit and machine (records.made_header), the setup, the load average
    before and after (``loads``), the table and the growth lines."""
    return "\n".join([
        f"# dca_lstm and pgn_lstm against input length (scripts/bench/dca_scale.py, {time.strftime('%Y-%m-%d')})",
        "", *made_header("bench/dca_scale.py", args.argv), "",
        f"Batch of {BATCH} CNN/DM documents; sizes emb 128 (shared), hidden 256; dca_lstm: M = 3, K = 2; "
        f"decoding: beam {args.beam}, every summary {args.summary_len} tokens; {args.threads} thread(s) per "
        f"process; training time = median of {args.steps} steps after a warm-up.",
        f"Measured UNDER LOAD on a shared machine ({os.cpu_count()} CPUs; load average {loads[0][0]:.2f} "
        f"before, {loads[1][0]:.2f} after; {seconds:.0f} s in all): compare rows within this table only.",
        "", table(results, lengths, models), "", growth(results, lengths, models), "",
    ])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="400,800,1600,3000", help="input lengths in tokens")
    parser.add_argument("--models", default="dca_lstm,pgn_lstm", help=f"any of {', '.join(MODELS)}")
    parser.add_argument("--steps", type=int, default=2, help="timed training steps (after one warm-up step)")
    parser.add_argument("--beam", type=int, default=4, help="beam size (configs/cnndm_small.conf: 4)")
    parser.add_argument("--summary-len", type=int, default=100, help="tokens per decoded summary (fixed)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                        help="torch threads per worker (default: OMP_NUM_THREADS, else 1)")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "dca_scale", help="working directory")
    parser.add_argument("--out", type=Path, help="also write the report here (default: WORK/dca_scale.md)")
    parser.add_argument("--worker", choices=["train", "decode"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.work = args.work.resolve()
    args.argv = sys.argv[1:] if argv is None else argv
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        result = worker(args)
        import resource

        result["peak_mb_self"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        print(json.dumps(result))
        return
    lengths = [int(n) for n in args.lengths.split(",")]
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        fail(f"--models: unknown {', '.join(unknown)} (choose from {', '.join(MODELS)})")
    load_before = os.getloadavg()
    started = time.time()
    prepare(args.work, lengths)
    results = {}
    for length in lengths:
        for model in models:
            for phase in ("train", "decode"):
                results[(model, length, phase)] = run_worker(args, model, length, phase)
    report = report_text(args, results, lengths, models, (load_before, os.getloadavg()), time.time() - started)
    print(report)
    out = args.out or args.work / "dca_scale.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

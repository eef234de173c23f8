#!/usr/bin/env python
"""Throughput, peak memory and hardware utilisation: pgn_lstm (copy + coverage) against fairseq's built-in
``lstm`` and, with --peers onmt, against OpenNMT-py 3.5.1 (plain attention; copy + coverage), side by side.

One invocation trains every model on the same data with the same sizes, seed, tokens per batch and number of
updates, decodes the same N sentences with each (same beam, maximum length and batch size), with and without
trigram blocking, for fixed-length and for the models' own lengths, and prints:

- the machine: CPU model, caches, thread count, and the fp32 matrix-multiply peak measured with torch
  (machine.py), before and after the runs;
- training: target tokens/s (fairseq's ``wps`` / OpenNMT-py's target "tok/s" of the logged intervals after the
  first, warm-up one), the model's FLOPs per target token counted analytically (flops.py), achieved GFLOP/s,
  model FLOPs utilisation (MFU = achieved / measured peak), peak resident memory, and the ratio to pgn_lstm;
- decoding: sentences/s of the search alone (fairseq-generate's "Translated N sentences ... (X sentences/s";
  OpenNMT-py through peers/onmt_decode.py, timed the same way), with and without blocking, the mean
  hypothesis length (with </s>), the percentage of repeated trigrams in the hypotheses, peak memory, and the
  ratio to pgn_lstm.  Fixed length (--min-len = --max-len-b: every hypothesis of every model has the same
  length, so the ratio compares the same number of decoding steps) and the models' own lengths (--min-len 1);
- the targets, met or missed.

Blocking: pgn_lstm and the --all-models rows use the project's ``--block-ngram-repeat N`` (--task
summarization's generator).  ``lstm`` is decoded as fairseq ships it (``--task translation``, fairseq's
SequenceGenerator) and blocks with fairseq's own ``--no-repeat-ngram-size N``, which blocks nothing on a CPU in
fairseq 0.12.x (its NGramRepeatBlock reads the pad-filled token buffer; fairseq issue 5206): its repeated-trigram
column shows it.  OpenNMT-py blocks with ``-block_ngram_repeat N``.

Peak memory: the kernel's peak resident set (os.wait4's rusage) of each training and decoding process; every
toolkit runs with no data-loader worker process.  On a GPU this is host memory only.

    python scripts/bench/throughput.py [--updates 60] [--max-tokens 4000] [--decode-sentences 200]
        [--beam 5] [--max-len-b 40] [--lengths fixed,own | --min-len N] [--block-ngram-repeat 3]
        [--batch-size 32] [--repeats N] [--peers onmt] [--onmt-hidden 512|256] [--all-models | --models A,B]
        [--rl [--rl-batches 10] [--rl-checkpoint FILE]] [--quantize int8 [--quantize-checkpoint FILE]]
        [--device auto|cpu|cuda] [--work runs/bench] [--data-bin DIR] [--decode-subset SPLIT] [--json FILE]

--repeats N trains and decodes every model N times, the models taking turns, and reports medians (a single
60-update run on a virtual machine varies by about 10%).  --peers onmt installs OpenNMT-py into WORK/peers/onmt
(peers/onmt.py says exactly what and why) or skips its rows with the reason.

--all-models adds three rows, trained and decoded like pgn_lstm (same sizes: the SIZES options override the
presets' own sizes), each with its analytic FLOP count:
  * ``pgn_lstm_a512``: pgn_lstm with See et al.'s attention size 2 x 256 (reported, no target);
  * ``pgn_lstm_paulus2017``: Paulus et al.'s options (intra-temporal and intra-decoder attention, readout
    [h; c^e; c^d], tied output matrix, copy, no coverage, no input feeding).  Target: its training words/s at
    least 0.8 x pgn_lstm's (copy + coverage);
  * ``dca_lstm``: deep communicating agents, M = 3 agents split at the sentence ends (the default
    --agent-boundaries: the full-width stops of the LCSTS characters), K = 2 contextual layers, agent states
    and decoder 256, trained with semantic_cohesion (lambda 0.1).  Its ratio to pgn_lstm is printed without a
    target (its speed target is the scale table of dca_scale.py).
--models A,B runs exactly these fairseq rows instead (pgn_lstm, the reference of every ratio, is best kept);
``pgn_lstm_modules`` is pgn_lstm with --no-fused-steps (its decoder module by module, modules/fused_steps.py's
"before").

--rl adds the RL row, measured after the other rows and in this process: one self_critical_rouge
update against one ML update of pgn_lstm (focal_copy_coverage with alpha 1, gamma 0: See et al.'s NLL +
coverage), the same model from the pgn_lstm row's checkpoint_last.pt (or --rl-checkpoint) on the same first
--rl-batches training batches, taking turns batch by batch, --repeats timed rounds after a warm-up round
(scripts/bench/reward_speed.py's ``compare_update_speed``).  It prints summaries/s and updates/s of both, where an
RL update's time goes (decoding y^s and y^g, the reward, the ML and the sample's forward passes, backward + Adam
step) and the target: an RL update costs at most 2 x an ML update.  RL samples are at most --max-len-b
tokens; a checkpoint of a few dozen updates samples longer summaries than a trained one, so --rl-checkpoint with
a trained model gives the realistic figure.  It is a flag of its own, not part of --all-models: it is no model
row (in-process, another measurement, other columns), runs on the CPU only, and needs pgn_lstm's checkpoint.

--quantize int8 adds the int8 rows, measured after the other rows: pgn_lstm's checkpoint (the
pgn_lstm row's checkpoint_last.pt, or --quantize-checkpoint, e.g. a model trained with configs/lcsts_char.conf on
the --data-bin it was trained on) decodes the same sentences with fp32 and with ``generate.sh --quantize int8``'s
command (``python -m fairseq_plugins.cli.quantize int8 fairseq-generate``), taking turns, --repeats rounds, the same
beam, lengths, batch size and threads, on the CPU.  It prints both sentences/s (medians), their ratio against
the target (int8 at least 1.4 x fp32), the share of identical hypotheses and both peak memories.  With
--quantize-checkpoint, ``--models none`` skips the training rows.  ROUGE of both: ``generate.sh --score`` and
``generate.sh --score --quantize int8`` (docs/results/quantize_int8.md).

Default data: LCSTS PART_II from ../shared/data (Chinese characters; research use only, so it is read from
there and never shipped), prepared once into WORK/lcsts_char with the project's pipeline; its valid split is
decoded.  --data-bin uses any binarized data of the project instead (its test split if it has one; OpenNMT-py
needs the LCSTS preparation).  The number of threads is torch's default unless OMP_NUM_THREADS is set; every
model, and the peak measurement, runs with the same.  On a machine busy with other jobs the figures mean
little: run on an idle one.
"""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flops import DCA_AGENTS, DCA_LAYERS, batch_count, dataset_lengths, model_flops  # noqa: E402
from machine import cache_sizes, describe_machine, matmul_peak  # noqa: E402
from peers import onmt  # noqa: E402
from reward_speed import RL_TARGET  # noqa: E402  (an RL update costs at most 2 x an ML update)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))
from corpora import LCSTS, lcsts_convert, require  # noqa: E402

# emb 128, bidirectional encoder 2 x 256, decoder 256, one layer each, same dropout.
SIZES = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-hidden-size", "256",
         "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256", "--dropout", "0.1"]
MODELS = {
    "lstm": ["--arch", "lstm", "--encoder-bidirectional", "--criterion", "cross_entropy"],
    "pgn_lstm": ["--arch", "pgn_lstm", "--criterion", "focal_copy_coverage"],  # attention size 256 (default)
    # the same model with its decoder run module by module (--no-fused-steps): what the fused recurrence gains
    "pgn_lstm_modules": ["--arch", "pgn_lstm", "--no-fused-steps", "--criterion", "focal_copy_coverage"],
    # See et al.'s attention size, 2 x 256 (pgn_lstm_see2017 uses it): reported, not the target
    "pgn_lstm_a512": ["--arch", "pgn_lstm", "--attention-dim", "512", "--criterion", "focal_copy_coverage"],
    # Paulus et al.: the preset's options (intra-temporal and intra-decoder attention, readout
    # [h; c^e; c^d], tied output matrix, copy, no coverage, no input feeding) at SIZES, which override the
    # preset's sizes; the same criterion as pgn_lstm, whose coverage term is 0 without coverage
    "pgn_lstm_paulus2017": ["--arch", "pgn_lstm_paulus2017", "--criterion", "focal_copy_coverage",
                            "--coverage-lambda", "0"],
    # Celikyilmaz et al.: M agents split at sentence ends (the default --agent-boundaries, which hold
    # the full-width stops of the LCSTS characters), K contextual layers, agent states 256 (SIZES' encoder
    # hidden size), with its own criterion (configs/dca_cnndm.conf's lambda)
    "dca_lstm": ["--arch", "dca_lstm", "--num-agents", str(DCA_AGENTS), "--contextual-layers", str(DCA_LAYERS),
                 "--criterion", "semantic_cohesion", "--cohesion-lambda", "0.1", "--coverage-lambda", "0"],
}
STOCK = ("lstm",)  # decoded as fairseq ships it: --task translation, fairseq's generator and blocking
REFERENCE = "pgn_lstm"
TARGETS = ("lstm", "pgn_lstm")
ALL_MODELS = ("pgn_lstm_a512", "pgn_lstm_paulus2017", "dca_lstm")  # the rows --all-models adds
ROW_ORDER = ("onmt", "onmt_copy_cov", "lstm", "pgn_lstm", "pgn_lstm_modules", "pgn_lstm_a512", "pgn_lstm_paulus2017",
             "dca_lstm")
PAULUS_TARGET = 0.8  # training words/s of pgn_lstm_paulus2017 >= 0.8 x pgn_lstm's
QUANTIZE_TARGET = 1.4  # beam-search sentences/s of the int8 decoder >= 1.4 x fp32's
# The RL row's ML criterion, both sides (reward_speed.compare_update_speed): See et al.'s NLL + coverage
RL_ML_ARGS = ["--focal-alpha", "1", "--focal-gamma", "0"]
LENGTHS = {"fixed": "fixed length", "own": "the models' own lengths"}
TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in [\d.]+s "
                        r"\(([\d.]+) sentences/s, ([\d.]+) tokens/s\)")
HYPOTHESIS = re.compile(r"^H-\d+\t\S+\t(.*)$", re.M)
NUMBERED_HYPOTHESIS = re.compile(r"^H-(\d+)\t\S+\t(.*)$", re.M)


def fail(message: str):
    sys.exit(f"throughput: {message}")


def run(cmd, **kwargs):
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def run_measured(cmd, log: Path):
    """Run CMD with its output in LOG; returns (output, wall seconds, peak RSS of the process in MB)."""
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    start = time.time()
    with log.open("w") as out:
        process = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own resource usage, peak RSS included
    elapsed = time.time() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text(errors="replace")
    if process.returncode != 0:
        fail(f"{Path(str(cmd[0])).name} failed ({process.returncode}), log {log}:\n{output[-3000:]}")
    kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024  # Linux: KiB, macOS: bytes
    return output, elapsed, kib / 1024


# ---------------------------------------------------------------------------------------------- data
def prepare_lcsts(work: Path, bin_dir: Path) -> None:
    """Convert and binarize LCSTS PART_II (characters) unless already done."""
    if (bin_dir / "train.src-tgt.src.bin").exists():
        return
    require(LCSTS, fail, hint=", or give --data-bin")
    raw = work / "raw"
    for split, name in (("train", "train"), ("valid", "val")):
        run(lcsts_convert(f"{name}.tsv", raw / split))
    prepared = work / "prepared"
    run(["summ-prepare", "--raw-dir", raw, "--out-dir", prepared, "--lang", "zh", "--unit", "char",
         "--vocab-size", "4000", "--max-source-len", "150", "--max-target-len", "40", "--splits", "train,valid"])
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--srcdict", prepared / "dict.txt", "--trainpref", prepared / "tok" / "train",
         "--validpref", prepared / "tok" / "valid", "--destdir", bin_dir, "--workers", "2"])


def make_decode_subset(bin_dir: Path, split: str, count: int, out_dir: Path) -> int:
    """The first COUNT sentence pairs of BIN_DIR's SPLIT, binarized as OUT_DIR's test split (same dictionaries).
    Returns how many there are."""
    from fairseq.data import Dictionary, data_utils, indexed_dataset

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    sizes = []
    for lang in ("src", "tgt"):
        shutil.copy(bin_dir / f"dict.{lang}.txt", out_dir / f"dict.{lang}.txt")
        dictionary = Dictionary.load(str(bin_dir / f"dict.{lang}.txt"))
        dataset = data_utils.load_indexed_dataset(str(bin_dir / f"{split}.src-tgt.{lang}"), dictionary)
        if dataset is None:
            fail(f"no {split} split in {bin_dir} (files {split}.src-tgt.{lang}.*)")
        prefix = str(out_dir / f"test.src-tgt.{lang}")
        builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=len(dictionary))
        sizes.append(min(count, len(dataset)))
        for index in range(sizes[-1]):
            builder.add_item(dataset[index])
        builder.finalize(prefix + ".idx")
    return min(sizes)


def repeated_trigram_percent(hypotheses) -> float:
    """Percent of all trigrams of the hypotheses (token lists) that repeat an earlier trigram of the same one."""
    repeated = total = 0
    for tokens in hypotheses:
        grams = [tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)]
        repeated += len(grams) - len(set(grams))
        total += len(grams)
    return 100.0 * repeated / max(total, 1)


# ---------------------------------------------------------------------------------------------- fairseq rows
def device_flags(device: str) -> list:
    return ["--cpu"] if device == "cpu" else []


def fairseq_train_command(name: str, args, bin_dir: Path, save_dir: Path) -> list:
    return ["fairseq-train", bin_dir, "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
            *MODELS[name], *SIZES, "--optimizer", "adam", "--lr", "0.001", "--clip-norm", "2.0",
            "--max-tokens", args.max_tokens, "--max-update", args.updates, "--seed", "1",
            "--disable-validation", "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple",
            "--log-interval", args.log_interval, "--num-workers", "0", *device_flags(args.device)]


def blocking_flags(name: str, n: int) -> list:
    """The blocking option each fairseq row is decoded with: fairseq's own for the stock ``lstm``, the
    project's for its models."""
    if not n:
        return []
    return ["--no-repeat-ngram-size", n] if name in STOCK else ["--block-ngram-repeat", n]


def fairseq_decode_command(name: str, args, subset_dir: Path, save_dir: Path, min_len: int, block: int,
                           checkpoint: Path = None) -> list:
    """fairseq-generate for one decode row (hypotheses printed: their trigrams are counted; printing is not
    inside the timed search), of ``checkpoint`` (default: SAVE_DIR/checkpoint_last.pt).  The stock ``lstm``
    runs fairseq's translation task (batch-size multiple 1, so that no sentence is dropped)."""
    task = (["--task", "translation", "-s", "src", "-t", "tgt", "--required-batch-size-multiple", "1"]
            if name in STOCK else ["--task", "summarization"])
    return ["fairseq-generate", subset_dir, "--user-dir", ROOT / "fairseq_plugins", *task,
            "--path", checkpoint or save_dir / "checkpoint_last.pt", "--gen-subset", "test", "--beam", args.beam,
            "--max-len-a", "0", "--max-len-b", args.max_len_b, "--min-len", min_len,
            "--batch-size", args.batch_size, "--num-workers", "0", *blocking_flags(name, block),
            *device_flags(args.device)]


def train_fairseq(name: str, args, bin_dir: Path, save_dir: Path) -> dict:
    if save_dir.exists():
        shutil.rmtree(save_dir)  # fairseq-train would resume from an old checkpoint_last.pt
    save_dir.mkdir(parents=True)
    output, elapsed, peak_mb = run_measured(fairseq_train_command(name, args, bin_dir, save_dir),
                                            save_dir / "train.log")
    wps = [float(m) for m in re.findall(r"train_inner .* wps=([\d.]+)", output)]
    if len(wps) < 2:
        fail(f"too few logged intervals for {name} (need 2): raise --updates or lower --log-interval\n"
             f"{output[-2000:]}")
    if not (save_dir / "checkpoint_last.pt").exists():
        fail(f"{name}: no checkpoint_last.pt in {save_dir}")
    return {"train_wps": statistics.mean(wps[1:]), "train_wall_s": elapsed, "train_peak_mb": peak_mb}


def parse_generate(name: str, output: str) -> dict:
    found = TRANSLATED.search(output)
    if not found:
        fail(f"no 'Translated N sentences' line from fairseq-generate for {name}\n{output[-2000:]}")
    sentences, tokens = (int(found.group(k).replace(",", "")) for k in (1, 2))
    hypotheses = [line.split() for line in HYPOTHESIS.findall(output)]
    return {"decode_sentences": sentences, "decode_sent_per_s": float(found.group(3)),
            "decode_tok_per_s": float(found.group(4)), "hyp_len": tokens / max(sentences, 1),
            "rep3": repeated_trigram_percent(hypotheses)}


def decode_fairseq(name: str, args, subset_dir: Path, save_dir: Path, mode: str, block: int) -> dict:
    log = save_dir / f"decode_{mode}{'_blocked' if block else ''}.log"
    output, elapsed, peak_mb = run_measured(
        fairseq_decode_command(name, args, subset_dir, save_dir, args.modes[mode], block), log)
    return {**parse_generate(name, output), "decode_wall_s": elapsed, "decode_peak_mb": peak_mb}


# ---------------------------------------------------------------------------------------------- OpenNMT-py rows
class OnmtRows:
    """Trains and decodes the OpenNMT-py rows (peers/onmt.py has the install, commands and log formats)."""

    def __init__(self, args, work: Path, decode_sentences: int):
        if args.data_bin is not None:
            raise onmt.PeerUnavailable("OpenNMT-py rows need the LCSTS preparation (no --data-bin)")
        if args.device != "cpu":
            raise onmt.PeerUnavailable("the OpenNMT-py rows are written for --device cpu (its -gpu options are not "
                                       "passed)")
        self.args = args
        self.python = onmt.ensure_venv(work)
        self.data = onmt.prepare_text(work / "lcsts_char" / "prepared", work / "peers" / "onmt" / "data",
                                      decode_sentences)
        self.config = onmt.write_config(work / "peers" / "onmt" / "data" / "corpus.yaml",
                                        self.data["train.src"], self.data["train.tgt"])
        self.train_documents = sum(1 for _ in self.data["train.src"].open(encoding="utf-8"))
        self.vocab = None  # the output layer's size, read from the first training log

    def train(self, name: str, save_dir: Path) -> dict:
        if save_dir.exists():
            shutil.rmtree(save_dir)
        save_dir.mkdir(parents=True)
        args = self.args
        cmd = onmt.train_command(self.python, name, self.config, self.data["vocab.txt"],
                                 self.data["regular_words"] + 4, save_dir / "model", args.updates, args.max_tokens,
                                 args.log_interval, self.train_documents, hidden=args.onmt_hidden)
        output, elapsed, peak_mb = run_measured(cmd, save_dir / "train.log")
        try:
            tok_s = onmt.train_tokens_per_second(output)
        except ValueError as error:
            fail(f"{name}: {error}\n{output[-2000:]}")
        self.vocab = onmt.vocab_size(output) or self.vocab
        if not onmt.checkpoint_path(save_dir / "model", args.updates).exists():
            fail(f"{name}: no checkpoint {onmt.checkpoint_path(save_dir / 'model', args.updates)}")
        return {"train_wps": tok_s, "train_wall_s": elapsed, "train_peak_mb": peak_mb}

    def decode(self, name: str, save_dir: Path, mode: str, block: int) -> dict:
        args = self.args
        suffix = f"{mode}{'_blocked' if block else ''}"
        cmd = onmt.decode_command(self.python, onmt.checkpoint_path(save_dir / "model", args.updates),
                                  self.data["decode.src"], save_dir / f"hyp_{suffix}.txt", args.beam,
                                  args.max_len_b, args.modes[mode], args.batch_size, block)
        output, elapsed, peak_mb = run_measured(cmd, save_dir / f"decode_{suffix}.log")
        try:
            figures = onmt.parse_decode(output)
        except ValueError as error:
            fail(f"{name}: {error}\n{output[-2000:]}")
        hypotheses = [line.split() for line in
                      (save_dir / f"hyp_{suffix}.txt").read_text(encoding="utf-8").splitlines()]
        return {**figures, "rep3": repeated_trigram_percent(hypotheses), "decode_wall_s": elapsed,
                "decode_peak_mb": peak_mb}


# ---------------------------------------------------------------------------------------------- RL row
def rl_call(args, bin_dir: Path) -> dict:
    """The keyword arguments of reward_speed.compare_update_speed for the RL row: pgn_lstm at the benchmark's
    sizes from the pgn_lstm row's last checkpoint (or --rl-checkpoint), RL samples as long as the decode rows'
    summaries at most, See et al.'s NLL + coverage as the ML loss on both sides, --rl-batches batches of
    --max-tokens, --repeats timed rounds."""
    checkpoint = args.rl_checkpoint or args.work / "models" / REFERENCE / "checkpoint_last.pt"
    return dict(data_bin=bin_dir, arch="pgn_lstm", checkpoint=checkpoint, extra=[str(x) for x in SIZES],
                rl_args=["--rl-max-len-b", str(args.max_len_b)], ml_args=list(RL_ML_ARGS), batches=args.rl_batches,
                rounds=args.repeats, max_tokens=args.max_tokens)


def measure_rl(args, bin_dir: Path) -> dict:
    """The RL row's figures: compare_update_speed's dict, with the checkpoint and maximum length it ran with."""
    from reward_speed import compare_update_speed

    call = rl_call(args, bin_dir)
    if not Path(call["checkpoint"]).is_file():
        fail(f"--rl: no checkpoint {call['checkpoint']}")
    print(f"+ RL row: compare_update_speed({', '.join(f'{k}={v}' for k, v in call.items())})", file=sys.stderr,
          flush=True)
    result = compare_update_speed(**call)
    return dict(result, checkpoint=str(call["checkpoint"]), max_len_b=args.max_len_b)


# ---------------------------------------------------------------------------------------------- int8 rows
def quantize_checkpoint(args) -> Path:
    return args.quantize_checkpoint or args.work / "models" / REFERENCE / "checkpoint_last.pt"


def hypotheses_by_id(output: str) -> dict:
    return {int(i): text for i, text in NUMBERED_HYPOTHESIS.findall(output)}


def measure_quantize(args, subset_dir: Path) -> dict:
    """The int8 rows: the checkpoint decoded in fp32 and in int8 (fairseq_plugins/inference/quantize.py), taking
    turns, --repeats rounds per length mode.  Per mode: each scheme's median sentences/s and its runs, peak MB,
    mean hypothesis length, and the percentage of sentences whose int8 hypothesis equals the fp32 one."""
    checkpoint = quantize_checkpoint(args)
    if not checkpoint.is_file():
        fail(f"--quantize: no checkpoint {checkpoint}")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    logs = args.work / "quantize"
    logs.mkdir(parents=True, exist_ok=True)
    schemes = ("fp32", args.quantize)
    modes = {}
    load_before = os.getloadavg()[0]  # other jobs on the cores: the figures are only comparable in turns
    for mode, min_len in args.modes.items():
        runs = {scheme: [] for scheme in schemes}
        hypotheses = {}
        for round_ in range(args.repeats):  # fp32 and int8 in turns: a drifting machine affects both alike
            for scheme in schemes:
                cmd = fairseq_decode_command(REFERENCE, args, subset_dir, checkpoint.parent, min_len, 0, checkpoint)
                if scheme != "fp32":
                    cmd = ["python", "-m", "fairseq_plugins.cli.quantize", scheme, *cmd]
                output, _, peak_mb = run_measured(cmd, logs / f"{mode}_{scheme}_{round_}.log")
                runs[scheme].append(dict(parse_generate(scheme, output), decode_peak_mb=peak_mb))
                hypotheses[scheme] = hypotheses_by_id(output)
        same = sum(hypotheses["fp32"].get(i) == text for i, text in hypotheses[args.quantize].items())
        modes[mode] = {scheme: dict(median_decode(scheme_runs), sent_per_s_runs=[
            r["decode_sent_per_s"] for r in scheme_runs]) for scheme, scheme_runs in runs.items()}
        modes[mode]["same_hypotheses_percent"] = 100.0 * same / max(len(hypotheses["fp32"]), 1)
        modes[mode]["ratio"] = (modes[mode][args.quantize]["decode_sent_per_s"]
                                / modes[mode]["fp32"]["decode_sent_per_s"])
    return {"checkpoint": str(checkpoint), "scheme": args.quantize, "modes": modes,
            "load_average": [load_before, os.getloadavg()[0]]}


def median_decode(runs: list) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def quantize_lines(quantized: dict, args, split: str, sentences: int) -> list:
    """The int8 rows of the report: per length mode, fp32 and int8 side by side, and the int8 target."""
    scheme = quantized["scheme"]
    lines = ["", f"int8 decoder (--quantize {scheme}): {quantized['checkpoint']}, the first {sentences} sentences of "
                 f"{split}, beam {args.beam}, --max-len-b {args.max_len_b}, --batch-size {args.batch_size}, on the "
                 f"CPU; fp32 and {scheme} in turns, medians of {args.repeats} round(s); load average "
                 f"{quantized['load_average'][0]:.1f} before, {quantized['load_average'][1]:.1f} after",
             f"{'lengths':<36} {'fp32 sent/s':>12} {scheme + ' sent/s':>12} {scheme + ' / fp32':>12} "
             f"{'same hyps %':>12} {'hyp len fp32':>13} {scheme:>5} {'peak MB fp32':>13} {scheme:>6}"]
    for mode, figures in quantized["modes"].items():
        fp32, q = figures["fp32"], figures[scheme]
        lines.append(f"{LENGTHS[mode] + f' (--min-len {args.modes[mode]})':<36} {fp32['decode_sent_per_s']:>12.2f} "
                     f"{q['decode_sent_per_s']:>12.2f} {figures['ratio']:>12.2f} "
                     f"{figures['same_hypotheses_percent']:>12.1f} {fp32['hyp_len']:>13.1f} {q['hyp_len']:>5.1f} "
                     f"{fp32['decode_peak_mb']:>13.1f} {q['decode_peak_mb']:>6.1f}")
    for mode, figures in quantized["modes"].items():
        lines.append(f"{mode}: sent/s per round, fp32 "
                     + ", ".join(f"{x:.2f}" for x in figures["fp32"]["sent_per_s_runs"])
                     + f"; {scheme} " + ", ".join(f"{x:.2f}" for x in figures[scheme]["sent_per_s_runs"]))
    lines += [ratio_line(f"ratio {scheme} / fp32, beam-{args.beam} decode sentences/s, {mode}", figures["ratio"],
                         QUANTIZE_TARGET) for mode, figures in quantized["modes"].items()]
    return lines


# ---------------------------------------------------------------------------------------------- FLOPs
def add_utilisation(results: dict, counts: dict, pairs, batches: int, peak_gflops: float,
                    peak_bf16_gflops: float = None) -> None:
    """Each row's MFLOP per target token, achieved GFLOP/s, MFU (and against the bf16 peak, when measured) and
    its analytic work's shares by term."""
    for name, row in results.items():
        per_token = counts[name].per_target_token(pairs, batches)
        row["train_mflop_per_token"] = per_token / 1e6
        row["train_gflops"] = per_token * row["train_wps"] / 1e9
        row["train_mfu"] = row["train_gflops"] / peak_gflops
        if peak_bf16_gflops:
            row["train_mfu_bf16"] = row["train_gflops"] / peak_bf16_gflops
        row["train_flop_shares"] = counts[name].shares(pairs, batches)


# ---------------------------------------------------------------------------------------------- report
def decode_key(mode: str, blocked: bool, field: str) -> str:
    return f"{mode}{'_blocked' if blocked else ''}_{field}"


def median_run(runs: list) -> dict:
    """Per figure, the median over the repeated runs of one model (and the runs' tokens/s and sentences/s)."""
    merged = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    merged["train_wps_runs"] = [run["train_wps"] for run in runs]
    for key in [k for k in runs[0] if k.endswith("decode_sent_per_s")]:
        merged[f"{key}_runs"] = [run[key] for run in runs]
    return merged


def ratio_line(label: str, value: float, target: float = None, at_most: bool = False) -> str:
    line = f"{label}: {value:.2f}"
    if target is not None:
        met = value <= target if at_most else value >= target
        line += f" (target {'<=' if at_most else '>='} {target:g}: {'met' if met else 'MISSED'})"
    return line


def size_lines(results: dict, args) -> list:
    """What the rows are: their sizes and, for the --all-models rows, their options."""
    lines = ["sizes: emb 128, BiLSTM encoder 2 x 256, decoder 256, attention 256 (pgn_lstm_a512: 512)"]
    if any(n.startswith("onmt") for n in results):
        lines[0] += (f"; OpenNMT-py: encoder 2 x {args.onmt_hidden // 2}, decoder and attention {args.onmt_hidden} "
                     f"(its decoder must be the encoder state's size)")
    if "pgn_lstm_paulus2017" in results:
        lines.append("pgn_lstm_paulus2017: the same encoder and decoder; bilinear intra-temporal (256 x 512) and "
                     "intra-decoder (256 x 256) attentions, readout [h; c^e; c^d] of 1024 through the tied output "
                     "matrix tanh(W_emb W_proj), copy, no coverage, no input feeding")
    if "dca_lstm" in results:
        lines.append(f"dca_lstm: {DCA_AGENTS} agents split at sentence ends (default --agent-boundaries), 1 local + "
                     f"{DCA_LAYERS} contextual BiLSTM layers of 2 x 256 projected to 256, decoder 256, attention 256, "
                     f"contextual agent attention, multi-agent pointer; semantic_cohesion, lambda 0.1")
    return lines


def rl_lines(rl: dict) -> list:
    """The RL row: an RL update against an ML update of pgn_lstm, from compare_update_speed's dict."""
    lines = ["", f"RL (--rl): pgn_lstm from {rl['checkpoint']}, self_critical_rouge (--rl-max-len-b "
                 f"{rl['max_len_b']}) against its ML criterion focal_copy_coverage ({' '.join(RL_ML_ARGS)}), the "
                 f"same first {rl['batches']} training batches x {rl['rounds']} round(s) after a warm-up round, "
                 f"taking turns batch by batch, in one process on the CPU",
             f"{'criterion':<20} {'updates/s':>10} {'summaries/s':>12} {'target words/s':>15} {'s/update':>9}"]
    for key, label in (("ml", "focal_copy_coverage"), ("rl", "self_critical_rouge")):
        r = rl[key]
        lines.append(f"{label:<20} {r['updates_per_s']:>10.2f} {r['summaries_per_s']:>12.1f} "
                     f"{r['target_words_per_s']:>15.0f} {1 / r['updates_per_s']:>9.3f}")
    seconds = 1 / rl["rl"]["updates_per_s"]
    phases = dict(rl["rl_phases"])
    phases["other"] = max(seconds - sum(phases.values()), 0.0)
    lines.append("an RL update's time: " + ", ".join(f"{key} {1000 * value:.0f} ms ({100 * value / seconds:.0f}%)"
                                                     for key, value in phases.items()))
    lines.append(f"mean summary tokens: sample y^s {rl['sample_len']:.1f}, greedy y^g {rl['greedy_len']:.1f}, "
                 f"reference {rl['reference_len']:.1f}")
    if rl["sample_len"] > 1.2 * rl["reference_len"]:
        lines.append("the samples are longer than the references (a briefly trained checkpoint): decoding weighs "
                     "more than it would from a trained one (--rl-checkpoint)")
    return lines


def report(results: dict, args, bin_dir: Path, split: str, sentences: int, machine: dict, notes: list,
           rl: dict = None) -> str:
    ref = results.get(REFERENCE)
    width = max([14] + [len(name) for name in results])  # the model column
    lines = [
        machine["description"],
        f"caches: {machine['caches']}",
        f"fp32 matmul peak: {machine['peak_gflops']:.1f} GFLOP/s (best of n = "
        f"{', '.join(map(str, machine['peak_sizes']))}; {machine['peak_before']:.1f} before the runs, "
        f"{machine['peak_after']:.1f} after)"
        + (f"; bf16 matmul peak {machine['peak_bf16_gflops']:.1f} GFLOP/s" if "peak_bf16_gflops" in machine else ""),
        f"data {bin_dir}; medians of {args.repeats} run(s) per model, the models taking turns",
        *size_lines(results, args),
        *notes,
        "",
        f"training: {args.updates} updates, --max-tokens {args.max_tokens} (OpenNMT-py: -batch_type tokens "
        f"-batch_size {args.max_tokens}); MFLOP/tok: analytic model FLOPs per target token, forward + backward "
        f"(flops.py)",
        f"{'model':<{width}} {'train tok/s':>12} {'MFLOP/tok':>10} {'GFLOP/s':>8} {'MFU %':>6} {'peak MB':>8} "
        f"{'tok/s / ' + REFERENCE:>17}",
    ]
    for name, r in results.items():
        lines.append(f"{name:<{width}} {r['train_wps']:>12.1f} {r['train_mflop_per_token']:>10.2f} "
                     f"{r['train_gflops']:>8.2f} {100 * r['train_mfu']:>6.1f} {r['train_peak_mb']:>8.1f} "
                     f"{r['train_wps'] / ref['train_wps'] if ref else float('nan'):>17.2f}")
    if any("train_mfu_bf16" in r for r in results.values()):
        lines.append("MFU against the bf16 matmul peak, percent: " + ", ".join(
            f"{name} {100 * r['train_mfu_bf16']:.2f}" for name, r in results.items()))
    shares = {name: r["train_flop_shares"] for name, r in results.items() if r.get("train_flop_shares")}
    if shares:
        lines += ["", "analytic work by term (share of a training update's FLOPs, the four largest):"]
        for name, parts in shares.items():
            top = list(parts.items())[:4]
            lines.append(f"{name:<{width}} " + ", ".join(f"{part} {100 * share:.0f}%" for part, share in top))
    for mode in args.modes:
        min_len = args.modes[mode]
        blocked_too = args.block_ngram_repeat > 0
        lines += ["", f"decoding, {LENGTHS[mode]}: the first {sentences} sentences of {split}, beam {args.beam}, "
                      f"--max-len-b {args.max_len_b}, --min-len {min_len}, --batch-size {args.batch_size}"
                      + (f"; blocked: n-gram blocking n = {args.block_ngram_repeat}" if blocked_too else "")]
        header = f"{'model':<{width}} {'sent/s':>8} {'hyp len':>8} {'rep3 %':>7} {'peak MB':>8}"
        if blocked_too:
            header += f" {'blocked sent/s':>15} {'hyp len':>8} {'rep3 %':>7} {'cost %':>7}"
        header += f" {'sent/s / ' + REFERENCE:>18}"
        if blocked_too:
            header += f" {'blocked / ' + REFERENCE:>19}"
        lines.append(header)
        for name, r in results.items():
            off = lambda field: r[decode_key(mode, False, field)]  # noqa: E731
            row = (f"{name:<{width}} {off('decode_sent_per_s'):>8.2f} {off('hyp_len'):>8.1f} {off('rep3'):>7.1f} "
                   f"{off('decode_peak_mb'):>8.1f}")
            if blocked_too:
                on = lambda field: r.get(decode_key(mode, True, field), float("nan"))  # noqa: E731
                cost = 100 * (1 - on("decode_sent_per_s") / off("decode_sent_per_s"))
                row += (f" {on('decode_sent_per_s'):>15.2f} {on('hyp_len'):>8.1f} {on('rep3'):>7.1f} "
                        f"{cost:>7.1f}")
            ref_off = ref[decode_key(mode, False, "decode_sent_per_s")] if ref else float("nan")
            row += f" {off('decode_sent_per_s') / ref_off:>18.2f}"
            if blocked_too:
                ref_on = ref.get(decode_key(mode, True, "decode_sent_per_s"), float("nan")) if ref else float("nan")
                row += f" {on('decode_sent_per_s') / ref_on:>19.2f}"
            lines.append(row + (" *" if name in STOCK and blocked_too else ""))
        if blocked_too and any(name in STOCK for name in results):
            lines.append(f"* lstm is decoded by fairseq's own translation task and generator; its blocked run uses "
                         f"--no-repeat-ngram-size {args.block_ngram_repeat}, which blocks nothing on a CPU in "
                         f"fairseq 0.12.x (fairseq issue 5206): see its rep3 %")
    lines += ["", "peak MB: the process's peak resident memory; rep3 %: trigrams that repeat an earlier trigram of "
                  "the same hypothesis; cost %: decode speed lost to blocking"]
    if args.repeats > 1:
        lines.append("")
        for name, r in results.items():
            lines.append(f"{name}: train tok/s per run {', '.join(f'{x:.0f}' for x in r['train_wps_runs'])}")
    if rl:
        lines += rl_lines(rl)
    lines += [""] + targets(results, args, rl)
    return "\n".join(lines)


def targets(results: dict, args, rl: dict = None) -> list:
    """The ratio lines: the targets against OpenNMT-py and the hardware, of n-gram blocking, against
    fairseq's lstm, of Paulus et al.'s options, dca_lstm's ratio (no speed target here: its scale target is
    dca_scale.py's) and the RL update's."""
    lines = []
    if rl:
        lines.append(ratio_line(f"ratio self_critical_rouge / ML update of {REFERENCE}, seconds per update",
                                rl["ratio"], RL_TARGET, at_most=True))
    ref = results.get(REFERENCE)
    if ref is None:
        return lines
    if "pgn_lstm_paulus2017" in results:
        lines.append(ratio_line(f"ratio pgn_lstm_paulus2017 / {REFERENCE}, training words/s",
                                results["pgn_lstm_paulus2017"]["train_wps"] / ref["train_wps"], PAULUS_TARGET))
    if "dca_lstm" in results:
        lines.append(ratio_line(f"ratio dca_lstm / {REFERENCE}, training words/s (no target)",
                                results["dca_lstm"]["train_wps"] / ref["train_wps"]))
    blocked = args.block_ngram_repeat > 0

    def sent(name, mode, on):
        return results[name].get(decode_key(mode, on, "decode_sent_per_s"), float("nan"))

    if "onmt_copy_cov" in results:
        lines.append(ratio_line(f"ratio {REFERENCE} / onmt_copy_cov, training tokens/s",
                                ref["train_wps"] / results["onmt_copy_cov"]["train_wps"], 1.5))
        for mode in args.modes:
            if blocked:
                lines.append(ratio_line(f"ratio {REFERENCE} / onmt_copy_cov, decode sentences/s, {mode}, blocked",
                                        sent(REFERENCE, mode, True) / sent("onmt_copy_cov", mode, True), 1.5))
            lines.append(ratio_line(f"ratio {REFERENCE} / onmt_copy_cov, decode sentences/s, {mode}",
                                    sent(REFERENCE, mode, False) / sent("onmt_copy_cov", mode, False)))
    lines.append(ratio_line(f"MFU {REFERENCE} training, percent", 100 * ref["train_mfu"], 35))
    if blocked:
        for mode in args.modes:
            cost = 100 * (1 - sent(REFERENCE, mode, True) / sent(REFERENCE, mode, False))
            lines.append(ratio_line(f"blocking cost {REFERENCE}, {mode}, percent of decode speed", cost, 5,
                                    at_most=True))
            if "lstm" in results:
                lines.append(ratio_line(f"ratio {REFERENCE} blocked / lstm --no-repeat-ngram-size, decode "
                                        f"sentences/s, {mode}", sent(REFERENCE, mode, True) / sent("lstm", mode, True),
                                        2.0))
    if "lstm" in results:
        lines.append(ratio_line(f"ratio {REFERENCE} / lstm, training words/s",
                                ref["train_wps"] / results["lstm"]["train_wps"], 1.0))
        for mode in args.modes:
            lines.append(ratio_line(f"ratio {REFERENCE} / lstm, decode sentences/s, {mode}",
                                    sent(REFERENCE, mode, False) / sent("lstm", mode, False), 1.0))
        lines.append(ratio_line(f"ratio {REFERENCE} / lstm, training peak MB",
                                ref["train_peak_mb"] / results["lstm"]["train_peak_mb"]))
    return lines


# ---------------------------------------------------------------------------------------------- main
def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def project_blocking_available(bin_dir: Path) -> bool:
    """Whether --task summarization takes --block-ngram-repeat (parsed as fairseq-generate would)."""
    from fairseq import options

    import fairseq_plugins

    fairseq_plugins.register()  # imported before fairseq (machine.py), so --user-dir would not register it
    argv = [str(bin_dir), "--user-dir", str(ROOT / "fairseq_plugins"), "--task", "summarization",
            "--path", "unused.pt", "--block-ngram-repeat", "3"]
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            options.parse_args_and_arch(options.get_generation_parser(), argv)
        except SystemExit:
            return False
    return True


def decode_modes(args) -> dict:
    """Length settings to decode with: name -> --min-len."""
    if args.min_len is not None:
        return {"fixed" if args.min_len >= args.max_len_b else "own": args.min_len}
    modes = [m.strip() for m in args.lengths.split(",") if m.strip()]
    unknown = [m for m in modes if m not in LENGTHS]
    if unknown or not modes:
        fail(f"--lengths takes fixed and/or own, comma-separated; got {args.lengths!r}")
    return {m: args.max_len_b if m == "fixed" else 1 for m in modes}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=60, help="training updates per model")
    parser.add_argument("--max-tokens", type=int, default=4000, help="tokens per batch, every toolkit")
    parser.add_argument("--log-interval", type=int, help="default: updates/4, at most 10 (tok/s needs 2 intervals)")
    parser.add_argument("--decode-sentences", type=int, default=200, help="how many sentences to decode")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-len-b", type=int, default=40, help="maximum summary length (with --max-len-a 0)")
    parser.add_argument("--lengths", default="fixed,own",
                        help="fixed: --min-len = --max-len-b (same length for every model); own: --min-len 1")
    parser.add_argument("--min-len", type=int, help="decode with this --min-len only (instead of --lengths)")
    parser.add_argument("--block-ngram-repeat", type=int, default=3,
                        help="n of the blocked decoding runs (0: no blocked runs)")
    parser.add_argument("--batch-size", type=int, default=32, help="decoding batch size (sentences)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: cuda when torch sees a GPU, else cpu")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench")
    parser.add_argument("--data-bin", type=Path, help="use this binarized data instead of LCSTS")
    parser.add_argument("--decode-subset", help="split to decode from (default: test if present, else valid)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="train and decode each model this many times, in turns; medians are reported")
    parser.add_argument("--all-models", action="store_true",
                        help="also pgn_lstm with See et al.'s attention size 512 (pgn_lstm_a512), Paulus et al.'s "
                             "model (pgn_lstm_paulus2017) and deep communicating agents (dca_lstm)")
    parser.add_argument("--models", help=f"the fairseq rows to run instead, comma-separated, from {', '.join(MODELS)} "
                                         f"(default: lstm,pgn_lstm, and --all-models' rows; none: no training "
                                         f"rows, with --quantize-checkpoint)")
    parser.add_argument("--rl", action="store_true",
                        help="also the RL row: one self_critical_rouge update against one ML update of pgn_lstm, "
                             "from this run's pgn_lstm checkpoint (reward_speed.compare_update_speed)")
    parser.add_argument("--rl-batches", type=int, default=10, help="--rl: training batches per round")
    parser.add_argument("--rl-checkpoint", type=Path,
                        help="--rl: start from this pgn_lstm checkpoint (trained at the benchmark's sizes on the same "
                             "data) instead of the pgn_lstm row's checkpoint_last.pt")
    parser.add_argument("--quantize", choices=["int8"],
                        help="also the int8 rows: pgn_lstm's checkpoint decoded in fp32 and int8 in turns")
    parser.add_argument("--quantize-checkpoint", type=Path,
                        help="--quantize: decode this pgn_lstm checkpoint (trained on the data given by --data-bin) "
                             "instead of the pgn_lstm row's checkpoint_last.pt")
    parser.add_argument("--peers", default="", help="peer toolkits to add: onmt (OpenNMT-py 3.5.1)")
    parser.add_argument("--onmt-hidden", type=int, choices=[512, 256], default=512,
                        help="OpenNMT-py decoder size: 512 (encoder 2 x 256, as ours) or 256 (encoder 2 x 128)")
    parser.add_argument("--peak-sizes", default="1024,2048,3072", help="matrix sizes of the matmul peak")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    args.log_interval = args.log_interval or max(1, min(10, args.updates // 4))
    if args.min_len is not None and not 1 <= args.min_len <= args.max_len_b:
        parser.error("--min-len must be between 1 and --max-len-b")
    if args.block_ngram_repeat < 0:
        parser.error("--block-ngram-repeat must be >= 0")
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    if any(p != "onmt" for p in args.peers):
        parser.error(f"--peers: unknown peer in {','.join(args.peers)!r} (known: onmt)")
    try:
        args.peak_sizes = [int(n) for n in args.peak_sizes.split(",")]
    except ValueError:
        parser.error(f"--peak-sizes must be integers, got {args.peak_sizes!r}")
    args.modes = decode_modes(args)
    if args.models == "none":  # no training rows: the --quantize rows of a given checkpoint only
        if args.quantize_checkpoint is None:
            parser.error("--models none needs --quantize int8 --quantize-checkpoint FILE (nothing else to measure)")
        args.models = []
    elif args.models is not None:
        args.models = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = [m for m in args.models if m not in MODELS]
        if unknown or not args.models:
            parser.error(f"--models: unknown or no model in {','.join(args.models)!r} (known: {', '.join(MODELS)})")
    else:
        args.models = [n for n in MODELS if n in TARGETS or (args.all_models and n in ALL_MODELS)]
    if args.rl and args.rl_checkpoint is None and REFERENCE not in args.models:
        parser.error(f"--rl needs the {REFERENCE} row (its checkpoint) or --rl-checkpoint")
    if args.rl_checkpoint is not None and not args.rl_checkpoint.is_file():
        parser.error(f"--rl-checkpoint: no file {args.rl_checkpoint}")
    if args.rl_batches < 1:
        parser.error("--rl-batches must be >= 1")
    if args.quantize_checkpoint is not None and args.quantize is None:
        parser.error("--quantize-checkpoint needs --quantize int8")
    if args.quantize and args.quantize_checkpoint is None and REFERENCE not in args.models:
        parser.error(f"--quantize needs the {REFERENCE} row (its checkpoint) or --quantize-checkpoint")
    if args.quantize_checkpoint is not None and not args.quantize_checkpoint.is_file():
        parser.error(f"--quantize-checkpoint: no file {args.quantize_checkpoint}")
    return args


def measure_machine(args) -> dict:
    peak, _, _ = matmul_peak(args.peak_sizes, device=args.device)
    return {"description": describe_machine(), "caches": cache_sizes().describe(), "peak_before": peak,
            "peak_sizes": args.peak_sizes}


def main(argv=None):
    args = parse_args(argv)
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        os.environ["PATH"] = f"{venv_bin}:{os.environ['PATH']}"
    args.device = resolve_device(args.device)
    machine = measure_machine(args)

    bin_dir = args.data_bin or args.work / "lcsts_char" / "bin"
    if args.data_bin is None:
        prepare_lcsts(args.work / "lcsts_char", bin_dir)
    split = args.decode_subset or ("test" if (bin_dir / "test.src-tgt.src.bin").exists() else "valid")
    subset_dir = args.work / "decode_subset"
    sentences = make_decode_subset(bin_dir, split, args.decode_sentences, subset_dir)
    notes = []
    if args.block_ngram_repeat and not project_blocking_available(bin_dir):
        notes.append("blocked runs: none, --task summarization has no --block-ngram-repeat in this checkout")
        args.block_ngram_repeat = 0

    onmt_rows = None
    if "onmt" in args.peers:
        try:
            onmt_rows = OnmtRows(args, args.work, sentences)
        except onmt.PeerUnavailable as error:
            notes.append(f"OpenNMT-py rows skipped: {error}")
            print(f"throughput: OpenNMT-py rows skipped: {error}", file=sys.stderr)
    names = [n for n in ROW_ORDER if (n.startswith("onmt") and onmt_rows) or n in args.models]
    runs = {name: [] for name in names}
    for _ in range(args.repeats):  # the models take turns, so a drifting machine affects them alike
        for name in names:
            save_dir = args.work / "models" / name
            if name.startswith("onmt"):
                figures = onmt_rows.train(name, save_dir)
                decode = partial(onmt_rows.decode, name, save_dir)
            else:
                figures = train_fairseq(name, args, bin_dir, save_dir)
                decode = partial(decode_fairseq, name, args, subset_dir, save_dir)
            for mode in args.modes:
                for block in ([0, args.block_ngram_repeat] if args.block_ngram_repeat else [0]):
                    for field, value in decode(mode, block).items():
                        figures[decode_key(mode, bool(block), field)] = value
            runs[name].append(figures)
    results = {name: median_run(name_runs) for name, name_runs in runs.items()}
    rl = None
    if args.rl and args.device != "cpu":
        notes.append(f"RL row skipped: it runs on the CPU only (reward_speed.compare_update_speed), not {args.device}")
    elif args.rl:
        rl = measure_rl(args, bin_dir)
    quantized = None
    if args.quantize and args.device != "cpu":
        notes.append(f"int8 rows skipped: the int8 decoder runs on the CPU only, not {args.device}")
    elif args.quantize:
        quantized = measure_quantize(args, subset_dir)
    machine["peak_after"], _, _ = matmul_peak(args.peak_sizes, device=args.device)
    machine["peak_gflops"] = max(machine["peak_before"], machine["peak_after"])
    if args.device != "cpu":  # what a bfloat16 run could reach: the tensor cores' matmul rate
        machine["peak_bf16_gflops"], _, _ = matmul_peak(args.peak_sizes, device=args.device, dtype="bfloat16")
    if results:
        counts = model_flops(bin_dir, onmt_rows.vocab if onmt_rows else None, args.onmt_hidden)
        pairs = dataset_lengths(bin_dir)
        add_utilisation(results, counts, pairs, batch_count(pairs, args.max_tokens), machine["peak_gflops"],
                        machine.get("peak_bf16_gflops"))
    print()
    if results:
        print(report(results, args, bin_dir, split, sentences, machine, notes, rl))
    else:  # --models none: the machine and the int8 rows only
        print("\n".join([machine["description"], f"data {bin_dir}", *notes]))
    if quantized:
        print("\n".join(quantize_lines(quantized, args, split, sentences)))
    if args.json:
        args.json.write_text(json.dumps({
            "device": args.device, "machine": machine, "updates": args.updates, "max_tokens": args.max_tokens,
            "decode_split": split, "decode_sentences": sentences, "beam": args.beam, "max_len_b": args.max_len_b,
            "modes": args.modes, "block_ngram_repeat": args.block_ngram_repeat, "batch_size": args.batch_size,
            "repeats": args.repeats, "onmt_hidden": args.onmt_hidden, "notes": notes, "models": results, "rl": rl,
            "quantize": quantized,
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()

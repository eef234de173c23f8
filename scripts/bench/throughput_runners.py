"""The rows of scripts/bench/throughput.py: the benchmark's data, and each toolkit's training and decoding runs
(fairseq's rows and OpenNMT-py's), with the settings every row shares."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scripts.bench.flops import DCA_AGENTS, DCA_LAYERS
from scripts.bench.peers import onmt
from scripts.experiments.corpora import LCSTS, lcsts_convert, require

ROOT = Path(__file__).resolve().parents[2]

# emb 128, bidirectional encoder 2 x 256, decoder 256, one layer each, same dropout.
SIZES = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-hidden-size", "256",
         "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256", "--dropout", "0.1"]
MODELS = {
    "lstm": ["--arch", "lstm", "--encoder-bidirectional", "--criterion", "cross_entropy"],
    "pgn_lstm": ["--arch", "pgn_lstm", "--criterion", "focal_copy_coverage"],  # attention size 256 (default)
    # the same model with its decoder run module by module (--no-fused-steps): what the fused recurrence gains
    "pgn_lstm_modules": ["--arch", "pgn_lstm", "--no-fused-steps", "--criterion", "focal_copy_coverage"],
    # the same model decoded by fairseq's own search loop (--fairseq-beam-search): what generation/beam_search.py
    # gains
    "pgn_lstm_fairseq_search": ["--arch", "pgn_lstm", "--criterion", "focal_copy_coverage"],
    # the same model trained with its fused recurrence replayed as CUDA graphs (--cuda-graphs; a GPU's option)
    "pgn_lstm_graphs": ["--arch", "pgn_lstm", "--cuda-graphs", "--criterion", "focal_copy_coverage"],
    # the same model trained with --optimizer foreach_adam (fairseq's Adam in multi-tensor operations)
    "pgn_lstm_foreach_adam": ["--arch", "pgn_lstm", "--criterion", "focal_copy_coverage"],
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
DECODE_FLAGS = {"pgn_lstm_fairseq_search": ["--fairseq-beam-search"]}  # a row's own fairseq-generate options
TRAIN_FLAGS = {"pgn_lstm_foreach_adam": ["--optimizer", "foreach_adam"]}  # a row's own fairseq-train options
STOCK = ("lstm",)  # decoded as fairseq ships it: --task translation, fairseq's generator and blocking
REFERENCE = "pgn_lstm"
TARGETS = ("lstm", "pgn_lstm")
ALL_MODELS = ("pgn_lstm_a512", "pgn_lstm_paulus2017", "dca_lstm")  # the rows --all-models adds
ROW_ORDER = ("onmt", "onmt_copy_cov", "lstm", "pgn_lstm", "pgn_lstm_modules", "pgn_lstm_fairseq_search",
             "pgn_lstm_foreach_adam", "pgn_lstm_graphs", "pgn_lstm_a512", "pgn_lstm_paulus2017", "dca_lstm")
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


def loader_workers(device: str) -> str:
    """fairseq-train's --num-workers: none on a CPU (a loader process would take a core from the run measured);
    fairseq's default of one on a GPU, which builds the next batches while the GPU trains (in the main process,
    collating a 64,000-token batch took 50 ms against 132 ms for the update itself, under cProfile on an H200:
    train_host_profile.py)."""
    return "0" if device == "cpu" else "1"


def fairseq_train_command(name: str, args, bin_dir: Path, save_dir: Path) -> list:
    return ["fairseq-train", bin_dir, "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
            *MODELS[name], *SIZES, "--optimizer", "adam", "--lr", "0.001", "--clip-norm", "2.0",
            "--max-tokens", args.max_tokens, "--max-update", args.updates, "--seed", "1",
            "--disable-validation", "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple",
            "--log-interval", args.log_interval, "--num-workers", loader_workers(args.device),
            *device_flags(args.device), *TRAIN_FLAGS.get(name, [])]


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
            *DECODE_FLAGS.get(name, []), *device_flags(args.device)]


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

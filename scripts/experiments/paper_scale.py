#!/usr/bin/env python
"""The seed tables at the papers' scale: each table's systems, the full run (compare.py on a corpus converted from
its raw release) and the dry run that budgets it.

Used by the table scripts through ``add_options`` and ``run``:

    python scripts/experiments/see2017_table1.py --scale paper --raw DIR [--launcher slurm ...]   # the full table
    python scripts/experiments/see2017_table1.py --scale paper --dry-run [--dry-run-batch N] [--work DIR]
    python scripts/experiments/paper_scale.py --table see2017_table1 --device cuda [--work DIR]   # on a GPU

``--scale paper --raw DIR`` runs compare.py with ``--corpus raw --raw DIR`` (DIR/{train,valid,test}.{src,tgt}, the
output of ``summ-convert`` on the release), the table's ``*_paper.conf`` configs and each system's paper number of
updates (``--max-update`` in its options, which compare.py honours per system), launcher options passed on.

``--dry-run`` (no corpus needed) builds every system of the table at paper scale and trains it for 3 updates on
the CPU, on a slice of ../shared/data (TABLE.slice: 200 training documents of See et al.'s CNN/DM test release or
of LCSTS PART_II), prepared by preprocess.sh with the table's data config and its dictionary padded to the paper's
vocabulary size (filler words after the slice's own, before the OOV markers: the output layer and embeddings have
the paper's size, the fillers never occur).  Per system, in its own process (a fresh peak RSS):
  parameters      fairseq's count (model.parameters(), shared weights once), as fairseq-train logs it;
  peak RSS        of that process over building the model and the 3 updates at the measured batch (the paper's
                  unless --dry-run-batch), the interpreter, torch and fairseq included (their share: "at start");
  s/update        wall seconds of updates 2 and 3 (fairseq's Trainer.train_step, 1 thread), the first one
                  being a warm-up (on a GPU: the mean of updates 2 to 6);
  FLOPs           scripts/bench/flops.py's count of one update at the paper's batch, documents as long as the
                  slice's on average (after the data config's truncation), times the paper's updates: the
                  analytic work of the whole run (self-critical rows: flops.self_critical_update_flops, samples as
                  long as the references).
With ``--device cuda`` the updates run on the GPU (synchronised before each time is read), and the report adds
each row's hours and peak GPU memory and the time of each continued system with its parents: See et al.'s
230k updates of the pointer-generator and then 3k with coverage, projected from the measured s/update.
A process whose resident size passes --dry-run-memory-limit (default 8 GiB) is stopped: its row keeps its
parameters and FLOPs and says "stopped over N" (the machine is shared; a model that needs more at the dry run's
batch needs far more at the paper's).  The table goes to stdout, WORK/dry_run.md and WORK/dry_run.json (exact
figures).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from scripts.experiments.corpora import CNNDM, LCSTS, cnndm_documents, lcsts_convert, require
from scripts.experiments.lib import ROOT, Experiment, config_array, read_lines, write_lines
from scripts.experiments.records import made_header

DRY_RUN_UPDATES = 3
GPU_DRY_RUN_UPDATES = 6  # on a GPU: cheap, and the first updates there also pay for cuDNN's and cuBLAS's set-up
SLICE_TRAIN, SLICE_HELD_OUT = 200, 5  # documents of the dry run's slice (train; valid and test each)
FILLER = "paper_vocab_filler_{}"  # padding words of the dry run's dictionary (never in the data)
MEMORY_LIMIT_MIB = 8192  # a dry-run process past this is stopped: the machine is shared (24 GiB here)


@dataclass(frozen=True)
class System:
    """One row: LABEL trained with -c CONFIG and OPTIONS for UPDATES updates, from PARENT's best checkpoint if
    given (a continued system: compare.py --continue)."""

    label: str
    config: str
    options: str
    updates: int
    parent: Optional[str] = None


@dataclass(frozen=True)
class Table:
    """A seed table at paper scale: ``data_config`` prepares the corpus (``release`` says which and how),
    ``batch`` documents per update (every config of the table sets it), ``slice`` the dry run's stand-in data."""

    name: str
    release: str
    data_config: str
    batch: int
    systems: Tuple[System, ...]
    slice: str  # "cnndm" or "lcsts"
    decodes: Tuple[str, ...] = ("beam",)
    lead: Optional[int] = None
    dry_run_notes: Tuple[str, ...] = field(default_factory=tuple)


# ----------------------------------------------------------------------------------------------- the tables
SEE_NO_COVERAGE = "--no-coverage --coverage-lambda 0"
SEE2017 = Table(
    name="see2017_table1", release="CNN/DailyMail story files: summ-convert story, then summ-convert split "
    "(or the standard 287,226 / 13,368 / 11,490 split)", data_config="see2017_cnndm_paper", batch=16, slice="cnndm",
    systems=(
        System("seq2seq+attn_50k", "see2017_cnndm_paper", f"--no-copy {SEE_NO_COVERAGE}", 600_000),
        System("pointer-generator", "see2017_cnndm_paper", SEE_NO_COVERAGE, 230_000),
        System("pointer-generator+coverage", "see2017_cnndm_paper", "--coverage-lambda 1", 3_000,
               parent="pointer-generator"),
    ),
    lead=3,
    dry_run_notes=("The paper's 150k-vocabulary baseline is not a row: it needs a second preprocessing of the corpus.",
                   "See et al. (section 5; the paper is not among /work/shared/papers, so these are the figures as "
                   "we recall them) give 21,499,600 parameters for the baseline, 1,153 more for the pointer and 512 "
                   "for coverage; the rows here differ by 897 (w_h*, w_s, w_x, b_ptr with the decoder input x_t of "
                   "size 128) and 512 (w_c).",),
)

PAULUS_RL = "--rl-gamma 0.9984"
PAULUS2017 = Table(
    name="paulus2017_table", release="CNN/DailyMail story files: summ-convert story, then summ-convert split",
    data_config="paulus2017_cnndm_paper", batch=50, slice="cnndm",
    systems=(
        # Updates chosen (the notes at hand give none): 75,000 ML updates are 13 epochs of 287k documents at
        # batch 50, See et al.'s pointer-generator's 12.8 epochs; 25,000 updates for each RL phase.
        System("ML_intra-attention", "paulus2017_cnndm_paper", "", 75_000),
        System("ML+RL", "paulus2017_cnndm_rl_paper", PAULUS_RL, 25_000, parent="ML_intra-attention"),
        System("RL", "paulus2017_cnndm_rl_paper", "--rl-gamma 1", 25_000, parent="ML_intra-attention"),
    ),
    lead=3,
    dry_run_notes=("The ML row feeds its own predictions back (--own-prediction-prob 0.25, section 6.1), so its "
                   "decoder runs step by step; the tied output matrix W_out = tanh(W_emb W_proj) (eq 13; 50k x "
                   "1,200 floats, 240 MB) is computed once per pass (SharedOutputProjection.held), not once per "
                   "step, which kept about 24 GB an update before the dry run found it.",),
)

SHI_W2V = "--encoder-embed-path {w2v}"  # rows with word2vec: the table script fills in --w2v
SHI2018 = Table(
    name="shi2018_table1", release="LCSTS PART_I for training, PART_II for validation and PART_III for test: "
    "summ-convert of each part into train, valid, test", data_config="shi2018_lcsts_paper", batch=2, slice="lcsts",
    systems=tuple(System(f"row{row}", "shi2018_lcsts_paper", options, 100_000) for row, options in (
        (1, ""),
        (2, SHI_W2V),
        (3, f"{SHI_W2V} --encoder-freeze-embed"),
        (4, "--embed-norm"),
        (5, f"{SHI_W2V} --embed-norm"),
        (6, f"{SHI_W2V} --embed-norm --focal-alpha 0.25 --focal-gamma 1"),
        (7, f"{SHI_W2V} --embed-norm --focal-alpha 0.25 --focal-gamma 1 --coverage-lambda 0.25"),
    )),
    dry_run_notes=("Rows with word2vec train from random embeddings in the dry run (the vectors change the start, "
                   "not the size, of the embeddings; row 3's stay frozen).",),
)

SONG2020 = Table(
    name="song2020_ttnews", release="NLPCC 2017 TTNews (50,000 training pairs): summ-convert jsonl, then "
    "summ-convert split", data_config="song2020_ttnews_paper", batch=32, slice="lcsts",
    systems=(
        # 20 epochs of 50,000 pairs at batch 32 (chosen: the paper stops by hand)
        System("full", "song2020_ttnews_paper", "", 31_250),
        System("no_gate", "song2020_ttnews_paper", "--no-selective-gate", 31_250),
        System("seq2seq", "song2020_ttnews_paper", "--no-selective-gate --no-global-encoding", 31_250),
    ),
    decodes=("beam", "greedy --beam 1"),
    dry_run_notes=("TTNews is not in ../shared/data: the dry run trains on LCSTS PART_II, whose sources (about 100 "
                   "characters) are about 6x shorter than TTNews's (669): memory, time and FLOPs grow with them.",),
)

DCA_SINGLE = "--arch pgn_lstm --no-coverage --coverage-lambda 0"
DCA2018 = Table(
    name="dca2018_cnndm", release="CNN/DailyMail story files: summ-convert story, then summ-convert split",
    data_config="dca2018_cnndm_paper", batch=16, slice="cnndm",
    systems=(
        # 230,000 updates (See et al.'s, chosen: the paper's appendix was not available); RL 25,000 (chosen)
        System("1:single_mle", "dca2018_cnndm_paper", f"{DCA_SINGLE} --cohesion-lambda 0", 230_000),  # MLE alone
        System("2:single_sem", "dca2018_cnndm_paper", DCA_SINGLE, 230_000),
        System("3:agents_no_comm", "dca2018_cnndm_paper", "--no-communication --no-contextual-agent-attention",
               230_000),
        System("4:agents_comm", "dca2018_cnndm_paper", "--no-contextual-agent-attention", 230_000),
        System("5:agents_comm_caa", "dca2018_cnndm_paper", "", 230_000),
        System("6:rl", "dca2018_cnndm_paper", "--criterion self_critical_cohesion --rl-gamma 0.9984 "
               "--rl-reward rougeL --rl-max-len-b 100 --lr 0.0001", 25_000, parent="5:agents_comm_caa"),
    ),
    decodes=("beam", "beam+block --block-ngram-repeat 3"),
    lead=3,
)

TABLES = {table.name: table for table in (SEE2017, PAULUS2017, SHI2018, SONG2020, DCA2018)}


# ----------------------------------------------------------------------------------------------- command line
def add_options(parser: argparse.ArgumentParser, cpu_scale: bool = True) -> None:
    """--scale, --raw, --dry-run, --dry-run-batch (``cpu_scale``: the script also has a CPU scale, the default)."""
    group = parser.add_argument_group("paper scale")
    scales = ("cpu", "paper") if cpu_scale else ("paper",)
    group.add_argument("--scale", choices=scales, default=scales[0],
                       help="paper: the paper's sizes, vocabulary, lengths, optimizer and updates "
                            "(configs/*_paper.conf)")
    group.add_argument("--raw", type=Path, metavar="DIR",
                       help="--scale paper: the corpus converted from its release, DIR/{train,valid,test}.{src,tgt}")
    add_dry_run_options(group)


def add_dry_run_options(group) -> None:
    """--dry-run, --dry-run-batch, --dry-run-memory-limit (the table scripts and compare.py)."""
    group.add_argument("--dry-run", action="store_true",
                       help="build every system at paper scale, train 3 updates on a slice of ../shared/data, print "
                            "parameters, memory, s/update here and the whole run's FLOPs")
    group.add_argument("--dry-run-batch", type=int, metavar="N",
                       help="documents per dry-run update (default: the paper's batch)")
    group.add_argument("--dry-run-memory-limit", type=float, default=MEMORY_LIMIT_MIB, metavar="MiB",
                       help="stop a system whose dry-run process passes this resident size (default %(default)s): "
                            "its row keeps parameters and FLOPs and says so")


def command_line_table(args, systems) -> Table:
    """compare.py --dry-run: its command line's systems (compare.systems) as a table; the batch whose FLOPs are
    counted is the data config's --batch-size, else --dry-run-batch."""
    train_args = config_array(args.config, "TRAIN_ARGS")
    batch = int(train_args[train_args.index("--batch-size") + 1]) if "--batch-size" in train_args else None
    if not (batch or args.dry_run_batch):
        sys.exit(f"compare.py --dry-run: configs/{args.config}.conf batches by tokens: give --dry-run-batch N")
    prep = config_array(args.config, "PREP_ARGS")
    lang = prep[prep.index("--lang") + 1] if "--lang" in prep else "en"
    chinese = args.corpus == "lcsts" or (args.corpus == "raw" and lang == "zh")
    rows = tuple(System(label, config, shlex.join(map(str, extra)), updates, parent)
                 for label, config, extra, parent, updates in systems)
    return Table(name=args.name, release=f"--corpus {args.corpus}", data_config=args.config,
                 batch=batch or args.dry_run_batch, systems=rows, slice="lcsts" if chinese else "cnndm")


def table_main(table: Table, doc: str, argv=None) -> None:
    """The command line of a table script that exists at paper scale only (see2017_table1.py, paulus2017_table.py)."""
    from scripts.experiments import slurm_launcher

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help=f"work folder (default runs/{table.name}_paper, dry run "
                                                  f"runs/{table.name}_dry_run)")
    parser.add_argument("--threads", type=int, default=1)
    add_options(parser, cpu_scale=False)
    slurm_launcher.add_options(parser)
    run(table, parser.parse_args(argv))


def run(table: Table, args, substitutions: Optional[dict] = None) -> None:
    """--scale paper: the dry run, or the full table through compare.py (``substitutions`` fill the options'
    {placeholders}, e.g. Shi et al.'s {w2v})."""
    if args.dry_run:
        return dry_run(table, args.work if args.work else ROOT / "runs" / f"{table.name}_dry_run",
                       args.dry_run_batch, getattr(args, "threads", 1), args.dry_run_memory_limit)
    if not args.raw:
        sys.exit(f"{table.name}: --scale paper needs --raw DIR ({table.release}) or --dry-run")
    cmd = compare_command(table, args, substitutions or {})
    subprocess.run(list(map(str, cmd)), check=True, cwd=ROOT, env=dict(os.environ))


def compare_command(table: Table, args, substitutions: dict) -> list:
    """compare.py's command line of the full table (each system's updates as its own --max-update)."""
    from scripts.experiments import slurm_launcher

    first = table.systems[0].updates
    cmd = [sys.executable, ROOT / "scripts" / "experiments" / "compare.py", "--name", f"{table.name}_paper",
           "--corpus", "raw", "--raw", args.raw, "--config", table.data_config, "--updates", first,
           "--threads", getattr(args, "threads", 1), "--work", args.work or ROOT / "runs" / f"{table.name}_paper",
           *slurm_launcher.passthrough(args)]
    continued = {system.updates for system in table.systems if system.parent}
    if len(continued) > 1:
        raise ValueError(f"{table.name}: compare.py gives every continued system one --continue-updates")
    for system in table.systems:
        options = system.options.format(**substitutions)
        if system.parent:
            cmd += ["--continue", f"{system.label} {system.parent} {system.config} {options}"]
        else:
            cmd += ["--variant", f"{system.label} {system.config} {options} --max-update {system.updates}"]
    if continued:
        cmd += ["--continue-updates", continued.pop()]
    for decode in table.decodes:
        cmd += ["--decode", decode]
    if table.lead:
        cmd += ["--lead", table.lead]
    return cmd


# ----------------------------------------------------------------------------------------------- the dry run
def dry_run(table: Table, work: Path, batch: Optional[int], threads: int = 1,
            limit_mib: float = None, device: str = "cpu") -> List[dict]:
    """The dry run of ``table`` in ``work`` (module docstring), ``batch`` documents per update (None: the
    paper's); its rows, also in WORK/dry_run.md and .json."""
    exp = Experiment(f"{table.name} dry run", work, threads or 1)
    batch = batch or table.batch
    data = prepare_slice(exp, table)
    specs = []
    for system in table.systems:
        options = shlex.split(re.sub(r"--encoder-embed-path \{w2v\}", "", system.options))
        specs.append({"system": system.label, "config": system.config, "options": shlex.join(options),
                      "data_bin": str(data / "bin"), "train_args": config_array(system.config, "TRAIN_ARGS") + options,
                      "batch": batch, "paper_batch": table.batch, "paper_updates": system.updates,
                      "device": device})
    rows = measure(exp, specs, limit_mib or MEMORY_LIMIT_MIB)
    write_report(exp.work, table, rows, batch, device)
    return rows


def prepare_slice(exp: Experiment, table: Table) -> Path:
    """WORK/data: the slice prepared with the table's data config, its dictionary padded to the paper's size."""
    raw, data = exp.work / "raw", exp.work / "data"
    done = data / "padded_to_paper_vocabulary"
    if done.is_file():
        return data
    shutil.rmtree(data, ignore_errors=True)
    write_slice(exp, raw, table.slice)
    exp.run([ROOT / "preprocess.sh", "-c", table.data_config, raw, data], "preprocess.log")
    padded = pad_dictionary(data)
    shutil.rmtree(data / "bin")  # binarized again with the padded dictionary
    exp.run([ROOT / "preprocess.sh", "-c", table.data_config, raw, data, "--srcdict", padded],
            "preprocess_padded.log")
    done.touch()
    return data


def write_slice(exp: Experiment, raw: Path, corpus: str) -> None:
    """raw/{train,valid,test}.{src,tgt}: the first documents of ../shared/data's CNN/DM or LCSTS PART_II."""
    raw.mkdir(parents=True, exist_ok=True)
    total = SLICE_TRAIN + 2 * SLICE_HELD_OUT
    if corpus == "cnndm":
        require(CNNDM, exp.fail)
        docs = cnndm_documents(total)
        src = [" ".join(doc["article"].split()) for doc in docs]
        tgt = [" ".join(" ".join(s.split()) for s in doc["reference"]) for doc in docs]  # as summ-convert story
    else:
        require(LCSTS, exp.fail)
        exp.run(lcsts_convert("train.tsv", raw / "all"), "convert.log")
        src, tgt = (read_lines(raw / f"all.{side}")[:total] for side in ("src", "tgt"))
    bounds = {"train": (0, SLICE_TRAIN), "valid": (SLICE_TRAIN, SLICE_TRAIN + SLICE_HELD_OUT),
              "test": (SLICE_TRAIN + SLICE_HELD_OUT, total)}
    for split, (start, end) in bounds.items():
        write_lines(raw / f"{split}.src", src[start:end])
        write_lines(raw / f"{split}.tgt", tgt[start:end])


def pad_dictionary(data: Path) -> Path:
    """DATA/paper_dict.txt: DATA/dict.txt's regular words, filler words up to the paper's vocabulary (prep.json's
    --vocab-size, or --sp-vocab-size when smaller for sentencepiece units), then its OOV markers."""
    from fairseq_plugins.text import markers

    settings = json.loads((data / "prep.json").read_text(encoding="utf-8"))["settings"]
    size = min(filter(None, (settings["vocab_size"], settings.get("sp_vocab_size"))))
    lines = (data / "dict.txt").read_text(encoding="utf-8").splitlines()
    regular = [line for line in lines if markers.marker_index(line.rsplit(" ", 1)[0]) is None]
    marks = lines[len(regular):]
    fillers = [f"{FILLER.format(k)} 0" for k in range(max(0, size - len(regular)))]
    padded = data / "paper_dict.txt"
    padded.write_text("\n".join(regular + fillers + marks) + "\n", encoding="utf-8")
    return padded


def measure(exp: Experiment, specs: List[dict], limit_mib: float) -> List[dict]:
    """Runs the worker (this file with --worker) on the systems' specs; their rows (spec + figures)."""
    spec_file, result_file = exp.work / "dry_run_specs.json", exp.work / "dry_run_results.json"
    spec_file.write_text(json.dumps(specs, indent=1), encoding="utf-8")
    exp.run([sys.executable, Path(__file__).resolve(), "--worker", spec_file, result_file, "--dry-run-memory-limit",
             limit_mib], "dry_run_worker.log")
    results = json.loads(result_file.read_text(encoding="utf-8"))
    return [{key: spec[key] for key in ("system", "config", "options")} | result
            for spec, result in zip(specs, results)]


# ----------------------------------------------------------------------------------------------- the worker
def build(spec: dict):
    """fairseq's parser, task, model, criterion and Trainer from the config's TRAIN_ARGS and the options, as
    fairseq-train builds them (train.sh's argument order), with the dry run's batch and no saving."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    import fairseq_plugins

    fairseq_plugins.register()
    argv = [spec["data_bin"], "--user-dir", str(ROOT / "fairseq_plugins"), *spec["train_args"],
            "--batch-size", str(spec["batch"]), "--required-batch-size-multiple", "1", "--num-workers", "0",
            *(["--cpu"] if spec.get("device", "cpu") == "cpu" else []),
            "--no-save", "--disable-validation", "--max-update", str(DRY_RUN_UPDATES)]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    cfg = convert_namespace_to_omegaconf(args)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    return args, task, model, Trainer(cfg, task, model, criterion)


def full_batches(trainer, size: int, count: int) -> list:
    """The first ``count`` batches of the epoch with exactly ``size`` documents."""
    iterator = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=True)
    batches = [batch for batch in iterator if batch["nsentences"] == size][:count]
    if len(batches) < count:
        raise SystemExit(f"paper_scale: the slice has fewer than {count} batches of {size} documents")
    return batches


def update_flops(args, task, spec: dict) -> float:
    """scripts/bench/flops.py: one update at the paper's batch, documents like the slice's training split."""
    from scripts.bench import flops

    from fairseq_plugins.text.markers import first_marker_index

    count = flops.model_count(args, first_marker_index(task.target_dictionary))
    pairs = flops.dataset_lengths(Path(spec["data_bin"]))
    if args.criterion.startswith("self_critical"):
        return flops.self_critical_update_flops(count, pairs, spec["paper_batch"], ml=args.rl_gamma < 1)
    return flops.ml_update_flops(count, pairs, spec["paper_batch"])


def figures(spec: dict, part: Path) -> None:
    """One system: build (parameters and FLOPs written to ``part`` at once, so they survive a stop for memory),
    then 3 updates at spec's batch (their seconds added to ``part``)."""
    args, task, model, trainer = build(spec)
    per_update = update_flops(args, task, spec)
    result = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "trained_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "vocabulary": len(task.target_dictionary), "batch": spec["batch"], "paper_batch": spec["paper_batch"],
        "paper_updates": spec["paper_updates"], "flops_per_update": per_update,
        "flops_total": per_update * spec["paper_updates"],
    }
    part.write_text(json.dumps(result), encoding="utf-8")
    import torch

    cuda = spec.get("device", "cpu") == "cuda"
    seconds = []
    for batch in full_batches(trainer, spec["batch"], GPU_DRY_RUN_UPDATES if cuda else DRY_RUN_UPDATES):
        start = time.perf_counter()
        trainer.train_step([batch])
        if cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    result.update(seconds=seconds, seconds_per_update=sum(seconds[1:]) / len(seconds[1:]))
    if cuda:
        result.update(gpu=torch.cuda.get_device_name(0), gpu_peak_gib=torch.cuda.max_memory_allocated() / 2**30)
    part.write_text(json.dumps(result), encoding="utf-8")


def rss_of(pid="self") -> float:
    """A process's resident set now (VmRSS), MiB (default: this one); 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0.0)


def watch(pid: int, limit_mib: float):
    """Waits for the child ``pid``; kills it when its RSS passes ``limit_mib`` (a model that would take the
    machine's memory).  (exit status, rusage, True if it was stopped for memory)."""
    stopped = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage, stopped
        if not stopped and rss_of(pid) > limit_mib:
            os.kill(pid, signal.SIGKILL)
            stopped = True
        time.sleep(0.1)


def worker(spec_file: Path, result_file: Path, limit_mib: float) -> None:
    """Every system of spec_file in a child forked after torch and fairseq are imported (paid once): the child's
    peak RSS (wait4) is that system's alone, the imports' pages included ("at start").  A child whose RSS passes
    ``limit_mib`` is stopped; its row keeps parameters and FLOPs and says so."""
    import fairseq.trainer  # noqa: F401
    import torch  # noqa: F401

    import fairseq_plugins  # noqa: F401

    at_start = rss_of()
    results = []
    for k, spec in enumerate(json.loads(spec_file.read_text(encoding="utf-8"))):
        part = result_file.with_suffix(f".{k}.json")
        part.unlink(missing_ok=True)
        pid = os.fork()
        if pid == 0:  # the child: one system, then out without running the parent's exit handlers
            try:
                figures(spec, part)
                os._exit(0)
            except BaseException:  # noqa: B036 (SystemExit too: the message must reach the log)
                traceback.print_exc()
                os._exit(1)
        status, usage, stopped = watch(pid, limit_mib)
        if not part.is_file() or (os.waitstatus_to_exitcode(status) != 0 and not stopped):
            sys.exit(f"paper_scale: the dry run of {spec['system']} failed (its traceback is above)")
        result = json.loads(part.read_text(encoding="utf-8"))
        results.append(result | {"peak_rss_mib": usage.ru_maxrss / 1024, "rss_at_start_mib": at_start,
                                 "stopped_over_mib": limit_mib if stopped else None})
        part.unlink()
    result_file.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------------------------- the report
def write_report(work: Path, table: Table, rows: List[dict], batch: int, device: str = "cpu") -> None:
    """WORK/dry_run.json (exact figures) and WORK/dry_run.md (the table, also on stdout)."""
    (work / "dry_run.json").write_text(json.dumps({"table": table.name, "batch": batch, "device": device,
                                                   "rows": rows}, indent=1) + "\n", encoding="utf-8")
    text = report_text(table, rows, batch, device)
    (work / "dry_run.md").write_text(text, encoding="utf-8")
    print(text)


def report_text(table: Table, rows: List[dict], batch: int, device: str = "cpu") -> str:
    """The table of a dry run; "days here" (the paper's updates at the s/update measured here) only when the
    dry run measured the paper's batch.  On a GPU (``device`` cuda) the rows also give hours and peak GPU
    memory, and the table ends with the whole recipe's projected time (every row's updates, one after
    another)."""
    lines = [f"## {table.name}: dry run at paper scale", "",
             f"Corpus at full scale: {table.release} (data config `configs/{table.data_config}.conf`). Dry run: "
             f"{SLICE_TRAIN} training documents of ../shared/data's {table.slice}, dictionary padded to the paper's "
             f"size; {GPU_DRY_RUN_UPDATES if device == 'cuda' else DRY_RUN_UPDATES} updates of {batch} documents "
             f"(paper: {table.batch}), {'on the GPU' if device == 'cuda' else '1 thread'}.", "",
             "| system | options | parameters | vocabulary | peak RSS MiB (at start) | s/update here | paper "
             "updates | days here | FLOPs/update (paper batch) | FLOPs whole run |", "|" + "---|" * 10]
    for row in rows:
        stopped = row.get("stopped_over_mib")
        memory = (f"stopped over {stopped:,.0f}" if stopped else f"{row['peak_rss_mib']:,.0f}") \
            + f" ({row['rss_at_start_mib']:,.0f})"
        speed = "-" if stopped else f"{row['seconds_per_update']:.2f}"
        measured_paper_batch = not stopped and batch == table.batch
        days = f"{row['seconds_per_update'] * row['paper_updates'] / 86400:,.0f}" if measured_paper_batch else "-"
        lines.append(f"| {row['system']} | `-c {row['config']} {row['options']}` | {row['parameters']:,} | "
                     f"{row['vocabulary']:,} | {memory} | {speed} | {row['paper_updates']:,} | {days} | "
                     f"{row['flops_per_update']:.3e} | {row['flops_total']:.3e} |")
    if device == "cuda":
        lines += ["", *gpu_lines(table, rows, batch)]
    for note in table.dry_run_notes:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def gpu_lines(table: Table, rows: List[dict], batch: int) -> List[str]:
    """On a GPU: each row's hours at the measured s/update and its peak GPU memory, and the hours of each row
    with its parents (a continued system is trained after its parent: See et al.'s coverage phase)."""
    measured = {row["system"]: row for row in rows if not row.get("stopped_over_mib")}
    hours = {name: row["seconds_per_update"] * row["paper_updates"] / 3600 for name, row in measured.items()}
    gpu = next((row["gpu"] for row in measured.values() if "gpu" in row), "the GPU")
    lines = [f"On {gpu}, at {batch} documents per update (paper: {table.batch}):"]
    for system in table.systems:
        if system.label not in measured:
            continue
        chain, total, parent = [system.label], hours[system.label], system.parent
        while parent in hours:
            chain.insert(0, parent)
            total += hours[parent]
            parent = next(s.parent for s in table.systems if s.label == parent)
        lines.append(f"- {system.label}: {hours[system.label]:,.1f} h for {system.updates:,} updates at "
                     f"{measured[system.label]['seconds_per_update'] * 1000:.1f} ms/update, peak GPU memory "
                     f"{measured[system.label]['gpu_peak_gib']:.2f} GiB"
                     + (f"; with {' + '.join(chain[:-1])} first: {total:,.1f} h" if len(chain) > 1 else ""))
    return lines


def dry_run_header(args, seconds: float) -> list:
    """--table all's report opens with the command, commit and machine (records.made_header), the load and time of
    the run (``seconds``) and what each column holds."""
    from scripts.bench.machine import describe_machine

    load = os.getloadavg()
    return ["# The seed tables at paper scale: dry run", "", *made_header("paper_scale.py", args.argv), "",
            f"Machine: {describe_machine()}; load average {load[0]:.1f} at the end (other jobs shared the cores). "
            + ("" if args.reuse else f"{seconds / 60:.0f} min in all.")
            + (" With --reuse: the tables were run one by one before, two at a time, by "
               "`paper_scale.py --table NAME --work WORK/NAME` (with this command's --dry-run-batch or "
               "--batch-for batch and memory limit), and reused here." if args.reuse else ""), "",
            "Per system: parameters (fairseq's count), the vocabulary (fairseq's dictionary: the paper's words, 4 "
            "specials, the OOV markers), the peak RSS of the process that built it and ran 3 updates at the "
            "batch said (with, in brackets, what the interpreter, torch and fairseq took before), the wall "
            "seconds of updates 2-3 here (1 thread), the days the paper's updates would take here at that speed "
            "(when the dry run measured the paper's batch), and flops.py's analytic FLOPs of one update at the "
            "paper's batch and of the paper's whole run (scripts/experiments/paper_scale.py's docstring).  The "
            "FLOPs are the model's work: an RNN on a GPU reaches a small fraction of its peak (the CPU "
            "benchmark's utilisation: docs/results/throughput_cpu_peers.txt), so divide by the FLOP/s a GPU "
            "sustains on these models, not by its peak.", ""]


def write_all(args) -> None:
    """--table all: every table's dry run, one after another, in one file (``--out``) with the command, the commit
    and the machine."""
    started = time.time()
    sections = []
    batches = dict(item.split("=") for item in args.batch_for)
    for name, table in TABLES.items():
        work = (args.work or ROOT / "runs" / "paper_scale_dry_run") / name
        batch = int(batches[name]) if name in batches else args.dry_run_batch
        report = work / "dry_run.json"
        if not (args.reuse and report.is_file() and json.loads(report.read_text())["batch"] == (batch or table.batch)):
            dry_run(table, work, batch, 1, args.dry_run_memory_limit)
        done = json.loads(report.read_text(encoding="utf-8"))
        sections.append(report_text(table, done["rows"], done["batch"]))
    header = dry_run_header(args, time.time() - started)
    args.out.write_text("\n".join(header) + "\n" + "\n".join(sections), encoding="utf-8")
    print(f"wrote {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, type=Path, metavar=("SPEC", "RESULT"), help=argparse.SUPPRESS)
    parser.add_argument("--table", choices=[*sorted(TABLES), "all"], help="dry-run this table (all: every one)")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "paper_scale_dry_run.md",
                        help="--table all: the report")
    parser.add_argument("--dry-run-batch", type=int)
    parser.add_argument("--dry-run-memory-limit", type=float, default=MEMORY_LIMIT_MIB)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="--table NAME: where the dry run trains (cuda: also hours, peak GPU memory and the "
                             "recipe's projected time)")
    parser.add_argument("--batch-for", action="append", default=[], metavar="TABLE=N",
                        help="--table all: this table's dry-run batch (default: the paper's)")
    parser.add_argument("--reuse", action="store_true",
                        help="--table all: keep a table's WORK/TABLE/dry_run.json made at the same batch")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    unknown = [item for item in args.batch_for if item.split("=")[0] not in TABLES or "=" not in item]
    if unknown:
        parser.error(f"--batch-for {unknown[0]}: give TABLE=N with a table of {', '.join(TABLES)}")
    if args.worker:
        return worker(*args.worker, args.dry_run_memory_limit)
    if not args.table:
        parser.error("give --table (or run a table script with --scale paper --dry-run)")
    if args.table == "all":
        return write_all(args)
    dry_run(TABLES[args.table], args.work or ROOT / "runs" / f"{args.table}_dry_run", args.dry_run_batch, 1,
            args.dry_run_memory_limit, args.device)


if __name__ == "__main__":
    main()

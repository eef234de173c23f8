#!/usr/bin/env python
"""Throughput, peak memory and hardware utilisation: pgn_lstm (copy + coverage) against fairseq's built-in
``lstm`` and, with --peers onmt, against OpenNMT-py 3.5.1 (plain attention; copy + coverage), side by side.

One invocation trains every model on the same data with the same sizes, seed, tokens per batch and number of
updates, decodes the same N sentences with each (same beam, maximum length and batch size), with and without
trigram blocking, for fixed-length and for the models' own lengths, and prints:

- the command, the commit and the machine (scripts/experiments/records.py made_header), then the CPU model, caches,
  thread count, and the fp32 matrix-multiply peak measured with torch (machine.py), before and after the runs;
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
``pgn_lstm_fairseq_search`` is pgn_lstm decoded by fairseq's own search loop (--fairseq-beam-search), the
before of generation/beam_search.py; ``pgn_lstm_modules`` is pgn_lstm with --no-fused-steps (its decoder
module by module, accelerated/fused_steps.py's "before"); ``pgn_lstm_foreach_adam`` is pgn_lstm trained with
--optimizer foreach_adam (optim/foreach_adam.py: fairseq's Adam in multi-tensor operations) instead of adam.

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
import sys
from functools import partial
from pathlib import Path

from scripts.bench.flops import batch_count, dataset_lengths, model_flops
from scripts.bench.machine import cache_sizes, describe_machine, matmul_peak
from scripts.bench.peers import onmt
from scripts.bench.throughput_measures import add_utilisation, measure_quantize, measure_rl
from scripts.bench.throughput_report import decode_key, median_run, quantize_lines, report
from scripts.bench.throughput_runners import (ALL_MODELS, LENGTHS, MODELS, REFERENCE, ROW_ORDER, TARGETS, OnmtRows,
                                              decode_fairseq, fail, make_decode_subset, prepare_lcsts, train_fairseq)
from scripts.experiments.records import made_header

ROOT = Path(__file__).resolve().parents[2]

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
    args.argv = sys.argv[1:] if argv is None else argv
    return args


def measure_machine(args) -> dict:
    """The machine, with the command and the commit (records.made_header), and the matmul peak before the runs."""
    peak, _, _ = matmul_peak(args.peak_sizes, device=args.device)
    command, _, made = made_header("bench/throughput.py", args.argv)
    return {"command": command, "made": made, "description": describe_machine(), "caches": cache_sizes().describe(),
            "peak_before": peak, "peak_sizes": args.peak_sizes}


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
        print("\n".join([machine["command"], machine["made"], machine["description"], f"data {bin_dir}", *notes]))
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

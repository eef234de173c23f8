#!/usr/bin/env python
"""Where the time goes: one model's training step and beam-search decoding, timed in-process and profiled.

throughput.py gives the end-to-end figures (fairseq-train and fairseq-generate as a user runs them); this script
builds the same models through fairseq's own option parsing and times, on the same fixed batches,
  * training: forward + criterion + backward + Adam step (no validation, no checkpoint, no logging);
  * decoding: fairseq's SequenceGenerator (beam search) over the first sentences of a split;
and with --profile prints torch.profiler's operator table for a few of those steps (on a GPU, --device cuda:
sorted by the kernels' own GPU time, the host's time beside it).

    python scripts/bench/profile_step.py --models lstm,pgn_lstm [--data-bin runs/bench/lcsts_char/bin]
        [--batches 20] [--rounds 3] [--decode-sentences 100] [--block-ngram-repeat 3] [--profile]
        [--extra "--attention-dim 256"]

Any row of throughput.py's MODELS can be named, the --all-models rows included: e.g. where the time of Paulus
et al.'s options goes against pgn_lstm's, or of the agents:
    python scripts/bench/profile_step.py --models pgn_lstm,pgn_lstm_paulus2017,dca_lstm --profile

The models take turns over the same batches, round after round, so that a machine whose speed drifts (a
virtual machine, another job) affects them alike.

Model sizes, options and criterions are throughput.py's (emb 128, encoder 2 x 256, decoder 256).  Decoding uses the
models as built (untrained), at fixed length; --block-ngram-repeat N decodes with and without the project's
blocking, in turns, to show its cost.

How the figures move with the CPU's vector instructions: torch's own kernels and oneDNN (which runs the
encoder's plain LSTM calls) use AVX-512 where the CPU has it, MKL's matrix products use AVX2 on AMD CPUs.  To
see what a CPU without AVX-512 gives, run the same command with
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
"""
import argparse
import resource
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from scripts.bench.throughput_runners import MODELS, ROOT, SIZES


def build(model_name: str, data_bin: Path, max_tokens: int, extra: list, device: str = "cpu"):
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_plugins

    fairseq_plugins.register()  # it may have been imported before fairseq (throughput.py's machine.py)

    parser = options.get_training_parser()
    argv = [str(data_bin), "--user-dir", str(ROOT / "fairseq_plugins"), "--task", "summarization",
            *MODELS[model_name], *SIZES, "--optimizer", "adam", "--lr", "0.001", "--max-tokens", str(max_tokens),
            "--seed", "1", *(["--cpu"] if device == "cpu" else []), *extra]
    args = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(args)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model).to(device)
    criterion = task.build_criterion(cfg.criterion).to(device)
    return cfg, task, model, criterion


def move_to(batch, device: str):
    from fairseq import utils

    return utils.move_to_cuda(batch, device) if device != "cpu" else batch


def synchronize(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def activities(device: str) -> list:
    """What torch.profiler records: the host's operators, and the GPU's kernels on a GPU."""
    cpu = [torch.profiler.ProfilerActivity.CPU]
    return cpu if device == "cpu" else cpu + [torch.profiler.ProfilerActivity.CUDA]


def print_table(prof, device: str) -> None:
    """The operator table, by the time each operator takes itself: on the host, or on the GPU."""
    key = "self_cpu_time_total" if device == "cpu" else "self_cuda_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=25))


def train_batches(cfg, task, count: int, device: str = "cpu"):
    task.load_dataset("train")
    iterator = task.get_batch_iterator(
        dataset=task.dataset("train"), max_tokens=cfg.dataset.max_tokens, seed=1,
        max_positions=(10**5, 10**5), num_workers=0,
    ).next_epoch_itr(shuffle=True)
    return [move_to(batch, device) for _, batch in zip(range(count), iterator)]


class Trainer:
    """Forward + criterion + backward + Adam step of one model, timed per batch."""

    def __init__(self, model, criterion, device: str = "cpu"):
        self.model, self.criterion, self.device = model, criterion, device
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(self, batch):
        self.model.train()
        self.optimizer.zero_grad()
        loss, _, _ = self.criterion(self.model, batch)
        loss.backward()
        self.optimizer.step()
        synchronize(self.device)

    def words_per_second(self, batches) -> float:
        seconds = 0.0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for batch in batches:
            start = time.perf_counter()
            self.step(batch)
            seconds += time.perf_counter() - start
        self.page_faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / len(batches)
        return sum(batch["ntokens"] for batch in batches) / seconds

    def profile(self, batches):
        with torch.profiler.profile(activities=activities(self.device)) as prof:
            for batch in batches:
                self.step(batch)
        print_table(prof, self.device)


def time_decoding(cfg, task, model, sentences: int, beam: int, max_len: int, profile: bool, blocks=(0,),
                  rounds: int = 3, name: str = "decoding", device: str = "cpu"):
    """Beam search over the first SENTENCES of valid, fixed length MAX_LEN, once per n-gram blocking setting in
    BLOCKS (0: off), the settings taking turns for ROUNDS rounds; prints (labelled NAME) the median sentences/s of
    each, and with PROFILE the operator table of one batch per setting."""
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    samples = [dataset[i] for i in range(min(sentences, len(dataset)))]
    batches = [move_to(dataset.collater(samples[i:i + 32]), device) for i in range(0, len(samples), 32)]
    generators = {block: task.build_generator([model], argparse.Namespace(
        beam=beam, max_len_a=0, max_len_b=max_len, min_len=max_len, block_ngram_repeat=block)) for block in blocks}
    model.eval()

    def run(generator):
        with torch.no_grad():
            for batch in batches:
                task.inference_step(generator, [model], batch)
        synchronize(device)

    speeds = {block: [] for block in blocks}
    for generator in generators.values():
        run(generator)  # warm-up
    for _ in range(rounds):
        for block, generator in generators.items():
            start = time.perf_counter()
            run(generator)
            speeds[block].append(len(samples) / (time.perf_counter() - start))
    for block in blocks:
        label = f"blocking n={block}" if block else "no blocking"
        print(f"{name}: {len(samples)} sentences, beam {beam}, length {max_len}, {label}: "
              f"{statistics.median(speeds[block]):.2f} sentences/s (rounds "
              f"{', '.join(f'{x:.1f}' for x in speeds[block])})")
    if profile:
        for block, generator in generators.items():
            print(f"{name}: profile of one batch, {'blocking n=%d' % block if block else 'no blocking'}:")
            with torch.profiler.profile(activities=activities(device)) as prof:
                task.inference_step(generator, [model], batches[0])
            print_table(prof, device)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="pgn_lstm", help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--data-bin", type=Path, default=ROOT / "runs" / "bench" / "lcsts_char" / "bin")
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--batches", type=int, default=20, help="training batches per round (0: no training)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="training rounds; the models take turns, and the median round is reported")
    parser.add_argument("--decode-sentences", type=int, default=100, help="0: no decoding")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-len", type=int, default=40)
    parser.add_argument("--block-ngram-repeat", type=int, default=0,
                        help="also decode with the project's n-gram blocking of this n, in turns with none")
    parser.add_argument("--extra", default="", help="more fairseq-train options for every model")
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's operator tables")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args(argv)
    if not (args.data_bin / "dict.src.txt").exists():
        sys.exit(f"profile_step: no binarized data in {args.data_bin} (run throughput.py once, or give --data-bin)")
    names = args.models.split(",")
    built = {name: build(name, args.data_bin, args.max_tokens, shlex.split(args.extra), args.device) for name in names}
    for name, (_, _, model, _) in built.items():
        print(f"{name}: {sum(p.numel() for p in model.parameters()):,} parameters, {torch.get_num_threads()} threads")
    if args.batches > 0:
        cfg, task = built[names[0]][:2]
        batches = train_batches(cfg, task, args.batches + 1, args.device)
        trainers = {name: Trainer(model, criterion, args.device) for name, (_, _, model, criterion) in built.items()}
        for trainer in trainers.values():
            trainer.step(batches[0])  # warm-up
        rounds = {name: [] for name in names}
        for _ in range(args.rounds):
            for name, trainer in trainers.items():
                rounds[name].append(trainer.words_per_second(batches[1:]))
        for name in names:
            print(f"training {name}: {statistics.median(rounds[name]):.1f} target words/s (median of rounds "
                  f"{', '.join(f'{r:.0f}' for r in rounds[name])}); {trainers[name].page_faults:.0f} page faults "
                  f"per step")
            if args.profile:
                trainers[name].profile(batches[1:4])
    if args.decode_sentences > 0:
        for name, (cfg, task, model, _) in built.items():
            blocks = (0, args.block_ngram_repeat) if args.block_ngram_repeat else (0,)
            time_decoding(cfg, task, model, args.decode_sentences, args.beam, args.max_len, args.profile, blocks,
                          args.rounds, name=f"decoding {name}", device=args.device)


if __name__ == "__main__":
    main()

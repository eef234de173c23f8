#!/usr/bin/env python
"""Speed of self-critical training: the ROUGE reward, and one RL update against one ML update.

1. The reward (default).  ROUGE-L F1 of B hypotheses against B references of random token ids (lengths drawn
   between L/2 and L, ids from a vocabulary of --vocab words so that matches are frequent), timed per batch:
     python      a plain Python ROUGE-L: the O(n m) LCS table, row by row, one document after the other;
     rouge_python the project's exact ROUGE (scoring/rouge_python.py) on the ids written as words;
     torch       scoring/rouge_reward.py, the batched anti-diagonal LCS (the GPU path);
     bits        scoring/rouge_reward.py, the bit-parallel LCS on Python integers (the CPU default).
   Every method's scores are checked to be identical before timing.

     python scripts/bench/reward_speed.py [--batch-sizes 32,64] [--lengths 20,60,100] [--vocab 200] [--repeats 5]

2. The update (--updates).  ``compare_update_speed`` trains two copies of the same model on the same batches,
   one with the ML criterion (focal_copy_coverage) and one with self_critical_rouge, taking turns, and times
   forward + backward + Adam step; the RL update is split into its phases (the shared encoder pass, decoding
   y^s and y^g, the reward, the ML forward pass, the sample's teacher-forced forward pass, and backward + step).
   The RL/ML ratio is reported against its target, at most RL_TARGET (2).  --score-in-sampling-too
   also times, taking turns with the other two, RL updates with --rl-score-in-sampling (y^s scored with
   gradient in the steps that sample it: its forward pass is then part of ``decode``).  Start from an ML
   checkpoint (--checkpoint) for realistic sample lengths: a fresh model samples up to --rl-max-len-b tokens.

     python scripts/bench/reward_speed.py --updates --data-bin DATA/bin [--checkpoint ML/checkpoint_last.pt]
         [--arch pgn_lstm_small] [--extra "--dropout 0.1"] [--batches 10] [--rounds 2] [--max-tokens 4000]
         [--rl-args "--rl-max-len-b 40"] [--score-in-sampling-too] [--runs 3]

3. The floor (--floor).  ``floor_speed`` times the parts no RL update can do without, each on its own: the
   ML update, one teacher-forced decoder pass over y^s (forward and backward) and the greedy decode, and reports
   (ML + teacher-forced + greedy) / ML, the least RL/ML ratio of an update built from these parts as they are on
   this machine.  The teacher-forced pass pads every sample to the batch's longest; the padding's share is
   printed (a pass that skipped it would lower the floor).  Also timed: y^s decoded with gradient in its own
   steps (--rl-score-in-sampling's way), which skips the padding but pays for stepping with gradient.

     python scripts/bench/reward_speed.py --floor --data-bin DATA/bin [--checkpoint ML/checkpoint_best.pt]
         [the options of --updates]

   scripts/bench/throughput.py's RL row can call ``compare_update_speed`` directly (it imports
   ``scripts.bench.reward_speed``): it returns the figures as a dict (see its docstring).

Every run prints the command, the commit and the machine first (scripts/experiments/records.py made_header, and
machine.py's description with the thread count).  Set OMP_NUM_THREADS=1 on a machine shared with other jobs.
"""
import argparse
import copy
import dataclasses
import random
import shlex
import statistics
import time
from pathlib import Path

from scripts.bench.machine import describe_machine
from scripts.experiments.records import made_header

ROOT = Path(__file__).resolve().parents[2]

PAD, EOS, UNK = 1, 2, 3
RL_TARGET = 2.0  # one self_critical_rouge update costs at most 2 x one ML update


# ---------------------------------------------------------------------------------------------------- reward
def python_rouge_l(hyp, ref) -> float:
    """ROUGE-L F1 of two id lists by the textbook LCS table (plain Python)."""
    if not hyp or not ref:
        return 0.0
    previous = [0] * (len(ref) + 1)
    for token in hyp:
        current = [0]
        for j, other in enumerate(ref):
            current.append(previous[j] + 1 if token == other else max(previous[j + 1], current[j]))
        previous = current
    lcs = previous[-1]
    recall, precision = lcs / len(ref), lcs / len(hyp)
    return precision * recall / (0.5 * precision + 0.5 * recall) if precision + recall > 0 else 0.0


def random_batch(batch_size: int, length: int, vocab: int, seed: int):
    """B hypotheses and B references: lists of ids and the same as padded tensors with a final </s>."""
    import torch

    rng = random.Random(seed)
    rows = []
    for _ in range(2 * batch_size):
        rows.append([rng.randrange(4, 4 + vocab) for _ in range(rng.randint(max(1, length // 2), length))])
    hyps, refs = rows[:batch_size], rows[batch_size:]

    def tensor(lists):
        width = max(len(r) for r in lists) + 1
        return torch.tensor([r + [EOS] + [PAD] * (width - len(r) - 1) for r in lists])

    return hyps, refs, tensor(hyps), tensor(refs)


def reward_methods():
    from fairseq_plugins.scoring.rouge_python import RougeScorer
    from fairseq_plugins.scoring.rouge_reward import RougeReward

    scorer = RougeScorer(stem=False, rouge_types=("rougeL",))
    torch_reward = RougeReward({"rougeL": 1.0}, PAD, EOS, UNK, lcs_backend="torch")
    bits_reward = RougeReward({"rougeL": 1.0}, PAD, EOS, UNK, lcs_backend="bits")

    def words(ids):
        return " ".join(f"w{t}" for t in ids)

    return {
        "python": lambda h, r, th, tr: [python_rouge_l(a, b) for a, b in zip(h, r)],
        "rouge_python": lambda h, r, th, tr: [scorer.score(words(b), words(a))["rougeL"].fmeasure
                                              for a, b in zip(h, r)],
        "torch": lambda h, r, th, tr: torch_reward(th, tr).tolist(),
        "bits": lambda h, r, th, tr: bits_reward(th, tr).tolist(),
    }


def time_rewards(batch_sizes, lengths, vocab: int, repeats: int) -> list:
    """Median seconds per batch of every method, for every (batch size, length)."""
    methods = reward_methods()
    rows = []
    for batch_size in batch_sizes:
        for length in lengths:
            batch = random_batch(batch_size, length, vocab, seed=batch_size * 1000 + length)
            reference = methods["python"](*batch)
            seconds = {}
            for name, method in methods.items():
                scores = method(*batch)
                if any(abs(a - b) > 1e-12 for a, b in zip(scores, reference)):
                    raise SystemExit(f"reward_speed: {name} disagrees with the plain Python ROUGE-L")
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    method(*batch)
                    times.append(time.perf_counter() - start)
                seconds[name] = statistics.median(times)
            rows.append({"batch_size": batch_size, "length": length, "seconds": seconds})
    return rows


def print_rewards(rows, vocab: int) -> None:
    names = list(rows[0]["seconds"])
    print(f"ROUGE-L reward, milliseconds per batch (median); ids from {vocab} words, lengths L/2..L")
    print(f"{'batch':>6} {'L':>5} " + " ".join(f"{n:>13}" for n in names) + "   speed-up of bits, torch vs python")
    for row in rows:
        s = row["seconds"]
        print(f"{row['batch_size']:>6} {row['length']:>5} " + " ".join(f"{1000 * s[n]:>13.2f}" for n in names)
              + f"   {s['python'] / s['bits']:>6.1f}x {s['python'] / s['torch']:>6.1f}x")


# ---------------------------------------------------------------------------------------------------- update
def build(data_bin: Path, arch: str, criterion_args: list, extra: list, max_tokens: int):
    """cfg, task, model and criterion through fairseq's own option parsing (as fairseq-train builds them)."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_plugins

    fairseq_plugins.register()
    argv = [str(data_bin), "--user-dir", str(ROOT / "fairseq_plugins"), "--task", "summarization", "--arch", arch,
            *criterion_args, "--optimizer", "adam", "--lr", "0.0001", "--max-tokens", str(max_tokens),
            "--seed", "1", "--cpu", *extra]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    cfg = convert_namespace_to_omegaconf(args)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    return cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


def load_weights(model, checkpoint) -> None:
    """The model's weights from a fairseq checkpoint file (nothing when ``checkpoint`` is None)."""
    if checkpoint:
        from fairseq import checkpoint_utils

        model.load_state_dict(checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))["model"], strict=True)


def first_batches(cfg, task, count: int) -> list:
    task.load_dataset("train")
    iterator = task.get_batch_iterator(
        dataset=task.dataset("train"), max_tokens=cfg.dataset.max_tokens, seed=1, max_positions=(10**5, 10**5),
        num_workers=0).next_epoch_itr(shuffle=True)
    return [batch for _, batch in zip(range(count), iterator)]


def compare_update_speed(data_bin, arch: str = "pgn_lstm_small", checkpoint=None, extra=(), rl_args=(),
                         ml_args=(), batches: int = 10, rounds: int = 2, max_tokens: int = 4000,
                         score_in_sampling_too: bool = False) -> dict:
    """One RL update (self_critical_rouge) against one ML update (focal_copy_coverage), same model and batches.

    Two copies of the model (from ``checkpoint`` if given) train on the same ``batches`` first batches of the
    training split, taking turns batch by batch, ``rounds`` times over; a step is forward + backward + Adam.
    Returns {"ml": ..., "rl": ...}, each with updates_per_s, summaries_per_s (documents of the batches per
    second) and target_words_per_s; "ratio" (seconds per RL update / seconds per ML update); "rl_phases":
    seconds per RL update in encode, decode, reward, ml_forward, rl_forward, backward_step; "sample_len" and
    "greedy_len" (mean summary tokens of y^s, y^g) and "reference_len".  ``score_in_sampling_too`` adds a third
    copy, "rl_score_in_sampling", whose criterion has --rl-score-in-sampling, taking turns with the other two,
    and its "ratio_score_in_sampling"."""
    import torch

    ml_criterion_args = ["--criterion", "focal_copy_coverage", *ml_args]
    cfg, task, model, ml_criterion = build(Path(data_bin), arch, ml_criterion_args, list(extra), max_tokens)
    _, _, _, rl_criterion = build(Path(data_bin), arch, ["--criterion", "self_critical_rouge", "--rl-timing",
                                                         *ml_args, *rl_args], list(extra), max_tokens)
    load_weights(model, checkpoint)
    data = first_batches(cfg, task, batches)
    models = {"ml": model, "rl": copy.deepcopy(model)}
    criteria = {"ml": ml_criterion, "rl": rl_criterion}
    if score_in_sampling_too:
        models["rl_score_in_sampling"] = copy.deepcopy(model)
        criteria["rl_score_in_sampling"] = build(Path(data_bin), arch, [
            "--criterion", "self_critical_rouge", *ml_args, *rl_args, "--rl-score-in-sampling"], list(extra),
            max_tokens)[3]
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4) for name, m in models.items()}
    seconds = dict.fromkeys(models, 0.0)
    phases = dict.fromkeys(("encode", "decode", "reward", "ml_forward", "rl_forward", "backward_step"), 0.0)
    lengths = {"sample_len": 0, "greedy_len": 0, "docs": 0}
    steps = 0
    for round_index in range(rounds + 1):  # round 0 warms up
        for batch in data:
            for name in models:
                models[name].train()
                optimizers[name].zero_grad()
                start = time.perf_counter()
                loss, _, log = criteria[name](models[name], batch)
                forward_done = time.perf_counter()
                loss.backward()
                optimizers[name].step()
                end = time.perf_counter()
                if round_index == 0:
                    continue
                seconds[name] += end - start
                if name == "rl":
                    phases["encode"] += log["t_encode"]
                    phases["decode"] += log["t_decode"]
                    phases["reward"] += log["t_reward"]
                    phases["ml_forward"] += log["t_ml"]
                    phases["rl_forward"] += log["t_rl"]
                    phases["backward_step"] += end - forward_done
                    for key in ("sample_len", "greedy_len"):
                        lengths[key] += log[key]
                    lengths["docs"] += log["rl_docs"]
            steps += round_index > 0
    docs = sum(batch["target"].size(0) for batch in data) * rounds
    words = sum(batch["ntokens"] for batch in data) * rounds
    result = {name: {"updates_per_s": steps / seconds[name], "summaries_per_s": docs / seconds[name],
                     "target_words_per_s": words / seconds[name]} for name in seconds}
    result["ratio"] = seconds["rl"] / seconds["ml"]
    if score_in_sampling_too:
        result["ratio_score_in_sampling"] = seconds["rl_score_in_sampling"] / seconds["ml"]
    result["rl_phases"] = {key: value / steps for key, value in phases.items()}
    result["ml_seconds_per_update"] = seconds["ml"] / steps
    result["sample_len"] = lengths["sample_len"] / max(lengths["docs"], 1)
    result["greedy_len"] = lengths["greedy_len"] / max(lengths["docs"], 1)
    result["reference_len"] = sum(int(b["target"].ne(PAD).sum()) - b["target"].size(0) for b in data) / (
        docs / rounds)
    result["batches"], result["rounds"] = batches, rounds
    return result


def floor_speed(data_bin, arch: str = "pgn_lstm_small", checkpoint=None, extra=(), rl_args=(), ml_args=(),
                batches: int = 10, rounds: int = 2, max_tokens: int = 4000) -> dict:
    """The least an RL update built from today's parts can cost, against one ML update: the ML update, plus one
    teacher-forced decoder pass (forward and backward) over y^s, plus the greedy decode of y^g, each timed apart
    on the same batches (the encoder's share is in the ML update: the criterion shares one encoder pass).

    Also times y^s decoded with gradient in its own steps (--rl-score-in-sampling's way, forward and backward),
    which skips the teacher-forced pass's padding but pays for stepping with gradient.  The samples, their lengths and
    the greedy summaries are the RL criterion's own (its --rl-max-len-b, blocking, dropout off).  Returns seconds
    per batch: "ml_update", "teacher_forced", "scored_sampling", "greedy", "floor_ratio" =
    (ml_update + teacher_forced + greedy) / ml_update, and "padding_share": the share of the teacher-forced
    pass's B x T positions that lie after a sample's end (computed, then masked out)."""
    import torch

    from fairseq_plugins.generation.sampling import encoder_input, free_run

    cfg, task, model, ml_criterion = build(Path(data_bin), arch, ["--criterion", "focal_copy_coverage", *ml_args],
                                           list(extra), max_tokens)
    rl_criterion = build(Path(data_bin), arch, ["--criterion", "self_critical_rouge", *ml_args, *rl_args],
                         list(extra), max_tokens)[3]
    load_weights(model, checkpoint)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    seconds = dict.fromkeys(("ml_update", "teacher_forced", "scored_sampling", "greedy"), 0.0)
    positions = {"decoded": 0, "teacher_forced": 0}

    def timed(key, work):
        start = time.perf_counter()
        out = work()
        if round_index > 0:
            seconds[key] += time.perf_counter() - start
        return out

    data = first_batches(cfg, task, batches)
    for round_index in range(rounds + 1):  # round 0 warms up
        for batch in data:
            model.train()
            optimizer.zero_grad()
            timed("ml_update", lambda: (ml_criterion(model, batch)[0].backward(), optimizer.step()))
            optimizer.zero_grad()
            model.eval()  # the criterion decodes and scores y^s with dropout off (its default)
            with torch.no_grad():
                encoder_out = model.encoder(**encoder_input(batch["net_input"]))
            max_len = rl_criterion.max_lengths(model, batch)
            rows = max_len.size(0)
            with torch.no_grad():
                timed("greedy", lambda: free_run(model, batch["net_input"], torch.ones(rows, dtype=torch.bool),
                                                 max_len, encoder_out=encoder_out, blocker=rl_criterion.blocker))
            scored = timed("scored_sampling", lambda: free_run(
                model, batch["net_input"], torch.zeros(rows, dtype=torch.bool), max_len, encoder_out=encoder_out,
                score=True))
            timed("scored_sampling", lambda: scored.log_probs.sum().backward())
            if round_index > 0:
                positions["decoded"] += int(scored.lengths.sum())
                positions["teacher_forced"] += scored.tokens.numel()  # B x T: every row to the longest one
            timed("teacher_forced", lambda: rl_criterion.sample_log_probs(
                model, batch, dataclasses.replace(scored, scored=False), encoder_out).sum().backward())
    steps = len(data) * rounds
    result = {key: value / steps for key, value in seconds.items()}
    result["floor_ratio"] = (result["ml_update"] + result["teacher_forced"] + result["greedy"]) / result["ml_update"]
    result["padding_share"] = 1.0 - positions["decoded"] / max(positions["teacher_forced"], 1)
    return result


def print_floor(result: dict) -> None:
    ml = result["ml_update"]
    print(f"an ML update {1000 * ml:.0f} ms; over y^s: a teacher-forced pass (forward + backward) "
          f"{1000 * result['teacher_forced']:.0f} ms, decoded with gradient in its own steps "
          f"{1000 * result['scored_sampling']:.0f} ms; the greedy decode {1000 * result['greedy']:.0f} ms; "
          f"padding: {100 * result['padding_share']:.0f} % of the teacher-forced pass's positions")
    print(f"floor of an RL update (ML update + teacher-forced y^s + greedy decode) / ML update: "
          f"{result['floor_ratio']:.2f}x ({target_text(result['floor_ratio'])})", flush=True)


def print_medians(results: list) -> None:
    """The RL/ML ratios of several runs, and their medians."""
    for key, label in (("ratio", "RL update / ML update"),
                       ("ratio_score_in_sampling", "RL update with --rl-score-in-sampling / ML update")):
        if key in results[0]:
            ratios = [r[key] for r in results]
            median = statistics.median(ratios)
            target = f" ({target_text(median)})" if key == "ratio" else ""
            print(f"{label}, median of {len(ratios)} runs: {median:.2f}x{target} (runs "
                  f"{', '.join(f'{x:.2f}' for x in ratios)})")


def print_updates(result: dict) -> None:
    print(f"one update on the same {result['batches']} batches x {result['rounds']} rounds (after a warm-up round)")
    print(f"{'criterion':<20} {'updates/s':>10} {'summaries/s':>12} {'target words/s':>15}")
    for name, label in (("ml", "focal_copy_coverage"), ("rl", "self_critical_rouge"),
                        ("rl_score_in_sampling", "  y^s scored sampling")):
        if name in result:
            r = result[name]
            print(f"{label:<20} {r['updates_per_s']:>10.2f} {r['summaries_per_s']:>12.1f} "
                  f"{r['target_words_per_s']:>15.0f}")
    print(f"RL update / ML update: {result['ratio']:.2f}x ({target_text(result['ratio'])})")
    if "ratio_score_in_sampling" in result:
        print(f"RL update with --rl-score-in-sampling / ML update: {result['ratio_score_in_sampling']:.2f}x")
    total = sum(result["rl_phases"].values())
    print("where an RL update's time goes: " + ", ".join(
        f"{key} {1000 * value:.0f} ms ({100 * value / total:.0f}%)" for key, value in result["rl_phases"].items())
        + f"; an ML update: {1000 * result['ml_seconds_per_update']:.0f} ms")
    print(f"mean summary tokens: sample {result['sample_len']:.1f}, greedy {result['greedy_len']:.1f}, "
          f"reference {result['reference_len']:.1f}", flush=True)


def header_lines(argv) -> list:
    """What a run prints first: its command and commit (records.made_header), then the machine and its threads."""
    return [*made_header("bench/reward_speed.py", argv), f"Machine: {describe_machine()}", ""]


def target_text(ratio: float) -> str:
    """The target for an RL/ML ratio, met or missed."""
    return f"target <= {RL_TARGET:g}: {'met' if ratio <= RL_TARGET else 'MISSED'}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="32,64")
    parser.add_argument("--lengths", default="20,60,100")
    parser.add_argument("--vocab", type=int, default=200, help="ids are drawn from this many words")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--updates", action="store_true", help="time RL updates against ML updates instead")
    parser.add_argument("--data-bin", type=Path, help="--updates: binarized data (DATA/bin of preprocess.sh)")
    parser.add_argument("--checkpoint", type=Path, help="--updates: start both copies from this ML checkpoint")
    parser.add_argument("--arch", default="pgn_lstm_small")
    parser.add_argument("--extra", default="", help="more model options, e.g. \"--dropout 0\"")
    parser.add_argument("--rl-args", default="--rl-max-len-b 40", help="self_critical_rouge options")
    parser.add_argument("--ml-args", default="--focal-alpha 1 --focal-gamma 0",
                        help="focal_copy_coverage options (both criterions)")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=1,
                        help="--updates: this many runs, each from a fresh copy of the model, then the medians")
    parser.add_argument("--score-in-sampling-too", action="store_true",
                        help="--updates: also time RL updates with --rl-score-in-sampling, taking turns with the "
                             "other two")
    parser.add_argument("--floor", action="store_true",
                        help="time the parts an RL update cannot do without, against an ML update (floor_speed)")
    args = parser.parse_args(argv)
    print("\n".join(header_lines(argv)), flush=True)
    if args.floor:
        if args.data_bin is None:
            parser.error("--floor needs --data-bin")
        ratios = []
        for run in range(args.runs):
            result = floor_speed(args.data_bin, args.arch, args.checkpoint, shlex.split(args.extra),
                                 shlex.split(args.rl_args), shlex.split(args.ml_args), args.batches, args.rounds,
                                 args.max_tokens)
            print_floor(result)
            ratios.append(result["floor_ratio"])
        if args.runs > 1:
            print(f"floor, median of {args.runs} runs: {statistics.median(ratios):.2f}x (runs "
                  f"{', '.join(f'{x:.2f}' for x in ratios)})")
        return
    if args.updates:
        if args.data_bin is None:
            parser.error("--updates needs --data-bin")
        results = []
        for run in range(args.runs):
            if args.runs > 1:
                print(f"run {run + 1} of {args.runs}", flush=True)
            results.append(compare_update_speed(
                args.data_bin, args.arch, args.checkpoint, shlex.split(args.extra), shlex.split(args.rl_args),
                shlex.split(args.ml_args), args.batches, args.rounds, args.max_tokens, args.score_in_sampling_too))
            print_updates(results[-1])
        if args.runs > 1:
            print_medians(results)
        return
    rows = time_rewards([int(b) for b in args.batch_sizes.split(",")], [int(n) for n in args.lengths.split(",")],
                        args.vocab, args.repeats)
    print_rewards(rows, args.vocab)


if __name__ == "__main__":
    main()

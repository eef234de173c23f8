"""The measurements of scripts/bench/throughput.py beyond the rows' own speed: the RL update against an ML
update, the int8 decoder against fp32, and each row's share of the machine's measured peak (MFU)."""
import os
import statistics
import sys
from pathlib import Path

from scripts.bench.throughput_runners import (NUMBERED_HYPOTHESIS, REFERENCE, RL_ML_ARGS, ROOT, SIZES, fail,
                                              fairseq_decode_command, parse_generate, run_measured)


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
    from scripts.bench.reward_speed import compare_update_speed

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

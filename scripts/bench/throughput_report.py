"""The report of scripts/bench/throughput.py: the table of every row, the RL and int8 lines, and each ratio
against its target."""
import statistics
from pathlib import Path

from scripts.bench.flops import DCA_AGENTS, DCA_LAYERS
from scripts.bench.reward_speed import RL_TARGET  # an RL update costs at most 2 x an ML update
from scripts.bench.throughput_runners import LENGTHS, PAULUS_TARGET, QUANTIZE_TARGET, REFERENCE, RL_ML_ARGS, STOCK


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
        machine["command"],
        machine["made"],
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

"""A newcomer's short-target corpus, before and after the defaults that follow the corpus.

    python scripts/experiments/short_targets.py [--corpus cnndm|lcsts] [--work WORK] [--seeds 1 2]
        [--before-updates 600] [--out docs/results/short_targets.md] [--reuse-stale]

The corpora:
  cnndm   (corpora.cnndm_lead_headline_raw) 9,000 training pairs of a CNN/DailyMail lead (whole sentences, at most
          120 tokens) and its first human-written highlight, 500 validation and 500 test pairs, converted with
          summ-convert jsonl and prepared with the default config (./preprocess.sh RAW DATA);
  lcsts   (corpora.lcsts_raw) LCSTS PART_II, 8,666 training pairs of a Weibo post and its author's summary, 500 and
          500 held out, prepared with the default config's settings in jieba words (ZH_WORDS below): a tenth of
          the summaries' words are neither in the 10,000-word vocabulary nor in their post.
For each seed:
  before  ./train.sh DATA MODEL --max-update 600 --eos-attention renormalise (the default budget before it followed
          the corpus, and the copy side of before the pointer sentinel), decoded as the defaults were then:
          --allow-unk --block-ngram-repeat 0;
  after   ./train.sh DATA MODEL with nothing else (scitldr_small's 10 epochs, the sentinel), decoded with the
          defaults (no <unk>, no repeated trigram).
Controls: each model with the other decoding, the before model with --min-len 1 (is the config's --min-len 5
behind the stutter?), the references' own repetition figures and LEAD-k.  Every decode is ./generate.sh --split
test --no-detok (checkpoint_best.pt); ROUGE is official ROUGE-1.5.5 (summ-rouge), the paired interval a 95 %
bootstrap over the test documents per seed, and the verdict the project's rule (lib.verdict).  The stutter's
cause: each model's summaries are teacher-forced through it (Summarizer.summarize_with_details) to read, at the
second output token, the share of its attention that the first token's attention already held
(sum_i min(a_1i, a_2i)) and p_gen (See eq 8).  The first seed's after model also decodes the test documents
through every other path (generate.sh --input, fairseq-generate, the hub, summ-serve) to count <unk>.
A finished training is reused when its record matches (records.py); the report is rebuilt every run, and what it
is made of (summaries, per-document scores, terminals) is packed beside it in docs/results/NAME/run.tar.xz.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Sequence

from fairseq_plugins.scoring import summary_stats
from scripts.experiments.corpora import cnndm_lead_headline_raw, lcsts_raw
from scripts.experiments.lib import (ROOT, Experiment, lead, official_rouge, pack_beside, paired_intervals,
                                     read_lines, shown_intervals, verdict, write_lines, write_report)
from scripts.experiments.records import made_header, read_record, train_or_reuse, training_record

ZH_WORDS = """source "{root}/configs/scitldr_small.conf"
# scitldr_small with Chinese words (jieba) as its units, its vocabulary size and lengths kept: a newcomer's
# Chinese corpus prepared with the default config's settings
PREP_ARGS=(--lang zh --unit jieba --vocab-size 10000 --max-source-len 300 --max-target-len 60)
"""
# corpus -> (what it is, the function writing its raw folder, its config's text or None for the default config,
# the language of its ROUGE, the size of its LEAD baseline: sentences (English) or characters (Chinese))
CORPORA = {
    "cnndm": ("CNN/DailyMail leads -> first highlight (9,000 / 500 / 500 pairs), `./preprocess.sh` with the "
              "default config", cnndm_lead_headline_raw, None, "en", 1),
    "lcsts": ("LCSTS PART_II posts -> their authors' summaries in jieba words (8,666 / 500 / 500 pairs), "
              "`./preprocess.sh -c zh_words.conf` (the default config with `--lang zh --unit jieba`)",
              lcsts_raw, ZH_WORDS, "zh", 20),
}
BEFORE_UPDATES = 600  # the default budget before it followed the corpus
OLD_DECODING = ["--allow-unk", "--block-ngram-repeat", "0"]
DECODINGS = {"old": OLD_DECODING, "new": [], "old_min1": OLD_DECODING + ["--min-len", "1"]}
ROWS = [("before", "old"), ("before", "new"), ("before", "old_min1"), ("after", "old"), ("after", "new")]
PAIRS = [(("before", "old"), ("after", "new"), "before -> after (training and decoding)"),
         (("before", "new"), ("after", "new"), "before -> after training, both decoded with the defaults"),
         (("after", "old"), ("after", "new"), "old -> new decoding, 10-epoch model"),
         (("before", "old"), ("before", "new"), "old -> new decoding, 600-update model")]
# what the report is made of, without checkpoints or data: docs/results/NAME/run.tar.xz
ARCHIVED = ("seed*/*.sum", "seed*/*.json", "logs/rouge_*.per_doc.tsv", "logs/rouge_*.out", "logs/*.terminal",
            "lead*.txt")
STUTTER = [("unk", "summaries with a literal <unk>"), ("doubled_first", "first token doubled %"),
           ("with_immediate_repeat", "summaries with an immediate repeat %"),
           ("with_repeat", "summaries with a repeated trigram %"), ("tokens", "mean length, tokens")]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="cnndm")
    parser.add_argument("--work", type=Path, help="default: runs/short_targets (cnndm), runs/short_targets_lcsts")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--before-updates", type=int, default=BEFORE_UPDATES)
    parser.add_argument("--out", type=Path, help="default: docs/results/short_targets.md (cnndm), "
                        "docs/results/short_targets_lcsts.md")
    parser.add_argument("--reuse-stale", action="store_true",
                        help="reuse finished trainings made by older code (the report names their commit)")
    args = parser.parse_args()
    suffix = "" if args.corpus == "cnndm" else f"_{args.corpus}"
    args.work = args.work or ROOT / "runs" / f"short_targets{suffix}"
    args.out = args.out or ROOT / "docs" / "results" / f"short_targets{suffix}.md"
    return args


def config_of(exp: Experiment, corpus: str) -> str:
    """The corpus's config: scitldr_small, or its own file in WORK."""
    text = CORPORA[corpus][2]
    if text is None:
        return "scitldr_small"
    path = exp.work / "zh_words.conf"
    path.write_text(text.format(root=ROOT), encoding="utf-8")
    return str(path)


def prepared(exp: Experiment, corpus: str) -> Path:
    """WORK/data, made as a user makes it: the corpus converted, then ./preprocess.sh with its config."""
    data = exp.work / "data"
    if not (data / "bin" / "dict.src.txt").is_file():
        CORPORA[corpus][1](exp, exp.work / "raw")
        shutil.rmtree(data, ignore_errors=True)
        config = [] if CORPORA[corpus][2] is None else ["-c", config_of(exp, corpus)]
        exp.run(["./preprocess.sh", *config, exp.work / "raw", data], "preprocess.terminal")
    return data


def as_a_user(exp: Experiment) -> Experiment:
    """The experiment's environment as a user has it: train.sh's quiet default (its log stays in SAVE_DIR)."""
    user = Experiment(exp.name, exp.work)
    user.env = {key: value for key, value in exp.env.items() if key != "TRAIN_VERBOSE"}
    return user


def seed_options(seed: int) -> List[str]:
    return [] if seed == 1 else ["--seed", str(seed)]  # the config's seed is 1


def trained(exp: Experiment, config: str, data: Path, seed: int, before_updates: int, stale: bool = False
            ) -> Dict[str, Path]:
    """The before model (the old budget and copy side) and the after model (./train.sh with nothing else)."""
    user, root = as_a_user(exp), exp.work / f"seed{seed}"
    models = {"before": root / "before", "after": root / "after"}
    options = {"before": ["--max-update", str(before_updates), "--eos-attention", "renormalise", *seed_options(seed)],
               "after": seed_options(seed)}
    for name, model in models.items():
        train_or_reuse(user, f"seed {seed} {name}", model, f"train_{seed}_{name}.terminal",
                       training_record(config, options[name], data), [ROOT / "train.sh", data, model, *options[name]],
                       reuse_stale=stale)
    return models


def decoded(exp: Experiment, data: Path, model: Path, name: str, decoding: str) -> Path:
    summaries = model.parent / f"{name}.sum"
    if not summaries.is_file() or summaries.stat().st_mtime < (model / "checkpoint_best.pt").stat().st_mtime:
        exp.run(["./generate.sh", "--split", "test", "--no-detok", "--output", summaries, data, model,
                 *DECODINGS[decoding]], f"generate_{name}.log")
    return summaries


def figures(exp: Experiment, data: Path, summaries: Path, name: str, lang: str) -> Dict:
    """Official ROUGE-1/2/L, per-document scores for the paired intervals, and the stutter figures."""
    lines = read_lines(summaries)
    per_doc = exp.logs / f"rouge_{name}.per_doc.tsv"
    exp.run(["summ-rouge", "--refs", data / "ref" / "test.tgt", "--hyps", summaries, "--lang", lang,
             "--per-doc", per_doc], f"rouge_{name}.per_doc.log")
    return {"rouge": official_rouge(exp, data / "ref" / "test.tgt", summaries, lang, name), "per_doc": str(per_doc),
            "stutter": stutter_figures(lines, model_tokens(data)), "documents": len(lines)}


def lead_figures(exp: Experiment, data: Path, corpus: str) -> Dict:
    """LEAD-k of the raw test sources (lib.lead), scored as the models are: the trivial baseline of the table."""
    _, _, _, lang, size = CORPORA[corpus]
    summaries = exp.work / f"lead{size}.txt"
    write_lines(summaries, lead(read_lines(exp_raw(data) / "test.src"), lang, size))
    return {"name": f"LEAD-{size}" + (" characters" if lang == "zh" else ""),
            "rouge": official_rouge(exp, data / "ref" / "test.tgt", summaries, lang, "lead")}


def stutter_figures(lines: Sequence[str], tokenize=str.split) -> Dict[str, float]:
    """summ-analyze's repetition and length figures of the summaries in the model's tokens (``tokenize``: the
    --no-detok output split at spaces; a Chinese model's output, written without spaces, through its prep.json
    tokenizer with each literal <unk> kept as one token), and how many summaries hold a literal <unk>."""
    units = [" ".join(tokenize(line.replace(UNK, UNK_SLOT))).replace(UNK_SLOT, UNK) for line in lines]
    counts = summary_stats.aggregate([summary_stats.summary_counts(text, "en") for text in units])
    stutter = {key: counts.get(key, {}).get("pooled") or 0.0 for key, _ in STUTTER[1:]}
    stutter["unk"] = holding_unk(lines)
    return stutter


UNK, UNK_SLOT = "<unk>", "\ue000"  # a private-use character holds <unk>'s place through a tokenizer


def model_tokens(data: Path):
    """The tokens of a --no-detok summary: split at spaces, or through prep.json's tokenizer for Chinese."""
    from fairseq_plugins.text.prepare import load_prep, tokenizer_from_prep

    prep, prep_dir = load_prep(str(data / "prep.json"))
    if prep["settings"]["lang"] != "zh":
        return str.split
    return tokenizer_from_prep(prep, prep_dir, str(data / "prep.json"))


def reference_figures(data: Path) -> Dict[str, float]:
    """The stutter figures of the test references in the model's tokens (prep.json's tokenizer, tokens joined by
    spaces as --no-detok writes summaries).  PTB quotes (`` '') are two tokens each."""
    from fairseq_plugins.text.prepare import load_prep, tokenizer_from_prep

    prep, prep_dir = load_prep(str(data / "prep.json"))
    tokenizer = tokenizer_from_prep(prep, prep_dir, str(data / "prep.json"))
    return stutter_figures([" ".join(tokenizer(line)) for line in read_lines(data / "ref" / "test.tgt")])  # spaced


def second_step(model: Path, data: Path, decoding: str) -> Dict[str, Dict[str, float]]:
    """Teacher-forced attention at the second output token of each test summary (decoded with ``decoding``):
    mean overlap with the first token's attention and mean p_gen, for summaries whose first token is doubled
    and for the others."""
    from fairseq_plugins.inference.hub import Summarizer
    sources = read_lines(exp_raw(data) / "test.src")
    summarizer = Summarizer.from_pretrained(model, data_dir=data, device="cpu")
    options = {"block_ngram_repeat": 0, "allow_unk": True} if decoding == "old" else {}
    groups: Dict[str, List] = {"doubled": [], "other": []}
    for details in summarizer.summarize_with_details(sources, detok=False, **options):
        if len(details.summary_tokens) < 3:  # two tokens and </s>
            continue
        first, second = details.attention[0], details.attention[1]
        doubled = details.summary_tokens[0] == details.summary_tokens[1] and summary_stats.is_word(
            details.summary_tokens[0])  # summ-analyze's doubled first token
        p_gen = float(details.p_gen[1]) if details.p_gen is not None else float("nan")
        groups["doubled" if doubled else "other"].append((float((first.clip(max=second)).sum()), p_gen))
    return {group: {"summaries": len(rows), "overlap": _mean([r[0] for r in rows]),
                    "p_gen": _mean([r[1] for r in rows])} for group, rows in groups.items()}


def unk_paths(exp: Experiment, data: Path, model: Path) -> Dict[str, int]:
    """Summaries of the test documents holding a literal <unk>, by every path a user decodes with, each with its
    defaults: generate.sh on the binarized split and on the raw text (fairseq-interactive), fairseq-generate
    --task summarization, the hub (Summarizer.summarize) and summ-serve (POST /summarize, the page's request)."""
    kept = model.parent / "unk_paths.json"
    if kept.is_file() and kept.stat().st_mtime > (model / "checkpoint_best.pt").stat().st_mtime:
        return json.loads(kept.read_text(encoding="utf-8"))
    raw = exp_raw(data) / "test.src"
    counts = {}
    for name, source in (("generate.sh --split test", ["--split", "test"]), ("generate.sh --input", ["--input", raw])):
        out = model.parent / f"unk_{'split' if '--split' in source else 'input'}.txt"
        exp.run(["./generate.sh", *source, "--no-detok", "--output", out, data, model], f"unk_{out.stem}.log")
        counts[name] = holding_unk(read_lines(out))
    hyps = exp.logs / "unk_fairseq_generate.out"
    exp.run(["fairseq-generate", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
             "--path", model / "checkpoint_best.pt", "--gen-subset", "test", "--beam", "5", "--max-len-b", "60",
             "--min-len", "5", "--batch-size", "32", "--required-batch-size-multiple", "1"],
            "unk_fairseq_generate.log", stdout=hyps)
    counts["fairseq-generate --task summarization"] = holding_unk(
        [line.split("\t")[2] for line in read_lines(hyps) if line.startswith("H-")])
    documents = read_lines(raw)
    counts["Summarizer.summarize"] = holding_unk(hub_summaries(exp, model, documents))
    counts["summ-serve POST /summarize"] = holding_unk(served_summaries(exp, model, documents))
    kept.write_text(json.dumps(counts, indent=1) + "\n", encoding="utf-8")
    return counts


def holding_unk(summaries: Sequence[str]) -> int:
    return sum("<unk>" in summary for summary in summaries)  # detokenized text may glue it to punctuation


def hub_summaries(exp: Experiment, model: Path, documents: List[str]) -> List[str]:
    program = ("import json, sys\nfrom fairseq_plugins.inference.hub import Summarizer\n"
               "documents = json.load(open(sys.argv[2], encoding='utf-8'))\n"
               "print(json.dumps(Summarizer.from_pretrained(sys.argv[1]).summarize(documents, detok=False)))\n")
    listed = model.parent / "unk_documents.json"
    listed.write_text(json.dumps(documents), encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", program, str(model), str(listed)], cwd=ROOT, env=exp.env,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def served_summaries(exp: Experiment, model: Path, documents: List[str], chunk: int = 50) -> List[str]:
    """summ-serve on a free port, the documents posted ``chunk`` at a time."""
    process = subprocess.Popen(["summ-serve", str(model), "--port", "0"], cwd=ROOT, env=exp.env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = next((found.group(1) + "/summarize" for line in process.stderr
                    if (found := re.search(r"listening on (http://[0-9.]+:\d+)/", line))), None)
        if url is None:
            exp.fail("summ-serve did not start")
        summaries = []
        for start in range(0, len(documents), chunk):
            request = urllib.request.Request(url, method="POST", data=json.dumps(
                {"documents": documents[start:start + chunk]}).encode("utf-8"))
            with urllib.request.urlopen(request, timeout=600) as response:
                summaries += json.loads(response.read())["summaries"]
        return summaries
    finally:
        process.terminate()
        process.wait(120)


def exp_raw(data: Path) -> Path:
    return data.parent / "raw"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def report(args, results: Dict, started: float) -> str:
    seeds = sorted(seed for seed in results if isinstance(seed, int))
    lines = ["# A short-target corpus: what the defaults gave, and give", ""]
    lines += made_header("short_targets.py", note=f"seeds {', '.join(map(str, seeds))}; "
                         f"{(time.time() - started) / 60:.0f} min this run")
    trained_at = ", ".join(f"seed {seed}: before {results[seed]['trained_at']['before']}, after "
                           f"{results[seed]['trained_at']['after']}" for seed in seeds)
    lines += ["", f"Trained at commits {trained_at}.", "",
              f"{CORPORA[args.corpus][0]}, `./train.sh DATA MODEL`.  *before*: `--max-update 600 --eos-attention "
              "renormalise`, decoded `--allow-unk --block-ngram-repeat 0` (the defaults until then); *after*: "
              "`./train.sh DATA MODEL` with nothing else (10 epochs, the pointer sentinel), decoded with the defaults."
              "  ROUGE: official ROUGE-1.5.5 F1 on the 500 test documents (`--no-detok`; Chinese: characters as ids).",
              ""]
    lines += seed_table(results, seeds, ROWS)
    lines += ["", "## Paired differences (B - A, ROUGE points, 95 % bootstrap per seed)", "",
              "| A -> B | metric | per seed | verdict |", "|---|---|---|---|"]
    for a, b, label in PAIRS:
        runs = [paired_intervals(Path(results[s]["rows"]["_".join(a)]["per_doc"]),
                                 Path(results[s]["rows"]["_".join(b)]["per_doc"])) for s in seeds]
        for index, metric in enumerate(("ROUGE-1", "ROUGE-2", "ROUGE-L")):
            per_seed = [run[index] for run in runs]
            lines.append(f"| {label} | {metric} | {shown_intervals(per_seed)} | {verdict(per_seed)} |")
    first = results[seeds[0]]
    if "unk_paths" in first:
        lines += ["", f"## Summaries with a literal <unk>, by path (seed {seeds[0]}, after, each path's defaults)", "",
                  "| path | summaries with <unk> (of 500) |", "|---|---|"]
        lines += [f"| {path} | {count} |" for path, count in first["unk_paths"].items()]
    terminal = Path(args.work) / "logs" / f"train_{seeds[0]}_after.terminal" if getattr(args, "work", None) else None
    if terminal is not None and terminal.is_file():
        lines += ["", f"## The terminal of `./train.sh DATA MODEL` (seed {seeds[0]}, after)",
                  ""] + ["    " + line for line in read_lines(terminal) if line.strip()]
    lines += ["", "## The second output token, teacher-forced (beam 5 summaries of the test documents)", "",
              "overlap: the share of step 2's attention that step 1's attention already held, "
              "sum_i min(a_1i, a_2i); p_gen: See eq 8 at step 2.", "",
              "| seed | model | summaries, first token doubled | overlap | p_gen | other summaries | overlap | p_gen |",
              "|---|---|---|---|---|---|---|---|"]
    for seed in seeds:
        for model, groups in results[seed]["second_step"].items():
            d, o = groups["doubled"], groups["other"]
            lines.append(f"| {seed} | {model} | {d['summaries']} | {d['overlap']:.2f} | {d['p_gen']:.2f} | "
                         f"{o['summaries']} | {o['overlap']:.2f} | {o['p_gen']:.2f} |")
    return "\n".join(lines) + "\n"


def seed_table(results: Dict, seeds: Sequence[int], rows, first: str = "model") -> List[str]:
    """The seed table: | seed | FIRST | decoding | R-1 | R-2 | R-L | STUTTER | for each seed and (name, decoding)
    of ``rows`` (results[seed]["rows"]["NAME_DECODING"]), then the references' and LEAD-k's rows."""
    lines = [f"| seed | {first} | decoding | R-1 | R-2 | R-L | " + " | ".join(name for _, name in STUTTER) + " |",
             "|" + "---|" * (6 + len(STUTTER))]
    for seed in seeds:
        for name, decoding in rows:
            row = results[seed]["rows"][f"{name}_{decoding}"]
            r, stutter = row["rouge"], row["stutter"]
            cells = [str(stutter[key]) if key == "unk" else f"{stutter[key]:.1f}" for key, _ in STUTTER]
            lines.append(f"| {seed} | {name} | {decoding} | {r['ROUGE-1']:.2f} | {r['ROUGE-2']:.2f} | "
                         f"{r['ROUGE-L']:.2f} | " + " | ".join(cells) + " |")
    return lines + baseline_rows(results, seeds)


def baseline_rows(results: Dict, seeds: Sequence[int]) -> List[str]:
    """The references' and LEAD-k's rows of a seed table (seed | model | decoding | R-1 | R-2 | R-L | STUTTER),
    and a note naming the rows below LEAD-k on ROUGE-1."""
    refs, base = results["references"], results["lead"]
    cells = [f"{refs[key]:.1f}" if key != "unk" else str(refs[key]) for key, _ in STUTTER]
    r = base["rouge"]
    lines = ["| | references | | | | | " + " | ".join(cells) + " |",
             f"| | {base['name']} | | {r['ROUGE-1']:.2f} | {r['ROUGE-2']:.2f} | {r['ROUGE-L']:.2f} |"
             + " |" * len(STUTTER)]
    below = [f"seed {seed} {key.replace('_', ' ')}" for seed in seeds for key, row in results[seed]["rows"].items()
             if row["rouge"]["ROUGE-1"] < r["ROUGE-1"]]
    if below:
        lines += ["", f"**Below {base['name']} on ROUGE-1**: {', '.join(below)}.  These are the default config's "
                  "small model at a CPU budget on a corpus whose first sentence is close to its reference; the "
                  "table measures what the defaults do to <unk> and repetition, not a competitive system."]
    return lines


def seed_results(exp: Experiment, corpus: str, data: Path, seed: int, before_updates: int, stale: bool) -> Dict:
    """One seed's rows and second-step figures, kept in WORK/seedS/results.json and reused while it is newer than
    both models' checkpoint_best.pt."""
    models = trained(exp, config_of(exp, corpus), data, seed, before_updates, stale)
    kept = exp.work / f"seed{seed}" / "results.json"
    newest = max((model / "checkpoint_best.pt").stat().st_mtime for model in models.values())
    if kept.is_file() and kept.stat().st_mtime > newest:
        return json.loads(kept.read_text(encoding="utf-8"))
    rows = {f"{m}_{d}": figures(exp, data, decoded(exp, data, models[m], f"{m}_{d}", d), f"{seed}_{m}_{d}",
                                CORPORA[corpus][3]) for m, d in ROWS}
    results = {"rows": rows, "second_step": {m: second_step(models[m], data, "old") for m in models}}
    kept.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def main():
    args = parse_args()
    started = time.time()
    exp = Experiment("short_targets", args.work)
    data = prepared(exp, args.corpus)
    results = {"references": reference_figures(data), "lead": lead_figures(exp, data, args.corpus)}
    for seed in args.seeds:
        results[seed] = seed_results(exp, args.corpus, data, seed, args.before_updates, args.reuse_stale)
        results[seed]["trained_at"] = {m: read_record(exp.work / f"seed{seed}" / m)["code"]["commit"]
                                       for m in ("before", "after")}
        if seed == args.seeds[0]:
            results[seed]["unk_paths"] = unk_paths(exp, data, exp.work / f"seed{seed}" / "after")
        write_report(exp, args.out, report(args, results, started), f"seed {seed} done")
    pack_beside(exp.work, ARCHIVED, args.out)


if __name__ == "__main__":
    main()

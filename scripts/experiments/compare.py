#!/usr/bin/env python
"""Train several systems on one corpus with the same budget, decode each with several settings, and tabulate
official ROUGE, repetition and speed.  The issues' experiments are command lines of this script (docs/results/).

    python scripts/experiments/compare.py --name NAME --corpus lcsts|cnndm --config CONFIG --updates N \
        --variant "LABEL CONFIG [train.sh OPTIONS]" [--variant ...] \
        [--continue "LABEL PARENT CONFIG [OPTIONS]" --continue-updates M] \
        [--decode "LABEL [generate.sh OPTIONS]" ...] [--lead N] [--work runs/NAME] [--threads 1]

Each --variant, --continue and --decode is one quoted string of words (shell quoting inside it works), e.g.
``--variant "seq2seq+copy song2020_lcsts_cpu --no-selective-gate --copy"``; ``--max-update N`` among a system's
options trains it N updates instead of --updates (or --continue-updates).

Steps (each through the project's own scripts; logs in WORK/logs/):
  1. the corpus: ``lcsts`` = LCSTS PART_II, train.tsv for training, val.tsv split in file order into
     --valid-size pairs for validation and the rest for the test set; ``cnndm`` = See et al.'s 10,000 CNN/DM
     test documents split by id (first 500 test, next 300 validation, 9,200 training; articles in full as
     released, up to 2,466 tokens); then preprocess.sh with --config's PREP_ARGS (which truncate sources);
  2. every --variant: train.sh -c CONFIG for exactly --updates updates (same batches, same seed), keeping
     checkpoint_best.pt by the config's criterion; every --continue: train.sh -c CONFIG from PARENT's
     checkpoint_best.pt (``--finetune-from-model``: its weights, a fresh optimizer, schedule and data order) for
     --continue-updates updates (e.g. more ML with PARENT's config, or RL with an _rl config);
  3. every system x every --decode: generate.sh --split test (the config's GEN_ARGS plus the decode's options),
     official ROUGE-1.5.5 F1 (summ-rouge; Chinese on characters mapped to ids), repeated trigrams (words or
     characters), novel bigrams and copied sentences against the test sources (summ-analyze's definitions),
     mean length, decode sentences/s (fairseq's own timing of the generation);
  4. --lead N: LEAD-N sentences (English) or characters (Chinese) on the same test set.
A decode is reused (its summaries; ROUGE and the other figures are recomputed) only when its record
(OUTPUTS/NAME.decode.json: the generate.sh command, and the SHA-256 of the checkpoint, of the test data as
prepared and of the decoding code, i.e. generate.sh, scripts/lib.sh, configs/ and fairseq_plugins/ without its
criterions, and the fairseq and torch versions) equals this run's and the summaries and the generate log are
complete; else it runs again.  A system whose training finished in WORK is reused only when its recorded training
(MODEL/training.json: the train.sh options with --updates, the config file's text, the data's prep.json, for
--continue the parent's record, and the code: one SHA-256 of train.sh, scripts/lib.sh, scripts/launch/common.sh,
the config and every config it sources and fairseq_plugins/, with the fairseq and torch versions and the commit)
equals this run's exactly.  --reuse-stale keeps a finished system whose record differs only in its code; its line
in the table says it was trained on older code, and the commit.  An interrupted training resumes from its
checkpoint_last.pt when it was started with exactly
this run's record (MODEL/training.started.json; its log is appended to, and its train minutes count each attempt
up to its last checkpoint); a changed or unrecorded one is trained again from the start, and the log says why.
--retrain trains every system again.  The table goes to WORK/results.md (and stdout) with this command line; the numbers also go to WORK/results.json.
WORK is locked (WORK/.lock) while the script runs: a second table in the same folder stops at once, naming the
first (host, pid, Slurm job); every system's checkpoint folder is locked by train.sh as well.
--dry-run budgets the table instead of running it (scripts/experiments/paper_scale.py: every system built, 3
updates on a slice of ../shared/data, parameters, memory, s/update and the whole run's FLOPs; WORK/dry_run/).
"""
import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

from scripts.experiments import paper_scale, records, slurm_launcher, slurm_table
from scripts.experiments.corpora import cnndm_raw, lcsts_raw
from scripts.experiments.lib import (ROOT, Experiment, LockedError, abstraction, baseline_flags, config_array,
                                     decode_facts, hold_lock, lead, official_rouge, read_lines, repetition, train_facts,
                                     write_lines)
from scripts.experiments.records import decoding_code, package_version, provenance, read_record, sha256, test_data

SPLITS = ("train", "valid", "test")
ONE_SEED = "Each system trains with its config's --seed unless its options below give another: one seed per row."


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True, help="experiment name (title of the table, default work dir)")
    parser.add_argument("--corpus", choices=("lcsts", "cnndm", "raw"), required=True,
                        help="raw: a folder of split pairs given by --raw (summ-convert's output)")
    parser.add_argument("--raw", type=Path, metavar="DIR",
                        help="--corpus raw: DIR/{train,valid,test}.{src,tgt}, one document per line")
    parser.add_argument("--config", required=True, help="config whose PREP_ARGS prepare the data")
    parser.add_argument("--updates", type=int, required=True, help="training updates of every --variant")
    parser.add_argument("--variant", action="append", default=[], metavar='"LABEL CONFIG [OPTIONS]"')
    parser.add_argument("--continue", dest="continuations", action="append", default=[],
                        metavar='"LABEL PARENT CONFIG [OPTIONS]"', help="train from PARENT's checkpoint_best.pt")
    parser.add_argument("--continue-updates", type=int, help="updates of every --continue")
    parser.add_argument("--decode", action="append", metavar='"LABEL [OPTIONS]"',
                        help="decoding settings (default: one, 'beam', the config's GEN_ARGS)")
    parser.add_argument("--lead", type=int, help="add LEAD-N (sentences; Chinese: characters)")
    parser.add_argument("--valid-size", type=int, default=500, help="lcsts: val.tsv pairs used for validation")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every step (0: torch's)")
    parser.add_argument("--retrain", action="store_true", help="train every system again")
    parser.add_argument("--reuse-stale", action="store_true",
                        help="keep a finished system whose record differs from this run's only in its code (the "
                             "package, train.sh, its config, fairseq or torch): its line in the table says it was "
                             "trained on older code, and which commit")
    slurm_launcher.add_options(parser)
    paper_scale.add_dry_run_options(parser.add_argument_group("dry run (scripts/experiments/paper_scale.py)"))
    args = parser.parse_args()
    if args.reuse_stale and args.launcher == "slurm":
        parser.error("--reuse-stale keeps older systems in local runs only (not with --launcher slurm)")
    if args.corpus == "raw" and not (args.raw and all((args.raw / f"{s}.src").is_file() for s in SPLITS)):
        parser.error("--corpus raw needs --raw DIR with train, valid and test .src/.tgt files")
    args.variant = [split_spec(parser, "variant", text, 2) for text in args.variant]
    args.continuations = [split_spec(parser, "continue", text, 3) for text in args.continuations]
    args.decode = [split_spec(parser, "decode", text, 1) for text in args.decode or ["beam"]]
    if args.continuations and not args.continue_updates:
        parser.error("--continue needs --continue-updates")
    labels = [v[0] for v in args.variant] + [c[0] for c in args.continuations]
    if len(set(labels)) != len(labels) or not labels:
        parser.error("give at least one --variant, with distinct labels")
    for label, parent, _, _ in args.continuations:
        if parent not in labels[:labels.index(label)]:
            parser.error(f"--continue {label}: parent {parent} must be a system defined before it")
    args.work = args.work or ROOT / "runs" / args.name
    return args


def split_spec(parser, option: str, text: str, fields: int):
    """'LABEL CONFIG --a 1' -> ('LABEL', 'CONFIG', '--a 1'): the first ``fields`` words and the rest."""
    words = shlex.split(text)
    if len(words) < fields:
        parser.error(f"--{option} {text!r}: needs {fields} word(s) before the options")
    return (*words[:fields], shlex.join(words[fields:]))


def prepare_data(exp: Experiment, args):
    raw, data = exp.work / "raw", exp.work / "data"
    if (data / "bin" / "dict.src.txt").is_file():
        check_data_config(data, args.config)
    else:
        shutil.rmtree(data, ignore_errors=True)
        if args.corpus == "lcsts":
            lcsts_raw(exp, raw, args.valid_size)
        elif args.corpus == "cnndm":
            cnndm_raw(exp, raw)
        else:
            copy_raw(args.raw, raw)
        exp.run([ROOT / "preprocess.sh", "-c", args.config, raw, data], "preprocess.log")
    counts = {split: len(read_lines(raw / f"{split}.src")) for split in ("train", "valid", "test")}
    lang = json.loads((data / "prep.json").read_text(encoding="utf-8"))["settings"]["lang"]
    return raw, data, counts, lang


def check_data_config(data: Path, config: str) -> None:
    """Reusing WORK/data is right only when --config prepared it as it reads now (DATA/config.json: the config's
    name and its resolved PREP_ARGS); otherwise the table's header would name a config its data did not get."""
    record = data / "config.json"
    have = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
    want = config_array(config, "PREP_ARGS")
    if have.get("name") != config or have.get("prep_args") != want:
        sys.exit(f"compare.py: {data} was prepared with -c {have.get('name', '(unrecorded)')} "
                 f"{' '.join(have.get('prep_args') or [])}, not --config {config} ({' '.join(want)}): give another "
                 f"--work, or delete {data} to prepare it again")


def copy_raw(source: Path, raw: Path) -> None:
    """--corpus raw: the given split pairs, copied into WORK/raw (the table's sources and LEAD read them there)."""
    raw.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        for side in ("src", "tgt"):
            shutil.copyfile(source / f"{split}.{side}", raw / f"{split}.{side}")


def systems(args):
    """(label, config, extra options, parent or None, updates) in training order.  A system whose options hold
    ``--max-update N`` trains N updates instead of --updates (or --continue-updates): the tables at paper scale
    give each system its paper's number (scripts/experiments/paper_scale.py)."""
    out = [(label, config, *own_updates(extra, args.updates), None) for label, config, extra in args.variant]
    for label, parent, config, extra in args.continuations:
        out.append((label, config, *own_updates(extra, args.continue_updates), parent))
    return [(label, config, extra, parent, updates) for label, config, extra, updates, parent in out]


def own_updates(extra: str, default: int):
    """(the options without --max-update N, N) when the options give one, else (the options, ``default``)."""
    words = shlex.split(extra)
    if "--max-update" not in words:
        return words, default
    at = words.index("--max-update")
    if at + 1 >= len(words) or not words[at + 1].isdigit():
        sys.exit(f"compare.py: --max-update needs a number of updates in {extra!r}")
    return words[:at] + words[at + 2:], int(words[at + 1])


def model_dir(exp: Experiment, label: str) -> Path:
    """A system's checkpoint folder.  fairseq reads ``--path A:B`` as an ensemble of A and B, so the folder
    name has no ':' (labels such as ``control:fairseq_lstm`` keep theirs in the table)."""
    return exp.work / "models" / label.replace(":", "_")


def training_record(exp: Experiment, data: Path, system) -> dict:
    """A system's training record (records.training_record): its config, extra options and updates, the data and,
    for a continued system, its parent's record."""
    label, config, extra, parent, updates = system
    parent_record = None if parent is None else read_record(model_dir(exp, parent))
    return records.training_record(config, [*extra, "--max-update", updates], data, parent_record)


def data_config(data: Path) -> Optional[str]:
    """The config that prepared ``data`` (DATA/config.json), None when it records none."""
    record = data / "config.json"
    return json.loads(record.read_text(encoding="utf-8"))["name"] if record.is_file() else None


def train(exp: Experiment, data: Path, system, retrain: bool, reuse_stale: bool = False):
    """(the system's folder, its facts): trained, resumed or reused by its record (records.train_or_reuse); with
    ``reuse_stale`` a system made by older code is kept and its facts say ``older_code``."""
    label = system[0]
    model = model_dir(exp, label)
    older = records.train_or_reuse(exp, label, model, f"train_{label}.log", training_record(exp, data, system),
                                   train_command(exp, data, system), retrain, reuse_stale)
    facts = trained_facts(exp, data, model, label)
    return model, (dict(facts, older_code=older) if older else facts)


def train_command(exp: Experiment, data: Path, system, launcher=None) -> list:
    """train.sh's command line for a system (``launcher``: the script to run instead, with train.sh's
    arguments, e.g. scripts/slurm/train.sbatch)."""
    label, config, extra, parent, updates = system
    start = []
    if parent is not None:
        start = ["--finetune-from-model", model_dir(exp, parent) / "checkpoint_best.pt"]
    # Systems of other configs train on --config's data by design (same data, other models): train.sh's check
    # that a -c prepares text as the data's config did is left to this script's --config.
    force = ["--force-config"] if config != data_config(data) else []
    return [launcher or ROOT / "train.sh", "-c", config, *force, data, model_dir(exp, label), *extra, *start,
            "--max-update", updates]


def trained_facts(exp: Experiment, data: Path, model: Path, label: str) -> dict:
    facts = train_facts(exp.logs / f"train_{label}.log")
    facts["train_min"] = float((model / "train_seconds").read_text()) / 60
    facts.update(checkpoint_stats(exp, data, model, label))
    return facts


def checkpoint_stats(exp: Experiment, data: Path, model: Path, label: str) -> dict:
    """scripts/attention_stats.py on the validation set with the checkpoint that is decoded (checkpoint_best.pt):
    ``nll_bits``, the per-token NLL in bits (one definition for every model and criterion, unlike the ``loss``
    fairseq logs), the attention's focus and, for models with decoder states, the sentence ends' cosines.
    Cached in MODEL/valid_stats.json (a retrained system gets a fresh folder)."""
    stats = model / "valid_stats.json"
    if not stats.is_file():
        exp.run([sys.executable, ROOT / "scripts" / "attention_stats.py", model / "checkpoint_best.pt", data / "bin",
                 "--split", "valid", "--max-tokens", "20000"], f"valid_stats_{label}.log", stdout=stats)
    return {f"valid_{key}": value for key, value in json.loads(stats.read_text(encoding="utf-8")).items()}


def decode(exp: Experiment, cmd: list, data: Path, model: Path, hyps: Path, log_name: str, n_test: int) -> None:
    """Runs the decode ``cmd`` (generate.sh, writing ``hyps``), unless a finished decode with the same record
    (command, checkpoint, test data, decoding code) is there already."""
    record = hyps.with_name(hyps.stem + ".decode.json")
    want = {"command": list(map(str, cmd)), "checkpoint_sha256": sha256([model / "checkpoint_best.pt"]),
            "test_data_sha256": sha256(test_data(data)), "code_sha256": sha256(decoding_code()),
            "versions": {name: package_version(name) for name in ("fairseq-fixed", "torch")}}
    done = (record.is_file() and hyps.is_file() and (exp.logs / log_name).is_file()
            and json.loads(record.read_text(encoding="utf-8")) == want and len(read_lines(hyps)) == n_test)
    if done:
        exp.log(f"reusing the decode in {hyps} (same command, checkpoint, test data and decoding code)")
        return
    record.unlink(missing_ok=True)
    (exp.logs / f"rouge_{hyps.stem}.per_doc.tsv").unlink(missing_ok=True)  # lib.per_doc_rouge's, of the old ones
    exp.run(cmd, log_name)
    record.write_text(json.dumps(want, indent=1) + "\n", encoding="utf-8")


def evaluate(exp: Experiment, data: Path, label: str, config: str, model: Path, decode_spec, lang: str,
             n_test: int):
    decode_label, decode_extra = decode_spec
    name = f"{label}.{decode_label}"
    hyps = exp.work / "outputs" / f"{name}.txt"
    hyps.parent.mkdir(exist_ok=True)
    # --verbose: fairseq's messages into this log, where decode_facts reads its "Translated ..." timing;
    # --no-detok: the summaries as ROUGE and the repetition counts read them (the tokens), as in every table
    decode(exp, [ROOT / "generate.sh", "--verbose", "--no-detok", "-c", config, "--split", "test", "--output", hyps,
                 data, model, *shlex.split(decode_extra)], data, model, hyps, f"generate_{name}.log", n_test)
    summaries = read_lines(hyps)
    if len(summaries) != n_test:
        exp.fail(f"{hyps} has {len(summaries)} lines for {n_test} test documents")
    row = {"system": label, "decode": decode_label, "decode_options": decode_extra,
           "rouge": official_rouge(exp, data / "ref" / "test.tgt", hyps, lang, name)}
    row.update(repetition(summaries, lang))
    row.update(abstraction(read_lines(exp.work / "raw" / "test.src"), summaries, lang, data / "prep.json"))
    row.update(decode_facts(exp.logs / f"generate_{name}.log"))
    return row


def fmt(value, digits=2):
    return "" if value is None else f"{value:.{digits}f}"


def table(rows, trained):
    lines = ["| system | decoding | ROUGE-1 | ROUGE-2 | ROUGE-L | repeated trigrams % | summaries with a repeat % | "
             "novel 2-grams % | copied sentences % | mean length | decode sent/s | updates | epochs | train min | "
             "train words/s | valid NLL (bits/token) | below a trivial baseline |", "|" + "---|" * 17]
    flags = baseline_flags(rows)
    for row in rows:
        if "failed" in row:  # a system whose job failed: kept in the table, marked
            lines.append(f"| {row['system']} | **failed**: see `{row['failed']}` |" + " |" * 15)
            continue
        facts = trained.get(row["system"], {})
        rouge = row["rouge"]
        lines.append(" | ".join([
            f"| {row['system']}", row["decode"], fmt(rouge["ROUGE-1"]), fmt(rouge["ROUGE-2"]), fmt(rouge["ROUGE-L"]),
            fmt(row.get("repeated_trigrams")), fmt(row.get("with_repeat"), 1),
            fmt(row.get("novel_2grams"), 1), fmt(row.get("copied_sentences"), 1), fmt(row.get("mean_length"), 1),
            fmt(row.get("sentences_per_s")), str(facts.get("updates", "")), fmt(facts.get("epochs"), 1),
            fmt(facts.get("train_min"), 1),
            fmt(facts.get("words_per_s"), 0), fmt(facts.get("valid_nll_bits"), 3), flags.get(id(row), "")]) + " |")
    return lines


def lead_row(exp: Experiment, raw: Path, data: Path, lang: str, size: int) -> dict:
    hyps = exp.work / "outputs" / "lead.txt"
    hyps.parent.mkdir(exist_ok=True)
    write_lines(hyps, lead(read_lines(raw / "test.src"), lang, size))
    row = {"system": f"LEAD-{size}", "decode": "", "rouge": official_rouge(
        exp, data / "ref" / "test.tgt", hyps, lang, "lead")}
    row.update(repetition([h.replace(" <q> ", " ") for h in read_lines(hyps)], lang))
    row.update(abstraction(read_lines(raw / "test.src"), read_lines(hyps), lang, data / "prep.json"))
    return row


def write_table(exp: Experiment, args, rows, trained, counts, lang: str, started: float) -> None:
    """WORK/results.md (and stdout) and WORK/results.json: the rows (failed ones marked), LEAD-N first."""
    raw, data = exp.work / "raw", exp.work / "data"
    if args.lead:
        rows.insert(0, lead_row(exp, raw, data, lang, args.lead))
    argv = sys.argv[1:-4] if args.step else sys.argv[1:]  # a Slurm job's: + --work WORK --step STEP
    command = "python scripts/experiments/compare.py " + " ".join(shlex.quote(a) for a in argv)
    lines = [f"# {args.name}", "", f"Command: `{command}`", "", provenance(ONE_SEED), "",
             f"Corpus `{args.corpus}`: {counts['train']} training, {counts['valid']} validation, {counts['test']} "
             f"test documents; data prepared with `configs/{args.config}.conf`; language {lang}.",
             f"Budget: {args.updates} updates per system (unless its line below says otherwise)"
             + (f", {args.continue_updates} more for each continued system" if args.continuations else "")
             + f"; the epochs column counts passes over the {counts['train']} training documents; threads: "
             f"{args.threads or 'torch default'}.",
             "ROUGE: official ROUGE-1.5.5 F1 (summ-rouge" + (", characters mapped to ids" if lang == "zh" else "")
             + ") on the test set. Repeated trigrams: trigrams of "
             + ("characters" if lang == "zh" else "words") + " that repeat an earlier trigram of the same summary. "
             "Novel 2-grams, copied sentences: of the summaries' bigrams and sentences, those not in / found verbatim "
             "in the test source (summ-analyze's definitions, pooled).",
             "", *table(rows, trained), "", "Systems:"]
    for label, config, extra, parent, updates in systems(args):
        older = trained.get(label, {}).get("older_code")
        lines.append(f"- {label}: `" + (f"from {parent}: " if parent else "") + f"-c {config} " + " ".join(extra)
                     + "`" + (f", {updates} updates" if updates != (args.continue_updates if parent else args.updates)
                              else "")
                     + (f"; **trained on older code (commit {older})**, kept by --reuse-stale" if older else ""))
    lines += [f"- decoding {label}: `{extra or '(the config GEN_ARGS)'}`" for label, extra in args.decode]
    if args.launcher == "slurm":
        lines += ["", "Run on Slurm (--launcher slurm): train min is fairseq's own training time of the run that "
                      "finished (after a requeue, of its last part)."]
    else:
        lines += ["", f"Total wall time {(time.time() - started) / 60:.1f} min."]
    (exp.work / "results.md").write_text("\n".join(lines + [""]), encoding="utf-8")
    (exp.work / "results.json").write_text(json.dumps({"rows": rows, "trained": trained}, indent=1) + "\n")
    print("\n".join(lines))


def run_local(exp: Experiment, args) -> None:
    started = time.time()
    _, data, counts, lang = prepare_data(exp, args)
    rows, trained = [], {}
    for system in systems(args):
        label, config = system[:2]
        model, trained[label] = train(exp, data, system, args.retrain, args.reuse_stale)
        for spec in args.decode:
            rows.append(evaluate(exp, data, label, config, model, spec, lang, counts["test"]))
    write_table(exp, args, rows, trained, counts, lang, started)


def main():
    args = parse_args()
    if args.dry_run:  # every system built at its configs' sizes, 3 updates on a slice: WORK/dry_run/
        table = paper_scale.command_line_table(args, systems(args))
        return paper_scale.dry_run(table, args.work / "dry_run", args.dry_run_batch, args.threads,
                                   args.dry_run_memory_limit)
    exp = Experiment(args.name, args.work, args.threads)
    if args.step:  # inside a Slurm job of this table (the submitting invocation holds no lock by then)
        return slurm_table.run_step(exp, args, args.step, sys.modules[__name__])
    try:
        hold_lock(exp.work, "table")  # before data/ or a system is touched
    except LockedError as err:
        exp.fail(str(err))
    if args.launcher == "slurm":
        return slurm_table.submit(exp, args, sys.modules[__name__])
    return run_local(exp, args)


if __name__ == "__main__":
    main()

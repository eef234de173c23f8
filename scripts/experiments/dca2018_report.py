"""The report of scripts/experiments/dca2018_cnndm.py: one table from the work folders of its runs.

    python scripts/experiments/dca2018_cnndm.py --report WORK [WORK ...] [--out docs/results/dca2018_cnndm.md]

Each WORK is a compare.py work folder (results.json, outputs/, models/, data/).  The report has a header made by
the code (where and at which commit the report was made; each run's command, commit, machine, corpus and budget
from its results.md; the training seeds), then:
  0. the poster's directions (row 1 -> 2 -> ... -> 6, and row 6 against See et al.'s row) at beam 4 with trigram
     blocking, each judged over the seeds against the poster's change (``lib.against_paper``);
  1. every system x decoding: official ROUGE-1/2/L F1, repeated trigrams, mean length, and per system the
     validation NLL of the decoded checkpoint (bits per token; the cohesion term is not in it), the updates, the
     epochs they made and the training minutes; a row below LEAD-3, or below fairseq's `lstm` of its own seed at
     the same decoding, is flagged;
  2. paired bootstraps (scripts/rouge_significance.py, official ROUGE-1.5.5's per-document F1, 10,000
     resamples) of each poster row against row 1 and against the row above it, for every decoding;
  3. the semantic cohesion checks: mean cos(s'_q, s'_{q-1}) and cos(s'_q, s'_{q-2}) of the decoder states at the
     test references' sentence ends (teacher-forced, the "after" reading), and the share of generated sentences
     that repeat the sentence before (distance 1) or the one before that (distance 2), without blocking; and
     for dca_lstm how the decoder spreads its agent attention g^t (entropy against a uniform g^t, largest weight).
Systems labelled LABEL_seedN are seeds of LABEL; section 4 gives the mean over the seeds each row has, and
section 5 the verdict of each comparison by the project's rule (``lib.verdict``): a direction holds only when
every seed run (two or more) shows it with a paired interval that excludes zero, else it is inconclusive.
Section 1 says for each system the code that trained it, from its training record (MODEL/training.json):
this checkout's, older (the commit it names), or not recorded (trained before the records covered code).

The report reads only systems whose training record matches the command it prints for them (``declared``:
dca2018_cnndm.py's rows, with ``--seed N`` for a LABEL_seedN): the same train.sh options whatever their order,
the parent's for a continued system, any number of updates (printed per row).  A system without a record, with
other options, or unknown to the script is left out of every section and listed, with the reason, under "Left
out".

    python scripts/experiments/dca2018_cnndm.py --archive WORK DEST.tar.xz

packs what the report reads of a work folder (its summaries, scores, per-document scores, training logs and
the statistics of its checkpoints, computed first) into one compressed archive, well under a MB without
checkpoints or data; the report reads an archive as it reads a work folder (unpacked into a temporary folder),
so a table and its intervals can be rebuilt after the machine that trained it is gone.
"""
import functools
import json
import shlex
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from scripts.experiments.records import code_record, provenance, training_code
from scripts.experiments.lib import (ARCHIVE_SUFFIX, ROOT, ROUGE_ROW, RUN_FILES, Experiment, against_paper,
                                     baseline_flags, option_groups, pack, paired_intervals, per_doc_rouge, read_lines,
                                     repetition, sentences, shown_intervals, split_seed, train_facts, unpack, verdict,
                                     work_language)

RESAMPLES = 10000


def repeated_sentences(summaries: Sequence[str], distance: int) -> float:
    """Percent of the sentences with a sentence ``distance`` places before them that are identical to it."""
    repeats = candidates = 0
    for summary in summaries:
        parts = sentences(summary)
        pairs = list(zip(parts[distance:], parts[:-distance] if distance else parts))
        candidates += len(pairs)
        repeats += sum(a == b for a, b in pairs)
    return 100.0 * repeats / max(candidates, 1)


class Run:
    """One compare.py work folder (``name``: how the report names it, the archive it was unpacked from)."""

    def __init__(self, work: Path, name: str = None):
        self.work = work.resolve()
        self.name = name or str(self.work)
        self.exp = Experiment("dca2018_report", self.work)
        # the folder's own language; an archive keeps no data but packs its per-document scores (none is scored
        # anew), and the DCA runs it was made for are English
        self.lang = work_language(self.work, default="en")
        results = self.work / "results.json"
        if results.is_file():  # the run finished: compare.py's own figures, repetition counted anew below
            table = json.loads(results.read_text(encoding="utf-8"))
            self.rows, self.trained = table["rows"], table["trained"]
            self.finished = True
            for row in self.rows:  # one definition of repeated trigrams for every run, whatever code wrote it
                row.update(repetition(read_lines(self.work / "outputs" / f"{output_name(row)}.txt"), self.lang))
            self.add_earlier_systems()
        else:  # a run still going or stopped: the systems and decodings it finished
            self.rows, self.trained = self.finished_rows()
            self.finished = False

    def add_earlier_systems(self) -> None:
        """A finished run with ``--only`` lists only its own systems in results.json; systems an earlier run
        finished in the same folder (e.g. row 4 before ``--only 5:agents_comm_caa,6:rl``) are read as a
        stopped run's are, so none is dropped from the report."""
        rows, trained = self.finished_rows()
        for label in sorted(set(trained) - set(self.trained)):  # in one order, whatever the hash seed
            self.trained[label] = trained[label]
            self.rows += [row for row in rows if row["system"] == label]

    def finished_rows(self):
        """(rows, trained) as compare.py would write them, for the systems whose training finished (MODEL/
        train_seconds) and their decodings that were scored (logs/rouge_LABEL.DECODE.out)."""
        rows, trained = [], {}
        for log in sorted(self.exp.logs.glob("train_*.log")):
            label = log.name[len("train_"):-len(".log")]
            model = self.work / "models" / label.replace(":", "_")
            if not (model / "train_seconds").is_file():
                continue
            trained[label] = dict(train_facts(log), train_min=float((model / "train_seconds").read_text()) / 60)
            stats = model / "valid_stats.json"
            if stats.is_file():
                trained[label].update({f"valid_{k}": v for k, v in json.loads(stats.read_text()).items()})
            prefix = f"rouge_{label}."
            for scored in sorted(self.exp.logs.glob("rouge_*.out")):
                decode = scored.name[len(prefix):-len(".out")]
                if not scored.name.startswith(prefix) or decode.endswith(".per_doc"):
                    continue
                text = scored.read_text(encoding="utf-8")
                row = {"system": label, "decode": decode,
                       "rouge": {metric: float(value) for metric, value in ROUGE_ROW.findall(text)}}
                row.update(repetition(read_lines(self.work / "outputs" / f"{label}.{decode}.txt"), self.lang))
                rows.append(row)
        return rows, trained

    def per_doc(self, name: str) -> Path:
        """Official ROUGE-1.5.5 per-document F1 of outputs/NAME.txt (cached in logs/)."""
        return per_doc_rouge(self.exp, name, self.lang)

    def test_stats(self, label: str) -> Dict:
        """attention_stats.py on the test references with the decoded checkpoint (cached beside it)."""
        model = self.work / "models" / label.replace(":", "_")
        stats = model / "test_stats.json"
        if not stats.is_file():
            self.exp.run([sys.executable, ROOT / "scripts" / "attention_stats.py", model / "checkpoint_best.pt",
                          self.work / "data" / "bin", "--split", "test", "--max-tokens", "20000"],
                         f"test_stats_{label}.log", stdout=stats)
        return json.loads(stats.read_text(encoding="utf-8"))


def output_name(row: Dict) -> str:
    """The name of a row's summaries in outputs/ (NAME.txt): LABEL.DECODE, or ``lead``."""
    return f"{row['system']}.{row['decode']}" if row["decode"] else "lead"


def archive(work: Path, dest: Path) -> List[str]:
    """Computes WORK's per-document scores and checkpoint statistics, then packs every file the report reads
    (lib.RUN_FILES) into DEST (a .tar.xz), under the paths they have in WORK.  Returns those paths."""
    if not dest.name.endswith(ARCHIVE_SUFFIX):
        raise SystemExit(f"dca2018_report: the archive must be a {ARCHIVE_SUFFIX} file, not {dest}")
    run = Run(work)
    for row in run.rows:
        run.per_doc(output_name(row))
    for label in run.trained:
        run.test_stats(label)
    return pack(run.work, RUN_FILES, dest)


def open_run(path: Path, unpacked: Path) -> Run:
    """A work folder, or an archive of one unpacked under ``unpacked``."""
    if not path.name.endswith(ARCHIVE_SUFFIX):
        return Run(path)
    return Run(unpack(path, unpacked), name=str(path))


def declared_options(declared: Dict, label: str) -> Optional[List[str]]:
    """The train.sh options (without --max-update) the printed command gives system ``label``: its row's
    ``-c CONFIG OPTIONS`` from ``declared`` (base label -> (config, options, parent)), with ``--seed N`` for
    LABEL_seedN; None for a label the script does not declare."""
    base, suffix = split_seed(label)
    if base not in declared:
        return None
    config, extra, _ = declared[base]
    return ["-c", config, *shlex.split(extra), *(["--seed", suffix[len("_seed"):]] if suffix else [])]


def record_mismatch(record: Optional[Dict], label: str, declared: Dict) -> Optional[str]:
    """Why the system ``label`` trained with ``record`` (its training.json) is not the printed command's, or
    None when it is: the same options (``option_groups``) and, for a continued system, its parent's."""
    want = declared_options(declared, label)
    if want is None:
        return "not a system of the printed command"
    if record is None:
        return "no training record, so its options cannot be checked"
    have = record.get("train_options") or []
    if option_groups(have, ignore=("--max-update",)) != option_groups(want, ignore=("--max-update",)):
        return f"trained with `{shlex.join(have)}`, not `{shlex.join(want)}`"
    parent = declared[split_seed(label)[0]][2]
    if parent is not None:
        parent_label = parent + split_seed(label)[1]
        why = record_mismatch(record.get("parent"), parent_label, declared)
        if why:
            return f"its parent {parent_label}: {why}"
    return None


def checked(runs: Sequence[Run], declared: Dict):
    """(the runs' rows of systems whose record matches the printed command, [(run, label, why) left out])."""
    left_out = []
    for run in runs:
        for label in sorted(run.trained):
            why = record_mismatch(read_training_record(run, label), label, declared)
            if why:
                left_out.append((run, label, why))
        dropped = {label for run_, label, _ in left_out if run_ is run}
        run.rows = [row for row in run.rows if row["system"] not in dropped]
    return left_out


def read_training_record(run: Run, label: str) -> Optional[Dict]:
    record = run.work / "models" / label.replace(":", "_") / "training.json"
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def collect(runs: Sequence[Run]) -> List[Dict]:
    """Every system x decoding of every run, with its per-document scores' path and its summaries.  A system
    decoded in several runs (a parent decoded again where a continued system was trained) is listed once, from
    the first run, when its summaries are the same in each; different summaries under one label stop the report
    with both folders named."""
    entries, seen = [], {}
    for run in runs:
        for row in run.rows:
            name = output_name(row)
            summaries = read_lines(run.work / "outputs" / f"{name}.txt")
            if name in seen:
                first = seen[name]
                if first["summaries"] != summaries:
                    raise SystemExit(f"dca2018_report: {name} has other summaries in {run.name} than in "
                                     f"{first['run'].name}: report one of them")
                continue
            entry = dict(row, run=run, per_doc=run.per_doc(name), summaries=summaries,
                         trained=run.trained.get(row["system"], {}))
            entries.append(entry)
            seen[name] = entry
    return entries


def fmt(value, digits=2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def trained_on(run, label: str, current: Dict[str, str]) -> str:
    """Which code trained the system, from its training record: "this checkout", "older (commit X)", or "not
    recorded"; ``current`` caches this checkout's fingerprint per config."""
    facts = read_training_record(run, label) if label else None
    if facts is None:
        return "" if not label else "not recorded"
    code, options = facts.get("code"), facts.get("train_options") or []
    if not code:
        return "not recorded"
    config = options[1] if len(options) > 1 and options[0] == "-c" else None
    if config not in current:
        current[config] = code_record(training_code(config))["sha256"] if config else None
    return "this checkout" if code.get("sha256") == current[config] else f"older (commit {code.get('commit')})"


def main_table(entries) -> List[str]:
    """One line per system x decoding; a row whose ROUGE-1 is below LEAD-3's, or below fairseq's `lstm` of its
    own seed at the same decoding, is flagged."""
    lines = ["| system | decoding | ROUGE-1 | ROUGE-2 | ROUGE-L | repeated trigrams % | mean length | "
             "valid NLL (bits/token) | valid cos(q, q-1) | updates | epochs | train min | trained on code | "
             "below a trivial baseline |", "|" + "---|" * 14]
    current, flags = {}, baseline_flags(entries, seed_of=lambda system: split_seed(system)[1])
    for e in entries:
        t, r = e["trained"], e["rouge"]
        lines.append(f"| {e['system']} | {e['decode']} | {fmt(r['ROUGE-1'])} | {fmt(r['ROUGE-2'])} | "
                     f"{fmt(r['ROUGE-L'])} | {fmt(e.get('repeated_trigrams'))} | {fmt(e.get('mean_length'), 1)} | "
                     f"{fmt(t.get('valid_nll_bits'), 3)} | {fmt(t.get('valid_end_cos_1'), 3)} | "
                     f"{t.get('updates', '')} | {fmt(t.get('epochs'), 2)} | {fmt(t.get('train_min'), 1)} | "
                     f"{trained_on(e['run'], e['system'] if t else '', current)} | {flags.get(id(e), '')} |")
    return lines


ROW_1 = "1:single_mle"
COMPARED = {  # besides row 1: the poster's row above, and each control against what it controls
    "3:agents_no_comm": ("2:single_sem",), "4:agents_comm": ("3:agents_no_comm",),
    "5:agents_comm_caa": ("4:agents_comm",), "6:rl": ("5:agents_comm_caa", "control:6_ml_continued"),
    "control:6_ml_continued": ("5:agents_comm_caa",), "control:5_old_sem": ("5:agents_comm_caa",),
    "control:dca_one_agent": ("2:single_sem",),
    "ref:pgn_coverage": ("2:single_sem", "5:agents_comm_caa"),  # See et al.'s model against the best rows
    # row 6's variants: against their start (row 5), row 6 (what the one change does) and the ML continuation
    # (the trivial control)
    **{variant: ("5:agents_comm_caa", "6:rl", "control:6_ml_continued") for variant in (
        "control:6_rl_gamma_0.97", "control:6_rl_no_sample_sem", "control:6_rl_blocked_baseline")},
}


# The poster's CNN/DM ablation and its See et al. row, ROUGE-1/2/L F1 (../shared/papers/DCA_AND_PAULUS.md, [C])
POSTER = {"1:single_mle": (36.12, 14.38, 33.83), "2:single_sem": (36.90, 15.02, 33.00),
          "3:agents_no_comm": (37.45, 15.90, 34.56), "4:agents_comm": (39.52, 17.12, 36.90),
          "5:agents_comm_caa": (41.11, 18.21, 36.03), "6:rl": (41.69, 19.47, 37.92),
          "ref:pgn_coverage": (39.53, 17.28, 36.38)}
DIRECTIONS = [  # (B, A, the step): the poster's claims, the questions this table was run to answer
    ("2:single_sem", "1:single_mle", "+ SEM"), ("3:agents_no_comm", "2:single_sem", "three agents"),
    ("4:agents_comm", "3:agents_no_comm", "communication"),
    ("5:agents_comm_caa", "4:agents_comm", "contextual agent attention"), ("6:rl", "5:agents_comm_caa", "+ RL"),
    ("6:rl", "ref:pgn_coverage", "DCA (row 6) above See et al."),
]
HEADLINE_DECODE = "beam+block"  # beam 4 with trigram blocking: the decoding the poster's directions are read at


def bootstrap(a: Dict, b: Dict):
    """[(difference, low, high)] of B - A in ROUGE points for ROUGE-1, -2, -L, paired over the test documents."""
    return bootstrap_files(*(file_key(entry["per_doc"]) for entry in (a, b)))


def file_key(path) -> tuple:
    stat = Path(path).stat()
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=None)
def bootstrap_files(key_a: tuple, key_b: tuple):
    """One paired bootstrap per pair of per-document score files (path, mtime, size): sections 2 and 5 read the
    same intervals."""
    return paired_intervals(key_a[0], key_b[0], RESAMPLES)


def interval(a: Dict, b: Dict) -> str:
    """'+1.23 [+0.10, +2.40]' for ROUGE-1, ROUGE-2 and ROUGE-L of B - A, paired over the test documents."""
    return " | ".join(f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in bootstrap(a, b))


def pairs(rows: Dict[str, Dict]):
    """(B label, A label) of every comparison the report makes within one seed: each trained system against row
    1, each poster row against the row above it and each control against what it controls (``COMPARED``)."""
    for label in rows:
        base, suffix = split_seed(label)
        for other in ([ROW_1] if base != ROW_1 else []) + list(COMPARED.get(base, ())):
            if other + suffix in rows:
                yield label, other + suffix


def verdict_table(entries, decode: str) -> List[str]:
    """Each comparison over the seeds that have it: the verdict by the rule for ROUGE-1, -2 and -L."""
    rows = {e["system"]: e for e in entries if e["decode"] == decode}
    seeds = {}
    for b, a in pairs(rows):
        key = (split_seed(b)[0], split_seed(a)[0])
        seeds.setdefault(key, []).append(bootstrap(rows[a], rows[b]))
    lines = [f"Decoding `{decode}`: B - A over the seed runs that have both.", "",
             "| B | A | seeds | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|---|"]
    for (b, a), runs in seeds.items():
        cells = [verdict([run[metric] for run in runs]) for metric in range(3)]
        lines.append(f"| {b} | {a} | {len(runs)} | " + " | ".join(cells) + " |")
    return lines


def significance_table(entries, decode: str) -> List[str]:
    """Every trained system against row 1, each poster row against the row above it and each control against
    what it controls (``COMPARED``; same seed)."""
    rows = {e["system"]: e for e in entries if e["decode"] == decode}
    lines = [f"Decoding `{decode}`: B - A in ROUGE points, 95% paired-bootstrap interval.", "",
             "| B | A | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|"]
    for b, a in pairs(rows):
        lines.append(f"| {b} | {a} | {interval(rows[a], rows[b])} |")
    return lines


def directions_table(entries) -> List[str]:
    """Each of the poster's directions (``DIRECTIONS``) at the headline decoding: the poster's change, ours in
    every seed that has both rows, and the outcome by the rule (``against_paper``) per score."""
    rows = {e["system"]: e for e in entries if e["decode"] == HEADLINE_DECODE}
    lines = [f"Decoding `{HEADLINE_DECODE}`; ours: B - A per seed, 95% paired-bootstrap interval.", "",
             "| step | B - A | poster R-1 / R-2 / R-L | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|---|"]
    for b, a, step in DIRECTIONS:
        runs = [bootstrap(rows[a + suffix], rows[b + suffix]) for suffix in seed_suffixes(rows)
                if a + suffix in rows and b + suffix in rows]
        paper = [pb - pa for pb, pa in zip(POSTER[b], POSTER[a])]
        cells = [f"{against_paper(paper[m], [run[m] for run in runs])}: " + shown_intervals([run[m] for run in runs])
                 if runs else "not run" for m in range(3)]
        lines.append(f"| {step} | {b} - {a} | " + " / ".join(f"{c:+.2f}" for c in paper) + " | "
                     + " | ".join(cells) + " |")
    return lines


def seed_suffixes(rows: Dict[str, Dict]) -> List[str]:
    """The seed suffixes ('' for seed 1, '_seed2', ...) of the systems in ``rows``, in seed order."""
    return sorted({split_seed(label)[1] for label in rows}, key=lambda suffix: int(suffix[len("_seed"):] or 1))


def cohesion_table(entries) -> List[str]:
    lines = ["| system | test cos(q, q-1) | test cos(q, q-2) | repeated sentences d=1 % | d=2 % | "
             "agent attention entropy (uniform) | largest agent weight |", "|---|---|---|---|---|---|---|"]
    for e in entries:
        if e["decode"] != "beam":
            continue
        stats = e["run"].test_stats(e["system"]) if e["trained"] else {}
        agents = (f"{fmt(stats['agent_entropy'], 3)} ({fmt(stats['agent_uniform_entropy'], 3)})"
                  if "agent_entropy" in stats else "")
        lines.append(f"| {e['system']} | {fmt(stats.get('end_cos_1'), 3)} | {fmt(stats.get('end_cos_2'), 3)} | "
                     f"{fmt(repeated_sentences(e['summaries'], 1))} | {fmt(repeated_sentences(e['summaries'], 2))} | "
                     f"{agents} | {fmt(stats.get('agent_max_weight'), 3)} |")
    return lines


def seed_means(entries) -> List[str]:
    groups = {}
    for e in entries:
        groups.setdefault((split_seed(e["system"])[0], e["decode"]), []).append(e)
    lines = ["| system | decoding | seeds | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|---|"]
    for (label, decode), group in groups.items():
        means = [statistics.mean(e["rouge"][m] for e in group) for m in ("ROUGE-1", "ROUGE-2", "ROUGE-L")]
        lines.append(f"| {label} | {decode} | {len(group)} | " + " | ".join(fmt(m) for m in means) + " |")
    return lines


def report(works: Sequence[Path], out: Path, command: str, declared: Dict) -> str:
    """Writes the report of the work folders or archives ``works`` to ``out``; ``declared`` (base label ->
    (config, options, parent label or None)) is what the script's command trains for each system."""
    with tempfile.TemporaryDirectory(prefix="dca2018_report.") as unpacked:
        return write_report([open_run(work, Path(unpacked)) for work in works], out, command, declared)


def declared_lines(declared: Dict) -> List[str]:
    lines = ["| system | train.sh options (+ `--seed N` for LABEL_seedN) | from |", "|---|---|---|"]
    for label, (config, extra, parent) in declared.items():
        lines.append(f"| {label} | `{' '.join(['-c', config, extra]).strip()}` | {parent or ''} |")
    return lines


def left_out_lines(left_out) -> List[str]:
    if not left_out:
        return ["None: every finished system's training record matches its command."]
    return [f"- {label} in `{run.name}`: {why}" for run, label, why in left_out]


RUN_FACTS = ("Command:", "Made at commit", "Corpus ", "Budget:")  # results.md's lines on how a run was made


def run_lines(run: Run) -> List[str]:
    """A run's name, then its results.md's lines on how it was made: the command, the commit, the machine and
    the versions, the corpus and the budget (a stopped run has no results.md yet)."""
    results = run.work / "results.md"
    if not run.finished or not results.is_file():
        return [f"- `{run.name}`: **not finished**, the systems it has finished so far"]
    return [f"- `{run.name}`:", *(f"  - {line}" for line in read_lines(results) if line.startswith(RUN_FACTS))]


def seeds_sentence(entries) -> str:
    """Which training seeds the report's systems have (LABEL_seedN: --seed N; LABEL: the configs' seed 1)."""
    seeds = sorted({int(split_seed(e["system"])[1][len("_seed"):] or 1) for e in entries if e["trained"]})
    return (f"Training seeds: {', '.join(map(str, seeds)) or 'none'} (LABEL_seedN trained with --seed N, LABEL "
            "with the configs' seed 1); section 4 gives each row's number of seeds.")


def write_report(runs: Sequence[Run], out: Path, command: str, declared: Dict) -> str:
    left_out = checked(runs, declared)
    entries = collect(runs)
    decodes = list(dict.fromkeys(e["decode"] for e in entries if e["decode"]))
    lines = ["# dca2018_cnndm: the poster's ablation of deep communicating agents at CPU scale", "",
             f"Report: `{command}`", "", provenance(seeds_sentence(entries)), "",
             "Runs, each with what its results.md says of its last invocation (systems an earlier invocation "
             "trained in the same folder are read too, each checked against its training record below):"]
    lines += [line for run in runs for line in run_lines(run)]
    lines += ["", "Systems as the script trains them (each system below has a training record with these options, "
              "in any order, and its parent's; the updates are in its row):", "", *declared_lines(declared), "",
              "Left out (a record that does not match, or none):", "", *left_out_lines(left_out)]
    count = sum(len(list(pairs({e["system"]: e for e in entries if e["decode"] == d}))) for d in decodes)
    lines += ["", "## 0. The poster's directions", "",
              "The questions this table was run to answer, read at one decoding: a direction *reproduces* when "
              "every seed (two or more) shows the poster's sign with an interval that excludes zero, *does not "
              "reproduce* when every seed shows the other sign so, and is *inconclusive* otherwise.", "",
              *directions_table(entries), "", "## 1. Every system", "", *main_table(entries), "",
              "## 2. Paired bootstraps", "",
              f"{count} comparisons x 3 scores = {3 * count} intervals at 95 %, none corrected for their number: "
              f"by chance alone about {3 * count // 20} of them would exclude zero if no system differed.", ""]
    for decode in decodes:
        lines += [*significance_table(entries, decode), ""]
    lines += ["## 3. Semantic cohesion checks", "",
              "Decoder states at the test references' sentence ends (teacher-forced, `after` reading); repeated "
              "sentences in the beam outputs without blocking.", "", *cohesion_table(entries), "",
              "## 4. Means over seeds", "", *seed_means(entries), "",
              "## 5. Verdicts by the rule", "",
              "A direction holds only when every seed run (two or more) shows it with a paired interval that "
              "excludes zero; otherwise inconclusive. The intervals resample test documents of one trained model "
              "each, and are not corrected for the number of comparisons.", ""]
    for decode in decodes:
        lines += [*verdict_table(entries, decode), ""]
    text = "\n".join(lines)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text

"""Shared steps of the experiment scripts: corpora from ../shared/data, the project's shell scripts, official
ROUGE, repetition statistics and LEAD baselines.  Every step runs the project's own commands (preprocess.sh,
train.sh, generate.sh, summ-rouge), so an experiment measures what a user runs.

Research-only corpora (LCSTS, CNN/DM) are read from ../shared/data and written only under the experiment's
work directory, never into the repository.
"""
import fcntl
import json
import os
import socket
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_plugins.scoring import summary_stats
from fairseq_plugins.scoring.significance import paired_bootstrap, read_per_doc
from fairseq_plugins.text import textio

ROOT = Path(__file__).resolve().parents[2]

ROUGE_ROW = re.compile(r"^(ROUGE-(?:1|2|L))\s+([\d.]+)\s+\[", re.M)
TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")
WPS = re.compile(r"\| train_inner \|.*?\bwps=([\d.]+)")
VALID_LOSS = re.compile(r"\| valid on 'valid' subset \| loss ([\d.]+)")
EPOCH_STEP = re.compile(r"\| train_inner \| epoch (\d+):\s+(\d+) / (\d+) ")  # fairseq's simple log format
EPOCH_SIZE = re.compile(r"grouped total_num_itrs = (\d+)")  # updates per epoch, logged as fairseq starts one
UPDATES = re.compile(r"num_updates[ =](\d+)")



def config_array(config: str, name: str) -> List[str]:
    """A config's array (PREP_ARGS, TRAIN_ARGS, GEN_ARGS) as train.sh resolves it (scripts/lib.sh load_config)."""
    script = f'source "{ROOT}/scripts/lib.sh"; load_config "$1"; printf "%s\\0" "${{{name}[@]}}"'
    result = subprocess.run(["bash", "-c", script, "config_array", config], capture_output=True)
    if result.returncode != 0:
        raise SystemExit(f"cannot read config {config}: {result.stderr.decode('utf-8', 'replace').strip()}")
    return [word.decode("utf-8") for word in result.stdout.split(b"\0")[:-1]]

class Experiment:
    """A work directory with a log folder; runs commands with the project's .venv first on PATH, this checkout
    first on PYTHONPATH, OMP_NUM_THREADS = ``threads`` (0: torch's default, one thread per core) and
    TRAIN_VERBOSE=1 (train.sh's whole log in the command's log, where the reports read it)."""

    def __init__(self, name: str, work: Path, threads: int = 1):
        self.name = name
        self.work = work.resolve()
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, TRAIN_VERBOSE="1")
        venv_bin = ROOT / ".venv" / "bin"
        if venv_bin.is_dir():
            self.env["PATH"] = f"{venv_bin}:{self.env['PATH']}"
        # this checkout's code, also for the summ-* commands (whichever checkout the venv was installed from)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), self.env.get("PYTHONPATH")]))
        if threads > 0:
            self.env["OMP_NUM_THREADS"] = str(threads)

    def log(self, message: str) -> None:
        print(f"{self.name}: {message}", file=sys.stderr, flush=True)

    def fail(self, message: str):
        sys.exit(f"{self.name}: {message}")

    def run(self, cmd: Sequence, log_name: str, stdout: Optional[Path] = None, append: bool = False) -> float:
        """Runs ``cmd`` (``run_logged``) with its output in logs/LOG_NAME (appended to with ``append``, e.g. a
        resumed training); returns the wall time in seconds; exits with the log's tail on failure."""
        log_file = self.logs / log_name
        self.log(" ".join(map(str, cmd)) + f"   (log: {log_file})")
        status, seconds = run_logged(cmd, log_file, self.env, append=append, stdout=stdout)
        if status != 0:
            self.fail(f"failed ({status}): {cmd[0]}\n" + log_tail(log_file))
        return seconds


def invocation(script: str, argv: Optional[Sequence[str]] = None) -> str:
    """The command line that ran SCRIPT (a file of scripts/experiments, or a path under scripts/ such as
    "bench/serve_load.py") with ARGV (default: this process's arguments), quoted as a shell takes it: what a
    results file prints as the command that made it."""
    args = sys.argv[1:] if argv is None else argv
    path = f"scripts/{script}" if "/" in script else f"scripts/experiments/{script}"
    return " ".join(["python", path, *(shlex.quote(str(arg)) for arg in args)])


def run_logged(cmd: Sequence, log_file: Path, env: Optional[dict] = None, append: bool = False,
               stdout: Optional[Path] = None, header: bool = False) -> Tuple[int, float]:
    """Runs ``cmd`` from the repository root, stdin closed, with its stderr (and its stdout unless ``stdout`` is
    given) in ``log_file``, appended to with ``append`` (after a ``+ command`` line with ``header``); returns
    (its exit status, the wall time in seconds).  The one way the experiment scripts run a step."""
    start = time.time()
    with log_file.open("a" if append else "w", encoding="utf-8") as err, \
            (stdout.open("w", encoding="utf-8") if stdout else open(os.devnull, "w")) as out:
        if header:
            print("+", " ".join(map(str, cmd)), file=err, flush=True)
        result = subprocess.run(list(map(str, cmd)), cwd=ROOT, env=env, stdout=out if stdout else err, stderr=err,
                                stdin=subprocess.DEVNULL)
    return result.returncode, time.time() - start


def log_tail(log_file: Path, chars: int = 3000) -> str:
    return log_file.read_text(encoding="utf-8", errors="replace")[-chars:]


# ----------------------------------------------------------------------------------------------- locks
_HELD = []  # the open lock files: a lock lasts as long as this process (its file is never inherited)


class LockedError(RuntimeError):
    """The folder is locked by another process; the message names it."""


def hold_lock(folder: Path, what: str) -> None:
    """An exclusive lock on FOLDER/.lock for the rest of this process, or LockedError naming the holder (its
    host, pid, Slurm job and start, which the file keeps).  Two tables in one work folder would rebuild data/
    and retrain the same systems at once.  flock(2), as scripts/launch/common.sh's hold_lock for a checkpoint
    folder: the kernel releases it when the holder dies, even by kill -9, so it is never stale."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".lock"
    handle = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "holder not yet recorded"
        handle.close()
        raise LockedError(f"{folder} is locked by another {what} ({holder}; lock {path}): two runs must never "
                          f"share a folder; wait for it to end, stop it, or give another --work") from None
    job = os.environ.get("SLURM_JOB_ID")
    handle.seek(0)
    handle.truncate()
    handle.write(f"host {socket.gethostname()}, pid {os.getpid()}{f', Slurm job {job}' if job else ''}, since "
                 f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    handle.flush()
    _HELD.append(handle)


# ----------------------------------------------------------------------------------------------- text files
def read_lines(path: Path) -> List[str]:
    """The lines of a UTF-8 file as :func:`fairseq_plugins.text.textio.read_lines` reads them."""
    return [line for _, line in textio.read_lines(str(path))]


def write_lines(path: Path, lines: Sequence[str]) -> None:
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def work_language(work: Path, default: str = None) -> str:
    """The language of a compare.py work folder's corpus (WORK/data/prep.json's settings), or ``default`` where the
    folder keeps no data (an archive); without a default a missing prep.json is an error."""
    prep = work / "data" / "prep.json"
    if not prep.is_file() and default is not None:
        return default
    lang = json.loads(prep.read_text(encoding="utf-8")).get("settings", {}).get("lang")
    if lang is None:
        raise SystemExit(f"{prep}: no settings.lang, so not the record summ-prepare writes; prepare {work} again")
    return lang


# ----------------------------------------------------------------------------------------------- significance
def per_doc_rouge(exp: "Experiment", name: str, lang: str) -> Path:
    """WORK/logs/rouge_NAME.per_doc.tsv: official ROUGE-1.5.5 per-document F1 of WORK/outputs/NAME.txt against
    the test references (summ-rouge --per-doc), computed once."""
    table = exp.logs / f"rouge_{name}.per_doc.tsv"
    if not table.is_file():
        exp.run(["summ-rouge", "--refs", exp.work / "data" / "ref" / "test.tgt", "--hyps",
                 exp.work / "outputs" / f"{name}.txt", "--lang", lang, "--per-doc", table], f"rouge_{name}.per_doc.log")
    return table


def paired_intervals(per_doc_a: Path, per_doc_b: Path, resamples: int = 10000) -> List[Tuple[float, float, float]]:
    """[(difference, low, high)] of B - A in ROUGE points for ROUGE-1, -2 and -L: a 95 % paired bootstrap over the
    test documents (seed 1)."""
    delta, low, high, _ = paired_bootstrap(read_per_doc(per_doc_a), read_per_doc(per_doc_b), resamples, 1)
    return [(100 * d, 100 * lo, 100 * hi) for d, lo, hi in zip(delta, low, high)]


# ----------------------------------------------------------------------------------------------- archives
ARCHIVE_SUFFIX = ".tar.xz"
# what a compare.py run's tables and intervals are made of, without checkpoints or data: its tables, summaries,
# per-document scores, training logs and the statistics of its checkpoints
RUN_FILES = ("results.json", "results.md", "outputs/*.txt", "logs/train_*.log", "logs/rouge_*.out",
             "logs/rouge_*.per_doc.tsv", "models/*/train_seconds", "models/*/valid_stats.json",
             "models/*/test_stats.json", "models/*/training.json")


def kept_or_made(kept: Path, models, make) -> dict:
    """``make()``'s results (a JSON-able dict), kept in the file ``kept`` and reused while it is newer than every
    model folder's checkpoint_best.pt in ``models``."""
    newest = max((model / "checkpoint_best.pt").stat().st_mtime for model in models)
    if kept.is_file() and kept.stat().st_mtime > newest:
        return json.loads(kept.read_text(encoding="utf-8"))
    results = make()
    kept.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def write_report(exp: "Experiment", out: Path, text: str, done: str) -> None:
    """Writes a report to OUT (its folder made) and says ``done`` with its path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    exp.log(f"{done}: {out}")


def pack_beside(work: Path, patterns: Sequence[str], report: Path) -> List[str]:
    """``pack`` into the archive beside a report: docs/results/NAME.md -> docs/results/NAME/run.tar.xz."""
    return pack(work, patterns, report.parent / report.stem / f"run{ARCHIVE_SUFFIX}")


def pack(work: Path, patterns: Sequence[str], dest: Path) -> List[str]:
    """Packs the files of WORK that match ``patterns`` (globs, in their order) into DEST, a .tar.xz, under their
    paths in WORK; returns those paths."""
    if not dest.name.endswith(ARCHIVE_SUFFIX):
        raise SystemExit(f"the archive must be a {ARCHIVE_SUFFIX} file, not {dest}")
    members = list(dict.fromkeys(str(path.relative_to(work)) for pattern in patterns
                                 for path in sorted(work.glob(pattern)) if path.is_file()))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:xz") as packed:
        for member in members:
            packed.add(work / member, arcname=member)
    return members


def unpack(archive: Path, into: Path) -> Path:
    """Unpacks ARCHIVE (what ``pack`` wrote) into INTO/NAME, NAME being its file name without .tar.xz; returns
    that folder."""
    folder = into / archive.name[:-len(ARCHIVE_SUFFIX)]
    with tarfile.open(archive, "r:xz") as packed:
        packed.extractall(folder, filter="data")
    return folder


# ----------------------------------------------------------------------------------------------- project steps
def split_seed(label: str) -> Tuple[str, str]:
    """A system label and its seed suffix, as the experiment scripts label a seed other than the configs':
    '2:single_sem_seed2' -> ('2:single_sem', '_seed2'); a label without a seed -> (label, '')."""
    head, sep, tail = label.rpartition("_seed")
    return (head, sep + tail) if sep and tail.isdigit() else (label, "")


def is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def option_groups(options: Sequence[str], ignore: Sequence[str] = ()) -> List[List[str]]:
    """train.sh options as fairseq reads them: each ``--flag`` with its values, sorted, so two orders of the
    same options compare equal (kept in their order when a flag repeats, since the last one then wins); the
    flags in ``ignore`` are left out with their values."""
    groups, flags = [], []
    for word in options:
        if word.startswith("-") and not is_number(word):  # a negative value (-0.5, -1e-4) is not a flag
            groups.append([word])
            flags.append(word)
        elif groups:
            groups[-1].append(word)
        else:
            groups.append([word])
    groups = [group for group in groups if group[0] not in ignore]
    return groups if len(set(flags)) < len(flags) else sorted(groups)


def train_facts(log_file: Path) -> Dict:
    """Updates reached, epochs of the training data they made (``epochs_done``), mean training words/s (logged
    intervals after the first), best validation loss."""
    text = log_file.read_text(encoding="utf-8", errors="replace")
    updates = UPDATES.findall(text)
    wps = [float(w) for w in WPS.findall(text)][1:]
    losses = [float(v) for v in VALID_LOSS.findall(text)]
    return {"updates": int(updates[-1]) if updates else 0, "epochs": epochs_done(text),
            "words_per_s": statistics.mean(wps) if wps else None, "best_valid_loss": min(losses) if losses else None}


def epochs_done(log_text: str) -> Optional[float]:
    """How many passes over the training data a fairseq-train log made: its last update count over the updates an
    epoch has (fairseq's ``total_num_itrs = n``, or n of its ``epoch E: i / n`` lines), None when it logs neither.
    fairseq closes a run stopped by --max-update mid-epoch with an ``epoch E |`` line, so E would overstate it."""
    per_epoch = [int(n) for n in EPOCH_SIZE.findall(log_text)] + [int(n) for _, _, n in EPOCH_STEP.findall(log_text)]
    updates = UPDATES.findall(log_text)
    if not per_epoch or not per_epoch[-1] or not updates:
        return None
    return int(updates[-1]) / per_epoch[-1]


def decode_facts(generate_log: Path) -> Dict:
    """Sentences/s of fairseq-generate (its own timing of the generation, without start-up), from the log of
    generate.sh."""
    match = TRANSLATED.search(generate_log.read_text(encoding="utf-8", errors="replace"))
    return {"sentences_per_s": float(match.group(4)) if match else None}


def official_rouge(exp: Experiment, refs: Path, hyps: Path, lang: str, name: str) -> Dict[str, float]:
    """Official ROUGE-1.5.5 F1 (percent, the script's Average_F) via summ-rouge."""
    out = exp.logs / f"rouge_{name}.out"
    exp.run(["summ-rouge", "--refs", refs, "--hyps", hyps, "--lang", lang], f"rouge_{name}.log", stdout=out)
    table = out.read_text(encoding="utf-8")
    scores = {metric: float(value) for metric, value in ROUGE_ROW.findall(table)}
    if set(scores) != {"ROUGE-1", "ROUGE-2", "ROUGE-L"}:
        exp.fail(f"could not read ROUGE-1/2/L F1 from summ-rouge's output:\n{table}")
    return scores


# ----------------------------------------------------------------------------------------------- statistics
def repetition(summaries: Sequence[str], lang: str) -> Dict[str, float]:
    """``repeated_trigrams``: percent of all trigrams that repeat an earlier trigram of the same summary;
    ``with_repeat``: percent of summaries with at least one such trigram; ``mean_length`` in units (words;
    Chinese: characters).  summ-analyze's code and definitions (sentence separators such as <q> are no units)."""
    figures = summary_stats.aggregate([summary_stats.summary_counts(s, lang) for s in summaries])
    return {"repeated_trigrams": _or_zero(figures, "repeated_trigrams"),
            "with_repeat": _or_zero(figures, "with_repeat"), "mean_length": _or_zero(figures, "tokens")}


def abstraction(sources: Sequence[str], summaries: Sequence[str], lang: str, prep: Optional[Path] = None
                ) -> Dict[str, float]:
    """``novel_2grams``: percent of the summaries' bigrams that are not in their source; ``copied_sentences``:
    percent of their sentences found verbatim in their source.  Both pooled over the documents (summ-analyze).
    With ``prep`` (the data's prep.json), every text is first tokenized as the model's source was, the source
    cut as the model read it (summ-analyze --prep): raw sources and references count in the model's units."""
    if prep is not None:
        sources, systems, lang = summary_stats.prepared(str(prep), sources, {"summaries": summaries})
        summaries = systems["summaries"]
    figures = summary_stats.aggregate([summary_stats.document_counts(src, summ, lang)
                                         for src, summ in zip(sources, summaries)])
    return {"novel_2grams": _or_zero(figures, "novel_2grams"),
            "copied_sentences": _or_zero(figures, "copied_sentences")}


def _or_zero(figures: Dict, key: str) -> float:
    """A pooled figure, 0.0 when no document defines it (no summary, or no trigram at all)."""
    return figures.get(key, {}).get("pooled") or 0.0


def verdict(runs: Sequence[Tuple[float, float, float]]) -> str:
    """The project's rule for a direction (B - A) over seed runs, each (difference, low, high) of a paired
    interval: it holds only when every run, two or more, shows it with an interval that excludes zero.
    "B > A in every seed (n)", "B < A in every seed (n)", or "inconclusive (...)" saying why."""
    if len(runs) < 2:
        return f"inconclusive (one seed: {runs[0][0]:+.2f} [{runs[0][1]:+.2f}, {runs[0][2]:+.2f}])" if runs \
            else "inconclusive (no seed)"
    shown = shown_intervals(runs)
    if all(low > 0 for _, low, _ in runs):
        return f"B > A in every seed ({len(runs)}): {shown}"
    if all(high < 0 for _, _, high in runs):
        return f"B < A in every seed ({len(runs)}): {shown}"
    return f"inconclusive ({shown})"


def shown_intervals(runs: Sequence[Tuple[float, float, float]]) -> str:
    """'+1.23 [+0.10, +2.40], ...' for (difference, low, high) per seed run."""
    return ", ".join(f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in runs)


def against_paper(paper_change: float, runs: Sequence[Tuple[float, float, float]]) -> str:
    """A paper's direction (the sign of ``paper_change``, B - A in the paper) judged by the project's rule over
    our seed runs, each (difference, low, high) of a paired interval: "reproduces" when every run, two or more,
    has the paper's sign with an interval that excludes zero; "does not reproduce" when every run, two or more,
    has the other sign so; otherwise "inconclusive" (always, when the paper shows no change)."""
    if paper_change == 0:
        return "inconclusive"
    sign = 1.0 if paper_change > 0 else -1.0
    if len(runs) >= 2 and all(sign * low > 0 and sign * high > 0 for _, low, high in runs):
        return "reproduces"
    if len(runs) >= 2 and all(sign * low < 0 and sign * high < 0 for _, low, high in runs):
        return "does not reproduce"
    return "inconclusive"


TRIVIAL = re.compile(r"^(LEAD-\d+|control:fairseq_lstm\w*)$")  # the rows of the trivial baselines


def baseline_flags(rows, seed_of=lambda system: "") -> dict:
    """id(row) -> "**LEAD-3**, ..." for each row whose ROUGE-1 is below a trivial baseline's in the same table (a
    LEAD-k row; fairseq's `lstm`, labelled control:fairseq_lstm, at the same decoding and, where a table holds
    several seeds, of the same seed: ``seed_of(system)``): a bad setup or an untrained model until a control
    explains it."""
    scored = [row for row in rows if "failed" not in row]
    baselines = [row for row in scored if TRIVIAL.match(row["system"])]
    flags = {}
    for row in scored:
        if row["system"].startswith("LEAD-"):
            continue
        below = [base["system"] for base in baselines if base["system"] != row["system"]
                 and base["decode"] in ("", row["decode"]) and row["rouge"]["ROUGE-1"] < base["rouge"]["ROUGE-1"]
                 and (base["system"].startswith("LEAD-") or seed_of(base["system"]) == seed_of(row["system"]))]
        if below:
            flags[id(row)] = ", ".join(f"**{name}**" for name in below)
    return flags


def lead(sources: Sequence[str], lang: str, size: int) -> List[str]:
    """LEAD-N: the first ``size`` sentences (English, ending at '.', '!' or '?' tokens) or characters (Chinese,
    whitespace removed) of each source."""
    if lang == "zh":
        return ["".join(summary_stats.tokens(src, lang))[:size] for src in sources]
    return [" <q> ".join(sentences(src)[:size]) for src in sources]


def sentences(text: str) -> List[str]:
    """English sentences of a line: split at ``<q>`` when it has one, else after each '.', '!' or '?' token."""
    if "<q>" in text.split():
        return [part.strip() for part in text.split("<q>") if part.strip()]
    out, current = [], []
    for token in text.split():
        current.append(token)
        if token in (".", "!", "?"):
            out.append(" ".join(current))
            current = []
    return out + ([" ".join(current)] if current else [])

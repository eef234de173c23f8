"""The training and decode records of the experiment scripts: what made a trained system or a decode, compared to
decide whether it is reused, resumed or run again.  ``train_or_reuse`` is the one training step of compare.py,
shi2018_table1.py, see2017_adagrad.py, checkpoint_choice.py and newcomer.py; slurm_table.py and the reports read
the records.  ``provenance`` is the line of a results table that says where and with what it was made.

A training record (MODEL/training.json) holds the train.sh options, the config file's text, the data's prep.json,
a continued system's parent record, the digests of other inputs (a word2vec file) and the code: one SHA-256 of
train.sh and every script it sources or runs (scripts/lib.sh, the launchers' common.sh, checkpoint_guard.py, ...),
the config chain and fairseq_plugins/, with fairseq's and torch's versions and the commit.  Records are compared
with the options as fairseq reads them (any order) and the code without its commit (``comparable``); an entry
that only one of two records holds makes them differ.
"""
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import List, Optional, Sequence

from scripts.experiments.lib import ROOT, Experiment, invocation, option_groups


RECORD = "training.json"  # beside a trained system: how it was trained (training_record)


# A config sourcing another: beside it (the shipped configs' form) or by an absolute path (a derived config).
SOURCED = re.compile(r'^\s*(?:source|\.)\s+"?(?:\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/)?([^"\s]+\.conf)"?', re.M)


STARTED = "training.started.json"  # beside a training under way: its record, when it started, earlier attempts


def code_record(files: list) -> dict:
    """The code a step runs: one SHA-256 over ``files`` and the versions of fairseq and torch, with the commit
    of the checkout when it is a git checkout (what a row trained on older code names)."""
    return {"sha256": sha256(files), "fairseq": package_version("fairseq-fixed"), "torch": package_version("torch"),
            "commit": git_commit()}


def package_version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit() -> Optional[str]:
    """HEAD of the repository (None outside a git checkout); "+" marks uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty else "")


def provenance(seeds: str) -> str:
    """Where and with what a table was made: the commit, the date, the machine and the versions, then ``seeds``
    (a sentence on the seeds behind its rows)."""
    import torch

    from scripts.bench.machine import cpu_model

    gpu = f"; GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "; no GPU"
    return (f"Made at commit {git_commit() or 'unknown (not a git checkout)'} on "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {cpu_model()}, {os.cpu_count()} logical CPUs"
            f"{gpu}; fairseq-fixed {package_version('fairseq-fixed')}, torch {package_version('torch')}. {seeds}")


def config_file(config: str) -> Path:
    """The file of ``config``: a name of configs/ or the path of a .conf file (as train.sh -c takes either)."""
    return Path(config) if config.endswith(".conf") else ROOT / "configs" / f"{config}.conf"


def config_chain(config: str) -> list:
    """configs/CONFIG.conf (or the file CONFIG) and every config it sources (``source .../X.conf``), recursively."""
    chain, todo = [], [config_file(config)]
    while todo:
        path = todo.pop()
        if path in chain or not path.is_file():
            continue
        chain.append(path)
        todo += [path.parent / name for name in SOURCED.findall(path.read_text(encoding="utf-8"))]
    return chain


# A script a shell file sources or runs, by its path from the repository ("$ROOT/scripts/lib.sh") or from the
# shell file's folder ("$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"): its base and its path.
NAMED_SCRIPT = re.compile(r'(\$ROOT|\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\))/([\w./-]+\.(?:sh|py))\b')


def named_scripts(shell: Path) -> list:
    """The .sh and .py files the shell file ``shell`` names outside its comment lines (sourced, run or set)."""
    code = "\n".join(line for line in shell.read_text(encoding="utf-8").splitlines()
                     if not line.lstrip().startswith("#"))
    return [(ROOT if base == "$ROOT" else shell.parent) / name for base, name in NAMED_SCRIPT.findall(code)]


def script_closure(script: Path) -> list:
    """``script`` and every script it names, and every script those shell files name, recursively (the ones
    that exist)."""
    closure, todo = [], [script]
    while todo:
        path = Path(os.path.normpath(todo.pop()))
        if path in closure or not path.is_file():
            continue
        closure.append(path)
        if path.suffix == ".sh":
            todo += named_scripts(path)
    return closure


def training_code(config: str) -> list:
    """The files a training runs: train.sh and every script it sources or runs (``script_closure``: scripts/lib.sh,
    the launchers' common.sh, checkpoint_guard.py, ...), the config and the configs it sources, and every module of
    fairseq_plugins/ (which the python -m commands of those scripts run)."""
    return script_closure(ROOT / "train.sh") + config_chain(config) + sorted((ROOT / "fairseq_plugins").rglob("*.py"))


def training_record(config: str, options: Sequence, data: Path, parent: Optional[dict] = None,
                    inputs: Optional[dict] = None) -> dict:
    """What makes a trained system what it is: the train.sh options (``-c CONFIG`` and ``options``, budget
    included), the config file's text, the data's preprocessing record (prep.json), a continued system's
    parent record, ``inputs`` (name: SHA-256 of a file the training reads, e.g. word2vec) and the code.
    Paths of the work folder are left out, so a moved work folder still matches."""
    path, prep = config_file(config), data / "prep.json"
    record = {
        "train_options": ["-c", path.stem, *map(str, options)],  # a config by name or by its file: its name
        "config_text": path.read_text(encoding="utf-8") if path.is_file() else None,
        "data_prep": prep.read_text(encoding="utf-8") if prep.is_file() else None,
        "parent": parent,
        "code": code_record(training_code(config)),
    }
    if inputs:
        record["inputs"] = inputs
    return record


def train_or_reuse(exp: Experiment, label: str, model: Path, log_name: str, want: dict, command: Sequence,
                   retrain: bool = False, reuse_stale: bool = False, saves: bool = True) -> Optional[str]:
    """Trains ``label`` into ``model`` with ``command`` (output in logs/LOG_NAME), unless a finished training of
    record ``want`` is there (reused; with ``reuse_stale`` also one made by other code), or resumes an
    interrupted one of the same record from its checkpoint_last.pt (log appended, time of the attempts added);
    anything else starts again from nothing, the reason logged.  ``saves``: False for a run that writes no
    checkpoint (--no-save), which is reused by its record alone and never resumed.  Returns the commit of the
    older code a --reuse-stale system was trained on, else None."""
    verdict, older = ("--retrain", None) if retrain else reuse_verdict(exp, model, log_name, want, reuse_stale,
                                                                       saves)
    if verdict is None:
        exp.log(f"{label}: reusing the finished training in {model} " + (
            f"(--reuse-stale: made by older code, commit {older})" if older
            else "(same options, config, data, parent and code)"))
        return older
    earlier = resume_point(model, want) if saves and not retrain else None
    if earlier is None:
        start_afresh(exp, model, label, verdict)
    else:
        exp.log(f"{label}: resuming the interrupted training from {model / 'checkpoint_last.pt'} (started with the "
                f"same record; {earlier / 60:.1f} min of training before it)")
    mark_started(model, want, earlier or 0.0)
    seconds = exp.run(command, log_name, append=earlier is not None)
    record_training(model, want, (earlier or 0.0) + seconds)
    return None


def start_afresh(exp: Experiment, model: Path, label: str, verdict: str) -> None:
    """Removes what an earlier training left in ``model``: a fresh run never resumes one with another record."""
    if model.exists():
        exp.log(f"{label}: training from the start: {verdict}")
    shutil.rmtree(model, ignore_errors=True)


def read_record(model: Path) -> Optional[dict]:
    record = model / RECORD
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def comparable(record: Optional[dict]) -> Optional[dict]:
    """A training record as it is compared: its options, and its parent's, as fairseq reads them
    (``option_groups``: the same options in another order are the same training), and its code without the
    commit (a commit that changes no file the training runs changes nothing)."""
    if record is None:
        return None
    code = {key: value for key, value in (record.get("code") or {}).items() if key != "commit"} or None
    return dict(record, train_options=option_groups(record.get("train_options") or []), code=code,
                parent=comparable(record.get("parent")))


def reuse_verdict(exp: Experiment, model: Path, log_name: str, want: dict, reuse_stale: bool = False,
                  saves: bool = True):
    """(why it is retrained, or None to reuse it; the commit of older code it keeps, or None) for the system in
    ``model``: reused when it finished training with exactly ``want``, or, with ``reuse_stale``, with ``want``
    but for the code (then the row says so).  ``saves``: its checkpoint_best.pt must be there."""
    finished = (model / "train_seconds").is_file()  # written only when training ran to the end
    saved = not saves or (model / "checkpoint_best.pt").is_file()
    if not finished or not saved or not (exp.logs / log_name).is_file():
        return "no finished training", None
    have = read_record(model)
    if have is None:
        return f"no {RECORD} (trained before training records existed), so its options cannot be checked", None
    compared_have, compared_want = comparable(have), comparable(want)
    changed = [key for key in compared_want if key in compared_have and compared_have[key] != compared_want[key]]
    one_sided = one_sided_entries(compared_have, compared_want)
    if changed == ["code"] and not one_sided and reuse_stale:
        return None, (have.get("code") or {}).get("commit") or "unrecorded"
    reasons = ([f"its {', '.join(map(describe_entry, changed))} changed"] if changed else []) + one_sided
    return ("; ".join(reasons) or None), None


def describe_entry(key: str) -> str:
    """A record's entry as a reason names it."""
    return "code (fairseq_plugins/, train.sh and the scripts it runs, its config, fairseq or torch)" \
        if key == "code" else key


def one_sided_entries(have: dict, want: dict) -> list:
    """The reasons why the stored record ``have`` and the wanted ``want`` differ by entries only one of them holds
    (an input the other lacks), one per side: empty when both hold the same entries."""
    sides = (("its record", "the wanted record", have, want), ("the wanted record", "its record", want, have))
    return [f"{holder} holds {', '.join(extra)}, which {other} lacks" for holder, other, holds, lacks in sides
            if (extra := [key for key in holds if key not in lacks])]


def resume_point(model: Path, want: dict) -> Optional[float]:
    """The seconds of training an interrupted run of exactly ``want`` saved in its checkpoint_last.pt (each
    attempt from its start to its last checkpoint), or None when there is no such run to resume."""
    started, last = model / STARTED, model / "checkpoint_last.pt"
    if not started.is_file() or not last.is_file():
        return None
    run = json.loads(started.read_text(encoding="utf-8"))
    if comparable(run.get("record")) != comparable(want):
        return None
    return run["seconds_before"] + max(0.0, last.stat().st_mtime - run["started_at"])


def mark_started(model: Path, want: dict, seconds_before: float) -> None:
    """Written before train.sh runs, so that an interruption can be resumed (``resume_point``)."""
    model.mkdir(parents=True, exist_ok=True)
    started = {"record": want, "started_at": time.time(), "seconds_before": seconds_before}
    (model / STARTED).write_text(json.dumps(started, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def record_training(model: Path, want: dict, seconds: float) -> None:
    """A finished training: its record (``training_record``) and its time, which mark it reusable."""
    (model / RECORD).write_text(json.dumps(want, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (model / "train_seconds").write_text(f"{seconds:.1f}\n")
    (model / STARTED).unlink(missing_ok=True)


def sha256(paths) -> str:
    """One SHA-256 over the files ``paths`` (their paths relative to the repository, and their bytes)."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def decoding_code() -> list:
    """The files a decode's summaries depend on besides the checkpoint: generate.sh, the configs and
    fairseq_plugins/ without its criterions (which only training reads)."""
    plugins = [p for p in (ROOT / "fairseq_plugins").rglob("*.py") if "criterions" not in p.parts]
    return [ROOT / "generate.sh", ROOT / "scripts" / "lib.sh", *(ROOT / "configs").glob("*.conf"), *plugins]


def test_data(data: Path) -> list:
    """The prepared files a decode of the test split reads."""
    return [data / "prep.json", *(data / "bin").glob("dict*.txt"), *(data / "bin").glob("test.*"),
            *(data / "tok").glob("test.*")]


def made_header(script: str, argv: Optional[Sequence[str]] = None, note: str = "") -> List[str]:
    """The lines a results file opens with after its title: the command that made it (lib's ``invocation``), a blank
    line, then ``provenance``'s commit, date, machine and versions, followed by ``note``."""
    return [f"Command: `{invocation(script, argv)}`", "", provenance(note).rstrip()]

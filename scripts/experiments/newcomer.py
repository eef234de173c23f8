"""A newcomer's first hour, measured: two corpora the project does not ship, taken through the README's steps.

    python scripts/experiments/newcomer.py [--work runs/newcomer] [--updates 300] [--drain-runs 5]
        [--out docs/results/newcomer.md]

Corpora: aclsum (English, config scitldr_small) and CSL (Chinese abstract -> title, config lcsts_char),
converted as scripts/experiments/checkpoint_choice.py converts them.  For each:
  preprocess.sh      its warnings, as printed (truncation: the share cut and the lengths that would keep 95/99 %);
  train.sh           ``--updates`` updates as a user runs it (no TRAIN_VERBOSE): the lines on the terminal, the
                     lines of its log (what --verbose shows), and the terminal's progress, validation and end lines;
  empty documents    an empty and a blank document between two real ones, through generate.sh --input (FILE and
                     stdin), the Python API (Summarizer.summarize) and summ-serve (POST /summarize), and
                     ``{"documents": []}`` to the server: what each returns and warns.
Then the drain: tests/test_serve.py's SIGTERM-under-load test ``--drain-runs`` times with two busy loops on the
machine beside it (so that the test runs on a loaded machine), and how many runs passed.
Which checkpoint the default is, against best-by-loss and last, is docs/results/checkpoint_choice.md's measure.
A finished training is reused when its training record matches (scripts/experiments/records.py; delete
WORK/CORPUS/model to train again), and so are the drain runs
(WORK/drain.json, delete it to run them again); the report, rebuilt every run, says the commit each was made at.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

from scripts.experiments.checkpoint_choice import CORPORA, prepared
from scripts.experiments.lib import ROOT, Experiment, read_lines, write_lines
from scripts.experiments.records import read_record, train_or_reuse, training_record

DRAIN_TEST = "tests/test_serve.py::test_sigterm_under_load_answers_every_accepted_request_and_exits_0"
SHOWN = re.compile(r"^\s*(budget:|model |update \d+|end of epoch|validation at|Stopping|done training|best:|last:)")


def user_env(exp: Experiment) -> Dict[str, str]:
    """The experiment's environment as a user has it: train.sh's quiet default."""
    env = dict(exp.env)
    env.pop("TRAIN_VERBOSE", None)
    return env


def preprocess_warnings(exp: Experiment, corpus: str) -> List[str]:
    prepared(exp, corpus)
    log = exp.logs / f"preprocess_{corpus}.log"
    return [line for line in read_lines(log) if ": warning: " in line]


def train(exp: Experiment, corpus: str, updates: int) -> Dict:
    """train.sh as a user runs it (``user_env``), trained or reused by its record (records.train_or_reuse); its
    terminal kept in WORK/logs/train_CORPUS.terminal."""
    config, _ = CORPORA[corpus]
    data, model, terminal = prepared(exp, corpus), exp.work / corpus / "model", f"train_{corpus}.terminal"
    options = ["--max-update", str(updates)]
    as_a_user = Experiment(exp.name, exp.work)
    as_a_user.env = user_env(exp)
    train_or_reuse(as_a_user, corpus, model, terminal, training_record(config, options, data),
                   [ROOT / "train.sh", "-c", config, data, model, *options])
    lines = read_lines(exp.logs / terminal)
    log = read_lines(model / "train.log")
    return {"terminal_lines": len(lines), "log_lines": len(log), "commit": read_record(model)["code"]["commit"],
            "shown": [line.strip() for line in lines if SHOWN.match(line)]}


def documents(exp: Experiment, corpus: str) -> List[str]:
    real = read_lines(exp.work / corpus / "raw" / "test.src")[:2]
    return [real[0], "", "   ", real[1]]


def generate_input(exp: Experiment, corpus: str) -> Dict:
    """generate.sh --input FILE and --input - with the empty and blank documents."""
    data, model = prepared(exp, corpus), exp.work / corpus / "model"
    docs = exp.work / corpus / "with_empty.txt"
    write_lines(docs, documents(exp, corpus))
    found = {}
    for how, source in (("file", str(docs)), ("stdin", "-")):
        with docs.open(encoding="utf-8") as stdin:
            result = subprocess.run([str(ROOT / "generate.sh"), "--input", source, str(data), str(model)], cwd=ROOT,
                                    env=user_env(exp), stdin=stdin, capture_output=True, text=True, check=True)
        found[how] = {"lines": result.stdout.split("\n")[:-1],
                      "warnings": [line for line in result.stderr.splitlines() if "warning" in line.lower()]}
    return found


def api(exp: Experiment, corpus: str) -> Dict:
    """Summarizer.summarize_with_reports on the documents, in a subprocess (this checkout, the quiet env)."""
    program = ("import json, sys\nfrom fairseq_plugins.inference.hub import Summarizer\n"
               "model = Summarizer.from_pretrained(sys.argv[1])\n"
               "pairs = model.summarize_with_reports(json.loads(sys.argv[2]))\n"
               "print(json.dumps([[text, report.describe()] for text, report in pairs]))\n")
    result = subprocess.run([sys.executable, "-c", program, str(exp.work / corpus / "model"),
                             json.dumps(documents(exp, corpus))], cwd=ROOT, env=user_env(exp), capture_output=True,
                            text=True, check=True)
    return {"answers": json.loads(result.stdout), "warnings": [line for line in result.stderr.splitlines()
                                                              if "warning" in line.lower()]}


def post(url: str, body) -> Tuple[int, Dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def server(exp: Experiment, corpus: str) -> Dict:
    """summ-serve on a free port: the documents, then no documents."""
    process = subprocess.Popen(["summ-serve", str(exp.work / corpus / "model"), "--port", "0"], cwd=ROOT,
                               env=user_env(exp), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in process.stderr:  # until it listens; the rest of its log is left unread
            found = re.search(r"listening on (http://[0-9.]+:\d+)/", line)
            if found:
                url = found.group(1) + "/summarize"
                break
        if url is None:
            exp.fail(f"summ-serve did not start for {corpus}")
        status, answer = post(url, {"documents": documents(exp, corpus)})
        no_documents = post(url, {"documents": []})
    finally:
        process.terminate()
        process.wait(120)
    return {"status": status, "summaries": answer.get("summaries"), "warnings": answer.get("warnings"),
            "no_documents": list(no_documents)}


def drain(exp: Experiment, runs: int) -> List[Dict]:
    """The SIGTERM-under-load test, ``runs`` times, each with two busy loops beside it (kept in WORK/drain.json)."""
    kept = exp.work / "drain.json"
    if kept.is_file() and len(json.loads(kept.read_text())) == runs:
        return json.loads(kept.read_text())
    results = []
    for number in range(1, runs + 1):
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        try:
            time.sleep(1)
            load = os.getloadavg()[0]
            start = time.time()
            result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", DRAIN_TEST],
                                    cwd=ROOT, env=exp.env, capture_output=True, text=True)
        finally:
            for process in busy:
                process.kill()
                process.wait()
        exp.log(f"drain run {number}: exit {result.returncode} ({time.time() - start:.0f} s, load {load:.1f})")
        results.append({"passed": result.returncode == 0, "seconds": round(time.time() - start, 1),
                        "load": round(load, 1), "tail": result.stdout.splitlines()[-1:] if result.stdout else [],
                        "commit": commit()})
    kept.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def render(found: Dict, drains: List[Dict], args, commit: str) -> str:
    lines = ["# A newcomer's first hour, measured", "",
             f"Made by `python scripts/experiments/newcomer.py --updates {args.updates} --drain-runs "
             f"{args.drain_runs}` at commit {commit}, on {os.cpu_count()} CPU cores (no GPU), seed 1 (the "
             "configs').", "",
             "Corpora the project does not ship: aclsum (English, `-c scitldr_small`) and CSL (Chinese abstract -> "
             "title, `-c lcsts_char`). Which checkpoint the default is, against best-by-loss and last: "
             "`docs/results/checkpoint_choice.md`.", ""]
    for corpus, facts in found.items():
        lines += corpus_section(corpus, facts, args.updates)
    return "\n".join(lines + drain_section(drains)) + "\n"


def corpus_section(corpus: str, facts: Dict, updates: int) -> List[str]:
    train_facts = facts["train"]
    lines = [f"## {corpus} (`-c {CORPORA[corpus][0]}`)", "", "preprocess.sh's warnings:", ""]
    lines += [f"    {line}" for line in facts["preprocess"]] or ["    (none)"]
    lines += ["", f"train.sh, {updates} updates (trained at commit {train_facts['commit']}): "
              f"**{train_facts['terminal_lines']} lines on the terminal**; its log (`SAVE_DIR/train.log`, what "
              f"`--verbose` shows) has {train_facts['log_lines']}. The terminal's own lines:", ""]
    lines += [f"    {line}" for line in train_facts["shown"]]
    lines += ["", "An empty and a blank document between two real ones (inputs 2 and 3 of 4):", "",
              "| path | outputs | output 2 | output 3 | warnings |", "|---|---|---|---|---|", *empty_rows(facts)]
    status, answer = facts["server"]["no_documents"]
    return lines + ["", f'`{{"documents": []}}` to summ-serve: HTTP {status}, {json.dumps(answer)}', ""]


def empty_rows(facts: Dict) -> List[str]:
    """A table row per path: how many outputs for the 4 inputs, outputs 2 and 3 (the empty and the blank
    document; null when missing), the warnings."""
    def row(path: str, outputs: List, warnings: List) -> str:
        padded = list(outputs) + [None] * 3
        return (f"| {path} | {len(outputs)} | {json.dumps(padded[1])} | {json.dumps(padded[2])} | "
                f"{'<br>'.join(map(str, warnings)) or 'none'} |")

    rows = [row(f"generate.sh --input {'FILE' if how == 'file' else '-'}", result["lines"], result["warnings"])
            for how, result in facts["generate"].items()]
    answers = facts["api"]["answers"]
    rows.append(row("Summarizer.summarize_with_reports", [text for text, _ in answers], facts["api"]["warnings"]))
    served = facts["server"]
    rows.append(row(f"summ-serve POST /summarize (HTTP {served['status']})", served["summaries"] or [],
                    served["warnings"] or []))
    return rows


def drain_section(drains: List[Dict]) -> List[str]:
    passed = sum(run["passed"] for run in drains)
    lines = ["## The drain under load", "",
             f"`{DRAIN_TEST}`, {len(drains)} runs at commit {drains[0].get('commit', '?') if drains else '?'}, each "
             f"with two busy loops beside it: **{passed} of {len(drains)} passed** (the test requires a refusal "
             "within 1 s of SIGTERM while accepted requests decode).", "",
             "| run | passed | seconds | 1-minute load at its start |", "|---|---|---|---|"]
    return lines + [f"| {i} | {'yes' if run['passed'] else 'no: ' + ' '.join(run['tail'])} | {run['seconds']} | "
                    f"{run['load']} |" for i, run in enumerate(drains, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "newcomer")
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--drain-runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "newcomer.md")
    args = parser.parse_args()
    exp = Experiment("newcomer", args.work, threads=1)
    found = {}
    for corpus in CORPORA:
        found[corpus] = {"preprocess": preprocess_warnings(exp, corpus), "train": train(exp, corpus, args.updates),
                         "generate": generate_input(exp, corpus), "api": api(exp, corpus),
                         "server": server(exp, corpus)}
    drains = drain(exp, args.drain_runs)
    args.out.write_text(render(found, drains, args, commit()), encoding="utf-8")
    exp.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()

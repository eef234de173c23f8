"""compare.py --launcher slurm: the jobs of a table, each submitted once, and what each job runs.

    prepare           (only while WORK/data is not built) the corpus and preprocess.sh
    train:LABEL       scripts/slurm/train.sbatch for the system: requeued on preemption or scancel, it resumes
                      from checkpoint_last.pt; its log is WORK/logs/train_LABEL.log (appended by every run)
    decode:LABEL      after train:LABEL (and after the parent's decode for a --continue): records the finished
                      training, then every --decode of compare.py's local run, into WORK/rows/LABEL.json
    table             after every decode: WORK/results.md, a failed system's row marked with its log

Every dependency is ``afterany``: a failed job does not leave the jobs after it waiting forever; they see what it
left (no finished training, no rows) and the table marks the row.  Run again, the command submits only the
systems that have no job queued or running and are not finished (a failed one is submitted again), reports
the others, and submits a new table job when anything new was submitted or the table is older than its rows.
"""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from scripts.experiments import records
from scripts.experiments import slurm_launcher as slurm
from scripts.experiments.lib import ROOT, Experiment

COMPARE = Path(__file__).resolve().parent / "compare.py"
TRAIN_SBATCH = ROOT / "scripts" / "slurm" / "train.sbatch"
DONE_TRAINING = re.compile(r"done training in ([\d.]+) seconds")


def rows_file(exp: Experiment, label: str) -> Path:
    return exp.work / "rows" / f"{label.replace(':', '_')}.json"


def step_log(exp: Experiment, step: str) -> Path:
    return exp.logs / f"slurm_{step.replace(':', '_')}.log"


def train_log(exp: Experiment, label: str) -> Path:
    return exp.logs / f"train_{label}.log"


class Submission:
    """One invocation: the jobs it finds and the ones it submits, and the report it prints; ``steps`` is the
    module with the table's steps (compare.py, which passes itself: this module does not import it)."""

    def __init__(self, exp: Experiment, args, steps):
        self.exp, self.args, self.steps = exp, args, steps
        self.jobs = slurm.Jobs(exp.work, exp.env)
        self.common = slurm.common_options(args)
        self.report, self.new, self.decodes = [], [], {}

    def submit_step(self, step: str, after) -> str:
        command = [sys.executable, COMPARE, *sys.argv[1:], "--work", self.exp.work, "--step", step]
        options = [*self.common, "--job-name", f"{self.args.name}:{step}", "--output", step_log(self.exp, step),
                   *slurm.dependency("afterany", after), "--wrap", shlex.join(map(str, command))]
        return self.record(step, slurm.sbatch(options, self.exp.env))

    def submit_training(self, system, after) -> str:
        label = system[0]
        command = self.steps.train_command(self.exp, self.exp.work / "data", system, launcher=TRAIN_SBATCH)
        options = [*self.common, *slurm.training_options(self.args), "--job-name", f"{self.args.name}:train:{label}",
                   "--output", train_log(self.exp, label), "--open-mode=append", *slurm.dependency("afterany", after),
                   *map(str, command)]
        return self.record(f"train:{label}", slurm.sbatch(options, self.exp.env))

    def record(self, step: str, job: str) -> str:
        self.new.append(job)
        self.report.append(f"{step}: submitted job {job}")
        return self.jobs.record(step, job)


def submit(exp: Experiment, args, steps) -> None:
    """Submit what the table still needs; print each step's state and the job ids.  ``steps``: compare.py."""
    run = Submission(exp, args, steps)
    prepared = (exp.work / "data" / "bin" / "dict.src.txt").is_file()
    prepare = None
    if not prepared:
        prepare = run.jobs.active("prepare")
        if prepare:
            run.report.append(f"prepare: job {prepare} queued or running ({step_log(exp, 'prepare')})")
        else:
            prepare = run.submit_step("prepare", [])
    for system in steps.systems(args):
        plan_system(run, system, prepared, prepare)
    plan_table(run)
    print("\n".join(f"{args.name}: {line}" for line in run.report), flush=True)


def plan_system(run: Submission, system, prepared: bool, prepare) -> None:
    compare, exp = run.steps, run.exp
    label, parent = system[0], system[3]
    train_step, decode_step = f"train:{label}", f"decode:{label}"
    active = run.jobs.active(train_step) or run.jobs.active(decode_step)
    if active:
        run.decodes[label] = run.jobs.ids.get(decode_step)
        run.report.append(f"{label}: {run.jobs.state(train_step)} (log {train_log(exp, label)}), "
                          f"decoding {run.jobs.state(decode_step)} (log {step_log(exp, decode_step)})")
        return
    model = compare.model_dir(exp, label)
    verdict = "--retrain" if run.args.retrain else "data not prepared yet"
    if prepared and not run.args.retrain:
        want = compare.training_record(exp, exp.work / "data", system)
        verdict, _ = records.reuse_verdict(exp, model, train_log(exp, label).name, want)
    if verdict is None and rows_file(exp, label).is_file():
        run.report.append(f"{label}: finished ({rows_file(exp, label)})")
        return
    if train_step in run.jobs.ids or decode_step in run.jobs.ids:
        failed = train_log(exp, label) if verdict is not None else step_log(exp, decode_step)
        run.report.append(f"{label}: FAILED ({run.jobs.state(train_step)}, decoding {run.jobs.state(decode_step)}; "
                          f"log {failed}): submitting it again")
    rows_file(exp, label).unlink(missing_ok=True)
    after = [run.decodes.get(parent)] if parent else []
    if verdict is not None:
        records.start_afresh(exp, model, label, verdict)
        parent_training = run.jobs.active(f"train:{parent}") if parent else None
        after.append(run.submit_training(system, [prepare, parent_training]))
    run.decodes[label] = run.submit_step(decode_step, after)


def plan_table(run: Submission) -> None:
    exp = run.exp
    results, active = exp.work / "results.md", run.jobs.active("table")
    rows = list((exp.work / "rows").glob("*.json"))
    outdated = not results.is_file() or any(r.stat().st_mtime > results.stat().st_mtime for r in rows)
    if active and run.new:  # it waits for jobs that were replaced: a new table job waits for all of them
        subprocess.run(["scancel", active], env=exp.env, check=False)
    elif active:
        run.report.append(f"table: job {active} waits for the systems ({step_log(exp, 'table')})")
        return
    if run.new or outdated:
        run.submit_step("table", [job for job in run.decodes.values() if job])
    else:
        run.report.append(f"table: {results} (up to date)")


# ---------------------------------------------------------------------------------------------- inside a job
def run_step(exp: Experiment, args, step: str, compare) -> None:
    # compare: compare.py's module, which passes itself (this module does not import it)
    if step == "prepare":
        compare.prepare_data(exp, args)
        return
    if not (exp.work / "data" / "bin" / "dict.src.txt").is_file():
        exp.fail(f"{exp.work / 'data'} was not prepared: see {step_log(exp, 'prepare')}")
    _, data, counts, lang = compare.prepare_data(exp, args)
    systems = {system[0]: system for system in compare.systems(args)}
    if step == "table":
        rows, trained = [], {}
        for label in systems:
            done = rows_file(exp, label)
            if done.is_file():
                finished = json.loads(done.read_text(encoding="utf-8"))
                rows += finished["rows"]
                trained[label] = finished["trained"]
            else:
                trained_ok = (compare.model_dir(exp, label) / "train_seconds").is_file()
                log = step_log(exp, f"decode:{label}") if trained_ok else train_log(exp, label)
                rows.append({"system": label, "failed": str(log)})
        compare.write_table(exp, args, rows, trained, counts, lang, 0.0)
        return
    label = step.split(":", 1)[1]
    decode_system(exp, args, systems[label], data, counts, lang, compare)


def decode_system(exp: Experiment, args, system, data: Path, counts, lang: str, compare) -> None:
    """After train:LABEL: record its finished training (fairseq's own training time), then score every --decode."""
    label, config = system[:2]
    model = compare.model_dir(exp, label)
    log = train_log(exp, label)
    times = DONE_TRAINING.findall(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else []
    if not times or not (model / "checkpoint_best.pt").is_file():
        exp.fail(f"{label}: its training did not finish: see {log}")
    records.record_training(model, compare.training_record(exp, data, system), float(times[-1]))
    facts = compare.trained_facts(exp, data, model, label)
    rows = [compare.evaluate(exp, data, label, config, model, decode, lang, counts["test"]) for decode in args.decode]
    rows_file(exp, label).parent.mkdir(exist_ok=True)
    rows_file(exp, label).write_text(json.dumps({"rows": rows, "trained": facts}, indent=1) + "\n", encoding="utf-8")

"""Multi-process training without Slurm (scripts/launch/torchrun_train.sh -> fairseq_worker.py on CPU, gloo).

Two processes with --update-freq 1 must train exactly like one process with --update-freq 2:
- fairseq builds the same list of batches on every rank (same seed, same epoch shuffle) and gives rank r the
  batches r, r+W, r+2W... (ShardedIterator); one process with --update-freq 2 groups the same list as
  (b0, b1), (b2, b3)... so update k sees the same two batches either way;
- the gradient is the sum over both batches divided by their total sample size in both cases (legacy_ddp
  averages over ranks and the trainer multiplies back by the world size); logging outputs are summed likewise;
- the per-update seed is seed + num_updates on every rank, and dropout is off, so nothing random differs.
Only the order of floating-point additions differs, hence a tolerance.

Validation by ROUGE (--eval-rouge) with two workers: fairseq all-reduces the validation logging outputs and hands
the task tensors; the logged rouge_l must be the one process's figure for the same weights.

The helpers at the top are shared with tests/test_fault_tolerance.py and tests/test_slurm.py.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import command_env, run

pytestmark = pytest.mark.slow  # every test trains through fairseq-train / torchrun

ROOT = Path(__file__).resolve().parent.parent
# A tiny deterministic run: no dropout, no validation, fixed seed, a log line per update.
TINY = ["--dropout", "0", "--disable-validation", "--log-interval", "1", "--seed", "3", "--max-tokens", "3000"]
_FIELD = re.compile(r"(\w+)=(-?[\d.]+(?:e[-+]?\d+)?|inf|nan)")


def prepare_data(work: Path, train=300, valid=30, test=25) -> Path:
    """A slice of the shipped SciTLDR-A sample, preprocessed with preprocess.sh (about 5 s)."""
    raw = work / "raw"
    raw.mkdir(parents=True)
    for split, count in (("train", train), ("valid", valid), ("test", test)):
        for side in ("src", "tgt"):
            with (ROOT / "data" / "scitldr" / f"{split}.{side}").open(encoding="utf-8") as f:
                lines = [next(f) for _ in range(count)]
            (raw / f"{split}.{side}").write_text("".join(lines), encoding="utf-8")
    data = work / "data"
    run(["./preprocess.sh", raw, data])
    return data


def train_updates(log: str) -> list:
    """Every per-update 'train_inner' log line of a fairseq-train log, as dicts of floats, in log order."""
    updates = []
    for line in log.splitlines():
        if "train_inner" in line and "num_updates=" in line:
            updates.append({key: float(value) for key, value in _FIELD.findall(line)})
    return updates


def load_checkpoint(path: Path) -> dict:
    """A fairseq checkpoint loaded with torch's safe loading (the plugin allow-lists its classes)."""
    import torch

    import fairseq_plugins
    fairseq_plugins.register()
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_updates(got: list, expected: list, fields=("loss", "nll_loss", "coverage", "gnorm"), tol=2e-3):
    """Per-update logged values agree (they are printed rounded to 3-4 decimals, hence the tolerance)."""
    assert [u["num_updates"] for u in got] == [u["num_updates"] for u in expected]
    for mine, theirs in zip(got, expected):
        assert mine["wpb"] == theirs["wpb"] and mine["bsz"] == theirs["bsz"], (mine, theirs)  # same batches
        for field in fields:
            assert abs(mine[field] - theirs[field]) <= tol, (field, mine, theirs)


def assert_same_weights(a: Path, b: Path, atol=1e-5):
    import torch

    model_a, model_b = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    assert model_a.keys() == model_b.keys()
    for name in model_a:
        assert torch.allclose(model_a[name], model_b[name], atol=atol, rtol=1e-4), name


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return prepare_data(tmp_path_factory.mktemp("distributed"))


@pytest.fixture(scope="module")
def two_processes(data, tmp_path_factory):
    """4 updates of 2 CPU processes (torchrun, gloo), --update-freq 1: (save dir, log)."""
    save = tmp_path_factory.mktemp("two") / "model"
    result = run(["scripts/launch/torchrun_train.sh", "--nproc-per-node", "2", data, save, *TINY, "--max-update", "4"])
    return save, result.stdout + result.stderr


def test_two_processes_train_like_one_process_with_update_freq_2(data, two_processes, tmp_path):
    save_two, log_two = two_processes
    assert "training on 2 devices" in log_two
    assert "rank 0/2" in log_two and "rank 1/2" in log_two  # two real processes, one per rank
    one = run(["./train.sh", data, tmp_path / "one", *TINY, "--max-update", "4", "--update-freq", "2"])
    log_one = one.stdout + one.stderr
    assert "training on 1 devices" in log_one

    curve_two, curve_one = train_updates(log_two), train_updates(log_one)
    assert [u["num_updates"] for u in curve_two] == [1, 2, 3, 4]
    assert_same_updates(curve_two, curve_one)
    assert len({u["loss"] for u in curve_one}) > 1  # a real curve, not a constant
    # The strongest check: after 4 Adam updates the weights are the same up to summation order.
    assert_same_weights(save_two / "checkpoint_last.pt", tmp_path / "one" / "checkpoint_last.pt")


def test_one_process_with_half_the_batch_differs(data, two_processes, tmp_path):
    """The comparison above can fail: without --update-freq 2 one process sees half the batch per update."""
    save_two, log_two = two_processes
    half = run(["./train.sh", data, tmp_path / "half", *TINY, "--max-update", "4"])
    curve_half, curve_two = train_updates(half.stdout + half.stderr), train_updates(log_two)
    assert len(curve_half) == len(curve_two) == 4
    assert all(h["bsz"] < t["bsz"] for h, t in zip(curve_half, curve_two))
    with pytest.raises(AssertionError):
        assert_same_weights(tmp_path / "half" / "checkpoint_last.pt", save_two / "checkpoint_last.pt")


def test_sigterm_saves_on_every_rank_skips_validation_exits_75_and_the_same_command_resumes(data, two_processes,
                                                                                             tmp_path):
    """torchrun_train.sh forwards SIGTERM to torchrun, which passes it on to the workers with a shutdown timeout of
    the script's; they finish the update together, skip the validation due after it, rank 0 saves, they stop,
    and the script exits 75 (torchrun's own status after a signal is not the workers').  torchrun signals each
    worker's process group, DataLoader processes included (two per rank here); they must not take the workers
    down before they save."""
    import signal
    import time

    validating = [option for option in TINY if option != "--disable-validation"]
    validating += ["--validate-interval-updates", "1", "--num-workers", "2"]
    command = ["scripts/launch/torchrun_train.sh", "--nproc-per-node", "2", "--shutdown-timeout", "120", data,
               tmp_path / "model", *validating, "--max-update", "6"]
    log = tmp_path / "first.log"
    with log.open("w") as out:
        first = subprocess.Popen([str(c) for c in command], cwd=ROOT, env=command_env(), stdout=out,
                                 stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while "num_updates=2," not in log.read_text():
            assert first.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        first.send_signal(signal.SIGTERM)  # to the script
        first.wait(timeout=120)
    text = log.read_text()
    assert first.returncode == 75, text[-3000:]
    assert "torchrun_train.sh: got SIGTERM" in text
    assert text.count("fairseq_worker: got signal SIGTERM") == 2  # both ranks
    k = int(re.search(r"stopped on a signal after update (\d+)", text).group(1))
    assert re.search(rf"Saved checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ {k} updates", text)
    assert [u["num_updates"] for u in train_updates(text)] == list(range(1, k + 1))
    validated = [int(n) for n in re.findall(r"valid on 'valid' subset \|.*\| num_updates (\d+)", text)]
    assert validated == list(range(1, k)) and "skipping the validation due after this update" in text
    assert not (tmp_path / "model" / ".stopped_on_signal").exists()

    second = run(command)
    log_two = second.stdout + second.stderr
    assert re.findall(r"valid on 'valid' subset \|.*\| num_updates (\d+)", log_two)[0] == str(k + 1)
    assert re.search(rf"Loaded checkpoint \S+/checkpoint_last\.pt \(epoch 1 @ {k} updates\)", log_two)
    resumed = train_updates(log_two)
    assert [u["num_updates"] for u in resumed] == list(range(k + 1, 7))
    _, uninterrupted = two_processes
    overlap = [u for u in resumed if u["num_updates"] <= 4]
    assert_same_updates(overlap, train_updates(uninterrupted)[k:4])


# Validation by ROUGE: greedy summaries of at most 20 tokens of the 30 validation documents.
EVAL_ROUGE = ["--eval-rouge", "--eval-gen-args", json.dumps({"beam": 1, "max_len_a": 0, "max_len_b": 20})]
VALIDATING = [option for option in TINY if option != "--disable-validation"] + EVAL_ROUGE
_ROUGE = re.compile(r"valid on 'valid' subset \|.*\| rouge_1 ([\d.]+) \| rouge_2 ([\d.]+) \| rouge_l ([\d.]+) "
                    r"\|.*\| num_updates (\d+)")


def validation_rouge(log: str) -> dict:
    """{num_updates: (rouge_1, rouge_2, rouge_l)} of the validations of a fairseq-train log."""
    return {int(m.group(4)): tuple(map(float, m.groups()[:3])) for m in _ROUGE.finditer(log)}


def test_two_processes_validate_by_rouge_like_one_process_on_the_same_checkpoint(data, tmp_path):
    """2 processes train 2 updates and validate by ROUGE at the end.  The one-process figures for the same
    weights: one process restores their checkpoint with a fresh optimizer (fairseq then counts updates from 0),
    makes one update with --lr 0 (an Adam step of exactly 0, checked below) and validates.  Both summarize the
    30 documents in the same batches with the same weights, so every document's ROUGE is the same; only the
    order in which the sums are added differs (about 1e-16 relative), which moves a figure logged with 2
    decimals only on a rounding boundary: the comparison is exact."""
    import torch

    two = run(["scripts/launch/torchrun_train.sh", "--nproc-per-node", "2", data, tmp_path / "two", *VALIDATING,
               "--max-update", "2"])
    log_two = two.stdout + two.stderr
    assert "training on 2 devices" in log_two
    figures_two = validation_rouge(log_two)
    assert list(figures_two) == [2], log_two[-3000:]

    one = run(["./train.sh", data, tmp_path / "one", *VALIDATING, "--max-update", "1", "--lr", "0",
               "--restore-file", tmp_path / "two" / "checkpoint_last.pt", "--reset-optimizer"])
    log_one = one.stdout + one.stderr
    assert "training on 1 devices" in log_one
    figures_one = validation_rouge(log_one)
    assert list(figures_one) == [1], log_one[-3000:]
    weights_two = load_checkpoint(tmp_path / "two" / "checkpoint_last.pt")["model"]
    weights_one = load_checkpoint(tmp_path / "one" / "checkpoint_last.pt")["model"]
    assert all(torch.equal(weights_one[name], value) for name, value in weights_two.items())  # the same weights

    assert figures_two[2] == figures_one[1]  # rouge_1, rouge_2, rouge_l
    assert figures_one[1][2] > 0  # a real score: the summaries share words with their references


def test_torchrun_train_help_and_options_anywhere_before_the_directories(tmp_path):
    script = "scripts/launch/torchrun_train.sh"
    shown = run([script, "--help"])
    assert shown.stdout.startswith("Multi-process training without Slurm") and "--shutdown-timeout" in shown.stdout
    assert shown.stderr == ""
    (tmp_path / "data" / "bin").mkdir(parents=True)
    (tmp_path / "data" / "bin" / "dict.src.txt").write_text("")
    # -c after a launcher option is still the config (here one that does not exist: a usage error naming it)
    late = run([script, "--nproc-per-node", "1", "-c", "no_such_config", "--max-restarts", "0", tmp_path / "data",
                tmp_path / "model"], check=False)
    assert late.returncode == 2 and "config not found: no_such_config" in late.stderr
    for bad, message in ((["--bogus"], "unknown option: --bogus"),
                         (["--shutdown-timeout", "soon"], "--shutdown-timeout needs a number of seconds")):
        refused = run([script, *bad, tmp_path / "data", tmp_path / "model"], check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    refused = run([script, "--nproc-per-node"], check=False)
    assert refused.returncode == 2 and "--nproc-per-node needs a value" in refused.stderr

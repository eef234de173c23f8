"""Non-finite losses: focal_copy_coverage --on-nonfinite stop|skip with --task summarization.

How fairseq 0.12 (fairseq-fixed) is made to really skip an update:
- trainer.train_step calls task.train_step (forward + backward), all-reduces, rescales and clips the gradients,
  then task.optimizer_step, which calls optimizer.step().  In skip mode the criterion never back-propagates a
  non-finite loss: it returns an exactly-zero loss (0 * sum of the parameters, so that backward and DDP run as
  usual and the gradients are zeros, never NaN) and nonfinite_skipped=1; the summarization task then does not
  call optimizer.step() for that update.  Parameters and Adam's state (step, exp_avg, exp_avg_sq) stay
  bit-identical; fairseq's update counter, learning-rate schedule and position in the epoch advance by one.
- What does not skip: back-propagating a zero loss and letting Adam step (test below: Adam's momentum still
  moves the parameters and its step count advances); raising OverflowError from the optimizer step, which
  trainer.train_step treats as an fp16 overflow, then runs torch.tensor(0.0).cuda(), which fails without CUDA.
- Stop: the criterion raises NonFiniteLossError before backward; fairseq saves crash.pt (the in-memory,
  still good parameters) and exits; checkpoint_last.pt is not written.

NaN is injected by a test-only criterion (a --user-dir plugin written to a temporary directory) that multiplies
the focal term of chosen training batches by NaN, so the loss and its gradients would both be NaN.
"""
import re
from pathlib import Path

import pytest
import torch

from conftest import ROOT, run, stub_task, tiny_dictionary, tiny_model
from test_distributed import TINY, load_checkpoint, prepare_data, train_updates
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.criterions.nonfinite import NonFiniteLossError
from test_focal_copy_coverage import make_sample

PLUGIN = '''
import logging
import os
from dataclasses import dataclass, field

import fairseq_plugins  # noqa: F401  (registers the project's task, models and criterions)
from fairseq.criterions import register_criterion
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageConfig, FocalCopyCoverageCriterion

logger = logging.getLogger("nanplug")


@dataclass
class PoisonedConfig(FocalCopyCoverageConfig):
    poison_calls: str = field(default="", metadata={"help": "training forward calls (1-based) to poison"})
    poison_rank: int = field(default=-1, metadata={"help": "poison on this rank only (-1: every rank)"})


@register_criterion("poisoned_focal_copy_coverage", dataclass=PoisonedConfig)
class PoisonedCriterion(FocalCopyCoverageCriterion):
    def __init__(self, task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg, on_nonfinite,
                 poison_calls, poison_rank):
        super().__init__(task, focal_alpha, focal_gamma, coverage_lambda, loss_average, sentence_avg, on_nonfinite)
        self.poison = {int(n) for n in poison_calls.split(",") if n}
        self.poison_rank = poison_rank
        self.calls = 0

    def forward(self, model, sample, reduce=True):
        self.sample_ids = sample["id"].tolist()
        return super().forward(model, sample, reduce)

    def token_terms(self, model, net_output, target):
        terms = super().token_terms(model, net_output, target)
        if model.training:
            self.calls += 1  # with --update-freq 1, call k is update k
            if self.calls in self.poison and self.poison_rank in (-1, int(os.environ.get("RANK", 0))):
                logger.info("poisoned training call %d: dataset ids %s", self.calls, self.sample_ids)
                terms["focal"] = terms["focal"] * float("nan")  # NaN loss, and NaN gradients if back-propagated
        return terms
'''
POISONED = re.compile(r"poisoned training call 3: dataset ids \[([\d, ]+)\]")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return prepare_data(tmp_path_factory.mktemp("nonfinite"))


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("plugin") / "nanplug"
    directory.mkdir()
    (directory / "__init__.py").write_text(PLUGIN)
    return directory


def train_args(data, plugin, save, *extra):
    """4 updates, NaN in the 3rd, a checkpoint after every update."""
    return [data / "bin", "--user-dir", plugin, "--task", "summarization", "--arch", "pgn_lstm_small",
            "--criterion", "poisoned_focal_copy_coverage", "--poison-calls", "3", "--optimizer", "adam",
            "--lr", "0.002", *TINY, "--max-update", "4", "--save-dir", save, "--save-interval-updates", "1",
            "--log-format", "simple", *extra]


@pytest.fixture(scope="module")
def stopped(data, plugin, tmp_path_factory):
    save = tmp_path_factory.mktemp("stop") / "model"
    result = run(["fairseq-train", *train_args(data, plugin, save)], check=False)
    return save, result


@pytest.fixture(scope="module")
def skipped(data, plugin, tmp_path_factory):
    save = tmp_path_factory.mktemp("skip") / "model"
    result = run(["fairseq-train", *train_args(data, plugin, save, "--on-nonfinite", "skip")])
    return save, result.stdout + result.stderr


def poisoned_ids(log: str) -> str:
    found = POISONED.findall(log)
    assert len(found) == 1, log[-3000:]
    return found[0]


def all_finite(state: dict) -> bool:
    return all(torch.isfinite(t).all() for t in state["model"].values())


def assert_same_model(a: dict, b: dict) -> None:
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name


def assert_same_adam_state(a: dict, b: dict) -> None:
    state_a, state_b = a["last_optimizer_state"]["state"], b["last_optimizer_state"]["state"]
    assert state_a.keys() == state_b.keys() and len(state_a) > 0
    for index in state_a:
        assert set(state_a[index]) == {"step", "exp_avg", "exp_avg_sq"}
        for key in state_a[index]:
            assert torch.equal(torch.as_tensor(state_a[index][key]), torch.as_tensor(state_b[index][key])), (index, key)


def adam_steps(state: dict) -> set:
    return {int(s["step"]) for s in state["last_optimizer_state"]["state"].values()}


def num_updates(state: dict) -> int:
    return state["optimizer_history"][-1]["num_updates"]


@pytest.mark.slow
def test_stop_names_the_update_and_batch_and_keeps_the_last_good_checkpoint(stopped, skipped):
    save, result = stopped
    log = result.stdout + result.stderr
    assert result.returncode != 0
    message = re.search(r"NonFiniteLossError: focal_copy_coverage: non-finite loss nan at update 3 on a batch of "
                        r"(\d+) samples \(dataset ids ([\d, ]+)\); terms: focal=nan, nll=[\d.e+]+, coverage=[\d.e+]+"
                        r".*the parameters are still those after update 2\..*--on-nonfinite skip", log)
    assert message, log[-3000:]
    assert message.group(2) == poisoned_ids(log)  # the batch that really was poisoned
    assert int(message.group(1)) == len(message.group(2).split(", "))
    assert [u["num_updates"] for u in train_updates(result.stdout)] == [1, 2]

    assert not (save / "checkpoint_1_3.pt").exists()
    last = load_checkpoint(save / "checkpoint_last.pt")
    assert num_updates(last) == 2 and all_finite(last)
    crash = load_checkpoint(save / "crash.pt")  # fairseq saved the in-memory parameters when the error came
    assert num_updates(crash) == 2 and all_finite(crash)
    assert_same_model(last, crash)  # nothing was applied after update 2
    # ... and they are update 2's weights of an independent run (the skip run) with the same first 2 updates.
    assert_same_model(last, load_checkpoint(skipped[0] / "checkpoint_1_2.pt"))


@pytest.mark.slow
def test_skip_leaves_parameters_and_optimizer_state_bit_identical_and_training_goes_on(skipped):
    save, log = skipped
    warning = re.search(r"WARNING \| fairseq_plugins\.criterions\.focal_copy_coverage \| focal_copy_coverage: "
                        r"non-finite loss nan at update 3 on a batch of \d+ samples \(dataset ids ([\d, ]+)\); "
                        r"terms: focal=nan.*Skipping the update", log)
    assert warning, log[-3000:]
    assert warning.group(1) == poisoned_ids(log)
    updates = train_updates(log)
    assert [u["num_updates"] for u in updates] == [1, 2, 3, 4]
    assert "nonfinite_skipped" not in updates[0]  # not logged before the first skip
    assert updates[2]["nonfinite_skipped"] == 1 and updates[2]["bsz"] == 0  # counted; its samples not trained on
    assert updates[3]["nonfinite_skipped"] == 0 and updates[3]["bsz"] > 0
    assert re.search(r"\| train \| epoch 001 \|.*\| nonfinite_skipped 1 \|", log)

    before, after, next_update = (load_checkpoint(save / f"checkpoint_1_{k}.pt") for k in (2, 3, 4))
    assert_same_model(before, after)  # bit-identical parameters across the skipped update
    assert_same_adam_state(before, after)  # Adam's step count and moments did not move either
    assert adam_steps(after) == {2}
    # What does advance: the update counter, the learning-rate schedule's clock and the position in the epoch.
    assert (num_updates(before), num_updates(after)) == (2, 3)
    assert [s["extra_state"]["train_iterator"]["iterations_in_epoch"] for s in (before, after)] == [2, 3]

    assert all_finite(next_update) and adam_steps(next_update) == {3}  # 4 updates, one of them skipped
    with pytest.raises(AssertionError):
        assert_same_model(after, next_update)  # training went on after the skip
    assert_same_model(next_update, load_checkpoint(save / "checkpoint_last.pt"))


@pytest.mark.slow
def test_skip_with_two_workers_skips_on_both(data, plugin, tmp_path):
    """Only rank 0 sees the NaN: both ranks must skip (else their models diverge) and must still agree on the
    logging outputs' keys, which fairseq all-reduces as one flat buffer."""
    save = tmp_path / "model"
    result = run(["torchrun", "--standalone", "--nproc-per-node", "2", ROOT / "scripts/launch/fairseq_worker.py",
                  *train_args(data, plugin, save, "--on-nonfinite", "skip", "--poison-rank", "0")])
    log = result.stdout + result.stderr
    assert "training on 2 devices" in log
    assert "skipping update 3: a non-finite loss on another worker" in log  # rank 1 followed rank 0
    updates = train_updates(log)
    assert [u["num_updates"] for u in updates] == [1, 2, 3, 4] and updates[2]["nonfinite_skipped"] == 1
    before, after = (load_checkpoint(save / f"checkpoint_1_{k}.pt") for k in (2, 3))
    assert_same_model(before, after)
    assert_same_adam_state(before, after)
    assert adam_steps(load_checkpoint(save / "checkpoint_last.pt")) == {3}


# In-process checks of the pieces.

Task = stub_task(tiny_dictionary(), skips_nonfinite_updates=True)


def poisoned_criterion(on_nonfinite, update=7):
    criterion = FocalCopyCoverageCriterion(Task(), 0.25, 1.0, 1.0, "sequence", False, on_nonfinite)
    criterion.current_update = update
    terms = criterion.token_terms

    def token_terms(model, net_output, target):
        values = terms(model, net_output, target)
        values["focal"] = values["focal"] * float("nan")
        return values

    criterion.token_terms = token_terms
    return criterion


@pytest.fixture
def model():
    torch.manual_seed(0)
    return tiny_model(Task.target_dictionary).train()


def test_skip_returns_a_zero_loss_with_zero_gradients_and_the_usual_logging_keys(model, caplog):
    sample = make_sample(Task.target_dictionary)
    normal = FocalCopyCoverageCriterion(Task(), 0.25, 1.0, 1.0, "sequence", False, "skip")
    _, _, normal_log = normal(model, sample)
    loss, sample_size, log = poisoned_criterion("skip")(model, sample)
    assert loss.item() == 0.0 and sample_size == 0
    assert log["nonfinite_skipped"] == 1 and normal_log["nonfinite_skipped"] == 0
    assert list(log) == list(normal_log)  # same keys in the same order (workers all-reduce them as one buffer)
    assert all(type(log[k]) is type(normal_log[k]) for k in log)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.count_nonzero(g) == 0 for g in grads)
    assert re.search(r"non-finite loss nan at update 7 on a batch of 2 samples \(dataset ids 0, 1\); "
                     r"terms: focal=nan, nll=[\d.]+.*Skipping the update", caplog.text)


def test_stop_raises_in_training_and_both_modes_raise_in_validation(model):
    sample = make_sample(Task.target_dictionary)
    with pytest.raises(NonFiniteLossError, match=r"at update 7 .*dataset ids 0, 1\).*still those after update 6"):
        poisoned_criterion("stop")(model, sample)
    model.eval()
    for mode in ("stop", "skip"):
        with pytest.raises(NonFiniteLossError, match=r"non-finite loss nan in validation after update 7 on"):
            poisoned_criterion(mode)(model, sample)


def test_skip_needs_a_task_that_can_skip():
    class Translation:
        target_dictionary = tiny_dictionary()

    with pytest.raises(ValueError, match="--on-nonfinite skip needs --task summarization"):
        FocalCopyCoverageCriterion(Translation(), 0.25, 1.0, 1.0, "sequence", False, "skip")
    FocalCopyCoverageCriterion(Translation(), 0.25, 1.0, 1.0, "sequence", False, "stop")  # stop works anywhere


def test_skips_are_summed_in_the_metrics():
    from fairseq import metrics

    def log(skipped):
        return {"loss": 1.0, "ntokens": 5, "nsentences": 1, "sample_size": 1, "focal": 1.0, "nll": 1.0,
                "coverage": 0.0, "p_gen": 1.0, "nonfinite_skipped": skipped}

    with metrics.aggregate(new_root=True) as agg:
        FocalCopyCoverageCriterion.reduce_metrics([log(1), log(0), log(1)])
    assert agg["nonfinite_skipped"].sum == 2
    with metrics.aggregate(new_root=True) as agg:
        FocalCopyCoverageCriterion.reduce_metrics([log(0), log(0)])
    assert "nonfinite_skipped" not in agg  # nothing logged while nothing was skipped


def test_a_zero_gradient_adam_step_is_not_a_skip():
    """Why the task must not call the optimizer: with zero gradients (what back-propagating a zero loss gives),
    fairseq's Adam still moves the parameters through its momentum and counts a step."""
    from fairseq.optim.adam import Adam

    weight = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    adam = Adam([weight], lr=0.1)
    weight.grad = torch.tensor([0.5, -0.5])
    adam.step()
    before = weight.detach().clone()
    weight.grad = torch.zeros(2)
    adam.step()
    assert not torch.equal(weight.detach(), before)
    assert adam.state[weight]["step"] == 2

"""``--optimizer adagrad_acc`` (See et al. 2017: Adagrad, lr 0.15, initial accumulator 0.1).

- its updates are torch.optim.Adagrad's with ``initial_accumulator_value`` (exactly), and the first one is
  lr g / (sqrt(0.1 + g^2) + eps);
- fairseq's own ``adagrad`` (accumulator 0) moves every parameter by about lr on the first step instead;
- fairseq's lr schedulers (fixed, inverse_sqrt) set its learning rate;
- plain fairseq-train selects it, saves its accumulator in checkpoint_last.pt and restores it on resume
  (2 updates + resume to 3 = 3 updates straight); a negative accumulator is refused with the option's name.
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import slice_corpus

ROOT = Path(__file__).resolve().parent.parent
USER_DIR = str(ROOT / "fairseq_plugins")
LR, ACC = 0.15, 0.1


def build(name="adagrad_acc", params=None, **options):
    """A fairseq optimizer from the registry, as fairseq-train builds it."""
    import fairseq_plugins
    from fairseq.optim import build_optimizer
    from omegaconf import OmegaConf

    fairseq_plugins.register()
    return build_optimizer(OmegaConf.create({"_name": name, "lr": [LR], **options}), params)


def parameters(seed=0):
    """Weights of a few shapes, some gradients large and some small (embedding-like and bias-like)."""
    generator = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (5,), (3, 4, 2)]
    return [torch.nn.Parameter(torch.randn(shape, generator=generator) * 0.1) for shape in shapes]


def gradients(params, step):
    generator = torch.Generator().manual_seed(100 + step)
    scales = [1.0, 0.01, 3.0]
    return [torch.randn(p.shape, generator=generator) * scale for p, scale in zip(params, scales)]


def run_steps(optimizer, params, steps):
    for step in range(steps):
        for p, g in zip(params, gradients(params, step)):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("steps", [1, 4])
def test_steps_equal_torch_adagrad_with_initial_accumulator(steps):
    ours_params, torch_params = parameters(), parameters()
    ours = build(adagrad_initial_accumulator=ACC, params=ours_params)
    reference = torch.optim.Adagrad(torch_params, lr=LR, initial_accumulator_value=ACC)
    got, expected = run_steps(ours, ours_params, steps), run_steps(reference, torch_params, steps)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for p, q in zip(ours_params, torch_params):
        torch.testing.assert_close(ours.optimizer.state[p]["sum"], reference.state[q]["sum"], rtol=0, atol=0)


def test_default_accumulator_is_see2017_and_first_step_follows_the_formula():
    params = parameters()
    before = [p.detach().clone() for p in params]
    optimizer = build(params=params)  # no --adagrad-initial-accumulator: See et al.'s 0.1
    after = run_steps(optimizer, params, 1)
    for w0, w1, g in zip(before, after, gradients(params, 0)):
        expected = w0 - LR * g / (torch.sqrt(ACC + g * g) + 1e-10)
        torch.testing.assert_close(w1, expected, rtol=1e-6, atol=1e-7)


def test_fairseq_adagrad_first_step_is_lr_times_sign_and_differs():
    """Accumulator 0: the first step is lr g / |g| for every entry, however small g; with 0.1 it is not."""
    from fairseq.optim.adagrad import Adagrad

    zero_params, acc_params = parameters(), parameters()
    before = [p.detach().clone() for p in zero_params]
    fairseq_adagrad = Adagrad(argparse.Namespace(lr=[LR], weight_decay=0.0), zero_params)
    zero_after = run_steps(fairseq_adagrad, zero_params, 1)
    acc_after = run_steps(build(adagrad_initial_accumulator=ACC, params=acc_params), acc_params, 1)
    for w0, w_zero, w_acc, g in zip(before, zero_after, acc_after, gradients(zero_params, 0)):
        torch.testing.assert_close(w0 - w_zero, LR * torch.sign(g), rtol=1e-5, atol=1e-6)
        assert not torch.allclose(w_zero, w_acc, rtol=1e-3, atol=1e-4)
    # The bias-like parameter has gradients under 0.05: fairseq's adagrad moves each entry by 0.15 (above),
    # See's recipe by lr |g| / sqrt(0.1 + g^2) < 0.024.
    assert gradients(zero_params, 0)[1].abs().max() < 0.05
    assert ((before[1] - acc_after[1]).abs() < 0.024).all()


@pytest.mark.parametrize("option, value", [("adagrad_initial_accumulator", -0.1), ("weight_decay", -1.0)])
def test_negative_values_are_refused_with_the_option_name(option, value):
    flag = "--" + option.replace("_", "-")
    with pytest.raises(ValueError, match=re.escape(flag) + ".*>= 0, got " + re.escape(str(value))):
        build(params=parameters(), **{option: value})


def scheduled_lrs(scheduler_options, updates):
    """The learning rate the torch optimizer holds after each of ``updates`` updates under a fairseq scheduler."""
    from fairseq.optim.lr_scheduler import build_lr_scheduler
    from omegaconf import OmegaConf

    params = parameters()
    optimizer = build(params=params)
    scheduler = build_lr_scheduler(OmegaConf.create({"lr": [LR], **scheduler_options}), optimizer)
    scheduler.step_begin_epoch(1)
    lrs = []
    for update in range(1, updates + 1):
        run_steps(optimizer, params, 1)
        scheduler.step_update(update)
        lrs.append(optimizer.optimizer.param_groups[0]["lr"])
    return lrs


def test_lr_schedulers_set_its_learning_rate():
    warmup = scheduled_lrs({"_name": "inverse_sqrt", "warmup_updates": 4, "warmup_init_lr": 0.0}, 6)
    expected = [LR * n / 4 for n in (1, 2, 3)] + [LR * (4 / n) ** 0.5 for n in (4, 5, 6)]
    assert warmup == pytest.approx(expected, rel=1e-6)
    assert scheduled_lrs({"_name": "fixed"}, 3) == pytest.approx([LR] * 3)


# ------------------------------------------------------------------------------ plain fairseq-train, resume
def fairseq_train(data, save, max_update, *extra, check=True):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    cmd = ["fairseq-train", str(data / "bin"), "--user-dir", USER_DIR, "--task", "summarization",
           "--arch", "pgn_lstm_small", "--encoder-hidden-size", "16", "--decoder-hidden-size", "32",
           "--criterion", "focal_copy_coverage", "--focal-alpha", "1", "--focal-gamma", "0",
           "--optimizer", "adagrad_acc", "--adagrad-initial-accumulator", str(ACC), "--lr", str(LR),
           "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4", "--clip-norm", "2.0",
           "--max-tokens", "1500", "--max-update", str(max_update), "--save-dir", str(save),
           "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1", "--seed", "1", *extra]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check:
        assert result.returncode == 0, f"fairseq-train failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def optimizer_state(checkpoint: Path):
    import fairseq_plugins
    from fairseq import checkpoint_utils

    fairseq_plugins.register()  # allow-lists fairseq checkpoints for torch's safe loading
    state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    history = state["optimizer_history"][-1]
    return history, state["last_optimizer_state"]


@pytest.mark.slow
def test_fairseq_train_selects_it_and_resume_restores_the_accumulator(tmp_path):
    raw = slice_corpus("scitldr", tmp_path / "raw", (("train", 40), ("valid", 4), ("test", 2)))
    data = tmp_path / "data"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    prep = subprocess.run(["./preprocess.sh", str(raw), str(data)], cwd=ROOT, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)
    assert prep.returncode == 0, prep.stderr[-3000:]

    fairseq_train(data, tmp_path / "straight", 3)
    fairseq_train(data, tmp_path / "resumed", 2)
    history, at_two = optimizer_state(tmp_path / "resumed" / "checkpoint_last.pt")
    assert history["optimizer_name"] == "AdagradWithAccumulator" and history["num_updates"] == 2
    assert at_two["param_groups"][0]["initial_accumulator_value"] == ACC
    sums = [s["sum"] for s in at_two["state"].values()]
    assert all(s.min() >= ACC for s in sums)  # 0.1 + sum of g^2; with an accumulator of 0 most entries are < 0.1
    assert any((s > ACC).any() for s in sums)
    assert {float(s["step"]) for s in at_two["state"].values()} <= {0.0, 2.0}

    resumed = fairseq_train(data, tmp_path / "resumed", 3)
    log = resumed.stdout + resumed.stderr
    assert re.search(r"Loaded checkpoint \S+checkpoint_last\.pt \(epoch \d+ @ 2 updates\)", log), log[-2000:]
    lrs = [float(x) for x in re.findall(r"\blr[ =]([\d.e-]+)", log)]
    assert lrs and lrs[-1] == pytest.approx(LR * 3 / 4)  # inverse_sqrt warmup resumed at update 3 of 4

    _, straight_state = optimizer_state(tmp_path / "straight" / "checkpoint_last.pt")
    _, resumed_state = optimizer_state(tmp_path / "resumed" / "checkpoint_last.pt")
    assert straight_state["state"].keys() == resumed_state["state"].keys()
    for key, s in straight_state["state"].items():
        r = resumed_state["state"][key]
        assert float(r["step"]) == float(s["step"]) and float(s["step"]) in (0.0, 3.0)
        torch.testing.assert_close(r["sum"], s["sum"], rtol=1e-5, atol=1e-7)  # restored, not restarted at 0.1

    bad = fairseq_train(data, tmp_path / "bad", 1, "--adagrad-initial-accumulator", "-0.1", check=False)
    assert bad.returncode != 0
    assert "--adagrad-initial-accumulator must be a finite number >= 0, got -0.1" in bad.stderr, bad.stderr[-2000:]

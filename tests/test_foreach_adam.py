"""``--optimizer foreach_adam``: fairseq's ``adam`` in multi-tensor operations.

- step by step, its parameters and moments are bit-identical to fairseq's ``adam`` on a CPU: with the default
  options, weight decay, amsgrad, other betas and eps, a learning rate that changes, a parameter without a
  gradient at some steps (its own step count), and bf16 parameters updated in float32 copies;
- its state dict has fairseq's keys and loads into fairseq's ``adam`` (and back), so training resumes either way;
- fairseq-train selects it and trains the same weights as with fairseq's ``adam``;
- an update dispatches a handful of operations where fairseq's loop dispatches 9 per parameter (a GPU's path: a
  CPU runs them tensor by tensor);
- gradient clipping takes all the norms in one operation on a GPU's path and clips as fairseq's does;
- a sparse gradient and --fp16-adam-stats are refused with a message.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fairseq_plugins
from conftest import slice_corpus

fairseq_plugins.register()

from fairseq.optim import build_optimizer  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from fairseq_plugins.optim import foreach_adam  # noqa: E402

SHAPES = [(7, 5), (5,), (3, 4, 2), (11,), (4, 4)]


def build(name, params, **options):
    """A fairseq optimizer from the registry, as fairseq-train builds it (``--optimizer NAME``)."""
    settings = {"adam_betas": "(0.9, 0.999)", "adam_eps": 1e-8, "weight_decay": 0.0, "use_old_adam": False,
                "fp16_adam_stats": False, "tpu": False, "lr": [1e-3]}
    settings.update(options)
    return build_optimizer(OmegaConf.create({"_name": name, **settings}), params)


def parameters(dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    return [torch.nn.Parameter((torch.randn(shape, generator=generator) * 0.1).to(dtype)) for shape in SHAPES]


def set_gradients(params, step, skip=None):
    """Gradients of step ``step``, large and small; the parameter at index ``skip`` gets none."""
    generator = torch.Generator().manual_seed(100 + step)
    for index, p in enumerate(params):
        grad = torch.randn(p.shape, generator=generator) * (3.0 if index % 2 else 0.01)
        p.grad = None if index == skip else grad.to(device=p.device, dtype=p.dtype)


def step_together(optimizers, param_lists, steps):
    """Gives each parameter list the gradients of each step in ``steps`` and steps its optimizer."""
    for step in steps:
        for optimizer, params in zip(optimizers, param_lists):
            set_gradients(params, step)
            optimizer.step()


def assert_same(theirs, ours, params_a, params_b):
    for a, b in zip(params_a, params_b):
        assert a.dtype == b.dtype and torch.equal(a, b)
        state_a, state_b = theirs.optimizer.state.get(a, {}), ours.optimizer.state.get(b, {})
        assert state_a.keys() == state_b.keys()
        for key in state_a:
            if key == "step":
                assert state_a[key] == state_b[key]
            else:
                assert state_a[key].dtype == state_b[key].dtype and torch.equal(state_a[key], state_b[key])


@pytest.mark.parametrize("options", [
    {},
    {"weight_decay": 0.01},
    {"adam_betas": "(0.9, 0.98)", "adam_eps": 1e-6, "lr": [5e-4]},
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("at_once", [False, True], ids=["tensor_by_tensor", "all_at_once"])
def test_each_step_is_bit_identical_to_fairseqs_adam(options, dtype, at_once, monkeypatch):
    monkeypatch.setattr(foreach_adam, "all_at_once", lambda device: at_once)  # True: a GPU's path
    theirs_params, ours_params = parameters(dtype), parameters(dtype)
    theirs, ours = build("adam", theirs_params, **options), build("foreach_adam", ours_params, **options)
    for step in range(6):
        skip = 2 if step in (1, 2) else None  # this parameter's step count falls behind the others'
        for params in (theirs_params, ours_params):
            set_gradients(params, step, skip)
        if step == 4:
            theirs.set_lr(2e-3)
            ours.set_lr(2e-3)
        theirs.step()
        ours.step()
        assert_same(theirs, ours, theirs_params, ours_params)
    assert ours.optimizer.state[ours_params[2]]["step"] == 4 and ours.optimizer.state[ours_params[0]]["step"] == 6
    assert not torch.equal(ours_params[0], parameters(dtype)[0])  # it moved


def test_amsgrad_is_bit_identical_to_fairseqs_adam_amsgrad():
    from fairseq.optim.adam import Adam

    theirs_params, ours_params = parameters(), parameters()
    theirs = Adam(theirs_params, lr=1e-3, amsgrad=True)
    ours = foreach_adam.ForeachAdam(ours_params, lr=1e-3, amsgrad=True)
    step_together([theirs, ours], [theirs_params, ours_params], range(4))
    for a, b in zip(theirs_params, ours_params):
        assert torch.equal(a, b)
        assert torch.equal(theirs.state[a]["max_exp_avg_sq"], ours.state[b]["max_exp_avg_sq"])


def test_its_state_loads_into_fairseqs_adam_and_back_and_training_goes_on_the_same():
    params_a, params_b, params_c = parameters(), parameters(), parameters()
    ours, theirs_straight = build("foreach_adam", params_a), build("adam", params_b)
    step_together([ours, theirs_straight], [params_a, params_b], range(3))
    resumed = build("adam", params_c)  # fairseq's adam resumes what foreach_adam saved
    for c, a in zip(params_c, params_a):
        c.data.copy_(a.data)
    resumed.load_state_dict(ours.state_dict())
    back = build("foreach_adam", parameters())
    back.load_state_dict(theirs_straight.state_dict())
    assert back.optimizer.state_dict()["state"][0]["step"] == 3
    step_together([theirs_straight, resumed], [params_b, params_c], range(3, 5))
    for b, c in zip(params_b, params_c):
        assert torch.equal(b, c)


def test_an_update_dispatches_a_handful_of_operations_instead_of_nine_per_parameter(monkeypatch):
    assert not foreach_adam.all_at_once(torch.device("cpu")) and foreach_adam.all_at_once(torch.device("cuda"))
    monkeypatch.setattr(foreach_adam, "all_at_once", lambda device: True)  # the GPU's path, counted on a CPU

    def top_level_ops(name):
        params = parameters()
        optimizer = build(name, params)
        set_gradients(params, 0)
        optimizer.step()  # the state exists: a step as in training
        set_gradients(params, 1)
        with torch.profiler.profile() as prof:
            optimizer.step()
        events = [e for e in prof.events() if e.name.startswith("aten::")]
        enclosed = {id(child) for e in events for child in e.cpu_children}
        return [e.name for e in events if id(e) not in enclosed]

    ours, theirs = top_level_ops("foreach_adam"), top_level_ops("adam")
    assert len(theirs) >= 7 * len(SHAPES)  # m, v, sqrt, eps, the update: per parameter
    assert len([name for name in ours if name != "aten::to"]) <= 8
    assert all(name.startswith("aten::_foreach_") or name == "aten::to" for name in ours)


@pytest.mark.parametrize("max_norm", [0.5, 100.0, 0.0])
def test_clipping_takes_all_norms_in_one_operation_on_the_gpus_path_and_clips_as_fairseq_does(monkeypatch,
                                                                                               max_norm):
    """--clip-norm with foreach_adam on the GPU's path (counted on a CPU): the same total norm and clipped
    gradients as fairseq's adam, bit for bit, a parameter without a gradient included, in a handful of
    operations where fairseq's takes one norm per tensor.  0 measures without clipping."""
    monkeypatch.setattr(foreach_adam, "all_at_once", lambda device: True)

    def clipped(name):
        params = parameters()
        optimizer = build(name, params)
        set_gradients(params, 0, skip=2)
        with torch.profiler.profile() as prof:
            norm = optimizer.clip_grad_norm(max_norm)
        events = [e for e in prof.events() if e.name.startswith("aten::")]
        enclosed = {id(child) for e in events for child in e.cpu_children}
        return norm, [p.grad for p in params], [e.name for e in events if id(e) not in enclosed]

    (their_norm, their_grads, their_ops), (our_norm, our_grads, our_ops) = clipped("adam"), clipped("foreach_adam")
    assert torch.equal(our_norm, their_norm) and our_grads[2] is None
    assert all(a is None and b is None or torch.equal(a, b) for a, b in zip(their_grads, our_grads))
    with_gradient = len(SHAPES) - 1
    assert their_ops.count("aten::linalg_vector_norm") == with_gradient + 1  # one per tensor, then the total
    assert our_ops.count("aten::linalg_vector_norm") == 1 and our_ops.count("aten::_foreach_norm") == 1
    assert len([name for name in our_ops if name != "aten::detach"]) <= 8
    if max_norm == 0.5:  # the gradients' norm is far above it: they were scaled
        assert float(our_norm) > 1 and not torch.equal(our_grads[1], set_gradients_of(1))


def set_gradients_of(index: int) -> torch.Tensor:
    """The unclipped gradient ``set_gradients`` gives parameter INDEX at step 0."""
    params = parameters()
    set_gradients(params, 0)
    return params[index].grad


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_on_cuda_it_runs_all_at_once_and_stays_with_fairseqs_adam(dtype):
    """The multi-tensor kernels may round differently in the last bit: after six steps the moments agree to float32
    rounding and the weights to their dtype's last bit."""
    theirs_params = [torch.nn.Parameter(p.detach().cuda()) for p in parameters(dtype)]
    ours_params = [torch.nn.Parameter(p.detach().cuda()) for p in parameters(dtype)]
    theirs = build("adam", theirs_params, weight_decay=0.01)
    ours = build("foreach_adam", ours_params, weight_decay=0.01)
    assert foreach_adam.all_at_once(ours_params[0].device)
    step_together([theirs, ours], [theirs_params, ours_params], range(6))
    last_bit = 1e-6 if dtype == torch.float32 else 2 ** -7
    for a, b in zip(theirs_params, ours_params):
        assert b.dtype == dtype and b.is_cuda
        torch.testing.assert_close(b, a, rtol=last_bit, atol=1e-9)
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(ours.optimizer.state[b][key], theirs.optimizer.state[a][key], rtol=1e-6,
                                       atol=1e-12)
    assert not torch.equal(ours_params[0], parameters(dtype)[0].cuda())  # it moved


@pytest.mark.cuda
def test_on_cuda_clipping_takes_the_norms_at_once_and_clips_as_fairseq_does():
    """On a GPU the multi-tensor norm may round differently in the last bit from fairseq's per-tensor ones."""
    norms, grads = [], []
    for name in ("adam", "foreach_adam"):
        params = [torch.nn.Parameter(p.detach().cuda()) for p in parameters()]
        optimizer = build(name, params)
        set_gradients(params, 0)
        norms.append(optimizer.clip_grad_norm(0.5))
        grads.append([p.grad for p in params])
    torch.testing.assert_close(norms[1], norms[0], rtol=1e-6, atol=0)
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9)
    assert float(norms[1]) > 0.5  # the gradients were scaled


def test_a_sparse_gradient_and_fp16_adam_stats_are_refused():
    params = parameters()
    optimizer = build("foreach_adam", params)
    params[0].grad = torch.zeros(SHAPES[0]).to_sparse()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        optimizer.step()
    with pytest.raises(ValueError, match="--fp16-adam-stats"):
        build("foreach_adam", parameters(), fp16_adam_stats=True)


def fairseq_train(data: Path, save: Path, optimizer: str):
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    cmd = ["fairseq-train", str(data / "bin"), "--user-dir", str(root / "fairseq_plugins"), "--task", "summarization",
           "--arch", "pgn_lstm_small", "--encoder-hidden-size", "16", "--decoder-hidden-size", "32",
           "--criterion", "focal_copy_coverage", "--optimizer", optimizer, "--adam-betas", "(0.9, 0.98)",
           "--weight-decay", "0.01", "--lr", "0.002", "--clip-norm", "2.0", "--max-tokens", "1500", "--max-update", "3",
           "--save-dir", str(save), "--no-epoch-checkpoints", "--log-format", "simple", "--seed", "1"]
    result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"fairseq-train failed:\n{result.stderr[-3000:]}"
    from fairseq import checkpoint_utils

    return checkpoint_utils.load_checkpoint_to_cpu(str(save / "checkpoint_last.pt"))


@pytest.mark.slow
def test_fairseq_train_selects_it_and_trains_the_weights_fairseqs_adam_trains(tmp_path):
    raw = slice_corpus("scitldr", tmp_path / "raw", (("train", 40), ("valid", 4), ("test", 2)))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["./preprocess.sh", str(raw), str(tmp_path / "data")], cwd=root, env=env, check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)
    theirs = fairseq_train(tmp_path / "data", tmp_path / "adam", "adam")
    ours = fairseq_train(tmp_path / "data", tmp_path / "foreach_adam", "foreach_adam")
    assert ours["optimizer_history"][-1]["optimizer_name"] == "FairseqForeachAdam"
    assert ours["optimizer_history"][-1]["num_updates"] == 3
    assert theirs["model"].keys() == ours["model"].keys()
    for name, weight in theirs["model"].items():
        assert torch.equal(weight, ours["model"][name]), name

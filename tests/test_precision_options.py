"""Precision routes of the summarization task (tasks/precision.py): ``--bf16-autocast`` trains in bfloat16 autocast
with float32 weights, and fairseq's ``--bf16`` (a TPU option in 0.12.x) is refused at once with a message that
names the working options."""
import argparse
import math
import re

import pytest
import torch

from conftest import ROOT, run, slice_corpus, stub_task, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.generation.sampling import teacher_forcing_input
from fairseq_plugins.tasks.precision import BF16_REFUSED, autocast_train_step, check_precision_options

DICT = tiny_dictionary()
PAD, EOS = DICT.pad(), DICT.eos()


Task = stub_task(DICT, skips_nonfinite_updates=True)


@pytest.mark.skipif(__import__("importlib").util.find_spec("torch_xla") is not None, reason="torch_xla is installed: fairseq's --bf16 can then run on a TPU, so it is not refused")
@pytest.mark.parametrize("flag", ["bf16", "memory_efficient_bf16"])
def test_fairseq_bf16_without_torch_xla_is_refused_naming_the_working_options(flag):
    with pytest.raises(ValueError) as error:
        check_precision_options(argparse.Namespace(**{flag: True, "tpu": True}), bf16_autocast=False)
    assert str(error.value) == BF16_REFUSED
    assert "--bf16-autocast" in BF16_REFUSED and "--fp16" in BF16_REFUSED and "--amp" in BF16_REFUSED


@pytest.mark.parametrize("flag", ["fp16", "amp", "memory_efficient_fp16"])
def test_bf16_autocast_with_another_half_precision_route_is_refused(flag):
    with pytest.raises(ValueError, match=rf"--bf16-autocast cannot be combined with --{flag.replace('_', '-')}"):
        check_precision_options(argparse.Namespace(**{flag: True}), bf16_autocast=True)


def test_plain_and_autocast_runs_pass_the_check():
    check_precision_options(argparse.Namespace(fp16=False, bf16=False, amp=False), bf16_autocast=True)
    check_precision_options(argparse.Namespace(fp16=True), bf16_autocast=False)


class Optimizer:
    """What fairseq's optimizer does in a train step's backward: loss.backward()."""

    def backward(self, loss):
        loss.backward()


def sample():
    src = torch.tensor([[4, 5, 11, 6, EOS], [PAD, PAD, 7, 11, EOS]])
    tgt = torch.tensor([[4, 11, 5, EOS], [11, 8, EOS, PAD]])
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([5, 3]),
                          "prev_output_tokens": teacher_forcing_input(tgt, PAD, EOS)},
            "target": tgt, "ntokens": int(tgt.ne(PAD).sum()), "id": torch.arange(2)}


@pytest.mark.parametrize("build", [tiny_model, tiny_gru], ids=["pgn_lstm", "global_gate_gru"])
def test_the_autocast_train_step_runs_the_criterion_in_bfloat16_and_keeps_float32_gradients(build):
    torch.manual_seed(0)
    model = build(DICT).eval()  # the step puts it in training mode
    criterion = FocalCopyCoverageCriterion(Task(), focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0,
                                           loss_average="sequence", sentence_avg=False)
    seen = {}
    model.decoder.register_forward_hook(
        lambda module, args, output: seen.update(autocast=torch.is_autocast_enabled("cpu"),
                                                 logits=output[0].dtype))
    loss, sample_size, log = autocast_train_step(sample(), model, criterion, Optimizer(), update_num=4)
    assert model.training and seen["autocast"] and seen["logits"] == torch.bfloat16
    assert math.isfinite(loss.item()) and sample_size > 0
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert len(grads) > 5 and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    assert not torch.is_autocast_enabled("cpu")  # nothing leaks out of the step
    zero, _, _ = autocast_train_step(sample(), model, criterion, Optimizer(), update_num=5, ignore_grad=True)
    assert zero.item() == 0


# ---------------------------------------------------------------------------------------------- through fairseq
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    work = tmp_path_factory.mktemp("precision_data")
    raw = slice_corpus("scitldr", work / "raw", (("train", 40), ("valid", 8), ("test", 2)))
    run(["./preprocess.sh", raw, work / "data"])
    return work / "data" / "bin"


def train(data, save, *extra, check=True):
    return run(["fairseq-train", data, "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
                "--arch", "global_gate_gru_small", "--criterion", "focal_copy_coverage", "--optimizer", "adam",
                "--lr", "0.001", "--max-tokens", "2500", "--log-format", "simple", "--log-interval", "1",
                "--no-epoch-checkpoints", "--num-workers", "0", "--max-update", "2", "--save-dir", save, *extra],
               check=check)


@pytest.mark.slow
def test_fairseq_train_bf16_fails_at_once_with_the_message(data, tmp_path):
    result = train(data, tmp_path / "bf16", "--bf16", check=False)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "--bf16-autocast" in log and "xla_device" not in log, log[-2000:]
    assert "num_updates" not in log


@pytest.mark.slow
def test_fairseq_train_bf16_autocast_trains_with_finite_losses(data, tmp_path):
    result = train(data, tmp_path / "autocast", "--bf16-autocast")
    log = result.stdout + result.stderr
    losses = [float(v) for v in re.findall(r"train_inner .*?\bloss=([-\d.e+]+|nan|inf)", log)]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), log[-2000:]
    assert (tmp_path / "autocast" / "checkpoint_last.pt").exists()


def test_an_lstm_under_cpu_bfloat16_autocast_runs_where_onednn_has_no_bfloat16_lstm(monkeypatch):
    """On a CPU without AVX-512 oneDNN has no bfloat16 LSTM; the project's LSTM calls then run with oneDNN off
    (modules/factories.py ``rnn_precision``) instead of failing, and only inside the call."""
    from fairseq_plugins.modules import factories

    monkeypatch.setattr(factories, "onednn_bf16_lstm", lambda: False)
    x = torch.randn(2, 3, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with factories.rnn_precision(x):
            assert not torch._C._get_mkldnn_enabled()
            out, _ = factories.LSTM(4, 5)(x)
        assert torch._C._get_mkldnn_enabled()  # restored after the call
    assert out.shape == (2, 3, 5) and torch.isfinite(out).all()
    with factories.rnn_precision(x):  # no autocast: nothing changes
        assert torch._C._get_mkldnn_enabled()
    monkeypatch.setattr(factories, "onednn_bf16_lstm", lambda: True)
    with torch.autocast("cpu", dtype=torch.bfloat16), factories.rnn_precision(x):
        assert torch._C._get_mkldnn_enabled()  # a CPU whose oneDNN has it keeps it

"""The GPU tier: every architecture and criterion on CUDA in fp32, fp16 and bf16, the real fairseq-train routes,
CPU/GPU decode agreement, the hub and summ-serve on CUDA, and quantization's refusal of CUDA.

Every test here is marked ``cuda``: it runs whenever torch sees a CUDA device (``bash scripts/test.sh --gpu``
runs just these) and is skipped, with the reason, elsewhere (conftest.py).  They use no API newer than torch
2.4, so they also run on a GPU machine whose torch and Python differ from the pinned ones (the GPU recipe:
../shared/gpu/README.md).  With ``SUMM_CUDA_REPORT=FILE`` each training case appends a JSON line (architecture,
criterion, precision, its losses) to FILE: the table of scripts/bench/gpu_check.sh.

Precisions, as fairseq's options run them:
  fp32            the float32 model;
  fp16            ``--fp16``: the whole model in float16 (fairseq keeps float32 master weights in its optimizer);
  amp             ``--amp``: the float32 model under float16 autocast with a gradient scaler;
  bf16_autocast   ``--bf16-autocast``: the summarization task's own train step (tasks/precision.py).
"""
import json
import math
import os
import re
import sys

import pytest
import torch

from conftest import ROOT, run
from fairseq_plugins.tasks.precision import autocast_train_step
from test_half_precision import (
    LOG_PROB_TOL,
    MARKERS,
    MODELS,
    assert_close_log_probs,
    batch as half_batch,
    log_probs,
    twins,
)
from test_training_modes import ARCHS, CRITERIONS, DICT, batch

pytestmark = pytest.mark.cuda

PRECISIONS = ("fp32", "fp16", "amp", "bf16_autocast")
UPDATES = 3
# The loss scale fairseq's --amp starts from (its --fp16-init-scale default, fairseq/optim/amp_optimizer.py); torch's
# GradScaler default (65536) overflows a first fp16 backward that fairseq's 128 does not.
FAIRSEQ_INIT_SCALE = 2**7


def to_cuda(value):
    if torch.is_tensor(value):
        return value.cuda()
    if isinstance(value, dict):
        return {key: to_cuda(item) for key, item in value.items()}
    return value


class Backward:
    """The optimizer's part of fairseq's train step: backward (through a gradient scaler when given)."""

    def __init__(self, scaler=None):
        self.scaler = scaler

    def backward(self, loss):
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()


def one_update(model, criterion, sample, precision, optimizer, scaler, update):
    """One training update in ``precision``; its loss (a float)."""
    optimizer.zero_grad()
    if precision == "bf16_autocast":
        loss, _, _ = autocast_train_step(sample, model, criterion, Backward(), update)
    else:
        model.train()
        with torch.autocast("cuda", dtype=torch.float16, enabled=precision == "amp"):
            loss, _, _ = criterion(model, sample)
        Backward(scaler).backward(loss)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if scaler is not None:
        scaler.unscale_(optimizer)
    assert grads and all(torch.isfinite(g).all() for g in grads), "non-finite gradients"
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()
    return loss.item()


def report(**case):
    path = os.environ.get("SUMM_CUDA_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(case) + "\n")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("criterion", CRITERIONS)
@pytest.mark.parametrize("arch", ARCHS)
def test_a_few_updates_on_cuda_have_finite_losses(arch, criterion, precision):
    """Dropout on, training mode throughout: the RL criterions' passes with gradient run through cuDNN's
    recurrent backward, which refuses modules in eval mode."""
    torch.manual_seed(0)
    model = ARCHS[arch]().cuda()
    if precision == "fp16":
        model.half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cuda", init_scale=FAIRSEQ_INIT_SCALE) if precision == "amp" else None
    loss_fn = CRITERIONS[criterion]()
    losses = [one_update(model, loss_fn, to_cuda(batch()), precision, optimizer, scaler, update)
              for update in range(UPDATES)]
    report(arch=arch, criterion=criterion, precision=precision, losses=losses)
    assert all(math.isfinite(loss) for loss in losses), losses


@pytest.mark.parametrize("mode", ["fp16", "bf16", "amp", "bf16_autocast"])
@pytest.mark.parametrize("name", MODELS)
def test_the_copy_distribution_in_half_precision_on_cuda_is_float32_s(name, mode):
    """P(w) over the extended vocabulary, copied OOV markers included, within the CPU tests' tolerances of the
    float32 model's on the same GPU, and 0 exactly where float32's is: the copy mechanism still copies."""
    dtype = torch.bfloat16 if mode.startswith("bf16") else torch.float16
    full, half = twins(name, dtype if mode in ("fp16", "bf16") else torch.float32)
    full, half, sample = full.cuda(), half.cuda(), to_cuda(half_batch())
    with torch.no_grad():
        expected = log_probs(full, sample)
        with torch.autocast("cuda", dtype=dtype, enabled=mode in ("amp", "bf16_autocast")):
            got = log_probs(half, sample)
    assert_close_log_probs(got.float(), expected, LOG_PROB_TOL[dtype])
    markers = torch.isin(sample["target"], torch.tensor(MARKERS, device="cuda"))  # the references' copied OOVs
    copied = got.float().gather(2, sample["target"].unsqueeze(2)).squeeze(2)[markers]  # log P(marker)
    if name != "global_gate_gru":  # every variant but this one copies
        assert torch.isfinite(copied).sum() >= 2  # markers of their own source: copyable, and still copied


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_search_with_blocking_and_coverage_penalty_on_cuda_equals_the_cpu_s(arch):
    """The project's generator (trigram blocking, coverage penalty) on CUDA: the same hypotheses as on the CPU
    for a tiny random model of every architecture, one per input, none repeating a trigram."""
    from test_generator import build, generate, has_repeat

    torch.manual_seed(3)
    model = ARCHS[arch]().eval()
    src, lengths = batch()["net_input"]["src_tokens"], batch()["net_input"]["src_lengths"]
    options = dict(beam=5, min_len=8, max_len_b=8, block_ngram_repeat=3, coverage_penalty=0.2)
    on_cpu = generate(build(dictionary=DICT, models=[model], **options), src, lengths)
    model.cuda()
    on_gpu = generate(build(dictionary=DICT, models=[model], **options), src.cuda(), lengths.cuda())
    best = lambda hypos: [h[0]["tokens"].tolist() for h in hypos]  # noqa: E731
    assert len(on_gpu) == src.size(0) and best(on_gpu) == best(on_cpu)
    assert not any(has_repeat(tokens[:-1], ignore={DICT.unk()}) for tokens in best(on_gpu))


# ---------------------------------------------------------------------------------------------- the binaries
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The shipped SciTLDR-A sample, preprocessed by the main job's config (its test split: 618 documents)."""
    work = tmp_path_factory.mktemp("cuda_data")
    run(["./preprocess.sh", "-c", "scitldr_small", ROOT / "data" / "scitldr", work / "data"])
    return work / "data"


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    """scitldr_small trained 300 updates on the GPU: the model every decoding test reads."""
    model = tmp_path_factory.mktemp("cuda_model") / "model"
    run(["./train.sh", "-c", "scitldr_small", data, model, "--max-update", "300"], timeout=900)
    return model


def logged_losses(log: str) -> list:
    return [float(v) for v in re.findall(r"train_inner .*?\bloss=([-\d.e+]+|nan|inf)", log)]


PRESETS = [  # each paper's preset, with a criterion and a precision in turn
    ("pgn_lstm_see2017", "focal_copy_coverage", "--fp16"),
    ("pgn_lstm_shi2018", "focal_copy_coverage", "--amp"),
    ("pgn_lstm_paulus2017", "self_critical_rouge", "--bf16-autocast"),
    ("global_gate_gru_song2020", "semantic_cohesion", "--fp16"),
    ("dca_lstm_celikyilmaz2018", "self_critical_cohesion", "--amp"),
    ("dca_lstm_small", "focal_copy_coverage", "--bf16-autocast"),
]


@pytest.mark.slow
@pytest.mark.parametrize("arch, criterion, precision", PRESETS, ids=[p[0] for p in PRESETS])
def test_paper_presets_train_on_cuda_through_fairseq_train(data, tmp_path, arch, criterion, precision):
    rl = ["--rl-max-len-b", "20"] if criterion.startswith("self_critical") else []
    result = run(["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
                  "--arch", arch, "--criterion", criterion, precision, *rl, "--optimizer", "adam", "--lr", "0.0005",
                  "--max-tokens", "3000", "--max-update", "3", "--log-format", "simple", "--log-interval", "1",
                  "--disable-validation", "--no-save", "--num-workers", "0"])
    losses = logged_losses(result.stdout + result.stderr)
    report(arch=arch, criterion=f"{criterion} (fairseq-train)", precision=precision, losses=losses)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses), result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("precision", [[], ["--fp16"], ["--amp"], ["--bf16-autocast"]],
                         ids=["fp32", "fp16", "amp", "bf16_autocast"])
def test_self_critical_fine_tuning_trains_on_cuda_through_train_sh(data, trained, tmp_path, precision):
    """The RL config from an ML checkpoint, as docs/training.md says, in each precision (it crashed in cuDNN's
    backward when the criterion switched dropout off with model.eval())."""
    result = run(["./train.sh", "-c", "scitldr_small_rl", data, tmp_path / "rl", "--finetune-from-model",
                  trained / "checkpoint_last.pt", "--max-update", "4", "--log-interval", "1",
                  "--disable-validation", *precision])
    losses = logged_losses(result.stdout + result.stderr)
    report(arch="pgn_lstm_small", criterion="self_critical_rouge (train.sh)", precision=" ".join(precision) or "fp32",
           losses=losses)
    assert len(losses) == 4 and all(math.isfinite(v) for v in losses), (result.stderr[-3000:])


@pytest.mark.slow
def test_cpu_and_gpu_decode_the_same_checkpoint_to_the_same_summaries(trained):
    """fp32, beam 5, trigram blocking: at least 99 % of 200 test documents get the same summary on both."""
    from fairseq_plugins.inference.hub import Summarizer

    documents = (ROOT / "data" / "scitldr" / "test.src").read_text(encoding="utf-8").splitlines()[:200]
    options = dict(beam=5, block_ngram_repeat=3, batch_size=32)
    on_gpu = Summarizer.from_pretrained(trained, "checkpoint_last.pt", device="cuda")
    assert on_gpu.device.type == "cuda"
    gpu = on_gpu.summarize(documents, **options)
    cpu = Summarizer.from_pretrained(trained, "checkpoint_last.pt", device="cpu").summarize(documents, **options)
    same = sum(a == b for a, b in zip(cpu, gpu))
    report(check="cpu_gpu_decode", documents=len(documents), same=same)
    assert len(gpu) == len(cpu) == 200 and all(gpu)
    assert same >= 198, [(a, b) for a, b in zip(cpu, gpu) if a != b][:3]


@pytest.mark.slow
def test_summ_serve_on_cuda_answers_as_the_hub_does(trained):
    from fairseq_plugins.inference.hub import Summarizer
    from serving import Server

    documents = (ROOT / "data" / "scitldr" / "test.src").read_text(encoding="utf-8").splitlines()[:5]
    expected = Summarizer.from_pretrained(trained, device="cuda").summarize(documents)
    server = Server(trained, "--device", "cuda")
    try:
        assert server.summaries(documents) == expected
    finally:
        assert server.terminate() == 0
    assert any(re.search(r"loaded on cuda", line) for line in server.log), "".join(server.log)[-2000:]


@pytest.mark.slow
def test_quantize_refuses_cuda_with_its_message(trained):
    from fairseq_plugins.inference.hub import Summarizer
    from fairseq_plugins.inference.quantize import QuantizeError

    with pytest.raises(QuantizeError, match="decodes on the CPU only"):
        Summarizer.from_pretrained(trained, device="cuda", quantize="int8")
    result = run(["summ-serve", trained, "--device", "cuda", "--quantize", "int8", "--port", "0"], check=False)
    assert result.returncode != 0 and "CPU only" in result.stderr, result.stderr[-2000:]


def test_the_fused_recurrence_replays_as_a_cuda_graph_with_eager_results(tmp_path):
    """scripts/bench/graph_ceiling.py on small shapes: the training pass (forward + backward) and a beam step of
    the fused decoder are captured and replayed, and the replay's results are the eager ones."""
    out = tmp_path / "ceiling.json"
    run([sys.executable, "scripts/bench/graph_ceiling.py", "--shapes", "4x6x9", "--repeats", "3", "--json", out])
    rows = json.loads(out.read_text())["rows"]
    assert [row["pass"] for row in rows] == ["training (forward + backward)", "beam step (no gradient)"]
    for row in rows:
        assert row["error"] is None and row["graph_ms"] > 0 and row["max_difference"] < 1e-5

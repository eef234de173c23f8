"""Shared test helpers: repository paths, the ``slow`` marker, running the project's commands, tiny models on a
hand-made extended vocabulary, and the check that incremental decoding equals the full forward pass."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
VENV_BIN = str(Path(sys.executable).parent)


def pytest_configure(config):
    # Registered here because the pytest settings live in pyproject.toml.  `bash scripts/test.sh --fast` (pytest
    # -m "not slow") leaves these tests out; CI and the README's `bash scripts/test.sh` run them all.
    config.addinivalue_line("markers", "slow: starts a subprocess (the scripts, fairseq binaries, training, "
                                       "official ROUGE); left out by `bash scripts/test.sh --fast`")
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU; runs whenever torch sees one (`bash scripts/test.sh "
                                       "--gpu` runs just these), skipped with the reason elsewhere")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` are skipped, with the reason, where torch sees no CUDA device."""
    reason = no_cuda_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def no_cuda_reason():
    """Why the ``cuda`` tests cannot run here, or None when torch sees a CUDA device."""
    import torch

    if torch.cuda.is_available():
        return None
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    return f"no CUDA GPU visible to torch {torch.__version__} ({build}); run `bash scripts/test.sh --gpu` on a GPU"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"../shared/data not found beside the repository ({SHARED_DATA}); CI provides it")
    return SHARED_DATA


def command_env(**extra) -> dict:
    """The environment of the project's commands in tests: the venv's binaries first on PATH, this checkout first
    on PYTHONPATH (a script run as a file, python scripts/experiments/NAME.py, imports ``scripts.*`` and
    fairseq_plugins from here, whichever checkout the venv was installed from), one thread each (a tiny model
    gains nothing from two, and loses a lot when another job shares the cores) and train.sh's whole log on stderr
    (TRAIN_VERBOSE=1: the tests read fairseq's lines; test_cli.py tests the quiet default); ``extra`` adds or
    overrides variables."""
    variables = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                     TRAIN_VERBOSE="1",
                     PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    variables.update(extra)
    return variables


def run(cmd, check=True, env=None, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd`` (strings or paths) from the repository root with ``env`` (default: command_env()), no stdin,
    output captured as text.  With ``check``, a failure is an AssertionError with the exit code and the tails
    of stdout and stderr."""
    result = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=command_env() if env is None else env,
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-4000:]}")
    return result


def output(cmd, **kwargs) -> str:
    """run(cmd): stdout and stderr as one text (fairseq logs to stderr)."""
    result = run(cmd, **kwargs)
    return result.stdout + result.stderr


def tiny_dictionary(words="a b c d e f g", num_markers=4):
    """A fairseq Dictionary laid out as summ-prepare writes it: specials, regular words, then OOV markers."""
    from fairseq.data import Dictionary

    from fairseq_plugins.text.markers import marker

    dictionary = Dictionary()
    for word in words.split():
        dictionary.add_symbol(word)
    for k in range(num_markers):
        dictionary.add_symbol(marker(k))
    return dictionary


def stub_task(dictionary, skips_nonfinite_updates: bool = False):
    """A class standing in for a fairseq task where a model or a criterion reads only the dictionaries (and
    whether the task skips non-finite updates, as --task summarization does)."""
    return type("Task", (), {"source_dictionary": dictionary, "target_dictionary": dictionary,
                             "skips_nonfinite_updates": skips_nonfinite_updates})


def tiny_model(dictionary, **overrides):
    import fairseq_plugins  # noqa: F401  (registers the plugins)
    from fairseq_plugins.models.pgn_lstm import PGNLSTMModel

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, dropout=0.0)
    options.update(overrides)
    return PGNLSTMModel.build_model(argparse.Namespace(**options), stub_task(dictionary)())


def tiny_gru(dictionary, **overrides):
    """A tiny global_gate_gru on the same kind of dictionary."""
    import fairseq_plugins  # noqa: F401  (registers the plugins)
    from fairseq_plugins.models.global_gate_gru import GlobalGateGRUModel

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, decoder_out_embed_dim=5,
                   attention_dim=9, dropout=0.0)
    options.update(overrides)
    return GlobalGateGRUModel.build_model(argparse.Namespace(**options), stub_task(dictionary)())


def tiny_dca(dictionary, **overrides):
    """A tiny dca_lstm (two agents by default) on the same kind of dictionary."""
    import fairseq_plugins  # noqa: F401  (registers the plugins)
    from fairseq_plugins.models.dca_lstm import DCALSTMModel

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, attention_dim=5, dropout=0.0)
    options.update(overrides)
    return DCALSTMModel.build_model(argparse.Namespace(**options), stub_task(dictionary)())


def slice_corpus(corpus: str, dest: Path, counts) -> Path:
    """The first ``count`` documents of each split of a shipped corpus (data/CORPUS) as a raw dir at ``dest``.

    counts: (split, count) pairs, e.g. (("train", 300), ("valid", 30), ("test", 25))."""
    dest.mkdir(parents=True, exist_ok=True)
    for split, count in counts:
        for side in ("src", "tgt"):
            with (ROOT / "data" / corpus / f"{split}.{side}").open(encoding="utf-8") as f:
                (dest / f"{split}.{side}").write_text("".join(next(f) for _ in range(count)), encoding="utf-8")
    return dest


def tiny_batch(dictionary):
    """Two sources (the second left-padded, as fairseq collates them) and teacher-forcing inputs."""
    import torch

    from fairseq_plugins.text.markers import marker

    m0 = dictionary.index(marker(0))
    pad, eos = dictionary.pad(), dictionary.eos()
    src = torch.tensor([[4, 5, m0, 6, eos], [pad, pad, 7, m0, eos]])
    lengths = torch.tensor([5, 3])
    prev = torch.tensor([[eos, 4, m0, 5], [eos, m0, 8, 9]])
    return src, lengths, prev


def decode_incrementally(model, src, lengths, prev, order=None, reorder_at=2):
    """Step by step through the incremental state, reordering the rows by ``order`` (default: rolled by one,
    [1, 0] for two rows) at step ``reorder_at`` as beam search would.  Returns the log-probabilities B x T x V
    and the step outputs (attn, decoder_states, coverage, p_gen where the model has them) stacked over the
    steps, all back in the original row order."""
    import torch

    rows = torch.arange(src.size(0))
    order = rows.roll(1) if order is None else order
    encoder_out = model.encoder(src, lengths)
    state, log_probs, extras = {}, [], []
    for t in range(prev.size(1)):
        if t == reorder_at:
            model.decoder.reorder_incremental_state(state, order)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
            rows = rows.index_select(0, order)
        out = model.decoder(prev.index_select(0, rows)[:, : t + 1], encoder_out, incremental_state=state)
        back = torch.argsort(rows)  # back to the original row order
        log_probs.append(model.get_normalized_probs(out, log_probs=True).index_select(0, back))
        extras.append({key: value.index_select(0, back) for key, value in out[1].items()
                       if key in ("decoder_states", "coverage", "p_gen")})
        extras[-1]["attn"] = out[1]["attn"][0].index_select(0, back)
    stacked = {key: torch.cat([e[key] for e in extras], dim=1) for key in extras[0]}
    return torch.cat(log_probs, dim=1), stacked


def assert_incremental_equals_full(model, src, lengths, prev, order=None):
    """What every model must pass: decoding step by step, with a beam reordering halfway, gives the full
    forward pass's log-probabilities, attention, decoder states (B x T x H) and, where the model has them,
    coverage and copy switch."""
    import torch

    logits, extra = model(src, lengths, prev)
    full = model.get_normalized_probs((logits, extra), log_probs=True)  # B x T x V
    steps, step_extra = decode_incrementally(model, src, lengths, prev, order)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step_extra["attn"], extra["attn"][0], atol=1e-5, rtol=1e-5)
    assert extra["decoder_states"].shape == (src.size(0), prev.size(1), model.decoder.hidden_size)  # B x T x H
    torch.testing.assert_close(step_extra["decoder_states"], extra["decoder_states"], atol=1e-5, rtol=1e-5)
    for key in ("coverage", "p_gen"):
        assert (key in extra) == (key in step_extra)
        if key in extra:
            torch.testing.assert_close(step_extra[key], extra[key], atol=1e-5, rtol=1e-5)


def assert_same_gradients(got, expected, model):
    """Per parameter of ``model``: the gradient ``got`` equals ``expected`` (rtol 1e-5, and an absolute tolerance of
    1e-5 of the parameter's largest expected gradient: float32 sums taken in another order differ by that much on
    the small elements), and a parameter without an expected gradient got none or zeros; more than five
    parameters compared."""
    import torch

    compared = 0
    for (name, _), g, e in zip(model.named_parameters(), got, expected):
        if e is None:
            assert g is None or g.abs().max() == 0, name
            continue
        torch.testing.assert_close(g, e, rtol=1e-5, atol=max(1e-7, 1e-5 * e.abs().max().item()), msg=name)
        compared += 1
    assert compared > 5

"""Shared test helpers: repository paths and a tiny pgn_lstm on a hand-made extended vocabulary."""
import argparse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"../shared/data not found beside the repository ({SHARED_DATA}); CI provides it")
    return SHARED_DATA


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


def tiny_model(dictionary, **overrides):
    import fairseq_plugins  # noqa: F401  (registers the plugins)
    from fairseq_plugins.models.pgn_lstm import PGNLSTMModel

    class Task:
        source_dictionary = dictionary
        target_dictionary = dictionary

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, dropout=0.0)
    options.update(overrides)
    return PGNLSTMModel.build_model(argparse.Namespace(**options), Task())


def tiny_gru(dictionary, **overrides):
    """A tiny global_gate_gru on the same kind of dictionary."""
    import fairseq_plugins  # noqa: F401  (registers the plugins)
    from fairseq_plugins.models.global_gate_gru import GlobalGateGRUModel

    class Task:
        source_dictionary = dictionary
        target_dictionary = dictionary

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, decoder_out_embed_dim=5,
                   attention_dim=9, dropout=0.0)
    options.update(overrides)
    return GlobalGateGRUModel.build_model(argparse.Namespace(**options), Task())


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

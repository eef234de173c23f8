"""Factory functions that own the initialisation of the layers every architecture uses.

Each returns a plain torch module (so parameter names in checkpoints are torch's), initialised as the
toolkit's models have always been: embeddings N(0, 1/dim) with a zero padding row, linear layers Xavier-uniform
with zero bias (``Linear``; the attention scorers and gates keep torch's default, ``TorchLinear``), recurrent
layers uniform in [-0.1, 0.1].  ``build_embeddings`` builds a model's encoder and
decoder embeddings from the options ``add_embedding_args`` declares, with the ``--share-all-embeddings`` check.
"""
import contextlib
import functools
import logging
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_plugins.modules.pretrained_embeddings import fill_embedding, freeze

logger = logging.getLogger(__name__)

RNN_INIT_BOUND = 0.1  # recurrent weights and biases ~ U(-0.1, 0.1)


class Dropout(nn.Dropout):
    """``nn.Dropout`` that dispatches nothing when it changes nothing (in evaluation, or with p = 0): a decoding
    step then pays no operation for it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) if self.training and self.p > 0 else x


def Embedding(num_embeddings: int, embedding_dim: int, padding_idx: int) -> nn.Embedding:
    """An embedding with rows ~ N(0, 1/embedding_dim) and a zero padding row."""
    m = nn.Embedding(num_embeddings, embedding_dim, padding_idx=padding_idx)
    nn.init.normal_(m.weight, mean=0, std=embedding_dim**-0.5)
    nn.init.constant_(m.weight[padding_idx], 0)
    return m


def PretrainedEmbedding(dictionary, embedding_dim: int, path: Optional[str], fmt: str = "auto",
                        trainable: bool = True) -> nn.Embedding:
    """An ``Embedding`` whose rows for the dictionary's words come from a word2vec/GloVe file when ``path`` is
    given (modules/pretrained_embeddings.py; the coverage report goes to the log), optionally frozen."""
    embedding = Embedding(len(dictionary), embedding_dim, dictionary.pad())
    if path:
        fill_embedding(embedding, path, dictionary, fmt=fmt)
    return freeze(embedding, trainable=trainable)


def Linear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    """A linear layer with Xavier-uniform weights and zero bias."""
    m = nn.Linear(in_features, out_features, bias=bias)
    nn.init.xavier_uniform_(m.weight)
    if bias:
        nn.init.constant_(m.bias, 0.0)
    return m


def TorchLinear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    """A linear layer with torch's own initialisation (Kaiming-uniform weights, a = sqrt(5); bias ~ U(+-1/sqrt(in))),
    which the attention scorers, the copy switch and the selective gates have always had."""
    return nn.Linear(in_features, out_features, bias=bias)


def uniform_rnn_init(m: nn.Module) -> nn.Module:
    """Every weight and bias of a recurrent module ~ U(-0.1, 0.1), in parameter order; returns the module."""
    for name, param in m.named_parameters():
        if "weight" in name or "bias" in name:
            param.data.uniform_(-RNN_INIT_BOUND, RNN_INIT_BOUND)
    return m


def LSTM(input_size: int, hidden_size: int, num_layers: int = 1, bidirectional: bool = False,
         dropout: float = 0.0) -> nn.LSTM:
    """A batch-first ``nn.LSTM``; ``dropout`` between stacked layers only (ignored for one layer)."""
    return uniform_rnn_init(nn.LSTM(input_size, hidden_size, num_layers=num_layers, bidirectional=bidirectional,
                                    batch_first=True, dropout=dropout if num_layers > 1 else 0.0))


def rnn_precision(x: Tensor):
    """The block an ``nn.LSTM`` call runs in: oneDNN off where the CPU's oneDNN has no bfloat16 LSTM (CPUs
    without AVX-512, where it fails with "could not create a primitive descriptor for the LSTM forward
    propagation primitive") and ``x`` is on the CPU under bfloat16 autocast; torch's own kernel then runs the
    layer in float32.  Everywhere else nothing changes."""
    if (x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not onednn_bf16_lstm()):
        return torch.backends.mkldnn.flags(enabled=False)
    return contextlib.nullcontext()


@functools.lru_cache(maxsize=None)
def onednn_bf16_lstm() -> bool:
    """Whether this CPU's oneDNN runs an LSTM under bfloat16 autocast (tried once, on a 1 x 1 x 1 input)."""
    probe = nn.LSTM(1, 1)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            probe(torch.zeros(1, 1, 1))
    except RuntimeError:
        return False
    return True


def LSTMCell(input_size: int, hidden_size: int) -> nn.LSTMCell:
    return uniform_rnn_init(nn.LSTMCell(input_size, hidden_size))


def GRU(input_size: int, hidden_size: int) -> nn.GRU:
    """A one-layer, one-direction, batch-first ``nn.GRU``."""
    return uniform_rnn_init(nn.GRU(input_size, hidden_size, batch_first=True))


def GRUCell(input_size: int, hidden_size: int) -> nn.GRUCell:
    return uniform_rnn_init(nn.GRUCell(input_size, hidden_size))


def EmbeddingNorm(embed_dim: int, enabled: bool) -> nn.Module:
    """Shi et al.'s normalization between embedding and RNN (Shi eq 14): x_norm = gamma (x - mean) / sqrt(var + eps)
    + beta, with learnable gamma and beta.  Identity when disabled.

    Shi eq 14 cites Ioffe & Szegedy's batch normalization; here mean and variance are taken over each embedding's
    dimensions (layer normalization), because batch statistics over padded variable-length batches would mix
    in the padding and change with the batch's make-up, and beam search normalises one document's hypotheses
    at a time (a batch of 1 in the limit), so training and decoding would not see the same statistics."""
    return nn.LayerNorm(embed_dim) if enabled else nn.Identity()


def flush_denormals() -> None:
    """Treat subnormal floats as zero on the CPU (FTZ/DAZ), for the whole process; every model's
    ``build_model`` calls it, so it also holds in a process that only loads a model (the hub, fairseq-generate).

    Why: attention weights far from the focus underflow into the subnormal range (below 1e-38), and every CPU
    operation touching them, including the coverage vector that sums them, then runs many times slower
    (docs/design.md).  Rounding them to zero changes no result that matters.

    Which way: process-wide, not scoped to the model's calls, because decoding (the hub's use) needs it as much
    as training, and the subnormal attention weights and coverage also reach code outside the model's forward
    pass (criterions, the beam search's scores, metrics).  It is logged when it changes the process's setting;
    ``torch.set_flush_denormal(False)`` after building turns it off again.  torch sets it on the calling thread
    only: with several intra-op threads, the other threads' share of an operation
    still computes with subnormals (a run with OMP_NUM_THREADS=1, as the experiment scripts use, gets it all)."""
    if not denormals_flushed() and torch.set_flush_denormal(True):
        logger.info("flush-to-zero on for this process: subnormal floats (< 1e-38) count as 0 on the CPU "
                    "(modules/factories.py; torch.set_flush_denormal(False) turns it off)")


def denormals_flushed() -> bool:
    """Whether this thread already flushes subnormals: a subnormal times 1 comes out as 0."""
    return (torch.tensor(1e-39) * 1.0).item() == 0.0


def add_embedding_args(parser, pretrained: bool = False) -> None:
    """The options ``build_embeddings`` reads: sizes and sharing; with ``pretrained``, files and freezing."""
    # fmt: off
    parser.add_argument("--encoder-embed-dim", type=int, metavar="N", help="encoder embedding dimension")
    parser.add_argument("--decoder-embed-dim", type=int, metavar="N", help="decoder embedding dimension")
    parser.add_argument("--share-all-embeddings", action="store_true",
                        help="one embedding matrix for encoder and decoder (joined dictionary)")
    if not pretrained:
        return
    parser.add_argument("--encoder-embed-path", type=str, metavar="FILE",
                        help="pretrained encoder embeddings (word2vec binary/text or GloVe text)")
    parser.add_argument("--decoder-embed-path", type=str, metavar="FILE", help="pretrained decoder embeddings")
    parser.add_argument("--embed-format", choices=["auto", "word2vec-binary", "word2vec-text", "glove"],
                        help="format of the embedding files (default: detected from the content)")
    parser.add_argument("--encoder-freeze-embed", action="store_true", help="keep encoder embeddings fixed")
    parser.add_argument("--decoder-freeze-embed", action="store_true", help="keep decoder embeddings fixed")
    # fmt: on


def common_defaults(args) -> None:
    """Defaults of the options every model of the project has (set ``args.dropout`` first): embedding sharing
    and the dropouts on the embeddings and on the recurrent outputs.  The pretrained-embedding options need no
    default: ``build_embeddings`` reads them only where a model has them."""
    args.share_decoder_input_output_embed = getattr(args, "share_decoder_input_output_embed", False)
    args.share_all_embeddings = getattr(args, "share_all_embeddings", False)
    args.dropout_in = getattr(args, "dropout_in", args.dropout)
    args.dropout_out = getattr(args, "dropout_out", args.dropout)


def build_embeddings(args, src_dict, tgt_dict) -> Tuple[nn.Embedding, nn.Embedding]:
    """(encoder_embed, decoder_embed) from a model's options; the same module twice with
    ``--share-all-embeddings``.

    Reads ``args.encoder_embed_dim``, ``args.decoder_embed_dim``, ``args.share_all_embeddings`` and, when the
    model has them, ``--encoder-embed-path`` / ``--decoder-embed-path`` (pretrained vectors; with shared
    embeddings the decoder's file serves when the encoder has none), ``--embed-format`` and
    ``--encoder-freeze-embed`` / ``--decoder-freeze-embed``.  Raises ValueError when sharing is asked for
    with two dictionaries or two embedding sizes."""
    share = args.share_all_embeddings
    if share and (src_dict != tgt_dict or args.encoder_embed_dim != args.decoder_embed_dim):
        raise ValueError("--share-all-embeddings needs a joined dictionary and equal embedding sizes")
    option = lambda name, default=None: getattr(args, name, default)  # noqa: E731  (options a model may lack)
    fmt = option("embed_format", "auto")
    encoder_path = option("encoder_embed_path") or (option("decoder_embed_path") if share else None)
    encoder_embed = PretrainedEmbedding(src_dict, args.encoder_embed_dim, encoder_path, fmt,
                                        trainable=not option("encoder_freeze_embed", False))
    if share:
        return encoder_embed, encoder_embed
    decoder_embed = PretrainedEmbedding(tgt_dict, args.decoder_embed_dim, option("decoder_embed_path"), fmt,
                                        trainable=not option("decoder_freeze_embed", False))
    return encoder_embed, decoder_embed

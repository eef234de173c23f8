"""Pretrained word embeddings in a model: the vectors of a word2vec or GloVe file (read by
``text/word_vectors.py``, whose docstring gives the formats and checks) copied into an embedding's rows.

Typical use, after the model built its embedding with ``Embedding(len(dictionary), dim, dictionary.pad())``::

    report = fill_embedding(embed_tokens, "w2v.bin", dictionary)   # rows of the words found are overwritten
    freeze(embed_tokens, trainable=False)                          # optional: keep them fixed during training

Only the regular words of the dictionary are filled: specials, ``<oov-K>`` markers, padding symbols and words the
file does not have keep the initialization the model gave them (the padding row stays zero).
"""
import logging
from typing import Tuple

import torch
import torch.nn as nn

from fairseq_plugins.text.word_vectors import CoverageReport, read_vectors

logger = logging.getLogger(__name__)


def load_pretrained(path, dictionary, embed_dim: int, fmt: str = "auto",
                    lowercase_fallback: bool = False) -> Tuple[torch.Tensor, torch.Tensor, CoverageReport]:
    """``text.word_vectors.read_vectors`` as tensors: (weights ``len(dictionary) x embed_dim``, the boolean mask
    of the rows filled, the report)."""
    weights, found, report = read_vectors(path, dictionary, embed_dim, fmt, lowercase_fallback)
    return torch.from_numpy(weights), torch.from_numpy(found), report


def fill_embedding(embedding: nn.Embedding, path, dictionary, fmt: str = "auto",
                   lowercase_fallback: bool = False) -> CoverageReport:
    """Overwrite, in place, the rows of ``embedding`` whose words ``path`` has; log and return the report.

    ``embedding`` must have ``len(dictionary)`` rows; its ``embedding_dim`` must equal the file's dimension.
    Every other row (specials, including the zero padding row, markers, words not in the file) is left as
    the caller initialized it.  The gradient setting of the weight is not changed (see :func:`freeze`).
    """
    if embedding.num_embeddings != len(dictionary.symbols):
        raise ValueError(f"the embedding has {embedding.num_embeddings} rows but the dictionary has "
                         f"{len(dictionary.symbols)} entries")
    weights, found, report = load_pretrained(path, dictionary, embedding.embedding_dim, fmt, lowercase_fallback)
    with torch.no_grad():
        rows = found.nonzero().squeeze(1)
        embedding.weight.index_copy_(0, rows.to(embedding.weight.device),
                                     weights[rows].to(embedding.weight.device, embedding.weight.dtype))
    logger.info("%s", report)
    return report


def freeze(embedding: nn.Module, trainable: bool = False) -> nn.Module:
    """Make the embedding weights fixed (``trainable=False``, the default) or trainable again; returns it.

    fairseq's trainer gives the optimizer only parameters with ``requires_grad``, so a frozen embedding is
    never updated.  All rows are frozen, including those of words the file did not have, and, when the
    decoder shares its input and output embeddings, the output projection too.
    """
    for param in embedding.parameters():
        param.requires_grad_(trainable)
    return embedding

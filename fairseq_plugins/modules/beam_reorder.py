"""Beam-search reordering that does not copy what all hypotheses of one document share.

fairseq's SequenceGenerator reorders the encoder output and the decoder's incremental state at *every* step
(``reorder_encoder_out``, ``reorder_incremental_state``), with ``new_order`` picking, for each row, the
hypothesis it continues.  Within a document the beam only shuffles rows that came from the same source, so
every tensor that depends on the source alone (encoder states, padding mask, projected attention keys) is
unchanged by it; copying them anyway was the largest cost of a pgn_lstm decoding step (B*beam x S x 2H and
B*beam x S x A per step).

Each such dictionary carries ``source_row`` (B: the source each row was computed from).  When reordering keeps
every row's source, the source-only tensors are returned as they are; when it does not (the initial
expansion to B*beam rows, finished documents leaving the batch) everything is reindexed.
"""
from typing import Dict, Iterable

import torch
from torch import Tensor

from fairseq_plugins.accelerated.step_gradient import select_rows

SOURCE_ROW = "source_row"


def source_rows(batch_size: int, device) -> Tensor:
    """The ``source_row`` entry of a fresh encoder output: row i comes from source i.  B."""
    return torch.arange(batch_size, device=device)


def reorder_rows(tensors: Dict[str, Tensor], new_order: Tensor, source_only: Iterable[str],
                 dims: Dict[str, int] = None) -> Dict[str, Tensor]:
    """``tensors`` with their batch dimension (0, or ``dims[key]``) indexed by ``new_order``, except the
    ``source_only`` entries when no row changes source (then they are the same tensors).

    ``tensors`` must contain ``source_row``; it is reordered like the rest.  Deciding between the two waits for
    the device once per call on a GPU (``torch.equal``, only when the row count is unchanged): a copy avoided is
    B*beam x S x 2H, and fairseq's beam search waits for the device several times per step anyway.  A tensor
    read at every step with gradient (``share_across_steps``) keeps one gradient buffer for its rows
    (``step_gradient.select_rows``)."""
    dims = dims or {}
    rows = tensors[SOURCE_ROW].index_select(0, new_order)  # B'
    keep = set(source_only) if torch.equal(rows, tensors[SOURCE_ROW]) else set()
    reordered = {
        key: value if key in keep else select_rows(value, new_order, dims.get(key, 0))
        for key, value in tensors.items() if key != SOURCE_ROW
    }
    reordered[SOURCE_ROW] = rows
    return reordered


def reorder_within_documents(tensors: Dict[str, Tensor], new_order: Tensor, source_only: Iterable[str],
                             dims: Dict[str, int] = None) -> Dict[str, Tensor]:
    """``reorder_rows`` for a ``new_order`` that the caller knows keeps every row within its document (a beam
    search step, generation/beam_search.py): the ``source_only`` entries and ``source_row`` stay as they are,
    and nothing is compared, so nothing waits for the device."""
    dims = dims or {}
    keep = set(source_only) | {SOURCE_ROW}
    return {key: value if key in keep else select_rows(value, new_order, dims.get(key, 0))
            for key, value in tensors.items()}

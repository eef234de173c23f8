"""A recurrent decoder's state between steps, kept as one dict of tensors in fairseq's incremental state.

fairseq decodes one token at a time (``incremental_state``) and reorders the state of every decoder at every
beam-search step.  ``StepStateDecoder`` does both for a decoder whose state is one dict, for example
``{"hidden": B x H, "context": B x C, "keys": B x S x A, "source_row": B}``; the forward pass reads it with
``load_state``, runs only ``new_tokens``, and writes it back with ``save_state``.  Without an incremental state
(training, scoring) the same code runs every step from the initial state.
"""
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
from fairseq.models import FairseqIncrementalDecoder
from torch import Tensor

from fairseq_plugins.accelerated.step_gradient import share_across_steps
from fairseq_plugins.modules import beam_reorder  # reorder_rows looked up at call time (tests can patch it)
from fairseq_plugins.modules.extended_vocabulary import MarkerAsUnk
from fairseq_plugins.modules.factories import Dropout

STATE_KEY = "state"


class StepStateDecoder(FairseqIncrementalDecoder):
    """An incremental decoder whose state between steps is one dict of tensors.

    A subclass implements ``initial_state(encoder_out)``, returning the dict, which must contain
    ``beam_reorder.SOURCE_ROW`` (copied from the encoder output), and may set:
        state_batch_dims: the entries whose batch dimension is not 0, e.g. ``{"hidden": 1}`` for L x B x H;
        state_source_only: the entries that depend on the source alone (e.g. the projected attention keys),
            which beam reordering leaves as they are while every row keeps its source (modules/beam_reorder.py).
    """

    state_batch_dims: Dict[str, int] = {}
    state_source_only: Tuple[str, ...] = ("keys",)

    def init_target_side(self, embed_tokens: nn.Embedding, num_regular: Optional[int], dropout_in: float,
                         dropout_out: float, max_positions: int) -> None:
        """The members every decoder of the project has: the target embeddings (``as_unk`` reads a per-document
        marker as ``<unk>``), the regular vocabulary size (the first marker's id; default: the whole
        dictionary), the input and output dropouts and the maximum target length."""
        self.num_regular = num_regular or len(self.dictionary)
        self.embed_tokens = embed_tokens
        self.as_unk = MarkerAsUnk(self.num_regular, self.dictionary.unk())
        self.dropout_in = Dropout(dropout_in)
        self.dropout_out = Dropout(dropout_out)
        self.max_target_positions = max_positions

    def max_positions(self):
        return self.max_target_positions

    def initial_state(self, encoder_out) -> Dict[str, Tensor]:
        raise NotImplementedError

    @staticmethod
    def new_tokens(prev_output_tokens: Tensor, incremental_state: Optional[dict]) -> Tensor:
        """The tokens to run: all of them (B x T), or the last one only (B x 1) when decoding incrementally."""
        return prev_output_tokens if incremental_state is None else prev_output_tokens[:, -1:]

    def load_state(self, encoder_out, incremental_state: Optional[dict]) -> Dict[str, Tensor]:
        """The state after the previous step: the saved one, or ``initial_state`` at the first step."""
        state = self.get_incremental_state(incremental_state, STATE_KEY) if incremental_state is not None else None
        return self.initial_state(encoder_out) if state is None else state

    def save_state(self, incremental_state: Optional[dict], state: Dict[str, Tensor]) -> None:
        """Keep ``state`` for the next step (nothing to do without an incremental state)."""
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, STATE_KEY, state)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Row i of the state becomes row new_order[i] of the old one (beam search)."""
        state = self.get_incremental_state(incremental_state, STATE_KEY)
        if state is None:
            return
        reordered = beam_reorder.reorder_rows(
            state, new_order, source_only=self.state_source_only, dims=self.state_batch_dims
        )
        for key in self.state_source_only:  # read at every step: with gradient, summed in one buffer again
            if key in reordered:
                reordered[key] = share_across_steps(reordered[key])
        self.set_incremental_state(incremental_state, STATE_KEY, reordered)

    def reorder_within_documents(self, incremental_state, new_order: Tensor):
        """``reorder_incremental_state`` for an order that keeps every row within its document (a step of
        generation/beam_search.py): the source-only entries stay as they are, without comparing rows."""
        state = self.get_incremental_state(incremental_state, STATE_KEY)
        if state is not None:
            reordered = beam_reorder.reorder_within_documents(
                state, new_order, source_only=self.state_source_only, dims=self.state_batch_dims)
            self.set_incremental_state(incremental_state, STATE_KEY, reordered)


def attention_memory(encoder_out: Dict[str, Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    """What every decoder step attends to: ``encoder_out["outputs"]`` (B x S x C) behind one gradient buffer for
    all steps (accelerated/step_gradient.py), and ``encoder_out["padding_mask"]`` (B x S, True at padding).

    The mask is returned even when nothing is padded: masking with an all-False mask changes no bit, while
    asking whether anything is padded (``padding_mask.any()`` in Python) would wait for the GPU at every
    decoding step; on the CPU the masking costs about what that test did."""
    values = share_across_steps(encoder_out["outputs"])  # B x S x C
    return values, encoder_out["padding_mask"]  # B x S x C, B x S


def stack_steps(steps: Dict[str, List[Tensor]]) -> Dict[str, Tensor]:
    """Per-step lists T x (B x D) -> B x T x D tensors, by key."""
    return {key: torch.stack(values, dim=1) for key, values in steps.items()}

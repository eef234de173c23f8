"""``pgn_lstm``: the pointer-generator network with coverage (See, Liu & Manning 2017, "Get To The Point").

Encoder: a bidirectional LSTM over word embeddings; its final states are reduced to the decoder's initial state.
Decoder, at each step t (equation numbers are the paper's):
    x_t    = W_x [y_{t-1}; h*_{t-1}] + b_x                    input feeding (the reference code's decoder input)
    s_t    = LSTM(x_t, s_{t-1})
    a^t    = attention(h, s_t, c^t)                          (See eqs 1/11, 2; modules/coverage_attention.py)
    h*_t   = sum_i a_i^t h_i                                  (See eq 3)
    P_vocab = softmax(V'(V [s_t; h*_t] + b) + b')             (See eq 4)
    p_gen  = sigmoid(w_h*^T h*_t + w_s^T s_t + w_x^T x_t + b)  (See eq 8; modules/copy_mixture.py)
    P(w)   = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t   (See eq 9)
    c^{t+1} = c^t + a^t                                       (See eq 10)
``--no-copy`` gives P(w) = P_vocab(w) (See eq 5) and ``--no-coverage`` drops the coverage term, so the plain
attentional baseline of the paper is the same code with two flags.  ``--no-coverage-attention`` keeps c^t
(accumulated as See eq 10 and exposed for the coverage loss) but leaves the w_c c_i^t term out of the attention,
See eq 1 instead of See eq 11: Shi et al. (2018) attend without coverage (Shi eq 4) while their loss has the coverage
term (Shi eqs 12-13); ``pgn_lstm_shi2018`` does so, ``--coverage-attention`` puts the term back.

The ``</s>`` that fairseq appends to every source is attended to but never copied (modules/copy_mixture.py):
See et al.'s sources have no stop token to copy.  Its attention is renormalised away (``--eos-attention
renormalise``, the default) or goes to the generation side (``generate``, a pointer sentinel).

Shi et al.'s normalization of the embeddings (``--embed-norm``, Shi eq 14) cites Ioffe & Szegedy's batch
normalization; it is layer normalization here, see modules/factories.py ``EmbeddingNorm`` for why.

Coverage as a second training phase (See et al. section 5: coverage added to a model trained without it): a
checkpoint trained with ``--no-coverage`` loads into a model with coverage, the coverage weight w_c (and only it)
keeping its fresh initialisation (zero: the attention starts as it was); ``configs/see2017_coverage_phase2.conf``.

Paulus, Xiong & Socher (2017), "A Deep Reinforced Model for Abstractive Summarization", as options (all on in
``pgn_lstm_paulus2017``), with h^e_i the encoder states and h^d_t the decoder states s_t:
    e_ti = h^d_t^T W^e_attn h^e_i, temporally normalised            (Paulus eqs 1-5; --intra-temporal-attention,
                                                                             modules/temporal_attention.py)
    c^d_t = sum_{t'<t} softmax_t'(h^d_t^T W^d_attn h^d_t') h^d_t'   (Paulus eqs 6-8; --intra-decoder-attention,
                                                                             modules/intra_decoder_attention.py)
    p(y_t | u_t = 0) = softmax(W_out [h^d_t; c^e_t; c^d_t] + b_out)  (Paulus eq 9; --decoder-readout paulus,
                                                                             modules/readouts.py)
    p(y_t = x_i | u_t = 1) = a^e_ti                                   (Paulus eq 10: the temporal attention is copied)
    p(u_t = 1) = sigmoid(W_u [h^d_t; c^e_t; c^d_t] + b_u)             (Paulus eq 11: COPY; p_gen = 1 - p(u_t = 1))
    P(y_t) = Paulus eq 12, the copy mixture above (See eq 9)
    W_out = tanh(W_emb W_proj)                                        (Paulus eq 13; --shared-output-projection,
                                                                             modules/shared_projection.py)
The decoder reads only the previous word's embedding (the Paulus readout feeds nothing back), so the decoder LSTM
runs over all steps in one call and both Paulus attentions over all steps at once in training; incremental
decoding runs one step of each (the same numbers).  The options combine with the others: the temporal attention
with the See or Luong readout (then inside the per-step loop) and with the coverage loss (--no-coverage-attention:
its coverage is the sum of the temporal attentions), the intra-decoder context with every readout (it follows the
encoder context), the shared projection with every readout; the temporal attention with the coverage attention,
and the shared projection with --share-decoder-input-output-embed, stop at start-up.  ``--own-prediction-prob
0.25`` feeds the model's own previous prediction in ML training as the paper does (section 6.1), step by step.

With input feeding, only the recurrent part (LSTM cell, attention, context) runs inside the per-step loop; the
projections that do not feed back (P_vocab, p_gen) run once over all steps afterwards.

The decoder's first output is the P_vocab *logits* over the regular vocabulary; ``get_normalized_probs`` turns
them, with the attention and p_gen kept in the second output, into See eq 9 over the extended vocabulary (regular
words + per-document OOV markers, see fairseq_plugins/text/markers.py).  Marker ids are embedded as ``<unk>``.
"""
import contextlib
import logging
from dataclasses import dataclass
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq import utils
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, register_model, register_model_architecture

from fairseq_plugins.accelerated.fused_steps import Memory, StepWeights, fused_steps
from fairseq_plugins.accelerated.step_graphs import GraphCache, graphed_steps
from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.copy_mixture import DEFAULT_EOS_ATTENTION, add_eos_attention_arg, eos_attention_of
from fairseq_plugins.modules.coverage_attention import CoverageAttention
from fairseq_plugins.modules.extended_vocabulary import ExtendedVocabularyModel, ExtendedVocabularyOutput, MarkerAsUnk
from fairseq_plugins.modules.factories import (
    Dropout,
    EmbeddingNorm,
    LSTM,
    LSTMCell,
    Linear,
    add_embedding_args,
    build_embeddings,
    common_defaults,
    flush_denormals,
    rnn_precision,
)
from fairseq_plugins.modules.intra_decoder_attention import IntraDecoderAttention
from fairseq_plugins.modules.readouts import SeeReadout, build_readout, readout_feeds_back
from fairseq_plugins.modules.shared_projection import SharedOutputProjection
from fairseq_plugins.modules.step_state import StepStateDecoder, attention_memory, stack_steps
from fairseq_plugins.modules.temporal_attention import IntraTemporalAttention
from fairseq_plugins.modules.temporal_attention import KEYS as TEMPORAL_KEYS
from fairseq_plugins.text.markers import first_marker_index

logger = logging.getLogger(__name__)

DEFAULT_MAX_POSITIONS = int(1e5)
MAX_LENGTH_GROUPS = 16  # the encoder runs one plain LSTM call per distinct source length up to this many


class PGNEncoder(FairseqEncoder):
    """Bidirectional LSTM encoder.

    Returns a dict with batch-first tensors (the decoder attends batch-first):
        outputs: B x S x 2H, padding_mask: B x S (True at padding), src_tokens: B x S (right-padded),
        final_hidden / final_cell: B x 2H (top layer, forward and backward final states).
    """

    def __init__(self, dictionary, embed_tokens, hidden_size=256, num_layers=1, dropout_in=0.0, dropout_out=0.0,
                 num_regular=None, embed_norm=False, max_positions=DEFAULT_MAX_POSITIONS):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.embed_tokens = embed_tokens
        self.embed_norm = EmbeddingNorm(embed_tokens.embedding_dim, embed_norm)
        self.as_unk = MarkerAsUnk(num_regular or len(dictionary), dictionary.unk())
        self.dropout_in = Dropout(dropout_in)
        self.dropout_out = Dropout(dropout_out)
        self.lstm = LSTM(embed_tokens.embedding_dim, hidden_size, num_layers, bidirectional=True, dropout=dropout_out)
        self.output_units = 2 * hidden_size
        self.max_source_positions = max_positions

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, **unused):
        # Padding may be on the left (fairseq's default for sources); the LSTM and the copy scatter want it on
        # the right, with positions that line up with the attention.
        src_tokens = utils.convert_padding_direction(src_tokens, self.padding_idx, left_to_right=True)
        x = self.dropout_in(self.embed_norm(self.embed_tokens(self.as_unk(src_tokens))))  # B x S x E
        outputs, (h_n, c_n) = self.run_lstm(x, src_lengths)  # B x S x 2H; h_n, c_n: (layers*2) x B x H
        outputs = self.dropout_out(outputs)  # B x S x 2H
        return {
            "outputs": outputs,
            "padding_mask": src_tokens.eq(self.padding_idx),  # B x S
            "src_tokens": src_tokens,  # B x S
            "final_hidden": torch.cat([h_n[-2], h_n[-1]], dim=1),  # B x 2H
            "final_cell": torch.cat([c_n[-2], c_n[-1]], dim=1),  # B x 2H
            SOURCE_ROW: source_rows(src_tokens.size(0), src_tokens.device),  # B
        }

    def run_lstm(self, x: Tensor, src_lengths: Tensor):
        """The BiLSTM over right-padded x (B x S x E), each document over its own length.

        Returns outputs B x S x 2H (zero at padding) and the final (h, c), each (layers*2) x B x H.  On a CPU a
        PackedSequence is slow to train, its backward pass allocating a tokens x 4H tensor per time step
        (docs/design.md).  So
        the documents of each length run together as a plain tensor: one call when no document is padded (the
        usual case, fairseq batches documents of similar length), one per length up to
        ``MAX_LENGTH_GROUPS``, and a PackedSequence beyond that.  On a GPU a PackedSequence is one cuDNN call
        (each plain call is one too): it is used whenever the lengths differ."""
        with rnn_precision(x):
            return self.run_length_groups(x, src_lengths)

    def run_length_groups(self, x: Tensor, src_lengths: Tensor):
        lengths = src_lengths.tolist()
        distinct = sorted(set(lengths), reverse=True)
        if len(distinct) == 1 and distinct[0] == x.size(1):
            return self.lstm(x)
        if len(distinct) > (MAX_LENGTH_GROUPS if x.device.type == "cpu" else 1):
            packed = nn.utils.rnn.pack_padded_sequence(x, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
            packed_out, final = self.lstm(packed)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=x.size(1))
            return outputs, final
        rows = [torch.tensor([i for i, n in enumerate(lengths) if n == length], device=x.device)
                for length in distinct]
        runs = [self.lstm(x[group, :length]) for group, length in zip(rows, distinct)]
        restore = torch.argsort(torch.cat(rows))  # B: position of each document among the groups
        outputs = torch.cat([F.pad(out, (0, 0, 0, x.size(1) - length)) for (out, _), length in zip(runs, distinct)])
        hidden = torch.cat([h for _, (h, _) in runs], dim=1)  # (layers*2) x B x H, group order
        cell = torch.cat([c for _, (_, c) in runs], dim=1)
        return outputs.index_select(0, restore), (hidden.index_select(1, restore), cell.index_select(1, restore))

    def reorder_encoder_out(self, encoder_out: Dict[str, Tensor], new_order: Tensor):
        return reorder_rows(encoder_out, new_order, source_only=encoder_out.keys())  # modules/beam_reorder.py

    def max_positions(self):
        return self.max_source_positions


@dataclass(frozen=True)
class AttentionOptions:
    """How a ``PGNDecoder`` attends.

    Args:
        attention_dim: size inside the additive attention's tanh.
        coverage: accumulate the coverage c^t (See eq 10) and expose it for the coverage loss.
        coverage_attention: with coverage, attend with it (See eq 11); without, See eq 1.
        intra_temporal: Paulus et al.'s intra-temporal attention (Paulus eqs 1-5) instead of the additive one.
        intra_decoder: Paulus et al.'s intra-decoder attention (Paulus eqs 6-8); its context c^d_t follows the
            encoder context wherever the readout reads one.
    """

    attention_dim: int = 512
    coverage: bool = True
    coverage_attention: bool = True
    intra_temporal: bool = False
    intra_decoder: bool = False


@dataclass(frozen=True)
class OutputOptions:
    """What a ``PGNDecoder`` makes of its steps.

    Args:
        readout: "see" (See eqs 4, 8), "luong" (Shi eqs 3, 7, 9) or "paulus" (Paulus eqs 9, 11):
            modules/readouts.py.
        out_embed_dim: size of V's output in See eq 4 (See readout).
        copy: produce See eq 9 (pointer-generator) instead of See eq 5.
        eos_attention: where the copy side puts the attention on the source's ``</s>`` (modules/copy_mixture.py).
        share_input_output_embed: V' of See eq 4 is the (regular part of the) embedding matrix.
        shared_output_projection: the output matrix is tanh(W_emb W_proj) (Paulus eq 13).
    """

    readout: str = "see"
    out_embed_dim: int = 256
    copy: bool = True
    eos_attention: str = DEFAULT_EOS_ATTENTION
    share_input_output_embed: bool = False
    shared_output_projection: bool = False


class PGNDecoder(StepStateDecoder):
    """What pgn_lstm's decoders share: an LSTM decoder with an attention over the source (See et al.'s additive
    one, with or without coverage, or Paulus et al.'s intra-temporal one), optionally Paulus et al.'s intra-decoder
    attention, a readout and a copy switch.  The recurrence is a subclass's, chosen by the readout
    (``build_decoder``): ``FedDecoder`` when the readout feeds a vector back into the next input (See, Luong),
    ``UnfedDecoder`` when it does not (Paulus).

    Returns the P_vocab logits B x T x V_reg and ``extra``: attn [B x T x S] (a^t), src_tokens B x S (right-padded),
    decoder_states B x T x H (s_t of the top LSTM layer), coverage B x T x S (c^t before step t; with coverage)
    and p_gen, p_gen_logit B x T x 1 (with copy).  ``extended_output`` turns them into P(w) (See eq 9 or See eq 5).

    Args:
        dictionary: target dictionary (extended vocabulary: regular words, then OOV markers).
        embed_tokens: target embeddings (may be shared with the encoder).
        encoder_output_units: size of an encoder state (2 x encoder hidden size).
        hidden_size: decoder LSTM size; num_layers: stacked LSTM layers (attention reads the top one).
        attention: ``AttentionOptions``; output: ``OutputOptions``.
        embed_norm: normalize the embeddings before the LSTM (Shi eq 14).
        own_prediction_prob: in training, the probability of reading the model's own previous prediction instead
            of the reference word (Paulus et al. section 6.1; 0 = teacher forcing).
        num_regular: size of the regular vocabulary (index of the first OOV marker).
    """

    FEEDS_BACK: bool  # whether the subclass's recurrence is for a readout that feeds back

    def __init__(self, dictionary, embed_tokens, encoder_output_units=512, hidden_size=256, num_layers=1,
                 attention=AttentionOptions(), output=OutputOptions(), dropout_in=0.0, dropout_out=0.0,
                 embed_norm=False, num_regular=None, own_prediction_prob=0.0, max_positions=DEFAULT_MAX_POSITIONS):
        super().__init__(dictionary)
        check_options(attention.coverage and attention.coverage_attention, attention.intra_temporal,
                      output.share_input_output_embed, output.shared_output_projection)
        embed_dim = embed_tokens.embedding_dim
        self.init_target_side(embed_tokens, num_regular, dropout_in, dropout_out, max_positions)
        self.embed_norm = EmbeddingNorm(embed_dim, embed_norm)
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.copy = output.copy
        self.coverage = attention.coverage
        self.coverage_attention = attention.coverage and attention.coverage_attention
        if not 0.0 <= own_prediction_prob <= 1.0:
            raise ValueError(f"--own-prediction-prob must be in [0, 1], not {own_prediction_prob}")
        self.own_prediction_prob = own_prediction_prob

        # Initial state from the encoder's final states (the reference code's "reduce states").
        self.reduce_hidden = Linear(encoder_output_units, hidden_size)
        self.reduce_cell = Linear(encoder_output_units, hidden_size)
        context_size = encoder_output_units + (hidden_size if attention.intra_decoder else 0)  # [c^e_t; c^d_t]
        self.readout = build_readout(output.readout, hidden_size, context_size, embed_dim, output.out_embed_dim,
                                     output.copy)
        self.feeds_back = self.readout.feed_size > 0
        if self.feeds_back != self.FEEDS_BACK:
            raise ValueError(f"{type(self).__name__} does not run the {output.readout} readout (build_decoder)")
        self.build_recurrence(embed_dim, dropout_out)
        if attention.intra_temporal:
            self.attention = IntraTemporalAttention(encoder_output_units, hidden_size)  # W^e_attn   (Paulus eqs 1-5)
        else:
            self.attention = CoverageAttention(encoder_output_units, hidden_size, attention.attention_dim,
                                               coverage=self.coverage_attention)
        self.intra_temporal = attention.intra_temporal
        # W^d_attn (Paulus eqs 6-8)
        self.intra_attention = IntraDecoderAttention(hidden_size) if attention.intra_decoder else None
        self.share_input_output_embed = output.share_input_output_embed
        self.build_output_layer(embed_tokens, output)
        self.extended_output = ExtendedVocabularyOutput(self.num_regular, len(dictionary), dictionary.unk(),
                                                        output.copy, eos=dictionary.eos(),
                                                        eos_attention=output.eos_attention)

    def build_recurrence(self, embed_dim: int, dropout_out: float) -> None:
        """The subclass's LSTM modules."""
        raise NotImplementedError

    def build_output_layer(self, embed_tokens, output: OutputOptions) -> None:
        """V' (See eq 4) / W_vocab (Shi eq 7), tanh(W_emb W_proj) (Paulus eq 13), or the embeddings themselves."""
        if output.share_input_output_embed:
            if self.readout.out_dim != embed_tokens.embedding_dim:
                raise ValueError("--share-decoder-input-output-embed needs the readout size (See: "
                                 "--decoder-out-embed-dim, Luong: --decoder-hidden-size) equal to the embedding size")
        elif output.shared_output_projection:  # W_out = tanh(W_emb W_proj)   (Paulus eq 13)
            self.output_projection = SharedOutputProjection(embed_tokens, self.readout.out_dim, self.num_regular)
        else:
            self.output_projection = Linear(self.readout.out_dim, self.num_regular)

    # ------------------------------------------------------------------ recurrent part
    state_batch_dims = {"hidden": 1, "cell": 1}  # L x B x H; every other entry of the state is batch-first
    state_source_only = ("keys", TEMPORAL_KEYS)  # projected attention keys (additive or intra-temporal)

    def initial_state(self, encoder_out: Dict[str, Tensor]) -> Dict[str, Tensor]:
        bsz, src_len, enc_dim = encoder_out["outputs"].size()
        hidden = F.relu(self.reduce_hidden(encoder_out["final_hidden"]))  # B x H
        cell = F.relu(self.reduce_cell(encoder_out["final_cell"]))  # B x H
        zeros = encoder_out["outputs"].new_zeros
        state = {
            "hidden": torch.stack([hidden] * self.num_layers),  # L x B x H
            "cell": torch.stack([cell] * self.num_layers),  # L x B x H
            "feed": zeros(bsz, self.readout.feed_size),  # B x F   (h*_{t-1} or h~_{t-1}; B x 0 without feeding)
            "coverage": zeros(bsz, src_len),  # B x S   (c^t)
            SOURCE_ROW: encoder_out[SOURCE_ROW],  # B   (which source each row's keys come from)
        }
        keys = self.attention.project_keys(encoder_out["outputs"])  # B x S x A (additive) or x H (temporal)
        if self.intra_temporal:
            state.update(self.attention.initial_state(keys, state[SOURCE_ROW]))  # keys, L_0, step counts
        else:
            state["keys"] = keys
        if self.intra_attention is not None:
            state.update(self.intra_attention.initial_state(hidden, state[SOURCE_ROW]))  # past states: B x 0 x H
        return state

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None):
        """Runs the recurrence.  Returns, each B x T x D: decoder states s_t, contexts (h*_t, or [c^e_t; c^d_t]),
        fed-back vectors, LSTM inputs x_t, attention a^t and coverage c^t (the last two B x T x S)."""
        state = self.load_state(encoder_out, incremental_state)
        prev_output_tokens = self.new_tokens(prev_output_tokens, incremental_state)  # B x T (B x 1 incrementally)
        values, padding_mask = attention_memory(encoder_out)  # B x S x C, B x S (True at padding)
        embedded = self.embed_norm(self.embed_tokens(self.as_unk(prev_output_tokens)))  # B x T x E
        steps, state = self.run(embedded, state, values, padding_mask, incremental_state is None)
        self.save_state(incremental_state, state)
        return steps  # each B x T x D

    def run(self, embedded, state, values, padding_mask, whole_sequence: bool):
        """The subclass's recurrence over the steps of ``embedded`` (B x T x E; ``whole_sequence``: not
        incremental).  Returns the steps (each B x T x D, as ``extract_features``) and the new state."""
        raise NotImplementedError

    def attend(self, query, values, state, padding_mask):
        """One step of the attention over the source, for the decoder state ``query`` (B x H).  Returns the
        attention a^t (B x S), the context (B x C) and the state with the coverage c^{t+1} (See eq 10)."""
        if self.intra_temporal:
            attn, context, state = self.attention.step(query, values, state, padding_mask)  # Paulus eqs 1-5
        else:
            # See eqs 1-3/11
            attn, context = self.attention(state["keys"], values, query, state["coverage"], padding_mask)
        if self.coverage:
            state = dict(state, coverage=state["coverage"] + attn)  # c^{t+1} = c^t + a^t   (See eq 10)
        return attn, context, state

    # ------------------------------------------------------------------ output part (outside the loop)
    def forward(self, prev_output_tokens, encoder_out, incremental_state=None, **unused):
        if self.training and self.own_prediction_prob > 0 and incremental_state is None:
            return self.forward_with_own_predictions(prev_output_tokens, encoder_out)
        steps = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        readout_inputs = (steps["states"], steps["contexts"], steps["feeds"], steps["inputs"])
        features = self.dropout_out(self.readout.features(*readout_inputs))  # B x T x out_dim
        logits = self.output_layer(features)  # B x T x V_reg   (See eq 4 / Shi eq 7 / Paulus eq 9, before softmax)
        extra = {"attn": [steps["attn"]], "src_tokens": encoder_out["src_tokens"], "decoder_states": steps["states"]}
        if self.coverage:
            extra["coverage"] = steps["coverage"]
        if self.copy:
            extra["p_gen_logit"] = self.readout.switch_logit(*readout_inputs)  # B x T x 1
            extra["p_gen"] = torch.sigmoid(extra["p_gen_logit"])  # B x T x 1   (See eq 8 / Shi eq 9)
        return logits, extra

    def forward_with_own_predictions(self, prev_output_tokens, encoder_out):
        """Training with the model's own previous prediction as the next input with probability
        ``own_prediction_prob`` (Paulus et al. section 6.1: 0.25), step by step through the incremental state.
        The prediction is the most probable word of the extended vocabulary (a copied marker is then read as
        ``<unk>``, as every marker is), drawn independently for every row and step; the first input is </s>."""
        incremental_state, outputs = {}, []
        inputs = prev_output_tokens[:, :1]  # B x 1
        with self.output_matrix_held():  # one W_out for all the steps (Paulus eq 13)
            for t in range(prev_output_tokens.size(1)):
                if t > 0:
                    with torch.no_grad():
                        predicted = self.extended_output.probs(outputs[-1], log_probs=True)[:, -1].argmax(dim=-1)  # B
                    own = torch.rand(predicted.shape, device=predicted.device) < self.own_prediction_prob  # B
                    word = torch.where(own, predicted, prev_output_tokens[:, t])  # B
                    inputs = torch.cat([inputs, word.unsqueeze(1)], dim=1)  # B x (t+1)
                outputs.append(self.forward(inputs, encoder_out, incremental_state=incremental_state))
        extras = [extra for _, extra in outputs]
        extra = {key: torch.cat([e[key] for e in extras], dim=1)
                 for key in extras[0] if torch.is_tensor(extras[0][key])}
        extra.update(attn=[torch.cat([e["attn"][0] for e in extras], dim=1)], src_tokens=extras[0]["src_tokens"])
        return torch.cat([logits for logits, _ in outputs], dim=1), extra  # B x T x V_reg, as ``forward``

    def output_matrix_held(self):
        """A block within which the tied output matrix of Paulus et al. (Paulus eq 13) is computed once (a no-op for
        the other output layers, whose weight is a parameter)."""
        if isinstance(getattr(self, "output_projection", None), SharedOutputProjection):
            return self.output_projection.held()
        return contextlib.nullcontext()

    def output_layer(self, features: Tensor) -> Tensor:
        if self.share_input_output_embed:
            return F.linear(features, self.embed_tokens.weight[: self.num_regular])
        return self.output_projection(features)


class FedDecoder(PGNDecoder):
    """A ``PGNDecoder`` whose readout feeds a vector back into the next input (See's h*_t, Luong's h~_t): the
    next input depends on this step's attention, so the steps run in a loop with LSTM cells; with See et al.'s
    decoder (See readout, one layer, additive attention), as one function through accelerated/fused_steps.py, the
    same numbers in fewer operations.

    Args (after ``PGNDecoder``'s):
        fused_steps: run See et al.'s recurrence as that one function where it applies.
        cuda_graphs: on a GPU, replay that function's training passes as CUDA graphs (accelerated/step_graphs.py).
    """

    FEEDS_BACK = True

    def __init__(self, *args, fused_steps=True, cuda_graphs=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fused = (fused_steps and isinstance(self.readout, SeeReadout) and self.num_layers == 1
                      and not self.intra_temporal and self.intra_attention is None)
        if cuda_graphs and not self.fused:
            raise ValueError(CUDA_GRAPHS_NEED)
        self.step_graphs = GraphCache() if cuda_graphs else None  # not a module: no weights, nothing saved

    def build_recurrence(self, embed_dim: int, dropout_out: float) -> None:
        # Input feeding: x_t = W_x [y_{t-1}; feed_{t-1}] + b_x, split so the embedding part runs outside the loop.
        self.input_from_embed = Linear(embed_dim, embed_dim)
        self.input_from_feed = Linear(self.readout.feed_size, embed_dim, bias=False)
        self.layers = nn.ModuleList(
            [LSTMCell(embed_dim if i == 0 else self.hidden_size, self.hidden_size) for i in range(self.num_layers)]
        )

    def run(self, embedded, state, values, padding_mask, whole_sequence: bool):
        if self.fused and self.float_step_modules():
            return self.run_fused_steps(embedded, state, values, padding_mask)
        return self.run_steps(embedded, state, values, padding_mask)

    def run_steps(self, embedded, state, values, padding_mask):
        """The loop over the steps, with input feeding.  Returns the steps (each B x T x D) and the new state."""
        embedded_part = self.input_from_embed(self.dropout_in(embedded))  # B x T x E
        hidden = list(state["hidden"].unbind(0))  # L x (B x H)
        cell = list(state["cell"].unbind(0))
        feed = state["feed"]
        steps = {key: [] for key in ("states", "contexts", "feeds", "inputs", "attn", "coverage")}
        for t in range(embedded.size(1)):
            x = embedded_part[:, t] + self.input_from_feed(feed)  # B x E   (input feeding)
            layer_input = x
            for i, lstm in enumerate(self.layers):
                hidden[i], cell[i] = lstm(layer_input, (hidden[i], cell[i]))
                layer_input = self.dropout_out(hidden[i]) if i + 1 < len(self.layers) else hidden[i]
            coverage = state["coverage"]  # B x S   c^t, *before* step t (See eq 10)
            attn, context, state = self.attend(hidden[-1], values, state, padding_mask)
            if self.intra_attention is not None:
                # B x H   c^d_t (Paulus eqs 6-8)
                _, decoder_context, state = self.intra_attention.step(hidden[-1], state)
                context = torch.cat([context, decoder_context], dim=1)  # B x C   [c^e_t; c^d_t]
            feed = self.readout.feed(hidden[-1], context)  # B x F
            for key, value in zip(steps, (hidden[-1], context, feed, x, attn, coverage)):
                steps[key].append(value)
        state = dict(state, hidden=torch.stack(hidden), cell=torch.stack(cell), feed=feed)
        return stack_steps(steps), state

    def float_step_modules(self) -> bool:
        """Whether the modules whose weights the fused recurrence reads are torch's float ones (an int8 model,
        generate.sh --quantize int8, has quantized ones and runs module by module)."""
        return (isinstance(self.layers[0], nn.LSTMCell) and isinstance(self.input_from_feed, nn.Linear)
                and isinstance(self.attention.query_proj, nn.Linear) and isinstance(self.attention.v, nn.Linear))

    def run_fused_steps(self, embedded, state, values, padding_mask):
        """``run_steps`` for See et al.'s decoder (See readout, one layer, additive attention) through
        accelerated/fused_steps.py: the same numbers in fewer operations per step."""
        embedded_part = self.input_from_embed(self.dropout_in(embedded))  # B x T x E
        cell = self.layers[0]
        one_step = embedded.size(1) == 1  # incremental decoding: x_1 is known before the loop
        inputs = embedded_part + self.input_from_feed(state["feed"]).unsqueeze(1) if one_step else embedded_part
        gates_x = F.linear(inputs, cell.weight_ih, cell.bias_ih + cell.bias_hh)  # B x T x 4H   (G, or z_1 - W_hh s_0)
        weights = StepWeights(
            feed=None if one_step else torch.mm(cell.weight_ih, self.input_from_feed.weight),  # 4H x F   W_ih W_x,h*
            hidden=cell.weight_hh, query=self.attention.query_proj.weight, coverage=self.attention.coverage_weight,
            v=self.attention.v.weight.view(-1),
        )
        start = [state["hidden"][0], state["cell"][0], state["feed"], state["coverage"]]
        memory = Memory(state["keys"], values, padding_mask)
        graphs = self.step_graphs is not None and self.step_graphs.takes(gates_x, weights)
        states, contexts, attn, coverage, last_cell, last_coverage = (
            graphed_steps(self.step_graphs, gates_x, weights, memory, start, accumulate=self.coverage) if graphs
            else fused_steps(gates_x, weights, memory, start, accumulate=self.coverage))
        if not one_step:
            fed = torch.cat([state["feed"].unsqueeze(1).to(contexts.dtype), contexts[:, :-1]], dim=1)  # h*_{t-1}
            inputs = embedded_part + self.input_from_feed(fed)  # B x T x E   x_t (the switch reads it, See eq 8)
        last_state = states.transpose(0, 1) if one_step else states[:, -1:].transpose(0, 1)  # 1 x B x H
        state = dict(state, hidden=last_state, cell=last_cell.unsqueeze(0),
                     feed=contexts[:, -1], coverage=last_coverage)
        steps = {"states": states, "contexts": contexts, "feeds": contexts, "inputs": inputs, "attn": attn,
                 "coverage": coverage}
        return steps, state


class UnfedDecoder(PGNDecoder):
    """A ``PGNDecoder`` whose readout feeds nothing back (Paulus): the input is the previous word's embedding
    alone, so the LSTM runs over all steps in one call, then the attentions (in training the intra-temporal and
    intra-decoder ones over all steps at once, their ``forward``; the additive one step by step over the known
    states; in incremental decoding one step of each)."""

    FEEDS_BACK = False
    fused = False  # accelerated/fused_steps.py is See et al.'s (fed) recurrence
    step_graphs = None

    def build_recurrence(self, embed_dim: int, dropout_out: float) -> None:
        self.lstm = LSTM(embed_dim, self.hidden_size, self.num_layers, dropout=dropout_out)

    def run(self, embedded, state, values, padding_mask, whole_sequence: bool):
        return self.run_all_steps(embedded, state, values, padding_mask, whole_sequence)

    def run_all_steps(self, embedded, state, values, padding_mask, whole_sequence: bool):
        """Without input feeding: the LSTM over all steps in one call, then the attentions (``whole_sequence``:
        in training, the intra-temporal and intra-decoder attentions over all steps at once).  Returns the steps
        (each B x T x D) and the new state."""
        inputs = self.dropout_in(embedded)  # B x T x E   (x_t = the previous word's embedding)
        with rnn_precision(inputs):
            states, (hidden, cell) = self.lstm(inputs, (state["hidden"], state["cell"]))  # B x T x H; L x B x H
        state = dict(state, hidden=hidden, cell=cell)
        if whole_sequence and self.intra_temporal:
            coverage = state["coverage"]  # B x S   c^1 (zeros)
            attn, context, temporal_state = self.attention(states, state[TEMPORAL_KEYS], values, padding_mask)
            state.update(temporal_state)  # L_T, step counts   (Paulus eqs 1-5 for all steps)
            before = F.pad(attn.cumsum(dim=1)[:, :-1], (0, 0, 1, 0))  # B x T x S   sum_{t' < t} a^t'
            steps = {"attn": attn, "contexts": context, "coverage": coverage.unsqueeze(1) + before}  # See eq 10
            if self.coverage:
                state["coverage"] = coverage + attn.sum(dim=1)  # B x S   c^{T+1}
        else:  # step by step over the known states (additive attention; incremental decoding)
            steps = {key: [] for key in ("attn", "contexts", "coverage")}
            for t in range(states.size(1)):
                steps["coverage"].append(state["coverage"])  # B x S   c^t, before step t (See eq 10)
                attn, context, state = self.attend(states[:, t], values, state, padding_mask)
                steps["attn"].append(attn)
                steps["contexts"].append(context)
            steps = stack_steps(steps)
        if self.intra_attention is not None:
            if whole_sequence:
                _, decoder_context = self.intra_attention(states)  # B x T x H   c^d_t (Paulus eqs 6-8, causal)
            else:
                decoder_context = []
                for t in range(states.size(1)):
                    _, context, state = self.intra_attention.step(states[:, t], state)  # B x H
                    decoder_context.append(context)
                decoder_context = torch.stack(decoder_context, dim=1)  # B x T x H
            steps["contexts"] = torch.cat([steps["contexts"], decoder_context], dim=2)  # [c^e_t; c^d_t]
        feeds = states.new_zeros(*states.shape[:2], 0)  # B x T x 0: nothing is fed back
        return dict(steps, states=states, feeds=feeds, inputs=inputs), state


CUDA_GRAPHS_NEED = ("--cuda-graphs replays the fused recurrence, which this decoder does not run (it needs See "
                    "et al.'s readout, one decoder layer, the additive attention and no --no-fused-steps)")


def build_decoder(dictionary, embed_tokens, *, output: OutputOptions, fused_steps: bool = True,
                  cuda_graphs: bool = False, **options) -> PGNDecoder:
    """The decoder for ``output.readout``: ``FedDecoder`` (see, luong) with ``fused_steps`` and ``cuda_graphs``,
    or ``UnfedDecoder`` (paulus); ``options`` are ``PGNDecoder``'s."""
    if readout_feeds_back(output.readout):
        return FedDecoder(dictionary, embed_tokens, output=output, fused_steps=fused_steps, cuda_graphs=cuda_graphs,
                          **options)
    if cuda_graphs:
        raise ValueError(CUDA_GRAPHS_NEED)
    return UnfedDecoder(dictionary, embed_tokens, output=output, **options)


def check_options(coverage_attention: bool, intra_temporal: bool, share_input_output_embed: bool,
                  shared_output_projection: bool) -> None:
    """Options that do not combine, named as on the command line."""
    if intra_temporal and coverage_attention:
        raise ValueError("--intra-temporal-attention and --coverage-attention do not combine: the intra-temporal "
                         "attention replaces the coverage attention (add --no-coverage-attention to keep the "
                         "coverage loss, or --no-coverage)")
    if share_input_output_embed and shared_output_projection:
        raise ValueError("--share-decoder-input-output-embed and --shared-output-projection do not combine: each "
                         "ties the output layer to the embeddings (Paulus eq 13 through a projection, the other "
                         "directly)")


@register_model("pgn_lstm")
class PGNLSTMModel(ExtendedVocabularyModel, FairseqEncoderDecoderModel):
    """Pointer-generator with coverage.  See the module docstring for the equations."""

    # What a model trained with --no-coverage lacks and coverage as a second phase adds (See et al. section 5)
    COVERAGE_PARAMETERS = ("decoder.attention.coverage_weight",)

    def upgrade_state_dict_named(self, state_dict, name):
        """Before a checkpoint is loaded (fairseq calls this from ``load_state_dict``): the coverage parameters
        a checkpoint trained with ``--no-coverage`` lacks keep this model's fresh initialisation, and say so.
        Only those: any other missing or unexpected parameter still fails the (strict) load."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = f"{name}." if name else ""
        fresh = self.state_dict()
        added = [key for key in self.COVERAGE_PARAMETERS if key in fresh and prefix + key not in state_dict]
        if added and len(state_dict) > 0:
            for key in added:
                state_dict[prefix + key] = fresh[key]
            logger.warning("pgn_lstm: the checkpoint has no coverage parameters (trained with --no-coverage): "
                           "newly initialised %s (coverage as a second training phase)", ", ".join(added))

    @staticmethod
    def add_args(parser):
        # fmt: off
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
        parser.add_argument("--encoder-hidden-size", type=int, metavar="N",
                            help="encoder LSTM size per direction (states are 2N)")
        parser.add_argument("--encoder-layers", type=int, metavar="N", help="number of encoder layers")
        parser.add_argument("--decoder-hidden-size", type=int, metavar="N", help="decoder LSTM size")
        parser.add_argument("--decoder-layers", type=int, metavar="N", help="number of decoder layers")
        parser.add_argument("--decoder-out-embed-dim", type=int, metavar="N", help="size of V's output (See eq 4)")
        parser.add_argument("--attention-dim", type=int, metavar="N",
                            help="size inside the attention tanh (default: the decoder hidden size; "
                                 "pgn_lstm_see2017: the encoder state size, 2 x encoder hidden)")
        parser.add_argument("--no-copy", action="store_true",
                            help="no pointer: P(w) = P_vocab(w) (the paper's attention baseline)")
        parser.add_argument("--copy", dest="no_copy", action="store_false", default=False,
                            help="the pointer (the default): P(w) = See eq 9")
        add_eos_attention_arg(parser)
        parser.add_argument("--no-coverage", action="store_true",
                            help="no coverage vector: neither in the attention nor for the coverage loss")
        parser.add_argument("--no-coverage-attention", dest="no_coverage_attention", action="store_true",
                            help="keep the coverage vector for the coverage loss but attend without it (See eq 1, "
                                 "not See eq 11): Shi eq 4; the default of pgn_lstm_shi2018")
        parser.add_argument("--coverage-attention", dest="no_coverage_attention", action="store_false",
                            help="the coverage term w_c c_i^t in the attention (See eq 11): the default, except in "
                                 "pgn_lstm_shi2018")
        parser.add_argument("--share-decoder-input-output-embed", action="store_true",
                            help="use the decoder embeddings as V' (See eq 4)")
        parser.add_argument("--decoder-readout", choices=["see", "luong", "paulus"],
                            help="see: See eqs 4, 8; luong: Shi et al.'s attentional hidden state, Shi eqs 3, 7, 9; "
                                 "paulus: Paulus et al.'s output and switch from [h^d_t; c^e_t; c^d_t], Paulus eqs "
                                 "9-12, "
                                 "without input feeding")
        parser.add_argument("--intra-temporal-attention", action="store_true",
                            help="Paulus et al.'s intra-temporal attention over the input (Paulus eqs 1-5) instead "
                                 "of the additive one; needs --no-coverage-attention or --no-coverage")
        parser.add_argument("--intra-decoder-attention", action="store_true",
                            help="Paulus et al.'s intra-decoder attention (Paulus eqs 6-8): the readout also "
                                 "reads c^d_t")
        parser.add_argument("--shared-output-projection", action="store_true",
                            help="output matrix tanh(W_emb W_proj) from the decoder embeddings (Paulus eq 13)")
        parser.add_argument("--own-prediction-prob", type=float, metavar="P",
                            help="in training, read the model's own previous prediction instead of the reference "
                                 "word with probability P (Paulus et al. section 6.1: 0.25; default 0, teacher "
                                 "forcing); the decoder then runs step by step")
        parser.add_argument("--no-fused-steps", action="store_true",
                            help="run the decoder's steps module by module, autograd recording each operation, "
                                 "instead of as one function with a hand-written backward (See readout, one "
                                 "layer, additive attention): the same numbers, more operations per step; for "
                                 "comparison and debugging")
        parser.add_argument("--cuda-graphs", action="store_true",
                            help="on a GPU, capture the fused recurrence's forward and backward loops as CUDA "
                                 "graphs, one per batch shape rounded up (documents and steps to multiples of 8, "
                                 "source positions to 16), and replay them: far fewer kernel launches per update, "
                                 "more GPU memory (at most half of it); no effect on a CPU or in decoding")
        parser.add_argument("--embed-norm", action="store_true",
                            help="normalize embeddings before the encoder and decoder LSTMs (Shi eq 14)")
        parser.add_argument("--dropout-in", type=float, metavar="D", help="dropout on embeddings")
        parser.add_argument("--dropout-out", type=float, metavar="D", help="dropout on LSTM outputs")
        # fmt: on
        add_embedding_args(parser, pretrained=True)

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        flush_denormals()
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        num_regular = first_marker_index(tgt_dict)
        encoder_embed, decoder_embed = build_embeddings(args, src_dict, tgt_dict)
        max_source = getattr(args, "max_source_positions", DEFAULT_MAX_POSITIONS)
        max_target = getattr(args, "max_target_positions", DEFAULT_MAX_POSITIONS)
        encoder = PGNEncoder(
            src_dict, encoder_embed, hidden_size=args.encoder_hidden_size, num_layers=args.encoder_layers,
            dropout_in=args.dropout_in, dropout_out=args.dropout_out, num_regular=first_marker_index(src_dict),
            embed_norm=args.embed_norm, max_positions=max_source,
        )
        attention = AttentionOptions(
            attention_dim=args.attention_dim, coverage=not args.no_coverage,
            coverage_attention=not args.no_coverage_attention, intra_temporal=args.intra_temporal_attention,
            intra_decoder=args.intra_decoder_attention,
        )
        output = OutputOptions(
            readout=args.decoder_readout, out_embed_dim=args.decoder_out_embed_dim, copy=not args.no_copy,
            eos_attention=args.eos_attention, share_input_output_embed=args.share_decoder_input_output_embed,
            shared_output_projection=args.shared_output_projection,
        )
        decoder = build_decoder(
            tgt_dict, decoder_embed, output=output, fused_steps=not args.no_fused_steps, cuda_graphs=args.cuda_graphs,
            encoder_output_units=encoder.output_units, hidden_size=args.decoder_hidden_size,
            num_layers=args.decoder_layers, attention=attention, dropout_in=args.dropout_in,
            dropout_out=args.dropout_out, embed_norm=args.embed_norm, num_regular=num_regular,
            own_prediction_prob=args.own_prediction_prob, max_positions=max_target,
        )
        logger.info("pgn_lstm: %d regular words, %d OOV markers, copy=%s, coverage=%s, coverage attention=%s, "
                    "readout=%s, intra-temporal attention=%s, intra-decoder attention=%s, shared output "
                    "projection=%s", num_regular, len(tgt_dict) - num_regular, decoder.copy, decoder.coverage,
                    decoder.coverage_attention, args.decoder_readout, args.intra_temporal_attention,
                    args.intra_decoder_attention, args.shared_output_projection)
        return cls(encoder, decoder)


@register_model_architecture("pgn_lstm", "pgn_lstm")
def base_architecture(args):
    args.dropout = getattr(args, "dropout", 0.1)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 256)
    args.encoder_layers = getattr(args, "encoder_layers", 1)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", args.encoder_embed_dim)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 256)
    args.decoder_layers = getattr(args, "decoder_layers", 1)
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", args.decoder_hidden_size)
    # Bahdanau et al.'s alignment model and OpenNMT-py's "mlp" attention size the hidden layer like the decoder
    # state; See et al.'s code uses the encoder state size (pgn_lstm_see2017), twice the work per decoder step.
    args.attention_dim = getattr(args, "attention_dim", None) or args.decoder_hidden_size
    args.no_copy = getattr(args, "no_copy", False)
    args.eos_attention = eos_attention_of(args)
    args.no_coverage = getattr(args, "no_coverage", False)
    args.no_coverage_attention = getattr(args, "no_coverage_attention", False)
    args.decoder_readout = getattr(args, "decoder_readout", "see")
    args.intra_temporal_attention = getattr(args, "intra_temporal_attention", False)
    args.intra_decoder_attention = getattr(args, "intra_decoder_attention", False)
    args.shared_output_projection = getattr(args, "shared_output_projection", False)
    args.own_prediction_prob = getattr(args, "own_prediction_prob", 0.0)
    args.embed_norm = getattr(args, "embed_norm", False)
    args.no_fused_steps = getattr(args, "no_fused_steps", False)
    args.cuda_graphs = getattr(args, "cuda_graphs", False)
    common_defaults(args)


@register_model_architecture("pgn_lstm", "pgn_lstm_small")
def pgn_lstm_small(args):
    """A CPU-sized model for quick experiments (a few minutes of training)."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 64)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 128)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 128)
    args.share_all_embeddings = getattr(args, "share_all_embeddings", True)
    base_architecture(args)


@register_model_architecture("pgn_lstm", "pgn_lstm_see2017")
def pgn_lstm_see2017(args):
    """See et al. (2017): embeddings 128, hidden 256, one layer each, no dropout, attention of the encoder
    state size 2 x 256 as in their code (the 50k vocabulary is set by preprocessing: summ-prepare --vocab-size
    50000)."""
    args.dropout = getattr(args, "dropout", 0.0)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 256)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 256)
    args.attention_dim = getattr(args, "attention_dim", None) or 2 * args.encoder_hidden_size
    base_architecture(args)


@register_model_architecture("pgn_lstm", "pgn_lstm_shi2018")
def pgn_lstm_shi2018(args):
    """Shi et al. (2018): BiLSTM encoder 600 per direction, decoder 1200, embeddings 400, one layer each,
    Luong-style readout, normalized embeddings (Shi eq 14), copy, and the coverage vector for the coverage loss
    (Shi eqs 12-13) but not in the attention (Shi eq 4 has no coverage input); vocabulary 60k is set by
    preprocessing; Adam 1e-3, focal loss 0.25/1/1 and beam 5 by the config."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 400)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 600)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 1200)
    args.decoder_readout = getattr(args, "decoder_readout", "luong")
    args.embed_norm = getattr(args, "embed_norm", True)
    args.no_coverage_attention = getattr(args, "no_coverage_attention", True)
    base_architecture(args)


@register_model_architecture("pgn_lstm", "pgn_lstm_paulus2017")
def pgn_lstm_paulus2017(args):
    """Paulus, Xiong & Socher (2017): embeddings 100, BiLSTM encoder 200 per direction, LSTM decoder 400, the
    intra-temporal (Paulus eqs 1-5) and intra-decoder (Paulus eqs 6-8) attentions, output and switch from
    [h^d_t; c^e_t; c^d_t] without input feeding (Paulus eqs 9-12), output matrix tied to the embeddings
    (Paulus eq 13), no coverage (the temporal attention is the paper's answer to repetition).  Trigram blocking is
    a generation option (--block-ngram-repeat 3: configs/paulus2017_*.conf)."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 100)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", args.encoder_embed_dim)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 200)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 400)
    args.decoder_readout = getattr(args, "decoder_readout", "paulus")
    args.intra_temporal_attention = getattr(args, "intra_temporal_attention", True)
    args.intra_decoder_attention = getattr(args, "intra_decoder_attention", True)
    args.shared_output_projection = getattr(args, "shared_output_projection", True)
    args.no_coverage = getattr(args, "no_coverage", True)
    base_architecture(args)

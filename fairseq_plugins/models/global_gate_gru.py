"""``global_gate_gru``: a GRU encoder-decoder with global encoding and a selective gate (Song & Zhao 2020).

Encoder (equation numbers are the paper's):
    h_i     = [->h_i; <-h_i], a bidirectional GRU over word embeddings          (Song eqs 1-4)
    u_s     = one learned vector in R^{2 d_h}, shared by the whole training set (the "global encoding")
    u_i     = tanh(W_s h_i + b_s)                                               (Song eq 5)
    alpha_i = softmax_i(u_i^T u_s)                                              (Song eq 6)
    D       = sum_i alpha_i h_i                                                 (Song eq 7)
    g_i     = sigmoid(W_g [h_i; u_s; D] + b_g)                                  (Song eq 8)
    h'_i    = g_i (.) h_i                                                       (Song eq 9)
Decoder, at each step t:
    s_0     = tanh(W_d D + b_d)                                                 (Song eq 10)
    s_t     = GRU([w_{t-1}; c_{t-1}], s_{t-1})      (c_0 = 0)                   (Song eq 11)
    e_ti    = v_a^T tanh(W_a s_{t-1} + U_a h'_i + E_a u_s)                      (Song eq 18)
    alpha_ti = softmax_i(e_ti)                                                  (Song eq 13)
    c_t     = sum_i alpha_ti h'_i                                               (Song eq 14)
    r_t     = W_r [w_{t-1}; c_t; s_t; u_s]                                      (Song eq 19)
    m_t     = [max(r_{t,2j-1}, r_{t,2j})]_j                                     (Song eq 16; modules/maxout.py)
    p(y_t)  = softmax(W_o m_t)                                                  (Song eq 17)
``--attention-query current`` (ours) lets step t attend with s_t instead of s_{t-1}: s_t is computed first
(Song eq 11), then alpha_t and c_t from it, as in Luong et al.'s concat attention, which the paper's text names as
the attention it uses (Song eq 12 writes s_{t-1}, which has not seen w_{t-1}; then Song eq 11's c_{t-1} is Luong's
input feeding).  The default, ``previous``, is Song eq 12/18 as printed.  In one run on LCSTS characters at CPU
scale the current state reached 6.88 bits of validation loss at 1624 updates against 7.28
(docs/results/song2020_no_copy_controls.md).

Song eqs 5-9 are modules/selective_gate.py; the attention is modules/coverage_attention.py without coverage, with
``E_a u_s`` added to the projected keys once per document (it does not depend on the step).  The u_s term of
Song eq 19 is likewise computed once per document (``readout_global``) and broadcast over the steps.

Ablations (the paper's Table 2 rows):
    --no-selective-gate   h'_i = h_i: no W_g, b_g.
    --no-global-encoding  no u_s, W_s, b_s, E_a, nor the u_s columns of W_r: the attention is
                          e_ti = v_a^T tanh(W_a s_{t-1} + U_a h_i) (Song eq 12) and r_t = W_r [w_{t-1}; c_t; s_t]
                          (Song eq 15); D is the mean of the h_i, so Song eq 10 still initialises the decoder,
                          and the gate (if kept) reads [h_i; D].
With both flags the model is a plain attentional GRU encoder-decoder with a maxout readout.

Note on u_s: it is a parameter, not a function of the input, so ``E_a u_s`` (Song eq 18), the u_s columns of W_r
(Song eq 19) and of W_g (Song eq 8) each add a learned constant, the same for every document, i.e. act as biases
(the attention's U_a already has one).  The input-dependent use of u_s is the query of the pooling of Song eq 6.

The paper has no copy switch: P(w) is Song eq 17 over the regular vocabulary.  Per-document OOV markers
(fairseq_plugins/text/markers.py) are embedded as ``<unk>``; at generation their log-probability is -inf (the
distribution is padded to the width of the dictionary, as beam search needs), and a marker in a training target
is scored as ``<unk>`` (as ``pgn_lstm --no-copy`` does), by ``get_target_probs`` (used by ``focal_copy_coverage``,
which then has no coverage loss and p_gen 1) and by ``get_targets`` (used by fairseq's ``cross_entropy``).

``--copy`` (ours, not the paper's) adds See et al.'s pointer (See eqs 8-9, modules/copy_mixture.py):
    p_gen   = sigmoid(w^T [c_t; s_t; w_{t-1}] + b)          (the readout's inputs, as See eq 8)
    P(w)    = p_gen p(y_t = w) + (1 - p_gen) sum_{i: x_i = w} alpha_ti      (Song eq 17 as P_vocab; See eq 9)
The attention reads the gated states h'_i (Song eq 14), so what is copied is what the selective gate let through.
OOV markers in the source become producible, as in ``pgn_lstm``; ``</s>`` is attended to but never copied.
Chinese news summaries copy most of their characters (about 63% of LCSTS summary characters occur in the
source).

Only the recurrent part (GRU cell, attention, context) runs inside the per-step loop; the readout, maxout and
output projection run once over all steps afterwards.
"""
import logging
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq import utils
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, register_model, register_model_architecture

from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.copy_mixture import (DEFAULT_EOS_ATTENTION, GenerationSwitch, add_eos_attention_arg,
                                                  eos_attention_of)
from fairseq_plugins.modules.coverage_attention import CoverageAttention
from fairseq_plugins.modules.extended_vocabulary import ExtendedVocabularyModel, ExtendedVocabularyOutput, MarkerAsUnk
from fairseq_plugins.modules.factories import (
    Dropout,
    GRU,
    GRUCell,
    Linear,
    add_embedding_args,
    build_embeddings,
    common_defaults,
    flush_denormals,
)
from fairseq_plugins.modules.maxout import Maxout
from fairseq_plugins.modules.selective_gate import GlobalDocumentEncoding, SelectiveGate, masked_mean
from fairseq_plugins.modules.step_state import StepStateDecoder, attention_memory, stack_steps
from fairseq_plugins.text.markers import first_marker_index

logger = logging.getLogger(__name__)

DEFAULT_MAX_POSITIONS = int(1e5)
MAXOUT_POOL = 2  # Song eq 16: max over pairs


def reverse_within_lengths(lengths: Tensor, max_len: int) -> Tensor:
    """B x S positions that reverse each right-padded sequence inside its length and leave the padding in place:
    i -> length - 1 - i for i < length, i -> i after.  The map is its own inverse."""
    positions = torch.arange(max_len, device=lengths.device).unsqueeze(0)  # 1 x S
    lengths = lengths.unsqueeze(1)  # B x 1
    return torch.where(positions < lengths, lengths - 1 - positions, positions)  # B x S


class GlobalGateEncoder(FairseqEncoder):
    """Bidirectional GRU encoder with global encoding and a selective gate.

    The two directions are two unidirectional GRUs over the right-padded batch, the backward one reading each
    document reversed inside its own length; this equals a bidirectional GRU over a packed sequence, without its
    CPU backward pass, which zero-fills and accumulates a full-size input gradient at every time step
    (docs/design.md).

    Returns a dict with batch-first tensors (the decoder attends batch-first):
        outputs: B x S x C, the gated states h'_i (C = 2 x hidden_size; h_i without the gate),
        padding_mask: B x S (True at padding), src_tokens: B x S (right-padded), document: B x C (D),
        global: B x C (u_s, only with global encoding).
    """

    def __init__(self, dictionary, embed_tokens, hidden_size=256, dropout_in=0.0, dropout_out=0.0,
                 global_encoding=True, selective_gate=True, num_regular=None, max_positions=DEFAULT_MAX_POSITIONS):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.embed_tokens = embed_tokens
        self.as_unk = MarkerAsUnk(num_regular or len(dictionary), dictionary.unk())
        self.dropout_in = Dropout(dropout_in)
        self.dropout_out = Dropout(dropout_out)
        self.gru_forward = GRU(embed_tokens.embedding_dim, hidden_size)  # ->h   (Song eqs 1-2)
        self.gru_backward = GRU(embed_tokens.embedding_dim, hidden_size)  # <-h   (Song eqs 3-4)
        self.output_units = 2 * hidden_size
        self.global_encoding = GlobalDocumentEncoding(self.output_units) if global_encoding else None
        self.gate = (
            SelectiveGate(self.output_units, self.output_units if global_encoding else 0) if selective_gate else None
        )
        self.max_source_positions = max_positions

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, **unused):
        # fairseq pads sources on the left; the GRUs want every document to start at position 0.
        src_tokens = utils.convert_padding_direction(src_tokens, self.padding_idx, left_to_right=True)
        bsz, src_len = src_tokens.size()
        padding_mask = src_tokens.eq(self.padding_idx)  # B x S
        x = self.dropout_in(self.embed_tokens(self.as_unk(src_tokens)))  # B x S x E
        forward_states, _ = self.gru_forward(x)  # B x S x H   (->h_i; after a document's end: masked below)
        reverse = reverse_within_lengths((~padding_mask).sum(dim=1), src_len).unsqueeze(2)  # B x S x 1
        backward_states, _ = self.gru_backward(x.gather(1, reverse.expand_as(x)))  # B x S x H   (reversed order)
        backward_states = backward_states.gather(1, reverse.expand_as(backward_states))  # B x S x H   (<-h_i)
        states = torch.cat([forward_states, backward_states], dim=2)  # B x S x C   (h_i, Song eqs 1-4)
        states = self.dropout_out(states.masked_fill(padding_mask.unsqueeze(2), 0.0))  # B x S x C
        mask = padding_mask if padding_mask.any() else None
        out = {"padding_mask": padding_mask, "src_tokens": src_tokens}
        if self.global_encoding is not None:
            document, _ = self.global_encoding(states, mask)  # B x C   (D, Song eqs 5-7)
            global_vector = self.global_encoding.global_vector(bsz)  # B x C   (u_s)
            out["global"] = global_vector
        else:
            document = masked_mean(states, mask)  # B x C   (D as a plain mean: the ablation)
            global_vector = None
        if self.gate is not None:
            states, _ = self.gate(states, document, global_vector)  # B x S x C   (h'_i, Song eqs 8-9)
        out["outputs"] = states  # B x S x C
        out["document"] = document  # B x C
        out[SOURCE_ROW] = source_rows(bsz, src_tokens.device)  # B
        return out

    def reorder_encoder_out(self, encoder_out: Dict[str, Tensor], new_order: Tensor):
        return reorder_rows(encoder_out, new_order, source_only=encoder_out.keys())  # modules/beam_reorder.py

    def max_positions(self):
        return self.max_source_positions


class GlobalGateDecoder(StepStateDecoder):
    """GRU decoder with (global-encoding) additive attention and a maxout readout.

    Returns the Song eq 17 logits B x T x V_reg and ``extra``: attn [B x T x S] (alpha_t), decoder_states B x T x H
    (s_t) and, with ``copy``, src_tokens B x S and the switch p_gen, p_gen_logit (B x T x 1).  ``extended_output``
    turns them into P(w) over the extended vocabulary (without copy, markers get probability 0).

    Args:
        dictionary: target dictionary (extended vocabulary: regular words, then OOV markers).
        embed_tokens: target embeddings (may be shared with the encoder).
        encoder_output_units: size C of an encoder state (2 x encoder hidden size).
        hidden_size: decoder GRU size.
        out_embed_dim: size of m_t (Song eq 16); the readout r_t has twice as many units.
        attention_dim: size inside the attention's tanh.
        global_encoding: add E_a u_s (Song eq 18) and the u_s columns of W_r (Song eq 19).
        share_input_output_embed: W_o of Song eq 17 is the (regular part of the) embedding matrix.
        num_regular: size of the regular vocabulary (index of the first OOV marker).
        copy: add the copy switch and mixture (see the module docstring).
    """

    def __init__(self, dictionary, embed_tokens, encoder_output_units=512, hidden_size=512, out_embed_dim=512,
                 attention_dim=512, dropout_in=0.0, dropout_out=0.0, global_encoding=True,
                 share_input_output_embed=False, num_regular=None, copy=False, attention_query="previous",
                 max_positions=DEFAULT_MAX_POSITIONS, eos_attention=DEFAULT_EOS_ATTENTION):
        super().__init__(dictionary)
        if attention_query not in ("previous", "current"):
            raise ValueError(f"--attention-query must be previous or current, not {attention_query!r}")
        self.query_is_current = attention_query == "current"
        embed_dim = embed_tokens.embedding_dim
        self.init_target_side(embed_tokens, num_regular, dropout_in, dropout_out, max_positions)
        self.hidden_size = hidden_size
        self.global_encoding = global_encoding
        self.copy = copy

        self.init_state = Linear(encoder_output_units, hidden_size)  # W_d, b_d   (Song eq 10)
        self.cell = GRUCell(embed_dim + encoder_output_units, hidden_size)  # Song eq 11
        # W_a (query_proj), U_a + bias (key_proj), v_a: Song eqs 18/12, 13, 14.
        self.attention = CoverageAttention(encoder_output_units, hidden_size, attention_dim, coverage=False)
        if global_encoding:
            self.global_key_proj = Linear(encoder_output_units, attention_dim, bias=False)  # E_a   (Song eq 18)
        # W_r of Song eq 19 split by input: [w_{t-1}; c_t; s_t] (changes every step) and u_s (constant).
        self.readout = Linear(embed_dim + encoder_output_units + hidden_size, MAXOUT_POOL * out_embed_dim)
        if global_encoding:
            self.readout_global = Linear(encoder_output_units, MAXOUT_POOL * out_embed_dim, bias=False)
        self.maxout = Maxout(MAXOUT_POOL)
        self.share_input_output_embed = share_input_output_embed
        if share_input_output_embed:
            assert out_embed_dim == embed_dim, "--share-decoder-input-output-embed needs out_embed_dim == embed_dim"
        else:
            self.output_projection = Linear(out_embed_dim, self.num_regular)  # W_o   (Song eq 17)
        if copy:
            self.switch = GenerationSwitch([encoder_output_units, hidden_size, embed_dim])  # p_gen from [c; s; w]
        self.extended_output = ExtendedVocabularyOutput(
            self.num_regular, len(dictionary), dictionary.unk(), copy=copy, eos=dictionary.eos(),
            eos_attention=eos_attention,
        )  # log P(w) -inf where P(w) = 0 (markers without copy, absent from the source with it); losses floor it

    # ------------------------------------------------------------------ recurrent part
    def initial_state(self, encoder_out: Dict[str, Tensor]) -> Dict[str, Tensor]:
        values = encoder_out["outputs"]  # B x S x C
        offset = self.global_key_proj(encoder_out["global"]) if self.global_encoding else None  # B x A   (E_a u_s)
        keys = self.attention.project_keys(values, offset)  # B x S x A   (U_a h'_i + b [+ E_a u_s, Song eq 18])
        return {
            "hidden": torch.tanh(self.init_state(encoder_out["document"])),  # B x H   (s_0, Song eq 10)
            "context": values.new_zeros(values.size(0), values.size(2)),  # B x C   (c_0 = 0)
            "keys": keys,  # B x S x A
            SOURCE_ROW: encoder_out[SOURCE_ROW],  # B   (which source each row's keys come from)
        }

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None):
        """Runs the recurrence.  Returns the inputs B x T x E (w_{t-1}), states B x T x H (s_t), contexts
        B x T x C (c_t) and the attention B x T x S (alpha_t)."""
        state = self.load_state(encoder_out, incremental_state)
        prev_output_tokens = self.new_tokens(prev_output_tokens, incremental_state)  # B x T (B x 1 incrementally)
        values, padding_mask = attention_memory(encoder_out)  # B x S x C, B x S (True at padding)

        embedded = self.dropout_in(self.embed_tokens(self.as_unk(prev_output_tokens)))  # B x T x E
        hidden, context = state["hidden"], state["context"]  # B x H (s_{t-1}), B x C (c_{t-1})
        steps = {"states": [], "contexts": [], "attn": []}
        for t in range(prev_output_tokens.size(1)):
            if self.query_is_current:  # s_t first, then its attention (Luong's order)
                hidden = self.cell(torch.cat([embedded[:, t], context], dim=1), hidden)  # B x H   (s_t, Song eq 11)
                attn, context = self.attention(state["keys"], values, hidden, None, padding_mask)  # B x S, B x C
            else:  # Song eq 12/18 as printed: the attention reads s_{t-1}, the GRU reads c_{t-1}
                attn, new_context = self.attention(
                    state["keys"], values, hidden, None, padding_mask
                )  # B x S, B x C   (alpha_t, c_t: Song eqs 18 or 12, 13, 14)
                hidden = self.cell(torch.cat([embedded[:, t], context], dim=1), hidden)  # B x H   (s_t, Song eq 11)
                context = new_context  # B x C
            for key, value in zip(steps, (hidden, context, attn)):
                steps[key].append(value)

        if incremental_state is not None:
            self.save_state(incremental_state, dict(state, hidden=hidden, context=context))
        steps = stack_steps(steps)  # each B x T x D
        return embedded, steps["states"], steps["contexts"], steps["attn"]

    # ------------------------------------------------------------------ output part (outside the loop)
    def forward(self, prev_output_tokens, encoder_out, incremental_state=None, **unused):
        embedded, states, contexts, attn = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        readout = self.readout(torch.cat([embedded, contexts, states], dim=2))  # B x T x 2M   (Song eq 19 / Song eq 15)
        if self.global_encoding:
            # B x T x 2M   (+ u_s, Song eq 19)
            readout = readout + self.readout_global(encoder_out["global"]).unsqueeze(1)
        features = self.dropout_out(self.maxout(readout))  # B x T x M   (m_t, Song eq 16)
        logits = self.output_layer(features)  # B x T x V_reg   (Song eq 17, before the softmax)
        extra = {"attn": [attn], "decoder_states": states}
        if self.copy:
            extra["src_tokens"] = encoder_out["src_tokens"]  # B x S
            extra["p_gen_logit"] = self.switch.logit(contexts, states, embedded)  # B x T x 1
            extra["p_gen"] = torch.sigmoid(extra["p_gen_logit"])  # B x T x 1   (See eq 8)
        return logits, extra

    def output_layer(self, features: Tensor) -> Tensor:
        if self.share_input_output_embed:
            return F.linear(features, self.embed_tokens.weight[: self.num_regular])  # ... x V_reg
        return self.output_projection(features)  # ... x V_reg


@register_model("global_gate_gru")
class GlobalGateGRUModel(ExtendedVocabularyModel, FairseqEncoderDecoderModel):
    """Global encoding + selective gate GRU summarizer (a copy switch with ``--copy``).  See the module
    docstring."""

    @staticmethod
    def add_args(parser):
        # fmt: off
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
        parser.add_argument("--encoder-hidden-size", type=int, metavar="N",
                            help="encoder GRU size per direction (states and u_s are 2N)")
        parser.add_argument("--decoder-hidden-size", type=int, metavar="N", help="decoder GRU size")
        parser.add_argument("--decoder-out-embed-dim", type=int, metavar="N",
                            help="size of the maxout output m_t (Song eq 16); the readout r_t is twice as large")
        parser.add_argument("--attention-dim", type=int, metavar="N",
                            help="size inside the attention tanh (default: encoder state size)")
        parser.add_argument("--no-selective-gate", action="store_true",
                            help="ablation: no selective gate, h'_i = h_i (Song eqs 8-9 removed)")
        parser.add_argument("--no-global-encoding", action="store_true",
                            help="ablation: no u_s; D is the mean of the encoder states, Song eqs 12/15 replace 18/19")
        parser.add_argument("--share-decoder-input-output-embed", action="store_true",
                            help="use the decoder embeddings as W_o (Song eq 17)")
        parser.add_argument("--copy", action="store_true",
                            help="add a copy switch and See et al.'s copy mixture over the attention (not in the "
                                 "paper): source OOV words become producible")
        parser.add_argument("--no-copy", dest="copy", action="store_false", default=False,
                            help="no copy switch (the default, as in the paper): P(w) = Song eq 17")
        add_eos_attention_arg(parser)
        parser.add_argument("--attention-query", choices=["previous", "current"],
                            help="the decoder state the attention reads at step t: previous = s_{t-1} (Song eq 12/18 "
                                 "as printed, the default), current = s_t (Luong's concat attention, which the "
                                 "paper's text names)")
        parser.add_argument("--dropout-in", type=float, metavar="D", help="dropout on embeddings")
        parser.add_argument("--dropout-out", type=float, metavar="D",
                            help="dropout on the encoder states and on the maxout output")
        # fmt: on
        add_embedding_args(parser)

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        flush_denormals()
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        num_regular = first_marker_index(tgt_dict)
        encoder_embed, decoder_embed = build_embeddings(args, src_dict, tgt_dict)
        global_encoding = not args.no_global_encoding
        encoder = GlobalGateEncoder(
            src_dict, encoder_embed, hidden_size=args.encoder_hidden_size, dropout_in=args.dropout_in,
            dropout_out=args.dropout_out, global_encoding=global_encoding, selective_gate=not args.no_selective_gate,
            num_regular=first_marker_index(src_dict),
            max_positions=getattr(args, "max_source_positions", DEFAULT_MAX_POSITIONS),
        )
        decoder = GlobalGateDecoder(
            tgt_dict, decoder_embed, encoder_output_units=encoder.output_units,
            hidden_size=args.decoder_hidden_size, out_embed_dim=args.decoder_out_embed_dim,
            attention_dim=args.attention_dim or encoder.output_units, dropout_in=args.dropout_in,
            dropout_out=args.dropout_out, global_encoding=global_encoding,
            share_input_output_embed=args.share_decoder_input_output_embed, num_regular=num_regular,
            copy=args.copy, attention_query=args.attention_query,
            max_positions=getattr(args, "max_target_positions", DEFAULT_MAX_POSITIONS),
            eos_attention=args.eos_attention,
        )
        logger.info("global_gate_gru: %d regular words, %d OOV markers (%s), copy=%s, global encoding=%s, "
                    "selective gate=%s, output layer tied to the embeddings=%s, attention query=%s", num_regular,
                    len(tgt_dict) - num_regular, "copied" if args.copy else "scored as <unk>, no copying", args.copy,
                    global_encoding, encoder.gate is not None, args.share_decoder_input_output_embed,
                    args.attention_query)
        return cls(encoder, decoder)


@register_model_architecture("global_gate_gru", "global_gate_gru")
def base_architecture(args):
    args.dropout = getattr(args, "dropout", 0.3)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 256)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 256)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", args.encoder_embed_dim)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 512)
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", args.decoder_embed_dim)
    args.attention_dim = getattr(args, "attention_dim", None)
    args.no_selective_gate = getattr(args, "no_selective_gate", False)
    args.no_global_encoding = getattr(args, "no_global_encoding", False)
    args.copy = getattr(args, "copy", False)
    args.eos_attention = eos_attention_of(args)
    args.attention_query = getattr(args, "attention_query", None) or "previous"  # Song eq 12; older checkpoints too
    common_defaults(args)


@register_model_architecture("global_gate_gru", "global_gate_gru_song2020")
def global_gate_gru_song2020(args):
    """Song & Zhao (2020): embeddings 512, encoder GRU 256 per direction, decoder GRU 512, dropout 0.5 (Adam
    1e-3 halved on plateau and batch 32 are training options: configs/song2020_lcsts.conf)."""
    args.dropout = getattr(args, "dropout", 0.5)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 512)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 256)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 512)
    base_architecture(args)


@register_model_architecture("global_gate_gru", "global_gate_gru_small")
def global_gate_gru_small(args):
    """A CPU-sized model for quick experiments: embeddings 128 (shared), encoder 128 per direction, decoder 256."""
    args.dropout = getattr(args, "dropout", 0.2)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 128)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 256)
    args.share_all_embeddings = getattr(args, "share_all_embeddings", True)
    base_architecture(args)

"""``pgn_lstm``: the pointer-generator network with coverage (See, Liu & Manning 2017, "Get To The Point").

Encoder: a bidirectional LSTM over word embeddings; its final states are reduced to the decoder's initial state.
Decoder, at each step t (equation numbers are the paper's):
    x_t    = W_x [y_{t-1}; h*_{t-1}] + b_x                    input feeding (the reference code's decoder input)
    s_t    = LSTM(x_t, s_{t-1})
    a^t    = attention(h, s_t, c^t)                          (eqs 1/11, 2; modules/coverage_attention.py)
    h*_t   = sum_i a_i^t h_i                                  (eq 3)
    P_vocab = softmax(V'(V [s_t; h*_t] + b) + b')             (eq 4)
    p_gen  = sigmoid(w_h*^T h*_t + w_s^T s_t + w_x^T x_t + b)  (eq 8; modules/copy_mixture.py)
    P(w)   = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t   (eq 9)
    c^{t+1} = c^t + a^t                                       (eq 10)
``--no-copy`` gives P(w) = P_vocab(w) (eq 5) and ``--no-coverage`` drops the coverage term, so the plain
attentional baseline of the paper is the same code with two flags.

Only the recurrent part (LSTM cell, attention, context) runs inside the per-step loop; the projections that do
not feed back (P_vocab, p_gen) run once over all steps afterwards.

The decoder's first output is the P_vocab *logits* over the regular vocabulary; ``get_normalized_probs`` turns
them, with the attention and p_gen kept in the second output, into eq 9 over the extended vocabulary (regular
words + per-document OOV markers, see fairseq_plugins/text/markers.py).  Marker ids are embedded as ``<unk>``.
"""
import logging
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq import utils
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, register_model, register_model_architecture

from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.copy_mixture import GenerationSwitch
from fairseq_plugins.modules.coverage_attention import CoverageAttention
from fairseq_plugins.modules.extended_vocabulary import ExtendedVocabularyModel, ExtendedVocabularyOutput, MarkerAsUnk
from fairseq_plugins.modules.factories import (
    LSTM,
    EmbeddingNorm,
    Linear,
    LSTMCell,
    add_embedding_args,
    build_embeddings,
    flush_denormals,
)
from fairseq_plugins.modules.step_state import StepStateDecoder, attention_memory, stack_steps
from fairseq_plugins.text.markers import first_marker_index

logger = logging.getLogger(__name__)

DEFAULT_MAX_POSITIONS = int(1e5)
MAX_LENGTH_GROUPS = 16  # the encoder runs one plain LSTM call per distinct source length up to this many


class SeeReadout(nn.Module):
    """See et al.'s readout: the context h*_t is fed back as the next input;
    P_vocab = softmax(V'(V [s_t; h*_t] + b) + b')  (eq 4);  p_gen from [h*_t; s_t; x_t]  (eq 8)."""

    def __init__(self, hidden_size: int, context_size: int, embed_dim: int, out_dim: int, copy: bool):
        super().__init__()
        self.feed_size = context_size
        self.out_dim = out_dim
        self.pre_output = Linear(hidden_size + context_size, out_dim)  # V, b
        self.switch = GenerationSwitch([context_size, hidden_size, embed_dim]) if copy else None

    def feed(self, state: Tensor, context: Tensor) -> Tensor:
        """What the next step's input sees: h*_t.  B x C."""
        return context

    def features(self, states, contexts, feeds, inputs) -> Tensor:
        """Input of V' (eq 4).  B x T x out_dim."""
        return self.pre_output(torch.cat([states, contexts], dim=2))

    def p_gen(self, states, contexts, feeds, inputs) -> Tensor:
        return self.switch(contexts, states, inputs)  # B x T x 1   (eq 8)


class LuongReadout(nn.Module):
    """Shi et al. (2018)'s readout, Luong et al.'s attentional hidden state:
    h~_t = tanh(W_c [c_t; h_t])  (eq 3), fed back as the next input;  P_vocab = softmax(W_vocab h~_t + b)  (eq 7);
    copy switch sigmoid(W_h^T h~_t + b)  (eq 9).  The switch's output weighs P_vocab in eq 10, as p_gen does in
    See et al.'s eq 9 (calling it p_copy and weighing the copy side instead is the same model with -W_h, -b)."""

    def __init__(self, hidden_size: int, context_size: int, copy: bool):
        super().__init__()
        self.feed_size = hidden_size
        self.out_dim = hidden_size
        self.attentional = Linear(context_size + hidden_size, hidden_size)  # W_c
        self.switch = GenerationSwitch([hidden_size]) if copy else None

    def feed(self, state: Tensor, context: Tensor) -> Tensor:
        return torch.tanh(self.attentional(torch.cat([context, state], dim=1)))  # B x H   h~_t (eq 3)

    def features(self, states, contexts, feeds, inputs) -> Tensor:
        return feeds  # h~_t, the input of W_vocab (eq 7)

    def p_gen(self, states, contexts, feeds, inputs) -> Tensor:
        return self.switch(feeds)  # B x T x 1   (eq 9)


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
        self.dropout_in = nn.Dropout(dropout_in)
        self.dropout_out = nn.Dropout(dropout_out)
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
        PackedSequence is slow to train: measured 3x slower than plain LSTM calls (forward and backward, 36
        documents of about 100 tokens), its backward pass allocating a tokens x 4H tensor per time step.  So
        the documents of each length run together as a plain tensor: one call when no document is padded (the
        usual case, fairseq batches documents of similar length), one per length up to
        ``MAX_LENGTH_GROUPS``, and a PackedSequence beyond that."""
        lengths = src_lengths.tolist()
        distinct = sorted(set(lengths), reverse=True)
        if len(distinct) == 1 and distinct[0] == x.size(1):
            return self.lstm(x)
        if len(distinct) > MAX_LENGTH_GROUPS:
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


class PGNDecoder(StepStateDecoder):
    """LSTM decoder with coverage attention and a copy switch.

    Returns the P_vocab logits B x T x V_reg and ``extra``: attn [B x T x S] (a^t), src_tokens B x S (right-padded),
    decoder_states B x T x H (s_t of the top LSTM layer), coverage B x T x S (c^t before step t; with coverage)
    and p_gen B x T x 1 (with copy).  ``extended_output`` turns them into P(w) (eq 9 or eq 5).

    Args:
        dictionary: target dictionary (extended vocabulary: regular words, then OOV markers).
        embed_tokens: target embeddings (may be shared with the encoder).
        encoder_output_units: size of an encoder state (2 x encoder hidden size).
        hidden_size: decoder LSTM size; num_layers: stacked LSTM cells (attention reads the top one).
        out_embed_dim: size of V's output in eq 4 (See readout).
        attention_dim: size inside the attention's tanh.
        readout: "see" (See et al. eqs 4, 8) or "luong" (Shi et al. eqs 3, 7, 9).
        embed_norm: normalize the embeddings before the LSTM (Shi et al. eq 14).
        copy: produce eq 9 (pointer-generator) instead of eq 5.
        coverage: use eq 11 attention and expose the coverage for the coverage loss.
        share_input_output_embed: V' of eq 4 is the (regular part of the) embedding matrix.
        num_regular: size of the regular vocabulary (index of the first OOV marker).
    """

    def __init__(self, dictionary, embed_tokens, encoder_output_units=512, hidden_size=256, num_layers=1,
                 out_embed_dim=256, attention_dim=512, dropout_in=0.0, dropout_out=0.0, copy=True, coverage=True,
                 share_input_output_embed=False, num_regular=None, readout="see", embed_norm=False,
                 max_positions=DEFAULT_MAX_POSITIONS):
        super().__init__(dictionary)
        embed_dim = embed_tokens.embedding_dim
        self.num_regular = num_regular or len(dictionary)
        self.embed_tokens = embed_tokens
        self.embed_norm = EmbeddingNorm(embed_dim, embed_norm)
        self.as_unk = MarkerAsUnk(self.num_regular, dictionary.unk())
        self.dropout_in = nn.Dropout(dropout_in)
        self.dropout_out = nn.Dropout(dropout_out)
        self.hidden_size = hidden_size
        self.copy = copy
        self.coverage = coverage
        self.max_target_positions = max_positions

        # Initial state from the encoder's final states (the reference code's "reduce states").
        self.reduce_hidden = Linear(encoder_output_units, hidden_size)
        self.reduce_cell = Linear(encoder_output_units, hidden_size)
        if readout == "see":
            self.readout = SeeReadout(hidden_size, encoder_output_units, embed_dim, out_embed_dim, copy)
        elif readout == "luong":
            self.readout = LuongReadout(hidden_size, encoder_output_units, copy)
        else:
            raise ValueError(f"unknown --decoder-readout {readout!r} (see, luong)")
        # Input feeding: x_t = W_x [y_{t-1}; feed_{t-1}] + b_x, split so the embedding part runs outside the loop.
        self.input_from_embed = Linear(embed_dim, embed_dim)
        self.input_from_feed = Linear(self.readout.feed_size, embed_dim, bias=False)
        self.layers = nn.ModuleList(
            [LSTMCell(embed_dim if i == 0 else hidden_size, hidden_size) for i in range(num_layers)]
        )
        self.attention = CoverageAttention(encoder_output_units, hidden_size, attention_dim, coverage=coverage)
        self.share_input_output_embed = share_input_output_embed
        if share_input_output_embed:
            if self.readout.out_dim != embed_dim:
                raise ValueError("--share-decoder-input-output-embed needs the readout size (See: "
                                 "--decoder-out-embed-dim, Luong: --decoder-hidden-size) equal to the embedding size")
        else:
            self.output_projection = Linear(self.readout.out_dim, self.num_regular)  # V' (eq 4) / W_vocab (eq 7)
        self.extended_output = ExtendedVocabularyOutput(self.num_regular, len(dictionary), dictionary.unk(), copy)

    # ------------------------------------------------------------------ recurrent part
    state_batch_dims = {"hidden": 1, "cell": 1}  # L x B x H; every other entry of the state is batch-first

    def initial_state(self, encoder_out: Dict[str, Tensor]) -> Dict[str, Tensor]:
        bsz, src_len, enc_dim = encoder_out["outputs"].size()
        hidden = F.relu(self.reduce_hidden(encoder_out["final_hidden"]))  # B x H
        cell = F.relu(self.reduce_cell(encoder_out["final_cell"]))  # B x H
        num_layers = len(self.layers)
        zeros = encoder_out["outputs"].new_zeros
        return {
            "hidden": torch.stack([hidden] * num_layers),  # L x B x H
            "cell": torch.stack([cell] * num_layers),  # L x B x H
            "feed": zeros(bsz, self.readout.feed_size),  # B x F   (h*_{t-1} or h~_{t-1})
            "coverage": zeros(bsz, src_len),  # B x S   (c^t)
            "keys": self.attention.project_keys(encoder_out["outputs"]),  # B x S x A
            SOURCE_ROW: encoder_out[SOURCE_ROW],  # B   (which source each row's keys come from)
        }

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None):
        """Runs the recurrence.  Returns, each B x T x D: decoder states s_t, contexts h*_t, fed-back vectors,
        LSTM inputs x_t, attention a^t and coverage c^t (the last two B x T x S)."""
        state = self.load_state(encoder_out, incremental_state)
        prev_output_tokens = self.new_tokens(prev_output_tokens, incremental_state)  # B x T (B x 1 incrementally)
        values, padding_mask = attention_memory(encoder_out)  # B x S x C, B x S (None without padding)

        embedded = self.embed_norm(self.embed_tokens(self.as_unk(prev_output_tokens)))  # B x T x E
        embedded_part = self.input_from_embed(self.dropout_in(embedded))  # B x T x E
        hidden = list(state["hidden"].unbind(0))  # L x (B x H)
        cell = list(state["cell"].unbind(0))
        feed, coverage = state["feed"], state["coverage"]
        steps = {key: [] for key in ("states", "contexts", "feeds", "inputs", "attn", "coverage")}
        for t in range(prev_output_tokens.size(1)):
            x = embedded_part[:, t] + self.input_from_feed(feed)  # B x E   (input feeding)
            layer_input = x
            for i, lstm in enumerate(self.layers):
                hidden[i], cell[i] = lstm(layer_input, (hidden[i], cell[i]))
                layer_input = self.dropout_out(hidden[i]) if i + 1 < len(self.layers) else hidden[i]
            attn, context = self.attention(state["keys"], values, hidden[-1], coverage, padding_mask)
            feed = self.readout.feed(hidden[-1], context)  # B x F
            for key, value in zip(steps, (hidden[-1], context, feed, x, attn, coverage)):
                steps[key].append(value)  # coverage: c^t, *before* step t (eq 10)
            if self.coverage:
                coverage = coverage + attn  # c^{t+1} = c^t + a^t   (eq 10)

        if incremental_state is not None:
            new_state = dict(state, hidden=torch.stack(hidden), cell=torch.stack(cell), feed=feed, coverage=coverage)
            self.save_state(incremental_state, new_state)
        return stack_steps(steps)  # each B x T x D

    # ------------------------------------------------------------------ output part (outside the loop)
    def forward(self, prev_output_tokens, encoder_out, incremental_state=None, **unused):
        steps = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        readout_inputs = (steps["states"], steps["contexts"], steps["feeds"], steps["inputs"])
        features = self.dropout_out(self.readout.features(*readout_inputs))  # B x T x out_dim
        logits = self.output_layer(features)  # B x T x V_reg   (eq 4 / eq 7, before softmax)
        extra = {"attn": [steps["attn"]], "src_tokens": encoder_out["src_tokens"], "decoder_states": steps["states"]}
        if self.coverage:
            extra["coverage"] = steps["coverage"]
        if self.copy:
            extra["p_gen"] = self.readout.p_gen(*readout_inputs)  # B x T x 1   (eq 8 / eq 9)
        return logits, extra

    def output_layer(self, features: Tensor) -> Tensor:
        if self.share_input_output_embed:
            return F.linear(features, self.embed_tokens.weight[: self.num_regular])
        return self.output_projection(features)

    def max_positions(self):
        return self.max_target_positions


@register_model("pgn_lstm")
class PGNLSTMModel(ExtendedVocabularyModel, FairseqEncoderDecoderModel):
    """Pointer-generator with coverage.  See the module docstring for the equations."""

    @staticmethod
    def add_args(parser):
        # fmt: off
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
        parser.add_argument("--encoder-hidden-size", type=int, metavar="N",
                            help="encoder LSTM size per direction (states are 2N)")
        parser.add_argument("--encoder-layers", type=int, metavar="N", help="number of encoder layers")
        parser.add_argument("--decoder-hidden-size", type=int, metavar="N", help="decoder LSTM size")
        parser.add_argument("--decoder-layers", type=int, metavar="N", help="number of decoder layers")
        parser.add_argument("--decoder-out-embed-dim", type=int, metavar="N", help="size of V's output (eq 4)")
        parser.add_argument("--attention-dim", type=int, metavar="N",
                            help="size inside the attention tanh (default: the decoder hidden size; "
                                 "pgn_lstm_see2017: the encoder state size, 2 x encoder hidden)")
        parser.add_argument("--no-copy", action="store_true",
                            help="no pointer: P(w) = P_vocab(w) (the paper's attention baseline)")
        parser.add_argument("--no-coverage", action="store_true", help="no coverage vector in the attention")
        parser.add_argument("--share-decoder-input-output-embed", action="store_true",
                            help="use the decoder embeddings as V' (eq 4)")
        parser.add_argument("--decoder-readout", choices=["see", "luong"],
                            help="see: See et al. eqs 4, 8; luong: Shi et al.'s attentional hidden state, eqs 3, 7, 9")
        parser.add_argument("--embed-norm", action="store_true",
                            help="normalize embeddings before the encoder and decoder LSTMs (Shi et al. eq 14)")
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
        decoder = PGNDecoder(
            tgt_dict, decoder_embed, encoder_output_units=encoder.output_units,
            hidden_size=args.decoder_hidden_size, num_layers=args.decoder_layers,
            out_embed_dim=args.decoder_out_embed_dim, attention_dim=args.attention_dim,
            dropout_in=args.dropout_in, dropout_out=args.dropout_out, copy=not args.no_copy,
            coverage=not args.no_coverage, share_input_output_embed=args.share_decoder_input_output_embed,
            num_regular=num_regular, readout=args.decoder_readout, embed_norm=args.embed_norm,
            max_positions=max_target,
        )
        logger.info("pgn_lstm: %d regular words, %d OOV markers, copy=%s, coverage=%s",
                    num_regular, len(tgt_dict) - num_regular, decoder.copy, decoder.coverage)
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
    args.no_coverage = getattr(args, "no_coverage", False)
    args.share_decoder_input_output_embed = getattr(args, "share_decoder_input_output_embed", False)
    args.share_all_embeddings = getattr(args, "share_all_embeddings", False)
    args.decoder_readout = getattr(args, "decoder_readout", "see")
    args.encoder_embed_path = getattr(args, "encoder_embed_path", None)
    args.decoder_embed_path = getattr(args, "decoder_embed_path", None)
    args.embed_format = getattr(args, "embed_format", "auto")
    args.encoder_freeze_embed = getattr(args, "encoder_freeze_embed", False)
    args.decoder_freeze_embed = getattr(args, "decoder_freeze_embed", False)
    args.embed_norm = getattr(args, "embed_norm", False)
    args.dropout_in = getattr(args, "dropout_in", args.dropout)
    args.dropout_out = getattr(args, "dropout_out", args.dropout)


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
    Luong-style readout, normalized embeddings (eq 14), copy and coverage (vocabulary 60k is set by
    preprocessing; Adam 1e-3, focal loss 0.25/1/1 and beam 5 by the config)."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 400)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 600)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 1200)
    args.decoder_readout = getattr(args, "decoder_readout", "luong")
    args.embed_norm = getattr(args, "embed_norm", True)
    base_architecture(args)

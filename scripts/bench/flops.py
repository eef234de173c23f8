#!/usr/bin/env python
"""The floating-point work of one training update, counted analytically, for model FLOPs utilisation (MFU).

What is counted (forward pass of one document pair: S source tokens, T target tokens = decoder steps):
  * every product of a matrix (or vector) with a vector: 2 FLOPs per multiply-add.  An LSTM layer over one
    token with input size I and hidden size H: 2 * 4H * (I + H) (the gate products; both directions of a
    bidirectional encoder);
  * the additive attention's elementwise work per decoder step and source position, because it grows with
    S x A like the products do: the query added to the key (A), the coverage term w_c c_i (2A, a multiply-add),
    tanh (A, one FLOP per element) and the product with v (2A);
  * each term computed once where the model's equations allow it: the attention's keys W_h h_i + b are a
    per-document product (OpenNMT-py 3.5.1 recomputes them at every decoder step; that repeated work is not
    model work, so it shows as lost utilisation).
  * products computed once per batch whatever its size (Paulus et al.'s tied output matrix): counted once per
    batch of the training epoch, as fairseq batches it with --max-tokens (``batch_count``).
What is not counted: biases, gate nonlinearities and cell updates of the LSTMs, softmaxes (the intra-temporal
attention's running log-sum-exp is one, O(S) per step), dropout, the losses and the optimizer: all O(H), O(S) or
O(V) per token, against O(H^2), O(S H) and O(H V) for the products; together under 1% of the total at the
benchmark's sizes (emb 128, hidden 256, vocabulary about 4,000).
The backward pass is counted as twice the forward pass (one product for the input gradient and one for the
weight gradient per forward product), so one update = 3 x forward.

Per model (sizes: E embedding, He encoder hidden per direction, C = 2 He encoder state, H decoder hidden,
A attention, O readout, V output vocabulary):

  pgn_lstm (See et al. readout, copy, coverage; fairseq_plugins/models/pgn_lstm.py)
    encoder          2 directions x S x 2*4He(E + He)
    initial state    2 x 2CH                                   (reduce_hidden, reduce_cell)
    attention keys   S x 2CA                                   (W_h h_i + b_attn, eq 1)
    decoder input    T x (2EE + 2CE)                           (input feeding x_t = W_x [y; h*])
    decoder LSTM     T x 2*4H(E + H)
    attention query  T x 2HA                                   (W_s s_t)
    attention scores T x S x (A + 2A + A + 2A)                 (eq 11: + q, + w_c c, tanh, v^T)
    context          T x S x 2C                                (eq 3)
    readout          T x 2(H + C)O                             (V [s_t; h*_t] + b, eq 4)
    output layer     T x 2OV                                   (V', eq 4)
    copy switch      T x 2(C + H + E)                          (p_gen, eq 8)
  pgn_lstm_paulus2017 (Paulus et al.: intra-temporal and intra-decoder attention, readout f_t = [s_t; c^e_t; c^d_t]
  of size D = 2H + C, copy, tied output matrix, no coverage, no input feeding; pgn_lstm.py and
  modules/temporal_attention.py, intra_decoder_attention.py, readouts.py, shared_projection.py)
    encoder          2 directions x S x 2*4He(E + He)
    initial state    2 x 2CH                                   (reduce_hidden, reduce_cell)
    attention keys   S x 2CH                                   (W^e_attn h^e_i, once per source, eq 2)
    decoder LSTM     T x 2*4H(E + H)                           (input: the previous word's embedding only)
    attention scores T x S x 2H                                (e_ti = s_t . W^e_attn h^e_i, eqs 1-2; the temporal
                                                                normalisation, eqs 3-4, is a softmax: not counted)
    context          T x S x 2C                                (c^e_t, eq 5)
    intra-decoder    query (T-1) x 2HH                         (q_t = s_t^T W^d_attn for t >= 2: c^d_1 = 0)
                     scores and context T(T-1)/2 x (2H + 2H)   (the pairs t' < t only, eqs 6-8; the code computes
                                                                the (T-1) x (T-1) square under a causal mask)
    output layer     T x 2DV                                   (W_out f_t + b_out, eq 9)
    copy switch      T x 2D                                    (eq 11)
    per batch:  output matrix 2VED                             (W_out = tanh(W_emb W_proj), eq 13, once per
                                                                forward call: per batch, not per document)
  dca_lstm (Celikyilmaz et al.: M agents, K contextual layers; H = agent state = each BiLSTM direction, Hd
  decoder; dca_lstm.py, modules/agent_encoder.py, agent_attention.py).  S counts the tokens of all agents: the
  split moves tokens between agents, it adds none, and each agent's LSTMs run over its own tokens only
    local layer      2 directions x S x 2*4H(E + H), projection W1: S x 2(2H)H
    contextual layer (each of K) combination S x 2HH (W3 h) + M x 2HH (W4 z, once per agent),
                     2 directions x S x 2*4H(H + H), projection W2: S x 2(2H)H
    initial state    2(2H)Hd                                   (decoder cell from the first agent's final cells;
                                                                + 2HHd for s_0 when Hd != H)
    decoder LSTM     T x 2*4Hd(E + Hd)
    word attention   keys S x 2HA (W5 h, once per source); query T x 2HdA (W6 s_t);
                     scores T x S x (A + A + 2A) (+ q, tanh, v2^T; ~eq 8); contexts c_a^t T x S x 2H (~eq 9)
    agent attention  keys T x M x 2HA (W7 c_a^t); query T x 2HdA (W8 s_t); scores T x M x (A + A + 2A) (~eq 10);
                     document context T x M x 2H (~eq 11)
    readout          T x 2(Hd + 2H)O                           (V [s_t; c*_t; c*_{t-1}] + b, ~eqs 12-13)
    output layer     T x 2OV
    copy switch      T x (M x 2H + 2Hd + 2E)                   (p_a = sigmoid(v5 c_a + v6 s_t + v7 y_t + b), ~eq 14:
                                                                v6 s_t and v7 y_t once per step, not per agent)
  pgn_lstm --decoder-readout luong (Shi et al.: the attentional state h~_t = tanh(W_c [c_t; s_t]) is fed back,
  read out and switched on; no coverage input to the attention with --no-coverage-attention; modules/readouts.py)
    as pgn_lstm, except
    decoder input    T x (2EE + 2HE)                           (x_t = W_x [y; h~_{t-1}], the fed-back h~ of size H)
    readout          T x 2(C + H)H                             (W_c [c_t; s_t], Shi eq 3)
    output layer     T x 2HV                                   (W_vocab h~_t, Shi eq 7)
    copy switch      T x 2H                                    (Shi eq 9)
  global_gate_gru (Song & Zhao: GRU encoder 2 x He, C = 2He, decoder GRU H, attention A (default C), maxout
  readout of pool 2 to O; global_gate_gru.py, modules/selective_gate.py).  A GRU layer over one token with input
  size I and hidden size H: 2 * 3H(I + H)
    encoder          2 directions x S x 2*3He(E + He)                                                    (eqs 1-4)
    global encoding  S x 2CC (u_i = tanh(W_s h_i), eq 5);  scores S x 2C (u_i . u_s, eq 6);  D S x 2C (eq 7)
    selective gate   S x 2CC (W_g h_i) + 2(2C)C once per document (W_g's u_s and D columns), eq 8;
                     without global encoding the gate reads [h_i; D]: S x 2CC + 2CC
    initial state    2CH                                       (s_0 = tanh(W_d D), eq 10)
    attention keys   S x 2CA (U_a h'_i) + 2CA once per document (E_a u_s, eq 18)
    decoder GRU      T x 2*3H(E + C + H)                       (input [w_{t-1}; c_{t-1}], eq 11)
    attention query  T x 2HA;  scores T x S x (A + A + 2A);  context T x S x 2C   (eqs 18, 13, 14)
    readout          T x 2(E + C + H)(2O) (eq 19) + 2C(2O) once per document (its u_s columns)
    output layer     T x 2OV                                   (eq 17)
    copy switch      T x 2(C + H + E)                          (--copy, ours: See et al.'s eq 8)
  self-critical RL (criterions/self_critical_rouge.py, its default path): per document, the encoder once with
  gradient (3 x its terms); y^s and y^g decoded without gradient (1 x the decoder terms each, at the sample
  length); y^s scored by a teacher-forced pass with gradient (3 x at the sample length); the ML part's
  teacher-forced pass on the reference (3 x at the reference length) unless gamma = 1.  Encoder terms are those
  of ``ENCODER_TERMS``; a per-batch term counts 1 x for the decoding and 3 x for each pass with gradient.
  The sample length is an input: the dry run (scripts/experiments/paper_scale.py) takes the reference's.
  fairseq lstm (--encoder-bidirectional, input feeding, dot-product attention; fairseq/models/lstm.py)
    encoder          as above;  initial state 2 x 2CH (encoder_hidden_proj, encoder_cell_proj)
    decoder LSTM     T x 2*4H(E + H + H)                       (input = [embedding; previous output])
    attention query  T x 2HC (input_proj);  scores T x S x 2C;  context T x S x 2C
    attention output T x 2(C + H)H                             (output_proj)
    output layer     T x 2HV
  OpenNMT-py 3.5.1 rnn (brnn encoder 2 x D/2, decoder D, -global_attention mlp, input feeding)
    encoder          2 directions x S x 2*4(D/2)(E + D/2)
    decoder LSTM     T x 2*4D(E + D + D)
    attention keys   S x 2DD (linear_context);  query T x 2DD (linear_query)
    attention scores T x S x (D + D + 2D)                      (no coverage input: 3.5.1's decoder does not
                                                                pass the coverage to its attention)
    context          T x S x 2D;  attention output T x 2(2D)D (linear_out)
    output layer     T x 2DV;  copy switch T x 2D (with -copy_attn)

    python scripts/bench/flops.py [--data-bin runs/bench/lcsts_char/bin] [--max-tokens 4000]
                                                                 # FLOPs per target token per model
"""
import argparse
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Iterable, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DCA_AGENTS, DCA_LAYERS = 3, 2  # M and K of the benchmark's dca_lstm row (the paper's)


@dataclass(frozen=True)
class Sizes:
    """Layer sizes of an encoder-decoder LSTM summarizer (one layer each)."""

    embed: int = 128  # E
    encoder_hidden: int = 256  # He, per direction (encoder states are C = 2 He)
    decoder_hidden: int = 256  # H
    attention: int = 256  # A
    out_embed: int = 256  # O, pgn_lstm's readout size
    vocab: int = 4004  # V, the output layer's size

    @property
    def context(self) -> int:
        return 2 * self.encoder_hidden


def lstm_layer(tokens, input_size: int, hidden: int):
    """The gate products of one LSTM direction over ``tokens`` tokens: 2 * 4H(I + H) each."""
    return tokens * 2 * 4 * hidden * (input_size + hidden)


def pgn_lstm_forward(s: Sizes, src_len, tgt_len, copy: bool = True, coverage: bool = True) -> Dict[str, float]:
    E, C, H, A, O, V = s.embed, s.context, s.decoder_hidden, s.attention, s.out_embed, s.vocab
    S, T = src_len, tgt_len
    parts = {
        "encoder": 2 * lstm_layer(S, E, s.encoder_hidden),
        "initial state": 2 * 2 * C * H,
        "attention keys": S * 2 * C * A,
        "decoder input": T * (2 * E * E + 2 * C * E),
        "decoder LSTM": lstm_layer(T, E, H),
        "attention query": T * 2 * H * A,
        "attention scores": T * S * (A + (2 * A if coverage else 0) + A + 2 * A),
        "context": T * S * 2 * C,
        "readout": T * 2 * (H + C) * O,
        "output layer": T * 2 * O * V,
    }
    if copy:
        parts["copy switch"] = T * 2 * (C + H + E)
    return parts


def gru_layer(tokens, input_size: int, hidden: int):
    """The gate products of one GRU direction over ``tokens`` tokens: 2 * 3H(I + H) each."""
    return tokens * 2 * 3 * hidden * (input_size + hidden)


def pgn_lstm_luong_forward(s: Sizes, src_len, tgt_len, copy: bool = True,
                           coverage_attention: bool = False) -> Dict[str, float]:
    """pgn_lstm with Shi et al.'s readout (module docstring): See et al.'s terms with the fed-back, read-out and
    switched vector h~_t of size H.  ``s.out_embed`` is unused (no V projection)."""
    E, C, H, V = s.embed, s.context, s.decoder_hidden, s.vocab
    T = tgt_len
    parts = pgn_lstm_forward(s, src_len, tgt_len, copy=copy, coverage=coverage_attention)
    parts.update({
        "decoder input": T * (2 * E * E + 2 * H * E),
        "readout": T * 2 * (C + H) * H,
        "output layer": T * 2 * H * V,
    })
    if copy:
        parts["copy switch"] = T * 2 * H
    return parts


def global_gate_gru_forward(s: Sizes, src_len, tgt_len, selective_gate: bool = True, global_encoding: bool = True,
                            copy: bool = False) -> Dict[str, float]:
    """global_gate_gru (module docstring): per document pair; ``s.attention`` is A (the model's default is C)."""
    E, C, H, A, O, V = s.embed, s.context, s.decoder_hidden, s.attention, s.out_embed, s.vocab
    S, T = src_len, tgt_len
    pool = 2  # MAXOUT_POOL of the readout (eq 16)
    parts = {
        "encoder": 2 * gru_layer(S, E, s.encoder_hidden),
        "initial state": 2 * C * H,
        "attention keys": S * 2 * C * A + (2 * C * A if global_encoding else 0),
        "decoder GRU": gru_layer(T, E + C, H),
        "attention query": T * 2 * H * A,
        "attention scores": T * S * (A + A + 2 * A),
        "context": T * S * 2 * C,
        "readout": T * 2 * (E + C + H) * pool * O + (2 * C * pool * O if global_encoding else 0),
        "output layer": T * 2 * O * V,
    }
    if global_encoding:
        parts["global encoding"] = S * 2 * C * C + S * 2 * C + S * 2 * C
    if selective_gate:
        parts["selective gate"] = S * 2 * C * C + 2 * (2 * C if global_encoding else C) * C
    if copy:
        parts["copy switch"] = T * 2 * (C + H + E)
    return parts


def paulus_readout_size(s: Sizes) -> int:
    """D, the size of Paulus et al.'s readout [s_t; c^e_t; c^d_t]: decoder state, encoder context, decoder context."""
    return s.decoder_hidden + s.context + s.decoder_hidden


def paulus_forward(s: Sizes, src_len, tgt_len) -> Dict[str, float]:
    """pgn_lstm_paulus2017's options (module docstring): per document pair.  ``s.attention`` and ``s.out_embed``
    are unused (the bilinear attentions have no inner size, the readout no projection)."""
    E, C, H, V = s.embed, s.context, s.decoder_hidden, s.vocab
    D = paulus_readout_size(s)
    S, T = src_len, tgt_len
    pairs = T * (T - 1) / 2  # (t, t') with t' < t: what the intra-decoder attention attends over
    return {
        "encoder": 2 * lstm_layer(S, E, s.encoder_hidden),
        "initial state": 2 * 2 * C * H,
        "attention keys": S * 2 * C * H,
        "decoder LSTM": lstm_layer(T, E, H),
        "attention scores": T * S * 2 * H,
        "context": T * S * 2 * C,
        "intra-decoder query": (T - 1) * 2 * H * H,
        "intra-decoder scores": pairs * 2 * H,
        "intra-decoder context": pairs * 2 * H,
        "output layer": T * 2 * D * V,
        "copy switch": T * 2 * D,
    }


def paulus_per_batch(s: Sizes) -> Dict[str, float]:
    """The tied output matrix W_out = tanh(W_emb W_proj) (eq 13), computed once per training forward call."""
    return {"output matrix": 2 * s.vocab * s.embed * paulus_readout_size(s)}


def dca_lstm_forward(s: Sizes, src_len, tgt_len, agents: int = 3, contextual_layers: int = 2,
                     contextual_agent_attention: bool = True, copy: bool = True,
                     communication: bool = True) -> Dict[str, float]:
    """dca_lstm (module docstring): per document pair.  ``s.encoder_hidden`` is H, the agent state size (each
    BiLSTM direction, and the projection of the two); ``s.context`` is unused.  Without ``communication`` (the
    poster's ablation) the message term W4 z is not computed; W3 h still is."""
    E, H, Hd, A, O, V = s.embed, s.encoder_hidden, s.decoder_hidden, s.attention, s.out_embed, s.vocab
    S, T, M, K = src_len, tgt_len, agents, contextual_layers
    readout_in = Hd + H * (2 if contextual_agent_attention else 1)  # [s_t; c*_t; c*_{t-1}]
    parts = {
        "local BiLSTM": 2 * lstm_layer(S, E, H),
        "local projection": S * 2 * 2 * H * H,
        "message combination": K * (S * 2 * H * H + (M * 2 * H * H if communication else 0)),
        "contextual BiLSTMs": K * 2 * lstm_layer(S, H, H),
        "contextual projections": K * S * 2 * 2 * H * H,
        "initial state": 2 * 2 * H * Hd + (2 * H * Hd if H != Hd else 0),
        "decoder LSTM": lstm_layer(T, E, Hd),
        "word attention keys": S * 2 * H * A,
        "word attention query": T * 2 * Hd * A,
        "word attention scores": T * S * (A + A + 2 * A),
        "agent contexts": T * S * 2 * H,
        "agent attention keys": T * M * 2 * H * A,
        "agent attention query": T * 2 * Hd * A,
        "agent attention scores": T * M * (A + A + 2 * A),
        "document context": T * M * 2 * H,
        "readout": T * 2 * readout_in * O,
        "output layer": T * 2 * O * V,
    }
    if copy:
        parts["copy switch"] = T * (M * 2 * H + 2 * Hd + 2 * E)
    return parts


def fairseq_lstm_forward(s: Sizes, src_len, tgt_len) -> Dict[str, float]:
    E, C, H, V = s.embed, s.context, s.decoder_hidden, s.vocab
    S, T = src_len, tgt_len
    return {
        "encoder": 2 * lstm_layer(S, E, s.encoder_hidden),
        "initial state": 2 * 2 * C * H if C != H else 0,
        "decoder LSTM": lstm_layer(T, E + H, H),
        "attention query": T * 2 * H * C,
        "attention scores": T * S * 2 * C,
        "context": T * S * 2 * C,
        "attention output": T * 2 * (C + H) * H,
        "output layer": T * 2 * H * V,
    }


def onmt_rnn_forward(s: Sizes, src_len, tgt_len, copy: bool = False) -> Dict[str, float]:
    """OpenNMT-py's brnn + InputFeedRNNDecoder with mlp attention: decoder size D = 2 x encoder hidden."""
    E, D, V = s.embed, s.decoder_hidden, s.vocab
    if s.context != D:
        raise ValueError(f"OpenNMT-py needs the decoder size ({D}) equal to the encoder states (2 x "
                         f"{s.encoder_hidden})")
    S, T = src_len, tgt_len
    parts = {
        "encoder": 2 * lstm_layer(S, E, s.encoder_hidden),
        "decoder LSTM": lstm_layer(T, E + D, D),
        "attention keys": S * 2 * D * D,
        "attention query": T * 2 * D * D,
        "attention scores": T * S * (D + D + 2 * D),
        "context": T * S * 2 * D,
        "attention output": T * 2 * 2 * D * D,
        "output layer": T * 2 * D * V,
    }
    if copy:
        parts["copy switch"] = T * 2 * D
    return parts


def update_flops(forward: Dict[str, float]) -> float:
    """One training update: forward + backward (2 x forward)."""
    return 3 * sum(forward.values())


# Terms computed once per document from the source: the self-critical update runs them once for all its passes.
ENCODER_TERMS = frozenset({"encoder", "initial state", "attention keys", "global encoding", "selective gate",
                           "local BiLSTM", "local projection", "message combination", "contextual BiLSTMs",
                           "contextual projections", "word attention keys"})


def mean_pair(count: "ModelCount", pairs: Tuple[np.ndarray, np.ndarray]) -> Dict[str, float]:
    """Each forward term of one document pair, averaged over ``pairs`` (not the terms of the mean lengths: the
    attention and the intra-decoder terms are not linear in them)."""
    src_len, tgt_len = (np.asarray(x, dtype=np.float64) for x in pairs)
    return {name: value / src_len.size for name, value in total_parts(count.per_pair, (src_len, tgt_len)).items()}


def ml_update_flops(count: "ModelCount", pairs: Tuple[np.ndarray, np.ndarray], batch: int) -> float:
    """One ML update of ``batch`` documents like ``pairs`` on average: 3 x (batch x the mean pair's forward +
    the per-batch terms)."""
    return 3 * (batch * sum(mean_pair(count, pairs).values()) + sum(count.per_batch.values()))


def self_critical_update_flops(count: "ModelCount", pairs: Tuple[np.ndarray, np.ndarray], batch: int,
                               ml: bool = True) -> float:
    """One self-critical update (module docstring, self-critical RL) of ``batch`` documents like ``pairs``, the
    samples as long as the references; ``ml``: gamma < 1, so the ML part's pass runs too."""
    terms = mean_pair(count, pairs)
    encoder = sum(value for name, value in terms.items() if name in ENCODER_TERMS)
    decoder = sum(terms.values()) - encoder
    passes_with_gradient = 2 if ml else 1  # y^s scored, and the ML part's pass
    per_document = 3 * encoder + 2 * decoder + 3 * passes_with_gradient * decoder
    return batch * per_document + (1 + 3 * passes_with_gradient) * sum(count.per_batch.values())


def model_count(args, vocab: int) -> "ModelCount":
    """The forward FLOPs of the model fairseq builds from ``args`` (its architecture's defaults filled in, as
    ``options.parse_args_and_arch`` leaves them) with ``vocab`` regular output words: the formula of its family and
    options (module docstring).  A combination without a formula here is an error, never a guess."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY

    family = ARCH_MODEL_NAME_REGISTRY.get(args.arch)
    attention = getattr(args, "attention_dim", None) or 2 * args.encoder_hidden_size  # global_gate_gru: C
    sizes = Sizes(embed=args.encoder_embed_dim, encoder_hidden=args.encoder_hidden_size,
                  decoder_hidden=args.decoder_hidden_size, attention=attention,
                  out_embed=getattr(args, "decoder_out_embed_dim", None) or args.decoder_hidden_size, vocab=vocab)
    if family == "pgn_lstm":
        return pgn_lstm_count(args, sizes)
    if family == "global_gate_gru":
        return ModelCount(partial(global_gate_gru_forward, sizes, selective_gate=not args.no_selective_gate,
                                  global_encoding=not args.no_global_encoding, copy=args.copy))
    if family == "dca_lstm":
        return ModelCount(partial(dca_lstm_forward, sizes, agents=args.num_agents,
                                  contextual_layers=args.contextual_layers,
                                  contextual_agent_attention=not args.no_contextual_agent_attention,
                                  copy=not args.no_copy, communication=not args.no_communication))
    raise ValueError(f"flops.model_count: no formula for --arch {args.arch} (family {family})")


def pgn_lstm_count(args, sizes: Sizes) -> "ModelCount":
    """pgn_lstm's three readouts (see, luong, paulus) with the options each formula covers."""
    copy = not args.no_copy
    coverage_attention = not args.no_coverage and not args.no_coverage_attention
    paulus = (args.intra_temporal_attention, args.intra_decoder_attention, args.decoder_readout, copy)
    if paulus == (True, True, "paulus", True) and not coverage_attention:
        per_batch = paulus_per_batch(sizes) if args.shared_output_projection else {}
        return ModelCount(partial(paulus_forward, sizes), per_batch)
    if args.intra_temporal_attention or args.intra_decoder_attention or args.shared_output_projection:
        raise ValueError("flops.model_count: pgn_lstm's Paulus options count only all together (pgn_lstm_paulus2017)")
    if args.decoder_readout == "luong":
        return ModelCount(partial(pgn_lstm_luong_forward, sizes, copy=copy, coverage_attention=coverage_attention))
    if args.decoder_readout == "see":
        return ModelCount(partial(pgn_lstm_forward, sizes, copy=copy, coverage=coverage_attention))
    raise ValueError(f"flops.model_count: no formula for pgn_lstm --decoder-readout {args.decoder_readout}")


def flops_per_target_token(forward: Callable[..., Dict[str, float]], pairs: Tuple[np.ndarray, np.ndarray],
                           per_batch: Dict[str, float] = None, batches: int = 0) -> float:
    """Training FLOPs per target token over document pairs (source lengths, target lengths): the work of the
    whole set divided by its target tokens, so that achieved FLOP/s = this x target tokens/s.

    per_batch: forward terms computed once per batch (default none); batches: how many batches the pairs make
    (``batch_count``), needed with per_batch."""
    src_len, tgt_len = (np.asarray(x, dtype=np.float64) for x in pairs)
    if src_len.shape != tgt_len.shape or src_len.size == 0:
        raise ValueError("flops_per_target_token: need as many source as target lengths, at least one")
    total = total_parts(forward, (src_len, tgt_len), per_batch, batches)
    return update_flops(total) / float(tgt_len.sum())


def total_parts(forward: Callable[..., Dict[str, float]], pairs: Tuple[np.ndarray, np.ndarray],
                per_batch: Dict[str, float] = None, batches: int = 0) -> Dict[str, float]:
    """Each forward term summed over the document pairs (and the batches they make, for per-batch terms)."""
    src_len, tgt_len = (np.asarray(x, dtype=np.float64) for x in pairs)
    if per_batch and batches <= 0:
        raise ValueError("flops_per_target_token: per-batch terms need the number of batches (batches > 0)")
    parts = forward(src_len, tgt_len)  # per-document terms (the initial state) are scalars: one per pair
    total = {name: float(np.sum(np.broadcast_to(value, src_len.shape))) for name, value in parts.items()}
    for name, value in (per_batch or {}).items():
        total[f"{name} (per batch)"] = batches * float(value)
    return total


@dataclass(frozen=True)
class ModelCount:
    """One benchmark row's forward FLOPs: ``per_pair(src_len, tgt_len)`` gives the terms of one document pair
    (numpy arrays work: one value per pair), ``per_batch`` the terms computed once per batch."""

    per_pair: Callable[..., Dict[str, float]]
    per_batch: Dict[str, float] = field(default_factory=dict)

    def per_target_token(self, pairs: Tuple[np.ndarray, np.ndarray], batches: int = 0) -> float:
        return flops_per_target_token(self.per_pair, pairs, self.per_batch, batches)

    def shares(self, pairs: Tuple[np.ndarray, np.ndarray], batches: int = 0) -> Dict[str, float]:
        """Each term's share of the work over the pairs (fractions summing to 1), largest first."""
        total = total_parts(self.per_pair, pairs, self.per_batch, batches)
        whole = sum(total.values())
        return dict(sorted(((name, value / whole) for name, value in total.items()), key=lambda kv: -kv[1]))


def batch_count(pairs: Tuple[np.ndarray, np.ndarray], max_tokens: int) -> int:
    """How many batches fairseq makes of these document pairs with --max-tokens (one epoch): its translation
    dataset's order (by target, then source length; unshuffled here, which moves the count by a batch or so)
    and ``data_utils.batch_by_size`` with a document costing max(source, target) tokens, padded to the longest
    of its batch, and a batch-size multiple of 1 (the summarization task's)."""
    from fairseq.data import data_utils

    src_len, tgt_len = (np.asarray(x, dtype=np.int64) for x in pairs)
    indices = np.arange(len(src_len), dtype=np.int64)
    indices = indices[np.argsort(tgt_len[indices], kind="mergesort")]
    indices = indices[np.argsort(src_len[indices], kind="mergesort")]
    num_tokens = np.maximum(src_len, tgt_len)
    if num_tokens.max(initial=0) > max_tokens:
        raise ValueError(f"batch_count: a document of {num_tokens.max()} tokens does not fit --max-tokens {max_tokens}")
    batches = data_utils.batch_by_size(indices, lambda i: int(num_tokens[i]), num_tokens_vec=num_tokens[indices],
                                       max_tokens=max_tokens, required_batch_size_multiple=1)
    return len(batches)


def dataset_lengths(bin_dir: Path, split: str = "train") -> Tuple[np.ndarray, np.ndarray]:
    """Source and target lengths (with </s>, as the models see them) of a binarized split."""
    from fairseq.data import data_utils

    lengths = []
    for lang in ("src", "tgt"):
        dataset = data_utils.load_indexed_dataset(str(bin_dir / f"{split}.src-tgt.{lang}"), None)
        if dataset is None:
            raise FileNotFoundError(f"no {split} split in {bin_dir} (files {split}.src-tgt.{lang}.*)")
        lengths.append(np.array(dataset.sizes, dtype=np.int64))  # a copy: the sizes live in the closing mmap
    return lengths[0], lengths[1]


def model_flops(bin_dir: Path, onmt_vocab: int = None, onmt_hidden: int = 512) -> dict:
    """Each row of throughput.py's table, its forward FLOPs (ModelCount: per document pair, as a function of
    (source length, target length), and per batch): the formulas above with the benchmark's sizes and the data's
    output vocabularies."""
    from fairseq.data import Dictionary

    import fairseq_plugins  # noqa: F401
    from fairseq_plugins.text.markers import first_marker_index

    dictionary = Dictionary.load(str(bin_dir / "dict.tgt.txt"))
    regular = first_marker_index(dictionary)
    onmt_sizes = Sizes(encoder_hidden=onmt_hidden // 2, decoder_hidden=onmt_hidden, attention=onmt_hidden,
                       vocab=onmt_vocab or regular)
    return {
        "onmt": ModelCount(partial(onmt_rnn_forward, onmt_sizes)),
        "onmt_copy_cov": ModelCount(partial(onmt_rnn_forward, onmt_sizes, copy=True)),
        "lstm": ModelCount(partial(fairseq_lstm_forward, Sizes(vocab=len(dictionary)))),
        "pgn_lstm": ModelCount(partial(pgn_lstm_forward, Sizes(vocab=regular))),
        "pgn_lstm_modules": ModelCount(partial(pgn_lstm_forward, Sizes(vocab=regular))),  # the same model
        "pgn_lstm_fairseq_search": ModelCount(partial(pgn_lstm_forward, Sizes(vocab=regular))),  # the same model
        "pgn_lstm_foreach_adam": ModelCount(partial(pgn_lstm_forward, Sizes(vocab=regular))),  # the same model
        "pgn_lstm_a512": ModelCount(partial(pgn_lstm_forward, Sizes(attention=512, vocab=regular))),
        "pgn_lstm_paulus2017": ModelCount(partial(paulus_forward, Sizes(vocab=regular)),
                                          paulus_per_batch(Sizes(vocab=regular))),
        "dca_lstm": ModelCount(partial(dca_lstm_forward, Sizes(vocab=regular), agents=DCA_AGENTS,
                                       contextual_layers=DCA_LAYERS)),
    }


def describe(forward: Dict[str, float]) -> Iterable[str]:
    total = sum(forward.values())
    for name, value in sorted(forward.items(), key=lambda kv: -kv[1]):
        yield f"  {name:<33} {value / 1e6:10.2f} MFLOP  {100 * value / total:5.1f}%"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-bin", type=Path, default=ROOT / "runs" / "bench" / "lcsts_char" / "bin")
    parser.add_argument("--max-tokens", type=int, default=4000, help="tokens per batch (for the per-batch terms)")
    args = parser.parse_args(argv)
    pairs = dataset_lengths(args.data_bin)
    batches = batch_count(pairs, args.max_tokens)
    print(f"{args.data_bin}: {len(pairs[0])} training pairs, mean source {pairs[0].mean():.1f} and target "
          f"{pairs[1].mean():.1f} tokens, {batches} batches of --max-tokens {args.max_tokens}")
    mean_src, mean_tgt = float(pairs[0].mean()), float(pairs[1].mean())
    docs_per_batch = len(pairs[0]) / batches
    for name, count in model_flops(args.data_bin).items():
        print(f"{name}: {count.per_target_token(pairs, batches) / 1e6:.2f} MFLOP per target token (training); "
              f"forward of a mean pair" + (" (per-batch terms shared by its batch's documents):"
                                           if count.per_batch else ":"))
        parts = dict(count.per_pair(mean_src, mean_tgt))
        parts.update({f"{key} (per batch)": value / docs_per_batch for key, value in count.per_batch.items()})
        for line in describe(parts):
            print(line)


if __name__ == "__main__":
    main()

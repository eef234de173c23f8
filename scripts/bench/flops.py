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
What is not counted: biases, gate nonlinearities and cell updates of the LSTMs, softmaxes, dropout, the losses
and the optimizer: all O(H) or O(V) per token, against O(H^2) and O(H V) for the products; together under 1%
of the total at the benchmark's sizes (emb 128, hidden 256, vocabulary about 4,000).
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

    python scripts/bench/flops.py [--data-bin runs/bench/lcsts_char/bin]   # FLOPs per target token per model
"""
import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


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


def flops_per_target_token(forward: Callable[..., Dict[str, float]], pairs: Tuple[np.ndarray, np.ndarray]) -> float:
    """Training FLOPs per target token over document pairs (source lengths, target lengths): the work of the
    whole set divided by its target tokens, so that achieved FLOP/s = this x target tokens/s."""
    src_len, tgt_len = (np.asarray(x, dtype=np.float64) for x in pairs)
    if src_len.shape != tgt_len.shape or src_len.size == 0:
        raise ValueError("flops_per_target_token: need as many source as target lengths, at least one")
    parts = forward(src_len, tgt_len)  # per-document terms (the initial state) are scalars: one per pair
    total = {name: float(np.sum(np.broadcast_to(value, src_len.shape))) for name, value in parts.items()}
    return update_flops(total) / float(tgt_len.sum())


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


def describe(forward: Dict[str, float]) -> Iterable[str]:
    total = sum(forward.values())
    for name, value in sorted(forward.items(), key=lambda kv: -kv[1]):
        yield f"  {name:<17} {value / 1e6:10.2f} MFLOP  {100 * value / total:5.1f}%"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-bin", type=Path, default=ROOT / "runs" / "bench" / "lcsts_char" / "bin")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from throughput import model_flops  # noqa: E402

    pairs = dataset_lengths(args.data_bin)
    print(f"{args.data_bin}: {len(pairs[0])} training pairs, mean source {pairs[0].mean():.1f} and target "
          f"{pairs[1].mean():.1f} tokens")
    mean_src, mean_tgt = float(pairs[0].mean()), float(pairs[1].mean())
    for name, forward in model_flops(args.data_bin).items():
        print(f"{name}: {flops_per_target_token(forward, pairs) / 1e6:.2f} MFLOP per target token (training); "
              f"forward of a mean pair:")
        for line in describe(forward(mean_src, mean_tgt)):
            print(line)


if __name__ == "__main__":
    main()

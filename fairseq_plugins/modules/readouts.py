"""Readouts of an attentional LSTM decoder: from the decoder state s_t and the context, what the next step is fed
(input feeding), the features of the output layer (whose softmax is P_vocab) and the copy switch's logit.

    readout   fed back            output features                           switch (p_gen = sigmoid)
    see       h*_t (See eq 3)     V [s_t; h*_t] + b          (See eq 4)     [h*_t; s_t; x_t]    (See eq 8)
    luong     h~_t (Shi eq 3)     h~_t = tanh(W_c [c_t; h_t]) (Shi eq 7)    h~_t                (Shi eq 9)
    paulus    nothing             [h^d_t; c^e_t; c^d_t]      (Paulus eq 9)  [h^d_t; c^e_t; c^d_t] (Paulus eq 11)

"context" is the encoder context (h*_t, c_t, c^e_t), followed by the intra-decoder context c^d_t when the decoder
has one (Paulus eqs 6-8): ``context_size`` counts both.  A readout that feeds nothing back
(``feed_size == 0``) lets the decoder run its LSTM over all steps at once in training.

Paulus et al.'s switch is p(u_t = 1) = sigmoid(W_u f + b_u) with u_t = 1 meaning COPY (Paulus eq 11), the reverse
of See et al.'s p_gen; the same ``GenerationSwitch`` gives p_gen = 1 - p(u_t = 1) = sigmoid(-W_u f - b_u): the
same model with the weights negated.
"""
import torch
import torch.nn as nn
from torch import Tensor

from fairseq_plugins.modules.copy_mixture import GenerationSwitch
from fairseq_plugins.modules.factories import Linear


class SeeReadout(nn.Module):
    """See et al.'s readout: the context h*_t is fed back as the next input;
    P_vocab = softmax(V'(V [s_t; h*_t] + b) + b')  (See eq 4);  p_gen from [h*_t; s_t; x_t]  (See eq 8)."""

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
        """Input of V' (See eq 4).  B x T x out_dim."""
        return self.pre_output(torch.cat([states, contexts], dim=2))

    def switch_logit(self, states, contexts, feeds, inputs) -> Tensor:
        return self.switch.logit(contexts, states, inputs)  # B x T x 1   (See eq 8, before the sigmoid)


class LuongReadout(nn.Module):
    """Shi et al. (2018)'s readout, Luong et al.'s attentional hidden state:
    h~_t = tanh(W_c [c_t; h_t])  (Shi eq 3), fed back as the next input;  P_vocab = softmax(W_vocab h~_t + b)
    (Shi eq 7);  copy switch sigmoid(W_h^T h~_t + b)  (Shi eq 9).  The switch's output weighs P_vocab in Shi eq 10,
    as p_gen does in See eq 9 (calling it p_copy and weighing the copy side instead is the same model with -W_h,
    -b)."""

    def __init__(self, hidden_size: int, context_size: int, copy: bool):
        super().__init__()
        self.feed_size = hidden_size
        self.out_dim = hidden_size
        self.attentional = Linear(context_size + hidden_size, hidden_size)  # W_c
        self.switch = GenerationSwitch([hidden_size]) if copy else None

    def feed(self, state: Tensor, context: Tensor) -> Tensor:
        return torch.tanh(self.attentional(torch.cat([context, state], dim=1)))  # B x H   h~_t (Shi eq 3)

    def features(self, states, contexts, feeds, inputs) -> Tensor:
        return feeds  # h~_t, the input of W_vocab (Shi eq 7)

    def switch_logit(self, states, contexts, feeds, inputs) -> Tensor:
        return self.switch.logit(feeds)  # B x T x 1   (Shi eq 9, before the sigmoid)


class PaulusReadout(nn.Module):
    """Paulus et al. (2017)'s readout: nothing is fed back (the decoder reads the previous word's embedding
    only);  p(y_t | u_t = 0) = softmax(W_out [h^d_t; c^e_t; c^d_t] + b_out)  (Paulus eq 9), the output layer being
    the decoder's (``W_out`` free, or tied to the embeddings by Paulus eq 13);  the switch reads the same vector
    (Paulus eq 11; see the module docstring for its direction)."""

    def __init__(self, hidden_size: int, context_size: int, copy: bool):
        super().__init__()
        self.feed_size = 0
        self.out_dim = hidden_size + context_size
        self.switch = GenerationSwitch([hidden_size, context_size]) if copy else None

    def feed(self, state: Tensor, context: Tensor) -> Tensor:
        return state.new_zeros(state.size(0), 0)  # B x 0

    def features(self, states, contexts, feeds, inputs) -> Tensor:
        return torch.cat([states, contexts], dim=2)  # B x T x out_dim   [h^d_t; c^e_t; c^d_t]

    def switch_logit(self, states, contexts, feeds, inputs) -> Tensor:
        return self.switch.logit(states, contexts)  # B x T x 1   (Paulus eq 11, as p_gen = 1 - p(u_t = 1))


FEEDS_BACK = {"see": True, "luong": True, "paulus": False}  # whether the readout feeds a vector into the next input


def readout_feeds_back(name: str) -> bool:
    """Whether the readout called ``name`` feeds a vector back (its ``feed_size`` > 0), before it is built."""
    if name not in FEEDS_BACK:
        raise ValueError(f"unknown --decoder-readout {name!r} (see, luong, paulus)")
    return FEEDS_BACK[name]


def build_readout(name: str, hidden_size: int, context_size: int, embed_dim: int, out_dim: int,
                  copy: bool) -> nn.Module:
    """The readout called ``name`` (see, luong, paulus); ``out_dim`` is See's V size (ignored by the others)."""
    if name == "see":
        return SeeReadout(hidden_size, context_size, embed_dim, out_dim, copy)
    if name == "luong":
        return LuongReadout(hidden_size, context_size, copy)
    if name == "paulus":
        return PaulusReadout(hidden_size, context_size, copy)
    raise ValueError(f"unknown --decoder-readout {name!r} (see, luong, paulus)")

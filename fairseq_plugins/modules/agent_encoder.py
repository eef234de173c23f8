"""The deep communicating agents' encoder (Celikyilmaz et al. 2018, section 2): M agents, one paragraph each, with
shared parameters, a local BiLSTM layer and K contextual BiLSTM layers between which the agents exchange messages.

Notation: agent a holds I_a tokens; h^(k)_{a,i} is the state of its token i at layer k (size H).  Equation
numbers follow our notes on the paper (../shared/papers/DCA_AND_PAULUS.md); [U] marks our reading of what the
paper leaves open.

    local layer:      h^(1)_{a,i} = W1 [h->_{a,i}; h<-_{a,i}],  (h->, h<-) = BiLSTM(e_{a,1..I_a})
                      (the two directions projected to H: [U], as both public reimplementations do)
    message:          z^(k)_a = 1/(M-1) sum_{m != a} h^(k)_{m, I_m}            (the mean of the OTHER agents'
                      last states at layer k, each at its true last token, never at padding)
    combination:      f(h, z) = tanh(W3 h + W4 z)                               (Celikyilmaz eq 7, without v1:
                      see below)
    contextual layer: h^(k+1)_{a,i} = W2^(k) BiLSTM(f(h^(k)_{a,i}, z^(k)_a))   (k = 1..K)

v1 in Celikyilmaz eq 7.  The paper writes f(h, z) = v1^T tanh(W3 h + W4 z); read literally, v1^T gives one number per
token, which cannot be the next BiLSTM's H-dimensional input.  We drop v1 (both public reimplementations do),
so the BiLSTM reads tanh(W3 h + W4 z) directly; ``message_v1=True`` instead reads v1 as an H x H matrix applied
after the tanh.  W3 and W4 (and v1) belong to each contextual layer (the paper does not index them by layer [U]);
they have no bias, as Celikyilmaz eq 7 has none.

Messages.  ``agent_messages`` computes all agents' messages at once from the B x M last states: the sum over
the non-empty agents minus the agent's own state, divided by the number of other non-empty agents.  An empty
agent (a document shorter than M units, see agent_split.py) sends nothing; an agent without a non-empty
partner (M = 1, or a one-paragraph document) receives z = 0, as does every agent with ``communicate=False``
(the paper's "no communication" ablation), so that the agents are then independent encoders.

All agents of all documents run as one batch of B*M sequences (no loop over agents).  Each direction of each
BiLSTM layer runs over the agents' right-padded tokens in plain LSTM calls, each over its own length
(``run_lstm``; the backward direction reads every agent reversed), so every state is exact (no state reads
padding) while avoiding PackedSequence, whose backward pass is slow on a CPU.  Time and memory are linear in the
document length.
"""
from typing import List, NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.modules.factories import Dropout, LSTM, Linear, rnn_precision


def run_lstm(lstm: nn.LSTM, x: Tensor, lengths: Tensor):
    """A one-layer, one-direction, batch-first LSTM over right-padded sequences, each over its own length (0
    allowed), exactly: no state ever reads padding.

    The rows are sorted by length; the time axis is cut at every distinct length, and each piece runs as one
    plain call over the rows still going, starting from the states where the previous piece stopped.  The
    sequential work is that of one call over the longest row, and no PackedSequence is used (its backward pass
    is far slower on a CPU: docs/design.md).

    Args:
        lstm: a one-direction one-layer ``nn.LSTM`` (batch_first); x: N x L x D; lengths: N.
    Returns:
        outputs N x L x H (zero beyond each length); hidden and cell N x H, each row's state after its last token
        (zero for an empty row).
    """
    num, width, _ = x.shape
    order = torch.argsort(lengths, descending=True, stable=True)  # N: longest first
    sizes = lengths.index_select(0, order).tolist()
    ordered = x.index_select(0, order)  # N x L x D
    ends = sorted({n for n in sizes if n > 0})
    # The time pieces come from one split (its backward concatenates their gradients once; slicing each piece
    # from the whole tensor would allocate a whole-size gradient per piece, quadratic in the length).
    widths = [end - start for start, end in zip([0] + ends, ends)]
    pieces = ordered[:, :ends[-1]].split(widths, dim=1) if ends else []
    outputs, finals, state, start = [], [], None, 0
    for end, inputs in zip(ends, pieces):
        going = sum(1 for n in sizes if n >= end)  # rows still running: a prefix of the sorted rows
        done = sum(1 for n in sizes if n > end)  # rows going on after this piece
        if state is not None:
            state = (state[0][:, :going], state[1][:, :going])
        with rnn_precision(inputs):
            piece, state = lstm(inputs[:going], state)  # going x (end - start) x H
        outputs.append(F.pad(piece, (0, 0, 0, 0, 0, num - going)))  # N x (end - start) x H
        finals.append((state[0][0, done:going], state[1][0, done:going]))  # the rows that end here
        start = end
    empty = num - sum(1 for n in sizes if n > 0)
    zeros = x.new_zeros(empty, lstm.hidden_size)
    restore = torch.argsort(order)
    if outputs:
        padded = F.pad(torch.cat(outputs, dim=1), (0, 0, 0, width - start))  # N x L x H
    else:
        padded = x.new_zeros(num, width, lstm.hidden_size)
    hidden = torch.cat([h for h, _ in reversed(finals)] + [zeros]).index_select(0, restore)  # N x H
    cell = torch.cat([c for _, c in reversed(finals)] + [zeros]).index_select(0, restore)  # N x H
    return padded.index_select(0, restore), hidden, cell


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Each row's first ``lengths`` steps in reverse order, padding left in place.  x: N x L x D."""
    positions = torch.arange(x.size(1), device=x.device).unsqueeze(0)  # 1 x L
    index = torch.where(positions < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - positions, positions)  # N x L
    return x.gather(1, index.unsqueeze(2).expand_as(x))


def run_bilstm(forward: nn.LSTM, backward: nn.LSTM, x: Tensor, lengths: Tensor):
    """A bidirectional LSTM layer over right-padded sequences, each over its own length, exactly: the backward
    direction reads each row reversed (``reverse_padded``), so both directions run as ``run_lstm``.

    Args:
        forward, backward: one-direction one-layer batch-first ``nn.LSTM``s; x: N x L x D; lengths: N.
    Returns:
        outputs N x L x 2H ([forward; backward] at each token, zero beyond each length) and the final cells
        N x 2H (forward after the last token, backward after the first; zero for empty rows).
    """
    out_forward, _, cell_forward = run_lstm(forward, x, lengths)
    out_reversed, _, cell_backward = run_lstm(backward, reverse_padded(x, lengths), lengths)
    outputs = torch.cat([out_forward, reverse_padded(out_reversed, lengths)], dim=2)  # N x L x 2H
    return outputs, torch.cat([cell_forward, cell_backward], dim=1)


def last_states(states: Tensor, lengths: Tensor) -> Tensor:
    """h_{a, I_a}: each agent's state at its last token, zero for an empty agent.

    states: B x M x S_a x H; lengths: B x M.  Returns B x M x H."""
    bsz, agents, _, size = states.shape
    index = (lengths - 1).clamp(min=0).view(bsz, agents, 1, 1).expand(bsz, agents, 1, size)
    last = states.gather(2, index).squeeze(2)  # B x M x H
    return last * (lengths > 0).unsqueeze(2).to(last.dtype)


def agent_messages(last: Tensor, nonempty: Tensor) -> Tensor:
    """z_a = 1/(M'-1) sum_{m != a, m non-empty} h_{m, I_m}: the mean of the OTHER non-empty agents' last states
    (M' non-empty agents; 0 when an agent has no non-empty partner).

    last: B x M x H (zero for empty agents); nonempty: B x M (bool).  Returns B x M x H."""
    weights = nonempty.to(last.dtype).unsqueeze(2)  # B x M x 1
    total = (last * weights).sum(dim=1, keepdim=True)  # B x 1 x H
    others = total - last * weights  # B x M x H: everyone's sum but one's own
    partners = weights.sum(dim=1, keepdim=True) - weights  # B x M x 1: non-empty agents other than a
    return others / partners.clamp(min=1.0)


class MessageCombination(nn.Module):
    """f(h, z) = tanh(W3 h + W4 z)  (Celikyilmaz eq 7 without v1; ``v1_matrix``: v1 tanh(W3 h + W4 z), v1 an
    H x H matrix).

    Args:
        size: H, the size of h, z and the output.
        v1_matrix: apply v1 as an H x H matrix after the tanh [U] (default: drop v1, as the reimplementations do).
    """

    def __init__(self, size: int, v1_matrix: bool = False):
        super().__init__()
        self.own = Linear(size, size, bias=False)  # W3
        self.message = Linear(size, size, bias=False)  # W4
        self.v1 = Linear(size, size, bias=False) if v1_matrix else None

    def forward(self, states: Tensor, messages: Optional[Tensor]) -> Tensor:
        """states: B x M x S_a x H; messages: B x M x H or None (no communication).  Returns B x M x S_a x H."""
        combined = self.own(states)  # B x M x S_a x H
        if messages is not None:
            combined = combined + self.message(messages).unsqueeze(2)  # W4 z, the same for every token of a
        combined = torch.tanh(combined)  # Celikyilmaz eq 7
        return self.v1(combined) if self.v1 is not None else combined


class AgentLayer(nn.Module):
    """One bidirectional LSTM layer run by every agent (shared parameters), the two directions projected to H.

    Args:
        input_size: size of the layer's input; hidden_size: H, per direction and after the projection.
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.forward_lstm = LSTM(input_size, hidden_size)
        self.backward_lstm = LSTM(input_size, hidden_size)
        self.projection = Linear(2 * hidden_size, hidden_size)  # W1 (local) / W2 (contextual) [U]

    def forward(self, x: Tensor, lengths: Tensor, padding_mask: Tensor):
        """x: B x M x S_a x D; lengths: B x M; padding_mask: B x M x S_a.  Returns the states B x M x S_a x H
        (zero at padding) and the final cells B x M x 2H."""
        bsz, agents, width, _ = x.shape
        outputs, cells = run_bilstm(self.forward_lstm, self.backward_lstm, x.reshape(bsz * agents, width, -1),
                                    lengths.reshape(-1))  # (B*M) x S_a x 2H, (B*M) x 2H
        states = self.projection(outputs).view(bsz, agents, width, -1)  # B x M x S_a x H
        return states.masked_fill(padding_mask.unsqueeze(3), 0.0), cells.view(bsz, agents, -1)


class EncodedAgents(NamedTuple):
    """What ``AgentEncoder`` returns: top-layer states B x M x S_a x H, the top layer's final cells
    B x M x 2H (forward at the last token, backward at the first), each layer's last states [B x M x H] and the
    messages each contextual layer received [B x M x H, or None without communication]."""

    states: Tensor
    final_cells: Tensor
    layer_last: List[Tensor]
    messages: List[Optional[Tensor]]


class AgentEncoder(nn.Module):
    """The local layer and K contextual layers over all agents at once (module docstring).

    Args:
        input_size: embedding size; hidden_size: H.
        contextual_layers: K >= 0.
        communicate: exchange messages between layers (False: the "no communication" ablation).
        message_v1: v1 of Celikyilmaz eq 7 as an H x H matrix (default: dropped).
        dropout: on each layer's input after the first (the local layer's input is the caller's to drop out).
    """

    def __init__(self, input_size: int, hidden_size: int, contextual_layers: int = 2, communicate: bool = True,
                 message_v1: bool = False, dropout: float = 0.0):
        super().__init__()
        if contextual_layers < 0:
            raise ValueError(f"--contextual-layers must be >= 0, not {contextual_layers}")
        self.communicate = communicate
        self.local = AgentLayer(input_size, hidden_size)
        self.combine = nn.ModuleList([MessageCombination(hidden_size, message_v1) for _ in range(contextual_layers)])
        self.contextual = nn.ModuleList([AgentLayer(hidden_size, hidden_size) for _ in range(contextual_layers)])
        self.dropout = Dropout(dropout)

    def forward(self, embedded: Tensor, lengths: Tensor, padding_mask: Tensor) -> EncodedAgents:
        """embedded: B x M x S_a x E; lengths: B x M; padding_mask: B x M x S_a."""
        nonempty = lengths > 0  # B x M
        states, cells = self.local(embedded, lengths, padding_mask)  # h^(1): B x M x S_a x H
        layer_last, messages = [last_states(states, lengths)], []
        talk = self.communicate and lengths.size(1) > 1
        for combine, layer in zip(self.combine, self.contextual):
            message = agent_messages(layer_last[-1], nonempty) if talk else None  # z^(k): B x M x H
            messages.append(message)
            layer_input = self.dropout(combine(states, message))  # f(h^(k), z^(k))   (Celikyilmaz eq 7)
            states, cells = layer(layer_input, lengths, padding_mask)  # h^(k+1)
            layer_last.append(last_states(states, lengths))
        return EncodedAgents(states, cells, layer_last, messages)

"""Global encoding and the selective gate over encoder states (Song & Zhao 2020, Song eqs 5-9).

A single learned vector u_s (the "global encoding", shared by the whole training set, not computed from the
input) acts as the query of an attention pooling that summarizes a document into D, and the selective gate
then filters every encoder state with the document and the global vector:
    u_i      = tanh(W_s h_i + b_s)                                      (Song eq 5)
    alpha_i  = softmax_i(u_i^T u_s)                                     (Song eq 6)
    D        = sum_i alpha_i h_i                                        (Song eq 7)
    g_i      = sigmoid(W_g [h_i; u_s; D] + b_g)                         (Song eq 8)
    h'_i     = g_i (.) h_i                                              (Song eq 9)

Without global encoding (the paper's ablation), D is the plain mean of the encoder states (``masked_mean``) and
the gate reads [h_i; D] only.  In Song eq 8 the terms W_g u_s and W_g D do not depend on the position i: they are
computed once per document and broadcast, instead of building the B x S x 3C concatenation.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_plugins.modules.factories import TorchLinear


def masked_mean(states: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
    """Mean of the non-padding states.  states: B x S x C, padding_mask: B x S (True at padding) -> B x C."""
    if padding_mask is None:
        return states.mean(dim=1)  # B x C
    keep = (~padding_mask).unsqueeze(2).type_as(states)  # B x S x 1
    return (states * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)  # B x C


class GlobalDocumentEncoding(nn.Module):
    """The global encoding vector u_s and the document representation D it pools (Song eqs 5-7).

    Args:
        state_dim: size C of an encoder state h_i (and of u_s, as in the paper: u_s in R^{2 d_h}).
    """

    def __init__(self, state_dim: int):
        super().__init__()
        self.u_s = nn.Parameter(torch.empty(state_dim))  # u_s
        nn.init.normal_(self.u_s, mean=0.0, std=state_dim**-0.5)  # u_i^T u_s starts at O(1) scale
        self.proj = TorchLinear(state_dim, state_dim)  # W_s, b_s

    def global_vector(self, bsz: int) -> Tensor:
        """u_s for every document of a batch: B x C (a view, no copy)."""
        return self.u_s.unsqueeze(0).expand(bsz, -1)  # B x C

    def forward(self, states: Tensor, padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """states: B x S x C (h_i), padding_mask: B x S (True at padding) or None.

        Returns D: B x C and the pooling weights alpha: B x S (zero at padding, sum to 1 over the source)."""
        u = torch.tanh(self.proj(states))  # B x S x C   (Song eq 5)
        scores = torch.matmul(u, self.u_s)  # B x S   (u_i^T u_s)
        if padding_mask is not None:
            scores = scores.float().masked_fill(padding_mask, float("-inf")).type_as(scores)  # FP16-safe
        alpha = torch.softmax(scores, dim=1)  # B x S   (Song eq 6)
        document = torch.bmm(alpha.unsqueeze(1), states).squeeze(1)  # B x C   (Song eq 7)
        return document, alpha


class SelectiveGate(nn.Module):
    """g_i = sigmoid(W_g [h_i; u_s; D] + b_g), h'_i = g_i (.) h_i (Song eqs 8-9).

    Args:
        state_dim: size C of an encoder state h_i (the gate has the same size).
        global_dim: size of u_s, or 0 when there is no global encoding (the gate then reads [h_i; D]).
        document_dim: size of D (default: state_dim).
    """

    def __init__(self, state_dim: int, global_dim: int, document_dim: Optional[int] = None):
        super().__init__()
        self.state_dim = state_dim
        self.global_dim = global_dim
        document_dim = state_dim if document_dim is None else document_dim
        self.proj = TorchLinear(state_dim + global_dim + document_dim, state_dim)  # W_g, b_g

    def forward(self, states: Tensor, document: Tensor, global_vector: Optional[Tensor] = None
                ) -> Tuple[Tensor, Tensor]:
        """states: B x S x C (h_i), document: B x C_D (D), global_vector: B x C_u (u_s) or None.

        Returns the gated states h': B x S x C and the gate g: B x S x C (each value in (0, 1))."""
        if (global_vector is None) != (self.global_dim == 0):
            raise ValueError("SelectiveGate: give a global vector exactly when built with global_dim > 0")
        weight_h = self.proj.weight[:, : self.state_dim]  # C x C          (W_g's h_i columns)
        weight_doc = self.proj.weight[:, self.state_dim:]  # C x (C_u + C_D)  (W_g's u_s and D columns)
        per_doc = [global_vector, document] if global_vector is not None else [document]
        constant = F.linear(torch.cat(per_doc, dim=1), weight_doc, self.proj.bias)  # B x C   (W_g [u_s; D] + b_g)
        gate = torch.sigmoid(F.linear(states, weight_h) + constant.unsqueeze(1))  # B x S x C   (Song eq 8)
        return gate * states, gate  # B x S x C each   (Song eq 9)

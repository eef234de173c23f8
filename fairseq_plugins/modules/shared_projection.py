"""The output layer tied to the target embeddings (Paulus, Xiong & Socher 2017, section 2.4):

    W_out = tanh(W_emb W_proj)                                               (Paulus eq 13)
    p(y_t | u_t = 0) = softmax(W_out f_t + b_out)                            (Paulus eq 9, f_t = [h^d_t; c^e_t; c^d_t])

W_emb (V x d_emb) is the target embedding matrix, restricted to its first ``num_regular`` rows (the regular
words: the OOV markers after them have no output row, see modules/extended_vocabulary.py), and W_proj
(d_emb x d_out) a learned projection to the size of the features, so W_out is V x d_out.  The layer has no free
V x d matrix of its own: its parameters are W_proj and b_out, and the gradient of the output layer reaches the
embedding matrix.

``SharedOutputProjection`` holds the embedding module by reference without registering it as a submodule: the
decoder owns it (its parameter appears once, under the decoder's name, in ``parameters()`` and the
state dict), and the projection reads its current weight at every call.
"""
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def ProjectionWeight(embed_dim: int, out_dim: int) -> nn.Parameter:
    """W_proj, d_emb x d_out, Xavier-uniform initialised."""
    weight = nn.Parameter(torch.empty(embed_dim, out_dim))
    nn.init.xavier_uniform_(weight)
    return weight


class SharedOutputProjection(nn.Module):
    """Logits over the regular vocabulary, W_out f + b_out with W_out = tanh(W_emb W_proj) (Paulus eqs 9, 13).

    Args:
        embed_tokens: the target embedding (nn.Embedding, V_ext x d_emb); not registered as a submodule.
        feature_dim: d_out, the size of the features f_t (e.g. H_d + H_e + H_d for [h^d_t; c^e_t; c^d_t]).
        num_regular: V, the rows of the embedding that get an output (default None: all of them).
        bias: learn b_out (V) (default True; zero-initialised).

    W_out is computed once per ``forward`` call (for all the steps in ``features``), or once for a whole
    step-by-step pass inside ``held()`` (training with the model's own predictions calls ``forward`` once per step:
    without it each step would keep its own V x d_out matrix for the backward pass, about 240 MB at Paulus et
    al.'s 50k x 1,200, so 24 GB for a 100-step summary).  Under ``torch.no_grad``
    (generation, validation) it is also kept between calls and recomputed only when the embedding or W_proj
    changed (compared by value, so updates through ``.data`` are seen too): the comparison reads V x d_emb
    numbers, the product costs d_out times as much.
    """

    def __init__(self, embed_tokens: nn.Embedding, feature_dim: int, num_regular: Optional[int] = None,
                 bias: bool = True):
        super().__init__()
        if not isinstance(embed_tokens, nn.Embedding):
            raise TypeError(f"SharedOutputProjection: embed_tokens must be an nn.Embedding, "
                            f"got {type(embed_tokens).__name__}")
        num_rows, embed_dim = embed_tokens.weight.size()
        num_regular = num_rows if num_regular is None else num_regular
        if not 0 < num_regular <= num_rows:
            raise ValueError(f"SharedOutputProjection: num_regular = {num_regular} must be in [1, {num_rows}] "
                             f"(the rows of the target embedding)")
        if feature_dim <= 0:
            raise ValueError(f"SharedOutputProjection: feature_dim must be positive, got {feature_dim}")
        self._embedding = (embed_tokens,)  # a tuple: a reference, not a submodule (the decoder owns it)
        self.num_regular = num_regular
        self.feature_dim = feature_dim
        self.proj = ProjectionWeight(embed_dim, feature_dim)  # W_proj   d_emb x d_out
        self.bias = nn.Parameter(torch.zeros(num_regular)) if bias else None  # b_out   V
        self._kept: Optional[Tuple[Tensor, Tensor, Tensor]] = None  # (W_emb, W_proj, W_out) seen without grad
        self._held: Optional[Tensor] = None  # W_out (with its graph) for the duration of ``held()``

    @property
    def embed_weight(self) -> Tensor:
        """W_emb: the regular rows of the target embedding, V x d_emb."""
        return self._embedding[0].weight[: self.num_regular]

    @contextmanager
    def held(self) -> Iterator[None]:
        """Within the block, every call uses one W_out computed at its start (with gradient when enabled), so a
        step-by-step pass keeps one output matrix for its backward pass instead of one per step.  The
        parameters must not change inside the block."""
        self._held = self._compute()
        try:
            yield
        finally:
            self._held = None

    def _compute(self) -> Tensor:
        return torch.tanh(self.embed_weight @ self.proj)  # V x d_out   (Paulus eq 13)

    def output_matrix(self) -> Tensor:
        """W_out = tanh(W_emb W_proj), V x d_out  (Paulus eq 13)."""
        if self._held is not None:
            return self._held
        embed, proj = self.embed_weight, self.proj  # V x d_emb, d_emb x d_out
        if torch.is_grad_enabled():
            self._kept = None
            return self._compute()
        kept = self._kept
        if kept is not None and all(
            a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)
            for a, b in ((kept[0], embed), (kept[1], proj))
        ):
            return kept[2]
        output = self._compute()
        self._kept = (embed.clone(), proj.detach().clone(), output)
        return output

    def forward(self, features: Tensor) -> Tensor:
        """Logits over the regular vocabulary (the argument of Paulus eq 9's softmax).

        Args:
            features: ... x d_out (e.g. B x T x d_out, [h^d_t; c^e_t; c^d_t] for all steps).
        Returns:
            ... x V logits, W_out f + b_out.
        """
        if features.size(-1) != self.feature_dim:
            raise ValueError(f"SharedOutputProjection: features of size {features.size(-1)}, "
                             f"expected feature_dim = {self.feature_dim}")
        weight = self.output_matrix()  # V x d_out
        bias = self.bias.to(features.dtype) if self.bias is not None else None  # V
        return F.linear(features, weight.to(features.dtype), bias)  # ... x V   (Paulus eq 9, before the softmax)

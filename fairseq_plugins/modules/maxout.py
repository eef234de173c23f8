"""Maxout pooling over consecutive units (Goodfellow et al. 2013), as in Bahdanau et al.'s deep-output readout.

Song & Zhao (2020), Song eq 16, with pool size 2:
    m_t = [max(r_{t,2j-1}, r_{t,2j})]_{j=1..l}                          (Song eq 16)
i.e. the readout r_t (size k*l) is cut into l groups of k *consecutive* units and each group keeps its largest.
The linear map producing r_t (Song eq 19) is the caller's: here it is split by input so that terms that do not change
with the decoder step can be computed once.
"""
import torch.nn as nn
from torch import Tensor


class Maxout(nn.Module):
    """Pairwise (or k-wise) max over consecutive units of the last dimension; no parameters.

    Args:
        pool_size: k, the number of consecutive units each output takes the max of (2 in the paper).
    """

    def __init__(self, pool_size: int = 2):
        super().__init__()
        if pool_size < 1:
            raise ValueError(f"maxout pool size must be >= 1, not {pool_size}")
        self.pool_size = pool_size

    def forward(self, r: Tensor) -> Tensor:
        """r: ... x (k l) -> m: ... x l."""
        size = r.size(-1)
        if size % self.pool_size:
            raise ValueError(f"maxout: last dimension {size} is not a multiple of the pool size {self.pool_size}")
        groups = r.unflatten(-1, (size // self.pool_size, self.pool_size))  # ... x l x k
        return groups.max(dim=-1).values  # ... x l   (Song eq 16)

"""The private torch operators the accelerated paths call, each checked once and backed by the public operations
that compute the same: they are not torch's public API, and the project allows any torch 2 from 2.6 on."""
import torch
from torch import Tensor


def _has_fused_cell() -> bool:
    """Whether this torch has the fused LSTM cell kernels of nn.LSTMCell on a GPU (forward and backward)."""
    return all(hasattr(torch.ops.aten, name)
               for name in ("_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl"))


def _has_softmax_backward() -> bool:
    """Whether torch._softmax_backward_data takes (grad, output, dim, input dtype), as from torch 1.11 on."""
    output = torch.softmax(torch.zeros(1, 2), dim=1)
    try:
        torch._softmax_backward_data(torch.ones(1, 2), output, 1, output.dtype)
    except (AttributeError, TypeError, RuntimeError):
        return False
    return True


FUSED_CELL = _has_fused_cell()
SOFTMAX_BACKWARD = _has_softmax_backward()


def softmax_backward(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """dL/dx for y = softmax(x) along ``dim``, from dL/dy and y: y * (dL/dy - sum_dim(dL/dy * y)), in one kernel
    where torch has its own."""
    if SOFTMAX_BACKWARD:
        return torch._softmax_backward_data(grad, output, dim, grad.dtype)
    return output * (grad - (grad * output).sum(dim=dim, keepdim=True))

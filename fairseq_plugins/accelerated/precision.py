"""The dtype the hand-written backward passes run in."""
import torch


def outside_autocast(backward):
    """An autograd ``backward`` that runs with autocast off on both device types: a hand-written backward computes
    in its saved tensors' dtype, as its forward did (the forwards turn autocast off around their loops)."""
    return torch.autocast(device_type="cuda", enabled=False)(torch.autocast(device_type="cpu", enabled=False)(backward))

"""m copies of one ``nn.Sequential`` network, each with its own parameters, run as one network.

A client's local step needs the mini-batch gradient of its own copy of the network at its own
parameters; a round needs that for every active client at once. ``torch.func.vmap`` over
``functional_call`` does it for any network, but on a CPU it can pay for moving the vmapped
axis in and out of every convolution and pool (``fedverify bench`` measures both paths on the
MNIST CNN of FedSUM Table 2). Here the copies are laid out the way the kernels want them:

* an image layer sees the m copies side by side in the channel axis, (B, m·C, H, W): a
  convolution is one grouped convolution (``groups = m``, copy k's filters acting on copy k's
  channels only), ReLU, pooling and dropout act channel by channel as they are;
* ``Flatten`` turns (B, m·C, H, W) into (m, B, C·H·W) (copy k's channels are the contiguous
  block k, so each row is ``nn.Flatten`` of its own copy's image);
* a linear layer is one batched matrix product, (m, B, F) @ (m, F, F') + (m, 1, F').

The outputs equal the per-copy networks' (tested against ``vmap(functional_call)`` in float64
to rounding). Layers handled: Conv2d (groups = 1), Linear, Flatten, MaxPool2d, AvgPool2d,
ReLU, Tanh, Sigmoid and Dropout in eval mode; :func:`supports` says whether a network has only
these, and callers fall back to ``vmap`` otherwise.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["supports", "grouped_logits"]

_ELEMENTWISE = (nn.ReLU, nn.Tanh, nn.Sigmoid, nn.MaxPool2d, nn.AvgPool2d)


def supports(network: nn.Module) -> bool:
    """Whether :func:`grouped_logits` can run ``network``: an ``nn.Sequential`` in eval mode
    of the layers listed in the module docstring, whose only parameters are its Conv2d and
    Linear weights and biases (all present)."""
    if not isinstance(network, nn.Sequential) or network.training:
        return False
    for layer in network:
        if isinstance(layer, nn.Conv2d):
            if layer.groups != 1 or layer.bias is None or layer.padding_mode != "zeros":
                return False
        elif isinstance(layer, nn.Linear):
            if layer.bias is None:
                return False
        elif isinstance(layer, nn.Flatten):
            if layer.start_dim != 1 or layer.end_dim != -1:
                return False
        elif not isinstance(layer, (*_ELEMENTWISE, nn.Dropout)):
            return False
    return True


def grouped_logits(network: nn.Sequential, shapes, X: torch.Tensor, A: torch.Tensor,
                   image_shape=None) -> torch.Tensor:
    """(m, B, classes): row k is ``network`` with the flat parameters ``X[k]`` (``shapes`` the
    parameter shapes in ``named_parameters`` order) applied to the B inputs ``A[k]``; ``A`` is
    (m, B, features), seen as images of ``image_shape`` (C, H, W) when given."""
    m, batch = X.shape[0], A.shape[1]
    sizes = [_numel(s) for s in shapes]
    params = iter(t.reshape(m, *s) for t, s in zip(torch.split(X, sizes, dim=1), shapes))
    if image_shape is not None:
        c, h, w = image_shape
        out = A.reshape(m, batch, c, h, w).transpose(0, 1).reshape(batch, m * c, h, w)
    else:
        out = A
    for layer in network:
        if isinstance(layer, nn.Conv2d):
            weight, bias = next(params), next(params)
            out = F.conv2d(out, weight.reshape(-1, *weight.shape[2:]), bias.reshape(-1), stride=layer.stride,
                           padding=layer.padding, dilation=layer.dilation, groups=m)
        elif isinstance(layer, nn.Flatten):
            out = out.reshape(batch, m, -1).transpose(0, 1)
        elif isinstance(layer, nn.Linear):
            weight, bias = next(params), next(params)
            out = torch.baddbmm(bias.unsqueeze(1), out, weight.transpose(1, 2))
        elif isinstance(layer, nn.Dropout):
            continue                                    # eval mode: the identity
        else:
            out = layer(out)
    return out


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n

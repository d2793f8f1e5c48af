"""Folding an eval-mode BatchNorm into the preceding conv or linear layer (torch.nn.utils'
fuse_conv_bn_eval/weights, fuse_linear_bn_eval/weights): the same outputs with one layer
fewer at inference."""

from __future__ import annotations

import copy
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor,
                         bn_eps: float, bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The conv weight and bias that apply the conv, then the BatchNorm's eval transform."""
    dt = conv_w.dtype
    conv_b = gt.zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = gt.ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = gt.zeros_like(bn_rm) if bn_b is None else bn_b
    var_rsqrt = gt.rsqrt(bn_rv + bn_eps)
    shape = [1] * conv_w.dim()
    shape[1 if transpose else 0] = -1
    w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(dt)
    b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(dt)
    return Parameter(w, conv_w.requires_grad), Parameter(b, conv_b.requires_grad)


def fuse_conv_bn_eval(conv: Any, bn: Any, transpose: bool = False) -> Any:
    """A copy of ``conv`` whose weight and bias include ``bn``'s eval transform."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must be set")
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor,
                           bn_b: Tensor) -> tuple[Parameter, Parameter]:
    """The linear weight and bias that apply the layer, then the BatchNorm's eval transform."""
    linear_b = gt.zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * gt.rsqrt(bn_rv + bn_eps)
    w = linear_w * scale.unsqueeze(-1)
    b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(w, linear_w.requires_grad), Parameter(b, linear_b.requires_grad)


def fuse_linear_bn_eval(linear: Any, bn: Any) -> Any:
    """A copy of ``linear`` whose weight and bias include ``bn``'s eval transform."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features or "
                             "bn.num_features must equal 1")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must be set")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused

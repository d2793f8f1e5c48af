"""torch.nn.grad: the gradients of conv1d/2d/3d with respect to their input and weight, for
code that writes a convolution's backward itself (a custom autograd.Function). They are also
``gt.nn.functional.grad``.

2-D (and 1-D, as 2-D over a unit height) are conv2d's own backward ops, which have
derivatives of their own; 3-D is the vector-Jacobian product of conv3d, taken with a graph
when the result must be differentiable. Each result is linear in its inputs, so the zeros
standing in for the input (or weight) they do not take change nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputensor._ops.conv import _conv2d_input_backward, _conv2d_weight_backward, _ints
from gputensor._ops.volumetric import conv3d
from gputensor._tensor import Tensor
from gputensor.autograd import grad_mode

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]

IntArg = Any   # an int or a tuple of ints, as the convolutions take them


def conv1d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor,
                 stride: IntArg = 1, padding: IntArg = 0, dilation: IntArg = 1,
                 groups: int = 1) -> Tensor:
    """The gradient of conv1d with respect to an input of shape ``input_size``."""
    st, pad, dil = _geometry_1d("conv1d_input", stride, padding, dilation)
    size = tuple(input_size)
    gi = _conv2d_input_backward(grad_output.unsqueeze(-2), weight.unsqueeze(-2),
                                (*size[:-1], 1, size[-1]), st, pad, dil, groups)
    return gi.squeeze(-2)


def conv1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor,
                  stride: IntArg = 1, padding: IntArg = 0, dilation: IntArg = 1,
                  groups: int = 1) -> Tensor:
    """The gradient of conv1d with respect to a weight of shape ``weight_size``."""
    st, pad, dil = _geometry_1d("conv1d_weight", stride, padding, dilation)
    size = tuple(weight_size)
    gw = _conv2d_weight_backward(grad_output.unsqueeze(-2), input.unsqueeze(-2),
                                 (*size[:-1], 1, size[-1]), st, pad, dil, groups)
    return gw.squeeze(-2)


def conv2d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor,
                 stride: IntArg = 1, padding: IntArg = 0, dilation: IntArg = 1,
                 groups: int = 1) -> Tensor:
    """The gradient of conv2d with respect to an input of shape ``input_size``."""
    return _conv2d_input_backward(grad_output, weight, tuple(input_size), stride, padding,
                                  dilation, groups)


def conv2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor,
                  stride: IntArg = 1, padding: IntArg = 0, dilation: IntArg = 1,
                  groups: int = 1) -> Tensor:
    """The gradient of conv2d with respect to a weight of shape ``weight_size``."""
    return _conv2d_weight_backward(grad_output, input, tuple(weight_size), stride, padding,
                                   dilation, groups)


def conv3d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor,
                 stride: IntArg = 1, padding: IntArg = 0, dilation: IntArg = 1,
                 groups: int = 1) -> Tensor:
    """The gradient of conv3d with respect to an input of shape ``input_size``."""
    x = grad_output.new_zeros(tuple(input_size)).requires_grad_()
    return _vjp(lambda: conv3d(x, weight, None, stride, padding, dilation, groups), x,
                grad_output, weight)


def conv3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor,
                  stride: IntArg = 1, padding: IntArg = 0, dilation: IntArg = 1,
                  groups: int = 1) -> Tensor:
    """The gradient of conv3d with respect to a weight of shape ``weight_size``."""
    w = grad_output.new_zeros(tuple(weight_size)).requires_grad_()
    return _vjp(lambda: conv3d(input, w, None, stride, padding, dilation, groups), w,
                grad_output, input)


def _geometry_1d(name: str, stride: IntArg, padding: IntArg, dilation: IntArg) -> tuple:
    """conv1d's stride, padding and dilation as conv2d's over a unit height."""
    (s,) = _ints(stride, 1, "stride", name)
    (p,) = _ints(padding, 1, "padding", name)
    (d,) = _ints(dilation, 1, "dilation", name)
    return (1, s), (0, p), (1, d)


def _vjp(forward: Any, wrt: Tensor, grad_output: Tensor, other: Tensor) -> Tensor:
    """grad_output's vector-Jacobian product through ``forward()`` with respect to ``wrt``,
    itself differentiable (in grad_output and ``other``) when grad mode is on and either
    requires grad."""
    from gputensor.autograd import grad

    create = grad_mode.is_grad_enabled() and (grad_output.requires_grad or other.requires_grad)
    with grad_mode.enable_grad():
        out = forward()
    return grad(out, wrt, grad_output, create_graph=create)[0]

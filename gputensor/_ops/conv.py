"""Convolution and pooling ops (im2col + BLAS on the CPU).

The frontends here check arguments (shapes, dtypes, devices, geometry), resolve padding and
output sizes, allocate, and hand NCHW tensors to the backend kernels named below. The CPU
kernels live in kernels/cpu/conv.py; a CUDA backend plugs in under the same names:

    _conv2d(out, input, weight, bias, stride, padding, dilation, groups)
    _conv2d_input_backward(grad_input, grad_output, weight, stride, padding, dilation, groups)
    _conv2d_weight_backward(grad_weight, grad_output, input, stride, padding, dilation, groups)
    _max_pool2d(out, indices, input, kernel, stride, padding, dilation)
    _max_pool2d_backward(grad_input, grad_output, indices)
    _avg_pool2d(out, input, kernel, stride, padding, count_include_pad, divisor)
    _avg_pool2d_backward(grad_input, grad_output, kernel, stride, padding, count_include_pad,
                         divisor)
    _adaptive_avg_pool2d(out, input) / _adaptive_avg_pool2d_backward(grad_input, grad_output)
    _adaptive_max_pool2d(out, indices, input)

Kernels receive 4-D NCHW tensors of any strides (unbatched inputs get a batch dim of 1 here),
(h, w) pairs, and only the top/left padding: the output size fixes the rest, since window taps
that fall outside the input read zeros. ``grad_input`` may be larger than the windows reach
(transposed convolutions with output_padding): uncovered cells get 0. ``divisor`` is 0 when
there is no divisor_override. Indices are flat positions within each (H, W) plane, as in
PyTorch. A transposed convolution is the input gradient of a convolution, so it reuses
``_conv2d_input_backward``. This list is the one statement of these contracts: both backends'
kernel modules implement it, and the profiler's models of these kernels are in
gputensor/profiler/costs.py.

Derivatives: conv's input gradient is linear in (grad_output, weight) and its weight gradient
in (grad_output, input), so every backward op's own derivative is another conv op and double
backward works. Max pooling fills an ``indices`` buffer its caller allocates, so backward saves
the indices and never the pooled output (an in-place relu after the pool stays legal).
1-D convolution and pooling are composites over the 2-D ops with a unit height; the 3-D ops
(volumetric.py) are composites over the 2-D ops too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ._core import common_device, empty, kernel, op

IntArg = int | Sequence[int]


# -- cost models: cost(inputs, output) -> (bytes moved, flops) ---------------------------------
def _nbytes(ts: Sequence[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, Tensor))


def _conv_flops(grad_output_like: Any, weight_like: Any) -> int:
    """2 flops per multiply-add: every element of the (N, C_out, Ho, Wo) side meets
    C_in/groups*kh*kw taps, in the forward pass and in both gradients alike."""
    taps = math.prod(weight_like._shape[1:]) if isinstance(weight_like, Tensor) else 1
    return 2 * grad_output_like.numel() * taps


def _conv_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    return _nbytes(inputs) + _nbytes([output]), _conv_flops(output, inputs[1])


def _conv_input_grad_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    """The input gradient and the transposed conv: inputs[0] is the (N, C_out, Ho, Wo) side."""
    return _nbytes(inputs) + _nbytes([output]), _conv_flops(inputs[0], inputs[1])


def _conv_weight_grad_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    return _nbytes(inputs) + _nbytes([output]), _conv_flops(inputs[0], output)


def _pool_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    outs = output if isinstance(output, tuple | list) else [output]
    return _nbytes(inputs) + _nbytes(outs), inputs[0].numel() if inputs else 0


# -- argument parsing ------------------------------------------------------------------------
def _ints(value: Any, n: int, name: str, op_name: str) -> tuple[int, ...]:
    """An int or a sequence of 1 or ``n`` ints as an ``n``-tuple."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    try:
        vals = tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(f"{op_name}(): argument '{name}' must be an int or a tuple of ints, "
                        f"not {type(value).__name__}") from None
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values "
                           f"to match the convolution dimensions, but got {name}={list(vals)}")
    return vals


def _add_batch(x: Tensor, spatial: int, op_name: str) -> tuple[Tensor, bool]:
    """``x`` as a batched (N, C, *spatial) view, and whether it already was batched."""
    nd = x.dim()
    if nd == spatial + 2:
        return x, True
    if nd == spatial + 1:
        return x._view((1, *x._shape), (max(x.numel(), 1), *x._stride), x._offset), False
    raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                       f"to {op_name}, but got input of size: {list(x._shape)}")


def _drop_batch(t: Tensor) -> Tensor:
    """A fresh (N=1) result without its batch dim, as a tensor of its own (not a view)."""
    return Tensor._make(t._storage, t._dtype, t._shape[1:], t._stride[1:], t._offset)


def _tensor(x: Any, name: str, op_name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op_name}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


def _check_dtypes(op_name: str, input: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    if input._dtype is not weight._dtype:
        raise RuntimeError(f"{op_name}(): input type ({input._dtype.name}) and weight type "
                           f"({weight._dtype.name}) should be the same")
    if bias is not None and bias._dtype is not input._dtype:
        raise RuntimeError(f"{op_name}(): input type ({input._dtype.name}) and bias type "
                           f"({bias._dtype.name}) should be the same")
    if input._dtype is D.bool:
        raise RuntimeError(f"\"{op_name}\" not implemented for 'Bool'")


# -- convolution geometry --------------------------------------------------------------------
def _conv_padding(op_name: str, padding: Any, spatial: Sequence[int], kernel: Sequence[int],
                  stride: Sequence[int], dilation: Sequence[int]) -> tuple[tuple[int, ...],
                                                                           tuple[int, ...]]:
    """(low, high) padding per spatial dim; 'same' pads d*(k-1) in all, the odd one high."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * n, (0,) * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        lo = tuple(t // 2 for t in total)
        return lo, tuple(t - lo_i for t, lo_i in zip(total, lo, strict=True))
    pad = _ints(padding, n, "padding", op_name)
    if any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")
    return pad, pad


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _conv_geometry(op_name: str, spatial: Sequence[int], kernel: Sequence[int], stride: Any,
                   padding: Any, dilation: Any, groups: int) -> tuple[Any, ...]:
    """Checked (stride, pad_low, pad_high, dilation) tuples and the output's spatial size
    (memoised: a layer asks the same question in forward and twice in backward)."""
    key = (op_name, tuple(spatial), tuple(kernel), _hashable(stride), _hashable(padding),
           _hashable(dilation), groups)
    try:
        return _geometry_cached(*key)
    except TypeError:   # an unhashable argument (a tensor, say): check without the cache
        return _geometry(*key)


def _geometry(op_name: str, spatial: tuple[int, ...], kernel: tuple[int, ...], stride: Any,
              padding: Any, dilation: Any, groups: int) -> tuple[Any, ...]:
    n = len(kernel)
    st = _ints(stride, n, "stride", op_name)
    dil = _ints(dilation, n, "dilation", op_name)
    if any(s <= 0 for s in st):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dil):
        raise RuntimeError("non-positive dilation is not supported")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    lo, hi = _conv_padding(op_name, padding, spatial, kernel, st, dil)
    padded = [s + a + b for s, a, b in zip(spatial, lo, hi, strict=True)]
    reach = [d * (k - 1) + 1 for d, k in zip(dil, kernel, strict=True)]
    if any(p < r for p, r in zip(padded, reach, strict=True)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, reach))}). Kernel size can't be greater than "
                           f"actual input size")
    out = tuple((p - r) // s + 1 for p, r, s in zip(padded, reach, st, strict=True))
    return st, lo, hi, dil, out


_geometry_cached = functools.lru_cache(maxsize=512)(_geometry)


def _check_conv_shapes(op_name: str, input: Tensor, weight: Tensor, bias: Tensor | None,
                       groups: int, spatial: int, transposed: bool = False) -> int:
    """Channel/group/bias checks shared by the convolutions; returns the output channels."""
    if weight.dim() != spatial + 2:
        layout = "in_channels, out_channels/groups" if transposed else \
            "out_channels, in_channels/groups"
        raise RuntimeError(f"{op_name}(): expected weight to be {spatial + 2}-dimensional "
                           f"({layout}, *kernel_size), but got weight of size "
                           f"{list(weight._shape)}")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    w0 = weight._shape[0]
    if w0 % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size {list(weight._shape)} instead")
    channels = input._shape[-spatial - 1]
    expected = w0 if transposed else weight._shape[1] * groups
    if channels != expected:
        kind = "transposed=1, " if transposed else f"groups={groups}, "
        raise RuntimeError(f"Given {kind}weight of size {list(weight._shape)}, expected "
                           f"input{list(input._shape)} to have {expected} channels, but got "
                           f"{channels} channels instead")
    c_out = weight._shape[1] * groups if transposed else w0
    if bias is not None and tuple(bias._shape) != (c_out,):
        raise RuntimeError(f"Given weight of size {list(weight._shape)}, expected bias to be "
                           f"1-dimensional with {c_out} elements, but got bias of size "
                           f"{list(bias._shape)} instead")
    return c_out


# -- convolution ops -------------------------------------------------------------------------
_SLICE_TO_INPUT = "[..., :input_shape[-2], :input_shape[-1]]"


@op(method=False, cost=_conv_cost, grad={
    "input": "_conv2d_input_backward(g, cj(weight), input_shape, stride, padding, dilation, "
             "groups)",
    "weight": "_conv2d_weight_backward(g, cj(input), weight_shape, stride, padding, dilation, "
              "groups)",
    "bias": "g.sum([0, 2, 3] if g.dim() == 4 else [1, 2])"},
    jvp=("conv2d(input_t, weight, None, stride, padding, dilation, groups) + "
         "conv2d(input, weight_t, bias_t, stride, padding, dilation, groups)"))
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntArg = 1,
           padding: IntArg | str = 0, dilation: IntArg = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation of (N, C, H, W) or (C, H, W) ``input`` with ``weight``
    (out_channels, C/groups, kH, kW); ``padding`` is ints, 'valid' or 'same'."""
    _tensor(input, "input", "conv2d")
    _tensor(weight, "weight", "conv2d")
    x, batched = _add_batch(input, 2, "conv2d")
    c_out = _check_conv_shapes("conv2d", input, weight, bias, groups, 2)
    _check_dtypes("conv2d", input, weight, bias)
    dev = common_device(input, weight, bias, op_name="conv2d")
    st, lo, _, dil, (ho, wo) = _conv_geometry("conv2d", x._shape[2:], weight._shape[2:], stride,
                                              padding, dilation, groups)
    out = empty((x._shape[0], c_out, ho, wo), input._dtype, dev)
    kernel(out, "_conv2d")(out, x, weight, bias, st, lo, dil, groups)
    return out if batched else _drop_batch(out)


@op(method=False, cost=_conv_input_grad_cost, grad={
    "grad_output": "conv2d(g, cj(weight), None, stride, padding, dilation, groups)",
    "weight": "_conv2d_weight_backward(cj(grad_output), g, weight_shape, stride, padding, "
              "dilation, groups)"},
    jvp=("_conv2d_input_backward(grad_output_t, weight, input_shape, stride, padding, dilation, "
         "groups) + _conv2d_input_backward(grad_output, weight_t, input_shape, stride, padding, "
         "dilation, groups)"))
def _conv2d_input_backward(grad_output: Tensor, weight: Tensor, input_shape: Sequence[int],
                           stride: IntArg = 1, padding: IntArg | str = 0, dilation: IntArg = 1,
                           groups: int = 1) -> Tensor:
    """The gradient of conv2d for an input of ``input_shape`` (a transposed convolution)."""
    g, batched = _add_batch(grad_output, 2, "conv2d backward")
    shape = tuple(input_shape) if batched else (1, *input_shape)
    st, lo, _, dil, _ = _conv_geometry("conv2d", shape[2:], weight._shape[2:], stride, padding,
                                       dilation, groups)
    gi = empty(shape, g._dtype, g.device)
    kernel(gi, "_conv2d_input_backward")(gi, g, weight, st, lo, dil, groups)
    return gi if batched else _drop_batch(gi)


@op(method=False, cost=_conv_weight_grad_cost, grad={
    "grad_output": "conv2d(cj(input), g, None, stride, padding, dilation, groups)"
                   "[..., :grad_output_shape[-2], :grad_output_shape[-1]]",
    "input": "_conv2d_input_backward(cj(grad_output), g, input_shape, stride, padding, "
             "dilation, groups)"},
    jvp=("_conv2d_weight_backward(grad_output_t, input, weight_shape, stride, padding, dilation, "
         "groups) + _conv2d_weight_backward(grad_output, input_t, weight_shape, stride, padding, "
         "dilation, groups)"))
def _conv2d_weight_backward(grad_output: Tensor, input: Tensor, weight_shape: Sequence[int],
                            stride: IntArg = 1, padding: IntArg | str = 0, dilation: IntArg = 1,
                            groups: int = 1) -> Tensor:
    """The gradient of conv2d for a weight of ``weight_shape``."""
    g, _ = _add_batch(grad_output, 2, "conv2d backward")
    x, _ = _add_batch(input, 2, "conv2d backward")
    st, lo, _, dil, _ = _conv_geometry("conv2d", x._shape[2:], tuple(weight_shape)[2:], stride,
                                       padding, dilation, groups)
    gw = empty(tuple(weight_shape), g._dtype, g.device)
    kernel(gw, "_conv2d_weight_backward")(gw, g, x, st, lo, dil, groups)
    return gw


@op(method=False, cost=_conv_input_grad_cost, grad={
    "input": "conv2d(g, cj(weight), None, stride, padding, dilation, groups)" + _SLICE_TO_INPUT,
    "weight": "_conv2d_weight_backward(cj(input), g, weight_shape, stride, padding, dilation, "
              "groups)",
    "bias": "g.sum([0, 2, 3] if g.dim() == 4 else [1, 2])"},
    jvp=("conv_transpose2d(input_t, weight, None, stride, padding, output_padding, groups, "
         "dilation) + conv_transpose2d(input, weight_t, bias_t, stride, padding, output_padding, "
         "groups, dilation)"))
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntArg = 1, padding: IntArg = 0, output_padding: IntArg = 0,
                     groups: int = 1, dilation: IntArg = 1) -> Tensor:
    """2-D transposed convolution ("deconvolution") of (N, C, H, W) or (C, H, W) ``input``
    with ``weight`` (C, out_channels/groups, kH, kW): the gradient of conv2d wrt its input."""
    name = "conv_transpose2d"
    _tensor(input, "input", name)
    _tensor(weight, "weight", name)
    x, batched = _add_batch(input, 2, name)
    c_out = _check_conv_shapes(name, input, weight, bias, groups, 2, transposed=True)
    _check_dtypes(name, input, weight, bias)
    dev = common_device(input, weight, bias, op_name=name)
    if isinstance(padding, str):
        raise RuntimeError(f"{name}(): padding must be an int or a tuple of ints, not "
                           f"'{padding}'")
    st = _ints(stride, 2, "stride", name)
    dil = _ints(dilation, 2, "dilation", name)
    pad = _ints(padding, 2, "padding", name)
    opad = _ints(output_padding, 2, "output_padding", name)
    if any(s <= 0 for s in st):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dil):
        raise RuntimeError("non-positive dilation is not supported")
    if any(p < 0 for p in pad):
        raise RuntimeError("negative padding is not supported")
    if any(o < 0 or (o >= s and o >= d) for o, s, d in zip(opad, st, dil, strict=True)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but "
                           f"got output_padding_height: {opad[0]} output_padding_width: "
                           f"{opad[1]} stride_height: {st[0]} stride_width: {st[1]} "
                           f"dilation_height: {dil[0]} dilation_width: {dil[1]}")
    spatial = x._shape[2:]
    out_hw = tuple((s - 1) * t - 2 * p + d * (k - 1) + o + 1 for s, t, p, d, k, o in
                   zip(spatial, st, pad, dil, weight._shape[2:], opad, strict=True))
    if any(n <= 0 for n in out_hw):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). "
                           f"Calculated output size per channel: "
                           f"({' x '.join(map(str, out_hw))}). Output size is too small")
    out = empty((x._shape[0], c_out, *out_hw), input._dtype, dev)
    kernel(out, "_conv2d_input_backward")(out, x, weight, st, pad, dil, groups)
    if bias is not None:
        out.add_(bias.view(c_out, 1, 1))
    return out if batched else _drop_batch(out)


@op(method=False)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntArg = 1,
           padding: IntArg | str = 0, dilation: IntArg = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation of (N, C, L) or (C, L) ``input`` with ``weight``
    (out_channels, C/groups, k): conv2d over a unit height."""
    _tensor(input, "input", "conv1d")
    _tensor(weight, "weight", "conv1d")
    _add_batch(input, 1, "conv1d")
    _check_conv_shapes("conv1d", input, weight, bias, groups, 1)
    # the geometry's errors in 1-d terms ("(0)", not conv2d's "(1 x 0)")
    _conv_geometry("conv1d", input.shape[-1:], weight.shape[-1:], stride, padding, dilation,
                   groups)
    st = _ints(stride, 1, "stride", "conv1d")
    dil = _ints(dilation, 1, "dilation", "conv1d")
    pad = padding if isinstance(padding, str) else (0, _ints(padding, 1, "padding", "conv1d")[0])
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, st[0]), pad, (1, dil[0]),
                 groups)
    return out.squeeze(-2)


@op(method=False)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntArg = 1, padding: IntArg = 0, output_padding: IntArg = 0,
                     groups: int = 1, dilation: IntArg = 1) -> Tensor:
    """1-D transposed convolution of (N, C, L) or (C, L) ``input`` with ``weight``
    (C, out_channels/groups, k): conv_transpose2d over a unit height."""
    name = "conv_transpose1d"
    _tensor(input, "input", name)
    _tensor(weight, "weight", name)
    _add_batch(input, 1, name)
    _check_conv_shapes(name, input, weight, bias, groups, 1, transposed=True)
    if isinstance(padding, str):
        raise RuntimeError(f"{name}(): padding must be an int or a tuple of ints, not "
                           f"'{padding}'")
    (s,), (p,) = _ints(stride, 1, "stride", name), _ints(padding, 1, "padding", name)
    (o,), (d,) = _ints(output_padding, 1, "output_padding", name), \
        _ints(dilation, 1, "dilation", name)
    out = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, s), (0, p),
                           (0, o), groups, (1, d))
    return out.squeeze(-2)


# -- pooling geometry ------------------------------------------------------------------------
def _pool_ints(value: Any, n: int, name: str, op_name: str, omitted: bool = False) -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    try:
        vals = tuple(int(v) for v in value)
    except TypeError:
        vals = ()
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        either = "be omitted, a single int" if omitted else "be a single int"
        words = {1: "one int", 2: "a tuple of two ints"}[n]
        raise RuntimeError(f"{op_name}: {name} must either {either}, or {words}")
    return vals


def _pool_output_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = span // s + 1
    # With ceil_mode the last window must still start inside the input or its left padding.
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _no_stride(stride: Any) -> bool:
    return stride is None or (isinstance(stride, Sequence) and len(stride) == 0)


def _pool_geometry(op_name: str, shape: Sequence[int], kernel_size: Any, stride: Any,
                   padding: Any, dilation: Any, ceil_mode: bool) -> tuple[Any, ...]:
    """Checked (kernel, stride, padding, dilation) pairs and the output's (Ho, Wo) for an
    input of ``shape`` (..., C, H, W)."""
    k = _pool_ints(kernel_size, 2, "kernel_size", op_name)
    s = k if _no_stride(stride) else _pool_ints(stride, 2, "stride", op_name, omitted=True)
    p = _pool_ints(padding, 2, "padding", op_name)
    d = _pool_ints(dilation, 2, "dilation", op_name)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} "
                           f"kW: {k[1]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} "
                           f"dilationW: {d[1]}")
    for pi, ki, di in zip(p, k, d, strict=True):
        if pi < 0 or pi > (di * (ki - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pi}, kernel_size={ki} and dilation={di}")
    h, w = shape[-2:]
    out = (_pool_output_size(h, k[0], s[0], p[0], d[0], ceil_mode),
           _pool_output_size(w, k[1], s[1], p[1], d[1], ceil_mode))
    if out[0] < 1 or out[1] < 1:
        c = shape[-3]
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}). Output size is too small")
    return k, s, p, d, out


def _check_pool_input(op_name: str, x: Tensor) -> None:
    nd = x.dim()
    if nd not in (3, 4) or any(n == 0 for n in x._shape[-3:]):
        raise RuntimeError(f"{op_name}: non-empty 3D or 4D (batch mode) tensor expected for "
                           f"input, but got input of size {list(x._shape)}")
    if x._dtype is D.bool or x._dtype.is_complex:
        raise RuntimeError(f"\"{op_name}\" not implemented for '{x._dtype.legacy_name}'")


def _pool_input(op_name: str, input: Any) -> tuple[Tensor, bool]:
    _tensor(input, "input", op_name)
    _check_pool_input(op_name, input)
    return _add_batch(input, 2, op_name)


def _adaptive_size(op_name: str, x: Tensor, output_size: Any) -> tuple[int, int]:
    if isinstance(output_size, int) and not isinstance(output_size, bool):
        size = (output_size, output_size)
    else:
        size = tuple(output_size)
        if len(size) == 1:
            size = size * 2
        if len(size) != 2:
            raise RuntimeError(f"{op_name}: output_size must be 2, but got {len(size)}")
    hw = x._shape[-2:]
    size = tuple(int(n) if n is not None else hw[i] for i, n in enumerate(size))
    if any(n < 0 for n in size):
        raise RuntimeError(f"{op_name}: elements of output_size must be greater than or equal "
                           f"to 0 but received {list(size)}")
    return size


# -- pooling ops -----------------------------------------------------------------------------
@op(method=False, cost=_pool_cost, grad={"input": "_max_pool2d_backward(g, indices, input_shape)"},
    jvp="max_pool_jvp(input_t, indices)")
def _max_pool2d(input: Tensor, indices: Tensor, kernel_size: IntArg, stride: Any = None,
                padding: IntArg = 0, dilation: IntArg = 1, ceil_mode: bool = False) -> Tensor:
    """Max pooling that also fills ``indices`` (int64, the output's shape, allocated by the
    caller) with each maximum's flat position in its (H, W) plane."""
    x, batched = _pool_input("max_pool2d", input)
    k, s, p, d, (ho, wo) = _pool_geometry("max_pool2d", input._shape, kernel_size, stride, padding,
                                          dilation, ceil_mode)
    out = empty((*x._shape[:2], ho, wo), input._dtype, input.device)
    idx, _ = _add_batch(indices, 2, "max_pool2d")
    kernel(out, "_max_pool2d")(out, idx, x, k, s, p, d)
    return out if batched else _drop_batch(out)


@op(method=False, cost=_pool_cost, grad={
    "grad_output": "g.flatten(-2).gather(-1, indices.flatten(-2)).view(indices.shape)"},
    jvp="auto_linear")
def _max_pool2d_backward(grad_output: Tensor, indices: Tensor,
                         input_shape: Sequence[int]) -> Tensor:
    """Scatter-add ``grad_output`` to the positions in ``indices`` (max and adaptive max)."""
    g, batched = _add_batch(grad_output, 2, "max_pool2d backward")
    idx, _ = _add_batch(indices, 2, "max_pool2d backward")
    shape = tuple(input_shape) if batched else (1, *input_shape)
    gi = empty(shape, g._dtype, g.device)
    kernel(gi, "_max_pool2d_backward")(gi, g, idx)
    return gi if batched else _drop_batch(gi)


@op(method=False)
def max_pool2d(input: Tensor, kernel_size: IntArg, stride: Any = None, padding: IntArg = 0,
               dilation: IntArg = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """2-D max pooling over (N, C, H, W) or (C, H, W); with ``return_indices`` also the flat
    (H*W) position of each maximum, as max_unpool2d expects."""
    _pool_input("max_pool2d", input)
    *_, (ho, wo) = _pool_geometry("max_pool2d", input._shape, kernel_size, stride, padding,
                                  dilation, ceil_mode)
    indices = empty((*input._shape[:-2], ho, wo), D.int64, input.device)
    out = _max_pool2d(input, indices, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


@op(method=False)
def max_pool1d(input: Tensor, kernel_size: IntArg, stride: Any = None, padding: IntArg = 0,
               dilation: IntArg = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """1-D max pooling over (N, C, L) or (C, L): max_pool2d over a unit height."""
    _check_1d("max_pool1d", input)
    name = "max_pool1d"
    res = max_pool2d(input.unsqueeze(-2), _one(kernel_size, 1, "kernel_size", name),
                     None if _no_stride(stride) else _one(stride, 1, "stride", name, True),
                     _one(padding, 0, "padding", name), _one(dilation, 1, "dilation", name),
                     ceil_mode, return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)


def _check_1d(op_name: str, input: Any) -> None:
    _tensor(input, "input", op_name)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"{op_name}: Expected 2D or 3D (batch mode) tensor for input, but got "
                           f"input of size {list(input._shape)}")


def _one(value: Any, height: int, name: str, op_name: str, omitted: bool = False) -> tuple:
    """A 1-D pooling argument as the (height, width) pair of the 2-D op."""
    (v,) = _pool_ints(value, 1, name, op_name, omitted)
    return height, v


@op(method=False, cost=_pool_cost, grad={
    "input": "_avg_pool2d_backward(g, input_shape, kernel_size, stride, padding, ceil_mode, "
             "count_include_pad, divisor_override)"}, jvp="auto_linear")
def avg_pool2d(input: Tensor, kernel_size: IntArg, stride: Any = None, padding: IntArg = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """2-D average pooling over (N, C, H, W) or (C, H, W)."""
    x, batched = _pool_input("avg_pool2d", input)
    k, s, p, _, (ho, wo) = _pool_geometry("avg_pool2d", input._shape, kernel_size, stride,
                                          padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out = empty((*x._shape[:2], ho, wo), input._dtype, input.device)
    kernel(out, "_avg_pool2d")(out, x, k, s, p, bool(count_include_pad),
                               int(divisor_override or 0))
    return out if batched else _drop_batch(out)


@op(method=False, cost=_pool_cost, grad={
    "grad_output": "avg_pool2d(g, kernel_size, stride, padding, ceil_mode, count_include_pad, "
                   "divisor_override)"}, jvp="auto_linear")
def _avg_pool2d_backward(grad_output: Tensor, input_shape: Sequence[int], kernel_size: IntArg,
                         stride: Any = None, padding: IntArg = 0, ceil_mode: bool = False,
                         count_include_pad: bool = True,
                         divisor_override: int | None = None) -> Tensor:
    """Spread each output's gradient evenly (by the forward's divisor) over its window."""
    g, batched = _add_batch(grad_output, 2, "avg_pool2d backward")
    shape = tuple(input_shape) if batched else (1, *input_shape)
    k, s, p, _, _ = _pool_geometry("avg_pool2d", shape, kernel_size, stride, padding, 1,
                                   ceil_mode)
    gi = empty(shape, g._dtype, g.device)
    kernel(gi, "_avg_pool2d_backward")(gi, g, k, s, p, bool(count_include_pad),
                                       int(divisor_override or 0))
    return gi if batched else _drop_batch(gi)


@op(method=False)
def avg_pool1d(input: Tensor, kernel_size: IntArg, stride: Any = None, padding: IntArg = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """1-D average pooling over (N, C, L) or (C, L): avg_pool2d over a unit height."""
    _check_1d("avg_pool1d", input)
    name = "avg_pool1d"
    out = avg_pool2d(input.unsqueeze(-2), _one(kernel_size, 1, "kernel_size", name),
                     None if _no_stride(stride) else _one(stride, 1, "stride", name, True),
                     _one(padding, 0, "padding", name), ceil_mode, count_include_pad)
    return out.squeeze(-2)


@op(method=False, cost=_pool_cost, grad={
    "input": "_adaptive_avg_pool2d_backward(g, input_shape)"}, jvp="auto_linear")
def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to ``output_size`` (an int, or a pair whose None entries keep the
    input's size): window i spans [floor(i*H/Ho), ceil((i+1)*H/Ho))."""
    x, batched = _adaptive_input("adaptive_avg_pool2d", input)
    ho, wo = _adaptive_size("adaptive_avg_pool2d", input, output_size)
    out = empty((*x._shape[:2], ho, wo), input._dtype, input.device)
    kernel(out, "_adaptive_avg_pool2d")(out, x)
    return out if batched else _drop_batch(out)


@op(method=False, cost=_pool_cost, grad={
    "grad_output": "adaptive_avg_pool2d(g, grad_output_shape[-2:])"}, jvp="auto_linear")
def _adaptive_avg_pool2d_backward(grad_output: Tensor, input_shape: Sequence[int]) -> Tensor:
    g, batched = _add_batch(grad_output, 2, "adaptive_avg_pool2d backward")
    shape = tuple(input_shape) if batched else (1, *input_shape)
    gi = empty(shape, g._dtype, g.device)
    kernel(gi, "_adaptive_avg_pool2d_backward")(gi, g)
    return gi if batched else _drop_batch(gi)


def _adaptive_input(op_name: str, input: Any) -> tuple[Tensor, bool]:
    _tensor(input, "input", op_name)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"{op_name}(): Expected 3D or 4D tensor, but got {list(input._shape)}")
    if any(n == 0 for n in input._shape[-2:]):
        raise RuntimeError(f"{op_name}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input._shape)} with dimension "
                           f"{input.dim() - 2 if input._shape[-2] == 0 else input.dim() - 1} "
                           f"being empty")
    if input._dtype is D.bool or input._dtype.is_complex:
        raise RuntimeError(f"\"{op_name}\" not implemented for '{input._dtype.legacy_name}'")
    return _add_batch(input, 2, op_name)


@op(method=False, cost=_pool_cost, grad={"input": "_max_pool2d_backward(g, indices, input_shape)"},
    jvp="max_pool_jvp(input_t, indices)")
def _adaptive_max_pool2d(input: Tensor, indices: Tensor, output_size: Any) -> Tensor:
    """Adaptive max pooling that also fills the caller's ``indices`` buffer."""
    x, batched = _adaptive_input("adaptive_max_pool2d", input)
    ho, wo = _adaptive_size("adaptive_max_pool2d", input, output_size)
    out = empty((*x._shape[:2], ho, wo), input._dtype, input.device)
    idx, _ = _add_batch(indices, 2, "adaptive_max_pool2d")
    kernel(out, "_adaptive_max_pool2d")(out, idx, x)
    return out if batched else _drop_batch(out)


@op(method=False)
def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to ``output_size``; with ``return_indices`` also each maximum's flat
    (H*W) position."""
    _adaptive_input("adaptive_max_pool2d", input)
    ho, wo = _adaptive_size("adaptive_max_pool2d", input, output_size)
    indices = empty((*input._shape[:-2], ho, wo), D.int64, input.device)
    out = _adaptive_max_pool2d(input, indices, output_size)
    return (out, indices) if return_indices else out


@op(method=False)
def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, L) or (C, L) to ``output_size`` positions."""
    _check_1d("adaptive_avg_pool1d", input)
    size = output_size
    if not isinstance(size, int) and size is not None:
        size = tuple(size)
        if len(size) != 1:
            raise RuntimeError(f"adaptive_avg_pool1d: output_size must be 1, but got "
                               f"{len(size)}")
        size = size[0]
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)

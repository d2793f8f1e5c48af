"""3-D (volumetric) convolution and pooling, composed of the 2-D ops of conv.py.

Nothing here has a kernel or a derivative formula of its own: every step is a differentiable
op that both backends already run, so autograd (double backward included) and the CUDA backend
follow.

- ``conv3d`` is one ``conv2d`` over the N*Do output depth slices: the kd depth taps of each
  slice are gathered along depth (one ``index_select``; depth padding is an explicit ``pad``) and
  become input channels, and the weight's depth taps become the matching weight channels.
- ``conv_transpose3d`` is one ``conv_transpose2d`` over the N*D input slices whose output
  channels are the kd depth taps; one ``index_add`` then adds each tap's plane at its output
  depth.
- Pooling is separable: the max (average) over a box is the max (average) over depth of the
  max (average) over (H, W) planes. Pooling the planes first and depth second keeps PyTorch's
  choice among equal maxima (the first in (d, h, w) order; a NaN wins, the last one), and the
  average's divisor is a product of per-dim counts, so two 2-D pools give PyTorch's result.
  The depth pass pools a (B, 1, D, Ho*Wo) view with a (kd, 1) window. Integer averages are
  exact int64 window sums divided once (PyTorch truncates once); float16/bfloat16 average in
  float32.

Indices of 3-D max pooling are flat positions in each (D, H, W) volume, as in PyTorch. Argument
checks come first and raise PyTorch's 3-D errors (the 2-D ops only ever see valid geometry).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ._core import common_device, op
from .conv import (
    IntArg,
    _add_batch,
    _check_conv_shapes,
    _conv_geometry,
    _ints,
    _no_stride,
    _pool_output_size,
    _tensor,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool2d,
    conv2d,
    conv_transpose2d,
    max_pool2d,
)
from .creation import tensor, zeros
from .shape import pad

_DIMS = ("depth", "height", "width")


# -- convolution -----------------------------------------------------------------------------
def _check_dtypes(input: Tensor, weight: Tensor, bias: Tensor | None, kernel_name: str) -> None:
    if input._dtype is not weight._dtype:
        raise RuntimeError(f"expected scalar type {input._dtype.legacy_name} but found "
                           f"{weight._dtype.legacy_name}")
    if bias is not None and bias._dtype is not input._dtype:
        raise RuntimeError(f"Input type ({input._dtype.legacy_name.lower()}) and bias type "
                           f"({bias._dtype.legacy_name.lower()}) should be the same")
    if input._dtype is D.bool:
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for 'Bool'")


def _conv_inputs(op_name: str, input: Any, weight: Any, bias: Any, groups: int,
                 transposed: bool, kernel_name: str) -> int:
    """The checks every 3-D convolution makes first; returns the output channels."""
    _tensor(input, "input", op_name)
    _tensor(weight, "weight", op_name)
    _add_batch(input, 3, op_name)
    c_out = _check_conv_shapes(op_name, input, weight, bias, groups, 3, transposed)
    _check_dtypes(input, weight, bias, kernel_name)
    common_device(input, weight, bias, op_name=op_name)
    return c_out


def _index(values: Sequence[int], like: Tensor) -> Tensor:
    return tensor(list(values), dtype=D.int64, device=like.device)


@op(method=False)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntArg = 1,
           padding: IntArg | str = 0, dilation: IntArg = 1, groups: int = 1) -> Tensor:
    """3-D cross-correlation of (N, C, D, H, W) or (C, D, H, W) ``input`` with ``weight``
    (out_channels, C/groups, kD, kH, kW); ``padding`` is ints, 'valid' or 'same'."""
    name = "conv3d"
    c_out = _conv_inputs(name, input, weight, bias, groups, False, "compute_columns3d")
    dil = _ints(dilation, 3, "dilation", name)
    if any(d <= 0 for d in dil):
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dil)}")
    batched = input.dim() == 5
    x = input if batched else input.unsqueeze(0)
    st, lo, hi, dil, (do, ho, wo) = _conv_geometry(name, x._shape[2:], weight._shape[2:],
                                                   stride, padding, dil, groups)
    # Depth padding is explicit, and so is H/W padding when 'same' makes it uneven; conv2d
    # pads the planes itself otherwise.
    pads = [0, 0, 0, 0, lo[0], hi[0]]
    plane_pad = (lo[1], lo[2])
    if tuple(lo[1:]) != tuple(hi[1:]):
        pads[:4], plane_pad = [lo[2], hi[2], lo[1], hi[1]], (0, 0)
    if any(pads):
        x = pad(x, pads)
    n, c, depth, h, w = x._shape
    kd, kh, kw = weight._shape[2:]
    cg = c // groups
    # Depth-major, so the gathered taps of each output slice are adjacent: (N, Do*kD, C, H, W).
    slices = x.permute(0, 2, 1, 3, 4)
    if kd == 1:
        taps = slices[:, :(do - 1) * st[0] + 1:st[0]]
    else:
        taps = slices.index_select(1, _index([o * st[0] + i * dil[0] for o in range(do)
                                              for i in range(kd)], x))
    # Channels of each group in (tap, channel) order, matching the weight's layout below.
    cols = taps.reshape(n, do, kd, groups, cg, h, w).transpose(2, 3) \
        .reshape(n * do, groups * kd * cg, h, w)
    w2 = weight.permute(0, 2, 1, 3, 4).reshape(c_out, kd * cg, kh, kw)
    y = conv2d(cols, w2, bias, st[1:], plane_pad, dil[1:], groups)
    out = y.view(n, do, c_out, ho, wo).permute(0, 2, 1, 3, 4).contiguous()
    return out if batched else out.squeeze(0)


def _transpose_geometry(name: str, x: Tensor, weight: Tensor, stride: Any, padding: Any,
                        output_padding: Any, dilation: Any) -> tuple[tuple[int, ...], ...]:
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    st = _ints(stride, 3, "stride", name)
    pd = _ints(padding, 3, "padding", name)
    opad = _ints(output_padding, 3, "output_padding", name)
    dil = _ints(dilation, 3, "dilation", name)
    if any(s <= 0 for s in st):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dil):
        raise RuntimeError("dilation should be greater than zero, but got " +
                           ", ".join(f"dilation_{n}: {d}" for n, d in zip(_DIMS, dil,
                                                                         strict=True)))
    if any(p < 0 for p in pd):
        raise RuntimeError("negative padding is not supported")
    if any(o < 0 for o in opad):
        raise RuntimeError("negative output_padding is not supported")
    if any(o >= s and o >= d for o, s, d in zip(opad, st, dil, strict=True)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           "got " + " ".join(f"{kind}_{n}: {v}" for kind, vals in
                                             (("output_padding", opad), ("stride", st),
                                              ("dilation", dil))
                                             for n, v in zip(_DIMS, vals, strict=True)))
    spatial = x._shape[-3:]
    out = tuple((s - 1) * t - 2 * p + d * (k - 1) + o + 1 for s, t, p, d, k, o in
                zip(spatial, st, pd, dil, weight._shape[2:], opad, strict=True))
    if any(n <= 0 for n in out):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). "
                           f"Calculated output size per channel: "
                           f"({' x '.join(map(str, out))}). Output size is too small")
    return st, pd, opad, dil, out


@op(method=False)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntArg = 1, padding: IntArg = 0, output_padding: IntArg = 0,
                     groups: int = 1, dilation: IntArg = 1) -> Tensor:
    """3-D transposed convolution of (N, C, D, H, W) or (C, D, H, W) ``input`` with ``weight``
    (C, out_channels/groups, kD, kH, kW): the gradient of conv3d wrt its input."""
    name = "conv_transpose3d"
    c_out = _conv_inputs(name, input, weight, bias, groups, True,
                         "slow_conv_transpose3d_out_cpu")
    st, pd, opad, dil, (do, ho, wo) = _transpose_geometry(name, input, weight, stride, padding,
                                                          output_padding, dilation)
    batched = input.dim() == 5
    x = input if batched else input.unsqueeze(0)
    n, c, depth, h, w = x._shape
    kd, kh, kw = weight._shape[2:]
    cog = c_out // groups
    # Each input slice, transposed-convolved in (H, W), with the depth taps as output channels.
    planes = x.permute(0, 2, 1, 3, 4).reshape(n * depth, c, h, w)
    w2 = weight.permute(0, 2, 1, 3, 4).reshape(c, kd * cog, kh, kw)
    y = conv_transpose2d(planes, w2, None, st[1:], pd[1:], opad[1:], groups, dil[1:])
    src = y.view(n, depth, groups, kd, cog, ho, wo).transpose(2, 3) \
        .reshape(n, depth * kd, c_out, ho, wo)
    # Tap i of input slice j lands at depth j*sD + i*dD of the unpadded output; add them all
    # there, then crop the padding (and keep output_padding's extra slices).
    full = max((depth - 1) * st[0] + (kd - 1) * dil[0] + 1, pd[0] + do)
    where = _index([j * st[0] + i * dil[0] for j in range(depth) for i in range(kd)], x)
    acc = zeros((n, full, c_out, ho, wo), dtype=src.dtype, device=x.device)  # autocast: y's
    out = acc.index_add(1, where, src).narrow(1, pd[0], do).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.to(out.dtype).view(c_out, 1, 1, 1)
    out = out.contiguous()
    return out if batched else out.squeeze(0)


# -- pooling geometry ------------------------------------------------------------------------
# How each pool words "must be an int or three" (PyTorch's messages differ between them).
_MAX_FORMS = {"kernel_size": "either be a single int", "stride": "either be omitted, a single int",
              "padding": "either be a single int", "dilation": "be either a single int"}
_AVG_FORMS = {"kernel_size": "be a single int", "stride": "be omitted, a single int",
              "padding": "be a single int"}


def _triple(value: Any, name: str, op_name: str, forms: dict[str, str]) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * 3
    try:
        vals = tuple(int(v) for v in value)
    except TypeError:
        vals = ()
    if len(vals) == 1:
        return vals * 3
    if len(vals) != 3:
        raise RuntimeError(f"{op_name}: {name} must {forms[name]}, or a tuple of three ints")
    return vals


def _half_reach(k: int, d: int) -> int:
    """(d*(k-1)+1)/2 truncated toward zero, as C++ divides (k may be <= 0 here)."""
    return int(((k - 1) * d + 1) / 2)


def _pool3d_geometry(op_name: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any,
                     dilation: Any, ceil_mode: bool, forms: dict[str, str], check_name: str,
                     kernel_fits: bool = False) -> tuple[tuple[int, ...], ...]:
    """Checked (kernel, stride, padding, dilation) triples and the output's (Do, Ho, Wo), with
    PyTorch's checks in its order. ``kernel_fits``: the input must be at least the kernel's size
    whatever the padding (PyTorch's avg_pool3d asks that)."""
    k = _triple(kernel_size, "kernel_size", op_name, forms)
    s = k if _no_stride(stride) else _triple(stride, "stride", op_name, forms)
    p = _triple(padding, "padding", op_name, forms)
    d = _triple(dilation, "dilation", op_name, forms)
    if x.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    for ki, si, pi, di in zip(k, s, p, d, strict=True):
        if si == 0:
            raise RuntimeError("stride should not be zero")
        if pi < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pi}")
        if pi > _half_reach(ki, di):
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pi}, kernel_size={ki} and dilation={di}")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} "
                           f"kH: {k[1]} kW: {k[2]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} "
                           f"dW: {s[2]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} "
                           f"dilationH: {d[1]} dilationW: {d[2]}")
    shape = x._shape
    if 0 in shape[-4:]:   # the channels of an unbatched input too
        raise RuntimeError(f"{check_name}(): Expected input's non-batch dimensions to have "
                           f"positive length, but input has a shape of {list(shape)} and "
                           f"non-batch dimension 0 has length zero!")
    spatial = shape[-3:]
    if kernel_fits and any(n < ki for n, ki in zip(spatial, k, strict=True)):
        raise RuntimeError(f"input image (T: {spatial[0]} H: {spatial[1]} W: {spatial[2]}) "
                           f"smaller than kernel size (kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    if any(pi > ki // 2 for pi, ki in zip(p, k, strict=True)):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {k[0]} kW: {k[2]} kH: {k[1]} padT: {p[0]} padW: {p[2]} "
                           f"padH: {p[1]}")
    out = tuple(_pool_output_size(n, *args, ceil_mode) for n, *args in
                zip(spatial, k, s, p, d, strict=True))
    if any(o < 1 for o in out):
        c = shape[-4]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (c, *spatial)))}). "
                           f"Calculated output size: ({'x'.join(map(str, (c, *out)))}). "
                           f"Output size is too small")
    return k, s, p, d, out


def _check_dtype(x: Tensor, kernel_name: str, floating_only: bool = False) -> None:
    dt = x._dtype
    if dt is D.bool or dt.is_complex or (floating_only and not dt.is_floating_point):
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for '{dt.legacy_name}'")


def _planes(x: Tensor) -> tuple[Tensor, tuple[int, ...]]:
    """``x`` (..., D, H, W) as (B, D, H, W) planes, and its leading dims."""
    lead = tuple(x._shape[:-3])
    return x.reshape(math.prod(lead), *x._shape[-3:]), lead


def _depth_column(planes: Tensor) -> Tensor:
    """(B, D, Ho, Wo) pooled planes as (B, 1, D, Ho*Wo), for the depth pass."""
    b, depth, ho, wo = planes._shape
    return planes.view(b, 1, depth, ho * wo)


def _volume_indices(plane_idx: Tensor, depth_idx: Tensor, plane_size: int) -> Tensor:
    """Flat (D, H, W) positions from the plane pass's (H, W) indices (B, D, Ho, Wo) and the
    depth pass's indices into its (D, Ho*Wo) column (B, 1, Do, Ho*Wo)."""
    b, depth, ho, wo = plane_idx._shape
    do = depth_idx._shape[2]
    picked = depth_idx.view(b, do * ho * wo)
    hw = plane_idx.view(b, depth * ho * wo).gather(1, picked)
    return ((picked // (ho * wo)) * plane_size + hw).view(b, do, ho, wo)


# -- pooling ---------------------------------------------------------------------------------
@op(method=False)
def max_pool3d(input: Tensor, kernel_size: IntArg, stride: Any = None, padding: IntArg = 0,
               dilation: IntArg = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """3-D max pooling over (N, C, D, H, W) or (C, D, H, W); with ``return_indices`` also the
    flat (D*H*W) position of each maximum, as max_unpool3d expects."""
    name = "max_pool3d"
    _tensor(input, "input", name)
    k, s, p, d, out = _pool3d_geometry(name, input, kernel_size, stride, padding, dilation,
                                       ceil_mode, _MAX_FORMS,
                                       "max_pool3d_with_indices_out_cpu_template")
    _check_dtype(input, name)
    x, lead = _planes(input)
    planes, plane_idx = max_pool2d(x, k[1:], s[1:], p[1:], d[1:], ceil_mode, True)
    vals, depth_idx = max_pool2d(_depth_column(planes), (k[0], 1), (s[0], 1), (p[0], 0),
                                 (d[0], 1), ceil_mode, True)
    result = vals.view(*lead, *out)
    if not return_indices:
        return result
    idx = _volume_indices(plane_idx, depth_idx, input._shape[-2] * input._shape[-1])
    return result, idx.view(*lead, *out)


def _avg_counts(size: int, k: int, s: int, p: int, n_out: int, include_pad: bool) -> list[int]:
    """Each output's window length along one dim, as PyTorch's divisor counts it."""
    counts = []
    for o in range(n_out):
        start = o * s - p
        end = min(start + k, size + p)
        counts.append(end - start if include_pad else min(end, size) - max(start, 0))
    return counts


def avg_pool3d(input: Tensor, kernel_size: IntArg, stride: Any = None, padding: IntArg = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """3-D average pooling over (N, C, D, H, W) or (C, D, H, W)."""
    name = "avg_pool3d"
    _tensor(input, "input", name)
    k, s, p, _, out = _pool3d_geometry(name, input, kernel_size, stride, padding, 1, ceil_mode,
                                       _AVG_FORMS, name, kernel_fits=True)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    _check_dtype(input, "avg_pool3d_out_frame")
    x, lead = _planes(input)
    dt = input._dtype
    if not dt.is_floating_point:
        # Integer means truncate once, as PyTorch's do: exact int64 sums over one divisor.
        sums = _pool_sums(x.to(D.int64), k, s, p, ceil_mode)
        if divisor_override is not None:
            div: Any = int(divisor_override)
        else:
            counts = [_avg_counts(n, *args, count_include_pad) for n, *args in
                      zip(input._shape[-3:], k, s, p, out, strict=True)]
            div = tensor([[[a * b * c for c in counts[2]] for b in counts[1]]
                          for a in counts[0]], dtype=D.int64, device=input.device)
        return sums.view(*lead, *out).div(div, rounding_mode="trunc").to(dt)
    # Half precision averages in float32 and rounds once.
    low = dt in (D.float16, D.bfloat16)
    if low:
        x = x.float()
    ones = 1 if divisor_override is not None else None   # the planes pass then only sums
    planes = avg_pool2d(x, k[1:], s[1:], p[1:], ceil_mode, count_include_pad, ones)
    vals = avg_pool2d(_depth_column(planes), (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode,
                      count_include_pad, divisor_override)
    result = vals.view(*lead, *out)
    return result.to(dt) if low else result


def _pool_sums(x: Tensor, k: Sequence[int], s: Sequence[int], p: Sequence[int],
               ceil_mode: bool) -> Tensor:
    """The window sums of (B, D, H, W) planes (average pools with a divisor of 1)."""
    planes = avg_pool2d(x, k[1:], s[1:], p[1:], ceil_mode, True, 1)
    return avg_pool2d(_depth_column(planes), (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, True, 1)


# -- adaptive pooling ------------------------------------------------------------------------
def _adaptive_size(op_name: str, x: Tensor, output_size: Any, size_error: str) -> tuple:
    if x.dim() not in (4, 5):
        colon = ":" if op_name == "adaptive_max_pool3d" else ""
        raise RuntimeError(f"{op_name}(): Expected 4D or 5D tensor, but got{colon} "
                           f"{list(x._shape)}")
    for i in range(1, x.dim()):   # an unbatched input's channels (dim 0) may be 0
        if x._shape[i] == 0:
            raise RuntimeError(f"{op_name}(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but input has sizes {list(x._shape)} "
                               f"with dimension {i} being empty")
    if isinstance(output_size, int) and not isinstance(output_size, bool):
        return (output_size,) * 3
    size = tuple(output_size)
    if len(size) != 3:
        raise RuntimeError(size_error)
    return tuple(int(n) if n is not None else x._shape[-3 + i] for i, n in enumerate(size))


def _empty_result(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A zero-element result still connected to ``x`` (its gradient is zeros)."""
    return x.reshape(-1)[:0].reshape(shape)


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size`` (an int, or a
    triple whose None entries keep the input's size): window i along a dim of n spans
    [floor(i*n/o), ceil((i+1)*n/o))."""
    name = "adaptive_avg_pool3d"
    _tensor(input, "input", name)
    out = _adaptive_size(name, input, output_size, f"{name}: output_size must be 3")
    if any(n < 0 for n in out):
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to "
                           f"0 but received {{{', '.join(map(str, out))}}}")
    _check_dtype(input, f"{name}_{input.device.type}", floating_only=True)
    x, lead = _planes(input)
    if 0 in out:
        return _empty_result(input, (*lead, *out))
    low = input._dtype in (D.float16, D.bfloat16)
    if low:
        x = x.float()
    planes = adaptive_avg_pool2d(x, out[1:])
    vals = adaptive_avg_pool2d(_depth_column(planes), (out[0], out[1] * out[2]))
    result = vals.view(*lead, *out)
    return result.to(input._dtype) if low else result


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size``; with
    ``return_indices`` also each maximum's flat (D*H*W) position."""
    name = "adaptive_max_pool3d"
    _tensor(input, "input", name)
    out = _adaptive_size(name, input, output_size,
                         f"{name}(): internal error: output_size.size() must be 3")
    lead = tuple(input._shape[:-3])
    if any(n < 0 for n in out):
        bad = next(n for n in out if n < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                           f"{[*lead, *out]}")
    _check_dtype(input, f"{name}_{input.device.type}", floating_only=True)
    x, _ = _planes(input)
    if 0 in out:
        result = _empty_result(input, (*lead, *out))
        idx = zeros((*lead, *out), dtype=D.int64, device=input.device)
        return (result, idx) if return_indices else result
    planes, plane_idx = adaptive_max_pool2d(x, out[1:], True)
    vals, depth_idx = adaptive_max_pool2d(_depth_column(planes), (out[0], out[1] * out[2]),
                                          True)
    result = vals.view(*lead, *out)
    if not return_indices:
        return result
    idx = _volume_indices(plane_idx, depth_idx, input._shape[-2] * input._shape[-1])
    return result, idx.view(*lead, *out)

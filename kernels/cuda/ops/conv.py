"""The CUDA backend's convolution (im2col + GEMM) and 2-D pooling kernels, on device tensors.

Same names and contracts as the CPU kernels: the one list is in gputensor/_ops/conv.py, whose
frontends validate, resolve padding and allocate every output.

Convolutions build the batch-wide column matrix (C*kh*kw, N*Ho*Wo) with one im2col launch, so
each group is ONE product over the whole batch (``gemm_into``: cuBLAS for float32/float64, the
tiled kernel for integers), then a permute launch writes NCHW and adds the bias. The input
gradient is the transposed product followed by a gather fold (col2im) with no atomics; the
weight gradient contracts the gradient's (Cout, N*Ho*Wo) layout with the columns' transpose.
float16/bfloat16 convolutions compute in float32 end to end, as the CPU kernels do. Every input
is read through its strides (channels-last views need no copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._determinism import alert_not_deterministic
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.registry import CUDA

from .. import errors
from ..device import (
    BLOCK,
    CudaSource,
    DeviceArray,
    constant_array,
    grid_for,
    launch,
)
from ..dtypes import CTYPES, SHORT
from .linalg import copy_into, gemm_into, materialize, zero_

SOURCE = CudaSource("conv.cu")

_REAL = (D.uint8, D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16, D.float32,
         D.float64)
_INTS = (D.uint8, D.int8, D.int16, D.int32, D.int64)
# Convolutions and max pools compute 16-bit floats in float32.
_COMPUTE = {D.float16: D.float32, D.bfloat16: D.float32}


def _cty(d: D.dtype) -> str:
    return CTYPES[_COMPUTE.get(d, d)]


def _variants(dtypes: tuple[D.dtype, ...], **extra: dict[D.dtype, str]) -> list[dict[str, str]]:
    return [{"s": SHORT[d], "T": CTYPES[d], "C": _cty(d),
             **{k: v.get(d, _cty(d)) for k, v in extra.items()}} for d in dtypes]


_CONV = _variants(_REAL)
SOURCE.instantiate("im2col_{s}", "{C}* cols, const {T}* x, const long long* g",
                   "gt_conv::im2col<{T}, {C}>(cols, x, g)", _CONV)
SOURCE.instantiate("col2im_{s}", "{T}* out, const {C}* cols, const long long* g",
                   "gt_conv::col2im<{T}, {C}>(out, cols, g)", _CONV)
SOURCE.instantiate("nchw_to_cnl_{s}", "{C}* dst, const {T}* src, long long N, long long Cc, "
                   "long long H, long long W, const long long* s",
                   "gt_conv::nchw_to_cnl<{T}, {C}>(dst, src, N, Cc, H, W, s)", _CONV)
SOURCE.instantiate("cnl_to_nchw_{s}", "{T}* out, const {C}* src, const {T}* bias, "
                   "long long bias_stride, long long N, long long Cc, long long L",
                   "gt_conv::cnl_to_nchw<{T}, {C}>(out, src, bias, bias_stride, N, Cc, L)", _CONV)

_POOL_DTYPES = (D.bool, *_REAL)
_MAX = _variants(_POOL_DTYPES)
SOURCE.instantiate("max_pool_{s}", "{T}* out, long long* idx, const {T}* x, const long long* p",
                   "gt_conv::max_pool<{T}, {C}>(out, idx, x, p)", _MAX)
SOURCE.instantiate("adaptive_max_pool_{s}",
                   "{T}* out, long long* idx, const {T}* x, const long long* p",
                   "gt_conv::adaptive_max_pool<{T}, {C}>(out, idx, x, p)", _MAX)
# The max pools' backward scatters with atomics into float, double or 64-bit integer cells.
_ATOMIC = {D.float16: D.float32, D.bfloat16: D.float32, D.float32: D.float32,
           D.float64: D.float64, **{d: D.int64 for d in _INTS}}
SOURCE.instantiate("max_pool_backward_{s}", "{Acc}* acc, const {T}* grad, const long long* idx, "
                   "long long* err, long long site, const long long* p",
                   "gt_conv::max_pool_backward<{T}, {Acc}>(acc, grad, idx, err, site, p)",
                   _variants(_REAL, Acc={d: "unsigned long long" if d in _INTS
                                         else CTYPES[a] for d, a in _ATOMIC.items()}))
_MAX_POOL_BW_SITE = errors.site(
    "max_pool2d_backward", RuntimeError,
    "max_pool2d backward: an index is outside its input plane of {dim}x{extra} = {bound} "
    "elements (index {value})")
# Averages: integers sum in 64 bits and divide in double (truncated), their gradients in double.
_AVG = _variants(_REAL, A={d: "long long" for d in _INTS}, G={d: "double" for d in _INTS})
for _name in ("avg_pool", "avg_pool_backward"):
    _acc = "{A}" if _name == "avg_pool" else "{G}"
    SOURCE.instantiate(_name + "_{s}", "{T}* out, const {T}* x, bool cip, long long divisor, "
                       "const long long* p",
                       f"gt_conv::{_name}<{{T}}, {_acc}>(out, x, cip, divisor, p)", _AVG)
SOURCE.instantiate("adaptive_avg_pool_{s}", "{T}* out, const {T}* x, const long long* p",
                   "gt_conv::adaptive_avg_pool<{T}, {A}>(out, x, p)", _AVG)
SOURCE.instantiate("adaptive_avg_pool_backward_{s}", "{T}* out, const {T}* x, const long long* p",
                   "gt_conv::adaptive_avg_pool_backward<{T}, {G}>(out, x, p)", _AVG)


def _check(dt: D.dtype, allowed: tuple[D.dtype, ...], op_name: str) -> str:
    if dt not in allowed:
        raise TypeError(f"'{op_name}' on CUDA does not support dtype {dt}")
    return SHORT[dt]


def _zero(t: Tensor) -> None:
    if t.is_contiguous():
        zero_(t)
    else:
        z = empty(t._shape, t._dtype, t.device)
        zero_(z)
        copy_into(t, z)


# -- convolutions ---------------------------------------------------------------------------------
class _Conv:
    """One convolution's sizes and its geometry array for the kernels."""

    def __init__(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...], out_hw: Any,
                 stride: Any, padding: Any, dilation: Any, groups: int) -> None:
        self.n, self.c, self.h, self.w = x_shape
        self.c_out, self.cg, self.kh, self.kw = w_shape
        self.ho, self.wo = out_hw
        self.g = groups
        self.cog = self.c_out // groups
        self.k_group = self.cg * self.kh * self.kw    # GEMM contraction per group
        self.cols = self.n * self.ho * self.wo        # GEMM columns: the whole batch
        self.head = [self.n, self.c, self.h, self.w, self.kh, self.kw, *stride, *padding,
                     *dilation, self.ho, self.wo]

    def geometry(self, x_strides: Any = (0, 0, 0, 0), y_strides: Any = (0, 0, 0, 0)
                 ) -> DeviceArray:
        return constant_array([*self.head, *x_strides, *y_strides])

    def columns(self, x: Tensor, cdt: D.dtype) -> Tensor:
        """The (groups, C/groups*kh*kw, N*Ho*Wo) column matrix of ``x`` in ``cdt``."""
        cols = empty((self.g, self.k_group, self.cols), cdt, x.device)
        if cols.numel():
            launch(SOURCE, f"im2col_{SHORT[x._dtype]}", grid_for(cols.numel()), BLOCK,
                   [cols, x, self.geometry(x._stride)])
        return cols

    def weight(self, w: Tensor, cdt: D.dtype) -> Tensor:
        """The weight as (groups, Cout/groups, C/groups*kh*kw) in ``cdt`` (a view if it can)."""
        if w._dtype is not cdt or not w.is_contiguous():
            w = materialize(w, cdt)
        kg = self.k_group
        return w._view((self.g, self.cog, kg), (self.cog * kg, kg, 1), w._offset)

    def grad_rows(self, g: Tensor, cdt: D.dtype) -> Tensor:
        """grad_output (N, Cout, Ho, Wo) as (groups, Cout/groups, N*Ho*Wo) in ``cdt``."""
        dst = empty((self.g, self.cog, self.cols), cdt, g.device)
        if dst.numel():
            launch(SOURCE, f"nchw_to_cnl_{SHORT[g._dtype]}", grid_for(dst.numel()), BLOCK,
                   [dst, g, *map(np.int64, (self.n, self.c_out, self.ho, self.wo)),
                    constant_array(g._stride)])
        return dst


def _compute(dt: D.dtype) -> D.dtype:
    return _COMPUTE.get(dt, dt)


@CUDA.register("_conv2d")
def conv2d(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
           padding: Any, dilation: Any, groups: int) -> None:
    if out.numel() == 0:
        return
    s = _check(out._dtype, _REAL, "conv2d")
    cdt = _compute(out._dtype)
    geo = _Conv(input._shape, weight._shape, out._shape[2:], stride, padding, dilation, groups)
    prod = empty((geo.g, geo.cog, geo.cols), cdt, out.device)
    gemm_into(prod, geo.weight(weight, cdt), geo.columns(input, cdt))
    target = out if out.is_contiguous() else empty(out._shape, out._dtype, out.device)
    launch(SOURCE, f"cnl_to_nchw_{s}", grid_for(out.numel()), BLOCK,
           [target, prod, bias, *map(np.int64, (0 if bias is None else bias._stride[0], geo.n,
                                                 geo.c_out, geo.ho * geo.wo))])
    if target is not out:
        copy_into(out, target)


@CUDA.register("_conv2d_input_backward")
def conv2d_input_backward(grad_input: Tensor, grad_output: Tensor, weight: Tensor, stride: Any,
                          padding: Any, dilation: Any, groups: int) -> None:
    gi = grad_input
    if gi.numel() == 0:
        return
    s = _check(gi._dtype, _REAL, "conv2d backward")
    if grad_output.numel() == 0 or weight.numel() == 0:
        _zero(gi)
        return
    cdt = _compute(gi._dtype)
    geo = _Conv(gi._shape, weight._shape, grad_output._shape[2:], stride, padding, dilation,
                groups)
    w3 = geo.weight(weight, cdt)
    w3t = w3._view((geo.g, geo.k_group, geo.cog),
                   (w3._stride[0], w3._stride[2], w3._stride[1]), w3._offset)
    cols = empty((geo.g, geo.k_group, geo.cols), cdt, gi.device)
    gemm_into(cols, w3t, geo.grad_rows(grad_output, cdt))
    launch(SOURCE, f"col2im_{s}", grid_for(gi.numel()), BLOCK,
           [gi, cols, geo.geometry(y_strides=gi._stride)])


@CUDA.register("_conv2d_weight_backward")
def conv2d_weight_backward(grad_weight: Tensor, grad_output: Tensor, input: Tensor, stride: Any,
                           padding: Any, dilation: Any, groups: int) -> None:
    gw = grad_weight
    if gw.numel() == 0:
        return
    _check(gw._dtype, _REAL, "conv2d backward")
    if grad_output.numel() == 0 or input.numel() == 0:
        _zero(gw)
        return
    cdt = _compute(gw._dtype)
    geo = _Conv(input._shape, gw._shape, grad_output._shape[2:], stride, padding, dilation,
                groups)
    cols = geo.columns(input, cdt)
    cols_t = cols._view((geo.g, geo.cols, geo.k_group), (cols._stride[0], 1, geo.cols), 0)
    direct = gw._dtype is cdt and gw.is_contiguous()
    target = gw if direct else empty(gw._shape, cdt, gw.device)
    kg = geo.k_group
    gemm_into(target._view((geo.g, geo.cog, kg), (geo.cog * kg, kg, 1), target._offset),
              geo.grad_rows(grad_output, cdt), cols_t)
    if not direct:
        copy_into(gw, target)


# -- pooling --------------------------------------------------------------------------------------
def _pool_geometry(big: Tensor, small: Tensor, kernel: Any = (1, 1), stride: Any = (1, 1),
                   padding: Any = (0, 0), dilation: Any = (1, 1), x_strides: Any = None,
                   o_strides: Any = None, i_strides: Any = (0, 0, 0, 0)) -> DeviceArray:
    """[N, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, x/out/index strides]: ``big`` is
    the (N, C, H, W) input side, ``small`` the (N, C, Ho, Wo) pooled side."""
    n, c, h, w = big._shape
    ho, wo = small._shape[2:]
    return constant_array([n, c, h, w, ho, wo, *kernel, *stride, *padding, *dilation,
                        *x_strides, *o_strides, *i_strides])


def _pool_launch(name: str, dt: D.dtype, n: int, args: list) -> None:
    launch(SOURCE, f"{name}_{SHORT[dt]}", grid_for(n), BLOCK, args)


@CUDA.register("_max_pool2d")
def max_pool2d(out: Tensor, indices: Tensor, input: Tensor, kernel: Any, stride: Any,
               padding: Any, dilation: Any) -> None:
    if out.numel() == 0:
        return
    _check(input._dtype, _POOL_DTYPES, "max_pool2d")
    p = _pool_geometry(input, out, kernel, stride, padding, dilation, input._stride,
                       out._stride, indices._stride)
    _pool_launch("max_pool", input._dtype, out.numel(), [out, indices, input, p])


@CUDA.register("_adaptive_max_pool2d")
def adaptive_max_pool2d(out: Tensor, indices: Tensor, input: Tensor) -> None:
    if out.numel() == 0:
        return
    _check(input._dtype, _POOL_DTYPES, "adaptive_max_pool2d")
    p = _pool_geometry(input, out, x_strides=input._stride, o_strides=out._stride,
                       i_strides=indices._stride)
    _pool_launch("adaptive_max_pool", input._dtype, out.numel(), [out, indices, input, p])


@CUDA.register("_max_pool2d_backward")
def max_pool2d_backward(grad_input: Tensor, grad_output: Tensor, indices: Tensor) -> None:
    """Scatter-add through the saved indices (atomics: windows may share a maximum); an index
    outside its (H, W) plane raises instead of writing out of bounds."""
    gi = grad_input
    if gi.numel() == 0:
        return
    dt = gi._dtype
    _check(dt, _REAL, "max_pool2d backward")
    if dt.is_floating_point:
        alert_not_deterministic("max_pool2d_with_indices_backward_cuda")
    acc_dt = _ATOMIC[dt]
    acc = gi if (acc_dt is dt and gi.is_contiguous()) else empty(gi._shape, acc_dt, gi.device)
    zero_(acc)
    if grad_output.numel():
        dev = gi._storage.device.index or 0
        p = _pool_geometry(gi, grad_output, x_strides=grad_output._stride,
                           o_strides=(0, 0, 0, 0), i_strides=indices._stride)
        _pool_launch("max_pool_backward", dt, grad_output.numel(),
                     [acc, grad_output, indices, errors.record(dev),
                      np.int64(_MAX_POOL_BW_SITE.id), p])
        errors.launched(dev)
    if acc is not gi:
        copy_into(gi, acc)


@CUDA.register("_avg_pool2d")
def avg_pool2d(out: Tensor, input: Tensor, kernel: Any, stride: Any, padding: Any,
               count_include_pad: bool, divisor: int) -> None:
    if out.numel() == 0:
        return
    _check(input._dtype, _REAL, "avg_pool2d")
    p = _pool_geometry(input, out, kernel, stride, padding, (1, 1), input._stride, out._stride)
    _pool_launch("avg_pool", input._dtype, out.numel(),
                 [out, input, bool(count_include_pad), np.int64(divisor), p])


@CUDA.register("_avg_pool2d_backward")
def avg_pool2d_backward(grad_input: Tensor, grad_output: Tensor, kernel: Any, stride: Any,
                        padding: Any, count_include_pad: bool, divisor: int) -> None:
    gi = grad_input
    if gi.numel() == 0:
        return
    _check(gi._dtype, _REAL, "avg_pool2d backward")
    p = _pool_geometry(gi, grad_output, kernel, stride, padding, (1, 1), grad_output._stride,
                       gi._stride)
    _pool_launch("avg_pool_backward", gi._dtype, gi.numel(),
                 [gi, grad_output, bool(count_include_pad), np.int64(divisor), p])


@CUDA.register("_adaptive_avg_pool2d")
def adaptive_avg_pool2d(out: Tensor, input: Tensor) -> None:
    if out.numel() == 0:
        return
    _check(input._dtype, _REAL, "adaptive_avg_pool2d")
    p = _pool_geometry(input, out, x_strides=input._stride, o_strides=out._stride)
    _pool_launch("adaptive_avg_pool", input._dtype, out.numel(), [out, input, p])


@CUDA.register("_adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_input: Tensor, grad_output: Tensor) -> None:
    gi = grad_input
    if gi.numel() == 0:
        return
    _check(gi._dtype, _REAL, "adaptive_avg_pool2d backward")
    p = _pool_geometry(gi, grad_output, x_strides=grad_output._stride, o_strides=gi._stride)
    _pool_launch("adaptive_avg_pool_backward", gi._dtype, gi.numel(), [gi, grad_output, p])

"""CPU kernels for convolution (im2col + BLAS GEMM) and pooling (Numba loops over planes).

The frontends in gputensor/_ops/conv.py validate arguments, resolve padding and allocate every
output; these kernels only fill them, under the names and contracts listed there.

Convolutions are im2col + BLAS: a gather through a cached "tap table" builds the column matrix,
and np.matmul does the products. The forward pass and the input gradient use per-sample columns
(N, groups, C/groups*kh*kw, Ho*Wo), so the batched product lands straight in NCHW and the input
gradient's columns fold back plane by plane; the weight gradient gathers the batch-wide layout
(groups, C/groups*kh*kw, N*Ho*Wo) instead, so each group is ONE product contracting over the
whole batch. Pools run one Numba task per (n, c) plane.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit, prange

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

# Parallel (prange) variants run above these sizes only. The column gathers sit between BLAS
# calls, whose OpenBLAS workers keep spinning for a while after each product: a Numba parallel
# region started then competes with them for the cores and can stall for a scheduler time
# slice, so it only pays on work far larger than that.
COLUMNS_PARALLEL_THRESHOLD = 1 << 21   # column-matrix elements
POOL_PARALLEL_THRESHOLD = 1 << 18      # pooled (or gradient) elements

# NumPy/BLAS cannot compute in these: kernels run in float32 and the result is cast back.
_UPCAST = {D.float16.np_dtype: np.dtype(np.float32), D.bfloat16.np_dtype: np.dtype(np.float32)}


def _compute(arr: np.ndarray) -> np.ndarray:
    up = _UPCAST.get(arr.dtype)
    return arr.astype(up) if up is not None else arr


# -- im2col / col2im through a tap table -----------------------------------------------------
# The table lists, for every (kernel tap, output position), the flat position in one (H, W)
# input plane that the tap reads, or -1 where it falls in the padding. Gathering through it is
# one long, branch-light loop per (n, c) plane whatever the stride, padding or dilation: short
# nested loops over tiny output rows (4x4 feature maps) cost more in loop setup than the copy.
@functools.lru_cache(maxsize=256)
def _tap_table(h: int, w: int, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, dh: int,
               dw: int, ho: int, wo: int) -> np.ndarray:
    ih = (np.arange(ho) * sh - ph)[None, :] + (np.arange(kh) * dh)[:, None]     # (kh, ho)
    iw = (np.arange(wo) * sw - pw)[None, :] + (np.arange(kw) * dw)[:, None]     # (kw, wo)
    inside = (((ih >= 0) & (ih < h))[:, None, :, None]
              & ((iw >= 0) & (iw < w))[None, :, None, :])                      # (kh, kw, ho, wo)
    flat = ih[:, None, :, None] * w + iw[None, :, None, :]
    table = np.where(inside, flat, -1).astype(np.int64).reshape(-1)
    table.flags.writeable = False   # shared by every call with this geometry
    return table


@njit(cache=True, error_model="numpy", boundscheck=False)
def _gather_plane(xf, table, cols, t, zero):  # noqa: ANN001, ANN202
    # xf: (N, C*H*W); cols: (N, C, taps*L), contiguous; task t is the input plane (n, c).
    c_in = cols.shape[1]
    n, c = t // c_in, t % c_in
    base = c * (xf.shape[1] // c_in)
    for q in range(table.shape[0]):
        k = table[q]
        cols[n, c, q] = xf[n, base + k] if k >= 0 else zero


@njit(cache=True, error_model="numpy", boundscheck=False)
def _gather_rows_plane(xf, table, cols, t, zero):  # noqa: ANN001, ANN202
    # The same gather into an (N, C, taps, L) view of the by-group layout (C, taps, N, L).
    c_in, taps, length = cols.shape[1], cols.shape[2], cols.shape[3]
    n, c = t // c_in, t % c_in
    base = c * (xf.shape[1] // c_in)
    for r in range(taps):
        for q in range(length):
            k = table[r * length + q]
            cols[n, c, r, q] = xf[n, base + k] if k >= 0 else zero


@njit(cache=True, error_model="numpy", boundscheck=False)
def _gather_serial(xf, table, cols, zero):  # noqa: ANN001, ANN202
    for t in range(cols.shape[0] * cols.shape[1]):
        _gather_plane(xf, table, cols, t, zero)


@njit(cache=True, parallel=True, error_model="numpy", boundscheck=False)
def _gather_parallel(xf, table, cols, zero):  # noqa: ANN001, ANN202
    for t in prange(cols.shape[0] * cols.shape[1]):
        _gather_plane(xf, table, cols, t, zero)


@njit(cache=True, error_model="numpy", boundscheck=False)
def _gather_rows_serial(xf, table, cols, zero):  # noqa: ANN001, ANN202
    for t in range(cols.shape[0] * cols.shape[1]):
        _gather_rows_plane(xf, table, cols, t, zero)


@njit(cache=True, parallel=True, error_model="numpy", boundscheck=False)
def _gather_rows_parallel(xf, table, cols, zero):  # noqa: ANN001, ANN202
    for t in prange(cols.shape[0] * cols.shape[1]):
        _gather_rows_plane(xf, table, cols, t, zero)


@njit(cache=True, error_model="numpy", boundscheck=False)
def _scatter_cols_plane(cols, table, gx, t):  # noqa: ANN001, ANN202
    # The adjoint of _gather_plane: sum every tap back into the zeroed plane (n, c) of gx.
    c_in = cols.shape[1]
    n, c = t // c_in, t % c_in
    base = c * (gx.shape[1] // c_in)
    for q in range(table.shape[0]):
        k = table[q]
        if k >= 0:
            gx[n, base + k] += cols[n, c, q]


@njit(cache=True, error_model="numpy", boundscheck=False)
def _scatter_cols_serial(cols, table, gx):  # noqa: ANN001, ANN202
    for t in range(cols.shape[0] * cols.shape[1]):
        _scatter_cols_plane(cols, table, gx, t)


@njit(cache=True, parallel=True, error_model="numpy", boundscheck=False)
def _scatter_cols_parallel(cols, table, gx):  # noqa: ANN001, ANN202
    for t in prange(cols.shape[0] * cols.shape[1]):
        _scatter_cols_plane(cols, table, gx, t)


class _Geometry:
    """One convolution's sizes, as the kernels see them."""

    def __init__(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...], out_hw: Any,
                 stride: Any, padding: Any, dilation: Any, groups: int) -> None:
        self.n, self.c, self.h, self.w = x_shape
        self.c_out, self.cg, self.kh, self.kw = w_shape
        self.ho, self.wo = out_hw
        self.groups = groups
        self.taps = self.kh * self.kw
        self.k_group = self.cg * self.taps              # GEMM contraction per group
        self.length = self.ho * self.wo
        # 1x1 kernels with unit stride and no padding read the input as it is: no columns.
        self.identity = (self.taps == 1 and tuple(stride) == (1, 1)
                         and tuple(padding) == (0, 0) and (self.ho, self.wo) == (self.h, self.w))
        self.table = None if self.identity else _tap_table(
            self.h, self.w, self.kh, self.kw, stride[0], stride[1], padding[0], padding[1],
            dilation[0], dilation[1], self.ho, self.wo)

    def columns(self, x: np.ndarray) -> np.ndarray:
        """The (N, groups, C/groups*kh*kw, Ho*Wo) column matrix of a contiguous input: one
        GEMM operand per (sample, group)."""
        g = self.groups
        if self.identity:
            return x.reshape(self.n, g, self.k_group, self.length)
        cols = np.empty((self.n, self.c, self.taps * self.length), x.dtype)
        fn = _gather_parallel if cols.size >= COLUMNS_PARALLEL_THRESHOLD else _gather_serial
        fn(x.reshape(self.n, -1), self.table, cols, x.dtype.type(0))
        return cols.reshape(self.n, g, self.k_group, self.length)

    def columns_by_group(self, x: np.ndarray) -> np.ndarray:
        """The (groups, C/groups*kh*kw, N*Ho*Wo) column matrix: the whole batch in one GEMM
        operand per group (the weight gradient contracts over N*Ho*Wo)."""
        cols = np.empty((self.c, self.taps, self.n, self.length), x.dtype)
        if self.identity:
            cols[:, 0] = x.reshape(self.n, self.c, self.length).transpose(1, 0, 2)
        else:
            fn = _gather_rows_parallel if cols.size >= COLUMNS_PARALLEL_THRESHOLD else \
                _gather_rows_serial
            fn(x.reshape(self.n, -1), self.table, cols.transpose(2, 0, 1, 3), x.dtype.type(0))
        return cols.reshape(self.groups, self.k_group, self.n * self.length)

    def fold(self, cols: np.ndarray) -> np.ndarray:
        """The adjoint of ``columns``: (N, groups, K, L) columns summed into (N, C, H, W)."""
        if self.identity:
            return cols.reshape(self.n, self.c, self.h, self.w)
        cols = cols.reshape(self.n, self.c, self.taps * self.length)
        gx = np.zeros((self.n, self.c * self.h * self.w), cols.dtype)
        big = cols.size >= COLUMNS_PARALLEL_THRESHOLD
        fn = _scatter_cols_parallel if big else _scatter_cols_serial
        fn(cols, self.table, gx)
        return gx.reshape(self.n, self.c, self.h, self.w)


def _contiguous(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(_compute(arr))


@CPU.register("_conv2d")
def conv2d(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
           padding: Any, dilation: Any, groups: int) -> None:
    o = out._host
    if o.size == 0:
        return
    x, w = _contiguous(input._host), _compute(weight._host)
    geo = _Geometry(x.shape, w.shape, o.shape[2:], stride, padding, dilation, groups)
    if geo.k_group == 0:
        o[...] = 0 if bias is None else bias._host[:, None, None]
        return
    w3 = w.reshape(groups, geo.c_out // groups, geo.k_group)
    if o.flags.c_contiguous and o.dtype == w3.dtype:   # the products land in NCHW directly
        np.matmul(w3, geo.columns(x), out=o.reshape(geo.n, groups, -1, geo.length))
    else:
        o[...] = np.matmul(w3, geo.columns(x)).reshape(o.shape)
    if bias is not None:
        o += _compute(bias._host)[:, None, None].astype(o.dtype, copy=False)


@CPU.register("_conv2d_input_backward")
def conv2d_input_backward(grad_input: Tensor, grad_output: Tensor, weight: Tensor, stride: Any,
                          padding: Any, dilation: Any, groups: int) -> None:
    gi = grad_input._host
    if gi.size == 0:
        return
    g, w = _contiguous(grad_output._host), _compute(weight._host)
    if g.size == 0 or w.size == 0:
        gi[...] = 0
        return
    geo = _Geometry(gi.shape, w.shape, g.shape[2:], stride, padding, dilation, groups)
    cog = geo.c_out // groups
    wt = w.reshape(groups, cog, geo.k_group).transpose(0, 2, 1)
    cols = np.matmul(wt, g.reshape(geo.n, groups, cog, geo.length))   # (N, G, K, L)
    gi[...] = geo.fold(cols)


@CPU.register("_conv2d_weight_backward")
def conv2d_weight_backward(grad_weight: Tensor, grad_output: Tensor, input: Tensor, stride: Any,
                           padding: Any, dilation: Any, groups: int) -> None:
    gw = grad_weight._host
    if gw.size == 0:
        return
    g, x = _contiguous(grad_output._host), _contiguous(input._host)
    if g.size == 0 or x.size == 0:
        gw[...] = 0
        return
    geo = _Geometry(x.shape, gw.shape, g.shape[2:], stride, padding, dilation, groups)
    cog = geo.c_out // groups
    # (K, N*L) @ (N*L, Cout/G) per group: one product over the whole batch, in the operand
    # order BLAS runs fastest for a long contraction and a small result.
    g2 = np.ascontiguousarray(g.reshape(geo.n, geo.c_out, geo.length).transpose(1, 0, 2))
    g2 = g2.reshape(groups, cog, geo.n * geo.length)
    res = np.matmul(geo.columns_by_group(x), g2.transpose(0, 2, 1))     # (G, K, Cout/G)
    gw[...] = res.transpose(0, 2, 1).reshape(gw.shape)


# -- pooling kernels: one task per (n, c) plane ----------------------------------------------
@njit(cache=True, error_model="numpy")
def _max_pool_plane(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw):  # noqa: ANN001, ANN202
    H, W = x.shape[1], x.shape[2]
    for oh in range(out.shape[1]):
        h0 = oh * sh - ph
        # The first in-bounds tap seeds the max, so the kernel keeps the input's own type.
        i0 = h0
        while i0 < 0:
            i0 += dh
        i0 = min(i0, H - 1)
        for ow in range(out.shape[2]):
            w0 = ow * sw - pw
            j0 = w0
            while j0 < 0:
                j0 += dw
            j0 = min(j0, W - 1)
            best = x[p, i0, j0]
            best_i = i0 * W + j0
            for i in range(kh):
                ih = h0 + i * dh
                if ih < 0 or ih >= H:
                    continue
                for j in range(kw):
                    iw = w0 + j * dw
                    if iw < 0 or iw >= W:
                        continue
                    v = x[p, ih, iw]
                    if v > best or v != v:   # NaN wins and propagates, as in PyTorch
                        best = v
                        best_i = ih * W + iw
            out[p, oh, ow] = best
            idx[p, oh, ow] = best_i


@njit(cache=True, error_model="numpy")
def _max_pool_serial(x, out, idx, kh, kw, sh, sw, ph, pw, dh, dw):  # noqa: ANN001, ANN202
    for p in range(x.shape[0]):
        _max_pool_plane(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw)


@njit(cache=True, parallel=True, error_model="numpy")
def _max_pool_parallel(x, out, idx, kh, kw, sh, sw, ph, pw, dh, dw):  # noqa: ANN001, ANN202
    for p in prange(x.shape[0]):
        _max_pool_plane(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw)


@njit(cache=True, error_model="numpy")
def _scatter_plane(g, idx, gx, p):  # noqa: ANN001, ANN202
    W = gx.shape[2]
    for oh in range(g.shape[1]):
        for ow in range(g.shape[2]):
            k = idx[p, oh, ow]
            gx[p, k // W, k % W] += g[p, oh, ow]


@njit(cache=True, error_model="numpy")
def _scatter_serial(g, idx, gx):  # noqa: ANN001, ANN202
    for p in range(g.shape[0]):
        _scatter_plane(g, idx, gx, p)


@njit(cache=True, parallel=True, error_model="numpy")
def _scatter_parallel(g, idx, gx):  # noqa: ANN001, ANN202
    for p in prange(g.shape[0]):
        _scatter_plane(g, idx, gx, p)


@njit(cache=True, error_model="numpy")
def _avg_divisor(h0, w0, kh, kw, H, W, ph, pw, count_include_pad, divisor):  # noqa: ANN001, ANN202
    """The window's divisor and its in-bounds extent [hs, he) x [ws, we)."""
    he = min(h0 + kh, H + ph)
    we = min(w0 + kw, W + pw)
    pool = (he - h0) * (we - w0)   # the window clipped to the padded input
    hs, ws = max(h0, 0), max(w0, 0)
    he, we = min(he, H), min(we, W)
    if divisor != 0:
        d = divisor
    elif count_include_pad:
        d = pool
    else:
        d = (he - hs) * (we - ws)
    return d, hs, he, ws, we


@njit(cache=True, error_model="numpy")
def _avg_pool_plane(x, out, p, kh, kw, sh, sw, ph, pw, cip, divisor):  # noqa: ANN001, ANN202
    H, W = x.shape[1], x.shape[2]
    for oh in range(out.shape[1]):
        for ow in range(out.shape[2]):
            d, hs, he, ws, we = _avg_divisor(oh * sh - ph, ow * sw - pw, kh, kw, H, W, ph, pw,
                                             cip, divisor)
            acc = 0.0
            for ih in range(hs, he):
                for iw in range(ws, we):
                    acc += x[p, ih, iw]
            out[p, oh, ow] = acc / d


@njit(cache=True, error_model="numpy")
def _avg_pool_serial(x, out, kh, kw, sh, sw, ph, pw, cip, divisor):  # noqa: ANN001, ANN202
    for p in range(x.shape[0]):
        _avg_pool_plane(x, out, p, kh, kw, sh, sw, ph, pw, cip, divisor)


@njit(cache=True, parallel=True, error_model="numpy")
def _avg_pool_parallel(x, out, kh, kw, sh, sw, ph, pw, cip, divisor):  # noqa: ANN001, ANN202
    for p in prange(x.shape[0]):
        _avg_pool_plane(x, out, p, kh, kw, sh, sw, ph, pw, cip, divisor)


@njit(cache=True, error_model="numpy")
def _avg_spread_plane(g, gx, p, kh, kw, sh, sw, ph, pw, cip, divisor):  # noqa: ANN001, ANN202
    H, W = gx.shape[1], gx.shape[2]
    for oh in range(g.shape[1]):
        for ow in range(g.shape[2]):
            d, hs, he, ws, we = _avg_divisor(oh * sh - ph, ow * sw - pw, kh, kw, H, W, ph, pw,
                                             cip, divisor)
            v = g[p, oh, ow] / d
            for ih in range(hs, he):
                for iw in range(ws, we):
                    gx[p, ih, iw] += v


@njit(cache=True, error_model="numpy")
def _avg_spread_serial(g, gx, kh, kw, sh, sw, ph, pw, cip, divisor):  # noqa: ANN001, ANN202
    for p in range(g.shape[0]):
        _avg_spread_plane(g, gx, p, kh, kw, sh, sw, ph, pw, cip, divisor)


@njit(cache=True, parallel=True, error_model="numpy")
def _avg_spread_parallel(g, gx, kh, kw, sh, sw, ph, pw, cip, divisor):  # noqa: ANN001, ANN202
    for p in prange(g.shape[0]):
        _avg_spread_plane(g, gx, p, kh, kw, sh, sw, ph, pw, cip, divisor)


@njit(cache=True, error_model="numpy")
def _window(o, n_out, n_in):  # noqa: ANN001, ANN202
    """Adaptive window o of n_out over n_in: [floor(o*n_in/n_out), ceil((o+1)*n_in/n_out))."""
    return (o * n_in) // n_out, -((-(o + 1) * n_in) // n_out)


@njit(cache=True, error_model="numpy")
def _adaptive_avg_plane(x, out, p):  # noqa: ANN001, ANN202
    H, W = x.shape[1], x.shape[2]
    Ho, Wo = out.shape[1], out.shape[2]
    for oh in range(Ho):
        hs, he = _window(oh, Ho, H)
        for ow in range(Wo):
            ws, we = _window(ow, Wo, W)
            acc = 0.0
            for ih in range(hs, he):
                for iw in range(ws, we):
                    acc += x[p, ih, iw]
            out[p, oh, ow] = acc / ((he - hs) * (we - ws))


@njit(cache=True, error_model="numpy")
def _adaptive_avg_serial(x, out):  # noqa: ANN001, ANN202
    for p in range(x.shape[0]):
        _adaptive_avg_plane(x, out, p)


@njit(cache=True, parallel=True, error_model="numpy")
def _adaptive_avg_parallel(x, out):  # noqa: ANN001, ANN202
    for p in prange(x.shape[0]):
        _adaptive_avg_plane(x, out, p)


@njit(cache=True, error_model="numpy")
def _adaptive_max_plane(x, out, idx, p):  # noqa: ANN001, ANN202
    H, W = x.shape[1], x.shape[2]
    Ho, Wo = out.shape[1], out.shape[2]
    for oh in range(Ho):
        hs, he = _window(oh, Ho, H)
        for ow in range(Wo):
            ws, we = _window(ow, Wo, W)
            best = x[p, hs, ws]
            best_i = hs * W + ws
            for ih in range(hs, he):
                for iw in range(ws, we):
                    v = x[p, ih, iw]
                    if v > best or v != v:
                        best = v
                        best_i = ih * W + iw
            out[p, oh, ow] = best
            idx[p, oh, ow] = best_i


@njit(cache=True, error_model="numpy")
def _adaptive_max_serial(x, out, idx):  # noqa: ANN001, ANN202
    for p in range(x.shape[0]):
        _adaptive_max_plane(x, out, idx, p)


@njit(cache=True, parallel=True, error_model="numpy")
def _adaptive_max_parallel(x, out, idx):  # noqa: ANN001, ANN202
    for p in prange(x.shape[0]):
        _adaptive_max_plane(x, out, idx, p)


@njit(cache=True, error_model="numpy")
def _adaptive_spread_plane(g, gx, p):  # noqa: ANN001, ANN202
    H, W = gx.shape[1], gx.shape[2]
    Ho, Wo = g.shape[1], g.shape[2]
    for oh in range(Ho):
        hs, he = _window(oh, Ho, H)
        for ow in range(Wo):
            ws, we = _window(ow, Wo, W)
            v = g[p, oh, ow] / ((he - hs) * (we - ws))
            for ih in range(hs, he):
                for iw in range(ws, we):
                    gx[p, ih, iw] += v


@njit(cache=True, error_model="numpy")
def _adaptive_spread_serial(g, gx):  # noqa: ANN001, ANN202
    for p in range(g.shape[0]):
        _adaptive_spread_plane(g, gx, p)


@njit(cache=True, parallel=True, error_model="numpy")
def _adaptive_spread_parallel(g, gx):  # noqa: ANN001, ANN202
    for p in prange(g.shape[0]):
        _adaptive_spread_plane(g, gx, p)


# -- pooling entry points ------------------------------------------------------------------
def _planes(t: Tensor) -> np.ndarray:
    """A (N*C, H, W) host view (a copy only when the layout can't merge N and C)."""
    arr = t._host
    return arr.reshape(-1, arr.shape[-2], arr.shape[-1])


def _float_acc(arr: np.ndarray) -> np.ndarray:
    """Averages accumulate in the array's float type; integers average in float64."""
    if arr.dtype.kind in "biu":
        return arr.astype(np.float64)
    return _compute(arr)


def _target(dst: Tensor, dtype: np.dtype, zero: bool = False) -> np.ndarray:
    """``dst`` as (N*C, H, W) planes to write into: its own memory when it is contiguous and
    of the computing dtype, else a scratch array that ``_store`` copies back."""
    o = dst._host
    shape = (-1, *o.shape[-2:])
    if o.flags.c_contiguous and o.dtype == dtype:
        planes = o.reshape(shape)
        if zero:
            planes[...] = 0
        return planes
    return (np.zeros if zero else np.empty)(o.shape, dtype).reshape(shape)


def _store(dst: Tensor, planes: np.ndarray) -> None:
    o = dst._host
    if np.may_share_memory(o, planes):   # written in place by _target
        return
    if o.dtype.kind in "iu" and planes.dtype.kind == "f":
        planes = np.trunc(planes)   # integer averages truncate toward zero, like C division
    o[...] = planes.reshape(o.shape)


def _pick(size: int, serial: Any, parallel: Any) -> Any:
    return parallel if size >= POOL_PARALLEL_THRESHOLD else serial


@CPU.register("_max_pool2d")
def max_pool2d(out: Tensor, indices: Tensor, input: Tensor, kernel: Any, stride: Any,
               padding: Any, dilation: Any) -> None:
    if out.numel() == 0:
        return
    x = _compute(_planes(input))
    o, idx = _target(out, x.dtype), _target(indices, np.dtype(np.int64))
    _pick(o.size, _max_pool_serial, _max_pool_parallel)(
        x, o, idx, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
        dilation[0], dilation[1])
    _store(out, o)
    _store(indices, idx)


@CPU.register("_max_pool2d_backward")
def max_pool2d_backward(grad_input: Tensor, grad_output: Tensor, indices: Tensor) -> None:
    if grad_input.numel() == 0:
        return
    g = _compute(_planes(grad_output))
    gx = _target(grad_input, g.dtype, zero=True)
    if g.size:
        _pick(g.size, _scatter_serial, _scatter_parallel)(g, _planes(indices), gx)
    _store(grad_input, gx)


@CPU.register("_avg_pool2d")
def avg_pool2d(out: Tensor, input: Tensor, kernel: Any, stride: Any, padding: Any,
               count_include_pad: bool, divisor: int) -> None:
    if out.numel() == 0:
        return
    x = _float_acc(_planes(input))
    o = _target(out, x.dtype)
    _pick(o.size, _avg_pool_serial, _avg_pool_parallel)(
        x, o, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
        bool(count_include_pad), int(divisor))
    _store(out, o)


@CPU.register("_avg_pool2d_backward")
def avg_pool2d_backward(grad_input: Tensor, grad_output: Tensor, kernel: Any, stride: Any,
                        padding: Any, count_include_pad: bool, divisor: int) -> None:
    if grad_input.numel() == 0:
        return
    g = _float_acc(_planes(grad_output))
    gx = _target(grad_input, g.dtype, zero=True)
    if g.size:
        _pick(g.size, _avg_spread_serial, _avg_spread_parallel)(
            g, gx, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
            bool(count_include_pad), int(divisor))
    _store(grad_input, gx)


@CPU.register("_adaptive_avg_pool2d")
def adaptive_avg_pool2d(out: Tensor, input: Tensor) -> None:
    if out.numel() == 0:
        return
    x = _float_acc(_planes(input))
    o = _target(out, x.dtype)
    _pick(o.size, _adaptive_avg_serial, _adaptive_avg_parallel)(x, o)
    _store(out, o)


@CPU.register("_adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_input: Tensor, grad_output: Tensor) -> None:
    if grad_input.numel() == 0:
        return
    g = _float_acc(_planes(grad_output))
    gx = _target(grad_input, g.dtype, zero=True)
    if g.size:
        _pick(g.size, _adaptive_spread_serial, _adaptive_spread_parallel)(g, gx)
    _store(grad_input, gx)


@CPU.register("_adaptive_max_pool2d")
def adaptive_max_pool2d(out: Tensor, indices: Tensor, input: Tensor) -> None:
    if out.numel() == 0:
        return
    x = _compute(_planes(input))
    o, idx = _target(out, x.dtype), _target(indices, np.dtype(np.int64))
    _pick(o.size, _adaptive_max_serial, _adaptive_max_parallel)(x, o, idx)
    _store(out, o)
    _store(indices, idx)

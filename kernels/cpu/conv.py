"""CPU kernels for convolution (im2col + BLAS GEMM) and pooling (Numba loops over planes).

The frontends in gputensor/_ops/conv.py validate arguments, resolve padding and allocate every
output; these kernels only fill them, under the names and contracts listed there.

Convolutions are im2col + BLAS, a batch chunk at a time (COLUMNS_PER_CHUNK) so the columns are
still in cache when the GEMM reads them:

- forward: per-sample columns (nb, C*kh*kw, Ho*Wo); the (C_out, K) x (K, L) product of each
  sample lands straight in NCHW, no transposes.
- input gradient: the per-sample columns (K, C_out) x (C_out, L) straight from grad_output's
  planes, folded back by a Numba loop.
- weight gradient: batch-wide columns (C*kh*kw, nb*Ho*Wo), so each group is ONE product
  contracting over the whole chunk (grad_output is transposed to (C_out, nb*L) for it).

1x1 convolutions with unit stride and no padding read the input as it is (no columns). There
is no Numba parallel region between the BLAS calls: OpenBLAS workers keep spinning for a
while after each product, and a parallel column loop started then fought them for the cores
(a 16x64x32x32 3x3 conv took ~400 ms instead of ~30 ms on a busy two-core machine). Work
arrays are kept per thread between calls (page faults on fresh multi-megabyte arrays cost as
much as filling them). Pools run one Numba task per (n, c) plane.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

import numpy as np
from numba import njit, prange

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

from . import conv_small, conv_taps

# Column-matrix elements per batch chunk: large enough that each GEMM keeps both cores busy,
# small enough that the columns are still in cache when the GEMM reads them.
COLUMNS_PER_CHUNK = 1 << 20
POOL_PARALLEL_THRESHOLD = 1 << 18      # pooled (or gradient) elements

# Output rows shorter than this are gathered through a table of positions, not per-tap copies.
SHORT_ROWS = 16

# NumPy/BLAS cannot compute in these: kernels run in float32 and the result is cast back.
_UPCAST = {D.float16.np_dtype: np.dtype(np.float32), D.bfloat16.np_dtype: np.dtype(np.float32)}


def _compute(arr: np.ndarray) -> np.ndarray:
    up = _UPCAST.get(arr.dtype)
    return arr.astype(up) if up is not None else arr


def _contiguous(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(_compute(arr))


# -- im2col / col2im -------------------------------------------------------------------------
# A chunk of the input is copied once into a zero-bordered buffer that holds every tap's reach;
# tap (i, j) of all samples and channels is then ONE strided view of that buffer, and the
# columns are kh*kw NumPy copies of such views: ~3x faster than a per-element gather loop on
# 32-wide rows. Rows shorter than SHORT_ROWS go through a gather table instead, and the
# adjoint (fold) is a Numba loop, which beat kh*kw NumPy in-place adds at every size measured.
_WORK = threading.local()
WORKSPACE_KEEP = 1 << 24   # bytes: larger work arrays are not kept between calls


def _workspace(name: str, size: int, dtype: np.dtype) -> np.ndarray:
    """A flat work array of at least ``size`` elements, kept per thread between calls: a
    fresh multi-megabyte array pays its page faults on every call, which cost as much as the
    copies that fill it."""
    cache = getattr(_WORK, "arrays", None)
    if cache is None:
        cache = _WORK.arrays = {}
    key = (name, dtype)
    buf = cache.get(key)
    if buf is None or buf.size < size:
        buf = np.empty(size, dtype)
        if buf.nbytes <= WORKSPACE_KEEP:
            cache[key] = buf
    return buf


@functools.lru_cache(maxsize=256)
def _tap_table(wp: int, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, ho: int,
               wo: int) -> np.ndarray:
    """Flat positions in one bordered (Hp, Wp) plane read by tap (i, j) at output (oh, ow),
    in the columns' (i, j, oh, ow) order."""
    rows = (np.arange(kh) * dh)[:, None] + (np.arange(ho) * sh)[None, :]       # (kh, ho)
    cols = (np.arange(kw) * dw)[:, None] + (np.arange(wo) * sw)[None, :]       # (kw, wo)
    table = (rows[:, None, :, None] * wp + cols[None, :, None, :]).reshape(-1)
    table.flags.writeable = False   # shared by every call with this geometry
    return table


@njit(cache=True, error_model="numpy", boundscheck=False)
def _gather_taps(xp, table, cols):  # noqa: ANN001, ANN202
    # cols[n, c, t, l] = xp[n, c, table[t*L + l]] (cols of any strides, so either layout):
    # one short loop per plane. On planes a few pixels wide, NumPy's per-tap copies spend
    # more on their 4-element rows than on the data.
    length = cols.shape[3]
    for n in range(cols.shape[0]):
        for c in range(cols.shape[1]):
            for t in range(cols.shape[2]):
                for q in range(length):
                    cols[n, c, t, q] = xp[n, c, table[t * length + q]]


@njit(cache=True, error_model="numpy", boundscheck=False)
def _fold_table(cols, table, gp):  # noqa: ANN001, ANN202
    # The adjoint of _gather_taps: gp[n, c, table[t*L + l]] += cols[n, c, t, l], on short
    # rows, where the per-tap loop's 6-d indexing costs more than the data.
    length = cols.shape[3]
    for n in range(cols.shape[0]):
        for c in range(cols.shape[1]):
            for t in range(cols.shape[2]):
                for q in range(length):
                    gp[n, c, table[t * length + q]] += cols[n, c, t, q]


@njit(cache=True, error_model="numpy", boundscheck=False)
def _fold_taps(cols, gp, sh, sw, dh, dw):  # noqa: ANN001, ANN202
    # The adjoint of the tap copies: cols (nb, C, kh, kw, Ho, Wo) summed into the bordered
    # gp (nb, C, Hp, Wp). A loop, where the copies are NumPy's: kh*kw separate in-place adds
    # cost 2-3x more on short output rows (4x4 planes) and strided windows.
    nb, c_in, kh, kw, ho, wo = cols.shape
    for n in range(nb):
        for c in range(c_in):
            for i in range(kh):
                for j in range(kw):
                    for oh in range(ho):
                        r, b = i * dh + oh * sh, j * dw
                        if sw == 1:
                            for ow in range(wo):
                                gp[n, c, r, b + ow] += cols[n, c, i, j, oh, ow]
                        else:
                            for ow in range(wo):
                                gp[n, c, r, b + ow * sw] += cols[n, c, i, j, oh, ow]


class _Geometry:
    """One convolution's sizes and column plan, as the kernels see them."""

    def __init__(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...], out_hw: Any,
                 stride: Any, padding: Any, dilation: Any, groups: int) -> None:
        self.n, self.c, self.h, self.w = x_shape
        self.c_out, self.cg, self.kh, self.kw = w_shape
        self.ho, self.wo = out_hw
        self.groups = groups
        self.cog = self.c_out // groups
        self.rows = self.c * self.kh * self.kw          # column-matrix rows
        self.k_group = self.cg * self.kh * self.kw      # GEMM contraction per group
        self.length = self.ho * self.wo
        self.stride, self.padding, self.dilation = tuple(stride), tuple(padding), tuple(dilation)
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        # The buffer spans what the taps read: rows [-ph, (ho-1)*sh + (kh-1)*dh - ph].
        self.hp = (self.ho - 1) * sh + (self.kh - 1) * dh + 1
        self.wp = (self.wo - 1) * sw + (self.kw - 1) * dw + 1
        self.hin = max(0, min(self.h, self.hp - ph))    # input rows / columns the taps reach
        self.win = max(0, min(self.w, self.wp - pw))
        self.bordered = ph > 0 or pw > 0 or self.hp > self.h or self.wp > self.w
        # 1x1 kernels with unit stride and no padding read the input as it is: no columns.
        self.identity = (self.kh * self.kw == 1 and self.stride == (1, 1) and not self.bordered
                         and (self.ho, self.wo) == (self.h, self.w))
        # Products of the input itself need no columns, so no chunks either.
        per_chunk = COLUMNS_PER_CHUNK // max(self.rows * self.length, 1)
        self.chunk = self.n if self.identity else max(1, min(self.n, per_chunk))
        self._zeroed: set[str] = set()

    def adjoint(self) -> _Geometry | None:
        """The forward convolution whose output is this one's input gradient, for unit
        stride: grad_output convolved with the flipped (C, C_out, kh, kw) weights, padded by
        the taps' reach less the padding; None where that padding would be negative."""
        if self.stride != (1, 1):
            return None
        (ph, pw), (dh, dw) = self.padding, self.dilation
        pad = ((self.kh - 1) * dh - ph, (self.kw - 1) * dw - pw)
        if min(pad) < 0:
            return None
        return _Geometry((self.n, self.c_out, self.ho, self.wo), (self.c, self.c_out, self.kh,
                         self.kw), (self.h, self.w), (1, 1), pad, self.dilation, 1)

    def chunks(self) -> range:
        return range(0, self.n, self.chunk)

    def scratch(self, name: str, shape: tuple[int, ...], dtype: np.dtype,
                zero: bool = False) -> np.ndarray:
        """A work array of ``shape``: zeroed when ``zero`` (once per call: later chunks get
        the same memory), else uninitialised."""
        size = math.prod(shape)
        buf = _workspace(name, size, np.dtype(dtype))
        if zero and name not in self._zeroed:
            buf[:size] = 0
            self._zeroed.add(name)
        return buf[:size].reshape(shape)

    def _taps(self, xp: np.ndarray) -> Any:
        """(i, j, view): tap (i, j) of every (n, c) plane of the bordered ``xp``, (nb, C, Ho,
        Wo) strided views."""
        (sh, sw), (dh, dw) = self.stride, self.dilation
        for i in range(self.kh):
            for j in range(self.kw):
                yield i, j, xp[:, :, i * dh:i * dh + (self.ho - 1) * sh + 1:sh,
                               j * dw:j * dw + (self.wo - 1) * sw + 1:sw]

    def _interior(self, xp: np.ndarray) -> np.ndarray:
        ph, pw = self.padding
        return xp[:, :, ph:ph + self.hin, pw:pw + self.win]

    def columns(self, x: np.ndarray, n0: int, batch_wide: bool = False) -> np.ndarray:
        """Samples n0 .. n0 + chunk of the contiguous input as columns: (nb, groups, K, L)
        per sample, or (groups, K, nb*L) when ``batch_wide``."""
        part = x[n0:n0 + self.chunk]
        nb = part.shape[0]
        if self.identity and not batch_wide:
            return part.reshape(nb, self.groups, self.k_group, self.length)
        xp = part
        if self.bordered:   # zeroed once: chunks only rewrite the interior
            xp = self.scratch("border", (nb, self.c, self.hp, self.wp), x.dtype, zero=True)
            self._interior(xp)[...] = part[:, :, :self.hin, :self.win]
        taps = self.kh * self.kw
        if batch_wide:
            cols = self.scratch("cols", (self.c, taps, nb, self.length), x.dtype)
            view = cols.transpose(2, 0, 1, 3)                 # as (nb, C, taps, L)
        else:
            cols = view = self.scratch("cols", (nb, self.c, taps, self.length), x.dtype)
        if self.wo < SHORT_ROWS:
            table = _tap_table(xp.shape[3], self.kh, self.kw, *self.stride, *self.dilation,
                               self.ho, self.wo)
            _gather_taps(np.ascontiguousarray(xp).reshape(nb, self.c, -1), table, view)
        else:
            planes = view.reshape(nb, self.c, self.kh, self.kw, self.ho, self.wo)
            for i, j, tap in self._taps(xp):
                planes[:, :, i, j] = tap
        if batch_wide:
            return cols.reshape(self.groups, self.k_group, nb * self.length)
        return cols.reshape(nb, self.groups, self.k_group, self.length)

    def fold(self, cols: np.ndarray, gx: np.ndarray) -> None:
        """Write the (nb, C, H, W) input gradient of a chunk's per-sample columns: every tap
        summed back where it read."""
        nb = gx.shape[0]
        gp = self.scratch("fold", (nb, self.c, self.hp, self.wp), gx.dtype) \
            if self.bordered else gx
        gp[...] = 0
        if self.wo < SHORT_ROWS:
            table = _tap_table(gp.shape[3], self.kh, self.kw, *self.stride, *self.dilation,
                               self.ho, self.wo)
            _fold_table(cols.reshape(nb, self.c, self.kh * self.kw, self.length), table,
                        gp.reshape(nb, self.c, -1))
        else:
            _fold_taps(cols.reshape(nb, self.c, self.kh, self.kw, self.ho, self.wo), gp,
                       *self.stride, *self.dilation)
        if gp is not gx:
            if self.hin < self.h or self.win < self.w:   # cells no window reaches
                gx[...] = 0
            gx[:, :, :self.hin, :self.win] = self._interior(gp)

    def by_group(self, g: np.ndarray) -> np.ndarray:
        """A chunk (nb, groups, C_out/groups, L) of grad_output as (groups, C_out/groups,
        nb*L), the batch-wide columns' layout."""
        nb = g.shape[0]
        g2 = self.scratch("grad_output", (self.groups, self.cog, nb, self.length), g.dtype)
        g2[...] = g.transpose(1, 2, 0, 3)
        return g2.reshape(self.groups, self.cog, nb * self.length)


@CPU.register("_conv2d")
def conv2d(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
           padding: Any, dilation: Any, groups: int) -> None:
    o = out._host
    if o.size == 0:
        return
    x, w = _contiguous(input._host), _compute(weight._host)
    geo = _Geometry(x.shape, w.shape, o.shape[2:], stride, padding, dilation, groups)
    b = None if bias is None else _compute(bias._host).reshape(groups, geo.cog, 1)
    if geo.k_group == 0:
        o[...] = 0 if b is None else b.reshape(-1, 1, 1)
        return
    w3 = w.reshape(groups, geo.cog, geo.k_group)
    direct = o.flags.c_contiguous and o.dtype == w3.dtype   # products land in NCHW directly
    res = o if direct else np.empty(o.shape, w3.dtype)
    channels_last = conv_small if conv_small.applies(geo) else \
        conv_taps if conv_taps.applies(geo) else None
    if channels_last is not None:
        channels_last.forward(geo, x, w, b, res)
        if not direct:
            o[...] = res
        return
    r4 = res.reshape(geo.n, groups, geo.cog, geo.length)
    for n0 in geo.chunks():
        dst = r4[n0:n0 + geo.chunk]
        np.matmul(w3, geo.columns(x, n0), out=dst)
        if b is not None:
            dst += b
    if not direct:
        o[...] = res


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
    wt = w.reshape(groups, geo.cog, geo.k_group).transpose(0, 2, 1)   # (G, K, C_out/G)
    dtype = np.result_type(g.dtype, wt.dtype)
    direct = gi.flags.c_contiguous and gi.dtype == dtype
    gx = gi if direct else np.empty(gi.shape, dtype)
    # unit stride: the forward convolution of grad_output with the flipped weights
    adjoint = geo.adjoint() if geo.groups == 1 else None
    path = None if adjoint is None else \
        conv_small if conv_small.applies(geo) and conv_small.applies(adjoint) else \
        conv_taps if conv_taps.applies(adjoint) else None
    if path is not None:
        path.forward(adjoint, g, conv_small.flipped(w), None, gx)
        if not direct:
            gi[...] = gx
        return
    g4 = g.reshape(geo.n, groups, geo.cog, geo.length)
    for n0 in geo.chunks():
        part, dst = g4[n0:n0 + geo.chunk], gx[n0:n0 + geo.chunk]
        nb = part.shape[0]
        if geo.identity:   # the products are the gradient itself
            np.matmul(wt, part, out=dst.reshape(nb, groups, geo.k_group, geo.length))
            continue
        # (nb, G, K, L) columns straight from grad_output's planes
        cols = geo.scratch("cols", (nb, groups, geo.k_group, geo.length), dtype)
        geo.fold(np.matmul(wt, part, out=cols), dst)
    if not direct:
        gi[...] = gx


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
    if conv_small.applies(geo):
        conv_small.weight_backward(geo, g, x, gw)
        return
    g4 = g.reshape(geo.n, groups, geo.cog, geo.length)
    if geo.identity:   # one (C_out/G, L) x (L, C/G) product per sample, summed
        cols = geo.columns(x, 0).transpose(0, 1, 3, 2)
        gw[...] = np.matmul(g4, cols).sum(axis=0).reshape(gw.shape)
        return
    acc = None
    for n0 in geo.chunks():
        # (K, nb*L) @ (nb*L, C_out/G) per group: one product contracting over the chunk's
        # positions, in the operand order BLAS runs fastest for a small result
        cols = geo.columns(x, n0, batch_wide=True)
        prod = np.matmul(cols, geo.by_group(g4[n0:n0 + geo.chunk]).transpose(0, 2, 1))
        if acc is None:
            acc = prod
        else:
            acc += prod
    gw[...] = acc.transpose(0, 2, 1).reshape(gw.shape)


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
def _max_pool_plane_dense(x, out, idx, p, kh, kw, sh, sw):  # noqa: ANN001, ANN202
    """_max_pool_plane for windows that all lie inside the plane (no padding, no dilation, no
    ceil-mode overhang): the common MaxPool2d(k, s). Without the per-tap bounds checks and
    the search for a first in-bounds tap, (64, 16, 8, 8) pools in 178 us instead of 229 (the
    data-dependent branch per tap is most of what is left)."""
    W = x.shape[2]
    xp, op, ip = x[p], out[p], idx[p]
    for oh in range(out.shape[1]):
        r0 = oh * sh
        for ow in range(out.shape[2]):
            c0 = ow * sw
            best = xp[r0, c0]
            best_i = r0 * W + c0
            for i in range(kh):
                row = xp[r0 + i]
                for j in range(kw):
                    v = row[c0 + j]
                    if v > best or v != v:   # NaN wins and propagates, as in PyTorch
                        best = v
                        best_i = (r0 + i) * W + c0 + j
            op[oh, ow] = best
            ip[oh, ow] = best_i


@njit(cache=True, error_model="numpy")
def _max_pool_any(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw, dense):  # noqa: ANN001, ANN202
    if dense:
        _max_pool_plane_dense(x, out, idx, p, kh, kw, sh, sw)
    else:
        _max_pool_plane(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw)


@njit(cache=True, error_model="numpy")
def _max_pool_serial(x, out, idx, kh, kw, sh, sw, ph, pw, dh, dw, dense):  # noqa: ANN001, ANN202
    for p in range(x.shape[0]):
        _max_pool_any(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw, dense)


@njit(cache=True, parallel=True, error_model="numpy")
def _max_pool_parallel(x, out, idx, kh, kw, sh, sw, ph, pw, dh, dw, dense):  # noqa: ANN001, ANN202
    for p in prange(x.shape[0]):
        _max_pool_any(x, out, idx, p, kh, kw, sh, sw, ph, pw, dh, dw, dense)


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
    (kh, kw), (sh, sw) = kernel, stride
    dense = (not any(padding) and tuple(dilation) == (1, 1)
             and (o.shape[1] - 1) * sh + kh <= x.shape[1]
             and (o.shape[2] - 1) * sw + kw <= x.shape[2])
    _pick(o.size, _max_pool_serial, _max_pool_parallel)(
        x, o, idx, kh, kw, sh, sw, padding[0], padding[1], dilation[0], dilation[1], dense)
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

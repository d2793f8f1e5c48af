"""Channels-last im2col for convolutions over small planes and strided ones (kernels/cpu/conv.py
picks it).

On planes of a few pixels (the 4x4 and 8x8 maps of a small CNN) the NCHW columns are made of
rows 2-4 elements long, and gathering them costs more than the GEMM; a stride makes NCHW's
per-tap copies strided too (a 16x64x32x32 stride-2 3x3 conv: 7.1 -> 5.7 ms forward here).
Here the input chunk is first transposed to (n, h, w, c); every (output position, tap) of the
columns is then one contiguous run of C channels, and the columns are (positions, kh*kw*C),
one row per output position, so the whole chunk is ONE product with the weights as
(kh*kw*C, C_out):

- forward: (positions, K) @ (K, C_out), transposed back into NCHW with the bias added;
- input gradient (unit stride): the forward convolution of grad_output with the flipped,
  transposed weights and the complementary padding, so it gathers too (adding each run back
  where it was read cost 3x the gather);
- weight gradient: (K, positions) @ (positions, C_out), summed over chunks.

``geo`` is conv.py's _Geometry (sizes, stride/padding/dilation, chunking and the per-thread
work arrays); groups are 1 on this path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

# Input channels from which a tap's run of channels is long enough to pay for the transposes.
MIN_CHANNELS = 4
# Output positions per sample up to which the channels-last columns are used.
MAX_POSITIONS = 64


# Input channels from which strided convolutions of any plane size take them: a stride
# leaves NCHW's per-tap copies with strided rows, while here each tap is still a run of C.
STRIDED_MIN_CHANNELS = 16


def applies(geo: Any) -> bool:
    if geo.groups != 1 or geo.identity or geo.c < MIN_CHANNELS:
        return False
    return geo.length <= MAX_POSITIONS or \
        (geo.stride != (1, 1) and geo.c >= STRIDED_MIN_CHANNELS)


@njit(cache=True, error_model="numpy", boundscheck=False)
def _gather_runs(xl, cols, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo):  # noqa: ANN001, ANN202
    # cols[(n, oh, ow), (i, j, c)] = xl[n, ih, iw, c], 0 where the tap reads padding.
    nb, h, w, c_in = xl.shape
    for n in range(nb):
        for oh in range(ho):
            for ow in range(wo):
                row = cols[(n * ho + oh) * wo + ow]
                for i in range(kh):
                    ih = oh * sh - ph + i * dh
                    for j in range(kw):
                        iw = ow * sw - pw + j * dw
                        base = (i * kw + j) * c_in
                        if 0 <= ih < h and 0 <= iw < w:
                            src = xl[n, ih, iw]
                            for c in range(c_in):
                                row[base + c] = src[c]
                        else:
                            for c in range(c_in):
                                row[base + c] = 0


def _geometry_args(geo: Any) -> tuple[int, ...]:
    return (geo.kh, geo.kw, *geo.stride, *geo.padding, *geo.dilation, geo.ho, geo.wo)


def _columns(geo: Any, part: np.ndarray) -> np.ndarray:
    """A chunk (nb, C, H, W) of the input as (nb*Ho*Wo, kh*kw*C) channels-last columns."""
    nb = part.shape[0]
    xl = geo.scratch("channels_last", (nb, geo.h, geo.w, geo.c), part.dtype)
    xl[...] = part.transpose(0, 2, 3, 1)
    cols = geo.scratch("cols", (nb * geo.length, geo.rows), part.dtype)
    _gather_runs(xl, cols, *_geometry_args(geo))
    return cols


def _positions_by_channel(geo: Any, g: np.ndarray) -> np.ndarray:
    """A chunk (nb, C_out, Ho, Wo) of grad_output as (nb*Ho*Wo, C_out)."""
    nb = g.shape[0]
    gl = geo.scratch("grad_output", (nb, geo.length, geo.c_out), g.dtype)
    gl[...] = g.reshape(nb, geo.c_out, geo.length).transpose(0, 2, 1)
    return gl.reshape(nb * geo.length, geo.c_out)


def _weight_rows(w: np.ndarray) -> np.ndarray:
    """(C_out, C, kh, kw) weights as the columns' (kh*kw*C, C_out) operand."""
    c_out = w.shape[0]
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(-1, c_out)


def forward(geo: Any, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
            res: np.ndarray) -> None:
    """res (N, C_out, Ho, Wo) = conv(x, w) + b for contiguous x and res."""
    wk = _weight_rows(w)
    for n0 in geo.chunks():
        part = x[n0:n0 + geo.chunk]
        nb = part.shape[0]
        prod = geo.scratch("product", (nb * geo.length, geo.c_out), wk.dtype)
        np.matmul(_columns(geo, part), wk, out=prod)
        dst = res[n0:n0 + nb].reshape(nb, geo.c_out, geo.length)
        planes = prod.reshape(nb, geo.length, geo.c_out).transpose(0, 2, 1)
        if b is None:
            dst[...] = planes
        else:
            np.add(planes, b.reshape(geo.c_out, 1), out=dst)


def flipped(w: np.ndarray) -> np.ndarray:
    """(C_out, C, kh, kw) weights as the (C, C_out, kh, kw) weights of the input gradient's
    convolution (kernels/cpu/conv.py's _Geometry.adjoint)."""
    return w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]


def weight_backward(geo: Any, g: np.ndarray, x: np.ndarray, gw: np.ndarray) -> None:
    """gw (C_out, C, kh, kw) = the weight gradient, for contiguous g and x."""
    acc = None
    for n0 in geo.chunks():
        part = x[n0:n0 + geo.chunk]
        prod = np.matmul(_columns(geo, part).T, _positions_by_channel(geo, g[n0:n0 + geo.chunk]))
        if acc is None:
            acc = prod
        else:
            acc += prod
    gw[...] = acc.reshape(geo.kh, geo.kw, geo.c, geo.c_out).transpose(3, 2, 0, 1)

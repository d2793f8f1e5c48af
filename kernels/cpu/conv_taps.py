"""Unit-stride convolutions as one BLAS product per tap, without columns (kernels/cpu/conv.py
picks it for planes larger than conv_small's).

In a zero-bordered channels-last copy of the input, flattened to rows of C channels (row r is
pixel (n, y, x) of the bordered (Hp, Wp) planes), the pixel tap (i, j) reads for output
(n, y, x) is row r + i*dh*Wp + j*dw: every tap is the SAME (rows, C) matrix shifted by a fixed
offset. So the convolution is

    out[r] = sum over taps t of xp[r + offset_t] @ W_t,    W_t = weight[:, :, i, j].T (C, C_out)

computed for every bordered position r (the rows where x >= Wo or y >= Ho are computed and
dropped: (Hp*Wp) / (Ho*Wo) more flops, 1.3x on 14x14 planes with a 3x3 kernel), each tap one
gemm of NumPy's BLAS accumulating into the same block (beta = 1), a block of rows at a time so
that block stays in cache across its taps. im2col wrote and read kh*kw times the input instead
(9x for 3x3): on a 16x64x32x32 3x3 convolution the columns cost as much as the product.

The input gradient of a unit-stride convolution is the forward convolution of grad_output
with the flipped weights (conv.py's _Geometry.adjoint), so it takes this path too. ``geo`` is
conv.py's _Geometry; groups are 1 here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from . import numpy_blas
from .numpy_blas import NO_TRANS, gemm_beta

# Input and output channels from which each tap's (rows, C) x (C, C_out) product runs BLAS
# efficiently (an input gradient into 1 channel took 4x im2col's time).
MIN_CHANNELS = 16
# The largest share of computed-and-dropped bordered positions worth paying for.
MAX_BORDER_RATIO = 1.6
# Rows (bordered positions) per block: the block's output and its taps' inputs stay in cache.
ROW_BLOCK = 8192
# Bordered input elements per batch chunk (the work arrays' size).
ELEMENTS_PER_CHUNK = 1 << 21


def applies(geo: Any) -> bool:
    if geo.groups != 1 or geo.identity or geo.stride != (1, 1) or \
            min(geo.c, geo.c_out) < MIN_CHANNELS:
        return False
    if geo.hp * geo.wp > MAX_BORDER_RATIO * geo.length:
        return False
    return numpy_blas.available()


@njit(cache=True, error_model="numpy")
def _tap_products(xp, wt, out, offsets, block):  # noqa: ANN001, ANN202
    # out[r] = sum_t xp[r + offsets[t]] @ wt[t], a block of rows at a time
    rows, c_out = out.shape
    c_in = xp.shape[1]
    for r0 in range(0, rows, block):
        n = min(block, rows - r0)
        for t in range(offsets.size):
            gemm_beta(NO_TRANS, NO_TRANS, n, c_out, c_in, xp[r0 + offsets[t]:], c_in, wt[t],
                      c_out, out[r0:], c_out, 0.0 if t == 0 else 1.0)


def _offsets(geo: Any) -> np.ndarray:
    (dh, dw) = geo.dilation
    return np.array([i * dh * geo.wp + j * dw for i in range(geo.kh) for j in range(geo.kw)],
                    np.int64)


def forward(geo: Any, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
            res: np.ndarray) -> None:
    """res (N, C_out, Ho, Wo) = conv(x, w) + b for a contiguous x (any-strided w)."""
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0), dtype=x.dtype).reshape(
        geo.kh * geo.kw, geo.c, geo.c_out)
    offsets = _offsets(geo)
    plane = geo.hp * geo.wp
    chunk = max(1, min(geo.n, ELEMENTS_PER_CHUNK // (plane * max(geo.c, geo.c_out))))
    tail = int(offsets[-1])   # rows past the chunk that its last (dropped) positions read
    ph, pw = geo.padding
    for n0 in range(0, geo.n, chunk):
        part = x[n0:n0 + chunk]
        nb = part.shape[0]
        rows = nb * plane
        # zeroed once per call: later chunks rewrite only the interior
        xp = geo.scratch("taps_input", (rows + tail, geo.c), x.dtype, zero=True)
        xp[:rows].reshape(nb, geo.hp, geo.wp, geo.c)[:, ph:ph + geo.hin, pw:pw + geo.win] = \
            part[:, :, :geo.hin, :geo.win].transpose(0, 2, 3, 1)
        prod = geo.scratch("taps_output", (rows, geo.c_out), x.dtype)
        _tap_products(xp, wt, prod, offsets, ROW_BLOCK)
        planes = prod.reshape(nb, geo.hp, geo.wp, geo.c_out)[:, :geo.ho, :geo.wo] \
            .transpose(0, 3, 1, 2)
        dst = res[n0:n0 + nb]
        if b is None:
            dst[...] = planes
        else:
            np.add(planes, b.reshape(geo.c_out, 1, 1), out=dst)

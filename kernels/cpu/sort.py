"""CPU kernels for sort ops: masked_select, nonzero, sort, topk, kthvalue, unique,
searchsorted, bincount and histc.

NumPy does the work where it has the operation (stable sort, partition, unique, bincount);
Numba compiles searchsorted's comparison-exact binary search (PyTorch's NaN ordering). Outputs
are preallocated by the frontend (gputensor/_ops/sort.py) unless their size depends on the data
(nonzero, masked_select, unique).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

from .shape import (
    _WIDEN,
    PARALLEL_THRESHOLD,
    _h1,
    _key,
)


@CPU.register("masked_select")
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    return Tensor._from_np(np.ascontiguousarray(x._host[mask._host]))


@CPU.register("nonzero")
def nonzero(x: Tensor) -> Tensor:
    return Tensor._from_np(np.argwhere(x._host).astype(np.int64, copy=False))


# -- sorting ---------------------------------------------------------------------------------
def _argsort(key: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort; descending keeps equal elements in index order and puts NaN first."""
    if not descending:
        return np.argsort(key, axis=axis, kind="stable")
    # Sort the reversed array ascending, reverse the result: equal runs stay in index order.
    idx = np.flip(np.argsort(np.flip(key, axis), axis=axis, kind="stable"), axis)
    return (key.shape[axis] - 1) - idx


@CPU.register("sort")
def sort(values: Tensor, indices: Tensor, x: Tensor, dim: int, descending: bool) -> None:
    a = _h1(x)
    idx = _argsort(_key(a, x.dtype), dim, descending)
    _h1(indices)[...] = idx
    _h1(values)[...] = np.take_along_axis(a, idx, dim)


def _topk_indices(key: np.ndarray, dim: int, k: int, largest: bool) -> np.ndarray:
    n = key.shape[dim]
    if k * 8 >= n:
        return np.take(_argsort(key, dim, largest), np.arange(k), axis=dim)
    # Partition out k candidates, order them by index (so ties keep index order), then sort.
    part = np.argpartition(key, n - k if largest else k - 1, axis=dim)
    cand = np.sort(np.take(part, np.arange(n - k, n) if largest else np.arange(k), axis=dim),
                   axis=dim)
    order = _argsort(np.take_along_axis(key, cand, dim), dim, largest)
    return np.take_along_axis(cand, order, dim)


@CPU.register("topk")
def topk(values: Tensor, indices: Tensor, x: Tensor, dim: int, k: int, largest: bool) -> None:
    a = _h1(x)
    idx = _topk_indices(_key(a, x.dtype), dim, k, largest)
    _h1(indices)[...] = idx
    _h1(values)[...] = np.take_along_axis(a, idx, dim)


@CPU.register("kthvalue")
def kthvalue(values: Tensor, indices: Tensor, x: Tensor, dim: int, k: int) -> None:
    """Writes into outputs that keep ``dim`` with size 1."""
    a = _h1(x)
    part = np.argpartition(_key(a, x.dtype), k - 1, axis=dim)
    idx = np.take(part, [k - 1], axis=dim)
    _h1(indices)[...] = idx
    _h1(values)[...] = np.take_along_axis(a, idx, dim)


# -- unique ----------------------------------------------------------------------------------
def _row_order(rows: np.ndarray) -> np.ndarray:
    """A stable lexicographic order of the rows of a 2-d array."""
    if rows.shape[1] == 1:
        return np.argsort(rows[:, 0], kind="stable")
    return np.lexsort(rows.T[::-1])


@CPU.register("unique")
def unique(x: Tensor, sort_first: bool, dim: int | None) -> tuple[Tensor, Tensor, Tensor]:
    """Unique elements (dim None) or slices along ``dim``, sorted or consecutive.

    NaNs compare unequal, so each stays its own entry, as in PyTorch.
    """
    a = x._host
    if dim is None:
        moved = a.reshape(-1, 1)
    else:
        a = np.moveaxis(_h1(x), dim, 0)
        moved = a.reshape(a.shape[0], int(np.prod(a.shape[1:])))
    n = moved.shape[0]
    key = _key(moved, x.dtype)
    order = _row_order(key) if sort_first else np.arange(n)
    ordered = key[order]
    starts = np.ones(n, np.bool_)
    if n:
        starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    first = np.flatnonzero(starts)
    counts = np.diff(np.append(first, n)).astype(np.int64)
    inverse = np.empty(n, np.int64)
    inverse[order] = np.cumsum(starts) - 1
    picked = moved[order[first]]
    if dim is None:
        values = picked.reshape(-1)
        inverse = inverse.reshape(x._shape)
    else:
        values = np.moveaxis(picked.reshape((len(first),) + a.shape[1:]), 0, dim)
    return (Tensor._from_np(np.ascontiguousarray(values)), Tensor._from_np(inverse),
            Tensor._from_np(counts))


# -- searching and counting --------------------------------------------------------------------
@njit(cache=True, inline="always")
def _bound(b: np.ndarray, v, right: bool) -> int:
    # PyTorch's bounds use raw comparisons, so NaN boundaries/values behave as in PyTorch.
    lo, hi = 0, b.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if (not (b[mid] > v)) if right else (not (b[mid] >= v)):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _bsearch_rows(bnd: np.ndarray, vals: np.ndarray, out: np.ndarray, right: bool) -> None:
    rows, m = vals.shape
    for r in range(rows):
        br = bnd[r if bnd.shape[0] > 1 else 0]
        for j in range(m):
            out[r, j] = _bound(br, vals[r, j], right)


@njit(cache=True, parallel=True)
def _bsearch_flat_parallel(bnd: np.ndarray, vals: np.ndarray, out: np.ndarray,
                           right: bool) -> None:
    for j in prange(vals.shape[0]):
        out[j] = _bound(bnd, vals[j], right)


def _compute_array(a: np.ndarray, dt: D.dtype) -> np.ndarray:
    """A C-contiguous copy in a dtype Numba compares in (float16/bfloat16 -> float32)."""
    target = _WIDEN.get(dt, np.uint8 if dt is D.bool else dt.np_dtype)
    return np.ascontiguousarray(a, dtype=target)


@CPU.register("searchsorted")
def searchsorted(out: Tensor, boundaries: Tensor, values: Tensor, right: bool,
                 sorter: Tensor | None, compute: D.dtype) -> None:
    bnd = boundaries._host
    if sorter is not None:
        bnd = np.take_along_axis(bnd, sorter._host, -1)
    bnd = _compute_array(bnd, compute)
    vals = _compute_array(values._host, compute)
    result = np.empty(vals.shape, np.int64)
    if bnd.ndim == 1 and vals.size >= PARALLEL_THRESHOLD:
        _bsearch_flat_parallel(bnd, vals.reshape(-1), result.reshape(-1), right)
    else:
        rows = 1 if bnd.ndim == 1 else bnd.size // bnd.shape[-1]
        _bsearch_rows(bnd.reshape(rows, bnd.shape[-1]), vals.reshape(rows, -1),
                      result.reshape(rows, -1), right)
    out._host[...] = result


@CPU.register("bincount")
def bincount(out: Tensor, x: Tensor, weights: Tensor | None) -> None:
    w = None if weights is None else _key(weights._host, weights.dtype).astype(np.float64)
    out._host[...] = np.bincount(x._host, weights=w, minlength=out._shape[0])


@CPU.register("histc")
def histc(out: Tensor, x: Tensor, bins: int, lo: float, hi: float) -> None:
    """Bin b holds lo + b*w <= v < lo + (b+1)*w (v == hi goes to the last bin), computed in the
    input's precision like PyTorch; values outside [lo, hi] and NaN are ignored."""
    a = _key(x._host.reshape(-1), x.dtype)
    ft = a.dtype.type
    lo_t, hi_t = ft(lo), ft(hi)
    a = a[(a >= lo_t) & (a <= hi_t)]

    def r(v: Any) -> Any:   # c10's Half/BFloat16 round each operation's float result
        return v if x.dtype not in (D.float16, D.bfloat16) else \
            np.asarray(v).astype(x.dtype.np_dtype).astype(ft)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        q = r(r(r(a - lo_t) * r(ft(bins))) / r(hi_t - lo_t))
    # q NaN (an empty range: lo == hi in the input's precision) or inf (a 16-bit overflow)
    # becomes PyTorch's index INT64_MIN, which its kernel's pointer arithmetic wraps to bin 0
    pos = np.where(q < 2.0 ** 63, q, 0).astype(np.int64)
    np.minimum(pos, bins - 1, out=pos)
    out._host[...] = np.bincount(pos, minlength=bins)

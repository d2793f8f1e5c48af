"""torch.mode's CPU kernel: each row's (value, index) pairs sorted by value exactly as
libstdc++'s std::sort sorts them (PyTorch's CPU kernel calls it), then the runs scanned: the
first longest run (the smallest most frequent value) and the index that ends it. std::sort is
not stable; replaying its moves (introsort, median-of-three pivots, unguarded partitions,
heapsort past 2 log2(n) levels, final insertion sort of 16-element runs) gives PyTorch's index
among ties. kernels/cuda/mode.cu is the same algorithm, one thread per row.
"""

from __future__ import annotations

import numba
import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

_THRESHOLD = 16


@numba.njit(cache=True)
def _swap(v, ix, i, j):  # noqa: ANN001, ANN202
    v[i], v[j] = v[j], v[i]
    ix[i], ix[j] = ix[j], ix[i]


@numba.njit(cache=True)
def _adjust_heap(v, ix, base, hole, length, val, vi):  # noqa: ANN001, ANN202
    top = hole
    second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if v[base + second] < v[base + second - 1]:
            second -= 1
        v[base + hole] = v[base + second]
        ix[base + hole] = ix[base + second]
        hole = second
    if (length & 1) == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        v[base + hole] = v[base + second - 1]
        ix[base + hole] = ix[base + second - 1]
        hole = second - 1
    parent = (hole - 1) // 2  # push_heap
    while hole > top and v[base + parent] < val:
        v[base + hole] = v[base + parent]
        ix[base + hole] = ix[base + parent]
        hole = parent
        parent = (hole - 1) // 2
    v[base + hole] = val
    ix[base + hole] = vi


@numba.njit(cache=True)
def _heap_sort(v, ix, base, length):  # noqa: ANN001, ANN202
    if length >= 2:  # make_heap
        parent = (length - 2) // 2
        while True:
            _adjust_heap(v, ix, base, parent, length, v[base + parent], ix[base + parent])
            if parent == 0:
                break
            parent -= 1
    last = length - 1
    while last > 0:  # sort_heap
        val, vi = v[base + last], ix[base + last]
        v[base + last] = v[base]
        ix[base + last] = ix[base]
        _adjust_heap(v, ix, base, 0, last, val, vi)
        last -= 1


@numba.njit(cache=True)
def _linear_insert(v, ix, i, first):  # noqa: ANN001, ANN202
    val, vi = v[i], ix[i]
    j = i - 1
    while j >= first and val < v[j]:  # (libstdc++'s bound is a sentinel; same moves)
        v[j + 1] = v[j]
        ix[j + 1] = ix[j]
        j -= 1
    v[j + 1] = val
    ix[j + 1] = vi


@numba.njit(cache=True)
def _insertion_sort(v, ix, first, last):  # noqa: ANN001, ANN202
    for i in range(first + 1, last):
        if v[i] < v[first]:
            val, vi = v[i], ix[i]
            for j in range(i, first, -1):
                v[j] = v[j - 1]
                ix[j] = ix[j - 1]
            v[first] = val
            ix[first] = vi
        else:
            _linear_insert(v, ix, i, first)


@numba.njit(cache=True)
def _median_to_first(v, ix, result, a, b, c):  # noqa: ANN001, ANN202
    if v[a] < v[b]:
        if v[b] < v[c]:
            _swap(v, ix, result, b)
        elif v[a] < v[c]:
            _swap(v, ix, result, c)
        else:
            _swap(v, ix, result, a)
    elif v[a] < v[c]:
        _swap(v, ix, result, a)
    elif v[b] < v[c]:
        _swap(v, ix, result, c)
    else:
        _swap(v, ix, result, b)


@numba.njit(cache=True)
def _std_sort(v, ix):  # noqa: ANN001, ANN202
    n = v.shape[0]
    if n < 2:
        return
    lg = 0
    while (n >> (lg + 1)) > 0:
        lg += 1
    # pending ranges with their depth budgets (disjoint: their order does not matter)
    firsts = np.empty(2 * lg + 2, np.int64)
    lasts = np.empty(2 * lg + 2, np.int64)
    depths = np.empty(2 * lg + 2, np.int64)
    firsts[0], lasts[0], depths[0] = 0, n, 2 * lg
    top = 1
    while top > 0:
        top -= 1
        first, last, depth = firsts[top], lasts[top], depths[top]
        while last - first > _THRESHOLD:
            if depth == 0:
                _heap_sort(v, ix, first, last - first)
                break
            depth -= 1
            mid = first + (last - first) // 2
            _median_to_first(v, ix, first, first + 1, mid, last - 1)
            lo, hi = first + 1, last  # unguarded partition around v[first]
            while True:
                while v[lo] < v[first]:
                    lo += 1
                hi -= 1
                while v[first] < v[hi]:
                    hi -= 1
                if not lo < hi:
                    break
                _swap(v, ix, lo, hi)
                lo += 1
            firsts[top], lasts[top], depths[top] = lo, last, depth
            top += 1
            last = lo
    if n > _THRESHOLD:
        _insertion_sort(v, ix, 0, _THRESHOLD)
        for i in range(_THRESHOLD, n):
            _linear_insert(v, ix, i, 0)
    else:
        _insertion_sort(v, ix, 0, n)


@numba.njit(cache=True)
def _mode_rows(keys, out_index):  # noqa: ANN001, ANN202
    rows, n = keys.shape
    for r in range(rows):
        v = keys[r].copy()
        ix = np.arange(n)
        _std_sort(v, ix)
        best = 0
        run = 0
        at = 0
        for i in range(n):
            run += 1
            if i == n - 1 or v[i] != v[i + 1]:
                if run > best:
                    best = run
                    at = ix[i]
                run = 0
        out_index[r] = at


def _keys(rows: np.ndarray, dtype: D.dtype) -> np.ndarray:
    """The values in the type they compare in (float32 for 16-bit floats, int64 for integers
    and bool), as c10's operator< compares them."""
    if dtype in (D.float16, D.bfloat16):
        return rows.astype(np.float32)
    if dtype in (D.float32, D.float64):
        return rows
    return rows.astype(np.int64)


@CPU.register("mode")
def mode(values: Tensor, indices: Tensor, rows: Tensor) -> None:
    """values/indices: contiguous (R,); rows: contiguous (R, n) with n >= 1."""
    x = rows._host
    idx = indices._host
    _mode_rows(_keys(x, rows.dtype), idx)
    values._host[...] = x[np.arange(x.shape[0]), idx]

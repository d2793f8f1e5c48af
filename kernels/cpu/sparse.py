"""SparseCPU kernels: the six kernels of the sparse COO interface (see gputensor/sparse).

Every other sparse op is a composite of these and ordinary dense ops on the indices/values
tensors, so these are the only places the CPU touches a sparse tensor's layout directly:

- ``_coalesce``: a stable sort of the entries by their row-major linear index, then one
  segmented reduction that sums each run of equal keys (duplicates) into one row of values.
- ``_csr_rowptr``: CSR row offsets of a coalesced 2-d tensor's sorted row indices (the frontend
  caches the result on the tensor, so a matrix used many times builds it once).
- ``_spmm``: ``out = beta * out + alpha * (A @ dense)`` over that CSR view, rows in parallel.
- ``_sddmm``: ``out[i] = <a[rows[i]], b[cols[i]]>``, the sparse operand's gradient of spmm.
- ``_segment_softmax`` / ``_segment_softmax_backward``: (log-)softmax over the entries of each
  segment (the entries one sparse softmax normalises together), per dense column.

The frontend validates every index and makes every tensor contiguous before a kernel runs.
float16 and bfloat16 values compute in float32 copies (Numba has no bfloat16 and slow float16),
bool values sum as integers (a duplicate of True stays True, like PyTorch).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, parallel_chunksize, prange

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import SPARSE_CPU

# Rows (spmm), entries (sddmm) or segments (softmax) per parallel task: big enough that a
# task's work dwarfs the scheduling cost, small enough that two to sixteen cores stay busy.
_CHUNK = 64
# Below this much work (multiply-adds) the serial loops win: no thread pool wake-up.
PARALLEL_THRESHOLD = 1 << 16
_WIDEN = {D.float16: np.float32, D.bfloat16: np.float32}
# The parallel loops hand out their iterations dynamically, in chunks of this many: on a loaded
# machine a thread that was descheduled no longer holds back a fixed share of the work (with
# static scheduling, 2 threads on 2 busy cores measured slower than 1). spmm/sddmm iterate
# over tasks of _CHUNK rows already; the per-segment loops need bigger chunks.
_DYNAMIC = 1
_DYNAMIC_SEGMENTS = 256


# -- host views ---------------------------------------------------------------------------------
def _arr(t: Tensor) -> np.ndarray:
    """The host array of a contiguous tensor, float16/bfloat16 widened to float32 (a copy)."""
    a = t._host
    widen = _WIDEN.get(t._dtype)
    if widen is not None:
        return a.astype(widen)
    if t._dtype is D.bool:
        return a.astype(np.int64)
    return a


def _store(t: Tensor, a: np.ndarray) -> None:
    """Write a computed array back into tensor ``t`` (cast to its dtype when it was widened)."""
    dst = t._host
    if a is not dst:
        if t._dtype is D.bool:
            a = a != 0
        dst[...] = a
    t._storage._version += 1


def _rows2d(t: Tensor) -> np.ndarray:
    """Values [n, *D] seen as [n, F] (F = product of the dense dims, 1 when there are none)."""
    a = _arr(t)
    n = t._shape[0] if t._shape else 1
    return a.reshape(n, -1) if n else a.reshape(0, max(1, math.prod(t._shape[1:])))


# -- coalesce -------------------------------------------------------------------------------------
@njit(cache=True)
def _run_starts(keys):
    """Start offsets of the runs of equal values in sorted ``keys``, plus len(keys) at the end."""
    n = keys.shape[0]
    starts = np.empty(n + 1, np.int64)
    m = 0
    for i in range(n):
        if i == 0 or keys[i] != keys[i - 1]:
            starts[m] = i
            m += 1
    starts[m] = n
    return starts[: m + 1]


@njit(cache=True, parallel=True)
def _segment_sum(vals, order, starts, out):
    # out[s] = sum of vals[order[j]] for j in run s, in sorted (stable) order.
    nseg = starts.shape[0] - 1
    F = vals.shape[1]
    for s in prange(nseg):
        j0 = starts[s]
        for f in range(F):
            out[s, f] = vals[order[j0], f]
        for j in range(j0 + 1, starts[s + 1]):
            r = order[j]
            for f in range(F):
                out[s, f] += vals[r, f]


def linear_keys(idx: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray | None:
    """Row-major linear index of each column of ``idx`` over ``sizes``; None when it could
    overflow int64 (then entries are sorted by a lexsort of the index rows instead)."""
    if math.prod(max(s, 1) for s in sizes) >= (1 << 62):
        return None
    keys = np.zeros(idx.shape[1], np.int64)
    for d, n in enumerate(sizes):
        keys *= n
        keys += idx[d]
    return keys


@SPARSE_CPU.register("_coalesce")
def coalesce(indices: Tensor, values: Tensor, size: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Sort entries by linear index (stable) and sum duplicates; returns new tensors."""
    idx = indices._host
    S, nnz = idx.shape
    dense_shape = tuple(values._shape[1:])
    if nnz == 0:
        return (Tensor._from_np(np.empty((S, 0), np.int64)),
                Tensor._from_np(np.empty((0, *dense_shape), values._dtype.np_dtype)))
    keys = linear_keys(idx, tuple(size[:S]))
    if keys is None:
        order = np.lexsort(idx[::-1])
        sorted_idx = idx[:, order]
        diff = np.any(sorted_idx[:, 1:] != sorted_idx[:, :-1], axis=0)
        starts = np.concatenate(([0], np.flatnonzero(diff) + 1, [nnz])).astype(np.int64)
    else:
        order = np.argsort(keys, kind="stable")
        starts = _run_starts(keys[order])
    nseg = starts.shape[0] - 1
    vals = _rows2d(values)
    out = np.empty((nseg, vals.shape[1]), vals.dtype)
    with parallel_chunksize(_DYNAMIC_SEGMENTS):
        _segment_sum(vals, order, starts, out)
    out_idx = np.ascontiguousarray(idx[:, order[starts[:-1]]])
    if values._dtype is D.bool:
        out = out != 0
    out = out.reshape((nseg, *dense_shape)).astype(values._dtype.np_dtype, copy=False)
    return Tensor._from_np(out_idx), Tensor._from_np(np.ascontiguousarray(out))


# -- CSR row offsets ---------------------------------------------------------------------------
@SPARSE_CPU.register("_csr_rowptr")
def csr_rowptr(rowptr: Tensor, rows: Tensor, nrows: int) -> None:
    """rowptr[r] = the number of entries in rows before row r (rows sorted ascending)."""
    rowptr._host[...] = np.searchsorted(rows._host, np.arange(nrows + 1), side="left")
    rowptr._storage._version += 1


# -- spmm --------------------------------------------------------------------------------------
@njit(cache=True, parallel=True, fastmath={"nsz", "contract", "arcp"}, error_model="numpy")
def _spmm_rows(rowptr, cols, vals, dense, out, alpha, beta, chunk):
    M = out.shape[0]
    N = out.shape[1]
    ntask = (M + chunk - 1) // chunk
    for t in prange(ntask):
        acc = np.empty(N, out.dtype)
        for i in range(t * chunk, min(M, (t + 1) * chunk)):
            for n in range(N):
                acc[n] = 0
            # Four entries per pass over the accumulator row: a quarter of its loads/stores
            # (measured ~15% faster at N = 64 than one entry per pass).
            j = rowptr[i]
            j1 = rowptr[i + 1]
            while j + 3 < j1:
                v0, v1, v2, v3 = vals[j], vals[j + 1], vals[j + 2], vals[j + 3]
                c0, c1, c2, c3 = cols[j], cols[j + 1], cols[j + 2], cols[j + 3]
                for n in range(N):
                    acc[n] += (v0 * dense[c0, n] + v1 * dense[c1, n]) + \
                        (v2 * dense[c2, n] + v3 * dense[c3, n])
                j += 4
            while j < j1:
                v0, c0 = vals[j], cols[j]
                for n in range(N):
                    acc[n] += v0 * dense[c0, n]
                j += 1
            if beta == 0:
                for n in range(N):
                    out[i, n] = alpha * acc[n]
            else:
                for n in range(N):
                    out[i, n] = beta * out[i, n] + alpha * acc[n]


@SPARSE_CPU.register("_spmm")
def spmm(out: Tensor, rowptr: Tensor, cols: Tensor, values: Tensor, dense: Tensor,
         alpha: float, beta: float) -> None:
    """out [M, N] = beta * out + alpha * (A @ dense); A is CSR (rowptr, cols, values)."""
    M, N = out._shape
    if M == 0 or N == 0:
        return
    o = _arr(out)   # with beta == 0 the kernel overwrites every element (NaN-safe)
    chunk = _CHUNK if values._shape[0] * N >= PARALLEL_THRESHOLD else max(M, 1)
    d = _arr(dense)
    v = _arr(values)
    one = o.dtype.type
    with parallel_chunksize(_DYNAMIC):
        _spmm_rows(rowptr._host, cols._host, v.astype(o.dtype, copy=False),
                   d.astype(o.dtype, copy=False), o, one(alpha), one(beta), chunk)
    _store(out, o)


# -- sddmm -------------------------------------------------------------------------------------
@njit(cache=True, parallel=True, fastmath={"nsz", "contract", "arcp"}, error_model="numpy")
def _sddmm_entries(out, rows, cols, a, b, chunk):
    nnz = out.shape[0]
    N = a.shape[1]
    ntask = (nnz + chunk - 1) // chunk
    for t in prange(ntask):
        for i in range(t * chunk, min(nnz, (t + 1) * chunk)):
            r = rows[i]
            c = cols[i]
            s = a[r, 0] * b[c, 0]
            for n in range(1, N):
                s += a[r, n] * b[c, n]
            out[i] = s


@SPARSE_CPU.register("_sddmm")
def sddmm(out_values: Tensor, rows: Tensor, cols: Tensor, a: Tensor, b: Tensor) -> None:
    """out_values[i] = sum_n a[rows[i], n] * b[cols[i], n]."""
    nnz = out_values._shape[0]
    if nnz == 0:
        return
    o = _arr(out_values)
    N = a._shape[1]
    if N == 0:
        o[...] = 0
        _store(out_values, o)
        return
    chunk = 4 * _CHUNK if nnz * N >= PARALLEL_THRESHOLD else nnz
    with parallel_chunksize(_DYNAMIC):
        _sddmm_entries(o, rows._host, cols._host, _arr(a).astype(o.dtype, copy=False),
                       _arr(b).astype(o.dtype, copy=False), chunk)
    _store(out_values, o)


# -- segment softmax -----------------------------------------------------------------------------
@njit(cache=True, parallel=True, error_model="numpy")
def _seg_softmax(out, vals, order, segptr, log):
    nseg = segptr.shape[0] - 1
    F = vals.shape[1]
    for s in prange(nseg):
        j0 = segptr[s]
        j1 = segptr[s + 1]
        if j1 == j0:
            continue
        for f in range(F):
            mx = -np.inf
            for j in range(j0, j1):
                x = vals[order[j], f]
                if x > mx or x != x:
                    mx = x
            if mx == -np.inf:
                mx = 0.0  # all -inf: softmax is NaN (0/0), log_softmax -inf, like PyTorch
            tot = 0.0
            for j in range(j0, j1):
                tot += np.exp(vals[order[j], f] - mx)
            if log:
                lt = np.log(tot)
                for j in range(j0, j1):
                    r = order[j]
                    out[r, f] = vals[r, f] - mx - lt
            else:
                for j in range(j0, j1):
                    r = order[j]
                    out[r, f] = np.exp(vals[r, f] - mx) / tot


@njit(cache=True, parallel=True, error_model="numpy")
def _seg_softmax_backward(grad_in, grad_out, out, order, segptr, log):
    nseg = segptr.shape[0] - 1
    F = out.shape[1]
    for s in prange(nseg):
        j0 = segptr[s]
        j1 = segptr[s + 1]
        for f in range(F):
            tot = 0.0
            for j in range(j0, j1):
                r = order[j]
                tot += grad_out[r, f] if log else grad_out[r, f] * out[r, f]
            for j in range(j0, j1):
                r = order[j]
                if log:
                    grad_in[r, f] = grad_out[r, f] - np.exp(out[r, f]) * tot
                else:
                    grad_in[r, f] = out[r, f] * (grad_out[r, f] - tot)


@SPARSE_CPU.register("_segment_softmax")
def segment_softmax(out: Tensor, values: Tensor, order: Tensor, segptr: Tensor,
                    log: bool) -> None:
    """Per segment and column, (log-)softmax of values over the segment's entries."""
    if values._shape[0] == 0:
        return
    o = _rows2d(out)
    with parallel_chunksize(_DYNAMIC_SEGMENTS):
        _seg_softmax(o, _rows2d(values), order._host, segptr._host, bool(log))
    _store(out, o.reshape(out._shape))


@SPARSE_CPU.register("_segment_softmax_backward")
def segment_softmax_backward(grad_in: Tensor, grad_out: Tensor, out: Tensor, order: Tensor,
                             segptr: Tensor, log: bool) -> None:
    """The gradient w.r.t. the values of ``_segment_softmax`` given its output ``out``."""
    if out._shape[0] == 0:
        return
    gi = _rows2d(grad_in)
    with parallel_chunksize(_DYNAMIC_SEGMENTS):
        _seg_softmax_backward(gi, _rows2d(grad_out), _rows2d(out), order._host, segptr._host,
                              bool(log))
    _store(grad_in, gi.reshape(grad_in._shape))

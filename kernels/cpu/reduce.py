"""CPU reduction kernels: sums, extrema, arg-extrema, norms, moments, scans and softmax.

Every reduction is reduced to one shape: a strided (O, K, I) view of the input whose middle
axis K is reduced (``plan``). The dims are ordered by memory stride first, so a reduction over
the innermost dims reads rows (I == 1: each output element owns a contiguous run of K inputs)
and one over outer dims reads columns (the inner loop walks I contiguous outputs). Inputs that
cannot be described that way without a copy (e.g. reducing dims 0 and 2 of a contiguous 3-d
tensor) are copied once with the reduced dims last.

Kernels are generated from a few templates, one scalar expression per op (like the elementwise
ops), and compiled lazily by Numba in a serial and a parallel variant. Inner loops run over
slices (signed index arithmetic such as ``x[base + i]`` keeps LLVM from vectorising them).

Accuracy: float32 rows are summed in float32 SIMD lanes over blocks of ``ROW_BLOCK`` elements
(the block, not the whole row, bounds the rounding error, like NumPy's pairwise sum) and blocks
are combined in float64; columns accumulate in float64 directly. Row blocks don't depend on
the thread count, so a row's result is the same serial or parallel.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor._threads import granted_threads
from gputensor.kernels.allocation import wrap_cpu

from ..reduce import REDUCTIONS, Reduction, norm_reduction
from ..registry import CPU
from .codegen import load_module, vocabulary_hash

PARALLEL_THRESHOLD = 1 << 19   # elements; below this a parallel launch costs more than it saves
ROW_BLOCK = 2048               # elements summed in float32 lanes before a float64 combine
LANES = 64                     # independent accumulators per row block (SIMD-friendly)
COL_CHUNK = 4096               # outputs per task in a column reduction (accumulators stay in L1)
_FASTMATH = "{'reassoc', 'nsz', 'contract'}"   # lets LLVM vectorise sums; NaN/inf stay exact
# Numba cannot compute in these; kernels read float32 copies and results are cast back.
_NUMBA_COMPUTE = {np.dtype(D.float16.np_dtype): np.float32,
                  np.dtype(D.bfloat16.np_dtype): np.float32}


def _threads() -> int:
    """The threads the block layout is planned for: the pool's size, fixed per process, so
    results do not change with set_num_threads (use_threads only picks who runs the blocks)."""
    return numba.config.NUMBA_NUM_THREADS


# -- layout planning ---------------------------------------------------------------------------
@dataclass
class Plan:
    """``flat[o*so + k*sk + i*si]`` is element (o, k, i); outputs are (O, I) row-major.

    ``out_axes`` lists the kept input axes in memory order when it differs from their index
    order (the result then needs a transpose on the way out), else None.
    """

    flat: np.ndarray
    O: int
    K: int
    I: int
    so: int
    sk: int
    si: int
    out_axes: list[int] | None = None


def host_array(t: Tensor) -> np.ndarray:
    """The tensor's NumPy view, as float32 if Numba cannot compute in its dtype."""
    a = t._host
    cdt = _NUMBA_COMPUTE.get(a.dtype)
    return a.astype(cdt) if cdt is not None else a


def _flat_view(a: np.ndarray) -> np.ndarray:
    """A 1-d view over the memory spanned by ``a``, starting at its first element."""
    if a.flags.c_contiguous:
        return a.reshape(-1)
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, a.strides, strict=True)) // a.itemsize
    return np.lib.stride_tricks.as_strided(a, (span,), (a.itemsize,))


def _merge(a: np.ndarray, axes: list[int]) -> tuple[int, int] | None:
    """(size, stride) of ``axes`` (outer to inner) merged into one axis, or None if they don't."""
    isz = a.itemsize
    for p, q in zip(axes, axes[1:], strict=False):
        if a.strides[p] != a.strides[q] * a.shape[q]:
            return None
    return math.prod(a.shape[d] for d in axes), a.strides[axes[-1]] // isz


def _runs(axes: list[int], reduced: set[int]) -> list[tuple[bool, list[int]]]:
    runs: list[tuple[bool, list[int]]] = []
    for d in axes:
        r = d in reduced
        if runs and runs[-1][0] == r:
            runs[-1][1].append(d)
        else:
            runs.append((r, [d]))
    return runs


_PLAN_CACHE: dict[tuple, Plan] = {}


def plan(a: np.ndarray, dims: tuple[int, ...]) -> Plan:
    """Describe reducing ``a`` over ``dims`` as reducing the middle axis of a strided (O, K, I).

    Plans that view ``a`` in place depend only on its geometry, so they are cached by it (the
    small reductions of every backward pass would otherwise rebuild them each time)."""
    dims = tuple(dims)
    key = (a.shape, a.strides, a.itemsize, dims)
    cached = _PLAN_CACHE.get(key)
    if cached is not None:
        p = copy.copy(cached)   # (dataclasses.replace is several times slower)
        p.flat = _flat_view(a)
        return p
    reduced = set(dims)
    kept = [d for d in range(a.ndim) if d not in reduced]
    K = math.prod(a.shape[d] for d in dims)
    if a.size == 0:  # nothing to read; every output is the reduction of nothing
        return Plan(np.empty(1, a.dtype), math.prod(a.shape[d] for d in kept), K, 1, 0, 1, 1)
    if min(a.strides, default=0) >= 0:
        axes = sorted((d for d in range(a.ndim) if a.shape[d] != 1), key=lambda d: -a.strides[d])
        p = _plan_strided(a, axes, reduced)
        if p is not None:
            if len(_PLAN_CACHE) > 4096:
                _PLAN_CACHE.clear()
            cached = copy.copy(p)
            cached.flat = None  # the cache keeps the geometry, never the input's memory alive
            _PLAN_CACHE[key] = cached
            return p
    # Fallback: one copy with the kept dims first and the reduced dims last.
    c = np.ascontiguousarray(a.transpose(kept + sorted(reduced)))
    return Plan(c.reshape(-1), c.size // max(K, 1), K, 1, K, 1, 1)


def _plan_strided(a: np.ndarray, axes: list[int], reduced: set[int]) -> Plan | None:
    runs = _runs(axes, reduced)
    labels = [r for r, _ in runs]
    if labels not in ([], [False], [True], [False, True], [True, False], [False, True, False]):
        return None
    groups = {}
    for pos, (r, run) in enumerate(runs):
        merged = _merge(a, run)
        if merged is None:
            return None
        key = "K" if r else ("I" if pos == len(runs) - 1 else "O")
        groups[key] = merged
    (O, so), (K, sk), (I, si) = (groups.get(k, (1, 1)) for k in "OKI")
    kept_mem = [d for r, run in runs if not r for d in run]
    out_axes = None if kept_mem == sorted(kept_mem) else kept_mem
    return Plan(_flat_view(a), O, K, I, so, sk, si, out_axes)


def store(result: np.ndarray, values: np.ndarray, p: Plan, in_shape: tuple[int, ...]) -> None:
    """Write (O*I,) ``values`` into the kept-dims-shaped ``result`` (undoing a transpose)."""
    if values.size == 0 or np.may_share_memory(result, values):
        return
    with np.errstate(over="ignore", invalid="ignore"):  # float16 overflow is inf, as in torch
        if p.out_axes is None:
            result.reshape(-1)[...] = values
            return
        mem_shape = [in_shape[d] for d in p.out_axes]
        dst = result.reshape([in_shape[d] for d in sorted(p.out_axes)])
        dst[...] = values.reshape(mem_shape).transpose(np.argsort(p.out_axes))


def direct_target(result: np.ndarray, p: Plan) -> np.ndarray | None:
    """``result`` flattened, when a kernel can write it in place (same order, Numba dtype)."""
    if p.out_axes is None and result.flags.c_contiguous and result.dtype not in _NUMBA_COMPUTE:
        return result.reshape(-1)
    return None


def use_threads(n: int) -> bool:
    """Run the parallel variant for ``n`` elements? By size and the threads granted (a prange
    on one thread only costs more), never by the machine's load; both variants combine the
    same fixed blocks in the same order, so the result is the same either way."""
    return n >= PARALLEL_THRESHOLD and granted_threads() >= 2


def _parallel(p: Plan) -> bool:
    return use_threads(p.O * p.K * p.I)


def _col_tasks(p: Plan, parallel: bool, min_rows: int = 64) -> tuple[int, int, int]:
    """(chunks along I, blocks along K, rows per K block) for a column reduction."""
    nic = -(-p.I // COL_CHUNK)
    nkb = 1
    if parallel and p.O * nic < 2 * _threads():
        nkb = max(1, min(-(-p.K // min_rows), 4 * _threads() // max(p.O * nic, 1)))
    kbs = max(1, -(-p.K // nkb))
    return nic, -(-p.K // kbs) if p.K else 1, kbs


# -- the accumulate template: sum, prod, mean, amax, all, norms, var, logsumexp ... ------------
_ACC_SRC = """\
import math
import numpy as np
from numba import njit, prange
from gputensor.kernels.cpu.scalar_fns import *  # noqa: F403
# vocabulary {vocabulary}


@njit(inline='always')
def _map(x, c, identity, p):
    return {map}


@njit(inline='always')
def _comb(a, b):
    return {comb}


@njit(inline='always')
def _fin(a, n, p, c):
    return {fin}


@njit(cache=True, parallel={parallel}, fastmath={fastmath}, error_model='numpy')
def rows(x, M, K, rs, ks, bs, nb, init, part, cen, out, p):
    # Row r is x[r*rs + k*ks], k < K; block b of a row sums bs elements into part[r*nb + b].
    for t in prange(M * nb):
        r = t // nb
        lo = (t - r * nb) * bs
        hi = min(K, lo + bs)
        base = r * rs
        c = {cen_row}
        s = init
        if ks == 1:
            xr = x[base + lo:base + hi]
            n = hi - lo
{row_block}
        else:
            for k in range(lo, hi):
                s = _comb(s, _map(x[base + k * ks], c, init, p))
            part[t] = s
    for r in prange(M):
        s = part[r * nb]
        for b in range(1, nb):
            s = _comb(s, part[r * nb + b])
        out[r] = _fin(s, K, p, {cen_row})


@njit(cache=True, parallel=False, fastmath={fastmath}, error_model='numpy')
def whole(x, init, acc, out, p):
    # rows() for one contiguous row of at most one block (M = nb = 1, ks = 1), the same fold in
    # the same order, with five arguments rather than twelve (a small sum's call cost); ``acc``
    # is a one-element array of the accumulator dtype, ``out`` 0-d.
    part = np.empty_like(acc)
    for t in range(1):
        c = 0
        s = init
        if t == 0:
            n = x.shape[0]
            xr = x[0:n]
{row_block}
    out[()] = _fin(part[0], x.shape[0], p, 0)


@njit(cache=True, parallel={parallel}, fastmath={fastmath}, error_model='numpy')
def cols(x, O, K, I, so, sk, si, chunk, nic, nkb, kbs, init, part, cen, out, p):
    # Task (o, chunk c, K block kb) accumulates part[(o*nkb + kb)*I + i] for i in the chunk.
    # Inner loops run over slices: signed index arithmetic (x[base + i]) blocks vectorisation.
    for t in prange(O * nic * nkb):
        o = t // (nic * nkb)
        rem = t - o * nic * nkb
        c0 = rem // nkb
        kb = rem - c0 * nkb
        i0 = c0 * chunk
        n = min(I, i0 + chunk) - i0
        pr = part[(o * nkb + kb) * I + i0:(o * nkb + kb) * I + i0 + n]
        for i in range(n):
            pr[i] = init
        {cen_slice}
        k = kb * kbs
        k1 = min(K, k + kbs)
        if si == 1:
            while k + 4 <= k1:  # four rows per sweep: a quarter of the accumulator traffic
                b = o * so + k * sk + i0
                x0 = x[b:b + n]
                x1 = x[b + sk:b + sk + n]
                x2 = x[b + 2 * sk:b + 2 * sk + n]
                x3 = x[b + 3 * sk:b + 3 * sk + n]
                for i in range(n):
                    c = {cen_chunk}
                    pr[i] = _comb(pr[i], _comb(
                        _comb(_map(x0[i], c, init, p), _map(x1[i], c, init, p)),
                        _comb(_map(x2[i], c, init, p), _map(x3[i], c, init, p))))
                k += 4
        while k < k1:
            b = o * so + k * sk
            if si == 1:
                xr = x[b + i0:b + i0 + n]
                for i in range(n):
                    c = {cen_chunk}
                    pr[i] = _comb(pr[i], _map(xr[i], c, init, p))
            else:
                for i in range(n):
                    c = {cen_chunk}
                    pr[i] = _comb(pr[i], _map(x[b + (i0 + i) * si], c, init, p))
            k += 1
    for j in prange(O * I):
        o = j // I
        i = j - o * I
        s = part[o * nkb * I + i]
        for kb in range(1, nkb):
            s = _comb(s, part[(o * nkb + kb) * I + i])
        out[j] = _fin(s, K, p, {cen_out})
"""

# A contiguous row block, two ways. Sums vectorise by themselves (fastmath reassoc); NaN-aware
# extrema need explicit lanes (independent accumulators) since LLVM won't reorder those selects.
_BLOCK_PLAIN = """\
            for k in range(n):
                s = _comb(s, _map(xr[k], c, init, p))
            part[t] = s"""
_BLOCK_LANES = """\
            lanes = np.full({lanes}, init)
            k = 0
            while k + {lanes} <= n:
                blk = xr[k:k + {lanes}]
                for j in range({lanes}):
                    lanes[j] = _comb(lanes[j], _map(blk[j], c, init, p))
                k += {lanes}
            part[t] = init  # lanes combine in the accumulator dtype
            for j in range({lanes}):
                part[t] = _comb(part[t], lanes[j])
            for k in range(k, n):
                part[t] = _comb(part[t], _map(xr[k], c, init, p))"""

# The second passes of the two-pass var/std and logsumexp: folds of this backend's own (CUDA
# runs one-pass algorithms), whose map also reads c, the first pass's value for the output.
_ABS2_CENTERED = "abs2(x - c)"
CENTERED: dict[str, Reduction] = {r.name: r for r in (
    Reduction("var", _ABS2_CENTERED, "a + b", 0, "a / max(n - p, 0)", acc="real64"),
    Reduction("std", _ABS2_CENTERED, "a + b", 0, "np.sqrt(a / max(n - p, 0))", acc="real64"),
    Reduction("sumexp", "np.exp(x - c)", "a + b", 0, "np.log(a) + c", acc="real64"),
)}
FOLDS: dict[str, Reduction] = {**REDUCTIONS, **CENTERED}


def _wide(dt: np.dtype) -> np.dtype:
    if dt.kind in "biu":
        return np.dtype(np.int64)
    return np.dtype(np.complex128 if dt.kind == "c" else np.float64)


def _acc_dtypes(name: str, dt: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(lane dtype that sums a row block, dtype that combines blocks and accumulates columns)."""
    kind = FOLDS[name].acc
    f64 = np.dtype(np.float64)
    if kind == "same":
        return dt, dt
    if kind == "bool":
        return np.dtype(np.bool_), np.dtype(np.bool_)
    if kind == "int":
        return np.dtype(np.int64), np.dtype(np.int64)
    if kind == "real":  # |x|-like values: float32 lanes for single precision inputs
        return (np.dtype(np.float32) if dt in (np.float32, np.complex64) else f64), f64
    if kind == "real64":
        return f64, f64
    lane = np.dtype(np.int64) if dt.kind in "biu" else dt
    return lane, _wide(lane)


def _identity(fold: Reduction, dt: np.dtype) -> object:
    """Where the fold starts: its number, or the extreme of the input's type (the lane type
    of an extremum is the input's own)."""
    if fold.identity not in ("lowest", "highest"):
        return fold.identity
    high = fold.identity == "highest"
    if dt.kind == "b":
        return high
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.max if high else info.min
    return math.inf if high else -math.inf


_ACC_CACHE: dict[tuple[str, bool], object] = {}


def _acc_module(name: str, parallel: bool) -> object:
    mod = _ACC_CACHE.get((name, parallel))
    if mod is None:
        f = FOLDS[name]
        center = name in CENTERED
        block = _BLOCK_LANES.format(lanes=LANES) if f.ordered else _BLOCK_PLAIN
        src = _ACC_SRC.format(
            map=f.map, comb=f.combine, fin=f.finalize, parallel=parallel, row_block=block,
            fastmath="False" if f.ordered else _FASTMATH, vocabulary=vocabulary_hash(),
            cen_row="cen[r]" if center else "0", cen_out="cen[j]" if center else "0",
            cen_chunk="cr[i]" if center else "0",
            cen_slice="cr = cen[o * I + i0:o * I + i0 + n]" if center else "")
        mod = _ACC_CACHE[name, parallel] = load_module(f"red_{name}", src)
    return mod


def accumulate(name: str, a: np.ndarray, dims: tuple[int, ...], out_dtype: np.dtype,
               p: float = 0.0, center: np.ndarray | None = None, pl: Plan | None = None,
               result: np.ndarray | None = None) -> tuple[np.ndarray, Plan]:
    """Reduce ``a`` over ``dims`` with the op ``name``; returns the flat (O*I,) values.

    With ``result`` (the kept-dims-shaped output), the values are written straight into it
    when its layout allows, else returned for ``store``.
    """
    pl = pl or plan(a, dims)
    lane, acc = _acc_dtypes(name, a.dtype)
    init = _identity(FOLDS[name], a.dtype)
    out = direct_target(result, pl) if result is not None else None
    if out is None:
        out = np.empty(pl.O * pl.I, _NUMBA_COMPUTE.get(np.dtype(out_dtype), out_dtype))
    if out.size == 0:
        return out, pl
    if pl.K == 0 and out.dtype.kind == "c" and "/ n" in FOLDS[name].finalize:
        # Numba divides complex numbers with Python's rules (0 / 0 raises): an empty mean is
        # NaN, as the real one and PyTorch give
        out.fill(complex(math.nan, math.nan))
        return out, pl
    cen = np.zeros(1) if center is None else center
    par = _parallel(pl)
    mod = _acc_module(name, par)
    if pl.I == 1:
        nb = max(1, -(-pl.K // ROW_BLOCK))
        part = np.empty(pl.O * nb, acc)
        mod.rows(pl.flat, pl.O, pl.K, pl.so, pl.sk, ROW_BLOCK, nb, lane.type(init), part, cen,
                 out, float(p))
    else:
        nic, nkb, kbs = _col_tasks(pl, par)
        part = np.empty(pl.O * nkb * pl.I, acc)
        mod.cols(pl.flat, pl.O, pl.K, pl.I, pl.so, pl.sk, pl.si, COL_CHUNK, nic, nkb, kbs,
                 acc.type(init), part, cen, out, float(p))
    return out, pl


# (fold, input geometry and dtype, dims, result geometry, p) -> the kernel call prepared for
# that case, or None where the general path is needed: a small reduction's Python cost is
# mostly rebuilding the same plan, dtypes and identity on every call.
_PREPARED: dict[tuple, Any] = {}


# Folds whose map and finalize are the identity: reducing in two steps (the outer dims, then
# the inner) gives the same value, the partials kept in the accumulator dtype.
_SPLITTABLE = frozenset({"sum", "nansum", "prod", "amax", "amin"})


def _split(name: str, a: np.ndarray, dims: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(K1, O, K2) when ``a`` is C-contiguous and ``dims`` reduce the dims before and after a
    block of kept ones (a conv bias's gradient: (N, C, H, W) over (0, 2, 3)), which the
    single (O, K, I) plan could only do after a transposing copy of the whole input."""
    if name not in _SPLITTABLE or not a.flags.c_contiguous or not a.size:
        return None
    reduced = sorted(set(dims))
    kept = [d for d in range(a.ndim) if d not in set(dims)]
    if not kept or not reduced or reduced[0] > kept[0] or reduced[-1] < kept[-1] or \
            kept != list(range(kept[0], kept[-1] + 1)):
        return None
    k1 = math.prod(a.shape[:kept[0]])
    k2 = math.prod(a.shape[kept[-1] + 1:])
    return (k1, a.size // (k1 * k2), k2) if k1 > 1 and k2 > 1 else None


def _split_runner(name: str, shape3: tuple[int, int, int], dtype: np.dtype,
                  r: np.ndarray) -> Callable[[np.ndarray, np.ndarray], None] | None:
    """(a, r) -> None: the outer dims reduced first, a column reduction over all of the input
    into (O, K2) partials of the accumulator dtype, then the rows of those into r (the other
    order runs the row kernel on K1*O rows a few elements long, ~3x slower)."""
    k1, o, k2 = shape3
    acc = _acc_dtypes(name, dtype)[1]
    if r.dtype in _NUMBA_COMPUTE or not r.flags.c_contiguous:
        return None
    # Both steps are plans of contiguous arrays, so prepared runners of their own.
    outer = _prepare(name, np.empty((k1, o * k2), dtype), (0,), np.empty(o * k2, acc), 0.0)
    inner = _prepare(name, np.empty((o, k2), acc), (1,), r.reshape(-1), 0.0)
    if inner is None or outer is None:
        return None

    def run(a: np.ndarray, r: np.ndarray) -> None:
        part = np.empty((o, k2), acc)
        outer(a.reshape(k1, o * k2), part.reshape(-1))
        inner(part, r.reshape(-1))
    return run


def _prepare(name: str, a: np.ndarray, dims: tuple[int, ...], r: np.ndarray, p: float) -> Any:
    """A function (a, r) -> None running ``accumulate`` for this geometry with everything but
    the arrays resolved, when the plan views ``a`` in place and ``r`` takes the values
    directly; else None."""
    shape3 = _split(name, a, dims)
    if shape3 is not None:
        return _split_runner(name, shape3, a.dtype, r)
    pl = plan(a, dims)
    if pl.out_axes is not None or direct_target(r, pl) is None or pl.O * pl.I == 0 or \
            pl.K == 0 or a.dtype in _NUMBA_COMPUTE or \
            (a.shape, a.strides, a.itemsize, tuple(dims)) not in _PLAN_CACHE:
        return None
    lane, acc = _acc_dtypes(name, a.dtype)
    init = _identity(FOLDS[name], a.dtype)
    mod = _acc_module(name, _parallel(pl))
    cen, pf = np.zeros(1), float(p)
    O, K, I, so, sk, si = pl.O, pl.K, pl.I, pl.so, pl.sk, pl.si
    contiguous = a.flags.c_contiguous
    if I == 1:
        nb = max(1, -(-K // ROW_BLOCK))
        rows, start = mod.rows, lane.type(init)

        def run_rows(a: np.ndarray, r: np.ndarray) -> None:
            rows(a.reshape(-1) if contiguous else _flat_view(a), O, K, so, sk, ROW_BLOCK, nb,
                 start, np.empty(O * nb, acc), cen, r.reshape(-1), pf)
        return run_rows
    nic, nkb, kbs = _col_tasks(pl, _parallel(pl))
    cols, start = mod.cols, acc.type(init)

    def run_cols(a: np.ndarray, r: np.ndarray) -> None:
        cols(a.reshape(-1) if contiguous else _flat_view(a), O, K, I, so, sk, si, COL_CHUNK,
             nic, nkb, kbs, start, np.empty(O * nkb * I, acc), cen, r.reshape(-1), pf)
    return run_cols


def _reduce_into(name: str, result: Tensor, inp: Tensor, dims: tuple[int, ...],
                 p: float = 0.0) -> None:
    a = host_array(inp)
    r = result._np if result._np_buf is result._storage._buf else result._host
    key = (name, a.shape, a.strides, a.dtype, dims, r.shape, r.strides, r.dtype, p,
           numba.config.NUMBA_NUM_THREADS)
    run = _PREPARED.get(key, _PREPARED)
    if run is _PREPARED:
        if len(_PREPARED) > 4096:
            _PREPARED.clear()
        run = _PREPARED[key] = _prepare(name, a, dims, r, p)
    if run is not None:
        run(a, r)
        return
    values, pl = accumulate(name, a, dims, r.dtype, p, result=r)
    store(r, values, pl, a.shape)


def _acc_kernel(name: str) -> Callable[..., None]:
    def run(result: Tensor, inp: Tensor, dims: tuple[int, ...]) -> None:
        _reduce_into(name, result, inp, dims)
    run.__name__ = name
    run.full = _full_reduction(name)  # type: ignore[attr-defined]
    return run


def _whole_runner(name: str, a: np.ndarray) -> Callable[[np.ndarray, np.ndarray], None]:
    """(a, r) -> None: the reduction of a contiguous ``a`` of at most one row block into the
    0-d ``r`` by the module's ``whole`` kernel (what ``rows`` computes for it)."""
    lane, acc = _acc_dtypes(name, a.dtype)
    whole = _acc_module(name, False).whole
    start, acc_type = lane.type(_identity(FOLDS[name], a.dtype)), np.zeros(1, acc)

    def run(a: np.ndarray, r: np.ndarray) -> None:
        whole(a if a.ndim == 1 else a.reshape(-1), start, acc_type, r, 0.0)
    return run


def _full_reduction(name: str) -> Callable[[Tensor], Tensor | None]:
    """``full(inp)``: the reduction of every element of ``inp`` as a new 0-d tensor (the
    frontends' ``x.sum()`` path), with the prepared runner found by the tensor's own shape,
    strides and dtype rather than by the NumPy geometry key of ``_reduce_into``; None where
    that runner does not serve (16-bit floats, a size where threads may run, a plan that copies),
    and the general kernel must."""
    runners: dict[tuple, Any] = {}
    reduction = REDUCTIONS[name]

    def prepare(inp: Tensor, key: tuple) -> Any:
        a = inp._host
        out_dtype = reduction.out(inp._dtype)
        r = np.empty((), out_dtype.np_dtype)
        runner = None
        if 0 < a.size <= ROW_BLOCK and a.flags.c_contiguous and a.dtype not in _NUMBA_COMPUTE:
            runner = _whole_runner(name, a)
        elif 0 < a.size < PARALLEL_THRESHOLD:
            runner = _prepare(name, a, tuple(range(a.ndim)), r, 0.0)
        entry = (runner, out_dtype, out_dtype.np_dtype) if runner is not None else False
        if len(runners) < 1024:
            runners[key] = entry
        return entry

    def full(inp: Tensor) -> Tensor | None:
        key = (inp._shape, inp._stride, inp._dtype)
        entry = runners.get(key)
        if entry is None:
            entry = prepare(inp, key)
        if entry is False:
            return None
        runner, out_dtype, np_dtype = entry
        r = np.empty((), np_dtype)
        runner(inp._np if inp._np_buf is inp._storage._buf else inp._host, r)
        return wrap_cpu(r, out_dtype, ())
    return full


for _name in ("sum", "nansum", "prod", "mean", "amax", "amin", "all", "any", "count_nonzero"):
    CPU.register(_name)(_acc_kernel(_name))


@CPU.register("norm")
def norm(result: Tensor, inp: Tensor, dims: tuple[int, ...], p: float) -> None:
    _reduce_into(norm_reduction(p), result, inp, dims, p)


@CPU.register("_var_mean")
def var_mean(var: Tensor, mean: Tensor | None, inp: Tensor, dims: tuple[int, ...],
             correction: float, take_sqrt: bool) -> None:
    """Two passes (mean, then squared deviations) in float64: exact-ish even for offsets.

    PyTorch's CPU var_mean (and var/std with more than one output, or of half precision) runs
    Welford's update in float64, whose mean cannot overflow for float32 input; var/std of a
    whole float/double tensor centre on ``input.mean()`` in the input's precision instead."""
    a = host_array(inp)
    wide = _wide(a.dtype) if a.dtype.kind in "fc" else np.dtype(np.float64)
    m, pl = accumulate("mean", a, dims, wide)
    welford = mean is not None or var.numel() > 1 or a.dtype not in (np.float32, np.float64)
    if welford and a.dtype == np.float32 and not np.isfinite(m).all():
        # float32 lanes overflowed (or the input holds inf/nan): redo the sum in float64
        m, pl = accumulate("mean", a.astype(np.float64), dims, wide)
    v, _ = accumulate("std" if take_sqrt else "var", a, dims, np.float64, correction,
                      center=_center_for(m), pl=pl, result=var._host)
    store(var._host, v, pl, a.shape)
    if mean is not None:
        store(mean._host, m, pl, a.shape)
        nan_means = _welford_nan_means(a, dims)
        if nan_means is not None:
            mean._host[nan_means.reshape(mean._host.shape)] = np.nan


def _welford_nan_means(a: np.ndarray, dims: tuple[int, ...]) -> np.ndarray | None:
    """Outputs whose Welford mean is NaN though the sum is +-inf: the running mean turns NaN
    once any element follows an infinite one (x - inf), so it stays infinite only where the
    sole infinite element is visited last. PyTorch's iterator visits the reduced dims with
    the smallest stride innermost. None when the input holds no infinity."""
    if a.dtype.kind != "f" or not np.isinf(a).any():
        return None
    keep = [d for d in range(a.ndim) if d not in dims]
    order = sorted(dims, key=lambda d: -a.strides[d])
    x = np.transpose(a, keep + order).reshape([a.shape[d] for d in keep] + [-1])
    n_inf = np.isinf(x).sum(-1)
    last_inf = np.isinf(x[..., -1]) if x.shape[-1] else np.zeros(n_inf.shape, bool)
    return (n_inf > 1) | ((n_inf == 1) & ~last_inf)


@CPU.register("logsumexp")
def logsumexp(result: Tensor, inp: Tensor, dims: tuple[int, ...]) -> None:
    a = host_array(inp)
    m, pl = accumulate("amax", a, dims, np.float64)
    m[np.isinf(m)] = 0.0  # all -inf (or an inf) rows: shift by 0 so the result is +-inf, not nan
    s, _ = accumulate("sumexp", a, dims, np.float64, center=_center_for(m), pl=pl,
                      result=result._host)
    store(result._host, s, pl, a.shape)


def _center_for(values: np.ndarray) -> np.ndarray:
    # ``values`` come out in the plan's (O, I) order, which is the order a second pass reads.
    return values if values.size else np.zeros(1, values.dtype)


# -- arg-extrema: max/min along a dim with indices, argmax/argmin ------------------------------
_ARG_SRC = """\
import numpy as np
from numba import njit, prange


@njit(inline='always')
def _better(v, b):
    # Strictly better keeps the first extremum; the first NaN wins and sticks (like torch).
    return v {op} b or (v != v and b == b)


@njit(inline='always')
def _pick(a, v):
    # The extremum of a and v, NaN-sticky; the form vectorises across explicit lanes.
    return a if (a {op}= v or a != a) else v


@njit(cache=True, parallel={parallel}, error_model='numpy')
def rows(x, M, K, rs, ks, bs, nb, pv, pi, vals, idxs):
    for t in prange(M * nb):
        r = t // nb
        lo = (t - r * nb) * bs
        hi = min(K, lo + bs)
        base = r * rs
        if ks == 1:
            # Two passes over an L1-resident block: its extremum (SIMD lanes), then the
            # first position holding it.
            xr = x[base + lo:base + hi]
            n = hi - lo
            lanes = np.full({lanes}, xr[0])
            k = 0
            while k + {lanes} <= n:
                blk = xr[k:k + {lanes}]
                for j in range({lanes}):
                    lanes[j] = _pick(lanes[j], blk[j])
                k += {lanes}
            best = xr[0]
            for j in range({lanes}):
                best = _pick(best, lanes[j])
            for k in range(k, n):
                best = _pick(best, xr[k])
            # First position holding it: the block has a NaN iff best is NaN, so one test
            # (v == best or v is NaN) finds either. Lanes of it locate the hit cheaply.
            k = 0
            while k + {lanes} <= n:
                blk = xr[k:k + {lanes}]
                hit = False
                for j in range({lanes}):
                    hit |= (blk[j] == best) | (blk[j] != blk[j])
                if hit:
                    break
                k += {lanes}
            bi = k
            for k in range(k, n):
                if xr[k] == best or xr[k] != xr[k]:
                    bi = k
                    break
            bi += lo
        else:
            best = x[base + lo * ks]
            bi = lo
            for k in range(lo + 1, hi):
                v = x[base + k * ks]
                if _better(v, best):
                    best = v
                    bi = k
        pv[t] = best
        pi[t] = bi
    for r in prange(M):
        best = pv[r * nb]
        bi = pi[r * nb]
        for b in range(1, nb):
            if _better(pv[r * nb + b], best):
                best = pv[r * nb + b]
                bi = pi[r * nb + b]
        vals[r] = best
        idxs[r] = bi


@njit(cache=True, parallel={parallel}, error_model='numpy')
def cols(x, O, K, I, so, sk, si, chunk, nic, nkb, kbs, pv, pi, vals, idxs):
    for t in prange(O * nic * nkb):
        o = t // (nic * nkb)
        rem = t - o * nic * nkb
        c0 = rem // nkb
        kb = rem - c0 * nkb
        i0 = c0 * chunk
        n = min(I, i0 + chunk) - i0
        pb = (o * nkb + kb) * I + i0
        bv = pv[pb:pb + n]
        bi = pi[pb:pb + n]
        k0 = kb * kbs
        for k in range(k0, min(K, k0 + kbs)):
            b = o * so + k * sk + i0 * si
            if si == 1:
                xr = x[b:b + n]
                _sweep(xr, bv, bi, n, k, k == k0)
            else:
                xs = x[b:b + (n - 1) * si + 1:si]
                _sweep(xs, bv, bi, n, k, k == k0)
    for j in prange(O * I):
        o = j // I
        i = j - o * I
        best = pv[o * nkb * I + i]
        bi = pi[o * nkb * I + i]
        for kb in range(1, nkb):
            q = (o * nkb + kb) * I + i
            if _better(pv[q], best):
                best = pv[q]
                bi = pi[q]
        vals[j] = best
        idxs[j] = bi


@njit(inline='always')
def _sweep(xr, bv, bi, n, k, first):
    if first:
        for i in range(n):
            bv[i] = xr[i]
            bi[i] = k
        return
    for i in range(n):  # branch-free selects, so the row sweep vectorises
        v = xr[i]
        b = bv[i]
        take = _better(v, b)
        bv[i] = v if take else b
        bi[i] = k if take else bi[i]
"""

_ARG_CACHE: dict[tuple[bool, bool], object] = {}


def _arg_module(largest: bool, parallel: bool) -> object:
    mod = _ARG_CACHE.get((largest, parallel))
    if mod is None:
        src = _ARG_SRC.format(op=">" if largest else "<", parallel=parallel, lanes=LANES)
        mod = _ARG_CACHE[largest, parallel] = load_module("red_arg", src)
    return mod


def arg_extreme(a: np.ndarray, dim: int | None, largest: bool
                ) -> tuple[np.ndarray, np.ndarray, Plan]:
    """Flat (values, int64 indices) of the extremum along ``dim`` (None: the flattened input)."""
    if dim is None:
        a = a.reshape(-1)  # copies only if non-contiguous; indices are into the flat order
        dim = 0
    pl = plan(a, (dim,))
    if pl.sk == 0 or pl.si == 0:  # an expanded input: slices can't step by 0, so copy it
        pl = plan(np.ascontiguousarray(a), (dim,))
    vals = np.empty(pl.O * pl.I, a.dtype)
    idxs = np.empty(pl.O * pl.I, np.int64)
    if vals.size == 0:
        return vals, idxs, pl
    par = _parallel(pl)
    mod = _arg_module(largest, par)
    if pl.I == 1:
        nb = max(1, -(-pl.K // ROW_BLOCK))
        pv, pi = np.empty(pl.O * nb, a.dtype), np.empty(pl.O * nb, np.int64)
        mod.rows(pl.flat, pl.O, pl.K, pl.so, pl.sk, ROW_BLOCK, nb, pv, pi, vals, idxs)
    else:
        nic, nkb, kbs = _col_tasks(pl, par)
        pv = np.empty(pl.O * nkb * pl.I, a.dtype)
        pi = np.empty(pl.O * nkb * pl.I, np.int64)
        mod.cols(pl.flat, pl.O, pl.K, pl.I, pl.so, pl.sk, pl.si, COL_CHUNK, nic, nkb, kbs,
                 pv, pi, vals, idxs)
    return vals, idxs, pl


@CPU.register("_arg_extreme")
def arg_extreme_kernel(values: Tensor | None, indices: Tensor, inp: Tensor, dim: int | None,
            largest: bool) -> None:
    """Extremum along ``dim`` with its index (torch.max/min(dim), argmax/argmin)."""
    a = host_array(inp)
    vals, idxs, pl = arg_extreme(a, dim, largest)
    shape = (a.size,) if dim is None else a.shape
    store(indices._host, idxs, pl, shape)
    if values is not None:
        store(values._host, vals, pl, shape)


# -- scans and softmax: same-shape outputs over a contiguous (O, K, I) ---------------------------
_SCAN_SRC = """\
import numpy as np
from numba import njit, prange


@njit(cache=True, parallel={parallel}, error_model='numpy')
def rows(x, M, K, init, out):
    # One task per row (a scan is sequential along it); slices keep the indexing cheap.
    for r in prange(M):
        xr = x[r * K:r * K + K]
        orow = out[r * K:r * K + K]
        s = init
        for k in range(K):
            s = s {op} xr[k]
            orow[k] = s


@njit(cache=True, parallel={parallel}, error_model='numpy')
def cols(x, O, K, I, chunk, init, acc, out):
    # acc: (O*I,) running values in the accumulation dtype; each sweep walks a row of I.
    nic = (I + chunk - 1) // chunk
    for t in prange(O * nic):
        o = t // nic
        i0 = (t - o * nic) * chunk
        n = min(I, i0 + chunk) - i0
        ar = acc[o * I + i0:o * I + i0 + n]
        for i in range(n):
            ar[i] = init
        for k in range(K):
            b = (o * K + k) * I + i0
            xr = x[b:b + n]
            orow = out[b:b + n]
            for i in range(n):
                ar[i] = ar[i] {op} xr[i]
                orow[i] = ar[i]
"""

_SCAN_CACHE: dict[tuple[str, bool], object] = {}


def _flat_out(r: np.ndarray) -> np.ndarray:
    """Where a same-shape kernel writes: the (contiguous) result itself, or a float32 buffer."""
    if r.flags.c_contiguous and r.dtype not in _NUMBA_COMPUTE:
        return r.reshape(-1)
    return np.empty(r.size, _NUMBA_COMPUTE.get(r.dtype, r.dtype))


def _contiguous_3d(a: np.ndarray, dim: int) -> tuple[np.ndarray, int, int, int]:
    c = np.ascontiguousarray(a)
    shape = c.shape or (1,)
    return (c.reshape(-1), math.prod(shape[:dim]), shape[dim] if c.ndim else 1,
            math.prod(shape[dim + 1:]))


@CPU.register("_scan")
def scan(result: Tensor, inp: Tensor, dim: int, op: str, reverse: bool = False) -> None:
    """cumsum (op '+') / cumprod (op '*') along ``dim``, accumulating in 64 bits (like torch);
    ``reverse`` scans from the end (cumsum's gradient)."""
    a = host_array(inp)
    r = result._host
    if a.size == 0:
        return
    if reverse and a.ndim:
        a = np.flip(a, dim)  # scanned into a contiguous copy below, flipped back on the way out
        r = np.flip(r, dim)
    x, O, K, I = _contiguous_3d(a, dim)
    par = use_threads(a.size)
    mod = _SCAN_CACHE.get((op, par))
    if mod is None:
        mod = _SCAN_CACHE[op, par] = load_module(
            "red_scan", _SCAN_SRC.format(op=op, parallel=par))
    acc_dt = _wide(a.dtype)
    init = acc_dt.type(1 if op == "*" else 0)
    out = _flat_out(r)
    if I == 1:
        mod.rows(x, O, K, init, out)
    else:
        mod.cols(x, O, K, I, COL_CHUNK, init, np.empty(O * I, acc_dt), out)
    if not np.may_share_memory(out, r):
        r[...] = out.reshape(r.shape)


# -- softmax / log_softmax over a contiguous (O, K, I): one Numba kernel, three passes per slice
# (max; the sum of exp(x - max); normalise) with the vectorising fast_exp. Rows sum in the
# dtype's vector lanes (like torch), columns in float64 ---------------------------------------
_SOFTMAX_SRC = """\
import numpy as np
from numba import njit, prange

from gputensor.kernels.cpu.fast_math import float_from_bits
from gputensor.kernels.cpu.scalar_fns import fast_exp, ordered_bits

# vocabulary {vocabulary}


@njit(cache=True, parallel={parallel}, fastmath={fastmath}, error_model='numpy')
def rows(x, xi, M, K, per_task, shift, mask, scratch, out):
    # xi: x's bits as ints, for the max (an integer reduction vectorises). A NaN needs no care
    # there: it makes the row's sum NaN, hence the whole row, as in torch.
    for t in prange((M + per_task - 1) // per_task):
        for r in range(t * per_task, min(M, (t + 1) * per_task)):
            xr = x[r * K:r * K + K]
            ir = xi[r * K:r * K + K]
            orow = out[r * K:r * K + K]
            mb = ordered_bits(ir[0], shift, mask)
            for k in range(K):
                mb = max(mb, ordered_bits(ir[k], shift, mask))
            m = float_from_bits(ordered_bits(mb, shift, mask), xr[0])
            scratch[r] = 0.0
            acc = scratch[r]  # the sum in the output dtype: float64 halves the vector width
{row_body}


@njit(inline='always')
def _pick(a, v):
    # The larger of a and v, NaN-sticky.
    return a if (a >= v or a != a) else v


@njit(cache=True, parallel={parallel}, fastmath={fastmath}, error_model='numpy')
def cols(x, O, K, I, chunk, acc, scratch, out):
    nic = (I + chunk - 1) // chunk
    for t in prange(O * nic):
        o = t // nic
        i0 = (t - o * nic) * chunk
        n = min(I, i0 + chunk) - i0
        ar = acc[o * I + i0:o * I + i0 + n]
        mr = scratch[o * I + i0:o * I + i0 + n]
        b = o * K * I + i0
        xr = x[b:b + n]
        for i in range(n):
            mr[i] = xr[i]
            ar[i] = 0.0
        for k in range(1, K):
            xr = x[b + k * I:b + k * I + n]
            for i in range(n):
                mr[i] = _pick(mr[i], xr[i])
{col_body}
"""

_SOFTMAX_ROW = {
    False: """\
            for k in range(K):
                e = fast_exp(xr[k] - m)
                orow[k] = e
                acc += e
            scratch[r] = 1.0 / acc
            inv = scratch[r]
            for k in range(K):
                orow[k] *= inv""",
    # log_softmax stores x - max before subtracting the log-sum: in one expression the
    # 'reassoc' flag let LLVM turn (x - m) - lse into x - (m + lse), which loses lse next to a
    # large m (log_softmax of [-1e10, -1e10] gave 0, not -log 2)
    True: """\
            for k in range(K):
                d = xr[k] - m
                orow[k] = d
                acc += fast_exp(d)
            scratch[r] = np.log(acc)
            lse = scratch[r]
            for k in range(K):
                orow[k] = orow[k] - lse""",
}
_SOFTMAX_COL = {
    False: """\
        for k in range(K):
            xr = x[b + k * I:b + k * I + n]
            orow = out[b + k * I:b + k * I + n]
            for i in range(n):
                e = fast_exp(xr[i] - mr[i])
                orow[i] = e
                ar[i] += e
        for i in range(n):
            mr[i] = 1.0 / ar[i]
        for k in range(K):
            orow = out[b + k * I:b + k * I + n]
            for i in range(n):
                orow[i] *= mr[i]""",
    True: """\
        for k in range(K):
            xr = x[b + k * I:b + k * I + n]
            orow = out[b + k * I:b + k * I + n]
            for i in range(n):
                d = xr[i] - mr[i]
                orow[i] = d
                ar[i] += fast_exp(d)
        for i in range(n):
            ar[i] = np.log(ar[i])
        for k in range(K):
            orow = out[b + k * I:b + k * I + n]
            for i in range(n):
                orow[i] = orow[i] - ar[i]""",
}
_SOFTMAX_CACHE: dict[tuple[bool, bool], object] = {}


def _softmax_module(log: bool, parallel: bool) -> object:
    mod = _SOFTMAX_CACHE.get((log, parallel))
    if mod is None:
        src = _SOFTMAX_SRC.format(parallel=parallel, fastmath=_FASTMATH,
                                  vocabulary=vocabulary_hash(), row_body=_SOFTMAX_ROW[log],
                                  col_body=_SOFTMAX_COL[log])
        mod = _SOFTMAX_CACHE[log, parallel] = load_module("red_softmax", src)
    return mod


@CPU.register("softmax")
def softmax(result: Tensor, inp: Tensor, dim: int, log: bool) -> None:
    """softmax / log_softmax along ``dim``, shifted by the max so exp never overflows (a NaN
    in a slice makes it all NaN, as in torch)."""
    a = host_array(inp)
    r = result._host
    if a.size == 0:
        return
    x, O, K, I = _contiguous_3d(a, dim)
    out = _flat_out(r)
    mod = _softmax_module(log, use_threads(a.size))
    if I == 1:
        per_task = -(-O // (4 * _threads())) if use_threads(a.size) else O
        bits = np.int32 if x.dtype.itemsize == 4 else np.int64
        width = 8 * x.dtype.itemsize - 1
        mod.rows(x, x.view(bits), O, K, max(per_task, 1), bits(width), bits((1 << width) - 1),
                 np.empty(O, out.dtype), out)
    else:
        mod.cols(x, O, K, I, COL_CHUNK, np.empty(O * I, np.float64), np.empty(O * I, out.dtype),
                 out)
    if not np.may_share_memory(out, r):
        r[...] = out.reshape(r.shape)


# -- the fused backward of softmax / log_softmax over a contiguous (O, K, I) -------------------
# Per slice along the reduced dim: s = sum(g * y) (softmax) or sum(g) (log_softmax), then
# softmax: y * (g - s); log_softmax: g - exp(y) * s. Rows sum in the dtype's vector lanes,
# columns in float64.
_SOFTMAX_BW_SRC = """\
import numpy as np
from numba import njit, prange

from gputensor.kernels.cpu.scalar_fns import fast_exp

# vocabulary {vocabulary}


@njit(cache=True, parallel={parallel}, fastmath={fastmath}, error_model='numpy')
def rows(g, y, M, K, out):
    for r in prange(M):
        gr = g[r * K:r * K + K]
        yr = y[r * K:r * K + K]
        orow = out[r * K:r * K + K]
        orow[0] = 0.0
        s = orow[0]  # the sum in the output dtype, in vector lanes (float64 halves their width)
        for k in range(K):
            s += {term}
        for k in range(K):
            orow[k] = {result}


@njit(cache=True, parallel={parallel}, fastmath={fastmath}, error_model='numpy')
def cols(g, y, O, K, I, chunk, acc, sums, out):
    # acc: float64 running sums; sums: the same in the output dtype for the last pass.
    nic = (I + chunk - 1) // chunk
    for t in prange(O * nic):
        o = t // nic
        i0 = (t - o * nic) * chunk
        n = min(I, i0 + chunk) - i0
        ar = acc[o * I + i0:o * I + i0 + n]
        sr = sums[o * I + i0:o * I + i0 + n]
        for i in range(n):
            ar[i] = 0.0
        for k in range(K):
            b = (o * K + k) * I + i0
            gr = g[b:b + n]
            yr = y[b:b + n]
            for i in range(n):
                ar[i] += {term_i}
        for i in range(n):
            sr[i] = ar[i]
        for k in range(K):
            b = (o * K + k) * I + i0
            gr = g[b:b + n]
            yr = y[b:b + n]
            orow = out[b:b + n]
            for i in range(n):
                orow[i] = {result_i}
"""

_SOFTMAX_BW_CACHE: dict[tuple[bool, bool], object] = {}


def _softmax_bw_module(log: bool, parallel: bool) -> object:
    mod = _SOFTMAX_BW_CACHE.get((log, parallel))
    if mod is None:
        if log:
            term, result = "gr[k]", "gr[k] - fast_exp(yr[k]) * s"
        else:
            term, result = "gr[k] * yr[k]", "yr[k] * (gr[k] - s)"
        src = _SOFTMAX_BW_SRC.format(
            parallel=parallel, fastmath=_FASTMATH, term=term, result=result,
            vocabulary=vocabulary_hash(),
            term_i=term.replace("[k]", "[i]"),
            result_i=result.replace("[k]", "[i]").replace(" s", " sr[i]"))
        mod = _SOFTMAX_BW_CACHE[log, parallel] = load_module("red_softmax_bw", src)
    return mod


@CPU.register("_softmax_backward")
def softmax_backward(result: Tensor, grad: Tensor, output: Tensor, dim: int, log: bool) -> None:
    """The gradient of softmax (``log`` False) or log_softmax's input along ``dim`` from the
    output's gradient and the output, in one Numba pass per slice."""
    y = host_array(output)
    r = result._host
    if y.size == 0:
        return
    gx, O, K, I = _contiguous_3d(host_array(grad), dim)
    yx = _contiguous_3d(y, dim)[0]
    out = _flat_out(r)
    mod = _softmax_bw_module(log, use_threads(y.size))
    if I == 1:
        mod.rows(gx, yx, O, K, out)
    else:
        mod.cols(gx, yx, O, K, I, COL_CHUNK, np.empty(O * I, np.float64),
                 np.empty(O * I, out.dtype), out)
    if not np.may_share_memory(out, r):
        r[...] = out.reshape(r.shape)

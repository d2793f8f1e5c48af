"""CPU kernels for shape ops: joins, repeats, gathers (index_select, take, gather, advanced
indexing), flips, rolls, triangles and padding; and the strided gather/scatter walker the
scatter kernels (scatter.py) share.

Every index reaching these kernels was checked by the frontend (gputensor/_ops/shape.py), so
NumPy's ``mode="wrap"``, fancy indexing and the Numba walkers never see an out-of-range value.
NumPy does the work where it has the operation (concatenate, take, fancy indexing for small
gathers); Numba compiles the loops NumPy can't express efficiently: a strided gather/scatter
walker for large gather/scatter/index_add (no index grids materialised, reductions applied in
index order).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

PARALLEL_THRESHOLD = 1 << 16
# Below this many positions NumPy's fancy indexing / ufunc.at is as quick as the Numba walker
# and needs no compilation.
WALK_THRESHOLD = 1 << 14
# Dtypes NumPy/Numba handle slowly or not at all, compared through an exact float32 copy.
_WIDEN = {D.float16: np.float32, D.bfloat16: np.float32}
_UFUNCS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


# -- helpers -----------------------------------------------------------------------------------
def _h1(t: Tensor) -> np.ndarray:
    """The host view of ``t``, with a 0-d tensor seen as one element along dim 0 (still a view)."""
    a = t._host
    return a.reshape(1) if a.ndim == 0 else a


def _key(a: np.ndarray, dt: D.dtype) -> np.ndarray:
    """Values to compare: float16/bfloat16 widened to float32 (exactly), others as they are."""
    widen = _WIDEN.get(dt)
    return a.astype(widen) if widen is not None else a


def _along(idx: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    """Fancy-index tuple selecting [.., idx[..], ..] along ``dim`` with open ranges elsewhere."""
    nd = idx.ndim
    out = []
    for k, n in enumerate(idx.shape):
        if k == dim:
            out.append(idx)
        else:
            out.append(np.arange(n).reshape(tuple(n if j == k else 1 for j in range(nd))))
    return tuple(out)


def _along_dim(dim: int, idx: np.ndarray) -> tuple:
    return (slice(None),) * dim + (idx,)


def _cast(value: Any, dtype: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dtype)


def _extreme(dt: D.dtype, np_dtype: np.dtype, highest: bool) -> np.ndarray:
    """The identity of amin (highest) / amax (lowest) for ``dt``."""
    if dt is D.bool:
        return np.asarray(highest)
    if dt.category == D.INTEGRAL:
        info = np.iinfo(np_dtype)
        return _cast(info.max if highest else info.min, np_dtype)
    return _cast(np.inf if highest else -np.inf, np_dtype)


# -- joining ---------------------------------------------------------------------------------
@CPU.register("cat")
def cat(out: Tensor, tensors: list[Tensor], dim: int) -> None:
    np.concatenate([t._host for t in tensors], axis=dim, out=out._host, casting="unsafe")


@CPU.register("repeat")
def repeat(out: Tensor, x: Tensor, reps: tuple[int, ...]) -> None:
    # View the (contiguous) output as (r0, s0, r1, s1, ...) and broadcast x into it.
    a = x._host.reshape((1,) * (len(reps) - x.dim()) + x._shape)
    inter, src = [], []
    for r, s in zip(reps, a.shape, strict=True):
        inter += [r, s]
        src += [1, s]
    out._host.reshape(inter)[...] = a.reshape(src)


@CPU.register("repeat_interleave")
def repeat_interleave(x: Tensor, repeats: Tensor, dim: int) -> Tensor:
    return Tensor._from_np(np.repeat(x._host, _h1(repeats), axis=dim))


# -- gather / take ---------------------------------------------------------------------------
@CPU.register("index_select")
def index_select(out: Tensor, x: Tensor, dim: int, index: Tensor) -> None:
    _h1(out)[...] = np.take(_h1(x), _h1(index), axis=dim, mode="wrap")


@CPU.register("take")
def take(out: Tensor, x: Tensor, index: Tensor) -> None:
    """Flat take; indices lie in [-numel, numel) and negative ones count from the end."""
    out._host[...] = np.take(x._host.reshape(-1), index._host, mode="wrap")


# -- strided gather/scatter walker --------------------------------------------------------------
_OPCODES = {None: 0, "sum": 1, "mean": 1, "prod": 2, "amax": 3, "amin": 4}


@njit(cache=True)
def _reduce_one(a: np.ndarray, j: int, v: Any, op: int) -> None:
    if op == 0:
        a[j] = v
    elif op == 1:
        a[j] += v
    elif op == 2:
        a[j] *= v
    elif op == 3:
        if v > a[j] or v != v:  # NaN propagates, as in PyTorch
            a[j] = v
    elif v < a[j] or v != v:
        a[j] = v


@njit(cache=True)
def _gather_row(a: np.ndarray, ao: int, sa: int, sd: int, idx: np.ndarray, io: int, si: int,
                p: np.ndarray, po: int, sp: int, n: int) -> None:
    """One run along the last dim: p[po + i*sp] = a[ao + i*sa + idx[io + i*si]*sd]."""
    if sa == 1 and si == 0 and sp == 1:
        base = ao + idx[io] * sd  # constant index along the run: a contiguous copy
        for i in range(n):
            p[po + i] = a[base + i]
    else:
        for i in range(n):
            p[po + i * sp] = a[ao + i * sa + idx[io + i * si] * sd]


@njit(cache=True)
def _scatter_row(a: np.ndarray, ao: int, sa: int, sd: int, idx: np.ndarray, io: int, si: int,
                 p: np.ndarray, po: int, sp: int, n: int, op: int) -> None:
    """One run along the last dim: a[ao + i*sa + idx[io + i*si]*sd] (op)= p[po + i*sp];
    op 0 assigns, 1..4 reduce (sum, prod, amax, amin)."""
    if sa == 1 and si == 0 and sp == 1 and op <= 1:
        base = ao + idx[io] * sd  # constant index along the run: contiguous, vectorizable
        if op == 0:
            for i in range(n):
                a[base + i] = p[po + i]
        else:
            for i in range(n):
                a[base + i] += p[po + i]
        return
    for i in range(n):
        _reduce_one(a, ao + i * sa + idx[io + i * si] * sd, p[po + i * sp], op)


@njit(cache=True)
def _advance(coord: np.ndarray, shape: np.ndarray, dim: int, ast: np.ndarray, ist: np.ndarray,
             pst: np.ndarray, offs: np.ndarray) -> None:
    """Step the odometer over all dims but the last; offs holds the (a, idx, p) offsets, with
    ``dim`` left out of a's (the index supplies it)."""
    k = shape.shape[0] - 2
    while k >= 0:
        coord[k] += 1
        if k != dim:
            offs[0] += ast[k]
        offs[1] += ist[k]
        offs[2] += pst[k]
        if coord[k] < shape[k]:
            return
        if k != dim:
            offs[0] -= ast[k] * shape[k]
        offs[1] -= ist[k] * shape[k]
        offs[2] -= pst[k] * shape[k]
        coord[k] = 0
        k -= 1


@njit(cache=True)
def _walk_gather(a: np.ndarray, ast: np.ndarray, idx: np.ndarray, ist: np.ndarray,
                 p: np.ndarray, pst: np.ndarray, shape: np.ndarray, dim: int) -> None:
    """p[q] = a[q with q[dim] = idx[q]] for every position q of ``shape``."""
    last = shape.shape[0] - 1
    sa = 0 if dim == last else ast[last]
    coord = np.zeros(last + 1, np.int64)
    offs = np.zeros(3, np.int64)
    for _ in range(_outer(shape)):
        _gather_row(a, offs[0], sa, ast[dim], idx, offs[1], ist[last], p, offs[2], pst[last],
                    shape[last])
        _advance(coord, shape, dim, ast, ist, pst, offs)


@njit(cache=True)
def _walk_scatter(a: np.ndarray, ast: np.ndarray, idx: np.ndarray, ist: np.ndarray,
                  p: np.ndarray, pst: np.ndarray, shape: np.ndarray, dim: int, op: int) -> None:
    """a[q with q[dim] = idx[q]] (op)= p[q] for every position q of ``shape``, in C order, so
    duplicate indices apply in order."""
    last = shape.shape[0] - 1
    sa = 0 if dim == last else ast[last]
    coord = np.zeros(last + 1, np.int64)
    offs = np.zeros(3, np.int64)
    for _ in range(_outer(shape)):
        _scatter_row(a, offs[0], sa, ast[dim], idx, offs[1], ist[last], p, offs[2], pst[last],
                     shape[last], op)
        _advance(coord, shape, dim, ast, ist, pst, offs)


@njit(cache=True)
def _outer(shape: np.ndarray) -> int:
    n = 1
    for k in range(shape.shape[0] - 1):
        n *= shape[k]
    return n


def _span(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 1-d view of the memory a (non-negatively) strided array spans, and its element
    strides, so a kernel can address it by offsets."""
    isz = arr.itemsize
    strides = np.array([st // isz for st in arr.strides], np.int64)
    extent = 1 + sum((n - 1) * int(st) for n, st in zip(arr.shape, strides, strict=True))
    return np.lib.stride_tricks.as_strided(arr, (extent,), (isz,)), strides


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _walkable(a: np.ndarray, dt: D.dtype, op: str | None) -> np.ndarray | None:
    """``a`` as an array Numba can process for ``op``, or None when only NumPy can.

    Pure copies run on a same-size unsigned view (bits are bits), which also keeps the number
    of compiled specializations small.
    """
    if op in (None, "gather"):
        return a.view(_BITS[a.itemsize]) if a.itemsize in _BITS else None
    if dt.category in (D.INTEGRAL, D.FLOATING) and dt not in _WIDEN:
        return a
    return None


def _run_walk(a: np.ndarray, idx: np.ndarray, p: np.ndarray, shape: tuple[int, ...], dim: int,
              op: str | None) -> None:
    idx = np.broadcast_to(idx.astype(np.int64, copy=False), shape)  # one index specialization
    (af, ast), (xf, ist), (pf, pst) = _span(a), _span(idx), _span(p)
    dims = np.array(shape, np.int64)
    if op == "gather":
        _walk_gather(af, ast, xf, ist, pf, pst, dims, dim)
    else:
        _walk_scatter(af, ast, xf, ist, pf, pst, dims, dim, _OPCODES[op])


def _scatter_into(t: Tensor, shape: tuple[int, ...], dim: int, idx: np.ndarray, vals: Any,
                  op: str | None) -> None:
    """Scatter ``vals`` into ``t`` along ``dim`` at ``idx`` (both broadcast to ``shape``)."""
    a = _h1(t)
    vals = np.broadcast_to(np.asarray(vals, dtype=a.dtype), shape)
    target = _walkable(a, t.dtype, op) if math.prod(shape) >= WALK_THRESHOLD else None
    if target is None:
        coords = _along(np.broadcast_to(idx, shape), dim)
        if op is None:
            a[coords] = vals
        else:
            _UFUNCS["sum" if op == "mean" else op].at(a, coords, vals)
        return
    _run_walk(target, idx, vals.view(target.dtype), shape, dim, op)


@CPU.register("gather")
def gather(out: Tensor, x: Tensor, dim: int, index: Tensor) -> None:
    o, a, idx = _h1(out), _h1(x), _h1(index)
    src = _walkable(a, x.dtype, "gather") if idx.size >= WALK_THRESHOLD else None
    if src is None:
        o[...] = a[_along(idx, dim)]
    else:
        _run_walk(src, idx, o.view(src.dtype), idx.shape, dim, "gather")




# -- advanced indexing -------------------------------------------------------------------------
def _np_index(adv: list[Any]) -> tuple:
    return tuple(slice(None) if a is None else a._host for a in adv)


@CPU.register("_index")
def index(base: Tensor, adv: list[Any]) -> Tensor:
    r = base._host[_np_index(adv)]
    # NumPy reads a 0-d integer index as basic indexing (a view of base, maybe 0-d): copy it;
    # not with np.ascontiguousarray, which turns a 0-d result into shape (1,)
    return Tensor._from_np(r if r.flags.c_contiguous and r.flags.owndata else r.copy())



# -- flips, rolls, triangles, padding ----------------------------------------------------------
@CPU.register("flip")
def flip(out: Tensor, x: Tensor, dims: list[int]) -> None:
    out._host[...] = np.flip(x._host, tuple(dims)) if dims else x._host


@CPU.register("roll")
def roll(out: Tensor, x: Tensor, shifts: list[int], dims: list[int]) -> None:
    out._host[...] = np.roll(x._host, shifts, tuple(dims))


def _tri_mask(shape: tuple[int, ...], k: int, upper: bool) -> np.ndarray:
    rows, cols = shape[-2], shape[-1]
    return ~np.tri(rows, cols, k - 1, dtype=np.bool_) if upper else \
        np.tri(rows, cols, k, dtype=np.bool_)


def _tri(out: Tensor, x: Tensor, k: int, upper: bool) -> None:
    o = out._host
    if out is not x:
        o[...] = x._host
    np.copyto(o, _cast(0, o.dtype), where=~_tri_mask(o.shape, k, upper))


@CPU.register("tril")
def tril(out: Tensor, x: Tensor, k: int) -> None:
    _tri(out, x, k, upper=False)


@CPU.register("triu")
def triu(out: Tensor, x: Tensor, k: int) -> None:
    _tri(out, x, k, upper=True)


def _pad_source_index(size: int, lo: int, hi: int, out_size: int, mode: str) -> np.ndarray:
    """For each output position along one dim, the input position it copies (PyTorch's rule:
    reflect/replicate index the whole input; circular wraps within the part left after crops)."""
    if mode == "circular":
        start = max(-lo, 0)
        kept = size - start - max(-hi, 0)
        return start + np.mod(np.arange(out_size) - max(lo, 0), kept)
    i = np.arange(out_size) - lo
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    i = np.abs(i)  # reflect
    return np.where(i >= size, 2 * (size - 1) - i, i)


@CPU.register("pad")
def pad(out: Tensor, x: Tensor, widths: list[tuple[int, int]], mode: str, value: Any) -> None:
    a, o = x._host, out._host
    if mode != "constant":
        maps = [_pad_source_index(n, lo, hi, m, mode) for n, (lo, hi), m in
                zip(a.shape, widths, o.shape, strict=True)]
        o[...] = a[np.ix_(*maps)]
        return
    o[...] = _cast(value, o.dtype)
    src, dst = [], []
    for n, (lo, hi) in zip(a.shape, widths, strict=True):
        length = n - max(-lo, 0) - max(-hi, 0)
        if length <= 0:
            return  # everything was cropped away: only the fill value remains
        src.append(slice(max(-lo, 0), max(-lo, 0) + length))
        dst.append(slice(max(lo, 0), max(lo, 0) + length))
    o[tuple(dst)] = a[tuple(src)]

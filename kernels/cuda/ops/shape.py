"""The CUDA backend's shape and gather kernels (kernels/cuda/shape.cu), registered under the
CPU kernels' names and signatures (kernels/cpu/shape.py).

These ops only move elements, so each kernel is instantiated per element size (1/2/4/8-byte
words) and works on any dtype of that size. Tensors pass as their storage's base pointer plus
element offsets and strides in a small device array, so views (strided, offset, flipped,
broadcast) need no copy. Four kernels cover the family:

* ``remap``: ``out[c] = x[f(c)]`` with one coordinate map per dim (identity, flip, roll, tile,
  the four pad modes): cat, repeat, flip, roll, pad.
* ``tri``: tril/triu.
* ``index_gather``: ``out[c] = x[... + sum_k idx_k(c) * stride_k]`` for gather, index_select,
  take and advanced indexing (``_index``). Indices are checked on the device; a bad one goes to
  the device's error record (kernels/cuda/errors.py: raised as the frontend's IndexError right
  after the launch, or at the next synchronising call when launches are asynchronous). No bad
  index is ever dereferenced.
* ``repeats_scan`` + ``repeat_interleave``: the running totals of the repeats (one block),
  whose last value is read back as the output size (it depends on the data, as in PyTorch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor, contiguous_strides
from gputensor.kernels.allocation import contiguous_copy, empty
from gputensor.kernels.layout import broadcast_shapes, broadcast_strides
from gputensor.kernels.registry import CUDA

from .. import errors
from ..device import (
    BLOCK,
    CudaSource,
    DeviceArray,
    constant_array,
    grid_for,
    launch,
    read_back,
)
from ..dtypes import REAL_DTYPES, short_name
from ..runtime import DevicePtr

SOURCE = CudaSource("shape.cu")

# Unsigned words by element size: the element type of every data-moving kernel.
_WORDS = {1: ("w1", "unsigned char", np.uint8), 2: ("w2", "unsigned short", np.uint16),
          4: ("w4", "unsigned int", np.uint32), 8: ("w8", "unsigned long long", np.uint64)}
# Index dtypes the gather kernel reads directly (others are converted to int64 first).
_INDEX = {D.int32: ("i32", "int"), D.int64: ("i64", "long long")}
_WORD_VARIANTS = [{"w": w, "U": u} for w, u, _ in _WORDS.values()]
_INDEX_VARIANTS = [{"i": i, "I": c} for i, c in _INDEX.values()]

SOURCE.instantiate("shape_remap_{w}",
                   "{U}* out, const {U}* x, {U} fill, long long n, const long long* meta",
                   "gt_remap<{U}>(out, x, fill, n, meta)", _WORD_VARIANTS)
SOURCE.instantiate("shape_tri_{w}",
                   "{U}* out, const {U}* x, long long n, long long k, int upper, "
                   "const long long* meta",
                   "gt_tri<{U}>(out, x, n, k, upper, meta)", _WORD_VARIANTS)
SOURCE.instantiate("shape_index_gather_{w}_{i}",
                   "{U}* out, const {U}* x, const {I}* idx, long long n, long long* err, "
                   "long long site, const long long* meta",
                   "gt_index_gather<{U}, {I}>(out, x, idx, n, err, site, meta)",
                   [{**w, **i} for w in _WORD_VARIANTS for i in _INDEX_VARIANTS])
SOURCE.instantiate("shape_repeats_scan_{i}",
                   "const {I}* rep, long long rstride, long long* cum, long long n, "
                   "long long* res",
                   "gt_repeats_scan<{I}>(rep, rstride, cum, n, res)", _INDEX_VARIANTS)
SOURCE.instantiate("shape_repeat_interleave_{w}",
                   "{U}* out, const {U}* x, const long long* cum, long long nrep, long long n, "
                   "const long long* meta",
                   "gt_repeat_interleave<{U}>(out, x, cum, nrep, n, meta)", _WORD_VARIANTS)

NO_ERROR = (1 << 63) - 1  # repeats_scan's error word before any negative repeat (INT64_MAX)
SCAN_THREADS = 256  # GT_SCAN_THREADS in shape.cu

# remap coordinate maps (gt_remap_coord in shape.cu)
IDENTITY, FLIP, ROLL, TILE, PAD_CONSTANT, REPLICATE, REFLECT, CIRCULAR = range(8)
_PAD_MODES = {"constant": PAD_CONSTANT, "replicate": REPLICATE, "reflect": REFLECT,
              "circular": CIRCULAR}


# ---- helpers ------------------------------------------------------------------------------------
def _base(t: Tensor) -> DevicePtr | None:
    """The device address of ``t``'s storage (offsets travel in the metadata); None when the
    storage is empty (a kernel then never reads it)."""
    buf = t._storage._buf
    if t._storage.device.type != "cuda":
        raise RuntimeError(f"expected a CUDA tensor, got one on {t._storage.device}")
    return DevicePtr(buf.ptr) if buf.size else None


def _word(dt: D.dtype, op_name: str) -> tuple[str, Any, int]:
    """(kernel suffix, NumPy word type, words per element) for moving elements of ``dt``.

    Moving needs no arithmetic, so complex dtypes move too: complex64 as one 8-byte word,
    complex128 as two (a trailing "lane" dim of size 2 the launchers add to the layout)."""
    if dt is D.complex128:
        return "w8", np.uint64, 2
    if dt is not D.complex64:
        short_name(dt, op_name, REAL_DTYPES)
    w, _, np_word = _WORDS[dt.itemsize]
    return w, np_word, 1


def _launch(name: str, n: int, args: Sequence[Any]) -> None:
    """A grid-stride launch of ``SOURCE``'s kernel ``name`` over ``n`` items."""
    launch(SOURCE, name, grid_for(n), BLOCK, args)


def _read_int64(arr: DeviceArray, count: int = 1) -> np.ndarray:
    """Read back a small int64 device array (a synchronising copy)."""
    return read_back(arr.ptr, np.int64, count)


_OUT_OF_BOUNDS = "index {value} is out of bounds for dimension {dim} with size {bound}"
_SITES = {
    "index_select": errors.site("index_select", IndexError, "index_select(): " + _OUT_OF_BOUNDS),
    "take": errors.site("take", IndexError, "take(): (on the flattened input) index {value} is "
                        "out of bounds for dimension {dim} with size {bound}"),
    "gather": errors.site("gather", RuntimeError, _OUT_OF_BOUNDS),  # as the CPU's host check
    "_index": errors.site("index", IndexError, _OUT_OF_BOUNDS),
}


def _shape1(t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides with a 0-d tensor seen as one element along dim 0 (as on the CPU)."""
    return (t._shape, t._stride) if t._shape else ((1,), (0,))


# ---- remap --------------------------------------------------------------------------------------
class _Dim(NamedTuple):
    """One output dim of a remap: sizes, strides and the coordinate map."""

    size: int
    ostride: int
    xstride: int
    mode: int = IDENTITY
    p0: int = 0
    p1: int = 0
    p2: int = 0
    xsize: int = -1  # -1: same as size


def _remap(out: Tensor, ooff: int, x: Tensor, xoff: int, dims: list[_Dim], fill: int = 0,
           op_name: str = "remap") -> None:
    """out[ooff + sum c*ostride] = x[xoff + sum f(c)*xstride] over the output coordinates c;
    ``fill`` (one word's bits) where a constant pad leaves the input."""
    n = math.prod(d.size for d in dims)
    if n == 0:
        return
    w, np_word, lanes = _word(out._dtype, op_name)
    if lanes > 1:  # elements of several words: scale the layout, add a lane dim
        ooff, xoff, n = ooff * lanes, xoff * lanes, n * lanes
        dims = [d._replace(ostride=d.ostride * lanes, xstride=d.xstride * lanes)
                for d in dims] + [_Dim(lanes, 1, 1)]
    merged: list[list[int]] = []
    for d in dims:
        mode, xst, xsize = d.mode, d.xstride, d.size if d.xsize < 0 else d.xsize
        if mode == FLIP:  # a flip is the identity over a negatively strided view
            xoff += (xsize - 1) * xst
            mode, xst = IDENTITY, -xst
        if mode == IDENTITY and d.size == 1:
            continue  # coordinate 0 everywhere: contributes nothing
        if (mode == IDENTITY and merged and merged[-1][3] == IDENTITY
                and merged[-1][1] == d.ostride * d.size and merged[-1][2] == xst * d.size):
            prev = merged[-1]
            prev[0] *= d.size
            prev[7] = prev[0]
            prev[1], prev[2] = d.ostride, xst
            continue
        merged.append([d.size, d.ostride, xst, mode, d.p0, d.p1, d.p2,
                       d.size if mode == IDENTITY else xsize])
    meta = constant_array([len(merged), ooff, xoff] + [v for m in merged for v in m])
    _launch(f"shape_remap_{w}", n, [_base(out), _base(x), np_word(fill), np.int64(n), meta])


def _identity_dims(shape: Sequence[int], ostride: Sequence[int],
                   xstride: Sequence[int]) -> list[_Dim]:
    return [_Dim(n, o, s) for n, o, s in zip(shape, ostride, xstride, strict=True)]


def _fill_bits(value: Any, dt: D.dtype) -> int | None:
    """``value`` cast to ``dt`` as the CPU kernel casts it, as the bits of one element (of
    each word, for a multi-word element); None when those words differ (complex128 1+0j)."""
    with np.errstate(all="ignore"):
        v = np.asarray(value).astype(dt.np_dtype)
    words = v.reshape(1).view(_WORDS[min(dt.itemsize, 8)][2])
    return int(words[0]) if len(set(words.tolist())) == 1 else None


def _pad_by_fill(out: Tensor, x: Tensor, widths: list[tuple[int, int]], value: Any) -> None:
    """A constant pad the remap cannot fill with one word: fill all of ``out``, then copy the
    kept part of ``x`` (negative widths crop it) into its place."""
    from gputensor.kernels.allocation import strided_copy

    out.fill_(value)
    ooff, xoff, shape = out._offset, x._offset, []
    for n, (lo, hi), os_, xs in zip(x._shape, widths, out._stride, x._stride, strict=True):
        ooff += max(lo, 0) * os_
        xoff += max(-lo, 0) * xs
        shape.append(n - max(-lo, 0) - max(-hi, 0))
    if all(k > 0 for k in shape):
        strided_copy(out._view(tuple(shape), out._stride, ooff),
                     x._view(tuple(shape), x._stride, xoff))


@CUDA.register("cat")
def cat(out: Tensor, tensors: list[Tensor], dim: int) -> None:
    """Each input is copied into its slice of ``out``; inputs of another dtype are cast by the
    elementwise copy kernel on the way."""
    from gputensor.kernels.allocation import strided_copy

    start = 0
    for t in tensors:
        length = t._shape[dim]
        ooff = out._offset + start * out._stride[dim]
        start += length
        if t.numel() == 0:
            continue
        if t._dtype is not out._dtype:
            strided_copy(out._view(t._shape, out._stride, ooff), t)
            continue
        _remap(out, ooff, t, t._offset, _identity_dims(t._shape, out._stride, t._stride),
               op_name="cat")


@CUDA.register("repeat")
def repeat(out: Tensor, x: Tensor, reps: tuple[int, ...]) -> None:
    lead = len(reps) - x.dim()
    xshape = (1,) * lead + x._shape
    xstride = (0,) * lead + x._stride
    dims = []
    for r, s, n, xs, os_ in zip(reps, xshape, out._shape, xstride, out._stride, strict=True):
        if s == 1 or r == 1:  # a broadcast (stride 0) or a plain copy along this dim
            dims.append(_Dim(n, os_, 0 if s == 1 else xs))
        else:
            dims.append(_Dim(n, os_, xs, TILE, xsize=s))
    _remap(out, out._offset, x, x._offset, dims, op_name="repeat")


@CUDA.register("flip")
def flip(out: Tensor, x: Tensor, dims: list[int]) -> None:
    flipped = set(dims)
    spec = [_Dim(n, os_, xs, FLIP if k in flipped else IDENTITY)
            for k, (n, os_, xs) in enumerate(zip(x._shape, out._stride, x._stride, strict=True))]
    _remap(out, out._offset, x, x._offset, spec, op_name="flip")


@CUDA.register("roll")
def roll(out: Tensor, x: Tensor, shifts: list[int], dims: list[int]) -> None:
    total = [0] * x.dim()
    for s, d in zip(shifts, dims, strict=True):
        total[d] += int(s)  # a dim named twice rolls by the sum, as in NumPy
    spec = []
    for n, os_, xs, s in zip(x._shape, out._stride, x._stride, total, strict=True):
        s = s % n if n else 0
        spec.append(_Dim(n, os_, xs, ROLL, s) if s else _Dim(n, os_, xs))
    _remap(out, out._offset, x, x._offset, spec, op_name="roll")


@CUDA.register("pad")
def pad(out: Tensor, x: Tensor, widths: list[tuple[int, int]], mode: str, value: Any) -> None:
    code = _PAD_MODES[mode]
    spec = []
    for n, m, (lo, hi), os_, xs in zip(x._shape, out._shape, widths, out._stride, x._stride,
                                       strict=True):
        if lo == 0 and hi == 0:
            spec.append(_Dim(m, os_, xs))
        elif code == CIRCULAR:
            start = max(-lo, 0)
            kept = n - start - max(-hi, 0)
            spec.append(_Dim(m, os_, xs, CIRCULAR, start, max(lo, 0), kept, xsize=n))
        else:
            spec.append(_Dim(m, os_, xs, code, lo, xsize=n))
    fill = _fill_bits(value, out._dtype) if code == PAD_CONSTANT else 0
    if fill is None:
        _pad_by_fill(out, x, widths, value)
        return
    _remap(out, out._offset, x, x._offset, spec, fill, op_name="pad")


# ---- tril / triu --------------------------------------------------------------------------------
def _tri(out: Tensor, x: Tensor, k: int, upper: bool, op_name: str) -> None:
    n = out.numel()
    if n == 0:
        return
    w, _, lanes = _word(out._dtype, op_name)
    nd = x.dim()
    shape, ost, xst = x._shape, out._stride, x._stride
    if lanes > 1:
        n *= lanes
        shape, ost, xst = (*shape, lanes), (*(s * lanes for s in ost), 1), \
            (*(s * lanes for s in xst), 1)
    meta = constant_array([len(shape), out._offset * lanes, x._offset * lanes, nd - 2, *shape,
                        *ost, *xst])
    _launch(f"shape_tri_{w}", n, [_base(out), _base(x), np.int64(n), np.int64(k),
                                  np.int32(upper), meta])


@CUDA.register("tril")
def tril(out: Tensor, x: Tensor, k: int) -> None:
    _tri(out, x, k, upper=False, op_name="tril")


@CUDA.register("triu")
def triu(out: Tensor, x: Tensor, k: int) -> None:
    _tri(out, x, k, upper=True, op_name="triu")


# ---- gathers by index tensors -------------------------------------------------------------------
class _Index(NamedTuple):
    """One index tensor of a gather, laid out over the output's dims."""

    offset: int  # element offset in the shared index buffer
    size: int  # the indexed dim's size (valid values: [0, size), or [-size, size) wrapped)
    stride: int  # x's stride along the indexed dim
    strides: tuple[int, ...]  # the index's stride per output dim (0 where it broadcasts)
    dim: int  # the indexed dim, for the error message


def _gather(out: Tensor, oshape: tuple[int, ...], ostride: Sequence[int], x: Tensor,
            xstride: Sequence[int], idx: Tensor, idx_dtype: D.dtype,
            indices: list[_Index], wrap: bool, op_name: str) -> None:
    """out[c] = x[x offset + sum c*xstride + sum_k idx_k(c) * stride_k]; a bad index raises
    the IndexError of ``op_name``'s error site (see kernels/cuda/errors.py for when). ``idx``
    is any tensor on the index buffer's storage (the offsets in ``indices`` are from its
    base)."""
    n = math.prod(oshape)
    if n == 0:
        return
    w, _, lanes = _word(out._dtype, op_name)
    i_name = _INDEX[idx_dtype][0]
    ooff, xoff = out._offset, x._offset
    if lanes > 1:  # elements of several words: scale the layout, add a lane dim
        n *= lanes
        ooff, xoff = ooff * lanes, xoff * lanes
        oshape = (*oshape, lanes)
        ostride = (*(s * lanes for s in ostride), 1)
        xstride = (*(s * lanes for s in xstride), 1)
        indices = [r._replace(stride=r.stride * lanes, strides=(*r.strides, 0))
                   for r in indices]
    nd = len(oshape)
    values = [nd, ooff, xoff, len(indices), int(wrap), *oshape, *ostride, *xstride]
    for r in indices:
        values += [r.offset, r.size, r.stride, r.dim, *r.strides]
    meta = constant_array(values)
    dev = out._storage.device.index or 0
    _launch(f"shape_index_gather_{w}_{i_name}", n,
            [_base(out), _base(x), _base(idx), np.int64(n), errors.record(dev),
             np.int64(_SITES[op_name].id), meta])
    errors.launched(dev)


def _index_dtype(index: Tensor) -> tuple[Tensor, D.dtype]:
    """``index`` in a dtype the gather kernel reads (int8/int16/uint8 widened to int64)."""
    if index._dtype in _INDEX:
        return index, index._dtype
    return index.to(D.int64), D.int64


@CUDA.register("index_select")
def index_select(out: Tensor, x: Tensor, dim: int, index: Tensor) -> None:
    index, idt = _index_dtype(index)
    xshape, xstride = _shape1(x)
    oshape, ostride = _shape1(out)
    istep = index._stride[0] if index._shape else 0
    xs = list(xstride)
    xs[dim] = 0
    r = _Index(index._offset, xshape[dim], xstride[dim],
               tuple(istep if k == dim else 0 for k in range(len(oshape))), dim)
    _gather(out, oshape, ostride, x, xs, index, idt, [r], False, "index_select")


@CUDA.register("take")
def take(out: Tensor, x: Tensor, index: Tensor) -> None:
    """Flat take; indices lie in [-numel, numel) and negative ones count from the end."""
    if not x.is_contiguous():
        x = contiguous_copy(x)
    index, idt = _index_dtype(index)
    oshape, ostride = _shape1(out)
    _, istride = _shape1(index)
    r = _Index(index._offset, x.numel(), 1, tuple(istride), 0)
    _gather(out, oshape, ostride, x, [0] * len(oshape), index, idt, [r], True, "take")


@CUDA.register("gather")
def gather(out: Tensor, x: Tensor, dim: int, index: Tensor) -> None:
    index, idt = _index_dtype(index)
    xshape, xstride = _shape1(x)
    oshape, ostride = _shape1(out)
    _, istride = _shape1(index)
    xs = list(xstride)
    xs[dim] = 0
    r = _Index(index._offset, xshape[dim], xstride[dim], tuple(istride), dim)
    _gather(out, oshape, ostride, x, xs, index, idt, [r], False, "gather")


def _index_buffer(tensors: list[Tensor], bshape: tuple[int, ...]
                  ) -> tuple[Tensor, D.dtype, list[int], list[list[int]]]:
    """One buffer holding every index tensor: (a tensor on the buffer's storage, which the
    caller keeps alive until the launch; dtype; per-tensor element offsets; per-tensor strides
    over ``bshape``). Tensors of one readable dtype sharing a storage (a
    single index, or the columns of a mask's nonzero) are used in place; others are copied
    into a stacked int64 buffer."""
    first = tensors[0]
    if first._dtype in _INDEX and all(t._dtype is first._dtype
                                      and t._storage is first._storage for t in tensors):
        return (first, first._dtype, [t._offset for t in tensors],
                [list(broadcast_strides(bshape, t._shape, t._stride)) for t in tensors])
    nb = math.prod(bshape)
    stacked = empty((len(tensors),) + bshape, D.int64, first.device)
    inner = contiguous_strides(bshape)
    for k, t in enumerate(tensors):
        if t._dtype is not D.int64:
            t = t.to(D.int64)
        strides = list(broadcast_strides(bshape, t._shape, t._stride))
        _remap(stacked, k * nb, t, t._offset, _identity_dims(bshape, inner, strides),
               op_name="_index")
    return (stacked, D.int64, [k * nb for k in range(len(tensors))],
            [list(inner) for _ in tensors])


@CUDA.register("_index")
def index(base: Tensor, adv: list[Any]) -> Tensor:
    """NumPy advanced indexing of ``base`` by the index tensors in ``adv`` (None: a full
    slice): broadcast index dims replace the indexed dims when those are adjacent, and lead
    the result otherwise. Negative indices count from the end."""
    positions = [d for d, a in enumerate(adv) if a is not None]
    tensors: list[Tensor] = [adv[d] for d in positions]
    bshape = tuple(broadcast_shapes(*(t._shape for t in tensors)))
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    rest = [d for d in range(base.dim()) if d not in positions]
    # Each output dim: ("slice", base dim) or ("index", broadcast dim).
    slots: list[tuple[str, int]]
    if adjacent:
        p = positions[0]
        slots = ([("slice", d) for d in rest if d < p] + [("index", j) for j in range(len(bshape))]
                 + [("slice", d) for d in rest if d > p])
    else:
        slots = [("index", j) for j in range(len(bshape))] + [("slice", d) for d in rest]
    oshape = tuple(base._shape[v] if kind == "slice" else bshape[v] for kind, v in slots)
    out = empty(oshape, base._dtype, base.device)
    if out.numel() == 0:
        return out
    holder, idt, offsets, bstrides = _index_buffer(tensors, bshape)
    xstride = [base._stride[v] if kind == "slice" else 0 for kind, v in slots]
    indices = [_Index(off, base._shape[d], base._stride[d],
                      tuple(bs[v] if kind == "index" else 0 for kind, v in slots), d)
               for d, off, bs in zip(positions, offsets, bstrides, strict=True)]
    _gather(out, oshape, out._stride, base, xstride, holder, idt, indices, True, "_index")
    return out


# ---- repeat_interleave --------------------------------------------------------------------------
@CUDA.register("repeat_interleave")
def repeat_interleave(x: Tensor, repeats: Tensor, dim: int) -> Tensor:
    """Slice ``s`` of ``x`` along ``dim`` repeated ``repeats[s]`` times. The output size is the
    repeats' total, computed on the device and read back (it sizes the result)."""
    repeats, rdt = _index_dtype(repeats)
    nrep = repeats.numel()
    xshape, xstride = _shape1(x)
    cum = empty((nrep,), D.int64, x.device)
    res = DeviceArray([NO_ERROR, 0])
    if nrep:
        rstride = repeats._stride[0] if repeats._shape else 0
        launch(SOURCE, f"shape_repeats_scan_{_INDEX[rdt][0]}", 1, SCAN_THREADS,
               [DevicePtr(int(_base(repeats)) + repeats._offset * rdt.itemsize),
                np.int64(rstride), cum, np.int64(nrep), res])
    bad, total = (int(v) for v in _read_int64(res, 2))
    if bad != NO_ERROR:
        raise RuntimeError("repeats can not be negative")
    oshape = xshape[:dim] + (total,) + xshape[dim + 1:]
    out = empty(oshape if x._shape else (total,), x._dtype, x.device)
    n = out.numel()
    if n:
        w, _, lanes = _word(x._dtype, "repeat_interleave")
        xoff = x._offset
        if lanes > 1:
            n *= lanes
            xoff *= lanes
            oshape, xstride = (*oshape, lanes), (*(s * lanes for s in xstride), 1)
        meta = constant_array([len(oshape), xoff, dim, *oshape, *xstride])
        _launch(f"shape_repeat_interleave_{w}", n,
                [_base(out), _base(x), cum, np.int64(nrep), np.int64(n), meta])
    return out

"""The CUDA backend's sorting, searching and data-dependent-size kernels (kernels/cuda/sort.cu).

Same names and signatures as the CPU kernels in kernels/cpu/sort.py. Sorting is a stable sort
of 64-bit order keys along a dim (a shared-memory bitonic sort of tiles, then global merge
passes), so sort/argsort/topk/kthvalue return the CPU backend's stable indices. nonzero,
masked_select and unique scan 0/1 flags on the device and read back one integer, the output
size, as PyTorch does; nothing else returns to the host. Strided inputs and outputs are walked
through small shape/stride arrays (dims permuted so the sorted dim is innermost) instead of
being copied.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.registry import CUDA

from ..device import (
    CudaSource,
    DeviceArray,
    constant_array,
    grid_for,
    launch,
    ptr,
    read_back,
)
from ..dtypes import FLOAT_DTYPES, REAL_DTYPES, short_name, variants
from .linalg import materialize

SRC = CudaSource("sort.cu")
BLOCK = 256
SCAN_BLOCK = 256  # GT_SCAN_BLOCK in sort.cu
SCAN_CHUNK = 256 * 8  # GT_SCAN_CHUNK in sort.cu
MAX_TILE = 1024  # elements one block sorts in shared memory (2 per thread)
MAX_TILE_GRID = 4096
INT_DTYPES = (D.uint8, D.int8, D.int16, D.int32, D.int64)
# Raw element words: values are copied bit for bit (complex128 as two 8-byte words).
WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
_WV = [{"w": str(k), "W": v} for k, v in WORDS.items()]
_ALL = variants(REAL_DTYPES)
_U64 = "unsigned long long"


def _declare() -> None:
    inst = SRC.instantiate
    inst("sort_keys_{s}", f"const {{T}}* x, const long long* xmeta, {_U64}* keys, "
         "long long total, int descending",
         "gt_sort_keys<{T}>(x, xmeta, keys, total, descending)", _ALL)
    inst("sort_write_w{w}", "const {W}* x, const long long* xmeta, const int* idx, long long n, "
         "long long start, long long count, long long rows, {W}* vals, const long long* vmeta, "
         "long long* inds, const long long* imeta",
         "gt_sort_write<{W}>(x, xmeta, idx, n, start, count, rows, vals, vmeta, inds, imeta)",
         _WV)
    inst("nonzero_flags_{s}", "const {T}* x, const long long* xmeta, long long total, int comps, "
         "int* flags", "gt_nonzero_flags<{T}>(x, xmeta, total, comps, flags)", _ALL)
    inst("select_write_w{w}", "const {W}* x, const long long* xmeta, const int* flags, "
         "const long long* pos, long long total, int comps, {W}* out",
         "gt_select_write<{W}>(x, xmeta, flags, pos, total, comps, out)", _WV)
    inst("unique_values_w{w}", "const {W}* x, const long long* xmeta, const int* order, "
         "const long long* first, long long groups, long long pre, long long post, int comps, "
         "{W}* out", "gt_unique_values<{W}>(x, xmeta, order, first, groups, pre, post, comps, "
         "out)", _WV)
    for mode, rt, ot in (("i", "long long", "long long"), ("f", "float", "double"),
                         ("d", "double", "double")):
        inst("stage_{s}_" + mode, f"const {{T}}* x, const long long* xmeta, "
             f"const long long* gather, long long row_len, long long total, {ot}* out",
             f"gt_stage<{{T}}, {rt}, {ot}>(x, xmeta, gather, row_len, total, out)", _ALL)
    inst("searchsorted_{c}_{o}", "const {C}* bnd, long long n, int per_row, const {C}* vals, "
         "long long m, long long total, int right, {O}* out, const long long* ometa",
         "gt_searchsorted<{C}, {O}>(bnd, n, per_row, vals, m, total, right, out, ometa)",
         [{"c": c, "C": ct, "o": o, "O": ot} for c, ct in (("i", "long long"), ("d", "double"))
          for o, ot in (("i32", "int"), ("i64", "long long"))])
    inst("bincount_count_{s}", f"const {{T}}* x, const long long* xmeta, long long n, "
         f"long long bins, {_U64}* out", "gt_bincount_count<{T}>(x, xmeta, n, bins, out)",
         variants(INT_DTYPES))
    inst("bincount_weighted_{s}_{o}", f"const {_U64}* keys, const int* idx, long long n, "
         f"const {{T}}* w, const long long* wmeta, long long bins, {_U64} flip, {{O}}* out",
         "gt_bincount_weighted<{T}, {O}>(keys, idx, n, w, wmeta, bins, flip, out)",
         [dict(v, o=o, O=ot) for v in _ALL for o, ot in (("f32", "float"), ("f64", "double"))])
    inst("histc_count_{s}", f"const {{T}}* x, const long long* xmeta, long long n, "
         f"long long bins, double lo, double hi, {_U64}* counts",
         "gt_histc_count<{T}, {A}>(x, xmeta, n, bins, lo, hi, counts)",
         variants(FLOAT_DTYPES))
    inst("counts_store_{s}", f"const {_U64}* counts, long long n, {{T}}* out",
         "gt_counts_store<{T}>(counts, n, out)", variants(FLOAT_DTYPES))


    # dtype-independent kernels: one wrapper each
    for name, params, call in (
        ("sort_tile", f"const {_U64}* keys_in, const int* idx_in, {_U64}* keys_out, "
         "int* idx_out, long long n, long long total, int tile",
         "gt_tile_sort(keys_in, idx_in, keys_out, idx_out, n, total, tile)"),
        ("sort_merge", f"const {_U64}* keys_in, const int* idx_in, {_U64}* keys_out, "
         "int* idx_out, long long n, long long total, long long width",
         "gt_merge_pass(keys_in, idx_in, keys_out, idx_out, n, total, width)"),
        ("sort_row_merge", f"const {_U64}* K, long long m, const int* in, int* out, long long n, "
         "long long width", "gt_row_merge_pass(K, m, in, out, n, width)"),
        ("sort_iota", "int* out, long long n", "gt_iota(out, n)"),
        ("scan_reduce", "const int* flags, long long n, long long* sums",
         "gt_scan_reduce(flags, n, sums)"),
        ("scan_sums", "long long* sums, long long nchunks, long long* total",
         "gt_scan_sums(sums, nchunks, total)"),
        ("scan_apply", "const int* flags, long long n, const long long* sums, long long* out",
         "gt_scan_apply(flags, n, sums, out)"),
        ("nonzero_write", "const int* flags, const long long* pos, long long total, "
         "const long long* shape, int nd, long long* out",
         "gt_nonzero_write(flags, pos, total, shape, nd, out)"),
        ("mask_flags", "const unsigned char* mask, const long long* mmeta, long long total, "
         "int* flags", "gt_mask_flags(mask, mmeta, total, flags)"),
        ("unique_flags", f"const {_U64}* K, long long m, const int* order, long long n, "
         "int is_float, int* flags", "gt_unique_flags(K, m, order, n, is_float, flags)"),
        ("unique_groups", "const int* flags, const long long* pos, const int* order, "
         "long long n, long long* inverse, long long* first",
         "gt_unique_groups(flags, pos, order, n, inverse, first)"),
        ("unique_counts", "const long long* first, long long groups, long long n, "
         "long long* counts", "gt_unique_counts(first, groups, n, counts)"),
        ("zero_u64", f"{_U64}* out, long long n", "gt_zero_u64(out, n)"),
    ):
        inst(name, params, call, [{}])


_declare()


# -- helpers ---------------------------------------------------------------------------------
def _i64(v: int) -> np.int64:
    return np.int64(v)


def _i32(v: int) -> np.int32:
    return np.int32(v)


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _dims(t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides, with a 0-d tensor seen as one element along dim 0."""
    return (t._shape, t._stride) if t._shape else ((1,), (1,))


def _contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _meta(t: Tensor, perm: Sequence[int] | None = None) -> DeviceArray | None:
    """{ndim, shape, strides} of ``t`` with its dims in ``perm`` order; None when that walk is
    contiguous (the kernels then index flat)."""
    shape, strides = _dims(t)
    if perm is not None:
        shape = tuple(shape[k] for k in perm)
        strides = tuple(strides[k] for k in perm)
    if _contiguous(shape, strides):
        return None
    return constant_array([len(shape), *shape, *strides])


def _scratch(n: int, dtype: D.dtype, dev: Any) -> Tensor:
    return empty((max(int(n), 1),), dtype, dev)


def _words(dt: D.dtype) -> tuple[str, int]:
    """Raw word size name and words per element for bitwise copies."""
    size = dt.itemsize
    return (str(size), 1) if size in WORDS else ("8", size // 8)


def _short(dt: D.dtype, op_name: str) -> str:
    return short_name(dt, op_name, REAL_DTYPES)


def _read_int(t: Tensor) -> int:
    """One int64 back from the device: the size of a data-dependent output."""
    return int(read_back(ptr(t))[0])


# -- device building blocks --------------------------------------------------------------------
def _keys(x: Tensor, perm: Sequence[int] | None, descending: bool) -> tuple[Tensor, Any]:
    """Order keys of ``x`` walked in ``perm`` order (and the walk's meta, kept alive)."""
    total = x.numel()
    meta = _meta(x, perm)
    keys = _scratch(total, D.int64, x.device)
    launch(SRC, f"sort_keys_{_short(x.dtype, 'sort')}", grid_for(total), BLOCK,
           [x, meta, keys, _i64(total), _i32(int(descending))])
    return keys, meta


def _pair_sort(keys: Tensor, n: int, total: int) -> tuple[Tensor, Tensor]:
    """Stable sort of each length-``n`` row of ``keys``: (sorted keys, positions in the row)."""
    dev = keys.device
    rows = total // n
    tile = min(MAX_TILE, max(64, _pow2(n), _pow2(min(total, 256))))
    packed = n <= tile
    ntiles = -(-rows // (tile // n)) if packed else rows * -(-n // tile)
    ka, ia = _scratch(total, D.int64, dev), _scratch(total, D.int32, dev)
    launch(SRC, "sort_tile", min(ntiles, MAX_TILE_GRID), tile // 2,
           [keys, None, ka, ia, _i64(n), _i64(total), _i32(tile)], shared_bytes=tile * 16)
    if packed:
        return ka, ia
    kb, ib = _scratch(total, D.int64, dev), _scratch(total, D.int32, dev)
    width = tile
    while width < n:
        launch(SRC, "sort_merge", grid_for(total), BLOCK,
               [ka, ia, kb, ib, _i64(n), _i64(total), _i64(width)])
        ka, ia, kb, ib = kb, ib, ka, ia
        width *= 2
    return ka, ia


def _scan(flags: Tensor, n: int) -> tuple[Tensor, int]:
    """Exclusive scan of ``n`` int32 0/1 flags and their total (read back to the host)."""
    dev = flags.device
    nchunks = -(-n // SCAN_CHUNK)
    sums, total, pos = _scratch(nchunks, D.int64, dev), _scratch(1, D.int64, dev), \
        _scratch(n, D.int64, dev)
    grid = min(nchunks, 1024)
    launch(SRC, "scan_reduce", grid, SCAN_BLOCK, [flags, _i64(n), sums])
    launch(SRC, "scan_sums", 1, SCAN_BLOCK, [sums, _i64(nchunks), total])
    launch(SRC, "scan_apply", grid, SCAN_BLOCK, [flags, _i64(n), sums, pos])
    return pos, _read_int(total)


def _iota(n: int, dev: Any) -> Tensor:
    out = _scratch(n, D.int32, dev)
    launch(SRC, "sort_iota", grid_for(n), BLOCK, [out, _i64(n)])
    return out


# -- sorting -----------------------------------------------------------------------------------
def _sorted_select(values: Tensor, indices: Tensor, x: Tensor, dim: int, descending: bool,
                   start: int, count: int) -> None:
    """Sort ``x`` stably along ``dim``; positions [start, start + count) of each sorted row go to
    ``values`` / ``indices`` (which have ``count`` along ``dim``)."""
    shape, _ = _dims(x)
    nd = len(shape)
    dim = dim if x._shape else 0
    perm = [k for k in range(nd) if k != dim] + [dim]
    n, total = shape[dim], x.numel()
    keys, xmeta = _keys(x, perm, descending)
    _, idx = _pair_sort(keys, n, total)
    w, _comps = _words(x.dtype)
    launch(SRC, f"sort_write_w{w}", grid_for(total // n * count), BLOCK,
           [x, xmeta, idx, _i64(n), _i64(start), _i64(count), _i64(total // n), values,
            _meta(values, perm), indices, _meta(indices, perm)])


@CUDA.register("sort")
def sort(values: Tensor, indices: Tensor, x: Tensor, dim: int, descending: bool) -> None:
    n = _dims(x)[0][dim if x._shape else 0]
    _sorted_select(values, indices, x, dim, descending, 0, n)


@CUDA.register("topk")
def topk(values: Tensor, indices: Tensor, x: Tensor, dim: int, k: int, largest: bool) -> None:
    _sorted_select(values, indices, x, dim, largest, 0, k)


@CUDA.register("kthvalue")
def kthvalue(values: Tensor, indices: Tensor, x: Tensor, dim: int, k: int) -> None:
    """Writes into outputs that keep ``dim`` with size 1."""
    _sorted_select(values, indices, x, dim, False, k - 1, 1)


# -- unique ------------------------------------------------------------------------------------
def _row_sort(keys: Tensor, n: int, m: int) -> Tensor:
    """Stable lexicographic order of the n rows of the (n, m) key matrix."""
    a, b = _iota(n, keys.device), _scratch(n, D.int32, keys.device)
    width = 1
    while width < n:
        launch(SRC, "sort_row_merge", grid_for(n), BLOCK,
               [keys, _i64(m), a, b, _i64(n), _i64(width)])
        a, b = b, a
        width *= 2
    return a


@CUDA.register("unique")
def unique(x: Tensor, sort_first: bool, dim: int | None) -> tuple[Tensor, Tensor, Tensor]:
    """Unique elements (dim None) or slices along ``dim``, sorted or consecutive.

    NaNs compare unequal, so each stays its own entry, as in PyTorch.
    """
    dev, shape = x.device, x._shape
    if dim is None:
        n, pre, post, perm = x.numel(), 1, 1, None
        inv_shape: tuple[int, ...] = shape
    else:
        n, pre, post = shape[dim], math.prod(shape[:dim]), math.prod(shape[dim + 1:])
        perm = [dim] + [k for k in range(len(shape)) if k != dim]
        inv_shape = (n,)
    m = pre * post
    _short(x.dtype, "unique")

    def values_of(groups: int) -> Tensor:
        vshape = (groups,) if dim is None else shape[:dim] + (groups,) + shape[dim + 1:]
        return empty(vshape, x.dtype, dev)

    if n == 0:
        return values_of(0), empty(inv_shape, D.int64, dev), empty((0,), D.int64, dev)
    keys, xmeta = _keys(x, perm, False)
    if not sort_first:
        order = _iota(n, dev)
    elif m == 1:
        order = _pair_sort(keys, n, n)[1]
    else:
        order = _row_sort(keys, n, m)
    flags = _scratch(n, D.int32, dev)
    launch(SRC, "unique_flags", grid_for(n), BLOCK,
           [keys, _i64(m), order, _i64(n), _i32(int(x.dtype in FLOAT_DTYPES)), flags])
    pos, groups = _scan(flags, n)
    inverse = empty(inv_shape, D.int64, dev)
    first, counts = _scratch(groups, D.int64, dev), empty((groups,), D.int64, dev)
    launch(SRC, "unique_groups", grid_for(n), BLOCK, [flags, pos, order, _i64(n), inverse, first])
    launch(SRC, "unique_counts", grid_for(groups), BLOCK,
           [first, _i64(groups), _i64(n), counts])
    values = values_of(groups)
    w, comps = _words(x.dtype)
    launch(SRC, f"unique_values_w{w}", grid_for(groups * m), BLOCK,
           [x, xmeta, order, first, _i64(groups), _i64(pre), _i64(post), _i32(comps), values])
    return values, inverse, counts


# -- data-dependent sizes ------------------------------------------------------------------------
def _flag_kernel(dt: D.dtype) -> tuple[str, int]:
    """nonzero's flag kernel for ``dt`` (complex: its real dtype, two components)."""
    if dt is D.complex64:
        return "nonzero_flags_f32", 2
    if dt is D.complex128:
        return "nonzero_flags_f64", 2
    return f"nonzero_flags_{_short(dt, 'nonzero')}", 1


@CUDA.register("nonzero")
def nonzero(x: Tensor) -> Tensor:
    total, nd, dev = x.numel(), x.dim(), x.device
    if total == 0:
        return empty((0, nd), D.int64, dev)
    name, comps = _flag_kernel(x.dtype)
    flags = _scratch(total, D.int32, dev)
    launch(SRC, name, grid_for(total), BLOCK, [x, _meta(x), _i64(total), _i32(comps), flags])
    pos, count = _scan(flags, total)
    out = empty((count, nd), D.int64, dev)
    if count and nd:
        launch(SRC, "nonzero_write", grid_for(total), BLOCK,
               [flags, pos, _i64(total), constant_array(x._shape), _i32(nd), out])
    return out


@CUDA.register("masked_select")
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """``x`` and ``mask`` arrive broadcast to one shape."""
    total, dev = x.numel(), x.device
    if total == 0:
        return empty((0,), x.dtype, dev)
    if mask.dtype.itemsize != 1:
        raise TypeError(f"masked_select on CUDA expects a bool mask, got {mask.dtype}")
    flags = _scratch(total, D.int32, dev)
    launch(SRC, "mask_flags", grid_for(total), BLOCK, [mask, _meta(mask), _i64(total), flags])
    pos, count = _scan(flags, total)
    out = empty((count,), x.dtype, dev)
    if count:
        w, comps = _words(x.dtype)
        launch(SRC, f"select_write_w{w}", grid_for(total), BLOCK,
               [x, _meta(x), flags, pos, _i64(total), _i32(comps), out])
    return out


# -- searching and counting ----------------------------------------------------------------------
def _stage(t: Tensor, mode: str, gather: Tensor | None, row_len: int) -> Tensor:
    """``t`` in logical order as a contiguous int64 (mode "i") or float64 buffer, rounded to
    the compute dtype's precision ("f": float32, "d": float64) first."""
    total = t.numel()
    out = _scratch(total, D.int64 if mode == "i" else D.float64, t.device)
    if total:
        launch(SRC, f"stage_{_short(t.dtype, 'searchsorted')}_{mode}", grid_for(total), BLOCK,
               [t, _meta(t), gather, _i64(row_len), _i64(total), out])
    return out


@CUDA.register("searchsorted")
def searchsorted(out: Tensor, boundaries: Tensor, values: Tensor, right: bool,
                 sorter: Tensor | None, compute: D.dtype) -> None:
    if compute in (D.float16, D.bfloat16, D.float32):
        mode = "f"  # the CPU backend compares 16-bit floats through exact float32 copies
    elif compute is D.float64:
        mode = "d"
    else:
        _short(compute, "searchsorted")
        mode = "i"
        if values._dtype is not compute and values.numel():
            # a value ranked below the boundaries (0-d, a number) takes their dtype first, as
            # in PyTorch: -1 searched in uint8 boundaries is 255 (the boundaries never narrow)
            values = materialize(values, compute)
    n = boundaries._shape[-1]
    gather = None if sorter is None else _stage(sorter, "i", None, n)
    bnd = _stage(boundaries, mode, gather, n)
    vals = _stage(values, mode, None, 1)
    total = values.numel()
    m = values._shape[-1] if values._shape else 1
    o = "i32" if out.dtype is D.int32 else "i64"
    launch(SRC, f"searchsorted_{'i' if mode == 'i' else 'd'}_{o}", grid_for(total), BLOCK,
           [bnd, _i64(n), _i32(int(boundaries.dim() > 1)), vals, _i64(m), _i64(total),
            _i32(int(right)), out, _meta(out)])


@CUDA.register("bincount")
def bincount(out: Tensor, x: Tensor, weights: Tensor | None) -> None:
    bins, n = out.numel(), x.numel()
    if weights is None:
        launch(SRC, "zero_u64", grid_for(bins), BLOCK, [out, _i64(bins)])
        if n:
            launch(SRC, f"bincount_count_{_short(x.dtype, 'bincount')}", grid_for(n),
                   BLOCK, [x, _meta(x), _i64(n), _i64(bins), out])
        return
    # Weighted: stable sort by bin, then each bin sums its weights in index order (exact match
    # with the CPU backend; no float atomics).
    keys: Tensor | None = None
    idx: Tensor | None = None
    if n:
        keys, idx = _pair_sort(_keys(x, None, False)[0], n, n)
    o = "f32" if out.dtype is D.float32 else "f64"
    launch(SRC, f"bincount_weighted_{_short(weights.dtype, 'bincount')}_{o}", grid_for(bins),
           BLOCK, [keys, idx, _i64(n), weights, _meta(weights), _i64(bins),
                   np.uint64(1 << 63 if x.dtype.is_signed else 0), out])


@CUDA.register("histc")
def histc(out: Tensor, x: Tensor, bins: int, lo: float, hi: float) -> None:
    """Bin b holds lo + b*w <= v < lo + (b+1)*w (v == hi goes to the last bin), computed in the
    input's precision like PyTorch; values outside [lo, hi] and NaN are ignored."""
    s = _short(x.dtype, "histc")
    n, dev = x.numel(), x.device
    counts = _scratch(bins, D.int64, dev)
    launch(SRC, "zero_u64", grid_for(bins), BLOCK, [counts, _i64(bins)])
    if n:
        launch(SRC, f"histc_count_{s}", grid_for(n), BLOCK,
               [x, _meta(x), _i64(n), _i64(bins), np.float64(lo), np.float64(hi), counts])
    target = out if out.is_contiguous() else empty((bins,), out.dtype, dev)
    launch(SRC, f"counts_store_{_short(out.dtype, 'histc')}", grid_for(bins), BLOCK,
           [counts, _i64(bins), target])
    if target is not out:
        out.copy_(target)


"""The CUDA backend's scatter / in-place indexing kernels (kernels/cuda/scatter.cu).

Same names and calling conventions as the CPU kernels (kernels/cpu/scatter.py):
scatter, scatter_reduce, index_add, index_copy, index_fill, masked_fill, masked_scatter and
_index_put. The first five are one strided walk over index positions, specialised by a mode:

* reductions (sum, prod, amax, amin, and index_add) apply atomically, so duplicate indices
  accumulate; "mean" also counts hits per element and divides afterwards;
* plain assignment from a tensor (scatter, index_copy, index_put) is deterministic: a claim
  pass records the last position (C order, as the CPU backend applies them) writing each
  target and a write pass lets only that one store. PyTorch leaves duplicates undefined on CUDA;
  we give the CPU backend's answer;
* writes of one value (index_fill, scatter of a scalar, identities before a reduction) are plain
  stores: colliding threads store the same bits.

Frontends validate indices before dispatch, but the kernels check every index again on the
device (no out-of-range access, ever): a bad one goes to the device's error record and becomes
the CPU path's IndexError, right after the launch or at the next synchronising call
(kernels/cuda/errors.py); no launch waits for the device. masked_scatter ranks masked positions
with a three-pass prefix sum (per-block counts, a scan of those, and a per-block rescan that
copies).

Complex dtypes are covered: sums are two real atomicAdds per element, prod/amax/amin (amax/amin
ordered lexicographically, as the CPU backend's NumPy ufuncs) apply under per-element spin
locks, and complex scalars travel as two real kernel parameters.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._determinism import alert_not_deterministic
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
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
)
from ..dtypes import ACC_CTYPES, ALL_DTYPES, COMPLEX_DTYPES, short_name, variants

SOURCE = CudaSource("scatter.cu")


def _scalar_variants() -> list[dict[str, str]]:
    """Placeholder maps with ``{VALUE_P}``/``{VALUE_C}`` and ``{ALPHA_P}``/``{ALPHA_C}``: a
    scalar's kernel parameters and the C expression rebuilding it ({A}: one parameter; complex:
    two real ones, as the elementwise kernels pass complex scalars)."""
    out = []
    for v in variants(ALL_DTYPES):
        for name in ("value", "alpha"):
            key = name.upper()
            if v["T"].startswith("gt::complex"):
                v[f"{key}_P"] = f"{v['R']} {name}_re, {v['R']} {name}_im"
                v[f"{key}_C"] = f"{v['A']}({name}_re, {name}_im)"
            else:
                v[f"{key}_P"] = f"{v['A']} {name}"
                v[f"{key}_C"] = name
        out.append(v)
    return out


_VARIANTS = _scalar_variants()
SOURCE.instantiate(
    "scatter_walk_{s}",
    "{T}* self, const void* index, int isz, const {T}* src, {VALUE_P}, {ALPHA_P}, "
    "int use_alpha, const long long* meta, long long n, int mode, int op, int* scratch, "
    "long long* err, long long site",
    "gtsc::walk<{T}, {A}>(self, index, isz, src, {VALUE_C}, {ALPHA_C}, use_alpha, meta, n, "
    "mode, op, scratch, err, site)", _VARIANTS)
SOURCE.instantiate(
    "scatter_mean_{s}",
    "{T}* self, const int* counts, int include_self, const long long* meta, long long n",
    "gtsc::mean_finish<{T}>(self, counts, include_self, meta, n)", _VARIANTS)
SOURCE.instantiate(
    "index_put_{s}",
    "{T}* base, const {T}* value_ptr, {VALUE_P}, const long long* meta, long long n, "
    "int mode, int* scratch, long long* err, long long site, const void* i0, const void* i1, "
    "const void* i2, const void* i3, const void* i4, const void* i5, const void* i6, "
    "const void* i7",
    "const void* const iptrs[8] = {{i0, i1, i2, i3, i4, i5, i6, i7}}; "
    "gtsc::index_put<{T}, {A}>(base, value_ptr, {VALUE_C}, meta, iptrs, n, mode, scratch, err, "
    "site)",
    _VARIANTS)
SOURCE.instantiate(
    "masked_fill_{s}",
    "{T}* self, const bool* mask, {VALUE_P}, const long long* meta, long long n",
    "gtsc::masked_fill<{T}, {A}>(self, mask, {VALUE_C}, meta, n)", _VARIANTS)
SOURCE.instantiate(
    "masked_scatter_{s}",
    "{T}* self, const bool* mask, const {T}* src, const long long* meta, "
    "const long long* smeta, long long n, long long chunk, const long long* offsets, "
    "long long src_n, long long* err, long long site",
    "gtsc::masked_scatter<{T}>(self, mask, src, meta, smeta, n, chunk, offsets, src_n, err, "
    "site)",
    _VARIANTS)
SOURCE.instantiate("scatter_fill_i32", "int* p, int v, long long n", "gtsc::fill_i32(p, v, n)",
                   [{}])
SOURCE.instantiate("scatter_mask_count", "const bool* mask, const long long* meta, long long n, "
                   "long long chunk, long long* block_counts",
                   "gtsc::mask_count(mask, meta, n, chunk, block_counts)", [{}])
SOURCE.instantiate("scatter_scan_counts", "long long* counts, long long nb",
                   "gtsc::scan_counts(counts, nb)", [{}])

# Codes shared with scatter.cu.
_OPS = {None: 0, "sum": 1, "mean": 1, "prod": 2, "amax": 3, "amin": 4}
_REDUCE, _CLAIM, _WRITE, _COUNT, _STORE = 0, 1, 2, 3, 4
MAX_INDEX_DIMS = 16  # broadcast index dims an index_put handles (GT_SC_MAX_DIMS)
MAX_INDICES = 8  # index tensors an index_put takes (GT_SC_MAX_INDICES)
_A_NP = {"float": np.float32, "double": np.float64, "long long": np.int64}
_LOCKED_OPS = (_OPS["prod"], _OPS["amax"], _OPS["amin"])  # complex: under a spin lock


# -- helpers -----------------------------------------------------------------------------------
def _i32(x: int) -> np.int32:
    return np.int32(x)


def _i64(x: int) -> np.int64:
    return np.int64(x)


def _scalar(value: Any, dt: D.dtype) -> list[Any]:
    """``value`` cast to ``dt`` (as the CPU backend casts it), as the kernel arguments of the
    accumulator scalar ({A}: float for 16-bit floats and float32, double, int64 for integers
    and bool; a complex value as its real and imaginary parts)."""
    if isinstance(value, Tensor):
        value = value.item()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = np.asarray(value).astype(dt.np_dtype)
        if dt in COMPLEX_DTYPES:
            part = v.real.dtype.type
            return [part(v.real), part(v.imag)]
        return [_A_NP[ACC_CTYPES[dt]](v)]


def _dims(t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and element strides, a 0-d tensor seen as one element along dim 0."""
    return (t._shape, t._stride) if t._shape else ((1,), (1,))


def _contiguous_strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def _on(t: Tensor, device: Any) -> Tensor:
    """``t`` on the kernel's device (a 0-dim CPU tensor may join a CUDA op as a scalar)."""
    return t if t._storage.device == device else t.to(device)


def _index_operand(index: Tensor, device: Any) -> Tensor:
    index = _on(index, device)
    if index.dtype not in (D.int8, D.int16, D.int32, D.int64):
        index = index.to(D.int64)
    return index


def _scratch(n: int, fill: int, device: Any) -> Tensor:
    """An int32 device array of ``n`` elements set to ``fill`` (winner slots, hit counts)."""
    t = empty((max(n, 1),), D.int32, device)
    launch(SOURCE, "scatter_fill_i32", grid_for(n), BLOCK, [t, _i32(fill), _i64(n)])
    return t


_OUT_OF_BOUNDS = "index {value} is out of bounds for dimension {dim} with size {bound}"
# The exception types are the frontends' host checks' (PyTorch's CPU errors): the CUDA frontends
# leave the range check to these records (gputensor/_ops/shape.py device_checks_indices).
_SITES = {
    "scatter": errors.site("scatter", RuntimeError, _OUT_OF_BOUNDS),
    "scatter_reduce": errors.site("scatter_reduce", RuntimeError, _OUT_OF_BOUNDS),
    "index_add": errors.site("index_add_", IndexError, "index_add_(): " + _OUT_OF_BOUNDS),
    "index_copy": errors.site("index_copy_", IndexError, "index_copy_(): " + _OUT_OF_BOUNDS),
    "index_fill": errors.site("index_fill_", IndexError, _OUT_OF_BOUNDS),
    "index_put": errors.site("index_put_", IndexError, _OUT_OF_BOUNDS),
    "masked_scatter": errors.site("masked_scatter_", RuntimeError,
                                  "Number of elements of source < number of ones in mask"),
}


def _device_index(t: Tensor) -> int:
    return t._storage.device.index or 0


# -- the scatter walk ---------------------------------------------------------------------------
class _Walk:
    """One walk over the positions of ``shape``: target[q with q[dim] = index[q]] gets
    src[q] (or a scalar); strides are in elements, per position dim."""

    def __init__(self, target: Tensor, dim: int, index: Tensor, shape: Sequence[int],
                 index_strides: Sequence[int], src: Tensor | None,
                 src_strides: Sequence[int] | None, *, wrap: bool = False,
                 slot_is_index: bool = False, op: str = "scatter") -> None:
        tshape, tstrides = _dims(target)
        nd = len(shape)
        self.target, self.dim, self.index, self.src = target, dim, index, src
        self.shape, self.index_strides = tuple(shape), tuple(index_strides)
        self.size, self.site = tshape[dim], _SITES[op]
        self.n = math.prod(shape)
        flags = (1 if wrap else 0) | (2 if slot_is_index else 0)
        sst = src_strides if src_strides is not None else [0] * nd
        self.meta = constant_array([nd, dim, self.size, flags, *shape, *tstrides, *index_strides,
                                 *sst, *_contiguous_strides(tshape)])
        self.slots = self.size if slot_is_index else math.prod(tshape)
        self.sfx = short_name(target.dtype, op)
        self.dev = _device_index(target)

    def run(self, mode: int, op: int = 0, *, value: Any = 0, alpha: Any = None,
            scratch: Tensor | None = None, use_src: bool = True) -> None:
        """One launch; ``use_src=False`` writes ``value`` instead of src's elements."""
        dt = self.target.dtype
        if mode == _REDUCE and op in _LOCKED_OPS and dt in COMPLEX_DTYPES:
            scratch = _scratch(math.prod(_dims(self.target)[0]), 0, self.target.device)
        args = [self.target, self.index, _i32(self.index.dtype.itemsize),
                self.src if use_src else None,
                *_scalar(value, dt), *_scalar(1 if alpha is None else alpha, dt),
                _i32(alpha is not None), self.meta, _i64(self.n), _i32(mode), _i32(op), scratch,
                errors.record(self.dev), _i64(self.site.id)]
        launch(SOURCE, f"scatter_walk_{self.sfx}", grid_for(self.n), BLOCK, args)

    def assign(self, value: Any = 0) -> None:
        """Plain assignment; deterministic (last position wins) when values come from src."""
        if self.src is None:
            self.run(_REDUCE, 0, value=value)
            return
        winner = _scratch(self.slots, -1, self.target.device)
        self.run(_CLAIM, scratch=winner)
        self.run(_WRITE, scratch=winner)

    def check(self) -> None:
        """Raise the CPU path's IndexError for a bad index the walk met (now, or at the next
        synchronising call: kernels/cuda/errors.py)."""
        errors.launched(self.dev)


def _identity(reduce: str, dt: D.dtype) -> Any:
    """The value scattered-to positions start from when ``include_self`` is False."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    highest = reduce == "amin"
    if dt is D.bool:
        return highest
    if dt.category == D.INTEGRAL:
        info = np.iinfo(dt.np_dtype)
        return info.max if highest else info.min
    return math.inf if highest else -math.inf


def _scatter_walk(self: Tensor, dim: int, index: Tensor, src: Any, op: str) -> _Walk:
    index = _index_operand(index, self.device)
    ishape, istrides = _dims(index)
    if isinstance(src, Tensor):
        src = _on(src, self.device)
        return _Walk(self, dim, index, ishape, istrides, src, _dims(src)[1], op=op)
    return _Walk(self, dim, index, ishape, istrides, None, None, op=op)


@CUDA.register("scatter")
def scatter(self: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None) -> None:
    w = _scatter_walk(self, dim, index, src, "scatter")
    if reduce is None:
        w.assign(src)
    else:
        _alert_float_atomics(self, f"scatter_cuda (reduce={reduce!r})")
        w.run(_REDUCE, _OPS[reduce], value=0 if isinstance(src, Tensor) else src)
    w.check()


@CUDA.register("scatter_reduce")
def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                   include_self: bool) -> None:
    w = _scatter_walk(self, dim, index, src, "scatter_reduce")
    if reduce in ("sum", "mean", "prod"):  # extrema are exact in any order
        _alert_float_atomics(self, f"scatter_reduce_cuda ({reduce})")
    if not include_self:
        w.run(_REDUCE, 0, value=_identity(reduce, self.dtype), use_src=False)
    counts = None
    if reduce == "mean":
        counts = _scratch(w.slots, 0, self.device)
        w.run(_COUNT, scratch=counts)
    w.run(_REDUCE, _OPS[reduce])
    w.check()
    if counts is not None:
        shape, strides = _dims(self)
        meta = constant_array([len(shape), *shape, *strides])
        launch(SOURCE, f"scatter_mean_{w.sfx}", grid_for(w.slots), BLOCK,
               [self, counts, _i32(bool(include_self)), meta, _i64(w.slots)])


def _alert_float_atomics(t: Tensor, caller: str) -> None:
    """Float accumulation with atomics depends on thread order (gt.use_deterministic_...)."""
    if t._dtype.is_floating_point or t._dtype.is_complex:
        alert_not_deterministic(caller)


def _slice_walk(self: Tensor, dim: int, index: Tensor, source: Tensor | None,
                shape: Sequence[int], op: str, **kw: Any) -> _Walk:
    """A walk over slices: position q takes index[q[dim]] (index_add/copy/fill)."""
    index = _index_operand(index, self.device)
    nd = len(shape)
    istrides = [0] * nd
    istrides[dim] = index._stride[0] if index._shape else 0
    if source is not None:
        source = _on(source, self.device)
        return _Walk(self, dim, index, shape, istrides, source, _dims(source)[1], op=op,
                     **kw)
    return _Walk(self, dim, index, shape, istrides, None, None, op=op, **kw)


@CUDA.register("index_add")
def index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Any) -> None:
    _alert_float_atomics(self, "index_add_cuda_")
    w = _slice_walk(self, dim, index, source, _dims(source)[0], "index_add")
    # PyTorch's kernel for a self of at most one dim multiplies complex sources by alpha even
    # when it is 1 (inf's imaginary part is nan); its add kernel for more dims does not
    w.run(_REDUCE, _OPS["sum"], alpha=None if alpha == 1 and not (self.is_complex() and
                                                                 self.dim() <= 1) else alpha)
    w.check()


@CUDA.register("index_copy")
def index_copy(self: Tensor, dim: int, index: Tensor, source: Tensor) -> None:
    w = _slice_walk(self, dim, index, source, _dims(source)[0], "index_copy",
                    slot_is_index=True)
    w.assign()
    w.check()


@CUDA.register("index_fill")
def index_fill(self: Tensor, dim: int, index: Tensor, value: Any) -> None:
    """Indices lie in [-size, size); negative ones wrap, as in PyTorch."""
    shape = list(_dims(self)[0])
    shape[dim] = index.numel()
    w = _slice_walk(self, dim, index, None, shape, "index_fill", wrap=True)
    w.assign(value)
    w.check()


# -- masks ------------------------------------------------------------------------------------
def _mask_meta(self: Tensor, mask: Tensor) -> DeviceArray | None:
    """Shape, self strides and mask strides broadcast to self's shape; None when both are
    contiguous with the same shape (flat indexing)."""
    shape = self._shape
    if mask._shape == shape and self.is_contiguous() and mask.is_contiguous():
        return None
    mst = broadcast_strides(shape, mask._shape, mask._stride)
    return constant_array([len(shape), *shape, *self._stride, *mst])


@CUDA.register("masked_fill")
def masked_fill(self: Tensor, mask: Tensor, value: Any) -> None:
    n = self.numel()
    if n == 0:
        return
    mask = _on(mask, self.device)
    sfx = short_name(self.dtype, "masked_fill")
    launch(SOURCE, f"masked_fill_{sfx}", grid_for(n), BLOCK,
           [self, mask, *_scalar(value, self.dtype), _mask_meta(self, mask), _i64(n)])


@CUDA.register("masked_scatter")
def masked_scatter(self: Tensor, mask: Tensor, source: Tensor) -> None:
    n = self.numel()
    if n == 0:
        return
    dev = self.device
    mask, source = _on(mask, dev), _on(source, dev)
    sfx = short_name(self.dtype, "masked_scatter")
    meta = _mask_meta(self, mask)
    blocks = grid_for(n)
    chunk = -(-n // blocks)
    offsets = empty((blocks,), D.int64, dev)
    launch(SOURCE, "scatter_mask_count", blocks, BLOCK,
           [mask, meta, _i64(n), _i64(chunk), offsets])
    launch(SOURCE, "scatter_scan_counts", 1, BLOCK, [offsets, _i64(blocks)])
    sshape, sstrides = _dims(source)
    smeta = constant_array([len(sshape), *sshape, *sstrides])
    di = _device_index(self)
    launch(SOURCE, f"masked_scatter_{sfx}", blocks, BLOCK,
           [self, mask, source, meta, smeta, _i64(n), _i64(chunk), offsets,
            _i64(source.numel()), errors.record(di), _i64(_SITES["masked_scatter"].id)])
    errors.launched(di)


# -- advanced-index writes ----------------------------------------------------------------------
@CUDA.register("_index_put")
def index_put(base: Tensor, adv: list[Any], value: Tensor, accumulate: bool) -> None:
    """base[adv] = value (or += with ``accumulate``, duplicates summed); ``adv`` holds an index
    tensor or None per dim of base, and value broadcasts to NumPy's indexing-result shape."""
    if accumulate:
        _alert_float_atomics(base, "index_put_ with accumulate=True on CUDA")
    dev = base.device
    sfx = short_name(base.dtype, "index_put_")
    dims = [d for d, a in enumerate(adv) if a is not None]
    if not dims:  # no index tensor: a broadcast copy (or add) into base
        if accumulate:
            base.add_(value)
        else:
            base.copy_(value)
        return
    if len(dims) > MAX_INDICES:
        raise RuntimeError(f"index_put_ on CUDA: {len(dims)} index tensors; at most "
                           f"{MAX_INDICES} are supported")
    index = [_index_operand(adv[d], dev) for d in dims]
    bshape = broadcast_shapes(*(t._shape for t in index))
    nb = len(bshape)
    if nb > MAX_INDEX_DIMS:
        raise RuntimeError(f"index_put_ on CUDA: the indices broadcast to {nb} dims; at most "
                           f"{MAX_INDEX_DIMS} are supported")
    # NumPy's result layout: adjacent indexed dims are replaced in place by the broadcast
    # index dims; otherwise those go first.
    rest = [d for d in range(base.dim()) if adv[d] is None]
    bdims = [(size, 0, b) for b, size in enumerate(bshape)]
    plain = [(base._shape[d], base._stride[d], -1) for d in rest]
    if dims == list(range(dims[0], dims[-1] + 1)):
        before = [p for d, p in zip(rest, plain, strict=True) if d < dims[0]]
        rdims = before + bdims + plain[len(before):]
    else:
        rdims = bdims + plain
    rshape = tuple(r[0] for r in rdims)
    n = math.prod(rshape)
    if n == 0:
        return
    value_ptr, scalar, vst = None, 0, [0] * len(rshape)
    if value._storage.device != dev:
        if value._shape:
            raise RuntimeError(f"index_put_: value is on {value.device} but the tensor is on "
                               f"{dev}")
        scalar = value.item()  # a 0-dim CPU value: a kernel scalar (already on the host)
    else:
        if value.dtype is not base.dtype:
            value = value.to(base.dtype)
        while value.dim() > len(rshape) and value._shape[0] == 1:
            value = value.squeeze(0)  # leading unit dims drop, as in NumPy and PyTorch
        lead = len(rshape) - value.dim()
        if lead < 0 or any(v not in (1, r) for v, r in zip(value._shape, rshape[lead:],
                                                           strict=True)):
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(value._shape)} "
                               f"cannot be broadcast to indexing result of shape "
                               f"{list(rshape)}")
        vst = [0] * lead + [0 if k == 1 else s for k, s in zip(value._shape, value._stride,
                                                                  strict=True)]
        value_ptr = value
    slot_strides = _contiguous_strides([base._shape[d] for d in dims])
    meta = [len(rdims), len(dims), nb]
    for (size, st, b), v in zip(rdims, vst, strict=True):
        meta += [size, st, v, b]
    meta += list(bshape)
    istrides = [[0] * (nb - t.dim()) + [0 if k == 1 else s for k, s in
                                        zip(t._shape, t._stride, strict=True)] for t in index]
    for d, t, ss, ist in zip(dims, index, slot_strides, istrides, strict=True):
        meta += [base._shape[d], base._stride[d], t.dtype.itemsize, ss, d, *ist]
    meta_arr = constant_array(meta)
    iptrs = index + [None] * (MAX_INDICES - len(index))
    di = _device_index(base)
    nkeys = math.prod(bshape)

    def run(mode: int, count: int, scratch: Tensor | None = None) -> None:
        launch(SOURCE, f"index_put_{sfx}", grid_for(count), BLOCK,
               [base, value_ptr, *_scalar(scalar, base.dtype), meta_arr, _i64(count), _i32(mode),
                scratch, errors.record(di), _i64(_SITES["index_put"].id), *iptrs])

    if accumulate:
        run(_REDUCE, n)
    elif all(vst[k] == 0 for k, r in enumerate(rdims) if r[2] >= 0):
        run(_STORE, n)  # colliding positions store the same value
    else:
        if nkeys >= 2**31:
            raise RuntimeError("index_put_ on CUDA: more than 2**31 - 1 index positions")
        winner = _scratch(math.prod(base._shape[d] for d in dims), -1, dev)
        run(_CLAIM, nkeys, winner)
        run(_WRITE, n, winner)
    errors.launched(di)

"""The SparseCUDA backend's kernels (kernels/cuda/sparse.cu).

Same names and signatures as the SparseCPU backend's kernels (the interface every sparse
frontend in gputensor/sparse/ calls): ``_coalesce``, ``_csr_rowptr``, ``_spmm``, ``_sddmm``,
``_segment_softmax`` and ``_segment_softmax_backward``. The frontends validate indices and make
every tensor contiguous before dispatch; these launchers check dtypes, devices and shapes and
launch.

Coalescing reuses the CUDA backend's stable device sort (the dense "sort" kernel of sort.cu) on
row-major linear keys, and sort.cu's flag scan; only the number of distinct entries comes back
to the host, because it sizes the outputs. Sizes whose linear index would overflow int64 sort
the index columns lexicographically instead (sort.cu's row merge sort). Everything else stays
on the device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.registry import CUDA, SPARSE_CUDA

from ..device import (
    BLOCK,
    CudaSource,
    constant_array,
    grid_for,
    launch,
)
from ..dtypes import FLOAT_DTYPES, REAL_DTYPES, short_name, variants
from .sort import _row_sort, _scan

SRC = CudaSource("sparse.cu")
_LL = "long long"
_INT64_LIMIT = 2**63


def _declare() -> None:
    inst = SRC.instantiate
    inst("sp_coalesce_values_{s}", f"const {{T}}* values, {_LL} F, const {_LL}* perm, "
         f"const {_LL}* first, {_LL} groups, {{T}}* out",
         "gtsp::coalesce_values<{T}, {A}>(values, F, perm, first, groups, out)",
         variants(REAL_DTYPES))
    floats = variants(FLOAT_DTYPES)
    inst("sp_spmm_{s}", f"{{T}}* out, const {_LL}* rowptr, const {_LL}* cols, "
         f"const {{T}}* values, const {{T}}* dense, {{A}} alpha, {{A}} beta, {_LL} M, {_LL} N, "
         "int G", "gtsp::spmm<{T}, {A}>(out, rowptr, cols, values, dense, alpha, beta, M, N, G)",
         floats)
    inst("sp_sddmm_{s}", f"{{T}}* out, const {_LL}* rows, const {_LL}* cols, const {{T}}* a, "
         f"const {{T}}* b, {_LL} nnz, {_LL} N, int G",
         "gtsp::sddmm<{T}, {A}>(out, rows, cols, a, b, nnz, N, G)", floats)
    inst("sp_softmax_{s}", f"{{T}}* out, const {{T}}* values, const {_LL}* order, "
         f"const {_LL}* segptr, {_LL} nseg, {_LL} F, int G, int log_softmax",
         "gtsp::segment_softmax<{T}, {A}>(out, values, order, segptr, nseg, F, G, log_softmax)",
         floats)
    inst("sp_softmax_backward_{s}", f"{{T}}* grad_in, const {{T}}* grad_out, const {{T}}* out, "
         f"const {_LL}* order, const {_LL}* segptr, {_LL} nseg, {_LL} F, int G, "
         "int log_softmax", "gtsp::segment_softmax_backward<{T}, {A}>(grad_in, grad_out, out, "
         "order, segptr, nseg, F, G, log_softmax)", floats)
    for name, params, call in (
        ("sp_coalesce_keys", f"const {_LL}* indices, {_LL} nnz, int S, const {_LL}* strides, "
         f"{_LL}* keys", "gtsp::coalesce_keys(indices, nnz, S, strides, keys)"),
        ("sp_coalesce_flags", f"const {_LL}* keys, const {_LL}* indices, {_LL} nnz, int S, "
         f"const {_LL}* perm, int* flags",
         "gtsp::coalesce_flags(keys, indices, nnz, S, perm, flags)"),
        ("sp_coalesce_heads", f"const int* flags, const {_LL}* pos, {_LL} nnz, {_LL}* first",
         "gtsp::coalesce_heads(flags, pos, nnz, first)"),
        ("sp_coalesce_indices", f"const {_LL}* indices, {_LL} nnz, int S, const {_LL}* perm, "
         f"const {_LL}* first, {_LL} groups, {_LL}* out",
         "gtsp::coalesce_indices(indices, nnz, S, perm, first, groups, out)"),
        ("sp_csr_rowptr", f"const {_LL}* rows, {_LL} nnz, {_LL} nrows, {_LL}* rowptr",
         "gtsp::csr_rowptr(rows, nnz, nrows, rowptr)"),
    ):
        inst(name, params, call, [{}])


_declare()

# Scalar types of alpha / beta per value dtype (the kernels' {A}).
_SCALAR_NP = {D.float16: np.float32, D.bfloat16: np.float32, D.float32: np.float32,
              D.float64: np.float64}


# -- helpers -----------------------------------------------------------------------------------
def _i32(v: int) -> np.int32:
    return np.int32(v)


def _i64(v: int) -> np.int64:
    return np.int64(v)


def _group_width(n: int) -> int:
    """Lanes per group (G in sparse.cu): ``n`` rounded up to a power of two, in [1, 32]."""
    return min(32, 1 << max(0, int(n) - 1).bit_length())


def _p(t: Tensor | None) -> Tensor | None:
    """A kernel argument: empty tensors pass as null pointers (an empty tensor has no device
    address; the kernels never read through a pointer whose extent is zero)."""
    return t if t is not None and t.numel() else None


def _warp_grid(units: int, per_warp: int = 1) -> int:
    """Blocks for a grid-stride loop giving each warp ``per_warp`` units at a time."""
    return grid_for(-(-int(units) // per_warp) * 32)


def _check(op: str, dtype: D.dtype, allowed: Sequence[D.dtype], *tensors: Tensor) -> str:
    """The kernel suffix for ``dtype``; clear errors for unsupported dtypes, non-CUDA or
    non-contiguous tensors (the frontends guarantee both; a direct call may not)."""
    s = short_name(dtype, op, REAL_DTYPES)
    if dtype not in allowed:
        raise TypeError(f"'{op}' on CUDA does not support dtype {dtype} (supported: "
                        f"{', '.join(str(d) for d in allowed)})")
    for t in tensors:
        if t.device.type != "cuda":
            raise RuntimeError(f"'{op}' on CUDA expects CUDA tensors, got one on {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"'{op}' on CUDA expects contiguous tensors, got shape "
                             f"{tuple(t.shape)} with strides {t.stride()}")
    return s


def _check_index(op: str, what: str, t: Tensor, ndim: int) -> None:
    if t.dtype is not D.int64 or t.dim() != ndim:
        raise TypeError(f"'{op}' expects {what} as a {ndim}-d int64 tensor, got {t.dtype} "
                        f"with shape {tuple(t.shape)}")


def _same_dtype(op: str, ref: Tensor, **named: Tensor) -> None:
    for name, t in named.items():
        if t.dtype is not ref.dtype:
            raise TypeError(f"'{op}' expects {name} with dtype {ref.dtype}, got {t.dtype}")


# -- coalesce ----------------------------------------------------------------------------------
def _sort_order(indices: Tensor, sizes: Sequence[int]) -> tuple[Tensor | None, Tensor]:
    """(sorted keys or None, stable permutation) ordering the columns of ``indices`` row-major.

    Linear keys when the sparse sizes' product fits in int64 (one key per entry, the dense
    stable sort); otherwise a lexicographic merge sort of the index columns (no keys).
    """
    S, nnz = indices.shape
    dev = indices.device
    if math.prod(sizes) < _INT64_LIMIT:
        strides = [math.prod(sizes[d + 1:]) for d in range(S)]
        keys = empty((nnz,), D.int64, dev)
        stride_arr = constant_array(strides or [0])
        launch(SRC, "sp_coalesce_keys", grid_for(nnz), BLOCK,
               [_p(indices), _i64(nnz), _i32(S), stride_arr, keys])
        sorted_keys, perm = empty((nnz,), D.int64, dev), empty((nnz,), D.int64, dev)
        CUDA.kernel("sort")(sorted_keys, perm, keys, 0, False)
        return sorted_keys, perm
    # Non-negative int64 indices order like their unsigned 64-bit keys.
    rows = indices.t().contiguous()
    return None, _row_sort(rows, nnz, S).to(D.int64)


@SPARSE_CUDA.register("_coalesce")
def _coalesce(indices: Tensor, values: Tensor, size: Sequence[int]) -> tuple[Tensor, Tensor]:
    """Sorted, duplicate-free (indices [S, nnz'], values [nnz', *D]): equal index columns sum
    their value rows in input order; explicit zeros stay."""
    op = "_coalesce"
    _check_index(op, "indices", indices, 2)
    s = _check(op, values.dtype, REAL_DTYPES, indices, values)
    S, nnz = indices.shape
    size = tuple(int(n) for n in size)
    if values.dim() < 1 or values.shape[0] != nnz or len(size) != S + values.dim() - 1:
        raise ValueError(f"'{op}': indices {tuple(indices.shape)} and values "
                         f"{tuple(values.shape)} do not fit a sparse tensor of size {size}")
    dense_shape = tuple(values.shape[1:])
    dev = indices.device
    if nnz == 0:
        return empty((S, 0), D.int64, dev), empty((0, *dense_shape), values.dtype, dev)
    sorted_keys, perm = _sort_order(indices, size[:S])
    flags = empty((nnz,), D.int32, dev)
    launch(SRC, "sp_coalesce_flags", grid_for(nnz), BLOCK,
           [sorted_keys, _p(indices), _i64(nnz), _i32(S), perm, flags])
    pos, groups = _scan(flags, nnz)
    first = empty((groups + 1,), D.int64, dev)
    launch(SRC, "sp_coalesce_heads", grid_for(nnz), BLOCK, [flags, pos, _i64(nnz), first])
    out_indices = empty((S, groups), D.int64, dev)
    if S:
        launch(SRC, "sp_coalesce_indices", grid_for(S * groups), BLOCK,
               [indices, _i64(nnz), _i32(S), perm, first, _i64(groups), out_indices])
    out_values = empty((groups, *dense_shape), values.dtype, dev)
    F = math.prod(dense_shape)
    if F:
        launch(SRC, f"sp_coalesce_values_{s}", grid_for(groups * F), BLOCK,
               [values, _i64(F), perm, first, _i64(groups), out_values])
    return out_indices, out_values


# -- CSR ---------------------------------------------------------------------------------------
@SPARSE_CUDA.register("_csr_rowptr")
def _csr_rowptr(rowptr: Tensor, rows: Tensor, nrows: int) -> None:
    """rowptr [nrows + 1] = CSR offsets of the sorted row indices ``rows`` [nnz]."""
    op = "_csr_rowptr"
    _check_index(op, "rows", rows, 1)
    _check_index(op, "rowptr", rowptr, 1)
    _check(op, D.int64, (D.int64,), rowptr, rows)
    nrows = int(nrows)
    if rowptr.numel() != nrows + 1:
        raise ValueError(f"'{op}': rowptr needs {nrows + 1} elements for {nrows} rows, got "
                         f"shape {tuple(rowptr.shape)}")
    launch(SRC, "sp_csr_rowptr", grid_for(nrows + 1), BLOCK,
           [_p(rows), _i64(rows.numel()), _i64(nrows), rowptr])


# -- SpMM / SDDMM --------------------------------------------------------------------------------
@SPARSE_CUDA.register("_spmm")
def _spmm(out: Tensor, rowptr: Tensor, cols: Tensor, values: Tensor, dense: Tensor,
          alpha: Any, beta: Any) -> None:
    """out = beta * out + alpha * (A @ dense), A the [M, K] CSR matrix (rowptr, cols, values);
    beta == 0 ignores out's old content (NaN-safe). alpha == 0 still multiplies, as PyTorch's
    sparse addmm and the SparseCPU kernel do (inf or NaN in A or dense give NaN)."""
    op = "_spmm"
    _check_index(op, "rowptr", rowptr, 1)
    _check_index(op, "cols", cols, 1)
    s = _check(op, values.dtype, FLOAT_DTYPES, out, rowptr, cols, values, dense)
    _same_dtype(op, values, out=out, dense=dense)
    if out.dim() != 2 or dense.dim() != 2 or out.shape[1] != dense.shape[1] \
            or rowptr.numel() != out.shape[0] + 1 or tuple(values.shape) != tuple(cols.shape):
        raise ValueError(f"'{op}': shapes do not fit: out {tuple(out.shape)}, rowptr "
                         f"{tuple(rowptr.shape)}, cols {tuple(cols.shape)}, values "
                         f"{tuple(values.shape)}, dense {tuple(dense.shape)}")
    M, N = out.shape
    if M == 0 or N == 0:
        return
    G = _group_width(N)
    sc = _SCALAR_NP[values.dtype]
    launch(SRC, f"sp_spmm_{s}", _warp_grid(M * -(-N // G)), BLOCK,
           [out, rowptr, _p(cols), _p(values), _p(dense), sc(alpha), sc(beta), _i64(M), _i64(N),
            _i32(G)])


@SPARSE_CUDA.register("_sddmm")
def _sddmm(out_values: Tensor, rows: Tensor, cols: Tensor, a: Tensor, b: Tensor) -> None:
    """out_values[i] = dot(a[rows[i]], b[cols[i]]), a [M, N] and b [K, N]."""
    op = "_sddmm"
    _check_index(op, "rows", rows, 1)
    _check_index(op, "cols", cols, 1)
    s = _check(op, out_values.dtype, FLOAT_DTYPES, out_values, rows, cols, a, b)
    _same_dtype(op, out_values, a=a, b=b)
    nnz = out_values.numel()
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or rows.numel() != nnz \
            or cols.numel() != nnz:
        raise ValueError(f"'{op}': shapes do not fit: out_values {tuple(out_values.shape)}, "
                         f"rows {tuple(rows.shape)}, cols {tuple(cols.shape)}, a "
                         f"{tuple(a.shape)}, b {tuple(b.shape)}")
    if nnz == 0:
        return
    N = a.shape[1]
    G = _group_width(N)
    launch(SRC, f"sp_sddmm_{s}", _warp_grid(nnz, 32 // G), BLOCK,
           [out_values, rows, cols, _p(a), _p(b), _i64(nnz), _i64(N), _i32(G)])


# -- segment softmax -----------------------------------------------------------------------------
def _segments(op: str, order: Tensor, segptr: Tensor, *tensors: Tensor) -> tuple[int, int, int]:
    """(nseg, F, G) for [nnz, *D] tensors (seen as [nnz, F], F = prod(D)) grouped by
    (order, segptr)."""
    _check_index(op, "order", order, 1)
    _check_index(op, "segptr", segptr, 1)
    ref = tensors[0]
    if ref.dim() < 1:
        raise ValueError(f"'{op}' expects values of shape [nnz, *D], got a 0-d tensor")
    nnz, F = ref.shape[0], math.prod(ref.shape[1:])
    for t in tensors:
        if tuple(t.shape) != tuple(ref.shape):
            raise ValueError(f"'{op}': expected tensors of shape {tuple(ref.shape)}, got "
                             f"{tuple(t.shape)}")
    if order.numel() != nnz or segptr.numel() < 1:
        raise ValueError(f"'{op}': order {tuple(order.shape)} and segptr "
                         f"{tuple(segptr.shape)} do not fit {nnz} entries")
    return segptr.numel() - 1, F, _group_width(F)


@SPARSE_CUDA.register("_segment_softmax")
def _segment_softmax(out: Tensor, values: Tensor, order: Tensor, segptr: Tensor,
                     log: bool) -> None:
    """out = (log-)softmax of values [nnz, F] over each segment's entries, per column."""
    op = "_segment_softmax"
    s = _check(op, values.dtype, FLOAT_DTYPES, out, values, order, segptr)
    _same_dtype(op, values, out=out)
    nseg, F, G = _segments(op, order, segptr, values, out)
    if nseg == 0 or values.numel() == 0:  # no entries, or no dense columns
        return
    launch(SRC, f"sp_softmax_{s}", _warp_grid(nseg * -(-F // G)), BLOCK,
           [out, values, order, segptr, _i64(nseg), _i64(F), _i32(G), _i32(int(bool(log)))])


@SPARSE_CUDA.register("_segment_softmax_backward")
def _segment_softmax_backward(grad_in: Tensor, grad_out: Tensor, out: Tensor, order: Tensor,
                              segptr: Tensor, log: bool) -> None:
    """grad_in w.r.t. the forward's values, given its out (see sparse.cu)."""
    op = "_segment_softmax_backward"
    s = _check(op, out.dtype, FLOAT_DTYPES, grad_in, grad_out, out, order, segptr)
    _same_dtype(op, out, grad_in=grad_in, grad_out=grad_out)
    nseg, F, G = _segments(op, order, segptr, out, grad_in, grad_out)
    if nseg == 0 or out.numel() == 0:
        return
    launch(SRC, f"sp_softmax_backward_{s}", _warp_grid(nseg * -(-F // G)), BLOCK,
           [grad_in, grad_out, out, order, segptr, _i64(nseg), _i64(F), _i32(G),
            _i32(int(bool(log)))])

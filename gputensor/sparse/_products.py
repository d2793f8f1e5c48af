"""Sparse-result products: ``sspaddmm`` (``saddmm``), ``smm`` and ``hspmm`` (``hsmm``).

Each is a composite of the sparse x dense product (``sparse.mm``, so both devices run it) and
dense ops on the indices and values, laid out as PyTorch's kernels lay them out:

- ``sspaddmm(input, mat1, mat2)`` is ``beta * input`` (its entries as stored) followed, for
  every row of ``mat1`` that has entries, by that row of ``alpha * mat1 @ mat2`` at every
  column; the result is uncoalesced. ``smm(mat1, mat2)`` is the product part alone.
- ``hspmm(mat1, mat2)`` is a hybrid tensor with one sparse dim: the rows of ``mat1 @ mat2``
  where ``mat1`` has entries.

PyTorch has no derivative for any of them: under autograd the result gets a node whose
backward raises, naming the op.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._ops.tensor_misc import no_kernel
from gputensor._tensor import Tensor
from gputensor.autograd import grad_mode
from gputensor.autograd.derivatives import mark_not_implemented

from ._ops import sparse_coo
from ._tensor import SparseTensor


def _check_product(op_name: str, mat1: SparseTensor, mat2: Any, dtype: bool = True) -> None:
    if not isinstance(mat2, Tensor) or isinstance(mat2, SparseTensor):
        raise RuntimeError(f"{op_name}: mat2 must be a strided tensor, got "
                           f"{getattr(mat2, 'layout', type(mat2).__name__)}")
    for arg, t in ((2, mat1), (3, mat2)):
        if t.dim() != 2:
            raise RuntimeError(f"{op_name}: Argument #{arg}: matrices expected, got {t.dim()}D "
                               f"tensor")
    if mat1._sparse_dim != 2:
        raise RuntimeError(f"{op_name}: mat1 must have 2 sparse dims, got sparse_dim "
                           f"{mat1._sparse_dim}")
    if mat2._shape[0] != mat1._shape[1]:
        raise RuntimeError(f"{op_name}: Argument #3: Expected dim 0 size {mat1._shape[1]}, got "
                           f"{mat2._shape[0]}")
    if dtype:
        _check_dtype(mat1, mat2)
    if mat2.device != mat1.device:
        raise RuntimeError(f"{op_name}: expected all tensors to be on the same device, but got "
                           f"mat1 on {mat1.device} and mat2 on {mat2.device}")


def _check_dtype(mat1: Tensor, other: Tensor) -> None:
    if other._dtype is not mat1._dtype:
        raise RuntimeError(f"expected scalar type {mat1._dtype.legacy_name} but found "
                           f"{other._dtype.legacy_name}")


def _rows_with_entries(mat1: SparseTensor) -> Tensor:
    rows = mat1.coalesce()._indices_t[0]
    return gt.unique_consecutive(rows) if rows.numel() else rows


def _product_rows(mat1: SparseTensor, mat2: Tensor, alpha: Any) -> tuple[Tensor, Tensor]:
    """The rows of mat1 that have entries, and those rows of ``alpha * mat1 @ mat2``."""
    rows = _rows_with_entries(mat1)
    vals = gt.sparse.mm(mat1, mat2).index_select(0, rows)
    return rows, (vals if alpha == 1 else vals * alpha)


def _result(op_name: str, out_parts: tuple[Tensor, Tensor, tuple[int, ...]],
            inputs: tuple[Tensor, ...], out: Any) -> SparseTensor:
    indices, values, size = out_parts
    if out is not None:
        if not isinstance(out, SparseTensor):
            raise RuntimeError(f"{op_name}: out must be a sparse_coo tensor, got "
                               f"{getattr(out, 'layout', type(out).__name__)}")
        if grad_mode.is_grad_enabled() and any(t._requires_grad for t in (*inputs, out)):
            raise RuntimeError(f"{op_name}(): functions with out=... arguments don't support "
                               f"automatic differentiation, but one of the arguments requires "
                               f"grad.")
        if out._dtype is not values._dtype or out.device != values.device:
            raise RuntimeError(f"{op_name}: out ({out._dtype.name} on {out.device}) must match "
                               f"the result ({values._dtype.name} on {values.device})")
        out._set(indices, values, size, False)
        return out
    result = sparse_coo(indices, values, size, False)
    if grad_mode.is_grad_enabled():
        mark_not_implemented(op_name, result, inputs, {})
    return result


def sspaddmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1,
             out: Any = None) -> SparseTensor:
    """``beta * input + alpha * (mat1 @ mat2)`` as an uncoalesced sparse tensor: ``input`` and
    ``mat1`` sparse [M, N] and [M, K], ``mat2`` dense [K, N]."""
    tensors = (input, mat1, mat2)
    if not any(isinstance(t, SparseTensor) for t in tensors):
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")
    for what, t in (("input", input), ("mat1", mat1)):
        if not isinstance(t, SparseTensor):
            raise RuntimeError(f"sspaddmm: {what} must be a sparse_coo tensor, got "
                               f"{getattr(t, 'layout', type(t).__name__)}")
    _check_product("sspaddmm", mat1, mat2, dtype=False)   # PyTorch: sizes first
    m, n = mat1._shape[0], mat2._shape[1]
    for dim, want in ((0, m), (1, n)):
        if input.dim() != 2 or input._shape[dim] != want:
            got = input._shape[dim] if input.dim() > dim else None
            raise RuntimeError(f"sspaddmm: Argument #1: Expected dim {dim} size {want}, got "
                               f"{got}")
    if input._sparse_dim != 2:
        raise RuntimeError(f"sspaddmm: input must have 2 sparse dims, got sparse_dim "
                           f"{input._sparse_dim}")
    _check_dtype(mat1, mat2)
    if input._dtype is not mat1._dtype:   # PyTorch's kernel writes mat1's values into input's
        raise RuntimeError(f"dtype of values ({mat1._dtype.legacy_name}) must match dtype of "
                           f"sparse tensor ({input._dtype.legacy_name})")
    if input.device != mat1.device:
        raise RuntimeError(f"sspaddmm: expected all tensors to be on the same device, but got "
                           f"input on {input.device} and mat1 on {mat1.device}")
    with grad_mode.no_grad():
        rows, vals = _product_rows(mat1, mat2, alpha)
        cols = gt.arange(n, device=mat2.device)
        new_idx = gt.stack([rows.repeat_interleave(n), cols.repeat(rows.numel())])
        indices = gt.cat([input._indices_t, new_idx], 1)
        values = gt.cat([input._values_t * beta, vals.reshape(-1)])
    return _result("sspaddmm", (indices, values, (m, n)), tensors, out)


def smm(input: Tensor, mat2: Tensor) -> SparseTensor:
    """``input @ mat2`` for a sparse [M, K] ``input`` and a dense [K, N] ``mat2``, as a sparse
    tensor holding every column of each row where ``input`` has entries."""
    if not isinstance(input, SparseTensor):
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")
    _check_product("smm", input, mat2)
    m, n = input._shape[0], mat2._shape[1]
    empty = sparse_coo(input._indices_t.new_zeros((2, 0)),
                       input._values_t.new_zeros((0,)), (m, n), True)
    result = sspaddmm(empty, input, mat2, beta=0, alpha=1)
    return result


def hspmm(mat1: Tensor, mat2: Tensor, *, out: Any = None) -> SparseTensor:
    """``mat1 @ mat2`` (sparse [M, K] @ dense [K, N]) as a hybrid sparse tensor: one sparse
    dim over the rows where ``mat1`` has entries, each a dense row of N values."""
    if not isinstance(mat1, SparseTensor):
        raise no_kernel("hspmm", mat1, "[SparseCPU, SparseCUDA]")
    if isinstance(mat2, SparseTensor):
        raise RuntimeError("addmm_sparse_dense: expected strided result tensor, got tensor "
                           "with layout Sparse")
    _check_product("hspmm", mat1, mat2)
    with grad_mode.no_grad():
        rows, vals = _product_rows(mat1, mat2, 1)
    size = (mat1._shape[0], mat2._shape[1])
    return _result("hspmm", (rows.unsqueeze(0).contiguous(), vals.contiguous(), size),
                   (mat1, mat2), out)

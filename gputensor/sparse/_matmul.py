"""Sparse @ dense products: ``gt.sparse.mm``, ``gt.sparse.addmm`` (and ``gt.mm``/``gt.matmul``/
``gt.addmm`` with a sparse first operand, routed here by gputensor/_ops/linalg.py).

The product runs the backend's ``_spmm`` kernel over a CSR view of the coalesced matrix: the
row offsets are built once (``_csr_rowptr``) and cached on the coalesced tensor, so a matrix
multiplied many times (a graph's adjacency, a fixed operator) pays for them once.
Gradients (PyTorch's): the dense operand gets ``alpha * A.T @ g``; the sparse operand a sparse
tensor with A's coalesced pattern whose values are ``alpha * (g @ dense.T)`` at those entries
only (``_sddmm``), never the dense [M, K] product.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._ops._core import kernel, op
from gputensor._tensor import Tensor
from gputensor.autograd.formulas import cj

from . import _grads
from ._helpers import cached, coalesce_raw
from ._tensor import SparseTensor


def _spmm_cost(inputs: Any, output: Any) -> tuple[int, int]:
    """2 flops per stored entry per output column; bytes of every part read and written."""
    sp = next((t for t in inputs if isinstance(t, SparseTensor)), None)
    dense = [t for t in inputs if isinstance(t, Tensor) and not isinstance(t, SparseTensor)]
    moved = sum(t.numel() * t.element_size() for t in dense) + output.numel() * \
        output.element_size()
    if sp is None:
        return moved, 0
    moved += sp.nbytes
    return moved, 2 * sp._nnz() * (output._shape[1] if output.dim() == 2 else 1)


def csr_rowptr(xc: SparseTensor) -> Tensor:
    """CSR row offsets of a coalesced 2-d sparse tensor (cached on it)."""
    def make() -> Tensor:
        rowptr = gt.empty((xc._shape[0] + 1,), dtype=gt.int64, device=xc.device)
        rows = xc._indices_t[0].contiguous()
        kernel(xc, "_csr_rowptr")(rowptr, rows, xc._shape[0])
        return rowptr
    return cached(xc, "rowptr", make)


def spmm_into(out: Tensor, a: SparseTensor, dense: Tensor, alpha: Any, beta: Any) -> Tensor:
    """out = beta * out + alpha * (a @ dense), no autograd; ``out`` contiguous [M, N]."""
    ac = coalesce_raw(a)
    rowptr = csr_rowptr(ac)
    cols = cached(ac, "cols", lambda: ac._indices_t[1].contiguous())
    kernel(ac, "_spmm")(out, rowptr, cols, ac._values_t.contiguous(), dense.contiguous(),
                        alpha, beta)
    return out


def check_mm(mat1: Any, mat2: Any, op_name: str) -> None:
    """Errors before any kernel: layouts, ranks, dtypes, devices and the inner sizes."""
    if not isinstance(mat1, SparseTensor):
        raise TypeError(f"{op_name}: expected mat1 to be a sparse_coo tensor, got "
                        f"{type(mat1).__name__} with layout {getattr(mat1, 'layout', None)}")
    if not isinstance(mat2, Tensor) or isinstance(mat2, SparseTensor):
        raise RuntimeError(f"{op_name}: mat2 must be a dense (strided) tensor; a sparse @ "
                           f"sparse product is not supported")
    if mat1.dim() != 2 or mat1._sparse_dim != 2:
        raise RuntimeError(f"{op_name}: mat1 must be a 2-d sparse matrix with 2 sparse dims, "
                           f"got size {list(mat1._shape)} with sparse_dim {mat1._sparse_dim}")
    if mat2.dim() != 2:
        raise RuntimeError(f"{op_name}: mat2 must be a matrix, got a {mat2.dim()}-D tensor")
    if mat1._dtype is not mat2._dtype:
        raise RuntimeError(f"{op_name}: expected mat1 and mat2 to have the same dtype, but got "
                           f"{mat1._dtype.name} and {mat2._dtype.name}")
    if mat1.device != mat2.device:
        raise RuntimeError(f"{op_name}: expected all tensors to be on the same device, but got "
                           f"mat1 on {mat1.device} and mat2 on {mat2.device}")
    if mat1._shape[1] != mat2._shape[0]:
        raise RuntimeError(f"{op_name}: mat1 and mat2 shapes cannot be multiplied "
                           f"({mat1._shape[0]}x{mat1._shape[1]} and "
                           f"{mat2._shape[0]}x{mat2._shape[1]})")


@op("_sparse_mm", method=False, function=False, cost=_spmm_cost,
    grad={"mat1": lambda g, mat1, mat2: _grads.mm_sparse(g, mat1, mat2),
          "mat2": lambda mat1, g: _grads.transposed_mm(mat1, g)},
    jvp="sparse_addmm_jvp(None, mat1, mat2, 1, 1)")
def _sparse_mm(mat1: SparseTensor, mat2: Tensor) -> Tensor:
    out = gt.empty((mat1._shape[0], mat2._shape[1]), dtype=mat2.dtype, device=mat2.device)
    return spmm_into(out, mat1, mat2, 1, 0)


@op("_sparse_addmm", method=False, function=False, cost=_spmm_cost,
    grad={"input": "scale(g, cj(beta))",
          "mat1": lambda g, mat1, mat2, alpha: _grads.mm_sparse(g, mat1, mat2, alpha),
          "mat2": lambda mat1, g, alpha: _grads.transposed_mm(mat1, g, cj(alpha))},
    jvp="sparse_addmm_jvp(input, mat1, mat2, beta, alpha)")
def _sparse_addmm(input: Tensor, mat1: SparseTensor, mat2: Tensor, beta: Any = 1,
                  alpha: Any = 1) -> Tensor:
    shape = (mat1._shape[0], mat2._shape[1])
    out = gt.empty(shape, dtype=mat2.dtype, device=mat2.device)
    if beta != 0:
        out.copy_(input.expand(shape))   # a fresh copy: the kernel accumulates into it
    return spmm_into(out, mat1, mat2, alpha, beta)


def mm(mat1: SparseTensor, mat2: Tensor) -> Tensor:
    """``mat1 @ mat2`` for a sparse [M, K] ``mat1`` and a dense [K, N] ``mat2``: dense [M, N].
    Gradients flow to both; mat1's is sparse with mat1's coalesced pattern."""
    check_mm(mat1, mat2, "sparse.mm")
    return _sparse_mm(mat1, mat2)


def addmm(mat: Tensor, mat1: SparseTensor, mat2: Tensor, *, beta: Any = 1,
          alpha: Any = 1) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)``; ``mat`` dense, broadcastable to [M, N]."""
    check_mm(mat1, mat2, "sparse.addmm")
    if isinstance(mat, SparseTensor) or not isinstance(mat, Tensor):
        raise RuntimeError(f"sparse.addmm: the added matrix must be a dense tensor, got "
                           f"{getattr(mat, 'layout', type(mat).__name__)}")
    shape = (mat1._shape[0], mat2._shape[1])
    try:
        gt.broadcast_shapes(tuple(mat._shape), shape)
    except RuntimeError:
        raise RuntimeError(f"sparse.addmm: the added matrix of size {list(mat._shape)} can't "
                           f"be broadcast to the product's size {list(shape)}") from None
    if mat._dtype is not mat2._dtype or mat.device != mat2.device:
        raise RuntimeError(f"sparse.addmm: the added matrix ({mat._dtype.name} on {mat.device})"
                           f" must match mat2 ({mat2._dtype.name} on {mat2.device})")
    return _sparse_addmm(mat, mat1, mat2, beta, alpha)


def _no_out(out: Any, op_name: str) -> None:
    if out is not None:
        raise RuntimeError(f"{op_name}: out= is not supported with a sparse_coo operand")


def matmul_route(op_name: str, a: Tensor, b: Tensor, out: Any = None) -> Tensor:
    """``gt.mm``/``gt.matmul``/``@`` with a sparse operand: sparse @ dense (2-d, or a vector
    on the right for matmul) runs ``sparse.mm``; dense @ sparse is ``(b.T @ a.T).T``."""
    if not isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        from ._compressed_ops import mm_route  # a CSR/CSC/BSR/BSC operand
        return mm_route(op_name, a, b, out)
    _no_out(out, op_name)
    if isinstance(a, SparseTensor):
        if op_name == "matmul" and isinstance(b, Tensor) and b.dim() == 1 and \
                not isinstance(b, SparseTensor):
            check_mm(a, b.unsqueeze(1), op_name)
            return _sparse_mm(a, b.unsqueeze(1)).squeeze(1)
        check_mm(a, b, op_name)
        return _sparse_mm(a, b)
    if not isinstance(a, Tensor) or a.dim() != 2:
        raise RuntimeError(f"{op_name}: dense @ sparse_coo needs a 2-d dense left operand, got "
                           f"{getattr(a, 'shape', type(a).__name__)}")
    from ._shape import t
    bt = t(b)
    check_mm(bt, a.t(), op_name)
    return _sparse_mm(bt, a.t()).t()


def addmm_route(input: Tensor, mat1: Tensor, mat2: Tensor, beta: Any = 1, alpha: Any = 1,
                out: Any = None) -> Tensor:
    """``gt.addmm`` with a sparse operand: ``sparse.addmm`` when mat1 is the sparse one."""
    if not any(isinstance(x, SparseTensor) for x in (input, mat1, mat2)):
        from ._compressed_ops import addmm_route  # a CSR/CSC/BSR/BSC operand
        return addmm_route(input, mat1, mat2, beta, alpha, out)
    _no_out(out, "addmm")
    if isinstance(mat1, SparseTensor) and not isinstance(input, SparseTensor) and \
            not isinstance(mat2, SparseTensor):
        return addmm(input, mat1, mat2, beta=beta, alpha=alpha)
    layouts = ", ".join(getattr(x, "layout", type(x)).__repr__() for x in (input, mat1, mat2))
    raise RuntimeError(f"addmm: only (dense input, sparse_coo mat1, dense mat2) is supported "
                       f"with sparse operands, got layouts ({layouts})")

"""The methods of ``SparseTensor`` that are sparse ops (installed by gputensor.sparse at import,
after which every other registry method gets a "not supported for sparse_coo" stub)."""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor

from ._matmul import mm
from ._ops import sparse_coalesce, sparse_to_dense, sparse_values
from ._reduce import log_softmax, softmax, sparse_sum
from ._shape import index_select, t, transpose
from ._tensor import SparseTensor, not_supported


def coalesce(self: SparseTensor) -> SparseTensor:
    """Entries sorted by linear index with duplicates summed (``self`` when already so)."""
    return self if self._is_coalesced else sparse_coalesce(self)


def to_dense(self: SparseTensor, dtype: Any = None, *, masked_grad: bool = True) -> Tensor:
    out = sparse_to_dense(self)
    return out if dtype is None else out.to(dtype)


def values(self: SparseTensor) -> Tensor:
    """The values [nnz, *dense_shape] of a coalesced tensor (a view; gradients flow)."""
    if not self._is_coalesced:
        raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                           ".coalesce() first")
    return sparse_values(self)


def indices(self: SparseTensor) -> Tensor:
    """The indices [sparse_dim, nnz] (int64) of a coalesced tensor."""
    if not self._is_coalesced:
        raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                           ".coalesce() first")
    return self._indices_t.detach()


def sum(self: SparseTensor, dim: Any = None, keepdim: bool = False, *,
        dtype: Any = None) -> Tensor:
    if keepdim:
        raise not_supported("sum(keepdim=True)", self.device.type)
    return sparse_sum(self, dim, dtype)


def matmul(self: SparseTensor, other: Tensor) -> Tensor:
    if other.dim() == 1:
        return mm(self, other.unsqueeze(1)).squeeze(1)
    return mm(self, other)


def _rmatmul(self: SparseTensor, other: Tensor) -> Tensor:
    # ``dense @ sparse``: Python asks the subclass's reflected method first, so this must route
    # (dense result, as PyTorch's) rather than be a "not supported" stub.
    from ._matmul import matmul_route
    return matmul_route("matmul", other, self)


def _softmax(self: SparseTensor, dim: int, dtype: Any = None) -> SparseTensor:
    return softmax(self, dim, dtype)


def _log_softmax(self: SparseTensor, dim: int, dtype: Any = None) -> SparseTensor:
    return log_softmax(self, dim, dtype)


def _addmm(self: SparseTensor, *args: Any, **kwargs: Any) -> Tensor:
    raise not_supported("addmm with a sparse_coo input (the added matrix)", self.device.type)


METHODS = {
    "coalesce": coalesce, "to_dense": to_dense, "values": values, "indices": indices,
    "sum": sum, "mm": mm, "matmul": matmul, "__matmul__": matmul, "__rmatmul__": _rmatmul,
    "t": t,
    "transpose": transpose, "index_select": index_select, "softmax": _softmax,
    "log_softmax": _log_softmax, "addmm": _addmm,
}


def install() -> None:
    from ._resize import METHODS as RESIZE_METHODS
    for name, fn in {**METHODS, **RESIZE_METHODS}.items():
        setattr(SparseTensor, name, fn)

"""The differentiable sparse ops: declared in the op registry like dense ones (a frontend, a
cost model and a derivative per differentiable argument), so autograd records them with the
same machinery. They are private (``_sparse_*``): the public names (``gt.sparse.mm``,
``x.coalesce()``, ``x.to_dense()``, ...) validate arguments and call these.

Gradient conventions (PyTorch's): the gradient of a sparse input is a sparse tensor, normally
with the input's (coalesced) pattern; the gradient of ``values()`` is dense. Formulas call the
helpers in ``gputensor.sparse._grads`` through the formula namespace (``sparse._grads.f``).
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops._core import op
from gputensor._tensor import Tensor

from . import _grads
from ._cost import sparse_cost
from ._helpers import coalesce_raw, gather_at, index_rows, to_dense_raw
from ._tensor import SparseTensor, make_sparse


# -- construction and conversion -------------------------------------------------------------------
@op("_sparse_coo", method=False, function=False, cost=sparse_cost(),
    grad={"values": lambda g, out: _grads.values_of(g, out)}, jvp="auto_linear")
def sparse_coo(indices: Tensor, values: Tensor, size: tuple[int, ...],
               coalesced: bool = False) -> SparseTensor:
    """A sparse tensor around validated ``indices``/``values`` (differentiable in values)."""
    return make_sparse(indices, values.detach(), size, coalesced)


@op("_sparse_values", method=False, function=False, cost=sparse_cost(),
    grad={"self": lambda self, g: _grads.with_values(self, g)}, jvp="auto_linear")
def sparse_values(self: SparseTensor) -> Tensor:
    """The values as a dense tensor sharing their memory (``x.values()``)."""
    return self._values_t.detach()


@op("_sparse_coalesce", method=False, function=False, cost=sparse_cost(),
    grad={"self": "g"}, jvp="auto_linear")
def sparse_coalesce(self: SparseTensor) -> SparseTensor:
    return coalesce_raw(self)._alias()


@op("_sparse_clone", method=False, function=False, cost=sparse_cost(), grad={"self": "g"},
    jvp="auto_linear")
def sparse_clone(self: SparseTensor) -> SparseTensor:
    return make_sparse(self._indices_t.clone(), self._values_t.clone(), self._shape,
                       self._is_coalesced)


@op("_sparse_to", method=False, function=False, cost=sparse_cost(),
    grad={"self": "g.to(device=self_device, dtype=self_dtype)"}, jvp="auto_linear")
def sparse_to(self: SparseTensor, dtype: D.dtype, device: Any) -> SparseTensor:
    """The tensor with its values cast to ``dtype``, both parts moved to ``device``."""
    idx = self._indices_t.to(device)
    vals = self._values_t.to(device=device, dtype=dtype)
    return make_sparse(idx, vals, self._shape, self._is_coalesced)


@op("_sparse_to_dense", method=False, function=False, cost=sparse_cost(),
    grad={"self": lambda g, self: _grads.mask(g, self)}, jvp="auto_linear")
def sparse_to_dense(self: SparseTensor) -> Tensor:
    return to_dense_raw(self)


@op("_dense_to_sparse", method=False, function=False, cost=sparse_cost(),
    grad={"self": lambda g: _grads.densify(g)}, jvp="auto_linear")
def dense_to_sparse(self: Tensor, sparse_dim: int) -> SparseTensor:
    """``self`` as a coalesced sparse tensor over its first ``sparse_dim`` dims: an entry for
    every position whose (dense sub-tensor of) values is not all zero."""
    shape = tuple(self._shape)
    if sparse_dim == len(shape):
        mask = self != 0
    else:
        mask = (self != 0).reshape(shape[:sparse_dim] + (-1,)).any(-1)
    idx = gt.nonzero(mask).t().contiguous()          # row-major order: already coalesced
    vals = self[index_rows(idx)].contiguous() if idx._shape[1] else \
        gt.zeros((0, *shape[sparse_dim:]), dtype=self.dtype, device=self.device)
    return make_sparse(idx, vals, shape, True)


@op("_sparse_mask", method=False, function=False, cost=sparse_cost(),
    grad={"self": lambda g: _grads.densify(g)}, jvp="auto_linear")
def sparse_mask(self: Tensor, mask: SparseTensor) -> SparseTensor:
    """``self`` (dense) read at the coalesced entries of ``mask``: ``dense.sparse_mask(mask)``."""
    mc = coalesce_raw(mask)
    return make_sparse(mc._indices_t, gather_at(self, mc._indices_t), mask._shape, True)


# -- shape --------------------------------------------------------------------------------------
@op("_sparse_transpose", method=False, function=False, cost=sparse_cost(),
    grad={"self": "g.transpose(dim0, dim1)"}, jvp="auto_linear")
def sparse_transpose(self: SparseTensor, dim0: int, dim1: int) -> SparseTensor:
    """Swap two sparse dims (index rows) or two dense dims (value dims); normalized dims."""
    S = self._sparse_dim
    shape = list(self._shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    if dim0 == dim1:
        return self._alias(None)
    if dim0 < S:
        perm = list(range(S))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        idx = self._indices_t[perm].contiguous() if self._nnz() else \
            self._indices_t.clone()
        return make_sparse(idx, self._values_t, tuple(shape), False)
    vals = self._values_t.transpose(dim0 - S + 1, dim1 - S + 1).contiguous()
    return make_sparse(self._indices_t, vals, tuple(shape), self._is_coalesced)


__all__ = ["dense_to_sparse", "gather_at", "sparse_clone", "sparse_coalesce", "sparse_coo",
           "sparse_to", "sparse_to_dense", "sparse_transpose", "sparse_values"]

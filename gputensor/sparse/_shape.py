"""Shape ops on sparse tensors: ``t``/``transpose`` and ``index_select``.

index_select along a sparse dim keeps, for each selected position j, the entries whose index
in that dim equals ``index[j]`` (re-numbered j); an index may repeat. It is computed with a
sort of ``index`` and two binary searches per entry, all dense ops, so it runs on any device.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops._core import op
from gputensor._tensor import Tensor, normalize_dim

from ._cost import sparse_cost
from ._helpers import coalesce_raw
from ._ops import sparse_transpose
from ._tensor import SparseTensor, make_sparse


def transpose(self: SparseTensor, dim0: int, dim1: int) -> SparseTensor:
    """Swap two sparse dims or two dense dims (mixing them is an error, as in PyTorch)."""
    nd = self.dim()
    d0, d1 = normalize_dim(dim0, nd), normalize_dim(dim1, nd)
    S = self._sparse_dim
    if (d0 < S) != (d1 < S):
        raise RuntimeError(f"transpose: a sparse_coo tensor can't swap a sparse dim with a dense "
                           f"dim (dims {dim0} and {dim1}, sparse_dim {S})")
    return sparse_transpose(self, min(d0, d1), max(d0, d1))


def t(self: SparseTensor) -> SparseTensor:
    if self.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{self.dim()}D")
    return self if self.dim() < 2 else transpose(self, 0, 1)


def _select_entries(indices: Tensor, dim: int, index: Tensor) -> tuple[Tensor, Tensor]:
    """(entry, position) pairs: entry e of the tensor lands at output position j whenever
    ``indices[dim, e] == index[j]``."""
    key = indices[dim].contiguous()
    sidx, sorder = gt.sort(index, stable=True)
    left = gt.searchsorted(sidx, key)
    counts = gt.searchsorted(sidx, key, right=True) - left
    nnz = key._shape[0]
    ent = gt.repeat_interleave(gt.arange(nnz, device=key.device), counts)
    starts = gt.cumsum(counts, 0) - counts
    offs = gt.arange(ent._shape[0], device=key.device) - gt.repeat_interleave(starts, counts)
    pos = sorder.index_select(0, left.index_select(0, ent) + offs)
    return ent, pos


@op("_sparse_index_select", method=False, function=False, cost=sparse_cost(),
    grad={"self": lambda g, self_shape, self, dim, index:
          index_select_backward(g, self_shape, self, dim, index)}, jvp="auto_linear")
def _sparse_index_select(self: SparseTensor, dim: int, index: Tensor) -> SparseTensor:
    S = self._sparse_dim
    shape = list(self._shape)
    shape[dim] = index._shape[0]
    if dim >= S:
        vals = self._values_t.index_select(dim - S + 1, index).contiguous()
        return make_sparse(self._indices_t, vals, tuple(shape), self._is_coalesced)
    if self._nnz() == 0 or index._shape[0] == 0:
        return make_sparse(self._indices_t[:, :0].contiguous(),
                           self._values_t[:0].contiguous(), tuple(shape), True)
    ent, pos = _select_entries(self._indices_t, dim, index)
    idx = self._indices_t.index_select(1, ent)
    idx[dim] = pos
    vals = self._values_t.index_select(0, ent).contiguous()
    return make_sparse(idx.contiguous(), vals, tuple(shape), False)


def index_select_backward(g: Tensor, shape: Any, x: SparseTensor, dim: int,
                          index: Tensor) -> SparseTensor:
    """Entries of the output's gradient sent back to the positions they were selected from
    (repeated selections sum when coalesced)."""
    S = x._sparse_dim
    if not isinstance(g, SparseTensor):
        g = g.to_sparse(S)
    if dim >= S:
        vals = gt.zeros((g._nnz(), *shape[S:]), dtype=g.dtype, device=g.device)
        vals.index_add_(dim - S + 1, index, g._values_t)
        return coalesce_raw(make_sparse(g._indices_t, vals, tuple(shape), g._is_coalesced))
    idx = g._indices_t.clone()
    if g._nnz():
        idx[dim] = index.index_select(0, g._indices_t[dim].contiguous())
    return coalesce_raw(make_sparse(idx, g._values_t, tuple(shape), False))


def index_select(self: SparseTensor, dim: int, index: Tensor) -> SparseTensor:
    """Entries of ``self`` at positions ``index`` along ``dim`` (sparse or dense dim)."""
    d = normalize_dim(dim, self.dim())
    if not isinstance(index, Tensor) or isinstance(index, SparseTensor):
        raise TypeError(f"index_select(): index must be a dense tensor, got "
                        f"{type(index).__name__}")
    if index.dim() > 1 or index._dtype not in (D.int64, D.int32):
        raise RuntimeError(f"index_select(): index must be a 1-d int64/int32 tensor, got "
                           f"{index._dtype.name} of size {list(index._shape)}")
    if index.device != self.device:
        raise RuntimeError(f"index_select(): index is on {index.device} but self is on "
                           f"{self.device}")
    index = index.reshape(-1).to(D.int64).contiguous()
    n = self._shape[d]
    if index.numel():
        lo, hi = int(index.amin().item()), int(index.amax().item())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise IndexError(f"index_select(): index {bad} is out of bounds for dimension {d} "
                             f"with size {n}")
    return _sparse_index_select(self, d, index)


__all__ = ["index_select", "t", "transpose", "coalesce_raw"]

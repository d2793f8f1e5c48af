"""Building blocks of the sparse composites: coalescing with a per-tensor cache, linear keys,
and looking a gradient up at a sparse tensor's entries.

Everything here is a composite of the backend's ``_coalesce`` kernel and dense ops on the
indices/values tensors, so it runs unchanged on every device. None of it records autograd
history: the differentiable ops in ``_ops.py`` call these under their own derivative.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gputensor as gt
from gputensor._ops._core import kernel
from gputensor._tensor import Tensor, contiguous_strides

from ._tensor import SparseTensor, make_sparse


def cached(x: SparseTensor, key: Any, make: Callable[[], Any]) -> Any:
    """``make()`` computed once per (tensor, key) while the tensor is unchanged (its version
    counter stays the same): the coalesced form, CSR row offsets, softmax segments."""
    c = x._cache
    if c is None:
        c = x._cache = {}
    v = x._storage._version
    hit = c.get(key)
    if hit is not None and hit[0] == v:
        return hit[1]
    r = make()
    c[key] = (v, r)
    return r


def coalesce_raw(x: SparseTensor) -> SparseTensor:
    """The coalesced form of ``x`` (``x`` itself when coalesced; cached), no autograd."""
    if x._is_coalesced:
        return x

    def make() -> SparseTensor:
        with gt.no_grad():
            idx, vals = kernel(x, "_coalesce")(x._indices_t.contiguous(),
                                               x._values_t.contiguous(), x._shape)
        return make_sparse(idx, vals, x._shape, True)
    return cached(x, "coalesced", make)


def linear_keys(idx: Tensor, sizes: Sequence[int]) -> Tensor:
    """Row-major linear index (int64) of each column of ``idx`` [len(sizes), n] over ``sizes``."""
    n = idx._shape[1]
    if len(sizes) == 0:
        return gt.zeros((n,), dtype=gt.int64, device=idx.device)
    if math.prod(max(s, 1) for s in sizes) >= (1 << 62):
        raise RuntimeError(f"sparse tensor with sparse sizes {list(sizes)} has more than 2**62 "
                           f"addressable elements: linear indices would overflow int64")
    strides = contiguous_strides(tuple(sizes))
    if len(sizes) == 1:
        return idx[0].contiguous()
    w = gt.tensor(list(strides), dtype=gt.int64, device=idx.device).unsqueeze(1)
    return (idx * w).sum(0)


def index_rows(idx: Tensor) -> tuple[Tensor, ...]:
    """The rows of an index tensor as a tuple of 1-d index tensors, for advanced indexing."""
    return tuple(idx[d] for d in range(idx._shape[0]))


def lookup(g: SparseTensor, idx: Tensor) -> Tensor:
    """Values of sparse ``g`` at the positions ``idx`` [sparse_dim, n] (zeros where ``g`` has no
    entry): [n, *dense_shape]. Binary search of the positions' linear keys in ``g``'s."""
    gc = coalesce_raw(g)
    n = idx._shape[1]
    vals = gc._values_t
    dense = tuple(vals._shape[1:])
    nnz = gc._nnz()
    if nnz == 0 or n == 0:
        return gt.zeros((n, *dense), dtype=vals.dtype, device=vals.device)
    sizes = gc._shape[: gc._sparse_dim]
    gk = cached(gc, "keys", lambda: linear_keys(gc._indices_t, sizes))
    qk = linear_keys(idx, sizes)
    pos = gt.searchsorted(gk, qk).clamp_(max=nnz - 1)
    found = gk.index_select(0, pos) == qk
    picked = vals.index_select(0, pos)
    mask = found.reshape((n,) + (1,) * len(dense))
    return gt.where(mask, picked, gt.zeros((), dtype=vals.dtype, device=vals.device))


def gather_at(g: Tensor, idx: Tensor, dense_shape: Sequence[int] | None = None) -> Tensor:
    """The entries of gradient ``g`` (dense or sparse, of the full shape) at the sparse
    positions ``idx`` [S, n]: [n, *dense dims]; contiguous."""
    if isinstance(g, SparseTensor):
        if g._sparse_dim == idx._shape[0]:
            return lookup(g, idx).contiguous()
        g = to_dense_raw(g)
    if idx._shape[1] == 0:
        return gt.zeros((0, *g._shape[idx._shape[0]:]), dtype=g.dtype, device=g.device)
    return g[index_rows(idx)].contiguous()


def to_dense_raw(x: SparseTensor) -> Tensor:
    """The dense tensor ``x`` represents (duplicates summed), without autograd."""
    with gt.no_grad():
        if x._sparse_dim == 0:     # every entry sits at the one (empty) sparse position
            return x._values_t.sum(0).to(x._dtype) if x._nnz() else \
                gt.zeros(x._shape, dtype=x._dtype, device=x.device)
        out = gt.zeros(x._shape, dtype=x._dtype, device=x.device)
        if x._nnz():
            out.index_put_(index_rows(x._indices_t), x._values_t, accumulate=True)
    return out


def sparse_like(x: SparseTensor, values: Tensor) -> SparseTensor:
    """A sparse tensor with ``x``'s indices (shared), size and coalesced flag, new values."""
    return make_sparse(x._indices_t, values, x._shape, x._is_coalesced)

"""Reductions over sparse tensors: ``gt.sparse.sum`` and ``gt.sparse.softmax``/``log_softmax``.

sum (PyTorch's ``torch.sparse.sum``): over everything, or over every sparse dim, gives a dense
tensor; over only some sparse dims, a coalesced sparse tensor. Reduced dense dims sum the
values; reduced sparse dims drop index rows and let coalescing sum the entries that collide.

softmax along a sparse dim normalises each group of entries that share every other sparse
index (a "segment"), per dense column, over the stored entries only (absent entries count as
-inf, as in PyTorch); along a dense dim it is the dense softmax of the values.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._ops._core import kernel, op
from gputensor._tensor import Tensor, normalize_dim

from . import _grads
from ._cost import sparse_cost
from ._helpers import cached, coalesce_raw, gather_at, linear_keys
from ._tensor import SparseTensor, make_sparse


def split_dims(x: SparseTensor, dim: Any) -> tuple[list[int], list[int]]:
    """The reduced dims of ``x`` split into sparse dims and (full-tensor numbered) dense dims."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    nd = x.dim()
    norm = [normalize_dim(d, nd) for d in dims]
    if len(set(norm)) != len(norm):
        raise RuntimeError(f"sparse.sum: dim {list(dims)} appears multiple times in the list of "
                           f"dims")
    S = x._sparse_dim
    return sorted(d for d in norm if d < S), sorted(d for d in norm if d >= S)


@op("_sparse_sum", method=False, function=False, cost=sparse_cost(1, per="input"),
    grad={"self": lambda g, self, dim: _grads.sum_backward(g, self, dim)}, jvp="auto_linear")
def _sparse_sum(self: SparseTensor, dim: Any = None) -> Tensor:
    vals = self._values_t
    if dim is None:
        return vals.sum()
    sdims, ddims = split_dims(self, dim)
    S = self._sparse_dim
    vdims = [d - S + 1 for d in ddims]
    if len(sdims) == S:
        return vals.sum([0, *vdims]) if vals._shape[0] or vdims else vals.sum(0)
    if vdims:
        vals = vals.sum(vdims)
    shape = tuple(n for d, n in enumerate(self._shape) if d not in sdims and d not in ddims)
    if not sdims:
        return make_sparse(self._indices_t, vals.contiguous(), shape, self._is_coalesced)
    keep = [d for d in range(S) if d not in sdims]
    idx = self._indices_t[keep].contiguous()
    partial = make_sparse(idx, vals.contiguous(), shape, False)
    return coalesce_raw(partial)


def sparse_sum(input: SparseTensor, dim: Any = None, dtype: Any = None) -> Tensor:
    """Sum of a sparse tensor over ``dim`` (None: everything): dense when every sparse dim is
    reduced, else sparse (coalesced). ``dtype`` casts the values first."""
    if not isinstance(input, SparseTensor):
        raise TypeError(f"sparse.sum: expected a sparse_coo tensor, got layout "
                        f"{getattr(input, 'layout', type(input).__name__)}")
    if dtype is not None:
        input = input.to(dtype)
    if dim is not None and not isinstance(dim, int):
        dim = tuple(dim)
        if not dim:
            dim = None
    if dim is not None:
        split_dims(input, dim)   # validates before anything runs
    return _sparse_sum(input, dim)


# -- softmax ----------------------------------------------------------------------------------
def _segments(xc: SparseTensor, d: int) -> tuple[Tensor, Tensor]:
    """(order, segptr) grouping xc's entries by every sparse index except dim ``d`` (cached)."""
    def make() -> tuple[Tensor, Tensor]:
        S = xc._sparse_dim
        others = [k for k in range(S) if k != d]
        if others:
            keys = linear_keys(xc._indices_t[others].contiguous(),
                               [xc._shape[k] for k in others])
            order = gt.argsort(keys, stable=True)
            _, counts = gt.unique_consecutive(keys.index_select(0, order), return_counts=True)
        else:
            n = xc._nnz()
            order = gt.arange(n, device=xc.device)
            counts = gt.full((1,), n, dtype=gt.int64, device=xc.device)
        zero = gt.zeros((1,), dtype=gt.int64, device=xc.device)
        segptr = gt.cat([zero, gt.cumsum(counts, 0)])
        return order.contiguous(), segptr.contiguous()
    return cached(xc, ("segments", d), make)


@op("_sparse_softmax", method=False, function=False, cost=sparse_cost(5, per="input"),
    grad={"self": lambda g, out, dim, log: softmax_backward(g, out, dim, log)},
    jvp="sparse_softmax_jvp(self_t, out, dim, log)")
def _sparse_softmax(self: SparseTensor, dim: int, log: bool = False) -> SparseTensor:
    xc = coalesce_raw(self)
    S = xc._sparse_dim
    vals = xc._values_t
    if dim >= S:
        fn = gt.log_softmax if log else gt.softmax
        out_v = fn(vals, dim - S + 1) if vals.numel() else vals.clone()
        return make_sparse(xc._indices_t, out_v.contiguous(), xc._shape, True)
    out_v = gt.empty(tuple(vals._shape), dtype=vals.dtype, device=vals.device)
    if xc._nnz():
        order, segptr = _segments(xc, dim)
        kernel(xc, "_segment_softmax")(out_v, vals.contiguous(), order, segptr, bool(log))
    out = make_sparse(xc._indices_t, out_v, xc._shape, True)
    out._cache = {("segments", dim): (0, _segments(xc, dim))} if xc._nnz() else None
    return out


def softmax_backward(g: Tensor, out: SparseTensor, dim: int, log: bool) -> SparseTensor:
    """Gradient of the sparse (log-)softmax w.r.t. its input, at the output's pattern."""
    gv = gather_at(g, out._indices_t)
    ov = out._values_t
    S = out._sparse_dim
    if dim >= S:
        vd = dim - S + 1
        if log:
            gi = gv - ov.exp() * gv.sum(vd, keepdim=True)
        else:
            gi = ov * (gv - (gv * ov).sum(vd, keepdim=True))
        return make_sparse(out._indices_t, gi.contiguous(), out._shape, True)
    gi = gt.empty(tuple(ov._shape), dtype=ov.dtype, device=ov.device)
    if out._nnz():
        order, segptr = _segments(out, dim)
        kernel(out, "_segment_softmax_backward")(gi, gv.contiguous(), ov.contiguous(), order,
                                                 segptr, bool(log))
    return make_sparse(out._indices_t, gi, out._shape, True)


def _softmax_frontend(log: bool) -> Any:
    name = "sparse.log_softmax" if log else "sparse.softmax"

    def fn(input: SparseTensor, dim: int, dtype: Any = None) -> SparseTensor:
        if not isinstance(input, SparseTensor):
            raise TypeError(f"{name}: expected a sparse_coo tensor, got layout "
                            f"{getattr(input, 'layout', type(input).__name__)}")
        if not (input._dtype.is_floating_point if dtype is None else gt.is_floating_point(
                gt.empty((0,), dtype=dtype))):
            raise RuntimeError(f"{name}: expected a floating point tensor, got "
                               f"{input._dtype.name}")
        if dtype is not None:
            input = input.to(dtype)
        return _sparse_softmax(input, normalize_dim(dim, input.dim()), log)
    fn.__name__ = "log_softmax" if log else "softmax"
    fn.__doc__ = (f"{'Log-softmax' if log else 'Softmax'} of a sparse tensor along ``dim`` over "
                  f"its stored entries (absent entries count as -inf); sparse result with the "
                  f"input's coalesced pattern.")
    return fn


softmax = _softmax_frontend(False)
log_softmax = _softmax_frontend(True)

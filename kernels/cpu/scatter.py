"""CPU kernels for scatter ops: scatter, scatter_reduce, index_add/index_copy/index_fill,
masked_fill/masked_scatter and advanced-index assignment (index_put).

Indices were checked by the frontends (gputensor/_ops/scatter.py, indexing.py). Small scatters
use NumPy's fancy indexing and ufunc.at; large ones the strided walker of shape.py, which
applies reductions in index order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

from .shape import (
    _along_dim,
    _cast,
    _extreme,
    _h1,
    _np_index,
    _scatter_into,
)


def _scatter_values(src: Any, idx: np.ndarray, dtype: np.dtype) -> Any:
    """The part of ``src`` the index covers (a tensor), or the scalar cast to ``dtype``."""
    if isinstance(src, Tensor):
        return _h1(src)[tuple(slice(0, n) for n in idx.shape)]
    return _cast(src, dtype)


@CPU.register("scatter")
def scatter(self: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None) -> None:
    idx = _h1(index)
    _scatter_into(self, idx.shape, dim, idx, _scatter_values(src, idx, _h1(self).dtype), reduce)


@CPU.register("scatter_reduce")
def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                   include_self: bool) -> None:
    a, idx = _h1(self), _h1(index)
    vals = _scatter_values(src, idx, a.dtype)
    if not include_self:
        # Scattered-to positions start from the reduction's identity instead of self.
        identity = {"sum": 0, "mean": 0, "prod": 1}.get(reduce)
        if identity is None:
            identity = _extreme(self.dtype, a.dtype, highest=reduce == "amin")
        _scatter_into(self, idx.shape, dim, idx, _cast(identity, a.dtype), None)
    _scatter_into(self, idx.shape, dim, idx, vals, reduce)
    if reduce != "mean":
        return
    counts = np.full(a.shape, 1 if include_self else 0, np.int64)
    _scatter_into(Tensor._from_np(counts), idx.shape, dim, idx, 1, "sum")
    np.maximum(counts, 1, out=counts)
    if self.dtype.category <= D.INTEGRAL:
        a[...] = np.floor_divide(a, counts).astype(a.dtype)
    else:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):   # IEEE, quietly
            a[...] = (a / counts).astype(a.dtype)


@CPU.register("index_add")
def index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Any) -> None:
    a, s = _h1(self), _h1(source)
    if alpha != 1 or (a.dtype.kind == "c" and self.dim() <= 1):
        # PyTorch's kernel for a self of at most one dim multiplies complex sources by alpha
        # even when it is 1 (inf's imaginary part is nan); its add kernel for more dims does not
        with np.errstate(all="ignore"):
            s = s * _cast(alpha, a.dtype)
    idx = _h1(index).reshape(tuple(-1 if k == dim else 1 for k in range(s.ndim)))
    _scatter_into(self, s.shape, dim, idx, s.astype(a.dtype, copy=False), "sum")


@CPU.register("index_copy")
def index_copy(self: Tensor, dim: int, index: Tensor, source: Tensor) -> None:
    a = _h1(self)
    a[_along_dim(dim, _h1(index))] = _h1(source)


@CPU.register("index_fill")
def index_fill(self: Tensor, dim: int, index: Tensor, value: Any) -> None:
    """Indices lie in [-size, size); NumPy wraps the negative ones like PyTorch does."""
    a = _h1(self)
    a[_along_dim(dim, _h1(index))] = _cast(value, a.dtype)


# -- masks -----------------------------------------------------------------------------------
@CPU.register("masked_fill")
def masked_fill(self: Tensor, mask: Tensor, value: Any) -> None:
    a = self._host
    np.copyto(a, _cast(value, a.dtype), where=np.broadcast_to(mask._host, a.shape))


@CPU.register("masked_scatter")
def masked_scatter(self: Tensor, mask: Tensor, source: Tensor) -> None:
    a = self._host
    m = mask._host
    n = int(np.count_nonzero(m))
    a[m] = source._host.reshape(-1)[:n]


@CPU.register("_index_put")
def index_put(base: Tensor, adv: list[Any], value: Tensor, accumulate: bool) -> None:
    arr = base._host
    idx = _np_index(adv)
    v = value._host.astype(arr.dtype, copy=False)
    try:
        if accumulate:
            np.add.at(arr, idx, v)
        else:
            arr[idx] = v
    except ValueError:  # NumPy's broadcast error, in PyTorch's words
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value._shape)} cannot "
                           f"be broadcast to indexing result of shape {list(arr[idx].shape)}"
                           ) from None

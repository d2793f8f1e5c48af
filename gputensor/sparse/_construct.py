"""Making sparse tensors: ``gt.sparse_coo_tensor``, ``dense.to_sparse()`` and the legacy
constructors (``gt.sparse.FloatTensor(indices, values, size)``, ``gt.sparse.FloatTensor(2, 3)``).

Every index is validated here (shape, dtype, non-negative, below its dim's size) with one
``aminmax`` per call, before any kernel sees it.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._device import to_device
from gputensor._tensor import Tensor, parse_size
from gputensor.kernels.registry import SPARSE_CPU, SPARSE_CUDA

from ._ops import dense_to_sparse, sparse_coo
from ._tensor import SparseTensor, make_sparse


def _as_tensor(x: Any, dtype: Any, device: Any, what: str) -> Tensor:
    if isinstance(x, SparseTensor):
        raise TypeError(f"sparse_coo_tensor: {what} must be a dense tensor, got a sparse_coo one")
    if isinstance(x, Tensor):
        return x if device is None and dtype is None else x.to(device=device, dtype=dtype)
    return gt.tensor(x, dtype=dtype, device=device)


def check_indices(indices: Tensor, size: tuple[int, ...], op_name: str) -> None:
    """Raise naming the dim and the offending index when any index is negative or too big."""
    S, nnz = indices._shape
    if nnz == 0:
        return
    lo, hi = gt.stack([indices.amin(1), indices.amax(1)]).cpu().tolist()  # one device read
    for d in range(S):
        if lo[d] < 0:
            raise RuntimeError(f"{op_name}: found negative index {lo[d]} for dim {d}")
        if hi[d] >= size[d]:
            raise RuntimeError(f"{op_name}: size is inconsistent with indices: for dim {d}, "
                               f"size is {size[d]} but found index {hi[d]}")


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, requires_grad: bool = False,
                      check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> SparseTensor:
    """A sparse COO tensor from ``indices`` [sparse_dim, nnz] (int64) and ``values``
    [nnz, *dense_shape], of ``size`` (inferred from the indices when omitted).

    Like PyTorch, the result is uncoalesced unless ``is_coalesced=True`` is asserted (entries
    are not checked for order); duplicates are allowed and sum when coalesced. Gradients flow
    to ``values`` when it requires grad."""
    dev = None if device is None else to_device(device)
    if dev is None and isinstance(values, Tensor):
        dev = values.device
    if dev is None and isinstance(indices, Tensor):
        dev = indices.device
    idx = _as_tensor(indices, None, dev, "indices")
    vals = _as_tensor(values, None if dtype is None else D.to_dtype(dtype), dev, "values")
    if idx.device != vals.device:
        raise RuntimeError(f"sparse_coo_tensor: indices are on {idx.device} but values are on "
                           f"{vals.device}")
    if idx._dtype.category > D.INTEGRAL or idx._dtype is D.bool:
        raise RuntimeError(f"sparse_coo_tensor: indices must be an int64 tensor, got "
                           f"{idx._dtype.name}")
    if idx.dim() != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: "
                           f"{list(idx._shape)}")
    idx = idx.to(D.int64).contiguous()
    if vals.dim() == 0:
        raise RuntimeError("sparse_coo_tensor: values must be at least 1-d (nnz, *dense dims), "
                           "got a 0-d tensor")
    S, nnz = idx._shape
    if vals._shape[0] != nnz:
        raise RuntimeError(f"sparse_coo_tensor: indices and values must have same nnz, but got "
                           f"nnz from indices: {nnz}, nnz from values: {vals._shape[0]}")
    dense_shape = tuple(vals._shape[1:])
    if size is None:
        if nnz == 0 and S:
            raise RuntimeError("sparse_coo_tensor: can't infer the size from empty indices; "
                               "pass size")
        sparse_sizes = (idx.amax(1) + 1).cpu().tolist() if S else []
        size = (*sparse_sizes, *dense_shape)
        check_indices(idx, size, "sparse_coo_tensor")
    else:
        size = parse_size((size,))
        if len(size) != S + len(dense_shape):
            raise RuntimeError(f"sparse_coo_tensor: number of dimensions must be sparse_dim "
                               f"({S}) + dense_dim ({len(dense_shape)}), but got {len(size)}")
        if tuple(size[S:]) != dense_shape:
            raise RuntimeError(f"sparse_coo_tensor: dense sizes {list(size[S:])} don't match the "
                               f"values' trailing sizes {list(dense_shape)} (values: "
                               f"{list(vals._shape)})")
        if any(n < 0 for n in size):
            raise RuntimeError(f"sparse_coo_tensor: negative size in {list(size)}")
        check_indices(idx, size, "sparse_coo_tensor")
    out = sparse_coo(idx, vals.contiguous(), tuple(size), bool(is_coalesced))
    if requires_grad:
        out.requires_grad_(True)
    return out


def to_sparse(self: Tensor, sparse_dim: int | None = None, *, layout: Any = None,
              blocksize: Any = None, dense_dim: int | None = None) -> Any:
    """``dense.to_sparse()``: a coalesced sparse COO tensor over the first ``sparse_dim`` dims
    (all of them by default); entries where the (dense sub-)tensor is non-zero."""
    if layout is not None and layout is not gt.sparse_coo:
        from .compressed import COMPRESSED, to_layout
        if layout in COMPRESSED:
            if sparse_dim is not None:
                raise RuntimeError("to_sparse: sparse_dim argument can't be given with a "
                                   "compressed layout")
            return to_layout(self, layout, blocksize, dense_dim)
        raise RuntimeError(f"to_sparse: only layout=gputensor.sparse_coo is supported, got "
                           f"{layout}")
    if blocksize is not None:
        raise RuntimeError("to_sparse: blocksize is only for the sparse_bsr and sparse_bsc "
                           "layouts")
    if self._sparse and not isinstance(self, SparseTensor):     # a compressed tensor
        return self.to_sparse(sparse_dim, dense_dim=dense_dim)
    if dense_dim is not None:
        if sparse_dim is not None:
            raise RuntimeError("to_sparse: sparse_dim and dense_dim can't both be given")
        if not 0 <= dense_dim < self.dim():
            raise RuntimeError(f"to_sparse: dense_dim must be in [0, {self.dim() - 1}] for a "
                               f"{self.dim()}-d tensor, got {dense_dim}")
        sparse_dim = self.dim() - dense_dim
    if isinstance(self, SparseTensor):
        return self.to_sparse(sparse_dim)
    nd = self.dim()
    sd = nd if sparse_dim is None else int(sparse_dim)
    if not 1 <= sd <= nd:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [1, {nd}] for a {nd}-d tensor, "
                           f"got {sparse_dim}")
    return dense_to_sparse(self, sd)


def legacy_new(dtype: D.dtype, device: Any, args: tuple) -> SparseTensor:
    """``gt.sparse.FloatTensor(indices, values[, size])`` or ``(*size)`` (an empty tensor)."""
    dev = to_device(device) if device is not None else None
    if args and isinstance(args[0], Tensor):
        if len(args) not in (2, 3):
            raise TypeError(f"sparse legacy constructor takes (indices, values[, size]), got "
                            f"{len(args)} arguments")
        return sparse_coo_tensor(args[0], args[1], args[2] if len(args) == 3 else None,
                                 dtype=dtype, device=dev)
    size = parse_size(args)
    idx = gt.zeros((len(size), 0), dtype=gt.int64, device=dev)
    vals = gt.zeros((0,), dtype=dtype, device=dev)
    return make_sparse(idx, vals, size, True)


def _legacy_kernel(device_type: str) -> Any:
    def new(dtype: D.dtype, device: Any, args: tuple) -> SparseTensor:
        return legacy_new(dtype, device_type if device is None else device, args)
    return new


SPARSE_CPU.register("_legacy_new")(_legacy_kernel("cpu"))
SPARSE_CUDA.register("_legacy_new")(_legacy_kernel("cuda"))

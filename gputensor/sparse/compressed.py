"""Sparse compressed tensors: the CSR, CSC, BSR and BSC layouts (PyTorch's sparse compressed).

A ``CompressedTensor`` holds ``compressed`` indices (int32/int64 [n + 1], the offsets of each
row, or column for CSC/BSC, into the entries), ``plain`` indices ([nnz], each entry's column,
or row) and ``values`` ([nnz, *dense dims], or [nnz, R, C, *dense dims] for the blocked layouts,
R x C being the blocksize): ordinary dense tensors on the tensor's device, so moves and casts go
through the copy table. Like a COO tensor it has a ``SparseStorage`` in place of a storage.

Compute reuses the COO machinery (no kernels of its own): conversions expand the compressed
indices with ``searchsorted`` and build them back with the ``_csr_rowptr`` kernel, products run
the COO ``_spmm`` kernel over the expanded entries. Batched compressed tensors (index tensors of
more than one dim) are not supported.
"""

from __future__ import annotations

import copy
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._layout import sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr
from gputensor._tensor import Tensor

from ._helpers import coalesce_raw, to_dense_raw
from ._tensor import (
    SparseStorage,
    SparseTensor,
    _dense_only,
    make_sparse,
    not_supported,
    to_target,
)

COMPRESSED = (sparse_csr, sparse_csc, sparse_bsr, sparse_bsc)
ROW_MAJOR = (sparse_csr, sparse_bsr)      # compressed over rows
BLOCKED = (sparse_bsr, sparse_bsc)
# PyTorch's names: the layout in messages, and the two index tensors.
KEY = {sparse_csr: "SparseCsr", sparse_csc: "SparseCsc", sparse_bsr: "SparseBsr",
       sparse_bsc: "SparseBsc", sparse_coo: "Sparse"}
INDEX_NAMES = {sparse_csr: ("crow_indices", "col_indices"),
               sparse_bsr: ("crow_indices", "col_indices"),
               sparse_csc: ("ccol_indices", "row_indices"),
               sparse_bsc: ("ccol_indices", "row_indices")}


class CompressedTensor(Tensor):
    """A sparse tensor of layout CSR, CSC, BSR or BSC; see the module docstring."""

    __slots__ = ("_layout", "_cidx", "_pidx", "_values_t", "_cache")
    _sparse = True

    _stride = _dense_only("stride")
    _offset = _dense_only("storage_offset")
    _host = _dense_only("numpy")
    _np = _dense_only("numpy")
    _np_buf = _dense_only("numpy")

    def __new__(cls, *args: Any, **kwargs: Any) -> CompressedTensor:
        raise TypeError("construct compressed sparse tensors with gt.sparse_csr_tensor(...) "
                        "(or _csc/_bsr/_bsc, sparse_compressed_tensor) or dense.to_sparse_csr()")

    # -- metadata ------------------------------------------------------------------------------
    @property
    def layout(self) -> Any:
        return self._layout

    @property
    def is_sparse(self) -> bool:       # PyTorch: True for sparse_coo only
        return False

    @property
    def is_sparse_csr(self) -> bool:   # PyTorch: True for sparse_csr only
        return self._layout is sparse_csr

    def sparse_dim(self) -> int:
        return 2

    def dense_dim(self) -> int:
        return len(self._shape) - 2

    def _nnz(self) -> int:
        return self._pidx._shape[0]

    def _blocksize(self) -> tuple[int, int] | None:
        return tuple(self._values_t._shape[1:3]) if self._layout in BLOCKED else None

    def _index(self, name: str, compressed: bool) -> Tensor:
        names = INDEX_NAMES[self._layout]
        if name != names[0 if compressed else 1]:
            kind = "row" if name in ("crow_indices", "col_indices") else "column"
            raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but "
                               f"got {KEY[self._layout]}")
        return (self._cidx if compressed else self._pidx).detach()

    def crow_indices(self) -> Tensor:
        return self._index("crow_indices", True)

    def col_indices(self) -> Tensor:
        return self._index("col_indices", False)

    def ccol_indices(self) -> Tensor:
        return self._index("ccol_indices", True)

    def row_indices(self) -> Tensor:
        return self._index("row_indices", False)

    def values(self) -> Tensor:
        """The stored values (a view; gradients flow to the tensor's values)."""
        from ._compressed_ops import compressed_values
        return compressed_values(self)

    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        if dtype is None:    # PyTorch has no legacy tensor type for the compressed layouts
            raise RuntimeError(f"Unimplemented backend SparseCsr{self.device.type.upper()}")
        return self.to(dtype.dtype if isinstance(dtype, type) else dtype)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        raise RuntimeError(f"Sparse {KEY[self._layout][6:].upper()} tensors do not have "
                           f"is_contiguous")

    @property
    def nbytes(self) -> int:
        return self._cidx.nbytes + self._pidx.nbytes + self._values_t.nbytes

    # -- aliases and copies ---------------------------------------------------------------------
    def _alias(self, storage: Any = None) -> CompressedTensor:
        return make_compressed(self._cidx, self._pidx, self._values_t, self._shape,
                               self._layout, storage)

    def detach(self) -> CompressedTensor:
        out = self._alias(self._storage)   # shares the version counter, like a dense detach
        out._cache = self._cache
        return out

    @property
    def data(self) -> CompressedTensor:
        return self.detach()

    def _set_parts(self, cidx: Tensor, pidx: Tensor, values: Tensor) -> None:
        """Replace this tensor's entries in place (in-place ops), bumping its version."""
        self._cidx, self._pidx, self._values_t = cidx, pidx, values
        self._dtype = values._dtype
        self._cache = None
        self._storage._version += 1

    def clone(self, *, memory_format: Any = None) -> CompressedTensor:
        from ._compressed_ops import compressed_clone
        return compressed_clone(self)

    def __deepcopy__(self, memo: dict) -> CompressedTensor:
        if id(self) in memo:
            return memo[id(self)]
        out = make_compressed(self._cidx.clone(), self._pidx.clone(), self._values_t.clone(),
                              self._shape, self._layout)
        out._requires_grad = self._requires_grad
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol: int) -> tuple:
        return (rebuild_compressed, (self._cidx, self._pidx, self._values_t, self._shape,
                                     self._layout.name, self._requires_grad))

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        from ._repr import parts_repr
        c, p = INDEX_NAMES[self._layout]
        return parts_repr(self, ((c, self._cidx), (p, self._pidx), ("values", self._values_t)),
                          self._layout.name, False)

    # -- conversions ----------------------------------------------------------------------------
    def to(self, *args: Any, dtype: Any = None, device: Any = None, non_blocking: bool = False,
           copy: bool = False, memory_format: Any = None) -> CompressedTensor:
        """Move/cast: the values are cast, the indices keep their dtype; both are moved."""
        dev, dt = to_target(self, args, dtype, device)
        if dev == self.device and dt is self._dtype and not copy:
            return self
        from ._compressed_ops import compressed_to
        return compressed_to(self, dt, dev)

    def to_dense(self, dtype: Any = None, *, masked_grad: bool = True) -> Tensor:
        if dtype is not None:
            raise RuntimeError("dtype argument is not supported by sparse_csr_to_dense")
        from ._compressed_ops import compressed_to_dense
        return compressed_to_dense(self)

    def to_sparse(self, sparse_dim: int | None = None, *, layout: Any = None,
                  blocksize: Any = None, dense_dim: int | None = None) -> Tensor:
        return to_layout(self, sparse_coo if layout is None else layout, blocksize, dense_dim,
                         sparse_dim)

    # -- the ops PyTorch runs on compressed tensors --------------------------------------------
    def t(self) -> CompressedTensor:
        from ._compressed_ops import compressed_t
        return compressed_t(self)

    def transpose(self, dim0: int, dim1: int) -> CompressedTensor:
        nd = len(self._shape)
        d0, d1 = (d + nd if d < 0 else d for d in (dim0, dim1))
        if not (0 <= d0 < nd and 0 <= d1 < nd):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-nd}, {nd - 1}], but got {dim0 if not 0 <= d0 < nd else dim1})")
        if {d0, d1} != {0, 1}:
            raise RuntimeError(f"transpose(): only the two sparse dims of a {self._layout.name} "
                               f"tensor can be swapped, got dims {dim0} and {dim1}")
        return self.t()

    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        if dim is not None:
            if self._layout is not sparse_csr:
                raise RuntimeError(f"Currently the only compressed sparse format supported for "
                                   f"sum.dim_IntList is CSR, but got layout "
                                   f"{KEY[self._layout]}")
            raise RuntimeError("reduction operations on CSR tensors with keepdim=False is "
                               "unsupported" if not keepdim else
                               "sum(dim, keepdim=True) of a sparse_csr tensor is not supported "
                               "by gputensor")
        from ._compressed_ops import compressed_sum
        return compressed_sum(self, None if dtype is None else D.to_dtype(dtype))

    def mm(self, mat2: Tensor) -> Tensor:
        from ._compressed_ops import mm_route
        return mm_route("mm", self, mat2)

    def matmul(self, other: Tensor) -> Tensor:
        from ._compressed_ops import mm_route
        return mm_route("matmul", self, other)

    __matmul__ = matmul

    def __rmatmul__(self, other: Tensor) -> Tensor:
        from ._compressed_ops import mm_route
        return mm_route("matmul", other, self)

    def addmm(self, *args: Any, **kwargs: Any) -> Tensor:
        raise RuntimeError(f"addmm: computation on {self.device.type.upper()} is not "
                           f"implemented for {KEY[self._layout]} + ... (the added matrix must "
                           f"be dense)")


def make_compressed(cidx: Tensor, pidx: Tensor, values: Tensor, size: tuple[int, ...],
                    layout: Any, storage: SparseStorage | None = None) -> CompressedTensor:
    """A compressed tensor around already-validated parts (no checks, no autograd)."""
    self = object.__new__(CompressedTensor)
    if storage is None:
        storage = object.__new__(SparseStorage)
        storage.device = values._storage.device
        storage._version = 0
    self._storage = storage
    self._dtype = values._dtype
    self._shape = tuple(int(s) for s in size)
    self._layout = layout
    self._cidx, self._pidx, self._values_t = cidx, pidx, values
    self._cache = None
    return self


def rebuild_compressed(cidx: Tensor, pidx: Tensor, values: Tensor, size: tuple[int, ...],
                       layout_name: str, requires_grad: bool) -> CompressedTensor:
    """Unpickling (copy, multiprocessing): a compressed tensor from validated parts."""
    from ._compressed_construct import sparse_compressed_tensor
    layout = next(lay for lay in COMPRESSED if lay.name == layout_name)
    return sparse_compressed_tensor(cidx, pidx, values, size, layout=layout,
                                    requires_grad=requires_grad, check_invariants=True)


# -- raw conversions (no autograd) ---------------------------------------------------------------
def entry_positions(x: CompressedTensor) -> tuple[Tensor, Tensor]:
    """(row, column) of each stored entry (block row/column for the blocked layouts), int64."""
    nnz = x._nnz()
    cidx = x._cidx.to(gt.int64)
    comp = gt.searchsorted(cidx[1:].contiguous(),
                           gt.arange(nnz, dtype=gt.int64, device=x.device), right=True)
    plain = x._pidx.to(gt.int64)
    return (comp, plain) if x._layout in ROW_MAJOR else (plain, comp)


def element_parts(x: CompressedTensor) -> tuple[Tensor, Tensor, Tensor]:
    """Rows, columns and values [n, *dense] of every stored element (blocks expanded)."""
    r, c = entry_positions(x)
    vals = x._values_t
    if x._layout not in BLOCKED:
        return r, c, vals
    R, C = x._blocksize()
    nnz = x._nnz()
    dev = x.device
    rr = (r.reshape(nnz, 1, 1) * R + gt.arange(R, device=dev).reshape(1, R, 1)).expand(nnz, R, C)
    cc = (c.reshape(nnz, 1, 1) * C + gt.arange(C, device=dev).reshape(1, 1, C)).expand(nnz, R, C)
    return rr.reshape(-1), cc.reshape(-1), vals.reshape(nnz * R * C, *vals._shape[3:])


def to_coo_raw(x: CompressedTensor) -> SparseTensor:
    """The same tensor as a coalesced COO tensor with 2 sparse dims."""
    with gt.no_grad():
        r, c, vals = element_parts(x)
        coalesced = x._layout is sparse_csr
        coo = make_sparse(gt.stack([r, c]), vals.contiguous(), x._shape, coalesced)
        return coalesce_raw(coo)


def to_dense_compressed(x: CompressedTensor) -> Tensor:
    with gt.no_grad():
        out = gt.zeros(x._shape, dtype=x._dtype, device=x.device)
        if x._nnz():
            r, c, vals = element_parts(x)
            out.index_put_((r, c), vals, accumulate=True)
    return out


def _rowptr(compressed: Tensor, n: int) -> Tensor:
    """Offsets [n + 1] of sorted int64 indices ``compressed`` (the ``_csr_rowptr`` kernel)."""
    from ._matmul import csr_rowptr
    holder = make_sparse(compressed.reshape(1, -1),
                         gt.zeros((compressed._shape[0],), device=compressed.device), (n,), True)
    return csr_rowptr(holder)


def from_coo_raw(coo: SparseTensor, layout: Any) -> CompressedTensor:
    """A CSR/CSC tensor from a COO tensor with 2 sparse dims."""
    with gt.no_grad():
        if layout is sparse_csc:
            idx = coo._indices_t.flip(0).contiguous()
            M, N = coo._shape[:2]
            coo = make_sparse(idx, coo._values_t, (N, M, *coo._shape[2:]), False)
        c = coalesce_raw(coo)
        comp = c._indices_t[0].contiguous()
        cidx = _rowptr(comp, c._shape[0])
        pidx = c._indices_t[1].contiguous()
        shape = coo._shape if layout is sparse_csr else \
            (coo._shape[1], coo._shape[0], *coo._shape[2:])
        return make_compressed(cidx, pidx, c._values_t.contiguous(), shape, layout)


def from_dense_raw(d: Tensor, layout: Any, blocksize: tuple[int, int] | None,
                   dense_dim: int) -> CompressedTensor:
    """A compressed tensor of the entries (or R x C blocks) of ``d`` that are not all zero."""
    from ._ops import dense_to_sparse
    with gt.no_grad():
        if layout not in BLOCKED:
            return from_coo_raw(dense_to_sparse(d, 2), layout)
        M, N, *tail = d._shape
        R, C = blocksize
        blocks = d.reshape(M // R, R, N // C, C, *tail).transpose(1, 2)
        mask = (blocks != 0).reshape(M // R, N // C, -1).any(-1)
        if layout is sparse_bsc:
            mask = mask.t()
        nz = gt.nonzero(mask)               # row-major over the compressed dim: sorted
        comp, plain = nz[:, 0].contiguous(), nz[:, 1].contiguous()
        vals = blocks[comp, plain] if layout is sparse_bsr else blocks[plain, comp]
        cidx = _rowptr(comp, mask._shape[0])
        return make_compressed(cidx, plain, vals.contiguous(), tuple(d._shape), layout)


def values_at(g: Tensor, x: CompressedTensor) -> Tensor:
    """Dense ``g`` (of x's shape) read at x's stored entries: x's values' shape."""
    r, c = entry_positions(x)
    if x._layout not in BLOCKED:
        return g[r, c].contiguous()
    M, N, *tail = x._shape
    R, C = x._blocksize()
    blocks = g.reshape(M // R, R, N // C, C, *tail).transpose(1, 2)
    return blocks[r, c].contiguous()


def densify(g: Tensor) -> Tensor:
    """A dense form of a gradient that may arrive as a COO or compressed tensor."""
    if isinstance(g, CompressedTensor):
        return to_dense_compressed(g)
    return to_dense_raw(g) if isinstance(g, SparseTensor) else g


# -- layout conversions (public entry: to_layout) ---------------------------------------------
def _check_blocksize(x: Tensor, layout: Any, blocksize: Any, prefix: str) -> tuple[int, int]:
    name = layout.name
    if blocksize is None:
        raise RuntimeError(f"{prefix}_to_{name}: blocksize must be given for layout {name}")
    bs = tuple(int(b) for b in blocksize)
    if len(bs) != 2:
        raise RuntimeError(f"{prefix}_to_{name}: blocksize needs to be a tuple of size 2, but "
                           f"got {len(bs)}")
    M, N = x._shape[:2]
    if bs[0] <= 0 or bs[1] <= 0 or M % bs[0] or N % bs[1]:
        raise RuntimeError(f"{prefix}_to_{name}: tensor sparse size ({M},{N}) must be "
                           f"divisible by given blocksize ({bs[0]},{bs[1]})")
    return bs


def to_layout(x: Tensor, layout: Any, blocksize: Any = None, dense_dim: int | None = None,
              sparse_dim: int | None = None) -> Tensor:
    """``x.to_sparse(layout=...)``/``to_sparse_csr``/... from any layout: differentiable."""
    from ._compressed_ops import compressed_to_coo, to_compressed
    if layout is sparse_coo or layout is None:
        if not isinstance(x, CompressedTensor):
            return x.to_sparse(sparse_dim, blocksize=blocksize, dense_dim=dense_dim)
        if blocksize is not None:
            raise RuntimeError("to_sparse: blocksize is only for the sparse_bsr and sparse_bsc "
                               "layouts")
        if (sparse_dim is not None and sparse_dim != 2) or \
                (dense_dim is not None and dense_dim != x.dense_dim()):
            raise RuntimeError(f"sparse_compressed_to_sparse: a {x._layout.name} tensor "
                               f"converts to sparse_coo with its 2 sparse and {x.dense_dim()} "
                               f"dense dims, got sparse_dim={sparse_dim}, dense_dim={dense_dim}")
        return compressed_to_coo(x)
    if layout not in COMPRESSED:
        raise RuntimeError(f"to_sparse: expected a sparse layout, got {layout}")
    if x.dim() < 2:
        raise IndexError(f"to_{layout.name}: expected a tensor with at least 2 dims, got a "
                         f"{x.dim()}-d tensor")
    blocked = layout in BLOCKED
    if not blocked and blocksize is not None:
        raise RuntimeError(f"to_{layout.name}: blocksize is only for the sparse_bsr and "
                           f"sparse_bsc layouts")
    if isinstance(x, CompressedTensor):
        if dense_dim is not None:
            raise RuntimeError(f"to_{layout.name}: conversion from {KEY[x._layout]} to "
                               f"{KEY[layout]} with dense_dim argument given is not supported")
        if not blocked and x._layout in BLOCKED:
            raise RuntimeError(f"sparse_compressed_to_{layout.name}: expected SparseCsr or "
                               f"SparseCsc layout but got {KEY[x._layout]}")
        if x._layout is layout and (not blocked or
                                    tuple(int(b) for b in blocksize) == x._blocksize()):
            return x
        bs = _check_blocksize(x, layout, blocksize, "sparse_compressed") if blocked else None
        return to_compressed(x, layout, bs, x.dim() - 2)
    if isinstance(x, SparseTensor):
        if x._sparse_dim != 2:
            raise RuntimeError(f"to_{layout.name}: expected a sparse_coo tensor with 2 sparse "
                               f"dims (batched compressed tensors are not supported), got "
                               f"sparse_dim {x._sparse_dim}")
        if dense_dim is not None and dense_dim != x.dense_dim():
            raise RuntimeError(f"to_{layout.name}: conversion from Sparse to {KEY[layout]} "
                               f"with dense_dim argument given is not supported")
        bs = _check_blocksize(x, layout, blocksize, "sparse_coo") if blocked else None
        return to_compressed(x, layout, bs, x.dense_dim())
    nd = x.dim()
    dd = 0 if dense_dim is None else int(dense_dim)
    if not 0 <= dd <= nd - 2:
        raise RuntimeError(f"dense_to_{layout.name}: dense_dim argument must be in "
                           f"[0,{nd - 2}] range, but {dense_dim} is given")
    if nd - dd != 2:
        raise RuntimeError(f"dense_to_{layout.name}: batched compressed tensors are not "
                           f"supported: a {nd}-d tensor needs dense_dim={nd - 2}, got "
                           f"{dense_dim}")
    bs = _check_blocksize(x, layout, blocksize, "dense") if blocked else None
    return to_compressed(x, layout, bs, dd)


def convert_raw(x: Tensor, layout: Any, blocksize: tuple[int, int] | None,
                dense_dim: int) -> CompressedTensor:
    """The conversion behind ``to_compressed`` (arguments validated by ``to_layout``)."""
    if layout in BLOCKED:      # blocks are found on the dense form
        if isinstance(x, CompressedTensor):
            d = to_dense_compressed(x)
        else:
            d = to_dense_raw(x) if isinstance(x, SparseTensor) else x.detach()
        return from_dense_raw(d, layout, blocksize, dense_dim)
    if isinstance(x, CompressedTensor):
        return from_coo_raw(to_coo_raw(x), layout)
    if isinstance(x, SparseTensor):
        return from_coo_raw(x, layout)
    return from_dense_raw(x.detach(), layout, None, dense_dim)


def not_supported_here(name: str, x: CompressedTensor) -> Exception:
    return not_supported(name, x.device.type, x._layout.name)

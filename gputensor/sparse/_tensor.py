"""The sparse COO tensor: ``SparseTensor``, a ``gt.Tensor`` with no dense storage.

A sparse tensor holds (PyTorch's representation) ``indices`` int64 [sparse_dim, nnz],
``values`` [nnz, *dense_shape] (both ordinary dense tensors on the tensor's device), its full
``size`` and whether it is coalesced (entries sorted by linear index, no duplicates). Its
``_storage`` is a ``SparseStorage``: just the device (so the dispatcher picks the SparseCPU or
SparseCUDA backend by device type and layout) and the version counter autograd checks saved
tensors against; every in-place op on a sparse tensor replaces its indices/values and bumps it.

Dense-only methods (everything the op registry installs on ``Tensor`` that the sparse layout
does not implement, and the strided metadata ``stride()``, ``storage()``, ``numpy()``...) raise
"<op>: not supported for sparse_coo tensors" instead of reaching a dense kernel, and so does a
dense frontend that reads strided metadata (``_stride``, ``_host``, ...) of a sparse operand.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._layout import sparse_coo
from gputensor._tensor import Tensor


def _calling_op(default: str) -> str:
    """The name of the op frontend (in gputensor._ops) that touched a sparse operand, found on
    the call stack; only ever computed to word an error message."""
    from gputensor.kernels.registry import OPS
    f = sys._getframe(2)
    for _ in range(16):
        if f is None:
            break
        name = f.f_code.co_name
        if name in OPS and f.f_globals.get("__name__", "").startswith("gputensor._ops"):
            return name
        f = f.f_back
    return default


class SparseLayoutError(RuntimeError, AttributeError):
    """An op or attribute that needs strided memory, used on a sparse_coo tensor. Also an
    AttributeError, so ``hasattr``/``getattr(..., default)`` probes of strided metadata on a
    sparse tensor answer "absent" instead of raising."""


def not_supported(op_name: str, device_type: str = "cpu",
                  layout: str = "sparse_coo") -> SparseLayoutError:
    kind = "Sparse" if layout == "sparse_coo" else "SparseCsr"   # PyTorch's dispatch keys
    backend = kind + ("CUDA" if device_type == "cuda" else "CPU")
    return SparseLayoutError(f"{op_name}: not supported for {layout} tensors (the {backend} "
                             f"backend has no '{op_name}'); convert with .to_dense() first")


class SparseStorage:
    """What a sparse tensor has in place of a storage: its device and version counter."""

    __slots__ = ("device", "_version")

    def __getattr__(self, name: str) -> Any:
        raise not_supported(_calling_op(f"storage.{name}"))

    def __reduce_ex__(self, protocol: int) -> Any:
        raise RuntimeError("a sparse tensor's storage can't be pickled; pickle the tensor")


def _dense_only(attr: str) -> property:
    def get(self: Tensor) -> Any:
        raise not_supported(_calling_op(attr), self._storage.device.type, self.layout.name)
    return property(get, doc=f"Strided metadata ``{attr}``: a sparse tensor has none.")


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout == gt.sparse_coo``); see the module docstring."""

    __slots__ = ("_indices_t", "_values_t", "_sparse_dim", "_is_coalesced", "_cache")
    _sparse = True

    # Strided metadata a dense frontend might read: raise naming the op, never garbage.
    _stride = _dense_only("stride")
    _offset = _dense_only("storage_offset")
    _host = _dense_only("numpy")
    _np = _dense_only("numpy")
    _np_buf = _dense_only("numpy")

    def __new__(cls, *args: Any, **kwargs: Any) -> SparseTensor:
        raise TypeError("construct sparse tensors with gt.sparse_coo_tensor(indices, values, "
                        "size) or dense.to_sparse()")

    # -- metadata ------------------------------------------------------------------------------
    @property
    def layout(self) -> Any:
        return sparse_coo

    @property
    def is_sparse(self) -> bool:
        return True

    def sparse_dim(self) -> int:
        return self._sparse_dim

    def dense_dim(self) -> int:
        return len(self._shape) - self._sparse_dim

    def _nnz(self) -> int:
        return self._indices_t._shape[1]

    def is_coalesced(self) -> bool:
        return self._is_coalesced

    def _indices(self) -> Tensor:
        """The indices as stored (no coalescing, no autograd), like PyTorch's ``_indices``."""
        return self._indices_t

    def _values(self) -> Tensor:
        """The values as stored (no coalescing, no autograd), like PyTorch's ``_values``."""
        return self._values_t

    def is_contiguous(self, memory_format: Any = None) -> bool:
        # A sparse tensor has no strides; it counts as contiguous so generic code (the engine
        # keeping a gradient without a copy) treats it as a tensor it may hold as is.
        return True

    @property
    def nbytes(self) -> int:
        return self._indices_t.nbytes + self._values_t.nbytes

    # -- aliases and copies ---------------------------------------------------------------------
    def _alias(self, storage: Any = None) -> SparseTensor:
        return make_sparse(self._indices_t, self._values_t, self._shape, self._is_coalesced,
                           storage or self._storage)

    def detach(self) -> SparseTensor:
        out = self._alias(self._storage)   # shares the version counter, like a dense detach
        out._cache = self._cache
        return out

    @property
    def data(self) -> SparseTensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, SparseTensor):
            raise RuntimeError("data set to a tensor that has a different layout (strided) "
                               "than the sparse_coo tensor")
        self._set(value._indices_t, value._values_t, value._shape, value._is_coalesced)

    def _set(self, indices: Tensor, values: Tensor, size: tuple[int, ...],
             coalesced: bool) -> None:
        """Replace this tensor's contents in place (in-place ops, ``.data =``)."""
        self._indices_t, self._values_t = indices, values
        self._shape, self._dtype = tuple(size), values._dtype
        self._sparse_dim = indices._shape[0]
        self._is_coalesced = coalesced
        self._cache = None
        self._storage._version += 1

    def clone(self, *, memory_format: Any = None) -> SparseTensor:
        from ._ops import sparse_clone
        return sparse_clone(self)

    def __deepcopy__(self, memo: dict) -> SparseTensor:
        if id(self) in memo:
            return memo[id(self)]
        out = make_sparse(self._indices_t.clone(), self._values_t.clone(), self._shape,
                          self._is_coalesced)
        out._requires_grad = self._requires_grad
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol: int) -> tuple:
        return (rebuild_sparse, (self._indices_t, self._values_t, self._shape,
                                 self._is_coalesced, self._requires_grad))

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        from ._repr import sparse_repr
        return sparse_repr(self)

    # -- conversions ------------------------------------------------------------------------------
    def to(self, *args: Any, dtype: Any = None, device: Any = None, non_blocking: bool = False,
           copy: bool = False, memory_format: Any = None) -> SparseTensor:
        """Move/cast: the indices and values go through the copy table as dense tensors."""
        dev, dt = to_target(self, args, dtype, device)
        if dev == self.device and dt is self._dtype and not copy:
            return self
        from ._ops import sparse_to
        return sparse_to(self, dt, dev)

    def to_sparse(self, sparse_dim: int | None = None) -> SparseTensor:
        if sparse_dim is not None and sparse_dim != self._sparse_dim:
            raise RuntimeError(f"to_sparse: conversion from sparse_coo with sparse_dim "
                               f"{self._sparse_dim} to sparse_dim {sparse_dim} is not supported")
        return self

    def zero_(self) -> SparseTensor:
        idx = self._indices_t.new_zeros((self._sparse_dim, 0))
        vals = self._values_t.new_zeros((0, *self._values_t._shape[1:]))
        self._set(idx, vals, self._shape, True)
        return self


def to_target(self: Tensor, args: tuple, dtype: Any, device: Any) -> tuple[Any, D.dtype]:
    """The (device, dtype) a sparse tensor's ``.to(*args, dtype=, device=)`` asks for."""
    from gputensor._device import to_device
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, bool):
            pass
        elif a is not None:
            device = a
    dev = self.device if device is None else to_device(device)
    return dev, (self._dtype if dtype is None else D.to_dtype(dtype))


def make_sparse(indices: Tensor, values: Tensor, size: tuple[int, ...], coalesced: bool,
                storage: SparseStorage | None = None) -> SparseTensor:
    """A sparse tensor around already-validated indices/values (no checks, no autograd)."""
    self = object.__new__(SparseTensor)
    if storage is None:
        storage = object.__new__(SparseStorage)
        storage.device = indices._storage.device
        storage._version = 0
    self._storage = storage
    self._dtype = values._dtype
    self._shape = tuple(int(s) for s in size)
    self._indices_t = indices
    self._values_t = values
    self._sparse_dim = indices._shape[0]
    # 0 or 1 entries are coalesced by definition (PyTorch marks them so too).
    self._is_coalesced = bool(coalesced) or indices._shape[1] <= 1
    self._cache = None
    return self


def rebuild_sparse(indices: Tensor, values: Tensor, size: tuple[int, ...], coalesced: bool,
                   requires_grad: bool) -> SparseTensor:
    """Unpickling (gt.load, copy, multiprocessing): a sparse tensor from its parts."""
    out = make_sparse(indices, values, tuple(size), coalesced)
    if requires_grad:
        out.requires_grad_(True)
    return out


# The methods a sparse tensor implements itself (here or in gputensor/sparse/_methods.py) or
# reaches through frontends that route sparse operands (elementwise arithmetic).
_SUPPORTED = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "true_divide", "true_divide_", "div", "div_",
    "neg", "neg_", "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__",
    "__mul__", "__rmul__", "__imul__", "__truediv__", "__itruediv__", "__neg__", "__pos__",
}
# Dense-only Tensor methods that are not registry ops.
_DENSE_METHODS = (
    "stride", "storage", "untyped_storage", "storage_offset", "data_ptr", "numpy", "tolist",
    "item", "__array__", "__iter__", "__bool__", "__int__", "__float__", "__complex__",
    "__index__", "__format__", "is_set_to", "pin_memory", "share_memory_", "is_pinned",
    "is_shared", "_view", "contiguous",
)


def _block_dense_methods(cls: type | None = None, supported: set[str] | None = None) -> None:
    """Give ``cls`` (SparseTensor by default) a raising stub for every Tensor method it does
    not implement (``supported``: the ones it reaches through routing frontends)."""
    cls = cls or SparseTensor
    supported = _SUPPORTED if supported is None else supported
    from gputensor.kernels.registry import OPS
    names = set(_DENSE_METHODS)
    for op in OPS.values():
        if op.name.startswith("_") or not op.method:
            continue
        for n in (op.name, *op.aliases):
            names.add(n)
            if op.inplace:
                names.add(n + "_")
    names |= {n for n in vars(Tensor) if n.startswith("__") and n.endswith("__") and
              n[2:-2] in ("and", "or", "xor", "lshift", "rshift", "floordiv", "mod", "pow",
                          "rtruediv", "rfloordiv", "rmod", "rpow", "rand", "ror", "rxor",
                          "rlshift", "rrshift", "iand", "ior", "ixor", "ilshift", "irshift",
                          "ifloordiv", "imod", "ipow", "eq", "ne", "lt", "le", "gt", "ge",
                          "abs", "invert", "rmatmul")}
    names |= {n for n in vars(Tensor) if n.endswith("_") and not n.startswith("_")
              and callable(vars(Tensor)[n])} - {"requires_grad_", "detach_"}
    for n in names - supported:
        if n in vars(cls) or not hasattr(Tensor, n):
            continue
        setattr(cls, n, _stub(n))


def _stub(name: str) -> Any:
    op_name = name.strip("_") if name.startswith("__") else name

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        raise not_supported(op_name, self._storage.device.type, self.layout.name)
    method.__name__ = name
    method.__doc__ = f"``{name}`` is not supported for sparse tensors of this layout."
    return method


def host_values(t: Tensor) -> np.ndarray:
    """A CPU NumPy copy of a dense tensor (float16/bfloat16 as float32), for printing."""
    a = t.detach().cpu()._host
    if t._dtype in (D.float16, D.bfloat16):
        a = a.astype(np.float32)
    return a

"""``Tensor.set_``: point this tensor at another storage (or at a new empty one).

The overloads are PyTorch's: ``set_()``, ``set_(source: Tensor)``, ``set_(source: Tensor,
storage_offset, size, stride=None)`` and the same two with an ``UntypedStorage`` or a
``TypedStorage`` of this dtype. The tensor shares the storage (a storage too small for the
geometry grows, as PyTorch's does). Under autograd, a leaf that requires grad refuses, and a
tensor that takes part in a graph gets a node whose backward raises (PyTorch has no derivative
for ``set_`` either).

The version counter lives in the storage here, so after ``set_`` the tensor reports its new
storage's version (bumped by the call); PyTorch keeps a per-tensor counter instead.
"""

from __future__ import annotations

import math
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor, contiguous_strides
from gputensor.autograd import grad_mode
from gputensor.autograd.inplace import check_leaf
from gputensor.storage.typed import TypedStorage
from gputensor.storage.untyped import UntypedStorage

from ._core import tensor_method

# c10's TypeMeta names, which PyTorch's dtype mismatch message prints.
C_NAMES = {
    D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int",
    D.int32: "int", D.int64: "long int", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
    D.float32: "float", D.float64: "double", D.complex64: "c10::complex<float>",
    D.complex128: "c10::complex<double>",
}

_SIGNATURES = (
    " * ()\n * (torch.Storage source)\n"
    " * (torch.Storage source, int storage_offset, tuple of ints size, tuple of ints stride = "
    "None)\n * (Tensor source)\n"
    " * (Tensor source, int storage_offset, tuple of ints size, tuple of ints stride = None)\n")


def _bad_call(args: tuple) -> TypeError:
    got = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"set_() received an invalid combination of arguments - got ({got}), but "
                     f"expected one of:\n{_SIGNATURES}")


def _sizes(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,)
    try:
        out = tuple(value)
    except TypeError:
        raise TypeError(f"set_(): argument '{what}' must be tuple of ints, not "
                        f"{type(value).__name__}") from None
    if not all(isinstance(v, int) for v in out):
        raise TypeError(f"set_(): argument '{what}' must be tuple of ints, but found an element "
                        f"of type {type(next(v for v in out if not isinstance(v, int))).__name__}")
    return out


def _check_geometry(offset: int, size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """The bytes-in-elements extent the geometry needs, after PyTorch's checks."""
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    if len(size) != len(stride):
        raise RuntimeError(f"unequal size length ({len(size)}) and stride length "
                           f"({len(stride)})")
    if any(s < 0 for s in size):
        raise RuntimeError("numel: integer multiplication overflow")
    if any(st < 0 for st in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and "
                           f"strides={list(stride)}")
    if math.prod(size) == 0:
        return 0
    return offset + 1 + sum((n - 1) * st for n, st in zip(size, stride, strict=True))


def _source_storage(self: Tensor, source: Any) -> UntypedStorage:
    if isinstance(source, Tensor):
        if source._sparse:
            raise RuntimeError("set_(): the source must be a strided tensor, got a sparse_coo "
                               "one")
        if source._dtype is not self._dtype:
            raise RuntimeError(f"Could not set tensor of type {C_NAMES[source._dtype]} to a "
                               f"tensor of type {C_NAMES[self._dtype]}")
        storage = source._storage
    elif isinstance(source, TypedStorage):
        if source.dtype is not self._dtype:
            raise RuntimeError(f"Expected a Storage of type {C_NAMES[self._dtype]} or an "
                               f"UntypedStorage, but got type {source.dtype.legacy_name} for "
                               f"argument 1 'storage'")
        storage = source._untyped
    elif isinstance(source, UntypedStorage):
        storage = source
    else:
        raise _bad_call((source,))
    if storage.device != self.device:
        raise RuntimeError(f'Attempted to set the storage of a tensor on device "{self.device}" '
                           f'to a storage on different device "{storage.device}".  This is no '
                           f'longer allowed; the devices must match.')
    return storage


@tensor_method()
def set_(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Make this tensor a view of ``source`` (a tensor or storage) with the given geometry (the
    source tensor's, or a whole storage as 1-d, by default), or of a new empty storage."""
    names = ("source", "storage_offset", "size", "stride")
    if len(args) > 4:
        raise _bad_call(args)
    bound = dict(zip(names, args, strict=False))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            raise _bad_call((*args, *kwargs.values()))
        bound[k] = v
    if "source" not in bound:
        if bound:
            raise _bad_call(tuple(bound.values()))
        return _take(self, UntypedStorage(0, device=self.device), 0, (0,), (1,), None)
    source = bound["source"]
    itemsize = self._dtype.itemsize
    if len(bound) == 1:
        storage = _source_storage(self, source)
        if isinstance(source, Tensor):
            return _take(self, storage, source._offset, source._shape, source._stride, source)
        n = storage.nbytes() // itemsize
        return _take(self, storage, 0, (n,), (1,), None)
    if "storage_offset" not in bound or "size" not in bound or not isinstance(
            bound["storage_offset"], int):
        raise _bad_call(tuple(bound.values()))
    storage = _source_storage(self, source)
    size = _sizes(bound["size"], "size")
    stride = bound.get("stride")
    stride = contiguous_strides(size) if stride is None or len(stride) == 0 \
        else _sizes(stride, "stride")
    offset = bound["storage_offset"]
    return _take(self, storage, offset, size, stride, source if isinstance(source, Tensor)
                 else None)


def _take(self: Tensor, storage: UntypedStorage, offset: int, size: tuple[int, ...],
          stride: tuple[int, ...], source: Tensor | None) -> Tensor:
    extent = _check_geometry(offset, tuple(size), tuple(stride))
    graph = grad_mode.is_grad_enabled() and (
        self._requires_grad or (source is not None and source._requires_grad))
    if graph:
        check_leaf(self)
    need = extent * self._dtype.itemsize
    if need > storage.nbytes():
        storage.resize_(need)
    edges = []
    if graph:
        from gputensor.autograd.graph import edge_of
        edges = [edge_of(t) for t in (self, source) if t is not None and t._requires_grad]
    self._storage = storage
    self._shape, self._stride, self._offset = tuple(size), tuple(stride), offset
    self._np_buf = None
    storage._version += 1
    if edges:
        from gputensor.autograd.derivatives import NotImplementedNode, attach_raising_node
        attach_raising_node(NotImplementedNode, "set_", [self], edges)
    return self

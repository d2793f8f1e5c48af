"""PyTorch's pickle names for what gputensor checkpoints hold, both ways, without importing torch.

``torch.save`` pickles a tensor as a call to ``torch._utils._rebuild_tensor_v2`` on a storage
that is a persistent id naming its storage class (``torch.FloatStorage``), a dtype as the
global ``torch.float16``, a device as ``torch.device('cuda', 1)``, a shape as ``torch.Size``.
This module maps each such (module, name) to the gputensor object that plays its part
(``FIND``), and gives the writer :class:`TorchName` markers that pickle as exactly those
globals, so PyTorch reads gputensor's files as its own.
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D

# dtype <-> the attribute of the torch module that names it (torch.float32 ...).
TORCH_DTYPE_NAMES: dict[D.dtype, str] = {d: d.name for d in (*D.DTYPES, *D.LIMITED_DTYPES)}
# Aliases PyTorch also pickles or accepts (torch.float is torch.float32, ...).
_DTYPE_ALIASES = {"float": D.float32, "double": D.float64, "half": D.float16, "cfloat": D.complex64,
                  "cdouble": D.complex128, "long": D.int64, "int": D.int32, "short": D.int16}

# The legacy typed-storage classes a torch checkpoint names per dtype.
STORAGE_CLASS_NAMES: dict[D.dtype, str] = {
    D.float32: "FloatStorage", D.float64: "DoubleStorage", D.float16: "HalfStorage",
    D.bfloat16: "BFloat16Storage", D.complex64: "ComplexFloatStorage",
    D.complex128: "ComplexDoubleStorage", D.int8: "CharStorage", D.int16: "ShortStorage",
    D.int32: "IntStorage", D.int64: "LongStorage", D.uint8: "ByteStorage",
    D.bool: "BoolStorage"}
UNTYPED_STORAGE = "UntypedStorage"


class TorchName:
    """A global of PyTorch's (``module.name``) that the checkpoint writer pickles by name.
    Interned: one instance per name, so a pickle memoises it once."""

    __slots__ = ("module", "name")
    _interned: dict[tuple[str, str], TorchName] = {}

    def __new__(cls, module: str, name: str) -> TorchName:
        key = (module, name)
        obj = cls._interned.get(key)
        if obj is None:
            obj = super().__new__(cls)
            obj.module, obj.name = module, name
            cls._interned[key] = obj
        return obj

    def __call__(self, *args: Any) -> Any:  # pickle requires a reduce's function be callable
        raise TypeError(f"{self.module}.{self.name} is a name for PyTorch's pickles only")

    def __repr__(self) -> str:
        return f"TorchName({self.module}.{self.name})"


REBUILD_TENSOR_V2 = TorchName("torch._utils", "_rebuild_tensor_v2")
# PyTorch's record for dtypes without a typed storage class (uint16, float8, ...).
REBUILD_TENSOR_V3 = TorchName("torch._utils", "_rebuild_tensor_v3")
REBUILD_PARAMETER = TorchName("torch._utils", "_rebuild_parameter")
REBUILD_FROM_TYPE_V2 = TorchName("torch._tensor", "_rebuild_from_type_v2")
REBUILD_SPARSE = TorchName("torch._utils", "_rebuild_sparse_tensor")
GET_LAYOUT = TorchName("torch.serialization", "_get_layout")
SIZE = TorchName("torch", "Size")
DEVICE = TorchName("torch", "device")


def dtype_name(dt: D.dtype) -> TorchName:
    return TorchName("torch", TORCH_DTYPE_NAMES[dt])


def storage_class_name(dt: D.dtype | None) -> TorchName:
    """The storage class of a typed storage (None: an untyped one)."""
    # PyTorch pickles its untyped storage class by its defining module (torch.storage)
    return TorchName("torch.storage", UNTYPED_STORAGE) if dt is None else \
        TorchName("torch", STORAGE_CLASS_NAMES[dt])


class StorageClass:
    """What reading ``torch.FloatStorage`` (and the others) gives: the dtype a storage
    persistent id means (None for ``torch.UntypedStorage``)."""

    __slots__ = ("dtype", "name")

    def __init__(self, name: str, dtype: D.dtype | None) -> None:
        self.name, self.dtype = name, dtype

    def __repr__(self) -> str:
        return f"torch.{self.name}"


STORAGE_CLASSES: dict[str, StorageClass] = {
    **{name: StorageClass(name, dt) for dt, name in STORAGE_CLASS_NAMES.items()},
    UNTYPED_STORAGE: StorageClass(UNTYPED_STORAGE, None)}


def torch_dtype(name: str) -> D.dtype | None:
    """The gputensor dtype ``torch.<name>`` names, or None."""
    for dt, n in TORCH_DTYPE_NAMES.items():
        if n == name:
            return dt
    return _DTYPE_ALIASES.get(name)

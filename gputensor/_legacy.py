"""Legacy tensor types: gt.FloatTensor, gt.cuda.FloatTensor, gt.sparse.FloatTensor, ...

Each is a class built from (backend, dtype) whose metaclass makes it a constructor
(``gt.FloatTensor(2, 3)``, ``gt.FloatTensor([1, 2])``) and an ``isinstance`` check.
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor.kernels.registry import BACKENDS, Backend

# The seed's nine plus bfloat16.
LEGACY_DTYPES = (D.float64, D.float32, D.float16, D.bfloat16, D.int64, D.int32, D.int16, D.int8,
                 D.uint8, D.bool)
_MODULE_OF_BACKEND = {"CPU": "gputensor", "CUDA": "gputensor.cuda",
                      "SparseCPU": "gputensor.sparse", "SparseCUDA": "gputensor.cuda.sparse"}


class _LegacyTensorType(type):
    dtype: D.dtype
    backend: Backend

    def __instancecheck__(cls, obj: Any) -> bool:
        from gputensor._tensor import Tensor
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and obj.device.type == cls.backend.device_type
                and obj.layout.name == cls.backend.layout_name)

    def __call__(cls, *args: Any, device: Any = None) -> Any:
        if cls.backend.layout_name != "strided":
            return cls.backend.kernel("_legacy_new")(cls.dtype, device, args)
        from gputensor._ops.creation import legacy_construct
        if device is None and cls.backend.device_type == "cuda":
            device = "cuda"
        return legacy_construct(cls.dtype, device, args)

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__name__}'>"


LEGACY_TYPES: dict[tuple[str, D.dtype], type] = {}


def _generate() -> None:
    for backend in BACKENDS.values():
        module = _MODULE_OF_BACKEND[backend.name]
        for dt in LEGACY_DTYPES:
            name = f"{dt.legacy_name}Tensor"
            cls = _LegacyTensorType(name, (), {"dtype": dt, "backend": backend,
                                               "__module__": module, "__qualname__": name})
            LEGACY_TYPES[backend.name, dt] = cls


def types_in(module: str) -> dict[str, type]:
    return {c.__name__: c for c in LEGACY_TYPES.values() if c.__module__ == module}


def tensor_type_name(t: Any) -> str:
    backend = BACKENDS[t.device.type, t.layout.name]
    return f"{_MODULE_OF_BACKEND[backend.name]}.{t.dtype.legacy_name}Tensor"


def to_legacy_type(t: Any, target: Any) -> Any:
    """x.type(gt.DoubleTensor), x.type('gputensor.cuda.FloatTensor') or x.type(gt.float64)."""
    if isinstance(target, str) and target.endswith("Tensor"):
        name = target.replace("torch.", "gputensor.", 1)
        match = [c for c in LEGACY_TYPES.values() if f"{c.__module__}.{c.__name__}" == name]
        if not match:
            raise ValueError(f"invalid type: {target!r}")
        target = match[0]
    if isinstance(target, _LegacyTensorType):
        dev = t.device if target.backend.device_type == t.device.type else \
            target.backend.device_type
        return t.to(device=dev, dtype=target.dtype)
    return t.to(D.to_dtype(target))


_generate()

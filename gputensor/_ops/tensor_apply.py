"""``apply_``, ``map_`` and ``map2_``: a Python callable over a CPU tensor's elements (with the
elements of other tensors broadcast to its shape), each result stored back as PyTorch's
``store_scalar`` does (a float into an integer dtype is checked as a double and truncated, an
unsigned dtype wraps negatives, a float32 element takes an overflowing double as inf). Slow,
and CPU only, as in PyTorch; autograd refuses them.

Unlike PyTorch, which leaves it alone, the write bumps the version counter (as every in-place
write here does).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ._core import tensor_method
from ._scalar_range import _INT_RANGE


# -- Python callbacks over the elements (CPU only, as PyTorch) ----------------------------------
def _unpack_integral(obj: Any, dtype: D.dtype) -> int:
    # torch/csrc/utils/python_scalars.h: a float is checked as a double, anything else must
    # be an integer (Python's own TypeError otherwise) that fits a long long.
    name = dtype.np_dtype.name
    if isinstance(obj, float):
        lo, hi = _INT_RANGE[dtype]
        if not float(lo) <= obj <= float(hi):   # NaN fails too
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        return int(obj)
    v = operator.index(obj)
    if not -2**63 <= v < 2**63:
        raise ValueError("Overflow when unpacking long long")
    lo, hi = _INT_RANGE[dtype]
    if not (-hi <= v <= hi if lo == 0 else lo <= v <= hi):
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    return v & hi if lo == 0 else v   # unsigned: negatives wrap


def _unpack_double(obj: Any) -> float:
    if isinstance(obj, float):
        return obj
    kind = type(obj)
    if hasattr(kind, "__float__"):
        return float(obj)
    if hasattr(kind, "__index__"):
        return float(operator.index(obj))   # Python's OverflowError for a huge int
    raise TypeError(f"must be real number, not {kind.__name__}")


def _store_value(obj: Any, dtype: D.dtype) -> Any:
    """The Python result of a callback as an element of ``dtype`` (PyTorch's store_scalar)."""
    if dtype is D.bool:
        if isinstance(obj, float | complex):
            return bool(obj)
        return bool(operator.index(obj))
    if dtype.is_complex:
        if isinstance(obj, complex) or hasattr(type(obj), "__complex__"):
            return complex(obj)
        return complex(_unpack_double(obj))
    if dtype.is_floating_point:
        return _unpack_double(obj)
    return _unpack_integral(obj, dtype)


def _load_value(arr: np.ndarray, idx: tuple, dtype: D.dtype) -> Any:
    v = arr[idx]
    if dtype in (D.float16, D.bfloat16):
        return float(v)
    return v.item()


def _check_callback(name: str, self: Tensor, args: dict[str, Tensor]) -> None:
    for pos, (label, t) in enumerate(args.items(), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{label}' (position {pos}) must be Tensor, not "
                            f"{type(t).__name__}")
    if self._requires_grad or any(t._requires_grad for t in args.values()):
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    from gputensor._legacy import tensor_type_name
    want = tensor_type_name(self).replace("gputensor", "torch", 1)
    for label, t in args.items():
        if t._dtype is not self._dtype or t.device != self.device or t._sparse != self._sparse:
            got = tensor_type_name(t).replace("gputensor", "torch", 1)
            what = f"'{label}'" if name == "map_" else f"argument '{label}'"
            raise TypeError(f"{name}: expected {want} for {what} (got {got})")
    if self._sparse:
        from gputensor.sparse._tensor import not_supported
        raise not_supported(name, self.device.type)
    if self.device.type != "cpu":
        raise TypeError(f"{name} is only implemented on CPU tensors")


def _apply(self: Tensor, fn: Callable[..., Any], others: tuple[Tensor, ...]) -> Tensor:
    dt = self._dtype
    out = self._host
    srcs = [o.expand(self._shape)._host for o in others]
    with np.errstate(over="ignore"):   # a double stored into float32/float16 rounds to inf
        for idx in np.ndindex(self._shape):
            args = [_load_value(out, idx, dt), *(_load_value(s, idx, dt) for s in srcs)]
            out[idx] = _store_value(fn(*args), dt)
    self._bump_version()
    return self


@tensor_method()
def apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replace each element ``v`` by ``callable(v)`` (Python numbers in and out; CPU only,
    slow: for the odd element-wise function no op expresses)."""
    _check_callback("apply_", self, {})
    return _apply(self, callable, ())


@tensor_method()
def map_(self: Tensor, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """``self[i] = callable(self[i], tensor[i])``, ``tensor`` broadcast to this shape (CPU)."""
    _check_callback("map_", self, {"other": tensor})
    return _apply(self, callable, (tensor,))


@tensor_method()
def map2_(self: Tensor, x: Tensor, y: Tensor,
          callable: Callable[[Any, Any, Any], Any]) -> Tensor:
    """``self[i] = callable(self[i], x[i], y[i])``, ``x``/``y`` broadcast (CPU only)."""
    _check_callback("map2_", self, {"x": x, "y": y})
    return _apply(self, callable, (x, y))

"""In-place methods of a BatchedTensor (``x.add_(y)``, ``x.copy_(y)``, ``x[i] = v``, ``x.t_()``).

Ops declared with an ``inplace_fn`` and the hand-written ``Tensor`` methods write the tensor's
memory directly, which a batched tensor does not expose. BatchedTensor overrides them:

* ``x.name_(*args)`` with an out-of-place ``name`` computes ``x.name(*args)`` through its
  batching rule and copies the result into ``x``'s value, with PyTorch's errors for a result
  that cannot be written into ``x`` (a batched operand where ``x`` is not batched, a wider
  shape, a dtype ``x`` cannot hold);
* in-place view ops (``t_``, ``transpose_``, ``unsqueeze_``, ...) re-point ``x`` at the view;
* ``copy_``, ``fill_``, ``zero_`` and basic-index assignment write through views of the value;
* the rest (``fill_diagonal_``, advanced-index assignment) run once per sample on the sample's
  view of the value, with the fallback's performance warning.

The elementwise in-place ops keep their rule (gputensor.func._rules_elementwise) and the random
samplers theirs (gputensor.func._rules_random). Only batched tensors see these methods, so plain
tensors pay nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ._batched import BatchedTensor, materialize
from ._dispatch import FALLBACK_WARNING, RULES, inplace_error
from ._state import VMAP

_VIEW_INPLACE = ("t_", "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_",
                 "as_strided_")
_NOT_BATCHABLE = ("resize_", "resize_as_", "share_memory_", "set_")


def _size(x: BatchedTensor) -> int:
    return VMAP.levels[x._level - 1].size


def write(self: BatchedTensor, result: Any, name: str) -> BatchedTensor:
    """Store ``result`` (a tensor of ``self``'s per-sample shape, batched or not) in ``self``."""
    if not isinstance(result, Tensor):
        raise TypeError(f"{name}: expected a Tensor result, got {type(result).__name__}")
    if not D.can_cast(result.dtype, self.dtype):
        raise RuntimeError(f"result type {result.dtype.legacy_name} can't be cast to the desired "
                           f"output type {self.dtype.legacy_name}")
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast "
                           f"shape {list(result.shape)}")
    if type(result) is BatchedTensor and result._level > self._level:
        raise inplace_error(name)
    self._value.copy_(materialize(result, self._level, _size(self)))
    return self


def _via_out_of_place(name: str) -> Callable:
    base = getattr(Tensor, name[:-1])

    def method(self: BatchedTensor, *args: Any, **kwargs: Any) -> BatchedTensor:
        return write(self, base(self, *args, **kwargs), name)
    method.__name__ = name
    return method


def _view_inplace(name: str) -> Callable:
    base = getattr(Tensor, name[:-1])

    def method(self: BatchedTensor, *args: Any, **kwargs: Any) -> BatchedTensor:
        view = base(self, *args, **kwargs)
        self._value, self._shape, self._stride = view._value, view._shape, view._stride
        return self
    method.__name__ = name
    return method


def copy_(self: BatchedTensor, src: Any, non_blocking: bool = False) -> BatchedTensor:
    if isinstance(src, Tensor):
        src = src.to(dtype=self.dtype, device=self.device).expand_as(self)
    else:
        src = Tensor.new_full(self, tuple(self.shape), src)
    return write(self, src, "copy_")


def fill_(self: BatchedTensor, value: Any) -> BatchedTensor:
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.dim()} dimensions.")
    return copy_(self, value)


def zero_(self: BatchedTensor) -> BatchedTensor:
    return copy_(self, 0)


def detach_(self: BatchedTensor) -> BatchedTensor:
    self._value.detach_()
    return self


def _basic(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, int | slice | bool) for p in parts)


def setitem(self: BatchedTensor, index: Any, value: Any) -> None:
    if _basic(index):   # a basic index selects a view of the value: write through it
        copy_(Tensor.__getitem__(self, index), value)
        return
    per_sample(self, "__setitem__", lambda sample, i: sample.__setitem__(
        _sample(index, self._level, i), _sample(value, self._level, i)))


def _sample(x: Any, level: int, i: int) -> Any:
    if type(x) is BatchedTensor and x._level == level:
        return x._value[i]
    if type(x) in (list, tuple):
        return type(x)(_sample(y, level, i) for y in x)
    return x


def per_sample(self: BatchedTensor, name: str, body: Callable[[Tensor, int], Any]) -> None:
    """Run ``body(sample_view, i)`` for each sample of ``self`` (the slow path, warned)."""
    if not VMAP.fallback_enabled:
        raise RuntimeError(f"Batching rule not implemented for {name}. We could not generate a "
                           f"fallback.")
    warnings.warn(FALLBACK_WARNING.format(name), UserWarning, stacklevel=4)
    for i in range(_size(self)):
        body(self._value[i], i)


def _per_sample_method(name: str) -> Callable:
    def method(self: BatchedTensor, *args: Any, **kwargs: Any) -> BatchedTensor:
        level = self._level
        per_sample(self, name, lambda sample, i: getattr(sample, name)(
            *_sample(args, level, i), **{k: _sample(v, level, i) for k, v in kwargs.items()}))
        return self
    method.__name__ = name
    return method


def _refused(name: str) -> Callable:
    def method(self: BatchedTensor, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"vmap: {name} changes a tensor's storage, which a batched tensor "
                           f"does not have; call it outside vmap")
    method.__name__ = name
    return method


def _install() -> None:
    special = {"copy_": copy_, "fill_": fill_, "zero_": zero_, "detach_": detach_,
               "__setitem__": setitem, "requires_grad_": Tensor.requires_grad_}
    for name, method in special.items():
        setattr(BatchedTensor, name, method)
    for name in _VIEW_INPLACE:
        setattr(BatchedTensor, name, _view_inplace(name))
    for name in _NOT_BATCHABLE:
        setattr(BatchedTensor, name, _refused(name))
    for name in dir(Tensor):
        if (not name.endswith("_") or name.endswith("__") or name.startswith("_")
                or name in BatchedTensor.__dict__ or name in RULES):
            continue
        if hasattr(Tensor, name[:-1]):
            setattr(BatchedTensor, name, _via_out_of_place(name))
        else:
            setattr(BatchedTensor, name, _per_sample_method(name))


_install()

"""Parameter (a Tensor that a Module registers as learnable) and Buffer (marks module state).

A Parameter is a real ``gt.Tensor`` subclass sharing its source's storage. Ops build their
results with ``Tensor._make``/``empty``, so arithmetic on a Parameter returns plain Tensors,
as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor
from gputensor.serialization import register_safe_global


def _empty() -> Tensor:
    from gputensor import empty
    return empty(0)


class Parameter(Tensor):
    """``Parameter(data=None, requires_grad=True)``: a leaf tensor a Module treats as learnable."""

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = _empty()
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        self = cls._make(data._storage, data._dtype, data._shape, data._stride, data._offset)
        # The setter rejects integer dtypes with PyTorch's message.
        self.requires_grad = requires_grad
        return self

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: int) -> tuple:
        # Pickle the plain data tensor; rebuilding wraps it again so the type survives.
        return (_rebuild_parameter, (self.detach(), self._requires_grad))

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self._requires_grad)
        memo[id(self)] = result
        return result


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


class _BufferMeta(type(Tensor)):
    # isinstance(t, Buffer) is a flag check: Buffer(...) returns a plain Tensor carrying
    # ``_is_buffer``, so the module stores an ordinary tensor (as PyTorch does).
    def __instancecheck__(cls, instance: Any) -> bool:
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """``Buffer(data, *, persistent=True)``: assigning one to a module attribute registers it
    as a buffer (``persistent=False`` keeps it out of ``state_dict``)."""

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Tensor:
        if data is None:
            data = _empty()
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): data must be a Tensor, got {type(data).__name__}")
        t = data.detach()
        if data.requires_grad:
            t.requires_grad_(True)
        t.persistent = persistent
        t._is_buffer = True
        return t


# Checkpoints hold Parameters; weights_only loading may rebuild them (and nothing unlisted).
register_safe_global(Parameter)

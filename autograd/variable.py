"""``Variable``: PyTorch's pre-0.4 name for a tensor that records autograd history.

Since PyTorch 0.4 every tensor does, and ``Variable(t, requires_grad=...)`` just returns a
tensor; ``isinstance(t, Variable)`` holds for every tensor. Old programs still write both.
"""

from __future__ import annotations

from typing import Any


class _VariableMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        from gputensor._tensor import Tensor

        return isinstance(instance, Tensor)

    def __call__(cls, data: Any = None, requires_grad: bool = False,
                 volatile: bool = False) -> Any:
        from gputensor import empty
        from gputensor._tensor import Tensor

        if volatile:
            raise RuntimeError("volatile was removed (PyTorch 0.4): use `with gt.no_grad():`")
        t = empty(0) if data is None else data
        if not isinstance(t, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{type(t).__name__}")
        out = t.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


class Variable(metaclass=_VariableMeta):
    """``Variable(tensor, requires_grad=False)``: the tensor itself (detached, with the given
    ``requires_grad``); every tensor is an instance."""


class _ExecutionEngine:
    """``Variable._execution_engine``: the engine hooks talk to (``queue_callback``)."""

    @staticmethod
    def queue_callback(callback: Any) -> None:
        from .engine import queue_callback
        queue_callback(callback)


Variable._execution_engine = _ExecutionEngine()

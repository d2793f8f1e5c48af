"""The per-op interception point of the dispatcher (PyTorch's TorchDispatchMode, in miniature).

Every op call passes one of a few wrappers, each of which computes the op below autograd: the
op wrappers of ``autograd/derivatives.py`` (``differentiable``) and ``_ops/_core.py``
(``_vmappable``), the elementwise frontend (``_ops/elementwise.py``) and custom ops
(``library.CustomOpDef``). Each tests ``OP_HOOK.active`` (zero unless some thread has a handler
pushed, so ops pay one attribute read otherwise) and, when set, hands the computation to
:meth:`OpHook.call` instead of running it. Autograd then records the op's node around whatever
the handler returned, so a handler can replace an op's result without touching the graph.

Handlers are thread-local (like PyTorch's modes); the innermost one sees the op. While it
handles the op (its policy code, and the op's own inner ops), no handler of the thread is
active, as inside a mode's ``__torch_dispatch__``. Selective activation checkpointing
(gputensor/utils/_selective_checkpoint.py) is the only user.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# handler(op, args, kwargs, compute) -> the op's result; ``op`` is a registry op name or a
# custom op, ``compute()`` runs the op itself.
Handler = Callable[[Any, tuple, dict, Callable[[], Any]], Any]


class OpHook:
    __slots__ = ("active", "_local", "_lock")

    def __init__(self) -> None:
        self.active = 0   # the number of pushed handlers, over all threads
        self._local = threading.local()
        self._lock = threading.Lock()

    def _stack(self) -> list[Handler]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def push(self, handler: Handler) -> None:
        self._stack().append(handler)
        with self._lock:
            self.active += 1

    def pop(self, handler: Handler) -> None:
        stack = self._stack()
        if not stack or stack[-1] is not handler:
            raise RuntimeError("op hook handlers must be exited in the reverse order of entry")
        stack.pop()
        with self._lock:
            self.active -= 1

    def call(self, op: Any, args: tuple, kwargs: dict, compute: Callable[[], Any]) -> Any:
        """Run ``compute`` through this thread's innermost handler (directly when none)."""
        stack = getattr(self._local, "stack", None)
        if not stack:
            return compute()
        self._local.stack = []   # nothing the handler runs is seen again
        try:
            return stack[-1](op, args, kwargs, compute)
        finally:
            self._local.stack = stack


OP_HOOK = OpHook()

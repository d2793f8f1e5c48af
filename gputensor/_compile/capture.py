"""Recording one call of a function as a flat list of backend steps.

A ``Capture`` stands in the profiler's hook slot (gputensor/profiler/hooks.py: every backend
kernel, copy-table mover and CUDA launch goes through it while it is installed) and keeps the
outermost calls in order: kernels with their exact arguments, copies between storages, and
the replayable checks that op frontends declare (``state.replayable_check``). Anything it
cannot replay is a graph break: a value read on the host, Python-side state changing with the
computation, a kernel that hands data back to its caller, a user kernel launched directly.

The steps still point at the tensors of the recorded call. ``program.retarget`` then moves
them onto buffers of their own, which is why the capture notes every storage created while it
runs (``created``): those belong to the recorded call and get private copies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gputensor.autograd import graph as _graph
from gputensor.profiler import hooks
from gputensor.storage.allocator import host_bytes

from . import state


class GraphBreakError(RuntimeError):
    """Raised by a ``fullgraph=True`` capture at a construct it cannot replay."""


KERNEL, COPY, CHECK, RESTORE = "kernel", "copy", "check", "restore"


@dataclass
class Step:
    """One replayable call. ``fn(*args, **kwargs)`` for kernels, copies and checks (a check
    also keeps what it returned, which a replay must see again); ``backend``/``name`` let the
    profiler record a replayed kernel under its own name."""

    kind: str
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any] = field(default_factory=dict)
    backend: Any = None
    name: str = ""
    result: Any = None


class Capture:
    """The recorder of one call (used as a context manager around it)."""

    record_launches = False  # hooks' launch observer asks; launches belong to their kernel

    def __init__(self, fullgraph: bool = False) -> None:
        self.thread = threading.get_ident()
        self.fullgraph = fullgraph
        self.steps: list[Step] = []
        self.broken: str | None = None
        self.recording = True
        self.created: dict[int, Any] = {}  # id(storage) -> storage made during the capture
        self.first_seq = 0                 # autograd nodes from here on belong to the capture
        self._depth = 0
        self._checking = 0
        self._inner: Any = None
        self.seen_versions: dict[int, tuple[Any, int]] = {}  # external storages' versions
        self._hooks_were_installed = False

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> Capture:
        if state.TRACE is not None:
            raise RuntimeError("gt.compile: a compiled function was called while another one "
                               "was being captured (nested captures are not supported)")
        self._hooks_were_installed = hooks.is_installed()
        self._inner = hooks.active()  # a running profiler keeps recording through us
        hooks.install(self)
        self.first_seq = next(_graph._sequence)
        state.TRACE = self
        return self

    def __exit__(self, *exc: object) -> None:
        state.TRACE = None
        if self._inner is not None:
            hooks.install(self._inner)
        elif self._hooks_were_installed:
            hooks.detach()
        else:
            hooks.remove()

    # -- what the rest of gputensor reports --------------------------------------------------
    def graph_break(self, what: str) -> None:
        if self._checking:
            return  # a replayable check's own reads are part of it
        if self.fullgraph:
            raise GraphBreakError(f"gt.compile(fullgraph=True): {what} cannot be captured "
                                  "(a graph break)")
        if self.broken is None:
            self.broken = what

    def storage_created(self, storage: Any) -> None:
        # Strong references: a temporary freed during the capture must not lend its id to a
        # later storage.
        self.created[id(storage)] = storage

    def check(self, fn: Callable[..., Any], args: tuple) -> Any:
        self._checking += 1
        try:
            result = fn(*args)
        finally:
            self._checking -= 1
        if self._records():
            self.steps.append(Step(CHECK, fn, args, result=result))
        return result

    def constant(self, t: Any) -> None:
        """A CPU tensor filled from host data: its values as they are now, restored on replay
        at this point (a later kernel may write into it)."""
        if self._records():
            snapshot = host_bytes(t._storage._buf).copy()
            self.steps.append(Step(RESTORE, _restore, (t._storage, snapshot)))

    # -- the hook slot (profiler/hooks.py calls these) ---------------------------------------
    def _records(self) -> bool:
        return (self.recording and self.broken is None and not self._depth
                and not self._checking and threading.get_ident() == self.thread)

    def kernel(self, backend: Any, name: str, fn: Callable[..., Any], args: Sequence[Any],
               kwargs: dict[str, Any]) -> Any:
        if not self._records():
            return self._run_kernel(backend, name, fn, args, kwargs)
        self._note_versions(args)
        self._depth += 1
        try:
            result = self._run_kernel(backend, name, fn, args, kwargs)
        finally:
            self._depth -= 1
        if result is not None:
            self.graph_break(f"the kernel {name!r} returned data to its caller (a "
                             "data-dependent result)")
        else:
            self.steps.append(Step(KERNEL, fn, tuple(args), dict(kwargs), backend, name))
        return result

    def _note_versions(self, args: Sequence[Any]) -> None:
        """The version of each storage a step touches, before its first recorded step (an
        external storage whose version moved was written by the function: a replay bumps
        it too)."""
        seen = self.seen_versions
        for a in args:
            for t in (a if isinstance(a, list | tuple) else (a,)):
                st = getattr(t, "_storage", None)
                if st is not None and id(st) not in seen and hasattr(st, "_version"):
                    seen[id(st)] = (st, st._version)

    def _run_kernel(self, backend: Any, name: str, fn: Callable[..., Any], args: Sequence[Any],
                    kwargs: dict[str, Any]) -> Any:
        inner = self._inner
        if inner is not None:
            return inner.kernel(backend, name, fn, args, kwargs)
        return fn(*args, **kwargs)

    def copy(self, mover: Callable[..., None], dst: Any, dst_offset: int, src: Any,
             src_offset: int, count: int) -> None:
        records = self._records()
        inner = self._inner
        self._depth += 1  # the launches a mover makes are its own
        try:
            if inner is not None:
                inner.copy(mover, dst, dst_offset, src, src_offset, count)
            else:
                mover(dst, dst_offset, src, src_offset, count)
        finally:
            self._depth -= 1
        if records:
            self.steps.append(Step(COPY, mover, (dst, dst_offset, src, src_offset, count)))

    def launch(self, source: str, name: str, grid: Any, block: Any, shared_bytes: int,
               run: Callable[[], None]) -> None:
        if self._records():
            self.graph_break(f"the CUDA kernel {name!r} launched outside a backend kernel")
        inner = self._inner
        if inner is not None:
            inner.launch(source, name, grid, block, shared_bytes, run)
        else:
            run()


def _restore(storage: Any, snapshot: np.ndarray) -> None:
    host_bytes(storage._buf)[...] = snapshot

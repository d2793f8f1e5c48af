"""The capture in progress, if any: what the rest of gputensor tells it about.

Kept free of imports so that ``_tensor.py`` and the op frontends can import it. Outside a
capture every hook here is one global read.
"""

from __future__ import annotations

import threading
from typing import Any


class Config:
    """``gt.compiler.config``: how many graphs one compiled function may capture before new
    call signatures run eagerly (torch._dynamo.config.cache_size_limit's default, 8)."""

    cache_size_limit = 8
    fuse = True  # runs of elementwise ops become one kernel each (fusion.py)


config = Config()

# The Capture recording on this process (capture.py), or None. Only its own thread records.
TRACE: Any = None


def _mine() -> Any:
    trace = TRACE
    if trace is not None and trace.thread == threading.get_ident():
        return trace
    return None


def host_read(what: str) -> None:
    """A tensor's value is about to be read on the host (``item()``, ``bool(t)``, ...): a
    capture cannot replay Python code that depends on it, so this is a graph break."""
    trace = _mine()
    if trace is not None:
        trace.graph_break(what)


def host_effect(what: str) -> None:
    """Python-side state is about to change with the computation (an optimizer's step count,
    an in-place write through a host view): a graph break, for the same reason."""
    trace = _mine()
    if trace is not None:
        trace.graph_break(what)


def replayable_check(check: Any, *args: Any) -> Any:
    """Run ``check(*args)`` (a validation that may read values and raise) and, in a capture,
    record it so every replay runs it again at the same point; its host reads are allowed."""
    trace = _mine()
    if trace is None:
        return check(*args)
    return trace.check(check, args)


def host_constant(t: Any) -> Any:
    """``t`` was filled on the host, not by a kernel (a tensor made from NumPy data): a replay
    restores these values before the steps that follow, in case a later kernel writes it."""
    trace = _mine()
    if trace is not None:
        trace.constant(t)
    return t


def is_capturing() -> bool:
    return _mine() is not None

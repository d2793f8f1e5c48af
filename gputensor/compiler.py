"""gt.compiler: torch.compiler's names for gputensor's compiler (gputensor/_compile/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor._compile import state as _state
from gputensor._compile.state import config

__all__ = ["compile", "config", "disable", "is_compiling", "is_dynamo_compiling", "reset"]


def compile(*args: Any, **kwargs: Any) -> Any:
    """``gt.compile`` (see gputensor/_compile/api.py)."""
    from gputensor._compile.api import compile as _compile

    return _compile(*args, **kwargs)


def reset() -> None:
    """Forget every captured graph of every compiled function (they capture again)."""
    from gputensor._compile.compiled import _ALL

    for fn in list(_ALL):
        fn.reset()


def disable(fn: Callable[..., Any] | None = None, recursive: bool = True) -> Any:
    """Run ``fn`` eagerly even when a compiled function calls it: inside a capture its host
    code is a graph break, so the calls around it run eagerly too."""
    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        import functools

        @functools.wraps(f)
        def eager(*args: Any, **kwargs: Any) -> Any:
            _state.host_effect(f"gt.compiler.disable'd {getattr(f, '__qualname__', f)}")
            return f(*args, **kwargs)
        return eager

    return wrap if fn is None else wrap(fn)


def is_compiling() -> bool:
    """True while gputensor captures a compiled function's call."""
    return _state.is_capturing()


is_dynamo_compiling = is_compiling

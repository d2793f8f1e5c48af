"""Grad mode: whether ops record graph nodes (no_grad, enable_grad, set_grad_enabled...)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any


class _GradState(threading.local):
    """Per-thread grad mode. Defaults are class attributes: reading an attribute a thread
    never set then costs no AttributeError (``getattr(local, name, default)`` raised and
    caught one on every op, ~0.35 us)."""

    enabled = True
    inference = False


_state = _GradState()


def is_grad_enabled() -> bool:
    return _state.enabled


def _set_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _GradModeContext:
    """Base for the grad-mode context managers; each also works as a decorator."""

    def _enter_mode(self) -> bool:
        return True

    def __enter__(self) -> None:
        self._prev = (is_grad_enabled(), is_inference_mode_enabled())
        _set_enabled(self._enter_mode())

    def __exit__(self, *exc: Any) -> None:
        _set_enabled(self._prev[0])
        _state.inference = self._prev[1]

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(*self._args()):
                return fn(*args, **kwargs)
        return wrapper

    def _args(self) -> tuple:
        return ()


class no_grad(_GradModeContext):
    def _enter_mode(self) -> bool:
        return False


class enable_grad(_GradModeContext):
    def _enter_mode(self) -> bool:
        return True


class set_grad_enabled(_GradModeContext):
    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        # Like PyTorch, calling set_grad_enabled(False) as a function takes effect at once.
        self._prev = (is_grad_enabled(), is_inference_mode_enabled())
        _set_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def _args(self) -> tuple:
        return (self.mode,)


class inference_mode(_GradModeContext):
    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        super().__enter__()
        _state.inference = self.mode   # inference_mode(False) turns it off inside
        if self.mode:
            from gputensor.storage import untyped  # new storages there mark themselves
            untyped.inference_blocks += 1
        self._counted = self.mode

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if self._counted:
            from gputensor.storage import untyped
            untyped.inference_blocks -= 1

    def _enter_mode(self) -> bool:
        return not self.mode   # c10::InferenceMode: AutoGradMode(!enabled)

    def _args(self) -> tuple:
        return (self.mode,)

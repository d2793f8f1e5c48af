"""The one global that op frontends read to learn whether a vmap is active.

Frontends test ``VMAP.depth`` (zero outside every vmap) before anything else, so ops pay a
single attribute read when no transform runs. ``dispatch`` is installed by
gputensor.func._dispatch when the package loads; it is only called while ``depth`` > 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class VmapLevel:
    """One active vmap: its level number (1 is the outermost), batch size and randomness."""

    __slots__ = ("level", "size", "randomness")

    def __init__(self, level: int, size: int, randomness: str) -> None:
        self.level = level
        self.size = size
        self.randomness = randomness


class VmapState:
    __slots__ = ("depth", "levels", "dispatch", "fallback_enabled")

    def __init__(self) -> None:
        self.depth = 0
        self.levels: list[VmapLevel] = []
        # dispatch(op_name, fn, args, kwargs) -> result, or NotImplemented when no argument is
        # batched and the op is not random (the frontend then runs as usual).
        self.dispatch: Callable[[str, Callable, tuple, dict], Any] | None = None
        self.fallback_enabled = True


VMAP = VmapState()

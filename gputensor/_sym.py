"""PyTorch's symbolic-shape helpers (``gt.sym_int``, ``gt.sym_max``, ... and the ``SymInt``,
``SymFloat``, ``SymBool`` classes).

gputensor runs eagerly and never traces shapes symbolically, so every size is a plain Python
number; on plain numbers these helpers behave exactly as PyTorch's do (``sym_max(1, 2.0)``
is ``2.0``, ``sym_ite`` insists on a bool and matching branch types). The Sym classes keep
PyTorch's protocol (they wrap a ``node`` and defer to its methods) so code that tests
``isinstance(x, (int, gt.SymInt))`` or handles a SymInt written by a tracer behaves the same;
a plain ``int`` is not a ``SymInt``, as in PyTorch.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

_ALL_TYPES = (np.integer, np.floating, builtins.int, builtins.float)
_FLOAT_TYPES = (np.floating, builtins.float)


class SymInt:
    """An int whose value is held by a symbolic ``node`` (``node.int_()`` gives it)."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def __bool__(self) -> bool:
        return builtins.bool(self.node.int_() != 0)

    def __int__(self) -> int:
        return self.node.int_()

    def __index__(self) -> int:
        return self.node.int_()

    def __float__(self) -> float:
        return builtins.float(self.node.int_())

    def __sym_float__(self) -> float:
        return builtins.float(self.node.int_())

    def __repr__(self) -> str:
        return repr(self.node)


class SymFloat:
    """A float whose value is held by a symbolic ``node`` (``node.float_()`` gives it)."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def __bool__(self) -> bool:
        return builtins.bool(self.node.float_() != 0)

    def __float__(self) -> float:
        return self.node.float_()

    def __trunc__(self) -> int:
        return math.trunc(self.node.float_())

    def __repr__(self) -> str:
        return repr(self.node)


class SymBool:
    """A bool whose value is held by a symbolic ``node`` (``node.bool_()`` gives it)."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def __bool__(self) -> bool:
        return self.node.bool_()

    def __sym_not__(self) -> bool:
        return not self.node.bool_()

    def __sym_ite__(self, t: Any, f: Any) -> Any:
        return t if self.node.bool_() else f

    def __repr__(self) -> str:
        return repr(self.node)


def sym_int(a: Any) -> Any:
    """``int(a)``, truncating a float; a SymInt stays as it is."""
    if isinstance(a, SymInt):
        return a
    if isinstance(a, SymFloat):
        return math.trunc(a)
    return builtins.int(a)


def sym_float(a: Any) -> Any:
    if isinstance(a, SymFloat):
        return a
    if hasattr(a, "__sym_float__"):
        return a.__sym_float__()
    return builtins.float(a)


def _check_number(x: Any) -> None:
    if not isinstance(x, _ALL_TYPES):
        raise AssertionError(f"expected {_ALL_TYPES}, got {type(x)}")


def _extreme(fn: Any, a: Any, b: Any) -> Any:
    _check_number(a)
    _check_number(b)
    if isinstance(a, _FLOAT_TYPES) or isinstance(b, _FLOAT_TYPES):
        return builtins.float(fn(a, b))  # promotes like a tensor op would
    return fn(a, b)


def sym_max(a: Any, b: Any) -> Any:
    """``max`` for ints and floats; a float argument makes the result a float."""
    return _extreme(builtins.max, a, b)


def sym_min(a: Any, b: Any) -> Any:
    """``min`` for ints and floats; a float argument makes the result a float."""
    return _extreme(builtins.min, a, b)


def sym_not(a: Any) -> Any:
    if hasattr(a, "__sym_not__"):
        return a.__sym_not__()
    return not a


def sym_ite(b: Any, t: Any, f: Any) -> Any:
    """``t if b else f``, with ``b`` a bool and both branches of one type."""
    if not isinstance(b, (SymBool, builtins.bool)):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    if isinstance(b, SymBool):
        return b.__sym_ite__(t, f)
    return t if b else f


def sym_sum(*args: Any) -> Any:
    """The sum of numbers given as arguments or as one list/tuple."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    return builtins.sum(args)


def sym_sqrt(a: Any) -> Any:
    if isinstance(a, SymInt):
        a = sym_float(a)
    if hasattr(a, "__sym_sqrt__"):
        return a.__sym_sqrt__()
    return math.sqrt(a)


def sym_fresh_size(expr: Any) -> Any:
    """A size computed from ``expr`` (a fresh unbacked size when tracing; eagerly its
    value, read back through a tensor as PyTorch does)."""
    import gputensor as gt

    return gt.tensor(expr).item()


__all__ = ["SymBool", "SymFloat", "SymInt", "sym_float", "sym_fresh_size", "sym_int",
           "sym_ite", "sym_max", "sym_min", "sym_not", "sym_sqrt", "sym_sum"]

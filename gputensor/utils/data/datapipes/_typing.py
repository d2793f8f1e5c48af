"""The element types of DataPipes (``IterDataPipe[int]``): ``dp.type``, checked by
``argument_validation`` and ``runtime_validation``.

A DataPipe class takes its type from its generic base (``class P(IterDataPipe[int])``); an
unparametrized one accepts anything. ``issubtype`` follows typing's rules for the cases
DataPipes use: Any, Unions, bounded or constrained TypeVars, numbers (``bool`` < ``int`` <
``float`` < ``complex`` through the ``numbers`` ABCs) and parametrized containers.
"""

from __future__ import annotations

import numbers
import typing
from typing import Any, TypeVar, Union, get_args, get_origin

# Builtin numbers compare through their ABCs, so int is a subtype of float as in typing.
_ABC = {bool: numbers.Integral, int: numbers.Integral, float: numbers.Real,
        complex: numbers.Complex, None: type(None)}


def _expand(t: Any) -> list[Any] | None:
    """The alternatives a Union or TypeVar stands for (None for a plain type)."""
    if isinstance(t, TypeVar):
        if t.__bound__ is not None:
            return [t.__bound__]
        return list(t.__constraints__) or [Any]
    if get_origin(t) is Union or type(t).__name__ == "UnionType":
        return list(get_args(t))
    return None


def _plain_subtype(left: Any, right: Any) -> bool:
    left_origin, right_origin = get_origin(left) or left, get_origin(right) or right
    left_origin, right_origin = _ABC.get(left_origin, left_origin), _ABC.get(right_origin,
                                                                             right_origin)
    try:
        if not (left_origin == right_origin or issubclass(left_origin, right_origin)):
            return False
    except TypeError:
        return False
    right_args = get_args(right)
    if not right_args:
        return True
    left_args = get_args(left)
    return len(left_args) == len(right_args) and all(
        issubtype(a, b) for a, b in zip(left_args, right_args, strict=True))


def issubtype(left: Any, right: Any) -> bool:
    """Whether every value of type ``left`` is a value of type ``right``."""
    if right is Any or left == right or right is typing.Generic:
        return True
    if left is Any:
        return False
    rights = _expand(right)
    if rights is not None:
        return any(issubtype(left, r) for r in rights)
    lefts = _expand(left)
    if lefts is not None:
        return all(issubtype(v, right) for v in lefts)
    return _plain_subtype(left, right)


def issubinstance(data: Any, data_type: Any) -> bool:
    """Whether the value ``data`` is of type ``data_type`` (containers checked elementwise)."""
    options = _expand(data_type)
    if options is not None:
        return any(issubinstance(data, t) for t in options)
    if data_type is Any:
        return True
    if not _plain_subtype(type(data), get_origin(data_type) or data_type):
        return False
    args = get_args(data_type)
    if not args:
        return True
    if isinstance(data, tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return all(issubinstance(d, args[0]) for d in data)
        return len(args) == len(data) and all(
            issubinstance(d, t) for d, t in zip(data, args, strict=True))
    if isinstance(data, dict):
        return all(issubinstance(k, args[0]) and issubinstance(v, args[1])
                   for k, v in data.items())
    if isinstance(data, (list, set, frozenset)):
        return all(issubinstance(d, args[0]) for d in data)
    return True


class _DataPipeType:
    """A DataPipe's element type (``param``), with the subtype tests validation uses."""

    def __init__(self, param: Any) -> None:
        self.param = param

    def __repr__(self) -> str:
        return typing._type_repr(self.param)  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _DataPipeType):
            return self.param == other.param
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.param)

    def issubtype(self, other: Any) -> bool:
        if isinstance(other, _DataPipeType):
            return issubtype(self.param, other.param)
        if isinstance(other, type):
            return issubtype(self.param, other)
        raise TypeError(f"Expected '_DataPipeType' or 'type', but found {type(other)}")

    def issubtype_of_instance(self, other: Any) -> bool:
        return issubinstance(other, self.param)


ANY_TYPE = _DataPipeType(Any)


def type_of_class(cls: type, root: type) -> _DataPipeType | None:
    """The element type ``cls`` declares through a parametrized ``root`` base
    (``class P(IterDataPipe[int])``); None when it declares none."""
    for base in getattr(cls, "__orig_bases__", ()):
        origin = get_origin(base)
        if isinstance(origin, type) and issubclass(origin, root):
            args = get_args(base)
            if args and not isinstance(args[0], TypeVar):
                return _DataPipeType(args[0])
    return None

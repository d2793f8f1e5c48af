"""``rearrange``: einops-style axis reordering (``torch.func.rearrange``).

PyTorch evaluates the pattern with first-class dimensions; here the same result comes from
three ordinary ops, so autograd, vmap and every device follow: a ``reshape`` that splits each
left-hand dimension into its elementary axes (always a view), a ``permute`` into the
right-hand order, and a ``reshape`` that merges the right-hand groups (a view where the
strides allow, as PyTorch's result). Left-hand anonymous axes (``1`` or ``()``) bind a
dimension of any size that is then summed out, as PyTorch does.
"""

from __future__ import annotations

import functools
import keyword
import math
import warnings
from collections.abc import Sequence
from typing import Any

__all__ = ["rearrange"]

_ELLIPSIS = "\u2026"   # "..." after parsing: one character, so it reads as an identifier


class DimensionBindError(Exception):
    """A dimension pack cannot be bound to a tensor dimension (functorch.dim's error)."""


class _Anonymous:
    """An axis written as a number (never equal to another one, like einops's)."""

    def __init__(self, text: str) -> None:
        self.value = int(text)
        if self.value < 1:
            raise ValueError(f"Anonymous axis should have positive length, not {self.value}")

    def __repr__(self) -> str:
        return f"{self.value}-axis"


class _Side:
    """One side of a pattern: ``composition`` lists, per dimension, the group of axis names
    (a list; empty for a unit axis) or the ellipsis."""

    def __init__(self, text: str) -> None:
        self.has_ellipsis = False
        self.ellipsis_in_group: bool | None = None
        self.identifiers: set[Any] = set()
        self.non_unit_anonymous = False
        self.composition: list[Any] = []
        if "." in text:
            if "..." not in text:
                raise ValueError("Expression may contain dots only inside ellipsis (...)")
            if text.count("...") != 1 or text.count(".") != 3:
                raise ValueError("Expression may contain dots only inside ellipsis (...); only "
                                 "one ellipsis for tensor ")
            text = text.replace("...", _ELLIPSIS)
            self.has_ellipsis = True
        group: list[Any] | None = None
        name: str | None = None
        for char in text:
            if char in "() ":
                if name is not None:
                    self._add(name, group)
                name = None
                if char == "(":
                    if group is not None:
                        raise ValueError("Axis composition is one-level (brackets inside "
                                         "brackets not allowed)")
                    group = []
                elif char == ")":
                    if group is None:
                        raise ValueError("Brackets are not balanced")
                    self.composition.append(group)
                    group = None
            elif char.isalnum() or char in ("_", _ELLIPSIS):
                name = char if name is None else name + char
            else:
                raise ValueError(f"Unknown character '{char}'")
        if group is not None:
            raise ValueError(f"Imbalanced parentheses in expression: '{text}'")
        if name is not None:
            self._add(name, group)

    def _add(self, name: str, group: list[Any] | None) -> None:
        if name in self.identifiers:
            raise ValueError(f"Indexing expression contains duplicate dimension '{name}'")
        if name == _ELLIPSIS:
            self.identifiers.add(name)
            self.ellipsis_in_group = group is not None
            if group is None:
                self.composition.append(name)
            else:
                group.append(name)
            return
        number = name.isdecimal()
        if number and int(name) == 1:   # a unit axis: nothing to bind (inside a group: no-op)
            if group is None:
                self.composition.append([])
            return
        if not number:
            _check_axis_name(name)
        axis = _Anonymous(name) if number else name
        self.identifiers.add(axis)
        self.non_unit_anonymous |= number
        if group is None:
            self.composition.append([axis])
        else:
            group.append(axis)


def _check_axis_name(name: str) -> None:
    if not name.isidentifier():
        raise ValueError(f"Invalid axis identifier: {name}\nnot a valid python identifier")
    if name[0] == "_" or name[-1] == "_":
        raise ValueError(f"Invalid axis identifier: {name}\naxis name should should not start "
                         f"or end with underscore")
    if keyword.iskeyword(name):
        warnings.warn(f"It is discouraged to use axes names that are keywords: {name}",
                      RuntimeWarning, stacklevel=5)
    if name == "axis":
        warnings.warn("It is discouraged to use 'axis' as an axis name and will raise an error "
                      "in future", FutureWarning, stacklevel=5)


@functools.lru_cache(256)
def _parse(pattern: str, lengths: tuple[tuple[str, int], ...]) -> tuple[_Side, _Side]:
    parts = pattern.split("->")
    if len(parts) != 2:
        raise ValueError("Pattern must contain a single '->' separator")
    names = dict(lengths)
    if _ELLIPSIS in names:
        raise ValueError(f"'{_ELLIPSIS}' is not an allowed axis identifier")
    left, right = _Side(parts[0]), _Side(parts[1])
    if not left.has_ellipsis and right.has_ellipsis:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern "
                         f"{pattern}")
    if left.has_ellipsis and left.ellipsis_in_group:
        raise ValueError(f"Ellipsis is parenthesis in the left side is not allowed: {pattern}")
    for length in names.values():
        if type(length) is not int:
            raise TypeError(f"rearrange axis lengths must be integers, got: {type(length)}")
    if left.non_unit_anonymous or right.non_unit_anonymous:
        raise ValueError("rearrange only supports unnamed axes of size 1")
    difference = left.identifiers ^ right.identifiers
    if difference:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on "
                         f"both): {difference}")
    unmatched = names.keys() - left.identifiers
    if unmatched:
        raise ValueError(f"Identifiers not found in rearrange expression: {unmatched}")
    return left, right


def _bind(pack: list[str], size: int, known: dict[str, int], labels: dict[str, str]) -> None:
    """Sizes of the axes of ``pack`` (one tensor dimension of ``size``): at most one unknown,
    inferred (functorch.dim's binding, with its messages)."""
    unknown = [a for a in pack if known.get(a, -1) < 0]
    if len(unknown) > 1:
        raise DimensionBindError(f"cannot infer the sizes of two dimensions at once "
                                 f"{labels[unknown[0]]} and {labels[unknown[1]]}")
    product = math.prod(known[a] for a in pack if a not in unknown)
    if unknown:
        if size % product:
            shown = tuple("?" if a in unknown else known[a] for a in pack)
            raise DimensionBindError(f"inferred dimension does not evenly fit into larger "
                                     f"dimension: {size} vs {shown}")
        known[unknown[0]] = size // product
    elif product != size:
        raise DimensionBindError(f"Dimension sizes to do not match ({size} != {product}) when "
                                 f"matching dimension pack ({', '.join(labels[a] for a in pack)}"
                                 f"{',' if len(pack) == 1 else ''})")


def rearrange(tensor: Any, pattern: str, **axes_lengths: int) -> Any:
    """Reorder, split, merge, insert or remove axes of ``tensor`` (or of the stack of a
    sequence of tensors) as ``pattern`` says, e.g. ``"b (h h1) w c -> b h (w h1) c"``."""
    import gputensor as gt
    if not isinstance(tensor, gt.Tensor):
        tensor = gt.stack(tensor)
    left, right = _parse(pattern, tuple(axes_lengths.items()))
    ndim = tensor.dim()
    anonymous = sum(not group for group in left.composition)
    if left.has_ellipsis:
        n_ellipsis = ndim - (len(left.composition) - 1)
        pattern_ndim = anonymous + len(left.identifiers) - 1
        if pattern_ndim > ndim:
            raise ValueError(f"Number of dimensions in pattern ({pattern_ndim}) must be less "
                             f"than or equal to the number of dimensions in the tensor ({ndim})")
    else:
        n_ellipsis = 0
        if len(left.composition) != ndim:
            raise ValueError(f"Number of dimensions in pattern ({len(left.composition)}) must be "
                             f"equal to the number of dimensions in the tensor ({ndim})")
    if len(left.identifiers) - left.has_ellipsis + n_ellipsis + anonymous == 0:
        return tensor   # a 0-d tensor rearranged to itself
    return _apply(tensor, left.composition, right.composition, n_ellipsis, axes_lengths)


def _apply(tensor: Any, left: Sequence[Any], right: Sequence[Any], n_ellipsis: int,
           lengths: dict[str, int]) -> Any:
    # Elementary axes in left-hand order, named as PyTorch's first-class dims (d0, d1, ...).
    axes: list[Any] = []
    ellipsis_axes: list[Any] = []
    summed: list[Any] = []
    known: dict[Any, int] = {k: v for k, v in lengths.items()}
    labels: dict[Any, str] = {}
    packs: list[tuple[list[Any], int]] = []
    dim = 0
    for group in left:
        if group == _ELLIPSIS:
            for _ in range(n_ellipsis):
                axis = object()
                labels[axis] = f"d{len(axes)}"
                axes.append(axis)
                ellipsis_axes.append(axis)
                packs.append(([axis], tensor.shape[dim]))
                dim += 1
            continue
        pack = list(group)
        if not pack:    # an anonymous axis: binds the dimension, summed out at the end
            axis = object()
            pack = [axis]
            summed.append(axis)
        for axis in pack:
            labels[axis] = f"d{len(axes)}"
            axes.append(axis)
        packs.append((pack, tensor.shape[dim]))
        dim += 1
    for pack, size in packs:
        _bind(pack, size, known, labels)
    split = tensor.reshape(tuple(known[a] for a in axes))
    order: list[Any] = []
    shape: list[int] = []
    for group in right:
        if group == _ELLIPSIS:
            order += ellipsis_axes
            shape += [known[a] for a in ellipsis_axes]
            continue
        members = [a for name in group for a in (ellipsis_axes if name == _ELLIPSIS else [name])]
        order += members
        shape.append(math.prod(known[a] for a in members))
    order += summed
    out = split.permute(tuple(axes.index(a) for a in order))
    if summed:
        out = out.sum(tuple(range(len(order) - len(summed), len(order))))
    return out.reshape(tuple(shape))

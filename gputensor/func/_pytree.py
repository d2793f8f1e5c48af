"""A minimal pytree: tuples, lists, dicts and namedtuples of leaves, as torch.func nests them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Spec:
    """The structure of a flattened tree: its container type, keys and children's specs."""

    __slots__ = ("kind", "keys", "children")

    def __init__(self, kind: Any, keys: Any, children: list[Spec]) -> None:
        self.kind = kind
        self.keys = keys
        self.children = children

    @property
    def is_leaf(self) -> bool:
        return self.kind is None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and (self.kind, self.keys, self.children) == (
            other.kind, other.keys, other.children)

    def __repr__(self) -> str:
        if self.is_leaf:
            return "*"
        name = getattr(self.kind, "__name__", str(self.kind))
        return f"TreeSpec({name}, {self.keys}, [{', '.join(map(repr, self.children))}])"


LEAF = Spec(None, None, [])


def tree_flatten(tree: Any) -> tuple[list[Any], Spec]:
    if isinstance(tree, tuple | list):
        keys = None
        items = list(tree)
    elif isinstance(tree, dict):
        keys = tuple(tree)
        items = list(tree.values())
    else:
        return [tree], LEAF
    leaves: list[Any] = []
    children = []
    for item in items:
        sub, spec = tree_flatten(item)
        leaves.extend(sub)
        children.append(spec)
    return leaves, Spec(type(tree), keys, children)


def tree_unflatten(leaves: list[Any], spec: Spec) -> Any:
    it = iter(leaves)

    def build(s: Spec) -> Any:
        if s.is_leaf:
            return next(it)
        items = [build(c) for c in s.children]
        if s.kind is dict or (isinstance(s.kind, type) and issubclass(s.kind, dict)):
            return s.kind(zip(s.keys, items, strict=False))
        if hasattr(s.kind, "_fields"):
            return s.kind(*items)
        return s.kind(items)
    return build(spec)


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix: Any, tree: Any, error: Callable[[], Exception]) -> list[Any]:
    """``prefix`` (a tree whose leaves stand for whole subtrees of ``tree``) as one leaf per
    leaf of ``tree``; ``error()`` is raised when the structures do not match."""
    if not isinstance(prefix, tuple | list | dict):
        return [prefix] * len(tree_flatten(tree)[0])
    if isinstance(prefix, dict):
        if not isinstance(tree, dict) or set(prefix) != set(tree):
            raise error()
        return [x for k in tree for x in broadcast_prefix(prefix[k], tree[k], error)]
    if not isinstance(tree, tuple | list) or len(prefix) != len(tree):
        raise error()
    return [x for p, t in zip(prefix, tree, strict=False) for x in broadcast_prefix(p, t, error)]

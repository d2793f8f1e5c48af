"""The layout registry: gt.strided and gt.sparse_coo."""

from __future__ import annotations


class layout:
    """How a tensor's elements are arranged in memory. Instances are singletons."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"gputensor.{self.name}"

    def __reduce__(self) -> str:
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
LAYOUTS: tuple[layout, ...] = (strided, sparse_coo)

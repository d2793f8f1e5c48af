"""The layout registry: gt.strided, gt.sparse_coo and the compressed sparse layouts
(gt.sparse_csr, sparse_csc, sparse_bsr, sparse_bsc)."""

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
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
LAYOUTS: tuple[layout, ...] = (strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr,
                               sparse_bsc)

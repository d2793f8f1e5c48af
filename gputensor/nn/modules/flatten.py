"""Flatten and Unflatten: reshape a range of dims into one, and one dim into several."""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor

from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Merge dims ``start_dim`` .. ``end_dim`` (default: all but the batch dim)."""

    __constants__ = ["start_dim", "end_dim"]

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (a tuple or list of ints; one may be -1)."""

    __constants__ = ["dim", "unflattened_size"]

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError("invalid argument type for dim parameter")
        if not isinstance(unflattened_size, tuple | list):
            raise TypeError(f"unflattened_size must be tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, s in enumerate(unflattened_size):
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError(f"unflattened_size must be tuple of ints, but found element of "
                                f"type {type(s).__name__} at pos {i}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

"""Cost models of the sparse ops (``cost(inputs, output) -> (bytes moved, flops)``, read by the
profiler). A sparse tensor moves its indices and values, not its dense size, so the registry's
``memory_cost`` (which counts ``numel()``) would overstate it by the inverse density."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gputensor._tensor import Tensor

from ._tensor import SparseTensor


def _tensors(x: Any) -> list[Tensor]:
    if isinstance(x, list | tuple):
        return [t for item in x for t in _tensors(item)]
    return [x] if isinstance(x, Tensor) else []


def _bytes(t: Tensor) -> int:
    return t.nbytes if isinstance(t, SparseTensor) else t.numel() * t.element_size()


def _elements(t: Tensor) -> int:
    return t._values_t.numel() if isinstance(t, SparseTensor) else t.numel()


def sparse_cost(flops_per_element: float = 0.0, per: str = "output"
                ) -> Callable[[Sequence[Any], Any], tuple[int, int]]:
    """Bytes of every tensor read and written (sparse ones: indices + values); flops per stored
    element of the output (or of the inputs with ``per="input"``)."""
    def cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
        ins, outs = _tensors(list(inputs)), _tensors(output)
        moved = sum(_bytes(t) for t in ins + outs)
        counted = outs if per == "output" else ins
        return moved, int(flops_per_element * sum(_elements(t) for t in counted))
    return cost

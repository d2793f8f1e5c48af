"""Padding layers (torch.nn's ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and
CircularPad in 1, 2 and 3 dims): each holds its 2N widths and calls F.pad."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputensor._tensor import Tensor
from gputensor.nn.functional._vision import pad

from .module import Module

__all__ = [f"{kind}Pad{n}d" for kind in ("Zero", "Constant", "Reflection", "Replication",
                                         "Circular") for n in (1, 2, 3)]


class _PadNd(Module):
    dims = 1
    mode = "constant"

    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__()
        widths = (padding,) * (2 * self.dims) if isinstance(padding, int) else tuple(padding)
        if len(widths) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: padding must be an int or "
                             f"{2 * self.dims} ints, got {padding!r}")
        self.padding = widths
        self.value = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, self.mode,
                   self.value if self.mode == "constant" else None)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: int | Sequence[int], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


def _layer(kind: str, dims: int) -> type:
    base, mode = {"Zero": (_PadNd, "constant"), "Constant": (_ConstantPadNd, "constant"),
                  "Reflection": (_PadNd, "reflect"), "Replication": (_PadNd, "replicate"),
                  "Circular": (_PadNd, "circular")}[kind]
    doc = (f"Pads the last {dims} dim(s) of the input, {mode} mode"
           f"{' (zeros)' if kind == 'Zero' else ''}.")
    attrs: dict[str, Any] = {"dims": dims, "mode": mode, "__doc__": doc,
                             "__module__": __name__}
    return type(f"{kind}Pad{dims}d", (base,), attrs)


for _name in __all__:
    globals()[_name] = _layer(_name[:-5], int(_name[-2]))

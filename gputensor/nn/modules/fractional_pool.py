"""FractionalMaxPool2d/3d (torch.nn's)."""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor
from gputensor.nn.functional._fractional_pool import (
    fractional_max_pool2d,
    fractional_max_pool3d,
)

from .module import Module

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


def _ntuple(v: Any, n: int) -> tuple[Any, ...]:
    return tuple(v) if isinstance(v, tuple | list) else (v,) * n


class _FractionalMaxPoolNd(Module):
    __constants__ = ["kernel_size", "return_indices", "output_size", "output_ratio"]
    _dims = 2

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None) -> None:
        super().__init__()
        n, name = self._dims, type(self).__name__
        self.kernel_size = _ntuple(kernel_size, n)
        self.return_indices = return_indices
        # a fixed sample tensor is state (saved, moved with the module), as in PyTorch
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _ntuple(output_size, n) if output_size is not None else None
        self.output_ratio = _ntuple(output_ratio, n) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             f"ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio[:n]):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-D fractional max pooling over (N, C, H, W) or (C, H, W) inputs."""

    def forward(self, input: Tensor) -> Any:
        return fractional_max_pool2d(input, self.kernel_size, self.output_size,
                                     self.output_ratio, self.return_indices,
                                     _random_samples=self._random_samples)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling over (N, C, T, H, W) or (C, T, H, W) inputs."""

    _dims = 3

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None) -> None:
        if (isinstance(kernel_size, int) and kernel_size <= 0) or (
                isinstance(kernel_size, tuple | list) and not all(k > 0 for k in kernel_size)):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        super().__init__(kernel_size, output_size, output_ratio, return_indices,
                         _random_samples)

    def forward(self, input: Tensor) -> Any:
        return fractional_max_pool3d(input, self.kernel_size, self.output_size,
                                     self.output_ratio, self.return_indices,
                                     _random_samples=self._random_samples)

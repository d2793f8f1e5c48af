"""InstanceNorm1d/2d/3d: per-sample, per-channel normalization (torch.nn's).

Unlike batch norm, affine parameters and running statistics are off by default; with
``track_running_stats`` eval mode normalises with the running statistics. Each layer also
takes an unbatched input (one fewer dim), as PyTorch's do.
"""

from __future__ import annotations

import warnings
from typing import Any

from gputensor._tensor import Tensor
from gputensor.nn.functional._norm import instance_norm

from .batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    """Shared state (that of batch norm, PyTorch's state_dict names) and forward."""

    _batched_dims = 3

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in (self._batched_dims - 1, self._batched_dims):
            raise ValueError(f"expected {self._batched_dims - 1}D or {self._batched_dims}D "
                             f"input (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = input.dim() == self._batched_dims - 1
        channels = input.shape[-self._batched_dims + 1]
        if channels != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={int(not unbatched)} to match "
                                 f"num_features ({self.num_features}), but got: {channels}.")
            warnings.warn(f"input's size at dim={int(not unbatched)} does not match "
                          f"num_features. You can silence this warning by not passing in "
                          f"num_features, which is not used because affine=False",
                          stacklevel=2)
        x = input.unsqueeze(0) if unbatched else input
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) inputs, or unbatched (C, L)."""

    _batched_dims = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) inputs, or unbatched (C, H, W)."""

    _batched_dims = 4


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) inputs, or unbatched (C, D, H, W)."""

    _batched_dims = 5

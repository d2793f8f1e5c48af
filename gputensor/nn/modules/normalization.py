"""LayerNorm and GroupNorm (torch.nn's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn import init
from gputensor.nn.functional._norm import group_norm, layer_norm, rms_norm
from gputensor.nn.parameter import Parameter

from .module import Module

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm"]


def add_affine_parameters(module: Module, shape: Any, affine: bool, bias: bool, device: Any,
                          dtype: Any) -> None:
    """The norm layers' learnable ``weight`` and ``bias`` of ``shape`` (or None entries)."""
    module.register_parameter("weight", Parameter(gt.empty(shape, device=device, dtype=dtype))
                              if affine else None)
    module.register_parameter("bias", Parameter(gt.empty(shape, device=device, dtype=dtype))
                              if affine and bias else None)


def reset_affine_parameters(module: Module) -> None:
    """weight to ones and bias to zeros, PyTorch's initialisation of every norm layer."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _TrailingDimsNorm(Module):
    """LayerNorm's and RMSNorm's shared state: the trailing ``normalized_shape`` dims they
    normalise over, ``eps`` and, with ``elementwise_affine``, a weight (ones) and optionally
    a bias (zeros) of that shape."""

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None,
                 elementwise_affine: bool, bias: bool, device: Any, dtype: Any) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        add_affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device,
                              dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_affine_parameters(self)


class LayerNorm(_TrailingDimsNorm):
    """Normalise over the trailing ``normalized_shape`` dims; with ``elementwise_affine`` a
    learnable weight (ones) and, unless ``bias=False``, bias (zeros) of that shape."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, bias, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalise (N, C, *) inputs over groups of ``num_channels / num_groups`` channels, with
    a per-channel affine (weight ones, bias zeros) when ``affine``."""

    __constants__ = ["num_groups", "num_channels", "eps", "affine"]

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        add_affine_parameters(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_affine_parameters(self)

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(_TrailingDimsNorm):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dims, with a
    learnable weight (ones) when ``elementwise_affine``; ``eps=None`` is the dtype's machine
    epsilon."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, False, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """Normalise each value by the squares of its ``size`` neighbouring channels
    (AlexNet's local response normalization)."""

    __constants__ = ["size", "alpha", "beta", "k"]

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        from gputensor.nn.functional._vision import local_response_norm

        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


"""BatchNorm1d/2d/3d: batch normalization with running statistics (torch.nn's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.nn.functional._norm import batch_norm

from .module import Module
from .normalization import add_affine_parameters, reset_affine_parameters

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _NormBase(Module):
    """State shared by the batch and instance norms (PyTorch's ``_NormBase``): affine
    parameters and the buffers ``running_mean``, ``running_var``, ``num_batches_tracked``
    (PyTorch's state_dict names). ``momentum=None`` makes the running statistics a cumulative
    average."""

    _version = 2   # version 2 added num_batches_tracked (older checkpoints lack it)
    _expected_dims: tuple[int, ...] = ()
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        add_affine_parameters(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean",
                                 gt.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", gt.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 gt.tensor(0, dtype=D.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        reset_affine_parameters(self)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in self._expected_dims:
            want = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"expected {want} input (got {input.dim()}D input)")

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str,
                              local_metadata: dict, strict: bool, missing_keys: list[str],
                              unexpected_keys: list[str], error_msgs: list[str]) -> None:
        version = local_metadata.get("version")
        if (version is None or version < 2) and self.track_running_stats:
            # Checkpoints from before num_batches_tracked existed: keep (or start) the count.
            key = prefix + "num_batches_tracked"
            if key not in state_dict and isinstance(state_dict, dict):
                state_dict[key] = self.num_batches_tracked if self.num_batches_tracked \
                    is not None else gt.tensor(0, dtype=D.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """The BatchNorm layers' forward: batch statistics while training (updating the running
    ones), the running statistics in eval mode."""

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:   # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        # Without running statistics, eval mode normalises with the batch's own statistics.
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if track else None,
                          self.running_var if track else None, self.weight, self.bias,
                          use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) inputs."""

    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) inputs."""

    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W) inputs."""

    _expected_dims = (5,)

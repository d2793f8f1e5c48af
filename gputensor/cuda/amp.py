"""gt.cuda.amp: PyTorch's deprecated CUDA spellings of autocast, GradScaler, custom_fwd/bwd,
which many training programs still import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor.amp import autocast_mode as _mode
from gputensor.amp.autocast_mode import cuda_autocast as autocast
from gputensor.amp.grad_scaler import CudaGradScaler as GradScaler


def custom_fwd(fwd: Callable | None = None, *, cast_inputs: Any = None) -> Callable:
    """``torch.cuda.amp.custom_fwd``: ``gt.amp.custom_fwd(device_type='cuda')``."""
    return _mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable | None = None) -> Callable:
    """``torch.cuda.amp.custom_bwd``: ``gt.amp.custom_bwd(device_type='cuda')``."""
    return _mode.custom_bwd(bwd, device_type="cuda")


__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]

"""gputensor.amp: automatic mixed precision, as torch.amp (``autocast`` regions and the
``GradScaler`` for float16 training)."""

from .autocast_mode import autocast, custom_bwd, custom_fwd
from .grad_scaler import GradScaler


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast supports ``device_type`` ('cuda' and 'cpu')."""
    return device_type in ("cuda", "cpu")


__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]

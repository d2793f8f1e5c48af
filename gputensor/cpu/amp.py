"""gt.cpu.amp: PyTorch's deprecated CPU spelling of autocast."""

from gputensor.amp.autocast_mode import cpu_autocast as autocast

__all__ = ["autocast"]

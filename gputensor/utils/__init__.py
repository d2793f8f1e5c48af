"""gputensor.utils: helpers around the tensor runtime (``gputensor.utils.data``: data loading,
``gputensor.utils.checkpoint``: activation checkpointing)."""

from gputensor.utils import checkpoint, data, dlpack

__all__ = ["checkpoint", "data", "dlpack"]

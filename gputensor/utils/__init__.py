"""gputensor.utils: helpers around the tensor runtime (``gputensor.utils.data``: data loading,
``gputensor.utils.checkpoint``: activation checkpointing)."""

from gputensor.utils import checkpoint, data

__all__ = ["checkpoint", "data"]

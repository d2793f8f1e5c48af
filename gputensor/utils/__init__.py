"""gputensor.utils: helpers around the tensor runtime (``gputensor.utils.data``: data loading)."""

from gputensor.utils import data

__all__ = ["data"]

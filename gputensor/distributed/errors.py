"""torch.distributed's error types: ``DistError`` and its kinds (all RuntimeErrors)."""

from __future__ import annotations


class DistError(RuntimeError):
    """An error in the distributed package."""


class DistBackendError(DistError):
    """A collective backend failed (a peer is gone, a collective timed out)."""


class DistNetworkError(DistError):
    """A network operation failed (a connection could not be made or was lost)."""


class DistStoreError(DistError):
    """A store operation failed (a wait timed out)."""


class QueueEmptyError(DistStoreError):
    """``Store.queue_pop(key, block=False)`` found the queue empty."""

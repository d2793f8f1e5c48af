"""Shared CPU memory for storages, in the two ways torch.multiprocessing offers.

- ``file_descriptor`` (Linux default): an anonymous memory file (``memfd_create``). It has no
  name, so nothing can leak; other processes receive a duplicate of its descriptor (passed over
  the multiprocessing connection) and map it. Each shared storage keeps one descriptor open.
- ``file_system``: a named POSIX shared-memory segment (``/dev/shm``) that other processes
  attach by name. No descriptors stay open; the creating process unlinks the name when its
  storage is freed, so a receiver must attach before the sender lets the storage go.

A process maps each segment once: rebuilding the same segment again (two tensors on one
storage, or the same tensor sent twice) returns the storage already attached, so views stay
views across the process boundary.
"""

from __future__ import annotations

import mmap
import os
import weakref
from multiprocessing import shared_memory
from typing import Any

import numpy as np

STRATEGIES = ("file_descriptor", "file_system") if hasattr(os, "memfd_create") \
    else ("file_system",)
_strategy = STRATEGIES[0]


def get_strategy() -> str:
    return _strategy


def set_strategy(strategy: str) -> None:
    global _strategy
    if strategy not in STRATEGIES:
        raise AssertionError(f"invalid sharing strategy {strategy!r}, expected one of "
                             f"{set(STRATEGIES)}")
    _strategy = strategy


class Segment:
    """One mapping of shared memory: ``array`` is its first ``nbytes`` bytes. ``fd`` (the
    file_descriptor strategy) or ``name`` (file_system) is how another process reaches it."""

    __slots__ = ("array", "fd", "name", "_map", "__weakref__")

    def __init__(self, mapping: Any, nbytes: int, fd: int | None, name: str | None) -> None:
        self._map = mapping
        self.array = np.ndarray((nbytes,), np.uint8, buffer=mapping)
        self.fd, self.name = fd, name

    def key(self) -> tuple:
        """What identifies the segment in every process that maps it."""
        if self.name is not None:
            return ("name", self.name)
        st = os.fstat(self.fd)
        return ("inode", st.st_dev, st.st_ino)


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _map_fd(fd: int, nbytes: int) -> Segment:
    # A zero-length mapping is an error, so an empty storage maps one byte it never uses.
    seg = Segment(mmap.mmap(fd, max(nbytes, 1)), nbytes, fd, None)
    weakref.finalize(seg, _close_fd, fd)
    return seg


def create(nbytes: int) -> Segment:
    """A new shared segment of ``nbytes`` in the current strategy (contents undefined)."""
    if _strategy == "file_descriptor":
        fd = os.memfd_create("gputensor-storage", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, max(nbytes, 1))
        except OSError:
            os.close(fd)
            raise
        return _map_fd(fd, nbytes)
    return create_named(nbytes)


def create_named(nbytes: int) -> Segment:
    """A new named (file_system) segment, whatever the strategy: the emulated device's
    memory shared through IPC handles is one."""
    shm = shared_memory.SharedMemory(create=True, size=max(nbytes, 1))
    seg = Segment(shm.buf, nbytes, None, shm.name)
    # The creator owns the name: unlink it when its storage dies (the unlink also takes the
    # name off the resource tracker, which would otherwise unlink it at interpreter exit).
    weakref.finalize(seg, _release_named, shm, True)
    return seg


def _release_named(shm: shared_memory.SharedMemory, owner: bool) -> None:
    try:
        shm.close()
    except BufferError:
        pass  # an exported view is still alive; the mapping goes with the process
    if owner:
        try:
            shm.unlink()
        except FileNotFoundError:
            pass


def attach_fd(fd: int, nbytes: int) -> Segment:
    """Map a segment received as a descriptor (this process now owns ``fd``)."""
    return _map_fd(fd, nbytes)


def attach_name(name: str, nbytes: int) -> Segment:
    """Attach a file_system segment by name."""
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        raise RuntimeError(
            f"shared memory segment {name!r} no longer exists: the sending process freed the "
            f"storage before this process received it (file_system sharing strategy); keep "
            f"the tensor alive in the sender until it is received") from None
    # Attaching registers the name with this process's resource tracker, which would unlink
    # it when this process exits; only the creator may unlink it.
    from multiprocessing import resource_tracker
    resource_tracker.unregister(shm._name, "shared_memory")
    if shm.size < nbytes:
        shm.close()
        raise RuntimeError(f"shared memory segment {name!r} holds {shm.size} bytes, fewer "
                           f"than the {nbytes} bytes of the storage sent")
    seg = Segment(shm.buf, nbytes, None, name)
    weakref.finalize(seg, _release_named, shm, False)
    return seg


# The storages this process has attached, by segment key, for as long as they live.
_ATTACHED: weakref.WeakValueDictionary[tuple, Any] = weakref.WeakValueDictionary()


def attached(key: tuple) -> Any:
    return _ATTACHED.get(key)


def remember(key: tuple, storage: Any) -> None:
    _ATTACHED[key] = storage


__all__ = ["STRATEGIES", "Segment", "attach_fd", "attach_name", "attached", "create",
           "create_named", "get_strategy", "remember", "set_strategy"]

"""The allocation counters behind ``profile(profile_memory=True)``: host bytes from tracemalloc,
device bytes from the CUDA runtime's ``memory_allocated()``.

Host side: NumPy reports every data-buffer allocation and free to tracemalloc
(``PyTraceMalloc_Track``/``Untrack`` in domain ``np.lib.tracemalloc_domain``), so while tracemalloc
traces, ``get_traced_memory()[0]`` moves by the bytes of every CPU tensor created or freed (plus
the small Python objects around them). The meter starts tracemalloc if it is not tracing yet and
stops it again in ``close()`` (only then: a caller's own tracing is left as it was).

Two corrections keep the host figure about the program rather than the tooling:
- the profiler's own bookkeeping (events, lists, timestamps) allocates too: every hook brackets
  it with ``enter()`` ... ``leave()`` and the bytes traced in between are excluded from then on
  (the bracket itself is allocation-neutral, so an empty window between two hooks reads 0);
- the CUDA emulator keeps "device" memory in host NumPy buffers: growth of its pool
  (``memory_reserved()``) is taken off the host figure, so those bytes count once, as device
  memory.

Cost: tracemalloc traces every Python allocation while it runs (several times slower
allocation-heavy code), and each read allocates and is traced too (about 2 us a read).

Limits: tracemalloc only sees memory allocated while it traces, so freeing a buffer allocated
before the profile started reads as no change when this meter started tracemalloc; bytes other
threads allocate while one thread is inside the profiler's bookkeeping count as bookkeeping;
objects CPython keeps in its free lists stay counted as allocated (the records the profiler
keeps are allocated outside those lists for that reason: see events.FreshList).
"""

from __future__ import annotations

import threading
import tracemalloc


class MemoryMeter:
    """Running totals of allocated bytes: ``(host, device)`` from ``enter()``."""

    def __init__(self) -> None:
        from gputensor.kernels.cuda import device as cuda_device

        self._cuda = cuda_device
        self._started = not tracemalloc.is_tracing()
        if self._started:
            tracemalloc.start()  # one frame: the cheapest tracing; only the totals are read
        self._excluded = 0
        self._local = threading.local()
        self.closed = False

    def enter(self) -> tuple[int, int]:
        """Host and device bytes allocated now; call it first thing in a hook: what is
        traced from here to ``leave()`` is the profiler's and is excluded."""
        traced = tracemalloc.get_traced_memory()[0]
        local = self._local
        local.mark, local.open = traced, True
        host, device = traced - self._excluded, 0
        for rt in self._cuda.runtimes():  # every device's
            device += int(rt.memory_allocated())
            if rt.is_emulated:  # its device memory is host memory, counted as device bytes
                host -= int(rt.memory_reserved())
        return host, device

    def leave(self) -> None:
        """End of the profiler's bookkeeping begun by this thread's last ``enter()``."""
        # Nothing allocated after the read may outlive this call, or it would count as the
        # program's: the mark stays (the next enter() replaces it) and only a flag is reset.
        local = self._local
        if getattr(local, "open", False):
            self._excluded += tracemalloc.get_traced_memory()[0] - local.mark
            local.open = False

    def close(self) -> None:
        """Stop tracemalloc if this meter started it (idempotent)."""
        if not self.closed:
            self.closed = True
            if self._started and tracemalloc.is_tracing():
                tracemalloc.stop()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<MemoryMeter {state}, started tracemalloc: {self._started}>"


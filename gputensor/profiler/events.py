"""The profiler's records: one ``Event`` per backend kernel call, CUDA launch, device copy or
``record_function`` range, linked into a tree (a range parents the kernels inside it, a backend
kernel parents the CUDA launches it made).

Times are nanoseconds from ``time.perf_counter_ns``; the PyTorch-style attributes
(``cpu_time_total``, ``device_time_total``, ...) are microseconds, as in torch.profiler.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from gputensor._tensor import Tensor

# Event kinds. Launches are device-side work: they do not count as their parent's CPU children.
KERNEL, LAUNCH, COPY, RANGE = "kernel", "launch", "copy", "range"
# profile_memory: allocations made outside every event become "[memory]" events of this kind
# (zero duration, at the moment the profiler noticed them), as in torch.profiler.
MEMORY = "memory"
MEMORY_EVENT_NAME = "[memory]"


# What an event keeps must not come from CPython's free lists: exact lists, dicts, tuples and
# floats that the program frees are kept for reuse without telling tracemalloc, and an event
# taking one would leave the program to allocate its next one afresh, so the program's memory
# figures (profile_memory) would drift by those bytes per event. Subclass instances are always
# allocated and freed for real; shared empty defaults allocate nothing.
class FreshList(list):
    """A list allocated outside the list free list (the recorder's children lists, dims)."""

    __slots__ = ()


class FreshDict(dict):
    """A dict allocated outside the dict free list (``Event.extra``)."""

    __slots__ = ()


class FreshTuple(tuple):
    """A tuple allocated outside the tuple free lists (recorded input descriptions)."""

    __slots__ = ()


_NO_CHILDREN: tuple[()] = ()
_NO_EXTRA: MappingProxyType[str, Any] = MappingProxyType({})


class Event:
    """One record. A plain class with slots: the profiler makes one per kernel call."""

    __slots__ = ("name", "kind", "device", "backend", "start_ns", "end_ns", "thread", "parent",
                 "children", "inputs", "bytes", "flops", "device_ns", "timing",
                 "cpu_memory_usage", "device_memory_usage", "extra")

    def __init__(self, name: str, kind: str, device: str, backend: str, start_ns: int,
                 thread: int) -> None:
        self.name = name
        self.kind = kind
        self.device = device        # "cpu", "cuda:0"; "" for ranges
        self.backend = backend      # "CPU", "CUDA", "SparseCPU", ...; the direction of a copy
        self.start_ns = start_ns
        self.end_ns = 0
        self.thread = thread
        self.parent: Event | None = None
        # A list once the event has children (the recorder replaces the shared empty tuple).
        # Read it, don't append to it.
        self.children: list[Event] | tuple[()] = _NO_CHILDREN
        # (shape, dtype) per argument as recorded (record_shapes), formatted on demand.
        self.inputs: tuple[Any, ...] = ()
        self.bytes = 0
        self.flops = 0
        # Device time in ns, known at once for synchronous devices; ``timing`` holds what
        # resolves it later (a pair of CUDA events on a real GPU) until the profile stops.
        self.device_ns = 0.0
        self.timing: Any = None
        # profile_memory: net bytes allocated minus freed while the event was open, children
        # included (PyTorch's cpu_memory_usage / cuda_memory_usage); host bytes as tracemalloc
        # sees them, device bytes as the CUDA runtime's memory_allocated() moved.
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        # grid/block of launches, copy direction, ...: replaced, never updated in place.
        self.extra: dict[str, Any] | MappingProxyType[str, Any] = _NO_EXTRA

    # -- PyTorch-style views (µs) ----------------------------------------------------------
    @property
    def input_shapes(self) -> list[Any]:
        """PyTorch's "Input Shapes": a tensor's shape, a list of tensors' shapes, [] else."""
        return [_shape_of(a) for a in self.inputs]

    @property
    def input_dtypes(self) -> list[Any]:
        return [_dtype_of(a) for a in self.inputs]

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return 0.0 if self.kind == LAUNCH else (self.end_ns - self.start_ns) / 1e3

    @property
    def cpu_children(self) -> list[Event]:
        return [c for c in self.children if c.kind != LAUNCH]

    @property
    def self_cpu_time_total(self) -> float:
        return max(0.0, self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children))

    @property
    def device_time_total(self) -> float:
        """A launch's own time; a range's children summed; a CPU kernel's or copy's wall time;
        a CUDA backend kernel's or device copy's launches plus the kernels and copies it
        called (its own span when it made none of those: a cuBLAS call, a memcpy)."""
        if self.kind == RANGE:
            return sum(c.device_time_total for c in self.children)
        if self.kind in (KERNEL, COPY) and self.children and self.device != "cpu":
            return sum(c.device_ns / 1e3 if c.kind == LAUNCH else c.device_time_total
                       for c in self.children)
        return self.device_ns / 1e3

    @property
    def self_device_time_total(self) -> float:
        """Device time no child event accounts for (so summing it over all events counts each
        device second once): a launch's; a kernel's or copy's without children; a CPU
        kernel's minus its nested kernels'."""
        if self.kind == LAUNCH or (self.kind in (KERNEL, COPY) and not self.children):
            return self.device_time_total
        if self.kind == KERNEL and self.device == "cpu":
            return max(0.0, self.device_time_total
                       - sum(c.device_time_total for c in self.cpu_children))
        return 0.0

    # torch.profiler's CUDA-named aliases
    cuda_time_total = device_time_total
    self_cuda_time_total = self_device_time_total

    # -- memory (profile_memory) ---------------------------------------------------------------
    @property
    def memory_bytes(self) -> int:
        """The net device bytes (this profiler's older name for ``device_memory_usage``)."""
        return self.device_memory_usage

    @memory_bytes.setter
    def memory_bytes(self, value: int) -> None:
        self.device_memory_usage = value

    @property
    def self_cpu_memory_usage(self) -> int:
        """Host bytes not accounted for by a child event (PyTorch's definition: the total
        minus the children's totals), e.g. a frontend's output allocated inside a range."""
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.children)

    @property
    def self_device_memory_usage(self) -> int:
        return self.device_memory_usage - sum(c.device_memory_usage for c in self.children)

    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = self_device_memory_usage

    @property
    def time_range(self) -> tuple[float, float]:
        return self.start_ns / 1e3, self.end_ns / 1e3

    def __repr__(self) -> str:
        return (f"<Event {self.kind} {self.name!r} on {self.device or '-'}: "
                f"cpu {self.cpu_time_total:.1f} us, device {self.device_time_total:.1f} us, "
                f"{self.bytes} B, {self.flops} flop>")


def describe_args(args: Any) -> tuple[Any, ...]:
    """What ``input_shapes``/``input_dtypes`` are computed from, taken cheaply at call time:
    per argument ``(shape, dtype)`` for a tensor, a list of those for a list of tensors,
    "Scalar" for a Python number, None for anything else."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(FreshTuple((a._shape, a._dtype)))
        elif type(a) in (list, tuple) and a and all(isinstance(x, Tensor) for x in a):
            out.append(FreshList(FreshTuple((x._shape, x._dtype)) for x in a))
        else:
            out.append("Scalar" if isinstance(a, int | float | bool | complex) else None)
    return FreshTuple(out)


def _shape_of(item: Any) -> list[Any]:
    if isinstance(item, tuple):
        return list(item[0])
    if isinstance(item, list):
        return [list(shape) for shape, _ in item]
    return []


def _dtype_of(item: Any) -> Any:
    if isinstance(item, tuple):
        return str(item[1])
    if isinstance(item, list):
        return [str(dt) for _, dt in item]
    return item or ""


def device_of(args: Any) -> str:
    """The device of the first tensor among a call's arguments (lists searched too)."""
    for a in args:
        if isinstance(a, Tensor):
            return str(a._storage.device)
        if type(a) in (list, tuple):
            for x in a:
                if isinstance(x, Tensor):
                    return str(x._storage.device)
    return ""

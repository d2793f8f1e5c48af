"""Device memory statistics and the caching allocator's controls, as PyTorch names them.

The runtime's caching allocator (CuPy's MemoryPool, or the emulator's size-class pool) keeps
freed blocks for reuse: ``memory_allocated`` counts bytes held by live tensors,
``memory_reserved`` adds the cached blocks, ``empty_cache`` returns those to the device. An
allocation that does not fit frees the cache and retries once before raising
:class:`OutOfMemoryError` with the size asked for and the bytes in use.
"""

from __future__ import annotations

from typing import Any

from gputensor.kernels.cuda import device as _kdevice
from gputensor.kernels.cuda.runtime import OutOfMemoryError

from .devices import _checked, _index, _require


def _rt(device: Any) -> Any:
    """The runtime of ``device`` (None: the current device)."""
    _require()
    return _kdevice.runtime_of(_checked(_index(device, optional=False)))


def memory_allocated(device: Any = None) -> int:
    """Bytes of device memory held by live tensors (rounded to the allocator's blocks)."""
    return int(_rt(device).memory_allocated())


def max_memory_allocated(device: Any = None) -> int:
    """The peak of ``memory_allocated`` since start or the last ``reset_peak_memory_stats``."""
    return int(_rt(device).max_memory_allocated())


def memory_reserved(device: Any = None) -> int:
    """Bytes the caching allocator holds from the device: live blocks plus cached ones."""
    return int(_rt(device).memory_reserved())


def max_memory_reserved(device: Any = None) -> int:
    """The peak of ``memory_reserved`` since start or the last ``reset_peak_memory_stats``."""
    return int(_rt(device).max_memory_reserved())


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart every peak counter from its current value."""
    _rt(device).reset_peak_memory_stats()


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Restart the allocated/freed totals and the event counts (``num_ooms``, ...) from 0."""
    _rt(device).stats.reset_accumulated()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of device memory, as the driver reports them."""
    return _rt(device).mem_get_info()


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Cap this process's caching allocator at ``fraction`` of the device's memory: an
    allocation past it raises OutOfMemoryError (after releasing the cache and retrying)."""
    if not isinstance(fraction, float | int) or isinstance(fraction, bool):
        raise TypeError(f"Invalid type for fraction argument, must be `float`, got "
                        f"{type(fraction).__name__}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _rt(device).set_memory_fraction(float(fraction))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Release every device allocator's cached (unused) blocks back to its device, with the
    cached kernel metadata (shapes and strides of recent launches, ``constant_array``)."""
    from gputensor import cuda

    if cuda.is_initialized():  # like PyTorch: a no-op before CUDA is initialised
        _kdevice.clear_constants()
        for rt in _kdevice.runtimes():
            rt.empty_cache()


def memory_stats(device: Any = None) -> dict[str, int]:
    """The allocator's counters under PyTorch's key names (kernels/cuda/memstats.py): every
    device allocation, CuPy's cuBLAS temporaries included, comes from this one pool."""
    return dict(_rt(device).memory_stats())


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator's statistics for the device."""
    from .devices import get_device_properties

    rt = _rt(device)
    props = get_device_properties(device)
    allocated, reserved = int(rt.memory_allocated()), int(rt.memory_reserved())
    rows = [
        ("Allocated memory (live tensors)", allocated),
        ("Peak allocated memory", int(rt.max_memory_allocated())),
        ("Reserved memory (live + cached)", reserved),
        ("Cached, unused memory", reserved - allocated),
        ("Device total memory", props.total_memory),
    ]
    width = 72
    title = f"gputensor CUDA memory summary, device {_index(device, optional=False)}"
    lines = ["=" * width, f"|{title:^{width - 2}}|", f"|{props.name:^{width - 2}}|",
             "|" + "-" * (width - 2) + "|",
             f"| {'Metric':<44}| {'Value':>22} |", "|" + "-" * (width - 2) + "|"]
    lines += [f"| {name:<44}| {_fmt(value):>22} |" for name, value in rows]
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


__all__ = [
    "OutOfMemoryError", "empty_cache", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_stats", "memory_summary",
    "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]

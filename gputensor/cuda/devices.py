"""CUDA devices: which one is current, their names and properties, and device-wide sync.

Each device is served by its own runtime (kernels/cuda/device.py). The current device is per
thread, as in PyTorch: "cuda" without an index means it, and it is where kernels of an op
without CUDA tensors launch; an op on CUDA tensors runs on their device whatever is current.
"""

from __future__ import annotations

from typing import Any

from gputensor._device import device as Device
from gputensor.kernels.cuda import device as _kdevice
from gputensor.kernels.cuda.runtime import AcceleratorError


def _require() -> Any:
    """The current device's runtime, initialising CUDA on first use (a clear error without)."""
    from gputensor import cuda

    cuda._require()
    return _kdevice.runtime()


def _index(device: Any, optional: bool = True) -> int:
    """A device argument (None, int, "cuda:1", gt.device) as an index; -1 for None/negative
    when ``optional``."""
    if device is None:
        return current_device() if not optional else -1
    if isinstance(device, Device | str):
        d = Device(device)
        if d.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {d}")
        return current_device() if d.index is None else d.index
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise ValueError(f"Expected a cuda device, an index or None, got {device!r}")


def _checked(index: int) -> int:
    _require()
    count = len(_kdevice.runtimes())
    if not 0 <= index < count:
        raise AcceleratorError(f"CUDA error: invalid device ordinal (device {index} requested, "
                               f"{count} device(s) available)")
    return index


def current_device() -> int:
    """The index of the current CUDA device (0 unless ``set_device`` chose another)."""
    _require()
    return _kdevice.current_index()


def set_device(device: Any) -> None:
    """Make ``device`` current; a negative index or None leaves it unchanged (as PyTorch)."""
    idx = _index(device)
    if idx >= 0:
        _kdevice.set_current_index(_checked(idx))


class device:
    """Context manager that makes ``device`` current and restores the previous one on exit."""

    def __init__(self, device: Any) -> None:
        self.idx = _index(device)
        self.prev_idx = -1

    def __enter__(self) -> device:
        if self.idx >= 0:
            self.prev_idx = current_device()
            set_device(self.idx)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.prev_idx >= 0:
            set_device(self.prev_idx)


class device_of(device):
    """``device`` for the device of a tensor (a no-op for CPU tensors)."""

    def __init__(self, obj: Any) -> None:
        dev = obj.device
        super().__init__(dev if dev.type == "cuda" else None)


class _CudaDeviceProperties:
    """What ``get_device_properties`` returns: PyTorch's fields and repr."""

    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count")

    def __init__(self, name: str, major: int, minor: int, total_memory: int,
                 multi_processor_count: int) -> None:
        self.name = name
        self.major = major
        self.minor = minor
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CudaDeviceProperties) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


def get_device_properties(device: Any = None) -> _CudaDeviceProperties:
    """Name, compute capability, memory and SM count of a CUDA device."""
    _require()
    idx = _checked(_index(device, optional=False))
    p = _kdevice.runtime_of(idx).properties(idx)
    return _CudaDeviceProperties(p.name, int(p.major), int(p.minor), int(p.total_memory),
                                 int(p.multi_processor_count))


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    p = get_device_properties(device)
    return (p.major, p.minor)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the device computes in bfloat16 natively (compute capability 8.0 or newer);
    the CUDA kernels load and store bfloat16 on any device and compute in float."""
    try:
        major, _ = get_device_capability()
    except RuntimeError:
        return False
    return major >= 8 or including_emulation


def synchronize(device: Any = None) -> None:
    """Wait for all work queued on every stream of the device."""
    _require()
    _kdevice.runtime_of(_checked(_index(device, optional=False))).synchronize()


def runtime_name() -> str:
    """Which runtime serves "cuda": "emulator" or "cupy"."""
    return _require().name

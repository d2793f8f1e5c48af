"""gputensor.cuda: CUDA availability, devices, and the CUDA storage and tensor types.

Each "cuda" device is served by its own device runtime: CuPy on a machine with NVIDIA GPUs, or
the CPU emulator of the same CUDA kernels (``GPUTENSOR_CUDA_EMULATOR=1`` or ``use_emulator()``;
``GPUTENSOR_CUDA_EMULATOR=2`` or ``use_emulator(devices=2)`` emulates a two-GPU machine).
Nothing is probed at import: the first ``is_available()`` or CUDA allocation picks the runtime
(CuPy is imported then). Without either, ``is_available()`` is False and moving data to CUDA
raises a clear error.

The PyTorch-shaped API lives in one module per concern and is re-exported here:
devices.py (current device, properties, synchronize), memory.py (allocator statistics,
``empty_cache``, ``memory_summary``, ``OutOfMemoryError``), streams.py (``Stream``, ``Event``,
``stream(...)``) and random.py (seeding the CUDA default generators). ``gputensor selftest``
(gputensor/selftest.py) checks the kernels of the device against the CPU backend.
"""

from __future__ import annotations

import os
from typing import Any

from gputensor._legacy import types_in
from gputensor.kernels.cuda import device as _device
from gputensor.storage.allocator import (
    CUDA_UNAVAILABLE,
    DRIVERS,
    LAZY_INIT,
    UNAVAILABLE_REASONS,
    unavailable_message,
)
from gputensor.storage.typed import STORAGE_TYPES

EMULATOR_ENV = "GPUTENSOR_CUDA_EMULATOR"
_why_unavailable = ""


def use_emulator(devices: int | None = None) -> None:
    """Serve "cuda" with the CPU emulator of the CUDA kernels: ``devices`` emulated devices
    (None: keep an emulator already serving, else one device)."""
    from gputensor.kernels.cuda.emulator_driver import EmulatorRuntime, emulated_devices

    LAZY_INIT.pop("cuda", None)
    running = _device.runtimes()
    if not running or not isinstance(running[0], EmulatorRuntime) or \
            devices is not None and len(running) != devices:
        _device.activate(emulated_devices(1 if devices is None else devices))


def _emulated_device_count(value: str) -> int:
    """``GPUTENSOR_CUDA_EMULATOR``'s value as a device count: 1 for a switch ("1", "true",
    "yes", "on"), else the number itself."""
    if value.strip().lower() in ("1", "true", "yes", "on"):
        return 1
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"{EMULATOR_ENV}={value!r}: expected 1 (or true/yes/on) to emulate "
                         f"one CUDA device, or the number of devices to emulate") from None
    if count < 1:
        raise ValueError(f"{EMULATOR_ENV}={value!r}: the number of emulated devices must be "
                         f"at least 1")
    return count


def _lazy_init() -> None:
    """Pick the runtime: the emulator when asked for, else CuPy when it sees a GPU and a probe
    kernel, built by the project's NVRTC step, compiles and runs there."""
    global _why_unavailable
    value = os.environ.get(EMULATOR_ENV, "")
    if value not in ("", "0"):
        use_emulator(_emulated_device_count(value))
        return
    from gputensor.kernels.cuda import cupy_driver

    ok, why = cupy_driver.is_usable()
    if ok:
        try:
            rt = cupy_driver.all_devices()
            for device_rt in rt:
                cupy_driver.probe(device_rt)
        except Exception as exc:  # no NVRTC, a driver too old for it, a failed launch, ...
            ok, why = False, f"{type(exc).__name__}: {exc}"
    if ok:
        _device.activate(rt)
    else:
        _why_unavailable = UNAVAILABLE_REASONS["cuda"] = why


LAZY_INIT["cuda"] = _lazy_init


def _ensure() -> None:
    init = LAZY_INIT.pop("cuda", None)
    if init is not None:
        init()


def is_available() -> bool:
    """True when a runtime serves "cuda" (CuPy with a GPU, or the emulator) with a device."""
    _ensure()
    return "cuda" in DRIVERS and device_count() > 0


def device_count() -> int:
    _ensure()
    drv = DRIVERS.get("cuda")  # the "cuda" memory driver: one runtime per device
    return drv.device_count() if drv is not None else 0


def is_initialized() -> bool:
    """Whether the CUDA runtime has been picked (PyTorch's lazy initialisation)."""
    return "cuda" not in LAZY_INIT and "cuda" in DRIVERS


def init() -> None:
    """Initialise CUDA now (it happens on first use anyway); a clear error without CUDA."""
    _require()


def _require() -> None:
    if not is_available():
        raise RuntimeError(unavailable_message("cuda"))


def why_unavailable() -> str:
    """Why ``is_available()`` is False ("" when it is True)."""
    if is_available():
        return ""
    return _why_unavailable or CUDA_UNAVAILABLE


# The public API, one module per concern (each initialises CUDA lazily on first call).
from gputensor.kernels.cuda import cast as _cast  # noqa: E402,F401  (declares cast.cu)
from gputensor.kernels.cuda import errors as _errors  # noqa: E402
from gputensor.kernels.cuda import storage_driver as _storage_driver  # noqa: E402

from . import amp, memory, random, sparse, streams  # noqa: E402,F401  (sparse: gt.cuda.sparse)
from .devices import (  # noqa: E402
    _CudaDeviceProperties,
    current_device,
    device,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_bf16_supported,
    runtime_name,
    set_device,
)
from .devices import synchronize as _synchronize_device  # noqa: E402
from .graphs import (  # noqa: E402
    CUDAGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from .kernels import CudaKernel, CudaModule, compile_kernel, load_inline  # noqa: E402
from .memory import (  # noqa: E402
    OutOfMemoryError,
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .random import (  # noqa: E402
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (  # noqa: E402
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

__all__ = [
    "CudaKernel", "CudaModule", "compile_kernel", "load_inline", "amp", "CUDAGraph", "graph",
    "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables",
    "Event", "ExternalStream", "OutOfMemoryError", "Stream", "StreamContext", "current_device",
    "current_stream",
    "default_stream", "device", "device_count", "device_of", "empty_cache",
    "get_device_capability", "get_device_name", "get_device_properties", "get_rng_state",
    "get_rng_state_all", "init", "initial_seed", "is_available", "is_bf16_supported",
    "is_initialized", "manual_seed", "manual_seed_all", "max_memory_allocated",
    "max_memory_reserved", "mem_get_info", "memory", "reset_accumulated_memory_stats",
    "set_per_process_memory_fraction",
    "memory_allocated", "memory_reserved", "memory_stats", "memory_summary", "random",
    "reset_max_memory_allocated", "reset_peak_memory_stats", "runtime_name", "seed",
    "seed_all", "set_device", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "streams", "synchronize", "use_emulator", "why_unavailable", "_CudaDeviceProperties",
]



def synchronize(device: Any = None) -> None:
    """Wait for all work queued on every stream of the device, then raise any error a kernel
    recorded since the last check (an out-of-range index: kernels/cuda/errors.py)."""
    _synchronize_device(device)
    _errors.check_pending()


# Copies through the "cuda" storage driver are ordered on the current stream.
_storage_driver.STREAM_HOOK = streams.raw_current_stream


def __getattr__(name: str) -> object:
    if name == "default_generators":  # a tuple in PyTorch: one generator per device
        return random.all_default_generators()
    raise AttributeError(f"module 'gputensor.cuda' has no attribute {name!r}")


globals().update({cls.__name__: cls for (_dt, dev), cls in STORAGE_TYPES.items()
                  if dev == "cuda"})
globals().update(types_in("gputensor.cuda"))
__all__.extend(cls.__name__ for (_dt, dev), cls in STORAGE_TYPES.items() if dev == "cuda")
__all__.extend(types_in("gputensor.cuda"))

"""Device-side dtype conversion of contiguous element runs (kernels/cuda/cast.cu).

The "cuda" storage driver's ``cast`` (every storage cast and same-device ``tensor.to(dtype)``)
launches these kernels on raw device addresses, so a conversion never stages through the host.
The kernels are compiled per runtime object (the driver may serve a runtime that is not the
active one, as the runtime tests do), once, into one module per source dtype.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import ml_dtypes  # bfloat16's NumPy dtype (a dependency of gputensor)
import numpy as np

from .device import BLOCK, NVRTC_OPTIONS, CudaSource, grid_for, launch_kernel

# NumPy dtype -> (short name, element C type, is complex): complex travels as its components.
CAST_TYPES: dict[np.dtype, tuple[str, str, bool]] = {
    np.dtype(np.bool_): ("b", "bool", False),
    np.dtype(np.uint8): ("u8", "unsigned char", False),
    np.dtype(np.int8): ("i8", "signed char", False),
    np.dtype(np.int16): ("i16", "short", False),
    np.dtype(np.int32): ("i32", "int", False),
    np.dtype(np.int64): ("i64", "long long", False),
    np.dtype(np.float16): ("f16", "__half", False),
    np.dtype(np.float32): ("f32", "float", False),
    np.dtype(np.float64): ("f64", "double", False),
    np.dtype(np.complex64): ("c64", "float", True),
    np.dtype(np.complex128): ("c128", "double", True),
}
CAST_TYPES[np.dtype(ml_dtypes.bfloat16)] = ("bf16", "__nv_bfloat16", False)
# PyTorch's limited-support unsigned dtypes (gputensor/_limited.py casts them here).
CAST_TYPES[np.dtype(np.uint16)] = ("u16", "unsigned short", False)
CAST_TYPES[np.dtype(np.uint32)] = ("u32", "unsigned int", False)
CAST_TYPES[np.dtype(np.uint64)] = ("u64", "unsigned long long", False)


def _declare(src: np.dtype) -> CudaSource:
    """cast.cu instantiated for every destination of one source dtype: one module per source
    keeps the first cast's compile short (the modules compile lazily, each once)."""
    source = CudaSource("cast.cu")
    sn, st, sc = CAST_TYPES[src]
    for dst, (dn, dt, dc) in CAST_TYPES.items():
        if dst != src:
            source.instantiate(
                f"cast_{sn}_{dn}", f"const {st}* src, {dt}* dst, long long n",
                f"gt_cast::cast<{st}, {dt}, {str(sc).lower()}, {str(dc).lower()}>(src, dst, n)",
                [{}])
    return source


SOURCES: dict[np.dtype, CudaSource] = {src: _declare(src) for src in CAST_TYPES}

# (runtime, source dtype) -> (module, kernels by name); runtimes are held weakly.
_modules: weakref.WeakKeyDictionary[Any, dict[np.dtype, tuple[Any, dict[str, Any]]]] = \
    weakref.WeakKeyDictionary()
_lock = threading.Lock()


def kernel_name(src: np.dtype, dst: np.dtype) -> str:
    """The cast kernel for a dtype pair (a clear error for dtypes it does not cover)."""
    for dt in (src, dst):
        if np.dtype(dt) not in CAST_TYPES:
            raise TypeError(f"no CUDA cast kernel for dtype {np.dtype(dt)}")
    return f"cast_{CAST_TYPES[np.dtype(src)][0]}_{CAST_TYPES[np.dtype(dst)][0]}"


def _kernel(rt: Any, src: np.dtype, name: str) -> Any:
    per_rt = _modules.get(rt)
    entry = per_rt.get(src) if per_rt is not None else None
    if entry is None:
        with _lock:
            per_rt = _modules.setdefault(rt, {})
            entry = per_rt.get(src)
            if entry is None:
                source = SOURCES[src]
                module = rt.compile(source.source(), f"cast_{CAST_TYPES[src][0]}",
                                    options=NVRTC_OPTIONS)
                entry = per_rt[src] = (module, {})
    k = entry[1].get(name)
    if k is None:
        k = entry[1][name] = rt.get_kernel(entry[0], name)
    return k


def cast(rt: Any, dst_ptr: int, dst_dtype: np.dtype, src_ptr: int, src_dtype: np.dtype,
         count: int, stream: Any = None) -> None:
    """Convert ``count`` elements at device address ``src_ptr`` into ``dst_ptr`` on ``rt``.

    The two ranges must not overlap (a cast reads and writes different widths)."""
    if count <= 0:
        return
    name = kernel_name(src_dtype, dst_dtype)
    launch_kernel(rt, _kernel(rt, np.dtype(src_dtype), name), grid_for(count), BLOCK, 0,
                  [src_ptr, dst_ptr, np.int64(count)], "cast.cu", stream=stream)

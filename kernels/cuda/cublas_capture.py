"""cuBLAS products that a CUDA graph capture records, on the libcublas that CuPy loaded.

CuPy's cuBLAS wrappers refuse a capturing stream: each one first sets the handle's stream,
and ``setStream`` raises NotImplementedError("calling cuBLAS API during stream capture is
currently unsupported") when ``runtime.streamIsCapturing(stream)``
(cupy_backends/cuda/libs/cublas.pyx; CuPy leaves cuBLAS capture off until it can test
cuBLAS's conditions). cuBLAS itself records into a stream capture (the cuBLAS
documentation, "CUDA Graphs Support"): alpha and beta behind host pointers are captured by
value, and a workspace given with ``cublasSetWorkspace`` keeps the library from allocating
while the stream is captured.

So a product inside a capture calls the same library through ctypes, on a handle of its
own. The handle and its workspace (a block of the project's pool that lives as long as the
runtime) are made before the capture begins, since both allocate device memory. Captures
and replays that run on one stream at a time share that workspace, as PyTorch's per-stream
cuBLAS workspace is shared.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

# PyTorch's default cuBLAS workspace on Hopper (CUBLAS_WORKSPACE_CONFIG=:4096:8): 8 x 4 MiB.
WORKSPACE_BYTES = 32 << 20

_c_int, _c_ll, _c_void_p = ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p
# cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA,
#   B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo)
_GEMM_ARGTYPES = (_c_void_p, _c_int, _c_int, _c_int, _c_int, _c_int, _c_void_p, _c_void_p, _c_int,
                  _c_int, _c_ll, _c_void_p, _c_int, _c_int, _c_ll, _c_void_p, _c_void_p, _c_int,
                  _c_int, _c_ll, _c_int, _c_int, _c_int)


def loaded_library_path(maps: str = "/proc/self/maps") -> str | None:
    """The path of the libcublas mapped into this process (not libcublasLt), or None."""
    try:
        with open(maps) as f:
            for line in f:
                path = line.rsplit(" ", 1)[-1].strip()
                name = path.rsplit("/", 1)[-1]
                if name.startswith("libcublas.so"):
                    return path
    except OSError:
        return None
    return None


def load_library() -> Any | None:
    """The libcublas CuPy loaded (found among the process's mappings), with the signatures
    this module calls declared, or None where it is not found (then captures keep the
    project's tiled gemm kernel)."""
    path = loaded_library_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)  # the already loaded library: dlopen returns its handle
        lib.cublasCreate_v2.argtypes = (ctypes.POINTER(_c_void_p),)
        lib.cublasSetStream_v2.argtypes = (_c_void_p, _c_void_p)
        lib.cublasSetWorkspace_v2.argtypes = (_c_void_p, _c_void_p, ctypes.c_size_t)
        lib.cublasGemmStridedBatchedEx.argtypes = _GEMM_ARGTYPES
        for fn in (lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasSetWorkspace_v2,
                   lib.cublasGemmStridedBatchedEx):
            fn.restype = _c_int
    except (OSError, AttributeError):
        return None
    return lib


class CaptureBlas:
    """A cuBLAS handle for products inside a CUDA graph capture (see the module docstring).
    ``workspace`` is a device address of at least ``workspace_bytes`` that outlives it."""

    def __init__(self, lib: Any, workspace: int, workspace_bytes: int = WORKSPACE_BYTES) -> None:
        self.lib = lib
        handle = _c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle.value
        _check(lib.cublasSetWorkspace_v2(self.handle, int(workspace), workspace_bytes),
               "cublasSetWorkspace")
        self._gemm: Callable[..., int] = lib.cublasGemmStridedBatchedEx

    def gemm(self, stream: int, *args: Any) -> None:
        """``cublasGemmStridedBatchedEx(handle, *args)`` queued on ``stream`` (a pointer);
        ``args`` in the order of CuPy's ``gemmStridedBatchedEx`` after its handle."""
        _check(self.lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
        _check(self._gemm(self.handle, *args), "cublasGemmStridedBatchedEx")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS error: {what} returned status {status} during a CUDA "
                           f"graph capture")

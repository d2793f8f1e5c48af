"""CUDA tensors as arrays of the runtime's array library, for backends built on a library
made for the job (gt.linalg on cuSOLVER/cuBLAS, gt.fft on cuFFT, through CuPy on a GPU; SciPy's
LAPACK and pocketfft on the emulator's host memory).

``library_arrays(t, ...)`` enters the tensors' runtime's ``array_library()`` scope (CuPy's own
allocations come from the project's pool there, its work goes on the current stream) and
yields the library with a zero-copy array per tensor. A result the library computed lands in
an output tensor with ``out_array[...] = result``: one device copy, no host round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gputensor._tensor import Tensor

from ..device import ptr, runtime_of
from ..runtime import ArrayLibrary


def as_library_array(rt: Any, t: Tensor) -> Any:
    """A zero-copy array of the runtime's library over a CUDA tensor's elements."""
    size = t._dtype.itemsize
    return rt.as_array(ptr(t), t._shape, tuple(s * size for s in t._stride), t._dtype.np_dtype)


@contextlib.contextmanager
def library_arrays(*tensors: Tensor) -> Iterator[tuple[ArrayLibrary, list[Any]]]:
    """The tensors' runtime's array library and one array per tensor (all on one device)."""
    devices = {t._storage.device for t in tensors}
    if len(devices) != 1:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                           f"two devices, {' and '.join(sorted(map(str, devices)))}!")
    rt = runtime_of(next(iter(devices)).index)
    with rt.array_library() as lib:
        yield lib, [as_library_array(rt, t) for t in tensors]

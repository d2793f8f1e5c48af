"""CUDA kernels of the three FFT primitives (gputensor/_ops/spectral.py), through the runtime's
array library on zero-copy views of the tensors (``library_arrays``): ``cupy.fft`` (cuFFT, on
the current stream, work memory from the project's pool) on a GPU, ``scipy.fft`` (pocketfft)
on the emulator's memory. The library's result lands in ``out`` with one device copy; no
host round trip.

Both libraries take the same ``fftn/ifftn/rfftn/irfftn(a, s, axes, norm)`` calls and keep
single precision; the normalization mode maps to their ``norm`` names as on the CPU. One
transformed dim goes through the 1-D functions (``fft/ifft/rfft/irfft(a, n, axis, norm)``),
as CuPy's own rfft of 2^20 floats does (21 us on an H200, against 99 us for this kernel when it
called rfftn: the 1-D route is still to be timed on a GPU).
"""

from __future__ import annotations

from collections.abc import Sequence

from gputensor._tensor import Tensor
from gputensor.kernels.registry import CUDA

from .library import library_arrays

FORWARD_NORM = ("backward", "ortho", "forward")
INVERSE_NORM = ("forward", "ortho", "backward")


@CUDA.register("_fft_c2c")
def fft_c2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            forward: bool) -> None:
    with library_arrays(x, out) as (lib, (xa, oa)):
        norm = (FORWARD_NORM if forward else INVERSE_NORM)[normalization]
        if len(dim) == 1:
            oa[...] = (lib.fft.fft if forward else lib.fft.ifft)(xa, axis=dim[0], norm=norm)
        else:
            oa[...] = (lib.fft.fftn if forward else lib.fft.ifftn)(xa, axes=dim, norm=norm)


@CUDA.register("_fft_r2c")
def fft_r2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            onesided: bool) -> None:
    with library_arrays(x, out) as (lib, (xa, oa)):
        norm = FORWARD_NORM[normalization]
        if len(dim) == 1:
            transform = lib.fft.rfft if onesided else lib.fft.fft
            oa[...] = transform(xa, axis=dim[0], norm=norm)
        else:
            transform = lib.fft.rfftn if onesided else lib.fft.fftn
            oa[...] = transform(xa, axes=dim, norm=norm)


@CUDA.register("_fft_c2r")
def fft_c2r(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            last_dim_size: int) -> None:
    with library_arrays(x, out) as (lib, (xa, oa)):
        shape = [out._shape[d] for d in dim]
        norm = INVERSE_NORM[normalization]
        if len(dim) == 1:
            oa[...] = lib.fft.irfft(xa, n=shape[0], axis=dim[0], norm=norm)
        else:
            oa[...] = lib.fft.irfftn(xa, s=shape, axes=dim, norm=norm)

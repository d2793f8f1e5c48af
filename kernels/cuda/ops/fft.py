"""CUDA kernels of the three FFT primitives (gputensor/_ops/spectral.py), through the runtime's
array library on zero-copy views of the tensors (``library_arrays``): ``cupy.fft`` (cuFFT, on
the current stream, work memory from the project's pool) on a GPU, ``scipy.fft`` (pocketfft)
on the emulator's memory. The library's result lands in ``out`` with one device copy; no
host round trip.

Both libraries take the same ``fftn/ifftn/rfftn/irfftn(a, s, axes, norm)`` calls and keep
single precision; the normalization mode maps to their ``norm`` names as on the CPU.
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
        if forward:
            oa[...] = lib.fft.fftn(xa, axes=dim, norm=FORWARD_NORM[normalization])
        else:
            oa[...] = lib.fft.ifftn(xa, axes=dim, norm=INVERSE_NORM[normalization])


@CUDA.register("_fft_r2c")
def fft_r2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            onesided: bool) -> None:
    with library_arrays(x, out) as (lib, (xa, oa)):
        transform = lib.fft.rfftn if onesided else lib.fft.fftn
        oa[...] = transform(xa, axes=dim, norm=FORWARD_NORM[normalization])


@CUDA.register("_fft_c2r")
def fft_c2r(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            last_dim_size: int) -> None:
    with library_arrays(x, out) as (lib, (xa, oa)):
        shape = [out._shape[d] for d in dim]
        oa[...] = lib.fft.irfftn(xa, s=shape, axes=dim, norm=INVERSE_NORM[normalization])

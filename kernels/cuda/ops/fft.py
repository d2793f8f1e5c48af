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

The fused stft/istft kernels (``_stft_r2c``, ``_istft_c2r``: see kernels/cpu/fft.py) are a few
calls: the project's framing kernel (fft.cu: reflect padding by index, times the window, into
one contiguous buffer), one batched cuFFT rfft and the copy into the result; an irfft of the
frames, then an overlap-add in ceil(n_fft / hop) strided slice additions (frame t
and segment r land on hop-sized block t + r) divided by the squared window's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.registry import CUDA

from ..device import CudaSource, grid_for, launch
from ..dtypes import SHORT
from .library import library_arrays
from .linalg import materialize

SRC = CudaSource("fft.cu")
SRC.instantiate(
    "stft_frames_{s}",
    "{T}* frames, const {T}* x, const {T}* w, long long length, int n_frames, int n_fft, "
    "int hop, int pad, long long total",
    "gtfft::stft_frames<{T}>(frames, x, w, length, n_frames, n_fft, hop, pad, total)",
    [{"s": SHORT[d], "T": t} for d, t in ((D.float32, "float"), (D.float64, "double"))])

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


@CUDA.register("_stft_r2c")
def stft_r2c(out: Tensor, x: Tensor, window: Tensor, hop_length: int, pad: int,
             normalization: int) -> None:
    batch, n_frames = out._shape[0], out._shape[1]
    n_fft = window._shape[0]
    frames = empty((batch, n_frames, n_fft), x._dtype, x.device)
    x = x if x.is_contiguous() else materialize(x)  # the kernel reads rows of `length`
    window = window if window.is_contiguous() else materialize(window)
    total = frames.numel()
    if total:
        launch(SRC, f"stft_frames_{SHORT[x._dtype]}", grid_for(total), 256,
               [frames, x, window, np.int64(x._shape[-1]), np.int32(n_frames), np.int32(n_fft),
                np.int32(hop_length), np.int32(pad), np.int64(total)])
    with library_arrays(frames, out) as (lib, (fa, oa)):
        oa[...] = lib.fft.rfft(fa, axis=2, norm=FORWARD_NORM[normalization])


def _overlap_add(xp: Any, frames: Any, hop: int) -> Any:
    """(batch, frames, n) frames summed into (batch, >= n + hop (frames - 1)) signals."""
    batch, n_frames, n = frames.shape
    blocks = math.ceil(n / hop)
    y = xp.zeros((batch, (n_frames + blocks) * hop), frames.dtype)
    for r in range(blocks):
        width = min(hop, n - r * hop)
        seg = y[:, r * hop:(r + n_frames) * hop].reshape(batch, n_frames, hop)
        seg[:, :, :width] += frames[:, :, r * hop:r * hop + width]
    return y


@CUDA.register("_istft_c2r")
def istft_c2r(out: Tensor, x: Tensor, window: Tensor, hop_length: int, start: int,
              normalization: int) -> bool:
    with library_arrays(x, window, out) as (lib, (xa, wa, oa)):
        xp = lib.xp
        xa = xa if xa.ndim == 3 else xa[None]
        n_fft, length = wa.shape[0], oa.shape[1]
        frames = lib.fft.irfft(xa.transpose(0, 2, 1), n=n_fft, axis=2,
                               norm=INVERSE_NORM[normalization])
        y = _overlap_add(xp, frames * wa, hop_length)[:, start:start + length]
        envelope = _overlap_add(xp, xp.broadcast_to(wa * wa, (1, frames.shape[1], n_fft)),
                                hop_length)[:, start:start + length]
        oa[...] = y / envelope
        return bool(envelope.min() >= 1e-11)

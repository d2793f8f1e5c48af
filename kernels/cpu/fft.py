"""CPU kernels of the three FFT primitives (gputensor/_ops/spectral.py): pocketfft through
``scipy.fft``, on the tensors' host views, with ``workers=`` from the kernel thread budget
(``gt.set_num_threads``).

scipy.fft's ``norm`` names say which direction is scaled, so PyTorch's normalization mode
(0 none, 1 1/sqrt(n), 2 1/n) maps to one name for the forward sign and another for the
inverse. pocketfft keeps single precision (float32 -> complex64), as PyTorch does.

Where SciPy ships its pocketfft binding (``scipy.fft._pocketfft.pypocketfft``, whose ``inorm``
is PyTorch's normalization mode), the one-sided r2c, c2c and c2r transforms write straight
into ``out`` through its ``out=`` argument; otherwise (or for a two-sided r2c, which pocketfft
has no single call for) the public ``scipy.fft`` functions run and the result is copied into
``out``. Small transforms run on one thread: below ~2^16 points pocketfft's thread start-up
costs more than it saves (a frame batch of an stft, say).

The fused stft/istft kernels (``_stft_r2c``, ``_istft_c2r``) serve stft/istft calls that record
no graph. stft frames the signal (reflect padding by index, no padded copy) times the window
into a contiguous (batch, frames, n_fft) buffer that one batched pocketfft r2c transforms
straight into the result's memory; istft's c2r output is overlap-added, windowed and divided by
the summed squared window in one Numba pass. The transforms themselves are always pocketfft's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import njit

from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

# normalization mode -> scipy.fft's norm, for transforms with the forward (-) / inverse (+) sign
FORWARD_NORM = ("backward", "ortho", "forward")
INVERSE_NORM = ("forward", "ortho", "backward")


_PARALLEL_MIN = 1 << 16


@functools.cache
def _engines() -> tuple[ModuleType, Any]:
    """scipy.fft and SciPy's pocketfft binding (None where absent), imported on first use:
    importing scipy.fft costs ~0.4 s, which ``import gputensor`` should not pay."""
    import scipy.fft

    try:  # SciPy's own binding of pocketfft: the same engine, with an out= argument
        from scipy.fft._pocketfft import pypocketfft
    except ImportError:  # a SciPy without it takes the public functions
        pypocketfft = None
    return scipy.fft, pypocketfft


def _workers(points: int) -> int:
    """pocketfft's threads for a transform of ``points`` values (see the module docstring)."""
    return 1 if points < _PARALLEL_MIN else max(1, numba.get_num_threads())


@CPU.register("_fft_c2c")
def fft_c2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            forward: bool) -> None:
    sfft, pocketfft = _engines()
    if pocketfft is not None:
        pocketfft.c2c(x._host, dim, forward, normalization, out._host, _workers(out.numel()))
    elif forward:
        out._host[...] = sfft.fftn(x._host, axes=dim, norm=FORWARD_NORM[normalization],
                                        workers=_workers(out.numel()))
    else:
        out._host[...] = sfft.ifftn(x._host, axes=dim, norm=INVERSE_NORM[normalization],
                                         workers=_workers(out.numel()))


@CPU.register("_fft_r2c")
def fft_r2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            onesided: bool) -> None:
    sfft, pocketfft = _engines()
    if onesided and pocketfft is not None:
        pocketfft.r2c(x._host, dim, True, normalization, out._host, _workers(out.numel()))
        return
    transform = sfft.rfftn if onesided else sfft.fftn
    out._host[...] = transform(x._host, axes=dim, norm=FORWARD_NORM[normalization],
                               workers=_workers(out.numel()))


@CPU.register("_fft_c2r")
def fft_c2r(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            last_dim_size: int) -> None:
    sfft, pocketfft = _engines()
    if pocketfft is not None:
        pocketfft.c2r(x._host, dim, last_dim_size, False, normalization, out._host,
                       _workers(out.numel()))
        return
    shape = [out._shape[d] for d in dim]
    out._host[...] = sfft.irfftn(x._host, s=shape, axes=dim, norm=INVERSE_NORM[normalization],
                                 workers=_workers(out.numel()))


@njit(cache=True, error_model="numpy", boundscheck=False)
def _window_frames(x, w, pad, hop, frames):
    """frames[b, t, i] = xp[b, t * hop + i] * w[i], xp the signals reflect-padded by pad."""
    batch, n_frames, n = frames.shape
    length = x.shape[1]
    for b in range(batch):
        for t in range(n_frames):
            start = t * hop - pad
            if start >= 0 and start + n <= length:
                for i in range(n):
                    frames[b, t, i] = x[b, start + i] * w[i]
            else:
                for i in range(n):
                    j = start + i
                    if j < 0:
                        j = -j
                    elif j >= length:
                        j = 2 * (length - 1) - j
                    frames[b, t, i] = x[b, j] * w[i]


@CPU.register("_stft_r2c")
def stft_r2c(out: Tensor, x: Tensor, window: Tensor, hop_length: int, pad: int,
             normalization: int) -> None:
    """out (batch, frames, n_fft // 2 + 1): the one-sided r2c of the windowed frames of x
    (batch, length), or (length,) for one signal, reflect-padded by ``pad`` samples on both
    sides: the frames go into one buffer for one batched pocketfft r2c."""
    n_fft = window._shape[0]
    w = window._host
    xh = x._host if len(x._shape) == 2 else x._host[None]
    frames = np.empty((out._shape[0], out._shape[1], n_fft), x._dtype.np_dtype)
    _window_frames(xh, w, pad, hop_length, frames)
    sfft, pocketfft = _engines()
    if pocketfft is not None:
        pocketfft.r2c(frames, (2,), True, normalization, out._host, _workers(out.numel()))
    else:
        out._host[...] = sfft.rfft(frames, axis=2, norm=FORWARD_NORM[normalization],
                                   workers=_workers(out.numel()))


@njit(cache=True, error_model="numpy", boundscheck=False)
def _overlap_add(frames, w, hop, start, out):
    """out[b, s] = sum_t frames[b, t, i] w[i] / sum_t w[i]^2 over i = start + s - t * hop;
    False where that envelope falls below 1e-11 (PyTorch's NOLA check). The loops run over
    slices from 0 so that they vectorize."""
    batch, n_frames, n = frames.shape
    length = out.shape[1]
    total = n + hop * (n_frames - 1)
    squares = w * w
    envelope = np.zeros(total, w.dtype)
    for t in range(n_frames):
        e = envelope[t * hop:t * hop + n]
        for i in range(n):
            e[i] += squares[i]
    envelope = envelope[start:start + length]
    ok = True
    for s in range(length):
        ok &= envelope[s] >= 1e-11
    acc = np.empty(total, out.dtype)
    for b in range(batch):
        acc[:] = 0
        for t in range(n_frames):
            a = acc[t * hop:t * hop + n]
            f = frames[b, t]
            for i in range(n):
                a[i] += f[i] * w[i]
        a = acc[start:start + length]
        o = out[b]
        for s in range(length):
            o[s] = a[s] / envelope[s]
    return ok


@CPU.register("_istft_c2r")
def istft_c2r(out: Tensor, x: Tensor, window: Tensor, hop_length: int, start: int,
              normalization: int) -> bool:
    """out (batch, length): the c2r of x (batch, n_fft // 2 + 1, frames), or one such
    spectrum, along its bins, windowed and overlap-added from sample ``start`` on; False where
    the window envelope vanishes there (out is then garbage)."""
    xh = x._host if len(x._shape) == 3 else x._host[None]
    n_fft = window._shape[0]
    frames = np.empty((xh.shape[0], xh.shape[2], n_fft), out._dtype.np_dtype)
    sfft, pocketfft = _engines()
    spectra = xh.transpose(0, 2, 1)
    workers = _workers(frames.size)
    if pocketfft is not None:
        pocketfft.c2r(spectra, (2,), n_fft, False, normalization, frames, workers)
    else:
        frames[...] = sfft.irfft(spectra, n=n_fft, axis=2, norm=INVERSE_NORM[normalization],
                                 workers=workers)
    return bool(_overlap_add(frames, window._host, hop_length, start, out._host))

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
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numba

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


def _workers(out: Tensor) -> int:
    return 1 if out.numel() < _PARALLEL_MIN else max(1, numba.get_num_threads())


@CPU.register("_fft_c2c")
def fft_c2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            forward: bool) -> None:
    sfft, pocketfft = _engines()
    if pocketfft is not None:
        pocketfft.c2c(x._host, dim, forward, normalization, out._host, _workers(out))
    elif forward:
        out._host[...] = sfft.fftn(x._host, axes=dim, norm=FORWARD_NORM[normalization],
                                        workers=_workers(out))
    else:
        out._host[...] = sfft.ifftn(x._host, axes=dim, norm=INVERSE_NORM[normalization],
                                         workers=_workers(out))


@CPU.register("_fft_r2c")
def fft_r2c(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            onesided: bool) -> None:
    sfft, pocketfft = _engines()
    if onesided and pocketfft is not None:
        pocketfft.r2c(x._host, dim, True, normalization, out._host, _workers(out))
        return
    transform = sfft.rfftn if onesided else sfft.fftn
    out._host[...] = transform(x._host, axes=dim, norm=FORWARD_NORM[normalization],
                               workers=_workers(out))


@CPU.register("_fft_c2r")
def fft_c2r(out: Tensor, x: Tensor, dim: Sequence[int], normalization: int,
            last_dim_size: int) -> None:
    sfft, pocketfft = _engines()
    if pocketfft is not None:
        pocketfft.c2r(x._host, dim, last_dim_size, False, normalization, out._host,
                       _workers(out))
        return
    shape = [out._shape[d] for d in dim]
    out._host[...] = sfft.irfftn(x._host, s=shape, axes=dim,
                                      norm=INVERSE_NORM[normalization], workers=_workers(out))

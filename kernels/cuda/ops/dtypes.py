"""Dtype tables of the CUDA backend's arithmetic kernels, complex dtypes included.

``kernels/cuda/device.py`` lists the real dtypes (its ``check_dtype`` rejects complex); the
reduction and scatter kernels also instantiate for complex64/complex128 as the
``gt::complex<float>`` / ``gt::complex<double>`` value types of ``complex.cuh`` (the same ones
the generated elementwise kernels use). Complex sums accumulate in their own precision, like
float32/float64 do.
"""

from __future__ import annotations

from gputensor import _dtype as D

from .. import device as _dev

COMPLEX_DTYPES = (D.complex64, D.complex128)
COMPLEX_CTYPES = {D.complex64: "gt::complex<float>", D.complex128: "gt::complex<double>"}

CTYPES: dict[D.dtype, str] = {**_dev.CTYPES, **COMPLEX_CTYPES}
SHORT: dict[D.dtype, str] = {**_dev.SHORT, D.complex64: "c64", D.complex128: "c128"}
ACC_CTYPES: dict[D.dtype, str] = {**_dev.ACC_CTYPES, **COMPLEX_CTYPES}
# The dtypes floating reductions accept (mean, var, norm): real floats and complex.
INEXACT_DTYPES = (*_dev.FLOAT_DTYPES, *COMPLEX_DTYPES)
ALL_DTYPES = (*_dev.ALL_DTYPES, *COMPLEX_DTYPES)


def short_name(dt: D.dtype, op_name: str) -> str:
    """The kernel-name suffix of ``dt`` (complex included); a clear error for dtypes the
    CUDA kernels lack."""
    return _dev.check_dtype(dt, op_name, SHORT)


def variants(dtypes: tuple[D.dtype, ...] | list[D.dtype]) -> list[dict[str, str]]:
    """``CudaSource.instantiate`` placeholder maps like ``device.dtype_variants`` (``{s}``,
    ``{T}``, ``{A}``), plus ``{R}``: the C type of the dtype's real part."""
    return [{"s": SHORT[d], "T": CTYPES[d], "A": ACC_CTYPES[d], "R": CTYPES[d.to_real()]}
            for d in dtypes]

"""gt.fft: torch.fft's transforms, frequency helpers and shifts.

Every transform is a composite over the three registry primitives of
gputensor/_ops/spectral.py (``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r``), as PyTorch's ATen
builds them: this module turns ``n``/``s``, ``dim`` and ``norm`` into transformed dims, a
zero-padded or trimmed input and a normalization mode, promotes dtypes (integers to the
default float type, real to complex where the transform needs it; float16/bfloat16 are
refused as on PyTorch's CPU build), and writes ``out=``. Autograd follows the primitives'
derivatives; every backend only supplies the three kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops._core import check_out, resolve_device
from gputensor._ops.spectral import NORM_N, NORM_NONE, NORM_ROOT_N, _fft_c2c, _fft_c2r, _fft_r2c
from gputensor._tensor import Tensor, normalize_dim

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift", "Tensor"]

Dims = int | Sequence[int] | None


# -- argument handling (PyTorch's SpectralOps.cpp) -----------------------------------------------
def _norm_mode(norm: str | None, forward: bool) -> int:
    if norm is None or norm == "backward":
        return NORM_NONE if forward else NORM_N
    if norm == "forward":
        return NORM_N if forward else NORM_NONE
    if norm == "ortho":
        return NORM_ROOT_N
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _promote(x: Tensor, require_complex: bool) -> Tensor:
    """Integers and bool to the default float type; only float32/float64 (and their complex
    types) have kernels, as on PyTorch's CPU build."""
    dt = x.dtype
    if dt.is_complex:
        return x
    if not dt.is_floating_point:
        dt = gt.get_default_dtype()
    if dt not in (D.float32, D.float64):
        raise RuntimeError(f"Unsupported dtype {dt.legacy_name}")
    if require_complex:
        dt = dt.to_complex()
    return x if dt is x.dtype else x.to(dt)


def _wrap(name: str, x: Tensor, dim: Any) -> int:
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"fft_{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    if x.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return normalize_dim(int(dim), x.dim())


def _check_points(n: int) -> None:
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _resize(x: Tensor, dims: Sequence[int], sizes: Sequence[int]) -> Tensor:
    """x with x.shape[dims[i]] == sizes[i]: trimmed from the end or zero-padded there."""
    pad = [0] * (2 * x.dim())
    padded = False
    for d, size in zip(dims, sizes, strict=True):
        have = x.shape[d]
        if size < have:
            x = x.narrow(d, 0, size)
        elif size > have:
            pad[2 * (x.dim() - 1 - d) + 1] = size - have
            padded = True
    return gt.constant_pad_nd(x, pad) if padded else x


def _shape_and_dims(x: Tensor, s: Any, dim: Any) -> tuple[list[int], list[int]]:
    """PyTorch's canonicalize_fft_shape_and_dim_args: the transformed sizes and dims."""
    ndim = x.dim()
    dims: list[int] | None = None
    if dim is not None:
        dim = [dim] if isinstance(dim, int | np.integer) else list(dim)
        if ndim == 0 and dim:
            raise IndexError(f"Dimension specified as {dim[0]} but tensor has no dimensions")
        dims = [normalize_dim(d, ndim) for d in dim]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = [s] if isinstance(s, int | np.integer) else list(s)
        if dim is not None and len(dim) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{ndim} dimensions.")
        if dims is None:
            dims = list(range(ndim - len(s), ndim))
        shape = [x.shape[d] if n == -1 else int(n) for n, d in zip(s, dims, strict=True)]
    else:
        if dims is None:
            dims = list(range(ndim))
        shape = [x.shape[d] for d in dims]
    for n in shape:
        _check_points(n)
    return shape, dims


def _into(name: str, result: Tensor, out: Tensor | None, complex_out: bool) -> Tensor:
    """Write result into ``out=`` (resized like other ops; cast to its dtype of the same kind)."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"fft_{name}(): argument 'out' must be Tensor, not "
                        f"{type(out).__name__}")
    if complex_out and not out.dtype.is_complex:
        raise RuntimeError(f"{name} expects a complex output tensor, but got "
                           f"{out.dtype.legacy_name}")
    if not complex_out and not out.dtype.is_floating_point:
        raise RuntimeError(f"{name} expects a floating point output tensor, but got "
                           f"{out.dtype.legacy_name}")
    if result.requires_grad and gt.is_grad_enabled():
        raise RuntimeError(f"fft_{name}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires grad.")
    check_out(out, tuple(result.shape), result.dtype, result.device, f"fft_{name}")
    with gt.no_grad():
        out.copy_(result)
    return out


# -- one-dimensional transforms --------------------------------------------------------------------
def _c2c_or_r2c(name: str, x: Tensor, n: int | None, dim: int, norm: str | None,
                forward: bool, out: Tensor | None) -> Tensor:
    """fft/ifft: c2c of complex input, a two-sided r2c of real input (conjugated for ifft)."""
    d = _wrap(name, x, dim)
    size = x.shape[d] if n is None else n
    _check_points(size)
    x = _resize(_promote(x, False), (d,), (size,))
    mode = _norm_mode(norm, forward)
    if x.dtype.is_complex:
        result = _fft_c2c(x, (d,), mode, forward)
    else:
        result = _fft_r2c(x, (d,), mode, False)
        if not forward:
            result = result.conj()
    return _into(name, result, out, True)


def _r2c(name: str, x: Tensor, n: int | None, dim: int, norm: str | None, forward: bool,
         out: Tensor | None) -> Tensor:
    """rfft / ihfft: a one-sided r2c (conjugated for the inverse sign)."""
    if x.dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {x.dtype.legacy_name}")
    d = _wrap(name, x, dim)
    size = x.shape[d] if n is None else n
    _check_points(size)
    x = _resize(_promote(x, False), (d,), (size,))
    result = _fft_r2c(x, (d,), _norm_mode(norm, forward), True)
    return _into(name, result if forward else result.conj(), out, True)


def _c2r(name: str, x: Tensor, n: int | None, dim: int, norm: str | None, forward: bool,
         out: Tensor | None) -> Tensor:
    """irfft / hfft: c2r of n points from n // 2 + 1 bins (the conjugate for the forward sign)."""
    d = _wrap(name, x, dim)
    size = 2 * (x.shape[d] - 1) if n is None else n
    _check_points(size)
    x = _resize(_promote(x, True), (d,), (size // 2 + 1,))
    if forward:
        x = x.conj()
    return _into(name, _fft_c2r(x, (d,), _norm_mode(norm, forward), size), out, False)


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: Tensor | None = None) -> Tensor:
    """One-dimensional discrete Fourier transform along ``dim``."""
    return _c2c_or_r2c("fft", input, n, dim, norm, True, out)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """One-dimensional inverse discrete Fourier transform along ``dim``."""
    return _c2c_or_r2c("ifft", input, n, dim, norm, False, out)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """FFT of a real signal: the n // 2 + 1 non-negative frequency bins."""
    return _r2c("rfft", input, n, dim, norm, True, out)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """Inverse of rfft: n real points (default 2 * (bins - 1)) from one-sided bins."""
    return _c2r("irfft", input, n, dim, norm, False, out)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """FFT of a Hermitian-symmetric signal given by its one-sided half: a real spectrum."""
    return _c2r("hfft", input, n, dim, norm, True, out)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """Inverse of hfft: the one-sided half of the inverse FFT of a real signal."""
    return _r2c("ihfft", input, n, dim, norm, False, out)


# -- n-dimensional transforms --------------------------------------------------------------------
def _cn(name: str, x: Tensor, s: Any, dim: Dims, norm: str | None, forward: bool,
        out: Tensor | None) -> Tensor:
    shape, dims = _shape_and_dims(x, s, dim)
    x = _resize(_promote(x, True), dims, shape)
    mode = _norm_mode(norm, forward)
    result = _fft_c2c(x, dims, mode, forward) if dims else x.clone()
    return _into(name, result, out, True)


def _rn(name: str, x: Tensor, s: Any, dim: Dims, norm: str | None, forward: bool,
        out: Tensor | None) -> Tensor:
    """rfftn / ihfftn: a one-sided r2c of the last dim, then (ihfftn) c2c of the others."""
    if x.dtype.is_complex:
        if forward:
            raise RuntimeError(f"{name} expects a real-valued input tensor, but got "
                               f"{x.dtype.legacy_name}")
        raise RuntimeError(f"Only supports floating-point dtypes, but found: "
                           f"{x.dtype.legacy_name}")
    shape, dims = _shape_and_dims(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    x = _resize(_promote(x, False), dims, shape)
    mode = _norm_mode(norm, forward)
    if forward:
        return _into(name, _fft_r2c(x, dims, mode, True), out, True)
    result = _fft_r2c(x, dims[-1:], mode, True).conj()
    if len(dims) > 1:
        result = _fft_c2c(result, dims[:-1], mode, False)
    return _into(name, result, out, True)


def _c2rn(name: str, x: Tensor, s: Any, dim: Dims, norm: str | None, forward: bool,
          out: Tensor | None) -> Tensor:
    """irfftn / hfftn: c2r over the dims (hfftn: c2c of the leading dims, conjugate, c2r)."""
    shape, dims = _shape_and_dims(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    s_last = None if s is None else ([s] if isinstance(s, int) else list(s))[-1]
    last = 2 * (x.shape[dims[-1]] - 1) if s_last is None or s_last == -1 else shape[-1]
    _check_points(last)
    shape[-1] = last // 2 + 1
    x = _resize(_promote(x, True), dims, shape)
    mode = _norm_mode(norm, forward)
    if not forward:
        return _into(name, _fft_c2r(x, dims, mode, last), out, False)
    if len(dims) > 1:
        x = _fft_c2c(x, dims[:-1], mode, True)
    return _into(name, _fft_c2r(x.conj(), dims[-1:], mode, last), out, False)


def fftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
         norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional FFT over ``dim`` (default: all dims, or the last len(s))."""
    return _cn("fftn", input, s, dim, norm, True, out)


def ifftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional inverse FFT."""
    return _cn("ifftn", input, s, dim, norm, False, out)


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional FFT of a real signal, one-sided in the last transformed dim."""
    return _rn("rfftn", input, s, dim, norm, True, out)


def irfftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Inverse of rfftn."""
    return _c2rn("irfftn", input, s, dim, norm, False, out)


def hfftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional FFT of a Hermitian-symmetric signal given by its one-sided half."""
    return _c2rn("hfftn", input, s, dim, norm, True, out)


def ihfftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Inverse of hfftn."""
    return _rn("ihfftn", input, s, dim, norm, False, out)


def fft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
         norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Two-dimensional FFT (fftn over the last two dims by default)."""
    return _cn("fftn", input, s, dim, norm, True, out)


def ifft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Two-dimensional inverse FFT."""
    return _cn("ifftn", input, s, dim, norm, False, out)


def rfft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Two-dimensional FFT of a real signal."""
    return _rn("rfftn", input, s, dim, norm, True, out)


def irfft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Inverse of rfft2."""
    return _c2rn("irfftn", input, s, dim, norm, False, out)


def hfft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Two-dimensional FFT of a Hermitian-symmetric signal."""
    return _c2rn("hfftn", input, s, dim, norm, True, out)


def ihfft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Inverse of hfft2."""
    return _rn("ihfftn", input, s, dim, norm, False, out)


# -- frequencies and shifts ----------------------------------------------------------------------
def _scale(n: int, d: float) -> float:
    # C++'s 1.0 / (n * d): 0 points give inf (so rfftfreq(0) is [nan], as in PyTorch)
    return 1.0 / (n * d) if n * d else math.inf


def _freq_result(name: str, count: int, dtype: Any, device: Any, out: Tensor | None) -> Any:
    if count < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {count}: [{count}]")
    dt = (out.dtype if out is not None else gt.get_default_dtype()) if dtype is None else dtype
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    dev = resolve_device(device) if out is None else out.device
    if dt.is_complex:
        raise NotImplementedError(f"\"arange_{dev.type}\" not implemented for "
                                  f"'{dt.legacy_name}'")
    return dt, dev


def _finish_freq(name: str, values: Tensor, out: Tensor | None, requires_grad: bool) -> Tensor:
    if out is not None:
        check_out(out, tuple(values.shape), values.dtype, values.device, name)
        return out.copy_(values)
    return values.requires_grad_(True) if requires_grad else values


def fftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None, dtype: Any = None,
            layout: Any = None, device: Any = None, requires_grad: bool = False,
            pin_memory: bool = False) -> Tensor:
    """The sample frequencies of an n-point FFT: [0, 1, ..., -(n // 2), ..., -1] / (n * d)."""
    dt, dev = _freq_result("fftfreq", n, dtype, device, out)
    k = gt.arange(n, dtype=D.int64, device=dev)
    k = gt.where(k < (n + 1) // 2, k, k - n).to(dt)
    return _finish_freq("fftfreq", k * _scale(n, d), out, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False,
             pin_memory: bool = False) -> Tensor:
    """The n // 2 + 1 non-negative sample frequencies of an n-point rfft."""
    count = int(n / 2) + 1  # C++ division: truncates towards zero
    dt, dev = _freq_result("rfftfreq", count, dtype, device, out)
    k = gt.arange(count, dtype=dt, device=dev)
    return _finish_freq("rfftfreq", k * _scale(n, d), out, requires_grad)


def _shift(x: Tensor, dim: Dims, inverse: bool) -> Tensor:
    dims = list(range(x.dim())) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if not dims:
        raise RuntimeError("`shifts` required")  # torch.roll's refusal of no dims
    sizes = [x.shape[normalize_dim(d, x.dim())] for d in dims]
    return gt.roll(x, [(n + 1) // 2 if inverse else n // 2 for n in sizes], dims)


def fftshift(input: Tensor, dim: Dims = None) -> Tensor:
    """Moves the zero-frequency bin to the centre (a roll by n // 2 along each dim)."""
    return _shift(input, dim, False)


def ifftshift(input: Tensor, dim: Dims = None) -> Tensor:
    """Inverse of fftshift (a roll by (n + 1) // 2)."""
    return _shift(input, dim, True)

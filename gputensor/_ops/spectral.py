"""Spectral ops: the three FFT primitives behind gt.fft, the window functions, stft and istft.

As in PyTorch, every transform of ``gt.fft`` is a composite over three private ops, each with
one backend kernel and a derivative (PyTorch's derivatives.yaml):

    _fft_c2c(input, dim, normalization, forward)   complex -> complex, same shape
    _fft_r2c(input, dim, normalization, onesided)  real -> complex (forward sign); onesided
                                                   keeps dim[-1]'s n // 2 + 1 bins
    _fft_c2r(input, dim, normalization, last_dim_size)
                                                   Hermitian complex -> real (inverse sign);
                                                   dim[-1] holds last_dim_size // 2 + 1 bins

``dim`` is a tuple of distinct, non-negative dims; ``normalization`` is PyTorch's
fft_norm_mode (0: none, 1: 1/sqrt(n), 2: 1/n, n the product of the transformed sizes, the
output's for c2r). Kernels write the scaled transform straight into ``out``:
``kernel(out, name)(out, input, dim, normalization, flag)``. The frontends here only check and
allocate; gt.fft (gputensor/fft) handles n/s, norm names, promotion and out=.

Windows are creation ops built from elementwise ops in the requested dtype (PyTorch's
formulas); kaiser's Bessel I0 comes from SciPy on the host (a length-N creation, like
``gt.tensor``). stft/istft are composites (framing views, a window product, the primitives,
an index_add overlap-add), so autograd follows them with no formula of their own. Calls that
record nothing (no gradient, forward AD or vmap involved) of the common forms take one fused
op instead (``_stft_r2c``, ``_istft_c2r``: no padded copy, no intermediate ops), with the same
values.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.autograd.forward_ad import _state as _fw_state
from gputensor.autograd.grad_mode import is_grad_enabled
from gputensor.func._state import VMAP

from ._core import empty, kernel, op, resolve_device

NORM_NONE, NORM_ROOT_N, NORM_N = 0, 1, 2


# -- cost model: n log2 n butterflies per transformed signal ---------------------------------
def _fft_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    x, dims = inputs[0], inputs[1]
    n = 1
    for d in dims:
        n *= max(x._shape[d], 1)
    big = output if output.numel() > x.numel() else x
    nbytes = sum(t.numel() * t.element_size() for t in (x, output))
    return nbytes, int(5 * big.numel() * math.log2(max(n, 2)))


def _check_dims(op_name: str, x: Tensor, dim: Sequence[int]) -> tuple[int, ...]:
    dims = tuple(int(d) for d in dim)
    if len(set(dims)) != len(dims) or any(not 0 <= d < x.dim() for d in dims):
        raise RuntimeError(f"{op_name}: dims must be distinct and in [0, {x.dim()}), got "
                           f"{list(dims)}")
    return dims


def _check_norm(op_name: str, normalization: int) -> None:
    if normalization not in (NORM_NONE, NORM_ROOT_N, NORM_N):
        raise RuntimeError(f"{op_name}: invalid normalization mode {normalization}")


# -- derivatives (PyTorch's FunctionsManual: fft_r2c_backward, fft_c2r_backward) -------------
def _r2c_grad(g: Tensor, input_shape: Sequence[int], dim: Sequence[int], normalization: int,
              onesided: bool) -> Tensor:
    """The adjoint of r2c: the real part of an inverse c2c of the gradient, zero-filled to the
    full length along dim[-1] where only one side was kept."""
    last = dim[-1]
    full = input_shape[last]
    if onesided and g.shape[last] < full:
        pad = [0, 0] * (len(g.shape) - 1 - last) + [0, full - g.shape[last]]
        g = gt.constant_pad_nd(g, pad)
    return gt.real(_fft_c2c(g, dim, normalization, False))


def _c2r_grad(g: Tensor, dim: Sequence[int], normalization: int) -> Tensor:
    """The adjoint of c2r: an r2c of the gradient with the bins that stand for two (their
    conjugate mirror included) counted twice."""
    gi = _fft_r2c(g, dim, normalization, True)
    last = dim[-1]
    doubled = g.shape[last] - gi.shape[last]
    if doubled > 0:
        scale = gt.ones(gi.shape[last], dtype=g.dtype, device=g.device)
        scale[1:1 + doubled] = 2
        gi = gi * scale.reshape([-1] + [1] * (len(gi.shape) - 1 - last))
    return gi


# -- the three primitives ------------------------------------------------------------------------
@op(method=False, cost=_fft_cost, grad={
    "input": lambda g, dim, normalization, forward: _fft_c2c(g, dim, normalization,
                                                             not forward)}, jvp="auto_linear")
def _fft_c2c(input: Tensor, dim: Sequence[int], normalization: int, forward: bool) -> Tensor:
    """Complex-to-complex FFT over ``dim`` (forward: exp(-2 pi i jk/n), else exp(+...))."""
    if not input.dtype.is_complex or input.dtype.itemsize < 8:
        raise RuntimeError(f"_fft_c2c expects a complex64 or complex128 input, got "
                           f"{input.dtype.legacy_name}")
    dims = _check_dims("_fft_c2c", input, dim)
    _check_norm("_fft_c2c", normalization)
    out = empty(input.shape, input.dtype, input.device)
    if out.numel():
        kernel(out, "_fft_c2c")(out, input, dims, normalization, bool(forward))
    return out


@op(method=False, cost=_fft_cost, grad={"input": _r2c_grad}, jvp="auto_linear")
def _fft_r2c(input: Tensor, dim: Sequence[int], normalization: int, onesided: bool) -> Tensor:
    """Real-to-complex forward FFT over ``dim``; ``onesided`` keeps n // 2 + 1 bins of dim[-1]."""
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"_fft_r2c expects a float32 or float64 input, got "
                           f"{input.dtype.legacy_name}")
    dims = _check_dims("_fft_r2c", input, dim)
    _check_norm("_fft_r2c", normalization)
    shape = list(input.shape)
    if onesided and dims:
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    out = empty(tuple(shape), input.dtype.to_complex(), input.device)
    if out.numel():
        kernel(out, "_fft_r2c")(out, input, dims, normalization, bool(onesided))
    return out


@op(method=False, cost=_fft_cost, grad={"input": _c2r_grad}, jvp="auto_linear")
def _fft_c2r(input: Tensor, dim: Sequence[int], normalization: int,
             last_dim_size: int) -> Tensor:
    """Complex-to-real inverse FFT over ``dim`` of a one-sided Hermitian signal; dim[-1] of the
    result has ``last_dim_size`` points (the input holds last_dim_size // 2 + 1 of them)."""
    if not input.dtype.is_complex or input.dtype.itemsize < 8:
        raise RuntimeError(f"_fft_c2r expects a complex64 or complex128 input, got "
                           f"{input.dtype.legacy_name}")
    dims = _check_dims("_fft_c2r", input, dim)
    _check_norm("_fft_c2r", normalization)
    if not dims or last_dim_size < 1 or input.shape[dims[-1]] != last_dim_size // 2 + 1:
        raise RuntimeError(f"_fft_c2r: expected {last_dim_size // 2 + 1} bins along the last "
                           f"transformed dim for {last_dim_size} points")
    shape = list(input.shape)
    shape[dims[-1]] = int(last_dim_size)
    out = empty(tuple(shape), input.dtype.to_real(), input.device)
    if out.numel():
        kernel(out, "_fft_c2r")(out, input, dims, normalization, int(last_dim_size))
    return out


# -- windows -------------------------------------------------------------------------------------
_CTYPE = {D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int", D.int32: "int",
          D.int64: "long int", D.bool: "bool"}


def _window_setup(name: str, window_length: int, dtype: Any, device: Any,
                  requires_grad: bool) -> tuple[D.dtype, Any]:
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    dt = gt.get_default_dtype() if dtype is None else dtype
    dev = resolve_device(device)
    if dt.is_complex and window_length > 1:   # PyTorch's ramp (arange) has no complex kernel;
        raise NotImplementedError(f"\"arange_{dev.type}\" not implemented for "   # 0 and 1
                                  f"'{dt.legacy_name}'")   # samples are made without it
    if not (dt.is_floating_point or dt.is_complex):
        rg = "true" if requires_grad else "false (default)"
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype="
                           f"{_CTYPE.get(dt, dt.legacy_name)}, device={dev}, layout=Strided "
                           f"(default), requires_grad={rg}, pinned_memory=false, "
                           f"memory_format=(nullopt))")
    return dt, dev


def _finish(w: Tensor, periodic: bool, requires_grad: bool) -> Tensor:
    if periodic:
        w = w[:-1].contiguous()
    return w.requires_grad_(True) if requires_grad else w


def _cosine_window(name: str, window_length: int, periodic: bool, coefs: Sequence[float],
                   dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    """sum_k coefs[k] * cos(2 pi k n / (N - 1)) in ``dtype`` (N one longer when periodic)."""
    dt, dev = _window_setup(name, window_length, dtype, device, requires_grad)
    if window_length <= 1:
        return gt.ones(window_length, dtype=dt, device=dev, requires_grad=requires_grad)
    n = window_length + 1 if periodic else window_length
    with gt.no_grad():
        phase = gt.arange(n, dtype=dt, device=dev) * (2 * math.pi / (n - 1))
        w = gt.full((n,), coefs[0], dtype=dt, device=dev)
        for k, c in enumerate(coefs[1:], 1):
            w = w + (phase * k).cos() * c
    return _finish(w, periodic, requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def hann_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                layout: Any = None, device: Any = None, pin_memory: bool = False,
                requires_grad: bool = False) -> Tensor:
    """0.5 - 0.5 cos(2 pi n / (N - 1)); periodic windows drop the last point of N + 1."""
    return _cosine_window("hann_window", window_length, periodic, (0.5, -0.5), dtype, device,
                          requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype: Any = None, layout: Any = None,
                   device: Any = None, pin_memory: bool = False,
                   requires_grad: bool = False) -> Tensor:
    """alpha - beta cos(2 pi n / (N - 1))."""
    return _cosine_window("hamming_window", window_length, periodic, (alpha, -beta), dtype,
                          device, requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def blackman_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                    layout: Any = None, device: Any = None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _cosine_window("blackman_window", window_length, periodic, (0.42, -0.5, 0.08),
                          dtype, device, requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def bartlett_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                    layout: Any = None, device: Any = None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The triangle 2n / (N - 1) rising to 1 at the middle and back down."""
    dt, dev = _window_setup("bartlett_window", window_length, dtype, device, requires_grad)
    if window_length <= 1:
        return gt.ones(window_length, dtype=dt, device=dev, requires_grad=requires_grad)
    n = window_length + 1 if periodic else window_length
    with gt.no_grad():
        w = gt.arange(n, dtype=dt, device=dev) * (2.0 / (n - 1))
        half = ((n - 1) >> 1) + 1
        w = gt.cat((w[:half], 2 - w[half:]))
    return _finish(w, periodic, requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype: Any = None, layout: Any = None, device: Any = None,
                  pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """I0(beta sqrt(1 - ((n - m) / m)^2)) / I0(beta), m = (N - 1) / 2."""
    from scipy import special

    dt, dev = _window_setup("kaiser_window", window_length, dtype, device, requires_grad)
    if window_length <= 1:
        return gt.ones(window_length, dtype=dt, device=dev, requires_grad=requires_grad)
    n = window_length + 1 if periodic else window_length
    m = (n - 1) / 2
    ratio = (np.arange(n, dtype=np.float64) - m) / m
    values = special.i0(beta * np.sqrt(np.clip(1 - ratio * ratio, 0, None))) / special.i0(beta)
    w = gt.tensor(values, dtype=dt, device=dev)
    return _finish(w, periodic, requires_grad)


# -- stft / istft --------------------------------------------------------------------------------
def _padded_window(window: Tensor | None, win_length: int, n_fft: int, like: Tensor) -> Tensor:
    """The window (ones when None) zero-padded on both sides to n_fft, centred."""
    if window is None:
        window = gt.ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        window = gt.constant_pad_nd(window, [left, n_fft - win_length - left])
    return window


def _window_warning() -> None:
    warnings.warn("A window was not provided. A rectangular window will be applied,which is "
                  "known to cause spectral leakage. Other windows such as torch.hann_window or "
                  "torch.hamming_window are recommended to reduce spectral leakage.To "
                  "suppress this warning and use a rectangular window, explicitly set "
                  "`window=torch.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=4)


def _type_name(t: Tensor) -> str:
    return t.type()  # "gputensor.FloatTensor", PyTorch's "torch.FloatTensor"


def _scalar_type(t: Tensor) -> str:
    name = t.type().rsplit(".", 1)[-1].removesuffix("Tensor")
    return f"{'CUDA' if t.device.type == 'cuda' else 'CPU'}{name}Type"


def _opt(v: Any) -> str:
    return "None" if v is None else str(int(v))


def _stft_repr(x: Tensor, n_fft: int, hop: int, win: int, window: Tensor | None,
               normalized: bool, onesided: bool | None, return_complex: bool,
               align: bool | None) -> str:
    w = "None" if window is None else f"{_type_name(window)}{{{list(window.shape)}}}"
    return (f"stft({_type_name(x)}{list(x.shape)}, n_fft={n_fft}, hop_length={hop}, "
            f"win_length={win}, window={w}, normalized={int(bool(normalized))}, "
            f"onesided={_opt(onesided)}, return_complex={int(bool(return_complex))}, "
            f"align_to_window={_opt(align)})")


def _center_pad(x: Tensor, pad: int, pad_mode: str) -> Tensor:
    """pad samples on both sides of the signals (F.pad's modes); reflect, the default, as two
    flipped slices joined to the signal (one cat instead of the general padding kernel)."""
    if pad_mode == "reflect" and x.dim() in (1, 2) and 0 < pad < x.shape[-1]:
        n = x.shape[-1]
        return gt.cat((x.narrow(-1, 1, pad).flip(-1), x, x.narrow(-1, n - 1 - pad, pad).flip(-1)),
                      -1)
    signal_dim = x.dim()
    extended = gt.nn.functional.pad(x.reshape([1] * (3 - signal_dim) + list(x.shape)),
                                    [pad, pad], pad_mode)
    return extended.reshape(extended.shape[-signal_dim:])


def _records(*tensors: Tensor | None) -> bool:
    """Whether a composite of these tensors must run op by op: autograd records it, forward AD
    or vmap follows it."""
    return bool(VMAP.depth or _fw_state.active) or (is_grad_enabled() and any(
        t is not None and t._requires_grad for t in tensors))


def _fused_window(window: Tensor | None, like: Tensor, dtype: D.dtype) -> bool:
    return window is None or (window._dtype == dtype
                              and window._storage.device == like._storage.device)


@op(method=False, differentiable=False)
def _stft_r2c(input: Tensor, window: Tensor, hop_length: int, pad: int,
              normalized: bool) -> Tensor:
    """The one-sided stft of real 1-D or (batch, length) signals in one kernel: frames of the
    signal reflect-padded by ``pad`` (< length) on both sides, times the n_fft-point window,
    r2c transformed; (*batch, freq, frames) with PyTorch's strides (frames outermost)."""
    batch = input._shape[0] if len(input._shape) == 2 else 1
    n_fft = window._shape[0]
    n_frames = 1 + (input._shape[-1] + 2 * pad - n_fft) // hop_length
    freq = n_fft // 2 + 1
    out = empty((batch, n_frames, freq), input._dtype.to_complex(), input.device)
    kernel(out, "_stft_r2c")(out, input, window, hop_length, pad,
                             NORM_ROOT_N if normalized else NORM_NONE)
    if len(input._shape) == 1:
        return out._view((freq, n_frames), (1, freq), 0)
    return out._view((batch, freq, n_frames), (n_frames * freq, 1, freq), 0)


@op(method=False, differentiable=False)
def _istft_c2r(input: Tensor, window: Tensor, hop_length: int, start: int, length: int,
               normalized: bool) -> Tensor | None:
    """istft of one-sided (*batch, n_fft // 2 + 1, frames) spectra in one kernel: c2r of the
    frames, windowed, overlap-added and divided by the summed squared window, samples
    [start, start + length) of the full signal; None where that envelope vanishes."""
    out = empty((input._shape[0] if input.dim() == 3 else 1, length), input.dtype.to_real(),
                input.device)
    if not kernel(out, "_istft_c2r")(out, input, window, hop_length, start,
                                     NORM_ROOT_N if normalized else NORM_N):
        return None
    return out if input.dim() == 3 else out._view((length,), (1,), 0)


def _fused_stft(input: Tensor, n_fft: int, hop: int, win: int, window: Tensor | None,
                center: bool, pad_mode: str, normalized: bool, onesided: bool | None,
                align_to_window: bool | None) -> Tensor | None:
    """stft by ``_stft_r2c`` where it serves the call (a valid one-sided stft of real signals,
    reflect or no padding, nothing recorded); else None."""
    if input._dtype not in (D.float32, D.float64) or len(input._shape) not in (1, 2) \
            or onesided is False or not _fused_window(window, input, input._dtype) \
            or _records(input, window):
        return None
    length = input._shape[-1]
    pad = n_fft // 2 if center else 0
    if (pad and (pad_mode != "reflect" or pad >= length)) or not 0 < n_fft <= length + 2 * pad \
            or hop <= 0 or not 0 < win <= n_fft or (align_to_window and win < n_fft) \
            or (window is not None and window._shape != (win,)):
        return None
    return _stft_r2c(input, _padded_window(window, win, n_fft, input), hop, pad, normalized)


@op(method=True)
def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Tensor:
    """Short-time Fourier transform: (*B, freq, frames) of windowed n_fft-point frames
    (frame t starts at t * hop_length; center pads n_fft // 2 on both sides first)."""
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if window is None:
        _window_warning()
    if return_complex is None:
        if not (input.dtype.is_complex or (window is not None and window.dtype.is_complex)):
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in "
                               "a future PyTorch release.")
        return_complex = True
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    fused = _fused_stft(input, n_fft, hop, win, window, center, pad_mode, normalized, onesided,
                        align_to_window)
    if fused is not None:
        return fused if return_complex else gt.view_as_real(fused)
    if center:
        input = _center_pad(input, n_fft // 2, pad_mode)

    def fail(what: str) -> RuntimeError:
        return RuntimeError(_stft_repr(input, n_fft, hop, win, window, normalized, onesided,
                                       return_complex, align_to_window) + " : " + what)

    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise fail("expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        raise fail("expected a 1D or 2D tensor")
    x = input.unsqueeze(0) if input.dim() == 1 else input
    length = x.shape[1]
    if n_fft <= 0 or n_fft > length:
        raise fail(f"expected 0 < n_fft < {length}, but got n_fft={win}")
    if hop <= 0:
        raise fail(f"expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise fail(f"expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise fail(f"expected a 1D window tensor of size equal to win_length={win}, but got "
                   f"window with size {list(window.shape)}")
    left = (n_fft - win) // 2
    if align_to_window and win < n_fft:
        # Frame t's window starts at sample t * hop: frames of win samples, zero-padded to
        # n_fft around the window (the same phase as the centred window of a full frame).
        frames = x.unfold(-1, win, hop)
        if window is not None:
            frames = frames * window
        frames = gt.constant_pad_nd(frames, [left, n_fft - win - left])
    else:
        frames = x.unfold(-1, n_fft, hop)  # (batch, n_frames, n_fft), a strided view
        if window is not None:
            frames = frames * _padded_window(window, win, n_fft, x)
    complex_fft = frames.dtype.is_complex
    sided = (not complex_fft) if onesided is None else onesided
    norm = NORM_ROOT_N if normalized else NORM_NONE
    if frames.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"Unsupported dtype {frames.dtype.legacy_name}")
    if complex_fft:
        if sided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = _fft_c2c(frames, (2,), norm, True)
    else:
        out = _fft_r2c(frames, (2,), norm, sided)
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    return out if return_complex else gt.view_as_real(out)


def _istft_repr(x: Tensor, n_fft: int, hop: int, win: int, window: Tensor | None,
                center: bool, normalized: bool, onesided: bool | None, length: int | None,
                return_complex: bool) -> str:
    w = "None" if window is None else f"{_type_name(window)}{{{list(window.shape)}}}"
    return (f"istft({_scalar_type(x)}{list(x.shape)}, n_fft={n_fft}, hop_length={hop}, "
            f"win_length={win}, window={w}, center={int(bool(center))}, "
            f"normalized={int(bool(normalized))}, onesided={_opt(onesided)}, "
            f"length={'None' if length is None else length}, "
            f"return_complex={int(bool(return_complex))})")


def _overlap_add(frames: Tensor, hop: int, total: int) -> Tensor:
    """(B, n_frames, n) frames summed into (B, total) signals, frame t at t * hop."""
    b, n_frames, n = frames.shape
    pos = (gt.arange(n_frames, device=frames.device) * hop).unsqueeze(1) + \
        gt.arange(n, device=frames.device)
    zeros = gt.zeros((b, total), dtype=frames.dtype, device=frames.device)
    return zeros.index_add(1, pos.reshape(-1), frames.reshape(b, n_frames * n))


@op(method=True)
def istft(input: Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """Inverse of stft: inverse FFTs of the frames, windowed, overlap-added and divided by the
    summed squared window (the least-squares estimate; the envelope must not vanish)."""
    if window is None:
        _window_warning()
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")

    def fail(what: str) -> RuntimeError:
        return RuntimeError(_istft_repr(input, n_fft, hop, win, window, center, normalized,
                                        onesided, length, return_complex) + what)

    if input.dim() < 2:  # PyTorch reads sizes -2 and -3 of view_as_real(input) first
        ndim = input.dim() + 1
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {-2 if ndim < 2 else -3})")
    if input.numel() == 0:
        raise fail(" : input tensor cannot be empty.")
    if input.dim() not in (2, 3):
        raise fail(f" : expected a tensor with 3 or 4 dimensions, but got {input.dim() + 1}")
    n_frames, fft_size = input.shape[-1], input.shape[-2]
    total = n_fft + hop * (n_frames - 1)
    sided = fft_size != n_fft if onesided is None else onesided
    if sided and n_fft // 2 + 1 != fft_size:
        raise fail(f" : expected the frequency dimension (3rd to the last) of the input tensor "
                   f"to match n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    if not sided and n_fft != fft_size:
        raise fail(f" : expected the frequency dimension (3rd to the last) of the input tensor "
                   f"to match n_fft when onesided=False, but got {fft_size}")
    if not 0 < hop <= win:
        raise fail(" : expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        raise fail(" : expected 0 < win_length <= n_fft")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise fail(" : Invalid window shape. window has to be 1D and length of `win_length`")
    w = _padded_window(window, win, n_fft, input)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = total - n_fft // 2 if center else total
    if not return_complex and start < end <= total and \
            _fused_window(window, input, input.dtype.to_real()) and not _records(input, window):
        bins = input if sided else input.narrow(-2, 0, n_fft // 2 + 1)
        y = _istft_c2r(bins, w, hop, start, end - start, normalized)
        if y is not None:
            return y
    x = input.unsqueeze(0) if input.dim() == 2 else input
    x = x.transpose(1, 2)  # (batch, n_frames, fft_size)
    norm = NORM_ROOT_N if normalized else NORM_N
    if return_complex:
        if sided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = _fft_c2c(x.contiguous(), (2,), norm, False)
    else:
        if window is not None and window.dtype.is_complex:
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not sided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        frames = _fft_c2r(x, (2,), norm, n_fft)
    y = _overlap_add(frames * w, hop, total)
    envelope = _overlap_add((w * w).expand(1, n_frames, n_fft), hop, total)
    y = y[:, start:min(end, total)]
    envelope = envelope[:, start:min(end, total)]
    if bool((envelope.abs().min() < 1e-11).item()):
        where = "CUDA" if input.device.type == "cuda" else "CPU"
        raise fail(f" window overlap add min: 1\n[ {where}BoolType{{}} ]")
    y = y / envelope
    if input.dim() == 2:
        y = y.squeeze(0)
    if end > total:
        warnings.warn("The length of signal is shorter than the length parameter. Result is "
                      "being padded with zeros in the tail. Please check your center and "
                      "hop_length settings.", UserWarning, stacklevel=3)
        y = gt.constant_pad_nd(y, [0, end - total])
    return y

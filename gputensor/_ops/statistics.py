"""Order statistics, covariance and integration (torch's median, nanmedian, quantile,
nanquantile, cov, corrcoef, trapezoid/trapz, cumulative_trapezoid), composed of existing ops
(a sort, gathers and elementwise arithmetic) so gradients and both devices follow."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor, normalize_dim

from ._core import op

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
_NAN_AS_INTEGER = {D.int32: -2**31, D.int64: -2**63, D.bool: True}


def _median(input: Tensor, dim: int | None, keepdim: bool, ignore_nan: bool, name: str) -> Any:
    whole = dim is None
    x = input.reshape(-1) if whole else input
    d = 0 if whole else normalize_dim(dim, input.dim())
    if x.dim() == 0:
        x, d = x.reshape(1), 0
    n = x.shape[d]
    if n == 0:
        if whole:   # PyTorch casts NaN to the dtype as x86 does: the "integer indefinite"
            # value for 32/64-bit integers, 0 for narrower ones (their low bits), True for bool
            empty_value = float("nan") if input.dtype.category >= D.FLOATING else \
                _NAN_AS_INTEGER.get(input.dtype, 0)
            return gt.full((), empty_value, dtype=input.dtype, device=input.device)
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    values, indices = x.sort(dim=d)  # NaNs sort last
    nans = x.isnan() if x.is_floating_point() else gt.zeros_like(x, dtype=D.bool)
    if ignore_nan:  # the lower median of the non-NaN values (NaN when there is none)
        count = (~nans).sum(d, keepdim=True)
        k = ((count - 1).clamp(min=0)) // 2
    else:  # the lower median, or the first NaN when there is one
        k = gt.full_like(nans.sum(d, keepdim=True), (n - 1) // 2)
        has_nan = nans.any(d, keepdim=True)
        first_nan = (n - nans.sum(d, keepdim=True))
        k = gt.where(has_nan, first_nan, k)
    k = k.to(D.int64)
    value = values.gather(d, k)
    index = indices.gather(d, k)
    if whole:
        return value.reshape(())
    if not keepdim or input.dim() == 0:   # a 0-d input gives 0-d results either way
        value, index = value.squeeze(d), index.squeeze(d)
    return (return_types.nanmedian if ignore_nan else return_types.median)(value, index)


@op(method=True)
def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median (the smaller middle value for an even count); NaN if there is one.
    With ``dim``: (values, indices)."""
    return _median(input, dim, keepdim, False, "median")


@op(method=True)
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``median`` ignoring NaNs (NaN only where every value is NaN)."""
    return _median(input, dim, keepdim, True, "nanmedian")


def _quantile(input: Tensor, q: Any, dim: int | None, keepdim: bool, interpolation: str,
              ignore_nan: bool, name: str) -> Tensor:
    if input.numel() == 0:   # PyTorch's first check (before the dtype, q and the dim)
        raise RuntimeError("quantile() input tensor must be non-empty")
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest. Got {interpolation}")
    scalar_q = not isinstance(q, Tensor)
    qt = gt.tensor(q, dtype=input.dtype, device=input.device) if scalar_q else q
    if qt.dim() > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if qt.dtype is not input.dtype:
        raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    if qt.numel() and bool(((qt < 0) | (qt > 1)).any()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    qv = qt.reshape(-1)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else normalize_dim(dim, input.dim())
    if x.dim() == 0:
        x = x.reshape(1)
    values = x.sort(dim=d)[0].movedim(d, -1)  # (..., n), NaNs last
    n = values.shape[-1]
    nans = values.isnan()
    valid = (n - nans.sum(-1, keepdim=True)) if ignore_nan else \
        gt.full_like(nans.sum(-1, keepdim=True), n)
    last = (valid - 1).clamp(min=0).to(values.dtype)  # (..., 1)
    ranks = qv * last  # (..., nq)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    lo = ranks.floor().to(D.int64).clamp(0, max(n - 1, 0))
    hi = ranks.ceil().to(D.int64).clamp(0, max(n - 1, 0))
    v_lo, v_hi = values.gather(-1, lo), values.gather(-1, hi)
    # PyTorch interpolates with lerp (its two-sided formula: -inf lerp -1 at 0.5 is -inf)
    if interpolation == "midpoint":
        out = v_lo.lerp(v_hi, 0.5)
    elif interpolation == "linear":
        out = v_lo.lerp(v_hi, ranks - lo.to(values.dtype))
    else:
        out = v_lo
    if ignore_nan:  # a slice with no valid value gives NaN
        out = gt.where(valid == 0, gt.full_like(out, float("nan")), out)
    else:  # any NaN in a slice makes its quantiles NaN
        out = gt.where(nans.any(-1, keepdim=True), gt.full_like(out, float("nan")), out)
    out = out.movedim(-1, 0)  # (nq, ...)
    if keepdim:
        if dim is None:
            out = out.reshape(qv.numel(), *([1] * input.dim()))
        else:
            out = out.unsqueeze(d + 1)
    return out[0] if scalar_q or qt.dim() == 0 else out


@op(method=True)
def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-quantiles (a float or a 1-D tensor, prepended as a dim) of ``input`` over
    ``dim`` (all values when None); NaN where a slice has a NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@op(method=True)
def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """``quantile`` ignoring NaNs (NaN where a slice is all NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


@op(method=True)
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the variables in the rows of ``input`` (columns are observations), with
    optional integer frequency and float observation weights."""
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.dim()} dimensions")
    if input.dtype == gt.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    n = x.shape[1]
    w = None
    for name, t in (("fweights", fweights), ("aweights", aweights)):
        if t is None:
            continue
        if t.dim() > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                               f"{name} with {t.dim()} dimensions")
        if name == "fweights" and (t.is_floating_point() or t.is_complex() or
                                   t.dtype == gt.bool):
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got "
                               f"fweights with {t.dtype.legacy_name} dtype")
        if name == "aweights" and not t.is_floating_point():
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got "
                               f"aweights with {t.dtype.legacy_name} dtype")
        if t.numel() != n:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                               f"observations in the input but got {t.numel()} != {n}")
        if bool((t < 0).any()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = t if w is None else w * t
    xf = x if x.is_floating_point() or x.is_complex() else x.to(gt.get_default_dtype())
    # The mean as PyTorch's: the input's own sum (integers in int64, wrapping past its range,
    # floats rounded to their dtype) divided by the weights' sum (an integer count, or the
    # weights' own sum: int64 for frequency weights alone)
    if w is None:
        w_sum = gt.tensor(n, dtype=gt.int64, device=x.device)
        avg = x.sum(1) / w_sum
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
    if w is None:
        norm = w_sum - correction
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights.to(w.dtype)).sum() / w_sum
    norm = norm.clamp(min=0)
    xm = xf - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    c = xw @ xm.t().conj()
    if c.is_complex():
        # the diagonal sums w |x - mean|^2: real, while the complex product's rounding can
        # leave an imaginary part (which a zero norm turns into inf instead of PyTorch's nan)
        c.diagonal().imag.zero_()
    return (c / norm).squeeze()


@op(method=True)
def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of ``input`` (``cov`` normalised, clipped
    to [-1, 1])."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = c.diagonal()
    stddev = d.real.sqrt() if d.is_complex() else d.sqrt()
    c = c / stddev.unsqueeze(1) / stddev.unsqueeze(0)
    return c.clamp(-1, 1) if not c.is_complex() else c


def _spacing(y: Tensor, x: Any, dx: Any, dim: int, name: str) -> tuple[Any, int]:
    d = normalize_dim(dim, y.dim())
    if x is not None and dx is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments: x and dx "
                        f"both given")
    if isinstance(x, Tensor):
        if x.dim() == 1:
            if x.shape[0] != y.shape[d]:
                raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
            shape = [1] * y.dim()
            shape[d] = -1
            return x.diff().reshape([s if s == -1 else 1 for s in shape]), d
        return x.diff(dim=d), d
    return (1.0 if dx is None and x is None else (dx if dx is not None else x)), d


def _real_dx(dx: Any, name: str) -> None:
    if isinstance(dx, complex):
        raise RuntimeError(f"{name}: Currently, we only support dx as a real number.")


def _refuse_bool(y: Tensor, x: Any, name: str) -> None:
    if isinstance(x, Tensor):
        if y.dtype == gt.bool or x.dtype == gt.bool:
            raise RuntimeError(f"{name}: received a bool input for `x` or `y`, but bool is not "
                               f"supported")
    elif y.dtype == gt.bool:
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported")


def _pair_sums(y: Tensor, d: int) -> Tensor:
    """The sums of neighbouring samples along ``d`` (one fewer than ``y`` has there), left
    plus right as PyTorch adds them (complex 1 + inf i is NaN + inf i the other way round:
    add computes a + alpha * b)."""
    n = max(y.shape[d] - 1, 0)
    return y.narrow(d, 0, n) + y.narrow(d, min(1, y.shape[d]), n)


@op(method=False, aliases=("trapz",))
def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: spacing ``x`` (sample points) or ``dx``."""
    if y.dim() == 0:
        shown = normalize_dim(dim, 0) if isinstance(x, Tensor) else dim
        raise IndexError(f"Dimension specified as {shown} but tensor has no dimensions")
    h, d = _spacing(y, x, dx, dim, "trapezoid")
    _real_dx(dx, "trapezoid")   # after the dim check, as in PyTorch
    if y.shape[d] == 0:     # PyTorch returns zeros of y's own dtype, before the bool check
        return gt.zeros(y.shape[:d] + y.shape[d + 1:], dtype=y.dtype, device=y.device)
    _refuse_bool(y, x, "trapezoid")
    if not isinstance(h, Tensor) and (y.is_floating_point() or y.is_complex()):
        # PyTorch's constant-spacing form: the sum less the end halves ([inf] gives NaN)
        return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * h
    # PyTorch's order of operations (one product each, which decides inf * 0 NaNs)
    if isinstance(h, Tensor):
        return (h * _pair_sums(y, d)).sum(d) / 2
    return (_pair_sums(y, d) * h).sum(d) / 2


@op(method=False)
def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoidal rule along ``dim`` (one fewer element than ``y`` there)."""
    _refuse_bool(y, x, "cumulative_trapezoid")
    if y.dim() == 0:
        normalize_dim(dim, 0)
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    _real_dx(dx, "cumulative_trapezoid")   # before the dim check, as in PyTorch
    h, d = _spacing(y, x, dx, dim, "cumulative_trapezoid")
    # PyTorch's order of operations (a complex inf part makes NaNs depending on it)
    if isinstance(h, Tensor):
        return (h * _pair_sums(y, d)).cumsum(d) / 2
    return (h / 2 * _pair_sums(y, d)).cumsum(d)

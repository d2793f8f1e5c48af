"""Forward (JVP) formulas of the nonlinear reductions and scans (prod, extrema, moments, norms,
cumprod, logcumsumexp), written with differentiable ops so a tangent that requires grad can be
differentiated again.

A reduction's output depends only on its own slice of the input, so its tangent is the sum over
the slice of ``conj(partial) * tangent``, where ``partial`` is the op's gradient for a unit
cotangent (``reduction_jvp``): PyTorch's prod/amax/norm JVPs have that form, and it reuses the
backward's care with zeros, ties and NaNs. (For a real output of a complex input the real part
is kept when the tangent is attached.)
"""

from __future__ import annotations

import math
from typing import Any

from .formulas import cj, masked


def _reduced(x: Any, dim: Any) -> tuple[int, ...]:
    """The normalised dims a reduction over ``dim`` combines (every dim for None and ())."""
    from gputensor._ops.reduce import _dims
    return _dims(x, dim)


def _sum_over(x: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    return x.sum(dims, keepdim=keepdim) if dims else x


def _ones_like(out: Any) -> Any:
    import gputensor as gt
    return gt.ones(out.shape, dtype=out.dtype, device=out.device)


def reduction_jvp(partial: Any, t: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """``sum(conj(partial) * t)`` over the reduced ``dims``."""
    return _sum_over(cj(partial) * t, dims, keepdim)


def prod_jvp(input: Any, input_t: Any, out: Any, dim: Any, keepdim: bool) -> Any:
    from gputensor._ops.reduce import _prod_grad
    partial = _prod_grad(_ones_like(out), input, out, dim, keepdim)
    return reduction_jvp(partial, input_t.to(out.dtype), _reduced(input, dim), keepdim)


def extreme_jvp(input: Any, input_t: Any, value: Any, dim: Any, keepdim: bool) -> Any:
    """amax/amin, max()/min() and aminmax: the mean tangent of the elements equal to the
    selected value, as their gradient is split evenly among them."""
    from gputensor._ops.reduce import _evenly
    dims = _reduced(input, dim)
    partial = _evenly(_ones_like(value), input, value, dims if dims else None, keepdim)
    return reduction_jvp(partial, input_t, dims, keepdim)


def aminmax_jvp(input: Any, input_t: Any, outs: Any, dim: Any, keepdim: bool) -> tuple:
    return (extreme_jvp(input, input_t, outs[0], dim, keepdim),
            extreme_jvp(input, input_t, outs[1], dim, keepdim))


def select_jvp(input: Any, input_t: Any, second: Any, second_t: Any, out: Any,
               indices: Any, keepdim: bool, largest: bool) -> Any:
    """max/min in their three forms: elementwise against a tensor (ties average the two
    tangents, as the gradient splits), the full reduction, and (values, indices) along a dim
    (the tangent at each index)."""
    import gputensor as gt
    if isinstance(second, gt.Tensor):
        wins = input > second if largest else input < second
        weight = gt.where(input == second, 0.5, wins.to(out.dtype))
        return second_t + weight * (input_t - second_t)
    if second is None:
        return extreme_jvp(input, input_t, out, None, False)
    if input.dim() == 0:
        return input_t, None
    from gputensor._ops.shape import normalize_dim
    d = normalize_dim(second, input.dim())
    taken = input_t.gather(d, indices if keepdim else indices.unsqueeze(d))
    return (taken if keepdim else taken.squeeze(d)), None


def moments_jvp(input: Any, input_t: Any, outs: Any, dim: Any, unbiased: Any, keepdim: bool,
                correction: Any, std: bool) -> Any:
    """var/std (and with the mean: var_mean/std_mean): ``dvar = 2 Re sum(conj(x - mean) t)
    / (n - correction)``, ``dstd = dvar / (2 std)`` (0 where std is 0, as its gradient)."""
    from gputensor._ops.reduce import _correction
    dim, corr = _correction("var", dim, unbiased, correction)
    dims = _reduced(input, dim)
    n = math.prod(input.shape[d] for d in dims)
    centered = input - input.mean(dims, keepdim=True) if dims else input * 0
    spread = _sum_over(cj(centered) * input_t, dims, keepdim)
    spread = spread.real if spread.is_complex() else spread
    value = outs[0]
    if std:
        tangent = masked(spread / ((n - corr) * value), value != 0)
    else:
        tangent = 2 * spread / (n - corr)
    if len(outs) == 1:
        return tangent
    return tangent, (input_t.mean(dims, keepdim=keepdim) if dims else input_t)


def norm_jvp(input: Any, input_t: Any, p: Any, dim: Any, keepdim: bool, dtype: Any,
             out: Any) -> Any:
    from gputensor import _dtype as D
    from gputensor._ops.reduce import _norm_grad
    if dtype is not None:
        input_t = input_t.to(D.to_dtype(dtype))
    partial = _norm_grad(_ones_like(out), input, p, dim, keepdim, dtype, out)
    return reduction_jvp(partial, input_t, _reduced(input, dim), keepdim)


def cumprod_jvp(input: Any, input_t: Any, out: Any, dim: int) -> Any:
    """``d out_i = sum_{j <= i} t_j prod_{k <= i, k != j} x_k``, without dividing by zero:
    before the first zero of a slice it is ``out * cumsum(t / x)``; from the first zero on,
    only that element's term survives, ``t_z * cumprod(x with x_z = 1)``."""
    import gputensor as gt
    x, t = input.to(out.dtype), input_t.to(out.dtype)
    if x.dim() == 0:
        return t
    zero = x == 0
    seen = zero.cumsum(dim)
    before = seen == 0
    first = zero & (seen == 1)
    safe = gt.where(zero, gt.ones_like(x), x)
    head = out * (t / safe).cumsum(dim)
    t_first = masked(t, first).sum(dim, keepdim=True)
    tail = t_first * gt.where(first, gt.ones_like(x), x).cumprod(dim)
    return gt.where(before, head, tail)


def logcumsumexp_jvp(input: Any, input_t: Any, out: Any, dim: int) -> Any:
    """``d out_i = sum_{j <= i} exp(x_j - out_i) t_j``: the exponentials are shifted by the
    slice's maximum so they stay finite."""
    import gputensor as gt
    if input.dim() == 0:
        return input_t
    top = (input.real if input.is_complex() else input).amax(dim, keepdim=True)
    top = gt.where(top.isfinite(), top, gt.zeros_like(top))
    weights = (input - top).exp()
    return (weights * input_t).cumsum(dim) / weights.cumsum(dim)

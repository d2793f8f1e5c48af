"""Reductions and scans: sum, mean, prod, max/min, arg-extrema, var/std, norm, logsumexp,
all/any, count_nonzero, cumsum/cumprod, softmax/log_softmax.

Frontends follow PyTorch's signatures and dtype rules and raise its errors before any kernel
runs. The folds (sum, prod, mean, extrema, all/any, count_nonzero, norms) are declared once in
``kernels/reduce.py``: both backends build their kernels from those records, and the frontends
take the result dtypes from them. Every kernel receives a freshly allocated, contiguous result
in the reduced shape without the kept singleton dims (``keepdim`` and ``out=`` are handled here,
not by kernels), the input, and the normalised, sorted reduced dims.
"""

from __future__ import annotations

import builtins
import math
import warnings
from typing import Any

from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor, contiguous_strides, normalize_dim
from gputensor.autograd.formulas import cj, expand_reduced, masked, unsqueeze_like
from gputensor.kernels.reduce import REDUCTIONS, int_to_int64, norm_reduction
from gputensor.kernels.registry import OPS, kernel_cache, memory_cost

from ._core import as_index_list, check_out, dims_one_at_a_time, empty, kernel, op

Dims = int | tuple[int, ...] | list[int] | None

MaxResult = return_types.max
MinResult = return_types.min
AminmaxResult = return_types.aminmax


# -- shared helpers ----------------------------------------------------------------------------
def _dims(input: Tensor, dim: Dims) -> tuple[int, ...]:
    """Normalised, sorted reduced dims; None and () mean every dim (PyTorch's convention)."""
    if isinstance(dim, bool):
        raise TypeError(f"dim must be an int or a tuple of ints, got {dim!r}")
    dims = as_index_list(dim, input.dim())
    if input.dim() == 0:
        return ()
    return tuple(sorted(dims)) if dims else tuple(range(input.dim()))


def _shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if d in dims else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def _alloc(input: Tensor, dims: tuple[int, ...], keepdim: bool, dt: D.dtype
           ) -> tuple[Tensor, Tensor]:
    """(the tensor returned to the user, an alias of it without the kept singleton dims)."""
    result = empty(_shape(input._shape, dims, keepdim), dt, input.device)
    if not keepdim:
        return result, result
    shape = _shape(input._shape, dims, False)
    return result, Tensor._make(result._storage, dt, shape, contiguous_strides(shape), 0)


def _deliver(result: Tensor, out: Tensor | None, name: str, exact_dtype: bool = False
             ) -> Tensor:
    if out is None:
        return result
    check_out(out, result._shape, result._dtype, result.device, name, exact_dtype)
    return out.copy_(result)


def _no_complex(input: Tensor, name: str) -> None:
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): does not support complex input (got {input.dtype})")


def _check_nonempty(input: Tensor, dims: tuple[int, ...], name: str, full: bool) -> None:
    """Reductions without an identity (max, argmax, ...) refuse empty inputs, like PyTorch."""
    if full and input.numel() == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                           f"input.numel() == 0. Specify the reduction dim with the 'dim' "
                           f"argument.")
    for d in dims:
        if input._shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _accumulate_dtype(dtype: Any, out: Tensor | None) -> D.dtype | None:
    """The dtype= of sum-like ops: given, else out's, else None (use the default rule)."""
    if dtype is not None:
        return D.to_dtype(dtype)
    if isinstance(out, Tensor):
        return out.dtype
    return None


_PLAIN_FLOATS = frozenset((D.float32, D.float64, D.float16, D.bfloat16))


def _accumulated_as(input: Tensor, dt: D.dtype) -> Tensor:
    """What a reduction with dtype=``dt`` reads: the input in ``dt``, except that a float
    input reduced into a 16-bit float goes in as float32, its accumulation type (PyTorch reads
    the elements straight into float: bfloat16 65536 averages with 0 to 32768 in float16
    instead of overflowing on the way)."""
    if dt is input.dtype:
        return input
    if dt in (D.float16, D.bfloat16) and input.dtype.is_floating_point:
        return input.to(D.float32)
    return input.to(dt)


# (op name, device type) -> the strided kernel of a full reduction's fast path; emptied when
# the profiler swaps kernel tables
_FULL_KERNELS = kernel_cache()
_ALL_DIMS = [tuple(range(n)) for n in range(65)]


def _full(name: str, input: Tensor) -> Tensor:
    """``input.<name>()`` over every element (loss.sum() and the like: one host path per step,
    so the general binding is skipped): the kernel's own ``full`` form where it has one and
    serves the input (the CPU's small reductions), else the kernel into a new 0-d result."""
    dev = input._storage.device
    entry = _FULL_KERNELS.get((name, dev.type))
    if entry is None:
        k = kernel(input, name)
        # (never a profiler's or a capture's wrapper's copy of ``full``: it would bypass them)
        entry = _FULL_KERNELS[name, dev.type] = (
            k, None if hasattr(k, "_gt_profiler_raw") else getattr(k, "full", None))
    k, full = entry
    if full is not None and (result := full(input)) is not None:
        return result
    result = empty((), REDUCTIONS[name].out(input._dtype), dev)
    ndim = len(input._shape)
    k(result, input, _ALL_DIMS[ndim] if ndim < 65 else tuple(range(ndim)))
    return result


def _sum_like(name: str, input: Tensor, dim: Dims, keepdim: bool, dtype: Any,
              out: Tensor | None) -> Tensor:
    if dim is None and not keepdim and dtype is None and out is None and \
            input._dtype in _PLAIN_FLOATS and not input._sparse:
        return _full(name, input)
    if input._dtype in D.WIDE_UNSIGNED and dtype is None:  # sums in int64, as PyTorch
        input = input.to(D.int64)
    dt = _accumulate_dtype(dtype, out)
    x = input if dt is None or dt is input.dtype else input.to(dt)
    if dt is None:
        dt = REDUCTIONS[name].out(input.dtype)
    dims = _dims(input, dim)
    result, flat = _alloc(input, dims, keepdim, dt)
    kernel(x, name)(flat, x, dims)
    return _deliver(result, out, name)


# -- sums and products -------------------------------------------------------------------------
@op(method=True, grad={"input": "expand_reduced(g, input_shape, dim, keepdim)"},
    cost=memory_cost(1, "input"), jvp="auto_linear")
def sum(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None,
        out: Tensor | None = None) -> Tensor:
    """Sum over ``dim`` (all dims by default); ints and bools sum in int64."""
    return _sum_like("sum", input, dim, keepdim, dtype, out)


@op(method=True, grad={"input": "masked(expand_reduced(g, input_shape, dim, keepdim), "
                                 "~input.isnan())"}, cost=memory_cost(1, "input"),
    jvp="nansum(masked(input_t, ~input.isnan()), dim, keepdim, dtype=dtype)")
def nansum(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None,
           out: Tensor | None = None) -> Tensor:
    """Sum treating NaN as zero."""
    if isinstance(dim, list | tuple):   # unlike sum's, its dims are checked one at a time
        dims_one_at_a_time(dim, input.dim())
    if input.dtype.is_complex:
        _dims(input, dim)     # the dims' errors first, as in PyTorch
        raise RuntimeError("nansum does not support complex inputs")
    dt = _accumulate_dtype(dtype, out)
    if dt is not None and dt.category < D.FLOATING and input.dtype.is_floating_point:
        if dtype is None:   # an integral out= alone: PyTorch's float kernel gets its dtype
            raise NotImplementedError(f'"nansum_{input.device.type}" not implemented for '
                                      f"'{dt.legacy_name}'")
        # PyTorch drops the NaNs in the input's dtype, then casts: nansum([nan, 2.5],
        # dtype=int32) is 2 (the cast first made the NaN INT_MIN)
        input = input.masked_fill(input.isnan(), 0)
    return _sum_like("nansum", input, dim, keepdim, dtype, out)


@op(method=True, cost=memory_cost(2, "input"))
def nanmean(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None,
            out: Tensor | None = None) -> Tensor:
    """The mean of the elements that are not NaN (NaN where every element is)."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {input.dtype.legacy_name}")
    if dtype is not None and D.to_dtype(dtype).category < D.FLOATING:  # before the dims
        raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be "
                           f"either a floating point or complex dtype. Got: "
                           f"{D.to_dtype(dtype).legacy_name}")
    counts = (~input.isnan()).sum(dim, keepdim=keepdim)
    result = nansum(input, dim, keepdim, dtype=dtype) / counts
    return _deliver(result, out, "nanmean")


@op(method=True, cost=memory_cost(1, "input"), grad={
    "input": lambda g, input, out, dim, keepdim: _prod_grad(g, input, out, dim, keepdim)},
    jvp="prod_jvp(input, input_t, out, dim, keepdim)")
def prod(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None,
         out: Tensor | None = None) -> Tensor:
    """Product over ``dim`` (one dim, or all); ints and bools multiply in int64."""
    if isinstance(dim, list | tuple):   # PyTorch's prod takes one dim only
        raise TypeError(f"prod(): argument 'dim' (position 1) must be int, not "
                        f"{type(dim).__name__}")
    return _sum_like("prod", input, dim, keepdim, dtype, out)


@op(method=True, grad={"input": "expand_reduced(g, input_shape, dim, keepdim) / "
                                 "reduced_count(input_shape, dim)"}, cost=memory_cost(1, "input"),
    jvp="auto_linear")
def mean(input: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None,
         out: Tensor | None = None) -> Tensor:
    """Arithmetic mean; needs a floating/complex input or ``dtype``."""
    if dim is None and not keepdim and dtype is None and out is None and \
            (input._dtype is D.float32 or input._dtype is D.float64) and not input._sparse:
        return _full("mean", input)
    dt = D.to_dtype(dtype) if dtype is not None else input.dtype
    if dt.category < D.FLOATING:
        raise RuntimeError(f"mean(): could not infer output dtype. "
                           f"{'Optional' if dtype is not None else 'Input'} dtype must be "
                           f"either a floating point or complex dtype. Got: {dt.legacy_name}")
    x = _accumulated_as(input, dt)
    dims = _dims(input, dim)
    result, flat = _alloc(input, dims, keepdim, dt)
    kernel(x, "mean")(flat, x, dims)
    return _deliver(result, out, "mean")


# -- extrema -----------------------------------------------------------------------------------
def _extreme(name: str, input: Tensor, dim: Dims, keepdim: bool, out: Tensor | None,
             full: bool) -> Tensor:
    if input.numel() == 0 and isinstance(dim, int | tuple | list) and input.dim():
        # PyTorch checks each dim's size before whether one repeats
        for d in (dim,) if isinstance(dim, int) else dim:
            _check_nonempty(input, (normalize_dim(d, input.dim()),), name, False)
    dims = _dims(input, dim)
    _check_nonempty(input, dims, name, full)   # before the dtype, as in PyTorch
    result, flat = _alloc(input, dims, keepdim, input.dtype)
    if input.dtype.is_complex and result.numel():   # PyTorch's kernel refuses it
        kname = f"{name[1:]}_values_{input.device.type}" if name[0] == "a" else f"{name}_all"
        raise NotImplementedError(f"\"{kname}\" not implemented for "
                                  f"'{input.dtype.legacy_name}'")
    if result.numel():
        kernel(input, "amax" if name in ("amax", "max") else "amin")(flat, input, dims)
    return _deliver(result, out, name, exact_dtype=True)


@op(method=True, cost=memory_cost(1, "input"), grad={
    "input": lambda g, input, out, dim, keepdim: _evenly(g, input, out, dim, keepdim)},
    jvp="extreme_jvp(input, input_t, out, dim, keepdim)")
def amax(input: Tensor, dim: Dims = (), keepdim: bool = False, *,
         out: Tensor | None = None) -> Tensor:
    """Maximum over ``dim`` (all dims by default); NaN propagates."""
    return _extreme("amax", input, dim, keepdim, out, full=dim in ((), None))


@op(method=True, cost=memory_cost(1, "input"), grad={
    "input": lambda g, input, out, dim, keepdim: _evenly(g, input, out, dim, keepdim)},
    jvp="extreme_jvp(input, input_t, out, dim, keepdim)")
def amin(input: Tensor, dim: Dims = (), keepdim: bool = False, *,
         out: Tensor | None = None) -> Tensor:
    """Minimum over ``dim`` (all dims by default); NaN propagates."""
    return _extreme("amin", input, dim, keepdim, out, full=dim in ((), None))


def _arg_extreme(name: str, input: Tensor, dim: int | None, keepdim: bool, largest: bool,
                 with_values: bool) -> tuple[Tensor | None, Tensor]:
    """(values, int64 indices) of the extremum along ``dim``; None flattens the input."""
    if dim is None or input.dim() == 0:
        if dim is not None:
            normalize_dim(dim, 0)
        dims = tuple(range(input.dim()))
        if input.numel() == 0:  # argmax/argmin (max/min without a dim reduce elsewhere)
            raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                             f"input.numel() == 0.")
        kdim = None
    else:
        dims = (normalize_dim(dim, input.dim()),)
        _check_nonempty(input, dims, name, full=False)
        kdim = dims[0]
    _no_complex(input, name)    # after the dim checks for max/min (argmax/argmin: before)
    indices, flat_i = _alloc(input, dims, keepdim, D.int64)
    values, flat_v = _alloc(input, dims, keepdim, input.dtype) if with_values else (None, None)
    kernel(input, "_arg_extreme")(flat_v, flat_i, input, kdim, largest)
    return values, indices


def _max_min(name: str, input: Tensor, dim: Any, keepdim: bool, out: Any) -> Any:
    largest = name == "max"
    if isinstance(dim, Tensor):  # max(a, b): the elementwise maximum
        return OPS["maximum" if largest else "minimum"].frontend(input, dim, out=out)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}(): keepdim needs a dim")
        return _extreme(name, input, None, False, out, full=True)
    values, indices = _arg_extreme(name, input, dim, keepdim, largest, with_values=True)
    if out is not None:
        values = _deliver(values, out[0], name, exact_dtype=True)
        indices = _deliver(indices, out[1], name, exact_dtype=True)
    return (MaxResult if largest else MinResult)(values, indices)


def _select_grads(largest: bool) -> dict[str, Any]:
    """max/min's formulas: the gradient of each argument that can be a tensor (the input, the
    second operand given positionally as ``dim`` or as ``other``), from the indices only."""
    return {
        "input": lambda g, input, out1, dim, keepdim, other:
            _select_grad(g, input, out1, dim if other is None else other, keepdim, largest),
        "dim": lambda g, dim, out1, input, keepdim:
            _select_grad(g, dim, out1, input, keepdim, largest),
        "other": lambda g, other, out1, input, keepdim:
            _select_grad(g, other, out1, input, keepdim, largest)}


@op(method=True, output_differentiable=(True, False), cost=memory_cost(1, "input"),
    grad=_select_grads(largest=True),
    jvp="select_jvp(input, input_t, dim if other is None else other, dim_t if other is None "
        "else other_t, out, out1, keepdim, True)")
def max(input: Tensor, dim: Any = None, keepdim: bool = False,
        other: Tensor | None = None, *, out: Any = None) -> Any:
    """max(input) -> the largest value; max(input, dim) -> (values, indices);
    max(input, other) -> the elementwise maximum."""
    return _max_min("max", input, _dim_or_other("max", dim, other), keepdim, out)


@op(method=True, output_differentiable=(True, False), cost=memory_cost(1, "input"),
    grad=_select_grads(largest=False),
    jvp="select_jvp(input, input_t, dim if other is None else other, dim_t if other is None "
        "else other_t, out, out1, keepdim, False)")
def min(input: Tensor, dim: Any = None, keepdim: bool = False,
        other: Tensor | None = None, *, out: Any = None) -> Any:
    """min(input) -> the smallest value; min(input, dim) -> (values, indices);
    min(input, other) -> the elementwise minimum."""
    return _max_min("min", input, _dim_or_other("min", dim, other), keepdim, out)


def _dim_or_other(name: str, dim: Any, other: Tensor | None) -> Any:
    """``max(x, other=y)`` is ``max(x, y)`` (PyTorch's keyword for the elementwise form; a
    positional parameter here only so that its derivative can bind it)."""
    if other is None:
        return dim
    if dim is not None:
        raise TypeError(f"{name}() received both dim={dim!r} and other=: use one")
    return other


def _argop(name: str, input: Tensor, dim: int | None, keepdim: bool,
           out: Tensor | None) -> Tensor:
    if input.dtype is D.bool:
        raise RuntimeError(f"{name}(): does not support bool input")
    _no_complex(input, name)
    _, indices = _arg_extreme(name, input, dim, keepdim, name == "argmax", with_values=False)
    return _deliver(indices, out, name, exact_dtype=True)


@op(method=True, cost=memory_cost(1, "input"))
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False, *,
           out: Tensor | None = None) -> Tensor:
    """Index of the first maximum along ``dim`` (of the flattened input when dim is None)."""
    return _argop("argmax", input, dim, keepdim, out)


@op(method=True, cost=memory_cost(1, "input"))
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False, *,
           out: Tensor | None = None) -> Tensor:
    """Index of the first minimum along ``dim`` (of the flattened input when dim is None)."""
    return _argop("argmin", input, dim, keepdim, out)


@op(method=True, cost=memory_cost(2, "input"), grad={
    "input": lambda grads, input, outs, dim, keepdim:
        _evenly(grads[0], input, outs[0], dim, keepdim)
        + _evenly(grads[1], input, outs[1], dim, keepdim)},
    jvp="aminmax_jvp(input, input_t, outs, dim, keepdim)")
def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False,
            out: Any = None) -> AminmaxResult:
    """(min, max) over ``dim`` (or the whole tensor) in one call."""
    dims = _dims(input, dim) if dim is None else (normalize_dim(dim, input.dim()),)
    if input.dim() == 0:
        dims = ()
    if input.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dims and input._shape[dims[0]] == 0 and dim is not None:
        raise IndexError(f"aminmax: Expected reduction dim {dims[0]} to have non-zero size.")
    _no_complex(input, "aminmax")
    lo, lo_flat = _alloc(input, dims, keepdim, input.dtype)
    hi, hi_flat = _alloc(input, dims, keepdim, input.dtype)
    kernel(input, "amin")(lo_flat, input, dims)
    kernel(input, "amax")(hi_flat, input, dims)
    if out is not None:
        lo = _deliver(lo, out[0], "aminmax", exact_dtype=True)
        hi = _deliver(hi, out[1], "aminmax", exact_dtype=True)
    return AminmaxResult(lo, hi)


# -- moments -----------------------------------------------------------------------------------
def _correction(name: str, dim: Any, unbiased: Any, correction: Any) -> tuple[Any, float]:
    if isinstance(dim, bool):  # var(x, True): the legacy (input, unbiased) overload
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): pass either unbiased or correction, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, float(correction)


def _moments(name: str, input: Tensor, dim: Any, unbiased: Any, keepdim: bool,
             correction: Any, with_mean: bool, take_sqrt: bool
             ) -> tuple[Tensor, Tensor | None]:
    if input.dtype.category < D.FLOATING:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dim, corr = _correction(name, dim, unbiased, correction)
    if isinstance(dim, tuple | list):  # var/std check a repeat before a later dim's range
        dims_one_at_a_time(dim, input.dim())
    dims = _dims(input, dim)
    n = math.prod(input._shape[d] for d in dims)
    if n - corr <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      f"less than the reduction factor (input numel divided by output numel).",
                      stacklevel=3)
    if input.dtype.is_complex:
        return _complex_moments(input, dims, keepdim, corr, with_mean, take_sqrt)
    var_t, var_flat = _alloc(input, dims, keepdim, input.dtype.to_real())
    mean_t, mean_flat = _alloc(input, dims, keepdim, input.dtype) if with_mean else (None, None)
    kernel(input, "_var_mean")(var_flat, mean_flat, input, dims, corr, take_sqrt)
    return var_t, mean_t


def _complex_moments(input: Tensor, dims: tuple[int, ...], keepdim: bool, corr: float,
                     with_mean: bool, take_sqrt: bool) -> tuple[Tensor, Tensor | None]:
    """PyTorch's moments of complex values: the variances of the real and imaginary parts
    add up and the mean pairs the parts' means, so an infinite real part leaves the
    imaginary mean finite (a complex division would make it NaN)."""
    from .complex_views import complex as complex_from_parts
    real_dt = input.dtype.to_real()
    moments = []
    for part in (input.real, input.imag):
        v, v_flat = _alloc(input, dims, keepdim, real_dt)
        m, m_flat = _alloc(input, dims, keepdim, real_dt) if with_mean else (None, None)
        kernel(input, "_var_mean")(v_flat, m_flat, part, dims, corr, False)
        moments.append((v, m))
    (var_re, mean_re), (var_im, mean_im) = moments
    var = var_re + var_im
    return (var.sqrt() if take_sqrt else var), \
        (complex_from_parts(mean_re, mean_im) if with_mean else None)


def _moments_grad_of(std: bool) -> Any:
    """The derivative formula of var/std/var_mean/std_mean (``std``: of the deviation)."""
    return lambda grads, input, outs, dim, unbiased, keepdim, correction: _moments_grad(
        grads, input, outs, dim, unbiased, keepdim, correction, std)


@op(method=True, grad={"input": _moments_grad_of(False)}, cost=memory_cost(3, "input"),
    jvp="moments_jvp(input, input_t, outs, dim, unbiased, keepdim, correction, False)")
def var(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: float | None = None, out: Tensor | None = None) -> Tensor:
    """Variance over ``dim`` with Bessel's ``correction`` (1 by default; unbiased=False -> 0)."""
    v, _ = _moments("var", input, dim, unbiased, keepdim, correction, False, False)
    return _deliver(v, out, "var")


@op(method=True, grad={"input": _moments_grad_of(True)}, cost=memory_cost(3, "input"),
    jvp="moments_jvp(input, input_t, outs, dim, unbiased, keepdim, correction, True)")
def std(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: float | None = None, out: Tensor | None = None) -> Tensor:
    """Standard deviation over ``dim`` (see var)."""
    s, _ = _moments("std", input, dim, unbiased, keepdim, correction, False, True)
    return _deliver(s, out, "std")


@op(method=False, grad={"input": _moments_grad_of(False)}, cost=memory_cost(3, "input"),
    jvp="moments_jvp(input, input_t, outs, dim, unbiased, keepdim, correction, False)")
def var_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None,
             keepdim: bool = False, *, correction: float | None = None
             ) -> tuple[Tensor, Tensor]:
    """(var, mean) over ``dim`` in one pass over the arguments."""
    return _moments("var_mean", input, dim, unbiased, keepdim, correction, True, False)


@op(method=False, grad={"input": _moments_grad_of(True)}, cost=memory_cost(3, "input"),
    jvp="moments_jvp(input, input_t, outs, dim, unbiased, keepdim, correction, True)")
def std_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None,
             keepdim: bool = False, *, correction: float | None = None
             ) -> tuple[Tensor, Tensor]:
    """(std, mean) over ``dim``."""
    return _moments("std_mean", input, dim, unbiased, keepdim, correction, True, True)


# -- norms and logsumexp -----------------------------------------------------------------------
def _norm_order(p: Any) -> float:
    if p is None or p == "fro":
        return 2.0
    if isinstance(p, str):
        raise RuntimeError(f"norm(): only p='fro' and numeric p are supported, got p={p!r} "
                           f"(use a matrix-norm routine for 'nuc')")
    if isinstance(p, Tensor):
        p = p.item()
    return float(p)


@op(method=True, cost=memory_cost(2, "input"), grad={
    "input": lambda g, input, p, dim, keepdim, dtype, out:
        _norm_grad(g, input, p, dim, keepdim, dtype, out)},
    jvp="norm_jvp(input, input_t, p, dim, keepdim, dtype, out)")
def norm(input: Tensor, p: Any = "fro", dim: Dims = None, keepdim: bool = False,
         out: Tensor | None = None, dtype: Any = None) -> Tensor:
    """Vector p-norm over ``dim`` (all dims by default): p = 0, 1, 2, +-inf, 'fro' or a float
    (other string orders go to linalg.matrix_norm, before this runs)."""
    if p == "fro" and isinstance(dim, tuple | list) and len(dim) > 2:
        # PyTorch's torch.norm sends 'fro' over more than two dims to linalg.matrix_norm
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dim)}")
    order = _norm_order(p)
    x = input
    if dtype is not None:
        dt = D.to_dtype(dtype)
        if input.dtype.is_complex and not dt.is_complex:
            raise RuntimeError(f"linalg.vector_norm: dtype should be complex for complex inputs, "
                               f"but got {dt.legacy_name}")
        x = input.to(dt)
    if x.dtype.category < D.FLOATING:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {x.dtype.legacy_name}")
    if (order < 0 or order == math.inf) and x.numel() == 0:
        p_txt = {math.inf: "inf", -math.inf: "-inf"}.get(order, f"{order:g}")
        if dim is None or (not isinstance(dim, int) and len(dim) == 0):   # every dim
            raise RuntimeError(f"linalg.vector_norm cannot compute the {p_txt} norm on an empty "
                               f"tensor because the operation does not have an identity")
        # PyTorch checks the dims one by one, each wrapped then tested for emptiness (so an
        # empty dim before an out-of-range one is the error), the list's duplicates after
        for d in [dim] if isinstance(dim, int) else dim:
            if x._shape and x._shape[normalize_dim(d, x.dim())] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {p_txt} norm on the "
                                   f"dimension {d} because this dimension is empty and the "
                                   f"operation does not have an identity")
    if isinstance(dim, tuple | list):  # norm checks a repeat before a later dim's range
        dims_one_at_a_time(dim, x.dim())
    dims = _dims(x, dim)
    # PyTorch reduces a 0-d input over an explicit dim (0 or -1) like a longer one
    explicit_0d = x.dim() == 0 and dim is not None and (isinstance(dim, int) or len(dim) > 0)
    if order != 0 and math.prod(x._shape[d] for d in dims) == 1 and x.numel() and \
            not explicit_0d:
        # one element per norm: |x| itself, as PyTorch gives it (no power that could overflow
        # or round: the 2-norm of [1e30] in float32 is 1e30, not sqrt(inf))
        result = x.abs()
        if not keepdim:
            result = result.reshape([n for i, n in enumerate(x._shape) if i not in dims])
        return _deliver(result, out, "norm")
    result, flat = _alloc(x, dims, keepdim, REDUCTIONS[norm_reduction(order)].out(x.dtype))
    kernel(x, "norm")(flat, x, dims, order)
    return _deliver(result, out, "norm")


def _matrix_orders_routed(vector_norm: Any) -> Any:
    """torch.norm's frontend: a string order other than 'fro' ('nuc', or one matrix_norm
    refuses) is linalg.matrix_norm over ``dim`` (every dim by default), as PyTorch's
    torch.norm sends it there; everything else is the vector norm above."""
    def norm(*args: Any, **kwargs: Any) -> Any:
        p = args[1] if len(args) > 1 else kwargs.get("p", "fro")
        if isinstance(p, str) and p != "fro":
            return _matrix_norm_call(*args, **kwargs)
        return vector_norm(*args, **kwargs)
    norm.__name__, norm.__doc__, norm.__wrapped__ = "norm", vector_norm.__doc__, vector_norm
    return norm


def _matrix_norm_call(input: Tensor, p: str, dim: Dims = None, keepdim: bool = False,
                      out: Tensor | None = None, dtype: Any = None) -> Tensor:
    from gputensor import linalg

    dims = list(range(input.dim())) if dim is None else [dim] if isinstance(dim, int) else dim
    return linalg.matrix_norm(input, p, dims, keepdim, dtype=dtype, out=out)


norm = OPS["norm"].frontend = _matrix_orders_routed(norm)


@op(method=True, grad={"input": "expand_reduced(g, input_shape, dim, keepdim) * cj((input - "
                                 "unsqueeze_like(out, input_shape, dim, keepdim)).exp())"},
                                 cost=memory_cost(4, "input"),
    jvp="(input_t * (input - unsqueeze_like(out, input_shape, dim, keepdim)).exp())"
        ".sum(dim, keepdim)")
def logsumexp(input: Tensor, dim: Dims, keepdim: bool = False, *,
              out: Tensor | None = None) -> Tensor:
    """log(sum(exp(input))) over ``dim``, computed stably (shifted by the max)."""
    if input.dtype.is_complex:
        return _deliver(_complex_logsumexp(input, _dims(input, dim), keepdim), out, "logsumexp")
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    dims = _dims(x, dim)
    result, flat = _alloc(x, dims, keepdim, x.dtype)
    kernel(x, "logsumexp")(flat, x, dims)
    return _deliver(result, out, "logsumexp")


def _complex_logsumexp(x: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    """PyTorch's complex logsumexp: shifted by the largest real part (by 0 where that is
    infinite), log(sum(exp(x - shift))) + shift."""
    if x.numel() == 0:
        return x.exp().sum(dims, keepdim=keepdim).log()
    shift = amax(x.real, dims, keepdim=True)
    shift = shift.masked_fill(shift.abs() == math.inf, 0)
    result = (x - shift).exp().sum(dims, keepdim=True).log() + shift
    return result if keepdim else result.reshape(_shape(x._shape, dims, False))


# -- logical -----------------------------------------------------------------------------------
def _logical(name: str, input: Tensor, dim: Dims, keepdim: bool, out: Tensor | None) -> Tensor:
    dt = REDUCTIONS[name].out(input.dtype)
    if isinstance(out, Tensor) and out.dtype is not dt:
        raise RuntimeError(f"{name} only supports bool tensor for result, got: "
                           f"{out.dtype.legacy_name}")
    if isinstance(dim, tuple | list) and not dim:
        # PyTorch's any/all reduce over no dim for dim=() (sum reduces over all of them)
        result = (input != 0) if dt is D.bool else (input != 0).to(dt)
        return _deliver(result, out, name)
    dims = _dims(input, dim)
    result, flat = _alloc(input, dims, keepdim, dt)
    kernel(input, name)(flat, input, dims)
    return _deliver(result, out, name)


@op(method=True, cost=memory_cost(1, "input"))
def all(input: Tensor, dim: Dims = None, keepdim: bool = False, *,
        out: Tensor | None = None) -> Tensor:
    """True where every element over ``dim`` is non-zero (True for empty reductions)."""
    return _logical("all", input, dim, keepdim, out)


@op(method=True, cost=memory_cost(1, "input"))
def any(input: Tensor, dim: Dims = None, keepdim: bool = False, *,
        out: Tensor | None = None) -> Tensor:
    """True where some element over ``dim`` is non-zero (False for empty reductions)."""
    return _logical("any", input, dim, keepdim, out)


@op(method=True, cost=memory_cost(1, "input"))
def count_nonzero(input: Tensor, dim: Dims = None) -> Tensor:
    """Number of non-zero elements over ``dim``, as int64."""
    dims = _dims(input, dim)
    result, _ = _alloc(input, dims, False, REDUCTIONS["count_nonzero"].out(input.dtype))
    kernel(input, "count_nonzero")(result, input, dims)
    return result


# -- scans -------------------------------------------------------------------------------------
def _scan(name: str, input: Tensor, dim: int, dtype: Any, out: Tensor | None,
          reverse: bool = False) -> Tensor:
    d = normalize_dim(dim, input.dim())
    dt = _accumulate_dtype(dtype, out)
    x = input if dt is None or dt is input.dtype else input.to(dt)
    if dt is None:
        dt = int_to_int64(input.dtype)  # scans follow the sum rule
    result = empty(input._shape, dt, input.device)
    if input.dim() == 0:   # PyTorch copies a 0-d input (no 1 * z: NaN - inf i stays, as -0)
        result.copy_(x)
    else:
        kernel(x, "_scan")(result, x, d, "*" if name == "cumprod" else "+", reverse)
    return _deliver(result, out, name)


@op(method=True, grad={"input": "_reverse_cumsum(g, dim)"}, cost=memory_cost(1, "input"),
    jvp="auto_linear")
def cumsum(input: Tensor, dim: int, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """Running sum along ``dim`` (ints and bools in int64, floats accumulated in float64)."""
    return _scan("cumsum", input, dim, dtype, out)


@op(method=True, grad={"input": lambda g, input, out, dim: _cumprod_grad(g, input, out, dim)},
    cost=memory_cost(1, "input"), jvp="cumprod_jvp(input, input_t, out, dim)")
def cumprod(input: Tensor, dim: int, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """Running product along ``dim``."""
    return _scan("cumprod", input, dim, dtype, out)


@op(method=False, grad={"input": "cumsum(g, dim)"}, jvp="auto_linear")
def _reverse_cumsum(input: Tensor, dim: int) -> Tensor:
    """Sum of the elements at and after each position along ``dim`` (cumsum's gradient)."""
    return _scan("_reverse_cumsum", input, dim, None, None, reverse=True)


# -- softmax -----------------------------------------------------------------------------------
def _softmax_dim(ndim: int) -> int:
    # PyTorch's implicit-dim rule for softmax(dim=None).
    return 0 if ndim in (0, 1, 3) else 1


def _softmax(name: str, input: Tensor, dim: int | None, dtype: Any, log: bool) -> Tensor:
    d = normalize_dim(_softmax_dim(input.dim()) if dim is None else dim, input.dim())
    x = input if dtype is None else input.to(D.to_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): not implemented for '{x.dtype.legacy_name}' tensors "
                           f"(pass a floating point input or dtype=)")
    result = empty(x._shape, x.dtype, x.device)
    kernel(x, "softmax")(result, x, d, log)
    return result


@op(method=True, cost=memory_cost(5, "input"), grad={
    "input": lambda g, out, dim, input_shape:
        _softmax_backward(g, out, _softmax_dim_of(dim, len(input_shape)))},
    jvp="softmax_jvp(input_t, out, dim)")
def softmax(input: Tensor, dim: int | None = None, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, shifted by the max so it never overflows."""
    return _softmax("softmax", input, dim, dtype, log=False)


@op(method=True, cost=memory_cost(5, "input"), grad={
    "input": lambda g, out, dim, input_shape:
        _log_softmax_backward(g, out, _softmax_dim_of(dim, len(input_shape)))},
    jvp="log_softmax_jvp(input_t, out, dim)")
def log_softmax(input: Tensor, dim: int | None = None, dtype: Any = None) -> Tensor:
    """x - logsumexp(x) along ``dim``."""
    return _softmax("log_softmax", input, dim, dtype, log=True)


def _softmax_dim_of(dim: int | None, ndim: int) -> int:
    return normalize_dim(_softmax_dim(ndim) if dim is None else dim, ndim)


def _softmax_grad_op(name: str, grad: Tensor, output: Tensor, dim: int, log: bool) -> Tensor:
    if grad._shape != output._shape or grad.dtype is not output.dtype:
        raise RuntimeError(f"{name}(): grad {grad.dtype} {list(grad.shape)} must match output "
                           f"{output.dtype} {list(output.shape)}")
    result = empty(output._shape, output.dtype, output.device)
    kernel(output, "_softmax_backward")(result, grad, output, normalize_dim(dim, output.dim()),
                                        log)
    return result


# The fused backward ops of softmax and log_softmax (one pass over the reduced dim each, on the
# cross-entropy training path: a dot product per slice, a multiply-subtract per element). Their
# own derivatives, in differentiable ops, give double backward: d/dgrad is the op itself
# (softmax) or grad - sum(grad * exp(output)) (log_softmax).
@op(method=False, grad={
    "grad": "_softmax_backward(g, output, dim)",
    "output": "g * (grad - (grad * output).sum(dim, keepdim=True)) "
              "- grad * (g * output).sum(dim, keepdim=True)"}, cost=memory_cost(4),
    jvp="softmax_backward_jvp(grad, grad_t, output, output_t, dim)")
def _softmax_backward(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """output * (grad - sum(grad * output, dim)): the gradient of softmax's input."""
    return _softmax_grad_op("_softmax_backward", grad, output, dim, log=False)


@op(method=False, grad={
    "grad": "g - (g * output.exp()).sum(dim, keepdim=True)",
    "output": "-g * output.exp() * grad.sum(dim, keepdim=True)"}, cost=memory_cost(4),
    jvp="log_softmax_backward_jvp(grad, grad_t, output, output_t, dim)")
def _log_softmax_backward(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """grad - exp(output) * sum(grad, dim): the gradient of log_softmax's input."""
    return _softmax_grad_op("_log_softmax_backward", grad, output, dim, log=True)


# -- derivative helpers (formulas reach them as _ops.reduce.<name>); all written with
# differentiable ops so that double backward works ----------------------------------------------
def _evenly(g: Tensor, input: Tensor, value: Tensor, dim: Any, keepdim: bool) -> Tensor:
    """The gradient of a value-selecting reduction (amax, amin, max(), aminmax): g split evenly
    among the elements equal to the selected value (the NaNs, when it is NaN)."""
    v = unsqueeze_like(value, input.shape, dim, keepdim)
    mask = (input == v) | input.isnan()
    count = mask.sum(dim, keepdim=True)
    return masked(expand_reduced(g, input.shape, dim, keepdim) / count, mask)


def _select_grad(g: Tensor, input: Any, indices: Tensor | None, dim: Any, keepdim: bool,
                 largest: bool) -> Tensor:
    """The gradient of max/min: of ``input`` in all three forms, and of the second operand of
    the elementwise form (called with the operands swapped). Only the indices are saved (as
    PyTorch does), so an in-place op on the values leaves backward valid; the full reduction
    recomputes its value from the input."""
    if isinstance(dim, Tensor):  # elementwise maximum/minimum: ties split the gradient
        wins = input > dim if largest else input < dim
        return masked(g, wins) + masked(g * 0.5, input == dim)
    if dim is None:
        x = input.detach()
        return _evenly(g, input, x.amax() if largest else x.amin(), None, False)
    nd = input.dim()
    if nd == 0:
        return g
    d = normalize_dim(dim, nd)
    indices = indices if keepdim else indices.unsqueeze(d)
    g = g if keepdim else g.unsqueeze(d)
    positions = OPS["arange"].frontend(input.shape[d], device=g.device)
    positions = positions.reshape(tuple(-1 if i == d else 1 for i in range(nd)))
    return masked(g, positions == indices)


def _prod_grad(g: Tensor, input: Tensor, out: Tensor, dim: Any, keepdim: bool) -> Tensor:
    """d prod / d x_i is the product of the others: out / x_i without zeros; with zeros, the
    product of the elements before i times the product of those after it (exclusive
    cumulative products, as PyTorch's prod_safe_zeros_backward: no division, so an inf next
    to a zero gives PyTorch's values, and the cumprods keep double backward right)."""
    if input.dtype is not g.dtype:
        input = input.to(g.dtype)
    gx = expand_reduced(g, input.shape, dim, keepdim)
    zero = input == 0
    if not bool(zero.any()):
        return gx * cj(unsqueeze_like(out, input.shape, dim, keepdim) / input)
    if input.dim() == 0:
        return gx
    if dim is None and int(zero.sum()) > 1:
        return gx * 0  # PyTorch's full-product rule: two zeros make every gradient 0
    x, d = (input.reshape(-1), 0) if dim is None else (input, normalize_dim(dim, input.dim()))
    before, after = _exclusive_prod(x, d, False), _exclusive_prod(x, d, True)
    return gx * cj((before * after).reshape(input.shape))


def _exclusive_prod(x: Tensor, d: int, reverse: bool) -> Tensor:
    """Along dim ``d``: the product of the elements before each one (after it: ``reverse``)."""
    n = x.shape[d]
    if reverse:
        return _exclusive_prod(x.flip(d), d, False).flip(d)
    one = OPS["ones_like"].frontend(x.narrow(d, 0, 1))
    if n == 1:
        return one
    return OPS["cat"].frontend([one, x.cumprod(d).narrow(d, 0, n - 1)], d)


def _cumprod_grad(g: Tensor, input: Tensor, out: Tensor, dim: int) -> Tensor:
    """grad_i = sum_{j >= i} g_j prod_{l <= j, l != i} x_l, without dividing by zero.

    Without zeros that is rcs(g * out) / x (rcs: the reverse cumsum). With zeros, per slice
    (k the first zero, k2 the second): before k the same form; at k, rcs(g * cumprod(x with
    x_k = 1)); between k and k2, x_k times that over x_i; at k2, x_k rcs(g * cumprod(x with
    x_k = x_k2 = 1)); after k2, zero. The x_k factors are 0 but keep the second derivatives
    right (double backward through zeros)."""
    if input.dtype is not g.dtype:
        input = input.to(g.dtype)
    if input.dim() == 0:
        return g
    rcs = OPS["_reverse_cumsum"].frontend
    zero = input == 0
    if not bool(zero.any()):
        return rcs(g * cj(out), dim) / cj(input)
    where = OPS["where"].frontend
    seen = zero.cumsum(dim)
    before, between = seen == 0, (seen == 1) & ~zero
    first, second = zero & (seen == 1), zero & (seen == 2)
    safe = where(before | between, input, 1.0)
    x_k = cj(masked(input, first).sum(dim, keepdim=True))
    past_first = rcs(g * cj(where(first, 1.0, input).cumprod(dim)), dim)
    past_second = rcs(g * cj(where(first | second, 1.0, input).cumprod(dim)), dim)
    return where(before, rcs(g * cj(out), dim) / cj(safe),
                 where(first, past_first,
                       where(between, x_k * past_first / cj(safe),
                             masked(x_k * past_second, second))))


def _moments_grad(grads: list, input: Tensor, outs: list, dim: Any, unbiased: Any,
                  keepdim: bool, correction: Any, take_sqrt: bool) -> Tensor:
    """var/std (output 0) and, for var_mean/std_mean, mean (output 1)."""
    dim, corr = _correction("var", dim, unbiased, correction)
    dims = _dims(input, dim)
    n = math.prod(input._shape[d] for d in dims)
    g = grads[0]
    if take_sqrt:  # d std = d var / (2 std); a zero std gives zero, as in PyTorch
        std = outs[0]
        g = masked(g / (std * 2), std != 0)
    scale = 2.0 / (n - corr) if n != corr else math.inf
    centered = input - input.mean(dims, keepdim=True)
    result = expand_reduced(g, input.shape, dims, keepdim) * centered * scale
    if len(grads) > 1:
        mean_grad = expand_reduced(grads[1], input.shape, dims, keepdim)
        result = result + mean_grad / builtins.max(n, 1)
    return result


def _norm_grad(g: Tensor, input: Tensor, p: Any, dim: Any, keepdim: bool, dtype: Any,
               out: Tensor) -> Tensor:
    order = _norm_order(p)
    x = input if dtype is None else input.to(D.to_dtype(dtype))
    dims = _dims(x, dim)
    gx = expand_reduced(g, x.shape, dims, keepdim)
    if order == 0:
        return gx * 0
    if order == 1:
        return gx * x.sgn()
    where = OPS["where"].frontend
    n = unsqueeze_like(out, x.shape, dims, keepdim)
    if order == math.inf or order == -math.inf:  # evenly among the elements of largest |x|
        mask = x.abs() == n
        return masked(gx * x.sgn() / mask.sum(dims, keepdim=True), mask)
    nonzero = n != 0
    safe_n = where(nonzero, n, 1.0)
    if order == 2:
        return gx * x / safe_n
    a = x.abs()
    scaled = masked(x.sgn() * where(a != 0, a, 1.0) ** (order - 1), a != 0)
    return masked(gx * scaled / safe_n ** (order - 1), nonzero)

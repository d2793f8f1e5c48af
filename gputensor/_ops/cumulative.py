"""Cumulative extrema and log-sum-exp scans: cummax, cummin, logcumsumexp.

All three are log-step (Hillis-Steele) scans over ``dim`` built from ops every backend has:
round k merges each position with the one 2**k before it (narrow, an elementwise merge, cat),
so a slice of n elements takes ceil(log2 n) rounds and no kernel of its own. cummax/cummin
then read their values back from the input with ``gather`` at the indices, so autograd scatters
the gradient into the index positions (PyTorch's rule) with no formula of their own;
logcumsumexp declares PyTorch's log-space gradient, which is 0 (not NaN) at -inf inputs after
the first finite one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor, normalize_dim
from gputensor.kernels.registry import OPS, memory_cost

from ._core import check_out, op

CummaxResult = return_types.cummax
CumminResult = return_types.cummin

States = tuple[Tensor, ...]


def _log_step_scan(states: States, dim: int, merge: Callable[[States, States], States]
                   ) -> States:
    """Inclusive scan of parallel ``states`` along ``dim``: ``merge(earlier, later)`` combines
    the running result of an earlier run of positions with that of the run right after it
    (it must be associative; the earlier run is always the first argument)."""
    n = states[0].shape[dim]
    step = 1
    while step < n:
        head = [s.narrow(dim, 0, step) for s in states]
        earlier = tuple(s.narrow(dim, 0, n - step) for s in states)
        later = tuple(s.narrow(dim, step, n - step) for s in states)
        merged = merge(earlier, later)
        states = tuple(gt.cat((h, m), dim) for h, m in zip(head, merged, strict=True))
        step *= 2
    return states


def _not_implemented(kernel_name: str, input: Tensor) -> NotImplementedError:
    return NotImplementedError(f'"{kernel_name}" not implemented for '
                               f"'{input.dtype.legacy_name}'")


def _check_out_dtype(out: Any, dtype: D.dtype) -> None:
    # PyTorch's exact-dtype check of an out= tensor (no cast into it), with its message.
    if isinstance(out, Tensor) and out.dtype is not dtype:
        raise RuntimeError(f"expected scalar_type {dtype.legacy_name} but found "
                           f"{out.dtype.legacy_name}")


def _refuse_out_with_grad(name: str, input: Tensor, out: Any) -> None:
    # Composites have no recorded node to refuse this for them (as ops with formulas do).
    if out is not None and input.requires_grad and gt.is_grad_enabled():
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad.")


# -- cummax / cummin -----------------------------------------------------------------------------
def _cum_extreme(name: str, input: Tensor, dim: int, out: Sequence[Tensor] | None) -> Any:
    largest = name == "cummax"
    if input.dim() == 0 and isinstance(dim, int) and dim not in (-1, 0):
        raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got {dim}")
    x = input.reshape(1) if input.dim() == 0 else input
    d = normalize_dim(dim, x.dim())    # the dim before the dtype, as in PyTorch
    if input.dtype.is_complex:
        raise _not_implemented(f"{name}_{input.device.type}", input)
    _refuse_out_with_grad(name, input, out)
    n = x.shape[d]

    def merge(earlier: States, later: States) -> States:
        (v0, i0), (v1, i1) = earlier, later
        # The later run wins ties (PyTorch's >= / <=) and a NaN wins over any number; a NaN
        # in the earlier run loses to no number since comparisons with NaN are False.
        take = (v1 >= v0) if largest else (v1 <= v0)
        if v1.is_floating_point():
            take = take | v1.isnan()
        return gt.where(take, v1, v0), gt.where(take, i1, i0)

    with gt.no_grad():
        positions = gt.arange(n, dtype=D.int64, device=x.device)
        positions = positions.reshape([-1 if k == d else 1 for k in range(x.dim())])
        values, indices = _log_step_scan((x.detach(), positions.expand(x.shape)), d, merge)
        indices = indices.contiguous()
    if input.requires_grad and gt.is_grad_enabled():
        values = x.gather(d, indices)  # the gradient then lands on the selected positions
    elif n <= 1:  # no round ran: the scan handed back the input itself
        values = x.detach().clone()
    if input.dim() == 0:
        values, indices = values.reshape(()), indices.reshape(())
    result = CummaxResult if largest else CumminResult
    if out is None:
        return result(values, indices)
    if not isinstance(out, tuple | list):
        raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not "
                        f"{type(out).__name__}")
    if len(out) != 2:
        raise TypeError(f"expected tuple of 2 elements but got {len(out)}")
    out_values, out_indices = out
    _check_out_dtype(out_values, input.dtype)
    _check_out_dtype(out_indices, D.int64)
    for target, got in ((out_values, values), (out_indices, indices)):
        check_out(target, got.shape, got.dtype, got.device, name)
        target.copy_(got)
    return result(out_values, out_indices)


@op(method=True, output_differentiable=(True, False), cost=memory_cost(1, "input"))
def cummax(input: Tensor, dim: int, *, out: Sequence[Tensor] | None = None) -> CummaxResult:
    """(values, indices): the running maximum along ``dim`` and where it was last reached;
    a NaN is the maximum from its position on (indices follow the latest NaN)."""
    return _cum_extreme("cummax", input, dim, out)


@op(method=True, output_differentiable=(True, False), cost=memory_cost(1, "input"))
def cummin(input: Tensor, dim: int, *, out: Sequence[Tensor] | None = None) -> CumminResult:
    """(values, indices): the running minimum along ``dim`` and where it was last reached;
    a NaN is the minimum from its position on (indices follow the latest NaN)."""
    return _cum_extreme("cummin", input, dim, out)


# -- logcumsumexp --------------------------------------------------------------------------------
def _logcumsumexp_grad(g: Tensor, input: Tensor, out: Tensor, dim: int) -> Tensor:
    """d/dx_j = sum_{i >= j} g_i exp(x_j - out_i), summed in log space: the positive and the
    negative parts of g each as a reverse logcumsumexp of log|g_i| - out_i, plus x_j."""
    if input.dim() == 0:
        return g
    d = normalize_dim(dim, input.dim())
    if input.dtype.is_complex:
        # holomorphic: d out_i / d x_j = exp(x_j - out_i), so the gradient is conj(exp(x_j))
        # times the reverse cumulative sum of g_i conj(exp(-out_i)) (PyTorch's convention)
        return (g * (-out).exp().conj()).flip(d).cumsum(d).flip(d) * input.exp().conj()
    scan = OPS["logcumsumexp"].frontend

    def reverse_scan(t: Tensor) -> Tensor:
        return scan(t.flip(d), d).flip(d)

    # A zero g_i takes the lowest finite log, not -inf: -inf - (-inf) would be NaN.
    lowest = gt.finfo(g.dtype).min
    log_abs = g.abs().log()
    log_pos = gt.where(g > 0, log_abs, lowest)
    log_neg = gt.where(g < 0, log_abs, lowest)
    return (reverse_scan(log_pos - out) + input).exp() - (reverse_scan(log_neg - out) + input).exp()


@op(method=True, cost=memory_cost(25, "input"), grad={
    "input": lambda g, input, out, dim: _logcumsumexp_grad(g, input, out, dim)},
    jvp="logcumsumexp_jvp(input, input_t, out, dim)")
def logcumsumexp(input: Tensor, dim: int, *, out: Tensor | None = None) -> Tensor:
    """log(cumsum(exp(input))) along ``dim``, each step a stable logaddexp (a -inf input adds
    nothing; a NaN makes the rest of its slice NaN; complex inputs step by logaddexp's complex
    form, as PyTorch's kernel does)."""
    x = input.reshape(1) if input.dim() == 0 else input
    d = normalize_dim(dim, x.dim())    # the dim before the dtype, as in PyTorch
    if not input.dtype.is_floating_point and not input.dtype.is_complex:
        raise _not_implemented(f"logcumsumexp_out_{input.device.type}", input)
    # Half types accumulate in float32 (one rounding at the end, not one per round).
    work = x.float() if input.dtype.itemsize == 2 else x
    complex_steps = input.dtype.is_complex and input.dim() > 0  # a 0-d input passes through
    if complex_steps and x._shape[d]:
        # PyTorch's step starts each slice from -inf+0j: a first element whose real part is
        # -inf becomes -inf+0j (the imaginary part of exp(-inf) is no number)
        work = work.clone()
        first = work.narrow(d, 0, 1)
        first.copy_(gt.where(first.real == -math.inf, complex(-math.inf, 0.0), first))
    # the running value is logaddexp's second operand, as in PyTorch's step (which keeps it
    # when both real parts are -inf)
    (result,) = _log_step_scan((work,), d, lambda e, lt: (gt.logaddexp(lt[0], e[0]),))
    if result is x:  # fewer than two elements per slice: nothing was combined
        result = x.clone()
    if complex_steps:  # a NaN part makes the element NaN+NaNj (PyTorch's helper)
        result = gt.where(result.isnan(), complex(math.nan, math.nan), result)
    result = result.to(input.dtype).reshape(input.shape)
    if out is None:
        return result
    _check_out_dtype(out, input.dtype)
    check_out(out, result.shape, result.dtype, result.device, "logcumsumexp")
    return out.copy_(result)

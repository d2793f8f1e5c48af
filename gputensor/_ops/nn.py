"""Neural-network ops: normalization, dropout, embedding and losses.

These are the private ops under ``gputensor.nn.functional``: each runs one fused kernel and
declares its derivative. The functionals validate arguments with PyTorch's messages and
reshape inputs into the layouts these ops take.

Ops whose backward yields several gradients at once (the norms) take their differentiable
inputs as one list, ``tensors = [input, weight, bias]``: the derivative formula of a list
argument returns every gradient from one call, so the fused backward kernel runs once per
node. Their backward ops switch to a composition of differentiable ops when the gradient
itself must be differentiated (``create_graph=True``), so double backward works too.
Their formulas read the input, the weight and the statistics (``out1``, ``out2``), never the
output (``outs`` would save it), so an in-place activation on the output keeps backward valid.
"""

from __future__ import annotations

import math
from typing import Any

from gputensor import _dtype as D
from gputensor._compile.state import replayable_check
from gputensor._tensor import Tensor
from gputensor.autograd.grad_mode import is_grad_enabled
from gputensor.kernels.registry import memory_cost

from ._core import empty, kernel, op
from .elementwise import elementwise
from .shape import _minmax, device_checks_indices

_B, _T = 2, 3
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _compute_dtype(dt: D.dtype) -> D.dtype:
    """Statistics of float16/bfloat16 inputs are kept in float32, as PyTorch keeps them."""
    return D.float32 if dt in (D.float16, D.bfloat16) else dt


def _needs_graph(*tensors: Tensor | None) -> bool:
    return is_grad_enabled() and any(t is not None and t._requires_grad for t in tensors)


def _affine_list(tensors: list[Tensor]) -> tuple[Tensor, Tensor | None, Tensor | None]:
    x = tensors[0]
    return x, (tensors[1] if len(tensors) > 1 else None), \
        (tensors[2] if len(tensors) > 2 else None)


def _grad_outputs(like: Tensor, weight: Tensor | None, param_shape: tuple[int, ...]
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """Fresh (grad_input, grad_weight, grad_bias) for a norm's backward kernel, the parameter
    gradients already in ``param_shape``: not views, so the autograd engine may store them as
    ``.grad`` without a copy (it copies a gradient that is a view)."""
    pdt = weight._dtype if weight is not None else _compute_dtype(like._dtype)
    return (empty(like._shape, like._dtype, like.device),
            empty(param_shape, pdt, like.device), empty(param_shape, pdt, like.device))


# == elementwise pieces ========================================================================
def _private(name: str, expr: str, arity: int, grad: tuple[str | None, ...],
             params: tuple[str, ...] = (), flops: int = 1) -> Any:
    """Declare a private elementwise op (no method, no in-place form); returns its frontend."""
    return elementwise(name, expr, arity, params=params, method=False, inplace=False,
                       flops=flops, grad=grad).frontend


# dropout: the mask (0/1 in the input's dtype) and the 1/(1-p) scale in one pass.
_masked_scale = _private("_masked_scale", "a * b * scale", _B, params=("scale",), flops=2,
                         grad=("_masked_scale(g, b, scale)", None))
# eval-mode batch norm: input * scale + shift with per-channel scale and shift.
_scale_shift = _private("_scale_shift", "a * b + c", _T, flops=2, grad=("g * b", "g * a", "g"))

# losses, each with a fused backward whose own derivative allows double backward.
_squared_error = _private(
    "_squared_error", "(a - b) * (a - b)", _B, flops=2,
    grad=("_squared_error_backward(g, a, b)", "-_squared_error_backward(g, a, b)"))
_squared_error_backward = _private(
    "_squared_error_backward", "a * (b - c) * 2", _T, flops=3,
    grad=("_squared_error_backward(g, b, c)", "g * a * 2", "g * a * -2"))
_abs_error = _private(
    "_abs_error", "abs(a - b)", _B, flops=2,
    grad=("_abs_error_backward(g, a, b)", "-_abs_error_backward(g, a, b)"))
_abs_error_backward = _private(
    "_abs_error_backward", "a * sign(b - c)", _T, flops=2,
    grad=("_abs_error_backward(g, b, c)", "g * 0", "g * 0"))
_smooth_l1 = _private(
    "_smooth_l1", "0.5 * (a - b) * (a - b) / beta if abs(a - b) < beta else "
    "abs(a - b) - 0.5 * beta", _B, params=("beta",), flops=5,
    grad=("_smooth_l1_backward(g, a, b, beta)", "-_smooth_l1_backward(g, a, b, beta)"))
_smooth_l1_backward = _private(
    "_smooth_l1_backward", "a * ((b - c) / beta if abs(b - c) < beta else sign(b - c))", _T,
    params=("beta",), flops=4,
    grad=("_smooth_l1_backward(g, b, c, beta)", "masked(g * a / beta, (b - c).abs() < beta)",
          "masked(g * a / -beta, (b - c).abs() < beta)"))
_huber = _private(
    "_huber", "0.5 * (a - b) * (a - b) if abs(a - b) < delta else "
    "delta * (abs(a - b) - 0.5 * delta)", _B, params=("delta",), flops=5,
    grad=("_huber_backward(g, a, b, delta)", "-_huber_backward(g, a, b, delta)"))
_huber_backward = _private(
    "_huber_backward", "a * ((b - c) if abs(b - c) < delta else delta * sign(b - c))", _T,
    params=("delta",), flops=4,
    grad=("_huber_backward(g, b, c, delta)", "masked(g * a, (b - c).abs() < delta)",
          "masked(-g * a, (b - c).abs() < delta)"))
# binary cross entropy: logs clamped at -100 and the gradient's denominator at 1e-12, as in
# PyTorch, so saturated probabilities give large finite values instead of inf/NaN.
_binary_cross_entropy = _private(
    "_binary_cross_entropy", "(b - 1) * maximum(log1p(-a), -100.0) - "
    "b * maximum(log(a), -100.0)", _B, flops=45,
    grad=("_binary_cross_entropy_backward(g, a, b)",
          "g * ((-a).log1p().clamp(min=-100) - a.log().clamp(min=-100))"))
_binary_cross_entropy_backward = _private(
    "_binary_cross_entropy_backward", "a * (b - c) / maximum((1 - b) * b, 1e-12)", _T, flops=6,
    grad=("_binary_cross_entropy_backward(g, b, c)",
          "g * a * ((1 - b) * b - (b - c) * (1 - b * 2)) / "
          "((1 - b) * b).clamp(min=1e-12).square()",
          "-g * a / ((1 - b) * b).clamp(min=1e-12)"))
# with logits: (1 - t) * x - log_sigmoid(x), where -log_sigmoid(x) = max(-x, 0) +
# log1p(exp(-|x|)) never overflows.
_bce_with_logits = _private(
    "_bce_with_logits", "(1 - b) * a + maximum(-a, 0.0) + log1p(exp(-abs(a)))", _B, flops=45,
    grad=("_bce_with_logits_backward(g, a, b)", "-g * a"))
_bce_with_logits_backward = _private(
    "_bce_with_logits_backward", "a * (sigmoid(b) - c)", _T, flops=25,
    grad=("_bce_with_logits_backward(g, b, c)", "_sigmoid_backward(g * a, b.sigmoid())",
          "-g * a"))
_bce_with_logits_pos_weight = _private(
    "_bce_with_logits_pos_weight", "(1 - b) * a + (1 + (c - 1) * b) * "
    "(maximum(-a, 0.0) + log1p(exp(-abs(a))))", _T, flops=50,
    grad=("g * ((1 + (c - 1) * b) * a.sigmoid() - c * b)",
          "g * ((c - 1) * (-a).softplus() - a)", "g * b * (-a).softplus()"))


# == batch norm ================================================================================
def _bn_layout(x: Tensor) -> tuple[int, int, int]:
    """(N, C, S): batch, channels and spatial size of x (N, C, *)."""
    return x._shape[0], x._shape[1], math.prod(x._shape[2:])


@op(method=False, output_differentiable=(True, False, False),
    grad={"tensors": "_batch_norm_backward(g, tensors[0], tensors[1] if len(tensors) > 1 "
                     "else None, out1, out2, eps)[:len(tensors)]"},
                     cost=memory_cost(8, "input"), jvp="batch_norm_jvp(tensors, tensors_t, outs)")
def _batch_norm(tensors: list[Tensor], running_mean: Tensor | None, running_var: Tensor | None,
                momentum: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """Training-mode batch norm over dims (0, 2, ...) of ``tensors[0]`` with the optional
    affine ``tensors[1:]`` = (weight, bias); updates the running statistics in place.
    Returns (output, batch mean, 1 / sqrt(batch var + eps))."""
    x, weight, bias = _affine_list(tensors)
    c = x._shape[1]
    sdt = _compute_dtype(x._dtype)
    out = empty(x._shape, x._dtype, x.device)
    mean = empty((c,), sdt, x.device)
    rstd = empty((c,), sdt, x.device)
    if not x.numel():
        return out, mean.fill_(math.nan), rstd.fill_(math.nan)
    kernel(x, "_batch_norm")(out, mean, rstd, x.contiguous(), weight, bias, running_mean,
                             running_var, momentum, eps, _bn_layout(x))
    for t in (running_mean, running_var):
        if t is not None:
            t._bump_version()
    return out, mean, rstd


@op(method=False, differentiable=False, cost=memory_cost(10, "input"))
def _batch_norm_backward(grad: Tensor, input: Tensor, weight: Tensor | None, save_mean: Tensor,
                         save_rstd: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_input, grad_weight, grad_bias) of training-mode batch norm in one fused kernel.

    When the result must itself be differentiable, it is computed from differentiable ops
    (recomputing the statistics from ``input``), so the frontend records nothing itself.
    """
    if _needs_graph(grad, input, weight):
        return _batch_norm_backward_composite(grad, input, weight, eps)
    c = input._shape[1]
    gi, gw, gb = _grad_outputs(input, weight, (c,))
    if not input.numel():
        return gi, gw.zero_(), gb.zero_()
    kernel(input, "_batch_norm_backward")(gi, gw, gb, grad.contiguous(), input.contiguous(),
                                          weight, save_mean, save_rstd, _bn_layout(input))
    return gi, gw, gb


def _batch_norm_backward_composite(g: Tensor, x: Tensor, weight: Tensor | None,
                                   eps: float) -> tuple[Tensor, Tensor, Tensor]:
    dims = [0, *range(2, x.dim())]
    shape = (1, x._shape[1]) + (1,) * (x.dim() - 2)
    count = x.numel() // x._shape[1]
    mu = x.mean(dims, keepdim=True)
    d = x - mu
    rstd = ((d * d).mean(dims, keepdim=True) + eps).rsqrt()
    xhat = d * rstd
    gb = g.sum(dims)
    gw = (g * xhat).sum(dims)
    k = rstd if weight is None else rstd * weight.reshape(shape)
    gi = k * (g - gb.reshape(shape) / count - xhat * gw.reshape(shape) / count)
    return gi, gw, gb


# == layer norm and group norm =================================================================
def _norm_outputs(x: Tensor, rows: int) -> tuple[Tensor, Tensor, Tensor]:
    """Fresh (output, per-row mean, per-row rstd); statistics of empty rows are NaN."""
    sdt = _compute_dtype(x._dtype)
    mean = empty((rows,), sdt, x.device)
    rstd = empty((rows,), sdt, x.device)
    if not x.numel():
        mean.fill_(math.nan)
        rstd.fill_(math.nan)
    return empty(x._shape, x._dtype, x.device), mean, rstd


def _ln_layout(x: Tensor, normalized_ndim: int) -> tuple[int, int]:
    """(rows, row length) of layer norm over the last ``normalized_ndim`` dims."""
    lead = x.dim() - normalized_ndim
    return math.prod(x._shape[:lead]), math.prod(x._shape[lead:])


def _gn_layout(x: Tensor, groups: int) -> tuple[int, int]:
    """(rows, row length) of group norm: one row per (sample, group)."""
    return x._shape[0] * groups, x._shape[1] // groups * math.prod(x._shape[2:])


@op(method=False, output_differentiable=(True, False, False),
    grad={"tensors": "_layer_norm_backward(g, tensors[0], tensors[1] if len(tensors) > 1 "
                     "else None, out1, out2, normalized_ndim, eps)[:len(tensors)]"},
                     cost=memory_cost(8, "input"),
    jvp="layer_norm_jvp(tensors, tensors_t, outs, normalized_ndim)")
def _layer_norm(tensors: list[Tensor], normalized_ndim: int, eps: float
                ) -> tuple[Tensor, Tensor, Tensor]:
    """Normalise over the last ``normalized_ndim`` dims of ``tensors[0]``, then apply the
    elementwise affine ``tensors[1:]`` (weight, bias of the normalized shape)."""
    x, weight, bias = _affine_list(tensors)
    layout = _ln_layout(x, normalized_ndim)
    out, mean, rstd = _norm_outputs(x, layout[0])
    if x.numel():
        kernel(x, "_layer_norm")(out, mean, rstd, x.contiguous(), weight, bias, 1, 1, eps,
                                 layout)
    return out, mean, rstd


@op(method=False, differentiable=False, cost=memory_cost(12, "input"))
def _layer_norm_backward(grad: Tensor, input: Tensor, weight: Tensor | None, mean: Tensor,
                         rstd: Tensor, normalized_ndim: int, eps: float
                         ) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_input, grad_weight, grad_bias) of layer norm (the last two in the normalized
    shape); composite when it must be differentiable."""
    if _needs_graph(grad, input, weight):
        return _layer_norm_backward_composite(grad, input, weight, normalized_ndim, eps)
    norm_shape = input._shape[input.dim() - normalized_ndim:]
    gi, gw, gb = _grad_outputs(input, weight, tuple(norm_shape))
    if input.numel():
        kernel(input, "_layer_norm_backward")(gi, gw, gb, grad.contiguous(),
                                              input.contiguous(), weight, mean, rstd, 1, 1,
                                              _ln_layout(input, normalized_ndim))
    else:
        gw.zero_()
        gb.zero_()
    return gi, gw, gb


def _layer_norm_backward_composite(g: Tensor, x: Tensor, weight: Tensor | None,
                                   normalized_ndim: int, eps: float
                                   ) -> tuple[Tensor, Tensor, Tensor]:
    dims = list(range(x.dim() - normalized_ndim, x.dim()))
    lead = list(range(x.dim() - normalized_ndim))
    mu = x.mean(dims, keepdim=True)
    d = x - mu
    rstd = ((d * d).mean(dims, keepdim=True) + eps).rsqrt()
    xhat = d * rstd
    gw = (g * xhat).sum(lead) if lead else g * xhat
    gb = g.sum(lead) if lead else g
    gx = g if weight is None else g * weight
    gi = rstd * (gx - gx.mean(dims, keepdim=True) - xhat * (gx * xhat).mean(dims, keepdim=True))
    return gi, gw, gb


@op(method=False, output_differentiable=(True, False, False),
    grad={"tensors": "_group_norm_backward(g, tensors[0], tensors[1] if len(tensors) > 1 "
                     "else None, out1, out2, num_groups, eps)[:len(tensors)]"},
                     cost=memory_cost(8, "input"),
    jvp="group_norm_jvp(tensors, tensors_t, outs, num_groups)")
def _group_norm(tensors: list[Tensor], num_groups: int, eps: float
                ) -> tuple[Tensor, Tensor, Tensor]:
    """Normalise x (N, C, *) over each group of C / num_groups channels (and all spatial
    positions), then apply the per-channel affine ``tensors[1:]``."""
    x, weight, bias = _affine_list(tensors)
    layout = _gn_layout(x, num_groups)
    out, mean, rstd = _norm_outputs(x, layout[0])
    if x.numel():
        kernel(x, "_group_norm")(out, mean, rstd, x.contiguous(), weight, bias, num_groups,
                                 math.prod(x._shape[2:]), eps, layout)
    return out, mean, rstd


@op(method=False, differentiable=False, cost=memory_cost(12, "input"))
def _group_norm_backward(grad: Tensor, input: Tensor, weight: Tensor | None, mean: Tensor,
                         rstd: Tensor, num_groups: int, eps: float
                         ) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_input, grad_weight, grad_bias) of group norm; composite when it must be
    differentiable."""
    if _needs_graph(grad, input, weight):
        return _group_norm_backward_composite(grad, input, weight, num_groups, eps)
    gi, gw, gb = _grad_outputs(input, weight, (input._shape[1],))
    if not input.numel():
        return gi, gw.zero_(), gb.zero_()
    kernel(input, "_group_norm_backward")(gi, gw, gb, grad.contiguous(), input.contiguous(),
                                          weight, mean, rstd, num_groups,
                                          math.prod(input._shape[2:]),
                                          _gn_layout(input, num_groups))
    return gi, gw, gb


def _group_norm_backward_composite(g: Tensor, x: Tensor, weight: Tensor | None,
                                   num_groups: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    n, c = x._shape[0], x._shape[1]
    grouped = (n, num_groups, -1)
    chan = (1, c) + (1,) * (x.dim() - 2)
    sum_dims = [0, *range(2, x.dim())]
    xg = x.reshape(grouped)
    mu = xg.mean(2, keepdim=True)
    d = xg - mu
    rstd = ((d * d).mean(2, keepdim=True) + eps).rsqrt()
    xhat = (d * rstd).reshape(x._shape)
    gw = (g * xhat).sum(sum_dims)
    gb = g.sum(sum_dims)
    gx = (g if weight is None else g * weight.reshape(chan)).reshape(grouped)
    xh = xhat.reshape(grouped)
    gi = rstd * (gx - gx.mean(2, keepdim=True) - xh * (gx * xh).mean(2, keepdim=True))
    return gi.reshape(x._shape), gw, gb


# == NLL loss ==================================================================================
@op(method=False,
    grad={"input": "_nll_loss_backward(g, input_shape, target, weight, reduction, ignore_index)",
          "weight": "not_implemented('nll_loss with respect to weight')"},
          cost=memory_cost(2, "input"),
    jvp="nll_loss_jvp(input_t, target, weight, reduction, ignore_index)")
def _nll_loss(input: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
              ignore_index: int) -> Tensor:
    """-weight[t] * input[n, t, ...] per item of log-probabilities ``input`` (N, C, ...) and
    class indices ``target`` (N, ...); reduction 0 'none', 1 'mean' (divided by the summed
    weights of the counted targets), 2 'sum'."""
    out = empty(target._shape if reduction == 0 else (), input._dtype, input.device)
    kernel(input, "_nll_loss")(out, input.contiguous(), target.contiguous(), weight, reduction,
                               ignore_index, _nll_layout(input._shape))
    return out


def _nll_layout(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(N, C, S) of log-probabilities (C,), (N, C) or (N, C, d1, ...)."""
    if len(shape) == 1:
        return 1, shape[0], 1
    return shape[0], shape[1], math.prod(shape[2:])


@op(method=False, grad={"grad": "_nll_loss(g, target, weight, reduction, ignore_index)"},
    cost=memory_cost(2, "input"), jvp="auto_linear")
def _nll_loss_backward(grad: Tensor, input_shape: tuple[int, ...], target: Tensor,
                       weight: Tensor | None, reduction: int, ignore_index: int) -> Tensor:
    """The gradient of :func:`_nll_loss`: zeros but -weight[t] * grad at each target (divided
    by the summed weights of the counted targets for 'mean')."""
    gi = empty(tuple(input_shape), grad._dtype, grad.device)
    kernel(grad, "_nll_loss_backward")(gi, grad.contiguous(), target.contiguous(), weight,
                                       reduction, ignore_index, _nll_layout(tuple(input_shape)))
    return gi


# == embedding =================================================================================
def _embedding_indices_in_range(indices: Tensor, rows: int) -> None:
    lo, hi = _minmax(indices)
    if lo < 0 or hi >= rows:
        raise IndexError(f"index out of range in self: index {hi if lo >= 0 else lo} with "
                         f"{rows} embeddings")


@op(method=False, grad={"weight": "_embedding_backward(g, indices, weight_shape[0], "
                                  "padding_idx, scale_grad_by_freq)"}, cost=memory_cost(0, "input"),
    jvp="auto_linear")
def _embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
               scale_grad_by_freq: bool = False) -> Tensor:
    """Rows of ``weight`` (V, D) at integer ``indices``: shape indices.shape + (D,).
    ``padding_idx`` and ``scale_grad_by_freq`` shape the gradient."""
    # CUDA's kernel checks each index into the device's error record (raised at the next
    # synchronising point, as PyTorch's device-side assert): a host check would sync per call.
    if indices.numel() and not device_checks_indices(indices):
        replayable_check(_embedding_indices_in_range, indices, weight._shape[0])
    out = empty(indices._shape + (weight._shape[1],), weight._dtype, weight.device)
    if out.numel():
        kernel(weight, "_embedding")(out, weight.contiguous(), indices.contiguous())
    return out


@op(method=False, grad={"grad": "masked(_embedding(g, indices), (indices != padding_idx)"
                                ".unsqueeze(-1)) if not scale_grad_by_freq else "
                                "not_implemented('embedding double backward with "
                                "scale_grad_by_freq')"}, cost=memory_cost(1, "input"),
    jvp="auto_linear")
def _embedding_backward(grad: Tensor, indices: Tensor, num_weights: int, padding_idx: int,
                        scale_grad_by_freq: bool) -> Tensor:
    """(num_weights, D) zeros plus the rows of ``grad`` added at ``indices`` (the
    ``padding_idx`` row gets none; each row divided by its index's count with
    ``scale_grad_by_freq``)."""
    out = empty((num_weights, grad._shape[-1]), grad._dtype, grad.device)
    kernel(grad, "_embedding_backward")(out, grad.contiguous(), indices.contiguous(),
                                        padding_idx, scale_grad_by_freq)
    return out

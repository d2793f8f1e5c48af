"""Forward (JVP) formulas of the neural-network ops: the normalisations, max pooling, the NLL
loss, the fused softmax backward ops (reached by forward-over-reverse) and the sparse
products and softmax. Written with differentiable ops, like the backward formulas."""

from __future__ import annotations

from typing import Any

from .forward_ad import tangent_of


# -- normalisations: out = xhat * weight + bias, xhat = (x - mean) * rstd per group -------------
def _normalized_jvp(x: Any, x_t: Any, mean: Any, rstd: Any, dims: list[int]) -> tuple[Any, Any]:
    """(xhat, its tangent) for ``x`` normalised over ``dims`` with the saved statistics
    (broadcastable to ``x``): ``d xhat = rstd (t - mean(t) - xhat mean(xhat t))``."""
    mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
    xhat = (x - mean) * rstd
    x_t = x_t.to(x.dtype)
    xhat_t = rstd * (x_t - x_t.mean(dims, keepdim=True)
                     - xhat * (xhat * x_t).mean(dims, keepdim=True))
    return xhat, xhat_t


def _affine_jvp(xhat: Any, xhat_t: Any, tensors: list, tensors_t: list, shape: tuple) -> Any:
    """The tangent of ``xhat * weight + bias`` (weight and bias reshaped to ``shape``)."""
    if len(tensors) == 1:
        return xhat_t
    out_t = xhat_t * tensors[1].reshape(shape) + xhat * tensors_t[1].reshape(shape)
    if len(tensors) > 2:
        out_t = out_t + tensors_t[2].reshape(shape)
    return out_t


def batch_norm_jvp(tensors: list, tensors_t: list, outs: Any) -> tuple:
    """Training-mode batch norm: statistics over every dim but the channels (dim 1)."""
    x = tensors[0]
    chan = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    dims = [0, *range(2, x.dim())]
    xhat, xhat_t = _normalized_jvp(x, tensors_t[0], outs[1].reshape(chan),
                                   outs[2].reshape(chan), dims)
    return _affine_jvp(xhat, xhat_t, tensors, tensors_t, chan), None, None


def layer_norm_jvp(tensors: list, tensors_t: list, outs: Any, normalized_ndim: int) -> tuple:
    """Layer norm: statistics over the last ``normalized_ndim`` dims."""
    x = tensors[0]
    lead = x.dim() - normalized_ndim
    stats = tuple(x.shape[:lead]) + (1,) * normalized_ndim
    xhat, xhat_t = _normalized_jvp(x, tensors_t[0], outs[1].reshape(stats),
                                   outs[2].reshape(stats), list(range(lead, x.dim())))
    return _affine_jvp(xhat, xhat_t, tensors, tensors_t, tuple(x.shape[lead:])), None, None


def group_norm_jvp(tensors: list, tensors_t: list, outs: Any, num_groups: int) -> tuple:
    """Group norm: statistics per (sample, group of channels), over the group's channels and
    every spatial position."""
    x = tensors[0]
    grouped = (x.shape[0], num_groups, -1)
    stats = (x.shape[0], num_groups, 1)
    xhat, xhat_t = _normalized_jvp(x.reshape(grouped), tensors_t[0].reshape(grouped),
                                   outs[1].reshape(stats), outs[2].reshape(stats), [2])
    chan = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    return _affine_jvp(xhat.reshape(x.shape), xhat_t.reshape(x.shape), tensors, tensors_t,
                       chan), None, None


# -- pooling and losses -------------------------------------------------------------------------
def max_pool_jvp(input_t: Any, indices: Any) -> Any:
    """Max pooling (plain and adaptive): the tangent at each window's maximum, whose flat
    position in its (H, W) plane ``indices`` holds."""
    return input_t.flatten(-2).gather(-1, indices.flatten(-2)).view(indices.shape)


def nll_loss_jvp(input_t: Any, target: Any, weight: Any, reduction: int,
                 ignore_index: int) -> Any:
    """The loss is linear in the log-probabilities; like its gradient, the derivative with
    respect to the class weights is not implemented."""
    from gputensor.kernels.registry import OPS
    if weight is not None and tangent_of(weight) is not None:
        raise RuntimeError("the derivative for 'nll_loss with respect to weight' is not "
                           "implemented")
    return OPS["_nll_loss"].frontend(input_t, target, weight, reduction, ignore_index)


# -- the fused softmax backward ops: y = o (g - sum(g o)) and y = g - exp(o) sum(g) -------------
def softmax_backward_jvp(grad: Any, grad_t: Any, output: Any, output_t: Any, dim: int) -> Any:
    from gputensor.kernels.registry import OPS
    return (OPS["_softmax_backward"].frontend(grad_t, output, dim)
            + output_t * (grad - (grad * output).sum(dim, keepdim=True))
            - output * (grad * output_t).sum(dim, keepdim=True))


def log_softmax_backward_jvp(grad: Any, grad_t: Any, output: Any, output_t: Any,
                             dim: int) -> Any:
    from gputensor.kernels.registry import OPS
    return (OPS["_log_softmax_backward"].frontend(grad_t, output, dim)
            - output.exp() * output_t * grad.sum(dim, keepdim=True))

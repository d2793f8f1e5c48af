"""Fused CPU optimizer kernels: one pass per parameter updates it and its state together.

Each op-by-op update in gputensor/optim costs a few microseconds of Python per tensor op, and
Adam needs about ten ops per parameter. These kernels do the whole update rule in one Numba loop
over contiguous float32/float64 arrays, in the same operation order (and the same rounding to
the parameter's dtype after every operation) as PyTorch's single-tensor reference rules, so
they agree with the op-by-op path to rounding.

Kernels take lists of tensors, like PyTorch's ``_fused_adam_``, so a CUDA backend can register
a multi-tensor launch under the same names. The caller (gputensor/optim) guarantees that every
tensor is contiguous, on the CPU, and of its parameter's (real) dtype.

The scalar hyper-parameters reach each Numba loop packed in one small array of the parameter's
dtype: PyTorch rounds every Python-float scalar to the tensor's dtype before using it, and one
array argument costs Numba's dispatcher far less than ten scalar ones (which matters for the
many small tensors of a typical model).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit, prange

from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

# Above this many elements the loop runs on all cores (as the elementwise kernels do).
PARALLEL_THRESHOLD = 1 << 17


def _flat(t: Tensor) -> np.ndarray:
    """The contiguous host view of ``t`` as 1-D (no copy)."""
    arr = t._np if t._np_buf is t._storage._buf else t._host
    return arr.reshape(-1)


def _bump(*tensors: Tensor) -> None:
    for t in tensors:
        t._storage._version += 1


# -- Adam / AdamW --------------------------------------------------------------------------------
# c = [weight_decay (coupled, else 0), 1 - lr * weight_decay (decoupled, else 1), 1 - beta1,
#      beta1 (= 1 - (1 - beta1) in the dtype), beta2, 1 - beta2, sqrt(bias_correction2), eps,
#      -step_size]
@njit(cache=True, error_model="numpy")
def _adam_element(p, g, m, v, mx, c, neg: bool, amsgrad: bool):
    """One element of PyTorch's Adam rule; returns the new (param, exp_avg, exp_avg_sq, max)."""
    if neg:
        g = -g
    if c[0] != 0:                   # grad.add(param, alpha=weight_decay)
        g = g + c[0] * p
    p = p * c[1]                    # param.mul_(1 - lr * weight_decay); 1 when not decoupled
    w = c[2]
    if abs(w) < 0.5:                # exp_avg.lerp_(grad, 1 - beta1), PyTorch's two forms
        m = m + w * (g - m)
    else:
        m = g - (g - m) * c[3]
    v = v * c[4] + c[5] * g * g     # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
    s = v
    if amsgrad:
        if v > mx or v != v:        # torch.maximum propagates NaN
            mx = v
        s = mx
    denom = np.sqrt(s) / c[6] + c[7]
    p = p + c[8] * m / denom        # param.addcdiv_(exp_avg, denom, value=-step_size)
    return p, m, v, mx


@njit(cache=True, error_model="numpy")
def _adam_serial(p, g, m, v, mx, c, neg, amsgrad):
    for i in range(p.shape[0]):
        pn, mn, vn, mxn = _adam_element(p[i], g[i], m[i], v[i], mx[i], c, neg, amsgrad)
        p[i], m[i], v[i] = pn, mn, vn
        if amsgrad:  # without amsgrad mx is exp_avg_sq itself, already written
            mx[i] = mxn


@njit(cache=True, parallel=True, error_model="numpy")
def _adam_parallel(p, g, m, v, mx, c, neg, amsgrad):
    for i in prange(p.shape[0]):
        pn, mn, vn, mxn = _adam_element(p[i], g[i], m[i], v[i], mx[i], c, neg, amsgrad)
        p[i], m[i], v[i] = pn, mn, vn
        if amsgrad:
            mx[i] = mxn


@CPU.register("_fused_adam")
def fused_adam(params: Sequence[Tensor], grads: Sequence[Tensor], exp_avgs: Sequence[Tensor],
               exp_avg_sqs: Sequence[Tensor], max_exp_avg_sqs: Sequence[Tensor],
               steps: Sequence[float], *, lr: float, beta1: float, beta2: float,
               weight_decay: float, eps: float, amsgrad: bool, maximize: bool,
               decoupled_weight_decay: bool) -> None:
    """Adam/AdamW over parameter lists; ``steps`` are the already-incremented step counts."""
    decay = 1 - lr * weight_decay if (weight_decay != 0 and decoupled_weight_decay) else 1.0
    coupled = weight_decay if (weight_decay != 0 and not decoupled_weight_decay) else 0.0
    consts: dict = {}
    for i, p in enumerate(params):
        ph = _flat(p)
        step = steps[i]
        c = consts.get((ph.dtype, step))
        if c is None:  # Python-float arithmetic first, exactly as PyTorch's rule does it
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            c = np.array([coupled, decay, 1 - beta1, 0, beta2, 1 - beta2,
                          bias_correction2_sqrt, eps, -step_size], ph.dtype)
            c[3] = 1 - c[2]  # lerp's 1 - weight, computed in the dtype as PyTorch does
            consts[ph.dtype, step] = c
        v = _flat(exp_avg_sqs[i])
        mx = _flat(max_exp_avg_sqs[i]) if amsgrad else v
        fn = _adam_parallel if ph.shape[0] >= PARALLEL_THRESHOLD else _adam_serial
        fn(ph, _flat(grads[i]), _flat(exp_avgs[i]), v, mx, c, maximize, amsgrad)
        _bump(p, exp_avgs[i], exp_avg_sqs[i])
        if amsgrad:
            _bump(max_exp_avg_sqs[i])


# -- SGD ---------------------------------------------------------------------------------------
# c = [weight_decay, momentum, 1 - dampening, -lr]
@njit(cache=True, error_model="numpy")
def _sgd_element(p, g, b, c, neg: bool, has_momentum: bool, first: bool, nesterov: bool):
    """One element of PyTorch's SGD rule; returns the new (param, momentum_buffer)."""
    if neg:
        g = -g
    if c[0] != 0:                   # grad.add(param, alpha=weight_decay)
        g = g + c[0] * p
    if has_momentum:
        if first:
            b = g                   # buf = grad.clone()
        else:
            b = b * c[1] + c[2] * g  # buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        g = g + c[1] * b if nesterov else b
    return p + c[3] * g, b          # param.add_(grad, alpha=-lr)


@njit(cache=True, error_model="numpy")
def _sgd_serial(p, g, b, c, neg, has_momentum, first, nesterov):
    for i in range(p.shape[0]):
        pn, bn = _sgd_element(p[i], g[i], b[i], c, neg, has_momentum, first, nesterov)
        p[i] = pn
        if has_momentum:
            b[i] = bn


@njit(cache=True, parallel=True, error_model="numpy")
def _sgd_parallel(p, g, b, c, neg, has_momentum, first, nesterov):
    for i in prange(p.shape[0]):
        pn, bn = _sgd_element(p[i], g[i], b[i], c, neg, has_momentum, first, nesterov)
        p[i] = pn
        if has_momentum:
            b[i] = bn


@CPU.register("_fused_sgd")
def fused_sgd(params: Sequence[Tensor], grads: Sequence[Tensor],
              momentum_buffers: Sequence[Tensor], first_steps: Sequence[bool], *, lr: float,
              momentum: float, dampening: float, weight_decay: float, nesterov: bool,
              maximize: bool) -> None:
    """SGD over parameter lists. With momentum, ``first_steps[i]`` says buffer i is fresh (its
    contents are ignored and it is set to the gradient, as PyTorch's clone does)."""
    has_momentum = momentum != 0
    consts: dict = {}
    for i, p in enumerate(params):
        ph = _flat(p)
        c = consts.get(ph.dtype)
        if c is None:
            c = consts[ph.dtype] = np.array([weight_decay, momentum, 1 - dampening, -lr],
                                            ph.dtype)
        # Without momentum the kernels read b (here the param itself) but never write it.
        b = _flat(momentum_buffers[i]) if has_momentum else ph
        fn = _sgd_parallel if ph.shape[0] >= PARALLEL_THRESHOLD else _sgd_serial
        fn(ph, _flat(grads[i]), b, c, maximize, has_momentum,
           bool(first_steps[i]) if has_momentum else False, nesterov)
        _bump(p)
        if has_momentum:
            _bump(momentum_buffers[i])


# -- Adagrad -----------------------------------------------------------------------------------
# c = [weight_decay, eps, -clr]
@njit(cache=True, error_model="numpy")
def _adagrad_element(p, g, s, c, neg: bool):
    """One element of PyTorch's Adagrad rule; returns the new (param, sum)."""
    if neg:
        g = -g
    if c[0] != 0:                   # grad.add(param, alpha=weight_decay)
        g = g + c[0] * p
    s = s + g * g                   # state_sum.addcmul_(grad, grad, value=1)
    return p + c[2] * g / (np.sqrt(s) + c[1]), s  # param.addcdiv_(grad, std, value=-clr)


@njit(cache=True, error_model="numpy")
def _adagrad_serial(p, g, s, c, neg):
    for i in range(p.shape[0]):
        p[i], s[i] = _adagrad_element(p[i], g[i], s[i], c, neg)


@njit(cache=True, parallel=True, error_model="numpy")
def _adagrad_parallel(p, g, s, c, neg):
    for i in prange(p.shape[0]):
        p[i], s[i] = _adagrad_element(p[i], g[i], s[i], c, neg)


@CPU.register("_fused_adagrad")
def fused_adagrad(params: Sequence[Tensor], grads: Sequence[Tensor],
                  state_sums: Sequence[Tensor], steps: Sequence[float], *, lr: float,
                  lr_decay: float, weight_decay: float, eps: float, maximize: bool) -> None:
    """Adagrad over parameter lists; ``steps`` are the already-incremented step counts."""
    consts: dict = {}
    for i, p in enumerate(params):
        ph = _flat(p)
        step = steps[i]
        c = consts.get((ph.dtype, step))
        if c is None:
            clr = lr / (1 + (step - 1) * lr_decay)
            c = consts[ph.dtype, step] = np.array([weight_decay, eps, -clr], ph.dtype)
        fn = _adagrad_parallel if ph.shape[0] >= PARALLEL_THRESHOLD else _adagrad_serial
        fn(ph, _flat(grads[i]), _flat(state_sums[i]), c, maximize)
        _bump(p, state_sums[i])

"""CUDA backend fused optimizer steps (kernels/cuda/optim.cu), registered under the CPU
kernels' names and signatures (kernels/cpu/optim.py): ``_fused_adam``, ``_fused_sgd``,
``_fused_adagrad``.

One launch per parameter tensor, except Adam/AdamW: the parameters of one dtype that share
a step count (all of them, in training) update in ONE launch (a lone tensor too), the tensors
described by a table of addresses in device memory (each tensor's launch costs the host ~20 us
on an H200, and a small model's optimizer step is dozens of them). The hyper-parameters are
computed exactly as the CPU kernels compute them (Python float arithmetic, then rounded to the
parameter's dtype) and passed as scalars of that dtype, so the two backends give the same bits.
The caller (gputensor/optim) guarantees contiguous float32 or float64 tensors of one dtype on
one device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CUDA

from ..device import CudaSource, DeviceArray, constant_array, grid_for, launch, ptr, runtime

SRC = CudaSource("optim.cu")
_V = [{"s": "f32", "T": "float"}, {"s": "f64", "T": "double"}]
SRC.instantiate(
    "optim_sgd_{s}",
    "{T}* p, const {T}* g, {T}* b, {T} c0, {T} c1, {T} c2, {T} c3, int neg, int has_momentum, "
    "int first, int nesterov, long long n",
    "gtoptim::sgd<{T}>(p, g, b, c0, c1, c2, c3, neg, has_momentum, first, nesterov, n)", _V)
SRC.instantiate(
    "optim_adagrad_{s}",
    "{T}* p, const {T}* g, {T}* sum, {T} c0, {T} c1, {T} c2, int neg, long long n",
    "gtoptim::adagrad<{T}>(p, g, sum, c0, c1, c2, neg, n)", _V)

SRC.instantiate(
    "optim_adam_multi_{s}",
    "const long long* table, {T} c0, {T} c1, {T} c2, {T} c3, {T} c4, {T} c5, {T} c6, {T} c7, "
    "{T} c8, int neg, int amsgrad",
    "gtoptim::adam_multi<{T}>(table, c0, c1, c2, c3, c4, c5, c6, c7, c8, neg, amsgrad)", _V)

_KIND = {D.float32: "f32", D.float64: "f64"}
MAX_TENSORS = 65535  # gridDim.y: tensors per multi-tensor launch


def _kind(p: Tensor, op: str) -> str:
    kind = _KIND.get(p._dtype)
    if kind is None:
        raise TypeError(f"'{op}' on CUDA updates float32/float64 parameters, got {p._dtype}")
    return kind


def _bump(*tensors: Tensor) -> None:
    for t in tensors:
        t._storage._version += 1


@CUDA.register("_fused_adam")
def fused_adam(params: Sequence[Tensor], grads: Sequence[Tensor], exp_avgs: Sequence[Tensor],
               exp_avg_sqs: Sequence[Tensor], max_exp_avg_sqs: Sequence[Tensor],
               steps: Sequence[float], *, lr: float, beta1: float, beta2: float,
               weight_decay: float, eps: float, amsgrad: bool, maximize: bool,
               decoupled_weight_decay: bool) -> None:
    """Adam/AdamW over parameter lists; ``steps`` are the already-incremented step counts."""
    decay = 1 - lr * weight_decay if (weight_decay != 0 and decoupled_weight_decay) else 1.0
    coupled = weight_decay if (weight_decay != 0 and not decoupled_weight_decay) else 0.0
    consts: dict = {}
    groups: dict[tuple[str, float], list[int]] = {}  # (dtype, step) -> the tensors' indices
    for i, p in enumerate(params):
        kind = _kind(p, "_fused_adam")
        step = steps[i]
        if (kind, step) not in consts:  # Python-float arithmetic first, as the CPU kernel
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            c = np.array([coupled, decay, 1 - beta1, 0, beta2, 1 - beta2,
                          bias_correction2_sqrt, eps, -step_size], p._dtype.np_dtype)
            c[3] = 1 - c[2]  # lerp's 1 - weight, computed in the dtype
            consts[kind, step] = c
        if p.numel():
            groups.setdefault((kind, step), []).append(i)
    flags = [np.int32(maximize), np.int32(amsgrad)]
    for (kind, step), members in groups.items():
        c = consts[kind, step]
        for start in range(0, len(members), MAX_TENSORS):
            chunk = members[start:start + MAX_TENSORS]
            launch(SRC, f"optim_adam_multi_{kind}",
                   (grid_for(max(params[i].numel() for i in chunk)), len(chunk)), 256,
                   [_adam_table(chunk, params, grads, exp_avgs, exp_avg_sqs,
                                max_exp_avg_sqs if amsgrad else None), *c, *flags])
    for i, p in enumerate(params):
        _bump(p, exp_avgs[i], exp_avg_sqs[i])
        if amsgrad:
            _bump(max_exp_avg_sqs[i])


def _adam_table(members: list[int], params: Sequence[Tensor], grads: Sequence[Tensor],
                exp_avgs: Sequence[Tensor], exp_avg_sqs: Sequence[Tensor],
                max_exp_avg_sqs: Sequence[Tensor] | None) -> DeviceArray:
    """adam_multi's table: per tensor the addresses of p, g, m, v, mx (0: none) as the
    kernel dereferences them, then its element count."""
    rt = runtime()
    values: list[int] = []
    for i in members:
        mx = max_exp_avg_sqs[i] if max_exp_avg_sqs is not None else None
        addresses = rt.kernel_addresses([ptr(t) if t is not None else 0 for t in
                                         (params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], mx)])
        values += [*addresses, params[i].numel()]
    return constant_array(values)


@CUDA.register("_fused_sgd")
def fused_sgd(params: Sequence[Tensor], grads: Sequence[Tensor],
              momentum_buffers: Sequence[Tensor], first_steps: Sequence[bool], *, lr: float,
              momentum: float, dampening: float, weight_decay: float, nesterov: bool,
              maximize: bool) -> None:
    """SGD over parameter lists. With momentum, ``first_steps[i]`` says buffer i is fresh (set
    to the gradient, as PyTorch's clone does)."""
    has_momentum = momentum != 0
    consts: dict = {}
    for i, p in enumerate(params):
        kind = _kind(p, "_fused_sgd")
        c = consts.get(kind)
        if c is None:
            c = consts[kind] = np.array([weight_decay, momentum, 1 - dampening, -lr],
                                        p._dtype.np_dtype)
        n = p.numel()
        if n:
            b = momentum_buffers[i] if has_momentum else None
            first = bool(first_steps[i]) if has_momentum else False
            launch(SRC, f"optim_sgd_{kind}", grid_for(n), 256,
                   [p, grads[i], b, *c, np.int32(maximize), np.int32(has_momentum),
                    np.int32(first), np.int32(nesterov), np.int64(n)])
        _bump(p)
        if has_momentum:
            _bump(momentum_buffers[i])


@CUDA.register("_fused_adagrad")
def fused_adagrad(params: Sequence[Tensor], grads: Sequence[Tensor],
                  state_sums: Sequence[Tensor], steps: Sequence[float], *, lr: float,
                  lr_decay: float, weight_decay: float, eps: float, maximize: bool) -> None:
    """Adagrad over parameter lists; ``steps`` are the already-incremented step counts."""
    consts: dict = {}
    for i, p in enumerate(params):
        kind = _kind(p, "_fused_adagrad")
        step = steps[i]
        c = consts.get((kind, step))
        if c is None:
            clr = lr / (1 + (step - 1) * lr_decay)
            c = consts[kind, step] = np.array([weight_decay, eps, -clr], p._dtype.np_dtype)
        n = p.numel()
        if n:
            launch(SRC, f"optim_adagrad_{kind}", grid_for(n), 256,
                   [p, grads[i], state_sums[i], *c, np.int32(maximize), np.int64(n)])
        _bump(p, state_sums[i])

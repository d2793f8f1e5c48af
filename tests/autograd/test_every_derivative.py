"""Every op declared with a derivative has a gradcheck case, found from the registry.

``SAMPLES`` maps each op name whose ``OpDef.derivative`` is a ``Derivative`` to a function of
the device returning ``(fn, inputs, check)``: tiny float64 leaves, and ``check`` "grad"
(gradcheck) or "gradgrad" (gradgradcheck, for the private backward ops, which only run as the
gradient of another op). Private ops are reached through the public API that records them.
The test asserts both that the check passes and that the op's own backward node ran, so a
sample that silently stops reaching its op fails; a new derivative without a sample (or a
sample for an op that lost its derivative) fails ``test_every_derivative_has_a_sample``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F
from gputensor.autograd import derivatives, gradcheck, gradgradcheck
from gputensor.kernels.registry import OPS

from . import samples_fft, samples_linalg, samples_sampling, samples_special

Sample = tuple[Callable[..., Any], tuple[Any, ...], str]
SAMPLES: dict[str, Callable[[str], Sample]] = {}


# -- inputs ---------------------------------------------------------------------------------------
def _leaf(device: str, values: Any) -> gt.Tensor:
    return gt.tensor(np.asarray(values, dtype=np.float64), device=device, requires_grad=True)


def _uniform(device: str, *shape: int, lo: float = -0.9, hi: float = 0.9,
             seed: int = 0) -> gt.Tensor:
    """Distinct values (no ties for max/sort/pooling), inside the domain of asin/acos."""
    return _leaf(device, np.random.default_rng(seed).uniform(lo, hi, shape))


def _positive(device: str, *shape: int, seed: int = 0) -> gt.Tensor:
    return _uniform(device, *shape, lo=0.3, hi=1.5, seed=seed)


def _signed(device: str, *shape: int, seed: int = 0) -> gt.Tensor:
    """Magnitudes in [0.2, 1), half of them negative: away from the kinks at 0 (abs, relu,
    ...) and on both sides of them."""
    rng = np.random.default_rng(seed)
    signs = rng.permutation(np.arange(int(np.prod(shape))) % 2 * 2.0 - 1).reshape(shape)
    return _leaf(device, rng.uniform(0.2, 1.0, shape) * signs)


def _fractional(device: str, *shape: int, seed: int = 0) -> gt.Tensor:
    """Integers plus fractions in [0.1, 0.4]: away from the jumps of floor/ceil/round/frac."""
    rng = np.random.default_rng(seed)
    return _leaf(device, rng.integers(-2, 3, shape) + rng.uniform(0.1, 0.4, shape))


def _quotient(device: str) -> tuple[gt.Tensor, gt.Tensor]:
    """a, b with a / b at least 0.1 away from an integer (the jumps of floor/fmod/remainder)."""
    b = np.array([1.3, -0.9, 1.1, -1.6])
    return _leaf(device, np.array([1.4, -0.3, 2.6, 0.7]) * b), _leaf(device, b)


def _ints(device: str, values: Any) -> gt.Tensor:
    return gt.tensor(values, dtype=gt.int64, device=device)


def _mask(device: str, values: Any) -> gt.Tensor:
    return gt.tensor(values, dtype=gt.bool, device=device)


def _complex(x: gt.Tensor, y: gt.Tensor) -> gt.Tensor:
    # gradcheck compares real Jacobians: complex ops run between real inputs and outputs.
    return x + y * 1j


def _real(z: gt.Tensor) -> gt.Tensor:
    # Re(w z) with a w off both axes reads both parts of z.
    return (z * (0.3 + 0.8j)).to(gt.float64)


def _sample(*names: str, gradgrad: tuple[str, ...] = ()) -> Callable:
    """Register ``make(device) -> (fn, inputs)`` as the gradcheck sample of ``names`` and the
    gradgradcheck sample of the backward ops in ``gradgrad``."""
    def register(make: Callable[[str], tuple]) -> Callable[[str], tuple]:
        for name in names:
            SAMPLES[name] = lambda device: (*make(device), "grad")
        for name in gradgrad:
            SAMPLES[name] = lambda device: (*make(device), "gradgrad")
        return make
    return register


# -- elementwise ----------------------------------------------------------------------------------
# op name -> (function, input maker), each a gradcheck of one (2, 3) input; the fused backward
# ops of the activations get a gradgradcheck of the same sample.
UNARY: dict[str, tuple[Callable, Callable]] = {
    "abs": (gt.abs, _signed), "acos": (gt.acos, _uniform), "asin": (gt.asin, _uniform),
    "atan": (gt.atan, _uniform), "ceil": (gt.ceil, _fractional), "cos": (gt.cos, _uniform),
    "cosh": (gt.cosh, _uniform), "erf": (gt.erf, _uniform), "exp": (gt.exp, _uniform),
    "exp2": (gt.exp2, _uniform), "expm1": (gt.expm1, _uniform),
    "floor": (gt.floor, _fractional), "frac": (gt.frac, _fractional),
    "log": (gt.log, _positive), "log10": (gt.log10, _positive),
    "log1p": (gt.log1p, _uniform), "log2": (gt.log2, _positive),
    "nan_to_num": (gt.nan_to_num, _uniform), "neg": (gt.neg, _uniform),
    "reciprocal": (gt.reciprocal, _signed), "round": (gt.round, _fractional),
    "rsqrt": (gt.rsqrt, _positive), "sign": (gt.sign, _signed), "sin": (gt.sin, _uniform),
    "sinh": (gt.sinh, _uniform), "sqrt": (gt.sqrt, _positive), "tan": (gt.tan, _uniform),
    "asinh": (gt.asinh, _signed), "atanh": (gt.atanh, _uniform),
    "acosh": (gt.acosh, partial(_uniform, lo=1.2, hi=2.5)),
    "trunc": (gt.trunc, _fractional), "_square": (gt.square, _uniform),
    "relu": (F.relu, _signed), "sigmoid": (gt.sigmoid, _uniform),
    "tanh": (gt.tanh, _uniform), "silu": (F.silu, _uniform),
    # the positive inputs (all > 0.6) take the linear branch above the threshold
    "softplus": (lambda x: F.softplus(x, beta=2.0, threshold=1.0), _signed),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), _signed),
    "elu": (lambda x: F.elu(x, alpha=1.3), _signed),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.5),   # both sides of both kinks
                 lambda d, *_: _leaf(d, [[-0.8, -0.3, 0.1], [0.7, 0.4, -0.6]])),
    "gelu": (lambda x: (F.gelu(x), F.gelu(x, approximate="tanh")), _uniform),
}
ACTIVATION_BACKWARD = {"_relu_backward": "relu", "_sigmoid_backward": "sigmoid",
                       "_tanh_backward": "tanh", "_silu_backward": "silu",
                       "_softplus_backward": "softplus", "_leaky_relu_backward": "leaky_relu",
                       "_elu_backward": "elu", "_hardtanh_backward": "hardtanh",
                       "_gelu_backward": "gelu"}


def _unary(name: str, check: str) -> Callable[[str], Sample]:
    fn, make = UNARY[name]
    return lambda device: (fn, (make(device, 2, 3),), check)


SAMPLES.update({name: _unary(name, "grad") for name in UNARY})
SAMPLES.update({name: _unary(op, "gradgrad") for name, op in ACTIVATION_BACKWARD.items()})


@_sample("sgn")
def _sgn(device: str) -> tuple:
    # complex: the real sgn has a zero derivative
    return (lambda x, y: _real(gt.sgn(_complex(x, y))),
            (_signed(device, 3), _signed(device, 3, seed=1)))


@_sample("_conj")
def _conj(device: str) -> tuple:
    # gt.conj of a real tensor is the tensor itself: only complex inputs reach _conj
    return lambda x, y: _real(gt.conj(_complex(x, y))), (_uniform(device, 3), _uniform(device, 3))


@_sample("add", "sub", "mul", "true_divide", "atan2", "maximum", "minimum")
def _binary(device: str) -> tuple:
    return (lambda a, b: (gt.add(a, b, alpha=2.0), gt.sub(a, b, alpha=0.5), a * b, a / b,
                          gt.atan2(a, b), gt.maximum(a, b), gt.minimum(a, b)),
            (_signed(device, 4), _signed(device, 4, seed=1)))


@_sample("fmax", "fmin", "hypot", "copysign", "logaddexp", "xlogy")
def _binary_math(device: str) -> tuple:
    # distinct operands (no ties for fmax/fmin), nonzero signs for copysign, b > 0 for xlogy
    return (lambda a, b: (gt.fmax(a, b), gt.fmin(a, b), gt.hypot(a, b), gt.copysign(a, b),
                          gt.logaddexp(a, b), gt.xlogy(a, b.abs())),
            (_signed(device, 4), _signed(device, 4, seed=1)))


@_sample("angle")
def _angle(device: str) -> tuple:
    # complex inputs off the origin (atan2 of the parts); a real input's angle is piecewise
    # constant (0 or pi), its gradient zero
    return (lambda x, y, r: (gt.angle(_complex(x, y)), gt.angle(r)),
            (_signed(device, 4), _signed(device, 4, seed=1), _signed(device, 4, seed=2)))


@_sample("nextafter")
def _nextafter(device: str) -> tuple:
    # PyTorch's derivative (derivatives.yaml): the identity in input where input != other, zero
    # in other. The finite differences agree away from input == other (which these operands,
    # 0.1 or more apart, never reach): nextafter(x, y) is x moved by one ulp towards y.
    return gt.nextafter, (_leaf(device, [0.5, -0.3, 0.2, 0.9]),
                          _leaf(device, [0.1, 0.4, -0.6, 1.3]))


@_sample("frexp")
def _frexp(device: str) -> tuple:
    # the mantissa is x / 2**e, e piecewise constant: magnitudes away from powers of two
    return lambda x: gt.frexp(x).mantissa, (_leaf(device, [0.3, -0.7, 1.4, -2.9, 5.5]),)


@_sample("fill")
def _fill(device: str) -> tuple:
    # a 0-dim tensor value: its gradient is the sum of the output's; input's is zero
    return gt.fill, (_uniform(device, 2, 3), _leaf(device, 0.7))


@_sample("_ldexp_int")
def _ldexp_integer_exponents(device: str) -> tuple:
    # a float input with integer exponents takes ldexp's exact path
    return (lambda a: gt.ldexp(a, _ints(device, [3, -2, 0, 5])), (_signed(device, 4),))


@_sample("addcmul", "addcdiv")
def _addc(device: str) -> tuple:
    return (lambda a, b, c: (gt.addcmul(a, b, c, value=0.5), gt.addcdiv(a, b, c, value=-2.0)),
            (_uniform(device, 4), _uniform(device, 4, seed=1), _signed(device, 4, seed=2)))


@_sample("sinc", "deg2rad", "rad2deg")
def _unary_math(device: str) -> tuple:
    return (lambda x: (gt.sinc(x), gt.deg2rad(x), gt.rad2deg(x)), (_signed(device, 5),))


@_sample("_div_floor", "_div_trunc", "fmod", "remainder")
def _rounding_division(device: str) -> tuple:
    return (lambda a, b: (gt.div(a, b, rounding_mode="floor") * a,
                          gt.div(a, b, rounding_mode="trunc") * b, gt.fmod(a, b),
                          gt.remainder(a, b)), _quotient(device))


@_sample("pow")
def _pow(device: str) -> tuple:
    # complex with a Python exponent or base: the private twins (_pow_scalar, ...) of pow
    return (lambda a, b: (gt.pow(a, b), a ** 2.5, 1.5 ** b, _real(_complex(a, b) ** 2),
                          _real(_complex(a, b) ** 0.5), _real(1.5 ** _complex(b, a))),
            (_positive(device, 4), _uniform(device, 4, seed=1)))


@_sample("_clamp")
def _clamp(device: str) -> tuple:
    # tensor bounds, so all three operands have gradients; x clamps on both sides
    return (gt.clamp, (_leaf(device, [-1.0, -0.2, 0.1, 0.9]),
                       _leaf(device, [-0.5, -0.4, -0.6, -0.5]),
                       _leaf(device, [0.5, 0.6, 0.4, 0.5])))


@_sample("_lerp")
def _lerp(device: str) -> tuple:
    return (gt.lerp, (_uniform(device, 4), _uniform(device, 4, seed=1),
                      _leaf(device, [0.2, 0.7, 0.4, 0.9])))


@_sample("_where")
def _where(device: str) -> tuple:
    cond = _mask(device, [True, False, False, True])
    return lambda x, y: gt.where(cond, x, y), (_uniform(device, 4), _uniform(device, 4, seed=1))


@_sample("_copy")
def _copy(device: str) -> tuple:
    # No public function records _copy (fill_ and the integer floor/ceil run its kernel
    # directly), so its frontend is called from the registry.
    return OPS["_copy"].frontend, (_uniform(device, 4),)


@_sample("_to_copy")
def _to_copy(device: str) -> tuple:
    return lambda x: x.to(gt.float64, copy=True) * x, (_uniform(device, 4),)


@_sample("clone")
def _clone(device: str) -> tuple:
    return lambda x: gt.clone(x) * x, (_uniform(device, 4),)


# -- nn: losses, normalization, dropout, embedding ------------------------------------------------
@_sample("_squared_error", gradgrad=("_squared_error_backward",))
def _mse(device: str) -> tuple:
    return F.mse_loss, (_uniform(device, 4), _uniform(device, 4, seed=1))


@_sample("_abs_error", gradgrad=("_abs_error_backward",))
def _l1(device: str) -> tuple:
    # |input - target| away from 0
    return F.l1_loss, (_leaf(device, [0.5, -0.3, 0.2, 0.9]), _leaf(device, [0.1, 0.4, -0.6, 0.2]))


def _diff_pair(device: str) -> tuple[gt.Tensor, gt.Tensor]:
    """input - target = [0.2, -0.3, 0.8, -0.9]: both sides of beta/delta 0.5, away from it."""
    t = np.array([0.1, 0.4, -0.6, 0.2])
    return _leaf(device, t + [0.2, -0.3, 0.8, -0.9]), _leaf(device, t)


@_sample("_smooth_l1", gradgrad=("_smooth_l1_backward",))
def _smooth_l1(device: str) -> tuple:
    return lambda x, t: F.smooth_l1_loss(x, t, beta=0.5), _diff_pair(device)


@_sample("_huber", gradgrad=("_huber_backward",))
def _huber(device: str) -> tuple:
    return lambda x, t: F.huber_loss(x, t, delta=0.5), _diff_pair(device)


@_sample("_binary_cross_entropy", gradgrad=("_binary_cross_entropy_backward",))
def _bce(device: str) -> tuple:
    return (F.binary_cross_entropy,
            (_uniform(device, 4, lo=0.2, hi=0.8), _uniform(device, 4, lo=0.1, hi=0.9, seed=1)))


@_sample("_bce_with_logits", gradgrad=("_bce_with_logits_backward",))
def _bce_logits(device: str) -> tuple:
    return (F.binary_cross_entropy_with_logits,
            (_uniform(device, 4), _uniform(device, 4, lo=0.1, hi=0.9, seed=1)))


@_sample("_bce_with_logits_pos_weight")
def _bce_pos_weight(device: str) -> tuple:
    return (lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, pos_weight=w),
            (_uniform(device, 2, 2), _uniform(device, 2, 2, lo=0.1, hi=0.9, seed=1),
             _positive(device, 2, seed=2)))


@_sample("_nll_loss", gradgrad=("_nll_loss_backward",))
def _nll(device: str) -> tuple:
    target = _ints(device, [0, 3, 1])
    return lambda x: F.nll_loss(x, target), (_uniform(device, 3, 4),)


@_sample("_batch_norm")
def _batch_norm(device: str) -> tuple:
    return (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
            (_uniform(device, 3, 2), _positive(device, 2, seed=1), _uniform(device, 2, seed=2)))


@_sample("_scale_shift")
def _batch_norm_eval(device: str) -> tuple:
    # eval mode: the running statistics folded into one scale and shift per channel
    mean = gt.tensor([0.1, -0.2], dtype=gt.float64, device=device)
    var = gt.tensor([0.5, 1.5], dtype=gt.float64, device=device)
    return (lambda x, w, b: F.batch_norm(x, mean, var, w, b, training=False),
            (_uniform(device, 3, 2), _positive(device, 2, seed=1), _uniform(device, 2, seed=2)))


@_sample("_layer_norm")
def _layer_norm(device: str) -> tuple:
    return (lambda x, w, b: F.layer_norm(x, (3,), w, b),
            (_uniform(device, 2, 3), _positive(device, 3, seed=1), _uniform(device, 3, seed=2)))


@_sample("_group_norm")
def _group_norm(device: str) -> tuple:
    return (lambda x, w, b: F.group_norm(x, 2, w, b),
            (_uniform(device, 2, 4), _positive(device, 4, seed=1), _uniform(device, 4, seed=2)))


@_sample("_masked_scale")
def _dropout(device: str) -> tuple:
    if device == "cpu":
        get_state, set_state = gt.get_rng_state, gt.set_rng_state
    else:
        get_state = partial(gt.cuda.get_rng_state, device)
        set_state = partial(gt.cuda.set_rng_state, device=device)
    seeded = gt.Generator(device).manual_seed(0).get_state()

    def fn(x: gt.Tensor) -> gt.Tensor:
        # The same mask on each of gradcheck's calls, and the default generator left as it was.
        saved = get_state()
        set_state(seeded)
        try:
            return F.dropout(x, 0.5)
        finally:
            set_state(saved)
    return fn, (_uniform(device, 2, 3),)


@_sample("_embedding", gradgrad=("_embedding_backward",))
def _embedding(device: str) -> tuple:
    idx = _ints(device, [[0, 2], [2, 1]])
    return lambda w: F.embedding(idx, w), (_uniform(device, 3, 2),)


@_sample("_embedding_sparse_grad")
def _embedding_sparse(device: str) -> tuple:
    # the weight's gradient is sparse_coo; gradcheck compares it densified
    idx = _ints(device, [[0, 2], [2, 1]])
    return lambda w: F.embedding(idx, w, sparse=True), (_uniform(device, 3, 2),)


# -- convolution and pooling ----------------------------------------------------------------------
@_sample("conv2d", gradgrad=("_conv2d_input_backward", "_conv2d_weight_backward"))
def _conv2d(device: str) -> tuple:
    return (lambda x, w, b: F.conv2d(x, w, b, padding=1, stride=2),
            (_uniform(device, 1, 1, 3, 3), _uniform(device, 2, 1, 2, 2, seed=1),
             _uniform(device, 2, seed=2)))


@_sample("conv_transpose2d")
def _conv_transpose2d(device: str) -> tuple:
    return (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
            (_uniform(device, 1, 1, 2, 2), _uniform(device, 1, 2, 2, 2, seed=1),
             _uniform(device, 2, seed=2)))


@_sample("_max_pool2d", gradgrad=("_max_pool2d_backward",))
def _max_pool(device: str) -> tuple:
    return lambda x: F.max_pool2d(x, 2, 1), (_uniform(device, 1, 1, 3, 3),)


@_sample("_adaptive_max_pool2d")
def _adaptive_max_pool(device: str) -> tuple:
    return lambda x: F.adaptive_max_pool2d(x, (2, 2)), (_uniform(device, 1, 1, 3, 3),)


@_sample("avg_pool2d", gradgrad=("_avg_pool2d_backward",))
def _avg_pool(device: str) -> tuple:
    return (lambda x: F.avg_pool2d(x, 2, 1, padding=1, count_include_pad=False),
            (_uniform(device, 1, 1, 2, 3),))


@_sample("adaptive_avg_pool2d", gradgrad=("_adaptive_avg_pool2d_backward",))
def _adaptive_avg_pool(device: str) -> tuple:
    return lambda x: F.adaptive_avg_pool2d(x, (2, 2)), (_uniform(device, 1, 1, 3, 3),)


# -- linear algebra -------------------------------------------------------------------------------
@_sample("mm", "mv", "dot", "vdot", "matmul")
def _products(device: str) -> tuple:
    return (lambda a, b, v: (gt.mm(a, b), gt.mv(a, v), gt.dot(v, v * 2), gt.vdot(v, a[0]),
                             gt.matmul(a.unsqueeze(0), b)),
            (_uniform(device, 2, 3), _uniform(device, 3, 2, seed=1),
             _uniform(device, 3, seed=2)))


@_sample("addmm", "addmv")
def _add_products(device: str) -> tuple:
    return (lambda c, a, b: (gt.addmm(c, a, b, beta=0.5, alpha=2.0),
                             gt.addmv(c[0], a, b[:, 0], beta=-1.5, alpha=0.5)),
            (_uniform(device, 2, 2), _uniform(device, 2, 3, seed=1),
             _uniform(device, 3, 2, seed=2)))


@_sample("bmm", "baddbmm", "addbmm")
def _batch_products(device: str) -> tuple:
    return (lambda c, a, b: (gt.bmm(a, b), gt.baddbmm(c, a, b, beta=0.5, alpha=2.0),
                             gt.addbmm(c[0], a, b, beta=2.0, alpha=-0.5)),
            (_uniform(device, 2, 2, 2), _uniform(device, 2, 2, 2, seed=1),
             _uniform(device, 2, 2, 2, seed=2)))


@_sample("linear")
def _linear(device: str) -> tuple:
    return (gt.linear, (_uniform(device, 2, 3), _uniform(device, 2, 3, seed=1),
                        _uniform(device, 2, seed=2)))


@_sample("tensordot")
def _tensordot(device: str) -> tuple:
    return (lambda a, b: gt.tensordot(a, b, dims=([1], [0])),
            (_uniform(device, 2, 3), _uniform(device, 3, 2, seed=1)))


@_sample("_einsum")
def _einsum(device: str) -> tuple:
    return (lambda a, b: gt.einsum("ij,jk->ik", a, b),
            (_uniform(device, 2, 3), _uniform(device, 3, 2, seed=1)))


# -- reductions and scans -------------------------------------------------------------------------
@_sample("sum", "mean", "prod", "logsumexp")
def _reductions(device: str) -> tuple:
    return (lambda x: (gt.sum(x, 1), gt.mean(x, 0), gt.prod(x, 1), gt.logsumexp(x, 1)),
            (_signed(device, 2, 3),))


@_sample("nansum")
def _nansum(device: str) -> tuple:
    # a NaN element gets no gradient (and its finite differences are zero too)
    return lambda x: gt.nansum(x, 1), (_leaf(device, [[0.5, np.nan, -0.3], [0.2, 0.7, -0.8]]),)


@_sample("var", "std", "var_mean", "std_mean")
def _moments(device: str) -> tuple:
    return (lambda x: (gt.var(x, 1), gt.std(x, 0), *gt.var_mean(x, 1), *gt.std_mean(x)),
            (_uniform(device, 2, 3),))


@_sample("norm")
def _norm(device: str) -> tuple:
    return lambda x: (gt.norm(x), gt.norm(x, 3, dim=1)), (_signed(device, 2, 3),)


@_sample("amax", "amin", "aminmax", "max", "min")
def _extremes(device: str) -> tuple:
    def fn(x: gt.Tensor, y: gt.Tensor) -> tuple:
        mm = gt.aminmax(x, dim=1)
        return (gt.amax(x, 1), gt.amin(x, 0), mm.min, mm.max, gt.max(x, 1).values, gt.max(x),
                gt.max(x, y), gt.min(x, 0).values, gt.min(x), gt.min(x, y))
    return fn, (_uniform(device, 2, 3), _uniform(device, 2, 3, seed=1))


@_sample("cumsum", "cumprod", gradgrad=("_reverse_cumsum",))
def _scans(device: str) -> tuple:
    return lambda x: (gt.cumsum(x, 1), gt.cumprod(x, 1)), (_signed(device, 2, 3),)


@_sample("logcumsumexp")
def _logcumsumexp(device: str) -> tuple:
    return lambda x: (gt.logcumsumexp(x, 1), gt.logcumsumexp(x, 0)), (_signed(device, 2, 3),)


@_sample("softmax", gradgrad=("_softmax_backward",))
def _softmax(device: str) -> tuple:
    return lambda x: gt.softmax(x, 1), (_uniform(device, 2, 3),)


@_sample("log_softmax", gradgrad=("_log_softmax_backward",))
def _log_softmax(device: str) -> tuple:
    return lambda x: gt.log_softmax(x, 0), (_uniform(device, 2, 3),)


# -- sorting and selection ------------------------------------------------------------------------
@_sample("sort", "topk", "kthvalue")
def _sorting(device: str) -> tuple:
    return (lambda x: (gt.sort(x, 1).values, gt.topk(x, 2).values, gt.kthvalue(x, 2, 0).values),
            (_uniform(device, 2, 3),))


@_sample("mode")
def _mode(device: str) -> tuple:
    # distinct values: every count is one, the mode is the smallest (a repeated value would
    # lose its count under gradcheck's perturbation, jumping the mode)
    return (lambda x: (gt.mode(x, 1).values, gt.mode(x, 0, keepdim=True).values),
            (_uniform(device, 2, 3),))


@_sample("masked_select", gradgrad=("_masked_select_backward",))
def _masked_select(device: str) -> tuple:
    mask = _mask(device, [[True, False, True], [False, False, True]])
    return lambda x: gt.masked_select(x, mask), (_uniform(device, 2, 3),)


@_sample("take", gradgrad=("_take_backward",))
def _take(device: str) -> tuple:
    idx = _ints(device, [4, 0, 4, 2])
    return lambda x: gt.take(x, idx), (_uniform(device, 2, 3),)


@_sample("gather", gradgrad=("_gather_backward",))
def _gather(device: str) -> tuple:
    idx = _ints(device, [[2, 0], [1, 1]])
    return lambda x: gt.gather(x, 1, idx), (_uniform(device, 2, 3),)


@_sample("index_select", gradgrad=("_index_select_backward",))
def _index_select(device: str) -> tuple:
    idx = _ints(device, [2, 0, 2])
    return lambda x: gt.index_select(x, 1, idx), (_uniform(device, 2, 3),)


@_sample("__getitem__", gradgrad=("_index_backward",))
def _getitem(device: str) -> tuple:
    idx = _ints(device, [2, 0, 2])
    return lambda x: (x[1:, idx], x[:, 1]), (_uniform(device, 2, 3),)


# -- scatter and indexed writes -------------------------------------------------------------------
@_sample("scatter", "scatter_add", "scatter_reduce")
def _scatter(device: str) -> tuple:
    unique = _ints(device, [[2, 0], [0, 1]])     # scatter: one write per position
    repeated = _ints(device, [[2, 2], [0, 1]])
    return (lambda x, src: (gt.scatter(x, 1, unique, src), gt.scatter_add(x, 1, repeated, src),
                            gt.scatter_reduce(x, 1, repeated, src, "prod")),
            (_signed(device, 2, 3), _signed(device, 2, 2, seed=1)))


@_sample("index_add", "index_copy")
def _index_add_copy(device: str) -> tuple:
    return (lambda x, src: (gt.index_add(x, 0, _ints(device, [2, 2]), src, alpha=2.0),
                            gt.index_copy(x, 0, _ints(device, [2, 0]), src)),
            (_uniform(device, 3, 2), _uniform(device, 2, 2, seed=1)))


@_sample("index_fill", "masked_fill")
def _fills(device: str) -> tuple:
    mask = _mask(device, [[True, False, True], [False, False, True]])
    idx = _ints(device, [0, 2])
    return (lambda x, v: (gt.index_fill(x, 1, idx, v), gt.masked_fill(x, mask, v)),
            (_uniform(device, 2, 3), _leaf(device, 0.7)))


@_sample("masked_scatter")
def _masked_scatter(device: str) -> tuple:
    mask = _mask(device, [[True, False, True], [False, False, True]])
    return (lambda x, src: gt.masked_scatter(x, mask, src),
            (_uniform(device, 2, 3), _uniform(device, 4, seed=1)))


@_sample("index_put")
def _index_put(device: str) -> tuple:
    return (lambda x, v: gt.index_put(x, (_ints(device, [2, 0]),), v),
            (_uniform(device, 3, 2), _uniform(device, 2, 2, seed=1)))


@_sample("_setitem_functional")
def _setitem(device: str) -> tuple:
    def fn(x: gt.Tensor, v: gt.Tensor) -> gt.Tensor:
        y = x * 1   # x itself is a leaf
        y[0, 1:] = v
        return y
    return fn, (_uniform(device, 2, 3), _uniform(device, 2, seed=1))


# -- shape and views ------------------------------------------------------------------------------
@_sample("view", "reshape", "expand", "squeeze", "unsqueeze", "t", "transpose", "permute",
         "movedim")
def _reshapes(device: str) -> tuple:
    return (lambda x: (x.view(3, 2), gt.reshape(x.t(), (6,)), x[:1].expand(2, 2, 3),
                       gt.squeeze(x.unsqueeze(1), 1), gt.unsqueeze(x, 0), gt.t(x),
                       gt.transpose(x.unsqueeze(0), 0, 2), gt.permute(x.unsqueeze(2), 2, 0, 1),
                       gt.movedim(x.unsqueeze(0), 0, 2)),
            (_uniform(device, 2, 3),))


@_sample("view_as_real", "view_as_complex")
def _complex_views(device: str) -> tuple:
    # real -> complex -> (times a complex constant) -> real: both views' backwards in one
    return (lambda x: gt.view_as_real(gt.view_as_complex(x) * (0.5 + 2j)),
            (_uniform(device, 2, 3, 2),))


@_sample("narrow", "select", "diagonal", "diag", "diag_embed", "tril", "triu", "flip")
def _regions(device: str) -> tuple:
    return (lambda x: (gt.narrow(x, 1, 1, 2), gt.select(x, 1, 2), gt.diagonal(x, 1),
                       gt.diag(x), gt.diag(x[0]), gt.diag_embed(x[1]), gt.tril(x), gt.triu(x, 1),
                       gt.flip(x, 0, 1)),
            (_uniform(device, 2, 3),))


@_sample("roll", gradgrad=("_roll_backward",))
def _roll(device: str) -> tuple:
    return lambda x: gt.roll(x, (1, -1), (0, 1)), (_uniform(device, 2, 3),)


@_sample("pad", gradgrad=("_pad_backward",))
def _pad(device: str) -> tuple:
    return (lambda x: (gt.pad(x, (1, 2)), gt.pad(x.unsqueeze(0), (2, 1), mode="reflect")),
            (_uniform(device, 2, 3),))


@_sample("as_strided", gradgrad=("_as_strided_backward",))
def _as_strided(device: str) -> tuple:
    return lambda x: gt.as_strided(x, (2, 2), (1, 2), 1), (_uniform(device, 2, 3),)


@_sample("as_strided_scatter")
def _as_strided_scatter(device: str) -> tuple:
    return (lambda x, src: gt.as_strided_scatter(x, src, (2, 2), (3, 1), 1),
            (_uniform(device, 2, 3), _uniform(device, 2, 2, seed=1)))


@_sample("slice_inverse")
def _slice_inverse(device: str) -> tuple:
    # slice_inverse views all of input's storage with src's geometry, so its output depends on
    # src's values only through the slice it is given (input = src[s]): the two gradient
    # formulas (input: the slice of g; src: g with the slice zeroed) add up to g, which is the
    # Jacobian gradcheck measures. Applied to an independent src it would read values the
    # autograd graph does not see (PyTorch's formula has the same precondition).
    return (lambda x: (gt.slice_inverse(x[:, 1::2], x, 1, 1, None, 2),
                       gt.slice_inverse(x[1:], x, 0, 1) * 2.0),
            (_uniform(device, 2, 3),))


@_sample("cat", "stack", "unbind", "split_with_sizes")
def _joins(device: str) -> tuple:
    return (lambda a, b: (gt.cat([a, b], 1), gt.stack([a, b]), *gt.unbind(a, 1),
                          *gt.split(b, [1, 2], 1)),
            (_uniform(device, 2, 3), _uniform(device, 2, 3, seed=1)))


@_sample("broadcast_tensors")
def _broadcasts(device: str) -> tuple:
    # each input is broadcast along a different dim, so both gradients are sums
    return (gt.broadcast_tensors,
            (_uniform(device, 2, 1), _uniform(device, 3, seed=1),
             _uniform(device, 4, 1, 1, seed=2)))


@_sample("repeat", "repeat_interleave")
def _repeats(device: str) -> tuple:
    return (lambda x: (x.repeat(2, 1), gt.repeat_interleave(x, 2, dim=1)),
            (_uniform(device, 2, 3),))


# -- sparse ---------------------------------------------------------------------------------------
# An uncoalesced 3x3 pattern (the last entry repeats the first), differentiated in its values;
# rows 0 and 2 and columns 0 and 2 hold two entries, so the sparse softmaxes are not constant.
SPARSE_INDICES = [[0, 0, 1, 2, 2, 0], [1, 2, 0, 0, 2, 1]]


def _values(device: str) -> gt.Tensor:
    return _uniform(device, len(SPARSE_INDICES[0]))


def _coo(values: gt.Tensor) -> Any:
    idx = _ints(values.device, SPARSE_INDICES)
    return gt.sparse_coo_tensor(idx, values, (3, 3))


@_sample("_sparse_coo", "_sparse_to_dense")
def _sparse_roundtrip(device: str) -> tuple:
    return lambda v: _coo(v).to_dense(), (_values(device),)


@_sample("_sparse_coalesce", "_sparse_values")
def _sparse_coalesce(device: str) -> tuple:
    return lambda v: _coo(v).coalesce().values(), (_values(device),)


@_sample("_sparse_clone", "_sparse_to", "_sparse_transpose", "_sparse_index_select")
def _sparse_copies(device: str) -> tuple:
    idx = _ints(device, [2, 1, 2])
    return (lambda v: (_coo(v).clone().to_dense(), _coo(v).to(gt.float64, copy=True).to_dense(),
                       _coo(v).t().to_dense(), _coo(v).index_select(0, idx).to_dense()),
            (_values(device),))


@_sample("_dense_to_sparse", "_sparse_mask")
def _dense_to_sparse(device: str) -> tuple:
    mask = gt.sparse_coo_tensor(_ints(device, SPARSE_INDICES), gt.ones(6, device=device), (3, 3))
    return (lambda d: (d.to_sparse().to_dense(), gt.sparse.sum(d.to_sparse(1) * 3.0, 0),
                       gt.sparse.sparse_mask(d, mask).to_dense()),
            (_uniform(device, 3, 3),))


@_sample("_sparse_mm", "_sparse_addmm")
def _sparse_products(device: str) -> tuple:
    return (lambda v, d, c: (gt.sparse.mm(_coo(v), d),
                             gt.sparse.addmm(c, _coo(v), d, beta=0.5, alpha=2.0)),
            (_values(device), _uniform(device, 3, 2, seed=1), _uniform(device, 2, seed=2)))


@_sample("_sparse_sum", "_sparse_softmax")
def _sparse_reductions(device: str) -> tuple:
    return (lambda v: (gt.sparse.sum(_coo(v)), gt.sparse.sum(_coo(v), 1).to_dense(),
                       gt.sparse.softmax(_coo(v), 1).to_dense(),
                       gt.sparse.log_softmax(_coo(v), 0).to_dense()),
            (_values(device),))


# -- the tests ------------------------------------------------------------------------------------
def _csr(values: gt.Tensor) -> Any:
    dev = values.device
    return gt.sparse_csr_tensor(_ints(dev, [0, 2, 3, 5]), _ints(dev, [0, 2, 2, 0, 1]), values,
                                (3, 3))


@_sample("_sparse_compressed", "_compressed_values", "_compressed_clone", "_compressed_to",
         "_compressed_to_dense", "_compressed_to_coo", "_compressed_t", "_compressed_sum")
def _compressed_roundtrips(device: str) -> tuple:
    return (lambda v: (_csr(v).to_dense(), _csr(v).values() * 2, _csr(v).clone().to_dense(),
                       _csr(v).to(gt.float64, copy=True).to_dense(),
                       _csr(v).to_sparse().to_dense(), _csr(v).t().to_dense(), _csr(v).sum()),
            (_uniform(device, 5),))


@_sample("_to_compressed", "_compressed_mm")
def _compressed_products(device: str) -> tuple:
    return (lambda d, m: (d.to_sparse_csr().to_dense(), d.to_sparse_bsc((1, 3)).to_dense(),
                          gt.mm(d.to_sparse_csc(), m)),
            (_uniform(device, 3, 3), _uniform(device, 3, 2, seed=1)))


@_sample("_lstm_recurrence", "_gru_recurrence", "_rnn_recurrence")
def _recurrences(device: str) -> tuple:
    # nn.LSTM/GRU/RNN's fused recurrences over (T=3, B=2) with hidden size 2, the GRU with its
    # hidden bias, the RNN in reverse.
    from gputensor._ops.rnn import recurrence

    def run(x4: gt.Tensor, x3: gt.Tensor, x1: gt.Tensor, h: gt.Tensor, c: gt.Tensor,
            w4: gt.Tensor, w3: gt.Tensor, w1: gt.Tensor, b3: gt.Tensor) -> tuple:
        return (*recurrence("LSTM", x4, h, c, w4), *recurrence("GRU", x3, h, None, w3, b3)[:2],
                *recurrence("RNN_TANH", x1, h, None, w1, reverse=True)[:2])
    return run, (_uniform(device, 3, 2, 8), _uniform(device, 3, 2, 6, seed=1),
                 _uniform(device, 3, 2, 2, seed=2), _uniform(device, 2, 2, seed=3),
                 _uniform(device, 2, 2, seed=4), _uniform(device, 8, 2, seed=5),
                 _uniform(device, 6, 2, seed=6), _uniform(device, 2, 2, seed=7),
                 _uniform(device, 6, seed=8))


# Samples of the issue-17 families live beside this file, one module per family.
for _family in (samples_linalg, samples_fft, samples_special, samples_sampling):
    SAMPLES.update(_family.SAMPLES)


def test_every_derivative_has_a_sample() -> None:
    # (by the derivative's name: pow's private twins _pow_scalar/_pow_scalar_base share it)
    declared = {op.derivative.op_name for op in OPS.values()
                if isinstance(op.derivative, derivatives.Derivative)}
    missing, stale = declared - set(SAMPLES), set(SAMPLES) - declared
    assert not missing, f"derivatives without a sample: {sorted(missing)}"
    assert not stale, f"samples of ops without a derivative: {sorted(stale)}"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_gradcheck(device: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, inputs, check = SAMPLES[name](device)
    ran: set[str] = set()
    apply = derivatives.OpNode.apply

    def recording_apply(self: derivatives.OpNode, grads: list) -> list:
        ran.add(self.derivative.op_name)
        return apply(self, grads)

    # Every op's backward node is an OpNode subclass: this sees which derivatives ran.
    monkeypatch.setattr(derivatives.OpNode, "apply", recording_apply)
    assert (gradcheck if check == "grad" else gradgradcheck)(fn, inputs)
    assert name in ran, f"the sample never ran the derivative of {name} (ran {sorted(ran)})"

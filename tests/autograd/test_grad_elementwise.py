"""Gradients of the elementwise ops (and the composites around them): gradcheck and
gradgradcheck in float64 against finite differences, broadcasting, Python-scalar operands,
in-place variants, and float32 gradients against PyTorch."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def sample(shape: Sequence[int], lo: float = -2.0, hi: float = 2.0, avoid: Sequence[float] = (),
           gap: float = 0.08, seed: int = 0) -> np.ndarray:
    """Uniform values in [lo, hi) at least ``gap`` away from each point in ``avoid`` (the kinks
    and jumps of the op, where finite differences are meaningless)."""
    rng = np.random.default_rng(seed)
    vals = rng.uniform(lo, hi, size=shape)
    for _ in range(100):
        bad = np.zeros(vals.shape, bool)
        for p in avoid:
            bad |= np.abs(vals - p) < gap
        if not bad.any():
            return vals
        vals[bad] = rng.uniform(lo, hi, size=int(bad.sum()))
    raise AssertionError("could not sample away from the avoided points")


def leaf(values: np.ndarray, device: str) -> gt.Tensor:
    return gt.tensor(values, dtype=gt.float64, device=device).requires_grad_()


HALVES = [k / 2 for k in range(-8, 9)]  # jumps of floor/ceil/round/frac over [-4, 4]

# name -> (function, sampling kwargs)
UNARY: dict[str, tuple[Callable, dict]] = {
    "neg": (gt.neg, {}),
    "abs": (gt.abs, {"avoid": [0]}),
    "sign": (gt.sign, {"avoid": [0]}),
    "sgn": (gt.sgn, {"avoid": [0]}),
    "reciprocal": (gt.reciprocal, {"avoid": [0], "gap": 0.3}),
    "nan_to_num": (gt.nan_to_num, {}),
    "exp": (gt.exp, {}),
    "exp2": (gt.exp2, {}),
    "expm1": (gt.expm1, {}),
    "log": (gt.log, {"lo": 0.5}),
    "log2": (gt.log2, {"lo": 0.5}),
    "log10": (gt.log10, {"lo": 0.5}),
    "log1p": (gt.log1p, {"lo": -0.5}),
    "sqrt": (gt.sqrt, {"lo": 0.5}),
    "rsqrt": (gt.rsqrt, {"lo": 0.5}),
    "sin": (gt.sin, {}),
    "cos": (gt.cos, {}),
    "tan": (gt.tan, {"lo": -1.2, "hi": 1.2}),
    "asin": (gt.asin, {"lo": -0.9, "hi": 0.9}),
    "acos": (gt.acos, {"lo": -0.9, "hi": 0.9}),
    "atan": (gt.atan, {}),
    "sinh": (gt.sinh, {}),
    "cosh": (gt.cosh, {}),
    "tanh": (gt.tanh, {}),
    "sigmoid": (gt.sigmoid, {}),
    "erf": (gt.erf, {}),
    "relu": (gt.relu, {"avoid": [0]}),
    "gelu": (gt.gelu, {}),
    "gelu_tanh": (lambda x: gt.gelu(x, approximate="tanh"), {}),
    "silu": (gt.silu, {}),
    "softplus": (lambda x: gt.softplus(x, beta=2.0, threshold=3.0), {"avoid": [1.5]}),
    "leaky_relu": (lambda x: gt.leaky_relu(x, 0.2), {"avoid": [0]}),
    "elu": (lambda x: gt.elu(x, alpha=1.3, scale=1.1, input_scale=0.7), {"avoid": [0]}),
    "hardtanh": (gt.hardtanh, {"avoid": [-1, 1]}),
    "hardtanh_limits": (lambda x: gt.hardtanh(x, -0.5, 1.5), {"avoid": [-0.5, 1.5]}),
    "floor": (gt.floor, {"avoid": HALVES}),
    "ceil": (gt.ceil, {"avoid": HALVES}),
    "trunc": (gt.trunc, {"avoid": HALVES}),
    "round": (gt.round, {"avoid": HALVES}),
    "frac": (gt.frac, {"avoid": HALVES}),
    "square": (gt.square, {}),
    "conj": (gt.conj, {}),
    "float_power": (lambda x: gt.float_power(x, 3), {}),
    "clamp": (lambda x: gt.clamp(x, -0.5, 0.7), {"avoid": [-0.5, 0.7]}),
    "clamp_min": (lambda x: gt.clamp_min(x, 0.3), {"avoid": [0.3]}),
    "clamp_max": (lambda x: gt.clamp_max(x, 0.3), {"avoid": [0.3]}),
    "clip": (lambda x: gt.clip(x, max=-0.2), {"avoid": [-0.2]}),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck_and_gradgradcheck(name: str, device: str) -> None:
    fn, kw = UNARY[name]
    x = leaf(sample((3, 4), **kw), device)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def _quotient_operands(shape: Sequence[int], seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """a, b with a / b at least 0.1 away from any integer (the jumps of floor/fmod/...)."""
    rng = np.random.default_rng(seed)
    b = rng.uniform(0.8, 1.6, size=shape) * rng.choice([-1, 1], size=shape)
    q = rng.integers(-2, 3, size=shape) + rng.uniform(0.1, 0.9, size=shape)
    return q * b, b


BINARY: dict[str, Callable] = {
    "add": gt.add,
    "add_alpha": lambda a, b: gt.add(a, b, alpha=2.5),
    "sub": gt.sub,
    "sub_alpha": lambda a, b: gt.sub(a, b, alpha=-0.5),
    "mul": gt.mul,
    "div": gt.div,
    "true_divide": gt.true_divide,
    "div_floor": lambda a, b: gt.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: gt.div(a, b, rounding_mode="trunc"),
    "remainder": gt.remainder,
    "fmod": gt.fmod,
    "pow": lambda a, b: gt.pow(a.abs() + 0.5, b),
    "float_power": lambda a, b: gt.float_power(a.abs() + 0.5, b),
    "atan2": gt.atan2,
    "maximum": gt.maximum,
    "minimum": gt.minimum,
    "max_binary": gt.max,
    "min_binary": gt.min,
    "operator_mix": lambda a, b: (a * b - a / b) ** 2 + b,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradcheck_and_gradgradcheck(name: str, device: str) -> None:
    a, b = _quotient_operands((3, 4))
    x, y = leaf(a, device), leaf(b, device)
    assert gradcheck(BINARY[name], (x, y))
    assert gradgradcheck(BINARY[name], (x, y))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name: str, device: str) -> None:
    # (3, 1) with (4,): each input's gradient is summed back to its own shape.
    x = leaf(sample((3, 1), avoid=[0], gap=0.3, seed=2), device)
    y = leaf(sample((4,), avoid=[0], gap=0.3, seed=3), device)
    assert gradcheck(BINARY[name], (x, y))
    assert gradgradcheck(BINARY[name], (x, y))
    out = BINARY[name](x, y)
    gx, gy = gt.autograd.grad(out.sum(), (x, y))
    assert gx.shape == (3, 1) and gy.shape == (4,)


SCALAR_OPERANDS: dict[str, Callable] = {
    "add": lambda x: x + 1.5,
    "radd": lambda x: 1.5 + x,
    "add_alpha": lambda x: gt.add(x, 2, alpha=3),
    "rsub": lambda x: 2.5 - x,
    "mul": lambda x: x * 3,
    "rmul": lambda x: -2 * x,
    "div": lambda x: x / 3,
    "rdiv": lambda x: 2 / x,
    "rpow": lambda x: 2 ** x,
    "pow2": lambda x: x ** 2,
    "pow_half": lambda x: x.abs() ** 0.5,
    "pow_neg": lambda x: x.abs() ** -1.5,
    "pow0": lambda x: x ** 0,
    "pow1": lambda x: x ** 1,
    "remainder": lambda x: x % 1.3,
    "fmod": lambda x: gt.fmod(x, 1.3),
    "atan2": lambda x: gt.atan2(x, gt.tensor(0.7, dtype=gt.float64, device=x.device)),
    "lerp_low": lambda x: gt.lerp(x, x * x, 0.3),
    "lerp_high": lambda x: gt.lerp(x, x * x, 0.8),
    "where_scalar": lambda x: gt.where(x > 0, x, 0.5),
    "clamp_tensor_min": lambda x: gt.clamp(x, min=gt.full_like(x, 0.1).detach()),
}


@pytest.mark.parametrize("name", sorted(SCALAR_OPERANDS))
def test_python_scalar_operands(name: str, device: str) -> None:
    # jumps of % and fmod at multiples of 1.3; where's and clamp's switch at 0 and 0.1
    x = leaf(sample((3, 4), avoid=[0, 0.1, -1.3, 1.3], gap=0.1, seed=4), device)
    fn = SCALAR_OPERANDS[name]
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


TERNARY: dict[str, Callable] = {
    "lerp": gt.lerp,
    "clamp": lambda x, lo, hi: gt.clamp(x, lo, hi),
    "where": lambda x, y, z: gt.where(z > 0, x, y),
    "addcmul_like": lambda x, y, z: x + y * z,
}


@pytest.mark.parametrize("name", sorted(TERNARY))
def test_ternary_gradcheck(name: str, device: str) -> None:
    x = leaf(sample((3, 4), seed=5), device)
    # bounds for clamp: lo < hi with x away from both
    lo = leaf(sample((3, 4), seed=6) * 0.1 - 1.0, device)
    hi = leaf(sample((4,), seed=7) * 0.1 + 1.0, device)
    if name == "clamp":
        x = leaf(sample((3, 4), avoid=[-1.2, -1, -0.8, 0.8, 1, 1.2], gap=0.2, seed=5), device)
    assert gradcheck(TERNARY[name], (x, lo, hi))
    assert gradgradcheck(TERNARY[name], (x, lo, hi))


def test_clamp_with_min_above_max_sends_gradient_to_max(device: str) -> None:
    x = leaf(sample((5,)), device)
    lo = leaf(np.full(5, 1.0), device)
    hi = leaf(np.full(5, 0.5), device)
    gx, glo, ghi = gt.autograd.grad(gt.clamp(x, lo, hi).sum(), (x, lo, hi))
    assert gx.tolist() == [0.0] * 5 and glo.tolist() == [0.0] * 5 and ghi.tolist() == [1.0] * 5


def test_maximum_ties_split_the_gradient(device: str) -> None:
    x = leaf(np.array([1.0, 2.0, 3.0]), device)
    y = leaf(np.array([1.0, 0.0, 5.0]), device)
    gx, gy = gt.autograd.grad(gt.maximum(x, y).sum(), (x, y))
    assert gx.tolist() == [0.5, 1.0, 0.0] and gy.tolist() == [0.5, 0.0, 1.0]


# -- in-place variants: the op records on the tensor it overwrote ----------------------------
INPLACE: dict[str, Callable] = {
    "mul_": lambda x, y: x.clone().mul_(y),
    "exp_": lambda x, y: _then(x * 1, lambda a: a.exp_()) * y,
    "sin_": lambda x, y: _then(x * 1, lambda a: a.sin_()) + y,
    "add_alpha_": lambda x, y: x.clone().add_(y, alpha=2),
    "sub_": lambda x, y: x.clone().sub_(y),
    "div_": lambda x, y: x.clone().div_(y),
    "div_floor_": lambda x, y: (x * 1).div_(y, rounding_mode="floor") + x * y,
    "pow_": lambda x, y: x.abs().pow_(y),
    "sigmoid_": lambda x, y: (x * y).sigmoid_(),
    "tanh_": lambda x, y: (x + y).tanh_(),
    "clamp_": lambda x, y: (x * y).clamp_(-0.5, 0.5),
    "lerp_": lambda x, y: x.clone().lerp_(y, 0.3),
    "imul": lambda x, y: _then(x * 1, lambda a: a.__imul__(y)),
    "iadd_twice": lambda x, y: _then(x * 1, lambda a: a.__iadd__(y).__iadd__(y * y)),
    "chain": lambda x, y: _then(x * 1, lambda a: a.mul_(y).exp_().mul_(y)),
    "view_mul_": lambda x, y: _then(x * 1, lambda a: a[1:].mul_(y[1:])),
    "square_": lambda x, y: (x * y).square_(),
    "clamp_min_": lambda x, y: (x * y).clamp_min_(0.1),
    "clamp_max_": lambda x, y: (x - y).clip_(max=0.2),
    "float_power_": lambda x, y: (x * 1).abs().float_power_(y),
    "lerp_tensor_weight_": lambda x, y: x.clone().lerp_(y * y, y),
    "where_method": lambda x, y: x.where(x * y > 0, y),
    "remainder_": lambda x, y: (x * 1).remainder_(y) * y,
    "fmod_": lambda x, y: (x * 1).fmod_(y) * y,
}


def _then(t: gt.Tensor, fn: Callable) -> gt.Tensor:
    fn(t)
    return t


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_variants(name: str, device: str) -> None:
    # x / y stays away from integers (remainder_, fmod_, div_ floor), |x| from 0
    a, b = _quotient_operands((3, 4), seed=8)
    x, y = leaf(a, device), leaf(b, device)
    fn = INPLACE[name]
    assert gradcheck(fn, (x, y))
    assert gradgradcheck(fn, (x, y))


def test_inplace_needs_the_old_value_of_self(device: str) -> None:
    """mul_ overwrites self, but y's gradient is the old self: it must have been kept."""
    x = leaf(np.array([1.0, 2.0, 3.0]), device)
    y = leaf(np.array([4.0, 5.0, 6.0]), device)
    a = x * 1
    a.mul_(y)
    a.sum().backward()
    assert x.grad.tolist() == [4.0, 5.0, 6.0] and y.grad.tolist() == [1.0, 2.0, 3.0]


def test_inplace_on_a_leaf_requiring_grad_raises(device: str) -> None:
    x = leaf(np.ones(3), device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.mul_(2)


# -- float32 gradients against PyTorch ----------------------------------------------------------
TORCH_PAIRS: dict[str, tuple[Callable, Callable]] = {
    "tanh_mul": (lambda a, b: gt.tanh(a) * b, lambda a, b: torch.tanh(a) * b),
    "sigmoid_div": (lambda a, b: gt.sigmoid(a) / (b.abs() + 1),
                    lambda a, b: torch.sigmoid(a) / (b.abs() + 1)),
    "gelu_pow": (lambda a, b: gt.gelu(a) * (b.abs() + 0.5) ** 1.5,
                 lambda a, b: torch.nn.functional.gelu(a) * (b.abs() + 0.5) ** 1.5),
    "silu_sub": (lambda a, b: gt.silu(a) - 2 * b, lambda a, b: torch.nn.functional.silu(a) - 2 * b),
    "max_exp": (lambda a, b: gt.maximum(a, b).exp(), lambda a, b: torch.maximum(a, b).exp()),
    "atan2_log": (lambda a, b: gt.atan2(a, b) + (a * a + 1).log(),
                  lambda a, b: torch.atan2(a, b) + (a * a + 1).log()),
    "clamp_where": (lambda a, b: gt.where(a > 0, a.clamp(max=0.7), b),
                    lambda a, b: torch.where(a > 0, a.clamp(max=0.7), b)),
    "softplus_elu": (lambda a, b: gt.softplus(a, beta=2.0) + gt.elu(b),
                     lambda a, b: torch.nn.functional.softplus(a, beta=2.0)
                     + torch.nn.functional.elu(b)),
}


@pytest.mark.parametrize("name", sorted(TORCH_PAIRS))
def test_float32_gradients_match_torch(name: str, device: str) -> None:
    ours, theirs = TORCH_PAIRS[name]
    a = sample((3, 1), avoid=[0], seed=9).astype(np.float32)
    b = sample((5,), avoid=[0], seed=10).astype(np.float32)
    w = sample((3, 5), seed=11).astype(np.float32)
    x = gt.tensor(a, device=device).requires_grad_()
    y = gt.tensor(b, device=device).requires_grad_()
    (ours(x, y) * gt.tensor(w, device=device)).sum().backward()
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (theirs(tx, ty) * torch.tensor(w)).sum().backward()
    assert x.grad.dtype is gt.float32
    assert_close(x.grad, tx.grad, rtol=1e-5, atol=1e-5)
    assert_close(y.grad, ty.grad, rtol=1e-5, atol=1e-5)


COMPLEX_PAIRS: dict[str, Callable] = {
    "mul": lambda m, a, b: m.mul(a, b) + a,
    "div": lambda m, a, b: m.div(a, b),
    "exp_sin": lambda m, a, b: m.exp(a) * m.sin(b),
    "tanh_sigmoid": lambda m, a, b: m.tanh(a) + m.sigmoid(b),
    "reciprocal_sqrt": lambda m, a, b: m.reciprocal(a) * m.sqrt(b),
    "lerp": lambda m, a, b: m.lerp(a, b, 0.3 + 0.2j),
    "add_alpha": lambda m, a, b: m.add(a, b, alpha=1 - 2j),
    "pow_square": lambda m, a, b: m.pow(a, 3) + m.square(b),
    "sgn": lambda m, a, b: m.sgn(a) * b,
    "pow_complex_exponents": lambda m, a, b: m.pow(a, b) + a ** (2 + 1j),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_PAIRS))
def test_complex_gradients_follow_the_conjugate_convention(name: str, device: str) -> None:
    """PyTorch's convention for complex inputs: grad_input = grad * conj(d out / d input)."""
    rng = np.random.default_rng(12)
    a, b, w = (rng.uniform(0.3, 1.5, (2, 3)) + 1j * rng.uniform(-1, 1, (2, 3)) for _ in range(3))
    x = gt.tensor(a, device=device).requires_grad_()
    y = gt.tensor(b, device=device).requires_grad_()
    gx, gy = gt.autograd.grad(COMPLEX_PAIRS[name](gt, x, y), (x, y),
                              gt.tensor(w, device=device))
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ex, ey = torch.autograd.grad(COMPLEX_PAIRS[name](torch, tx, ty), (tx, ty), torch.tensor(w))
    assert_close(gx, ex, rtol=1e-10, atol=1e-10)
    assert_close(gy, ey, rtol=1e-10, atol=1e-10)


def test_op_without_derivative_raises_at_backward(device: str) -> None:
    """floor_divide (//) has no derivative (as in PyTorch); div(rounding_mode='floor') has a
    zero one."""
    x = leaf(sample((6,), avoid=HALVES), device)
    y = (x // 0.5) * x
    with pytest.raises(RuntimeError, match="the derivative for 'floor_divide' is not implemented"):
        y.sum().backward()
    (g,) = gt.autograd.grad((gt.div(x, 0.5, rounding_mode="floor") * x).sum(), (x,))
    assert_close(g, gt.div(x, 0.5, rounding_mode="floor").detach())


FUSED_BACKWARD: dict[str, tuple] = {
    "_relu_backward": (), "_sigmoid_backward": (), "_tanh_backward": (),
    "_leaky_relu_backward": (0.2,), "_hardtanh_backward": (-1.0, 1.0),
    "_gelu_backward": (0,), "_gelu_backward_tanh": (1,), "_silu_backward": (),
    "_softplus_backward": (2.0, 3.0), "_elu_backward": (1.3, 1.1, 0.7),
}


@pytest.mark.parametrize("name", sorted(FUSED_BACKWARD))
def test_fused_activation_backward_ops(name: str, device: str) -> None:
    """The fused backward ops differentiate in both operands (double and triple backward of
    the activations)."""
    from gputensor.kernels.registry import OPS
    op = OPS[name.removesuffix("_tanh")].frontend
    params = FUSED_BACKWARD[name]
    g = leaf(sample((3, 4), seed=13), device)
    x = leaf(sample((3, 4), avoid=[-1, 0, 1, 1.5], seed=14), device)
    assert gradcheck(lambda a, b: op(a, b, *params), (g, x))
    assert gradgradcheck(lambda a, b: op(a, b, *params), (g, x))

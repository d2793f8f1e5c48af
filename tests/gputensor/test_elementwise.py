"""Elementwise ops against PyTorch: values, result dtypes, broadcasting, layouts and errors.

Numba compiles one kernel per (op, compute dtype, operand pattern, rank), so value tests use a
representative dtype set per op: float16/bfloat16 and integer inputs of float ops share the
float32 kernel, and the exhaustive dtype and error sweeps run on empty tensors, which check
every rule in the frontend without compiling anything.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import (
    ALL_DTYPES,
    assert_close,
    helper_test_op,
    noncontiguous,
    random_array,
    requires_torch,
    torch,
    torch_dtype,
)

if torch is None:  # the op tables below are built from torch functions
    pytest.skip("PyTorch (CPU) oracle not installed", allow_module_level=True)

pytestmark = [requires_torch,
              pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")]

F, F64, H, BF = gt.float32, gt.float64, gt.float16, gt.bfloat16
I8, I16, I32, I64, U8, B = gt.int8, gt.int16, gt.int32, gt.int64, gt.uint8, gt.bool
C64, C128 = gt.complex64, gt.complex128
INF, NAN = math.inf, math.nan
SCALARS = [True, 3, -2, 2.5, 1 + 2j]
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.5, 1e-3, 30.0, -30.0, INF, -INF, NAN]


# -- helpers ---------------------------------------------------------------------------------
def pair(values: Any, dtype: gt.dtype, device: str) -> tuple[Any, gt.Tensor]:
    """The same values as a torch tensor and a gputensor tensor of ``dtype``."""
    arr = np.asarray(values)
    if dtype is BF:  # torch cannot read ml_dtypes' bfloat16: go through float32 on both sides
        arr = np.array(arr, np.float32)
        return torch.from_numpy(arr).to(torch.bfloat16), gt.tensor(arr, device=device).to(BF)
    arr = np.array(arr, dtype.np_dtype)  # (np.ascontiguousarray would make 0-d arrays 1-d)
    return torch.from_numpy(arr.copy()), gt.tensor(arr, device=device)


def rand_pair(shape: tuple[int, ...], dtype: gt.dtype, device: str, low: float = -2.0,
              high: float = 2.0, seed: int = 0) -> tuple[Any, gt.Tensor]:
    return pair(random_array(shape, dtype, low, high, seed), dtype, device)


def resolved(t: Any) -> Any:
    """torch results with lazy conj/neg bits as plain tensors (NumPy cannot read those)."""
    if isinstance(t, torch.Tensor):
        return t.resolve_conj().resolve_neg()
    return t


def compare(torch_fn: Callable, gt_fn: Callable, t_args: list, g_args: list,
            **tol: Any) -> None:
    try:
        expected = resolved(torch_fn(*t_args))
    except TypeError:
        # Some torch functions take no Python number (torch.maximum(t, 2)); a 0-dim tensor
        # promotes exactly like one, so it stands in on the torch side.
        t_args = [torch.tensor(a) if isinstance(a, int | float | complex) else a
                  for a in t_args]
        expected = resolved(torch_fn(*t_args))
    actual = gt_fn(*g_args)
    assert_close(actual, expected, **tol)


def _rop(op: Callable, scalar: Any, x: Any) -> Any:
    """op(x, scalar): a tensor on the left, a Python scalar on the right."""
    return op(x, scalar)


def outcome(fn: Callable, *args: Any) -> str:
    """The result dtype name of fn(*args), or 'error' if it raises a RuntimeError (PyTorch's
    NotImplementedError for a dtype is one); TypeError propagates (a signature mismatch)."""
    try:
        r = fn(*args)
    except (RuntimeError, ZeroDivisionError):
        return "error"
    except TypeError:
        raise
    except Exception as e:  # noqa: BLE001 - reported as a mismatch, not a crash of the sweep
        return type(e).__name__
    return str(r.dtype).removeprefix("torch.").removeprefix("gputensor.")


def empty_pair(dtype: gt.dtype, device: str, shape: tuple[int, ...] = (0,)) -> tuple[Any, Any]:
    return torch.empty(shape, dtype=torch_dtype(dtype)), gt.empty(shape, dtype=dtype,
                                                                   device=device)


def skipped_case(name: str, a: Any, b: Any, want: str) -> bool:
    """Dtype cases the sweeps leave out, each for a stated reason."""
    # Accepted PyTorch quirks: float16 with a complex number makes ComplexHalf, which
    # gputensor does not have; pow(bool, True) is copied by torch's exponent-1 fast path;
    # torch's clamp_min alone accepts bool.
    if want in ("complex32", "error") and (a is H or b is H) and complex in (type(a), type(b)):
        return True
    if name == "pow" and a is B and b is True:
        return True
    return name == "clamp_min" and a is B and b is B


def sweep_mismatches(name: str, torch_fn: Callable, gt_fn: Callable, device: str,
                     scalars: bool = True) -> list[str]:
    """Result dtype or error of a binary op over every dtype pair and scalar kind, on empty
    tensors (no kernel runs, so this checks the frontend's rules only)."""
    bad = []
    cases = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES]
    if scalars:
        cases += [(a, s) for a in ALL_DTYPES for s in SCALARS]
        cases += [(s, a) for a in ALL_DTYPES for s in SCALARS]
    for a, b in cases:
        t_args, g_args = [], []
        for x in (a, b):
            if isinstance(x, gt.dtype):
                tx, gx = empty_pair(x, device)
                t_args.append(tx)
                g_args.append(gx)
            else:
                t_args.append(x)
                g_args.append(x)
        try:
            want = outcome(torch_fn, *t_args)
        except TypeError:
            continue  # torch's signature takes no Python number here; gputensor's does
        if skipped_case(name, a, b, want):
            continue
        got = outcome(gt_fn, *g_args)
        if got != want:
            bad.append(f"{name}({a}, {b!r}): got {got}, torch {want}")
    return bad


# -- unary ops computing in floating point ----------------------------------------------------
# name -> input range. All run in float32 (float16, bfloat16, int and bool inputs share that
# kernel); FLOAT64_UNARY and COMPLEX_UNARY add a kernel each.
FLOAT_UNARY = {
    "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-3, 3), "log": (0.1, 5), "log2": (0.1, 5),
    "log10": (0.1, 5), "log1p": (-0.9, 5), "sqrt": (0, 5), "rsqrt": (0.1, 5),
    "reciprocal": (0.5, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2),
    "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "atan": (-3, 3), "sinh": (-3, 3),
    "cosh": (-3, 3), "tanh": (-3, 3), "sigmoid": (-5, 5), "erf": (-3, 3),
    "asinh": (-3, 3), "acosh": (1.05, 5), "atanh": (-0.95, 0.95),
}
FLOAT64_UNARY = ["exp", "log1p", "sigmoid", "erf", "asinh", "acosh", "atanh"]
COMPLEX_UNARY = ["exp", "log", "sqrt", "sin", "sigmoid", "asinh", "acosh", "atanh"]


@pytest.mark.parametrize("name", FLOAT_UNARY)
@pytest.mark.parametrize("dtype", [F, H, BF, I32, U8, B], ids=str)
def test_float_unary(name: str, dtype: gt.dtype, device: str) -> None:
    low, high = FLOAT_UNARY[name]
    helper_test_op([(3, 5)], getattr(torch, name), getattr(gt, name), device=device,
                   dtype=dtype, low=low, high=high)


@pytest.mark.parametrize("name", FLOAT64_UNARY)
def test_float_unary_float64(name: str, device: str) -> None:
    low, high = FLOAT_UNARY[name]
    helper_test_op([(3, 5)], getattr(torch, name), getattr(gt, name), device=device,
                   dtype=F64, low=low, high=high)


@pytest.mark.parametrize("name", COMPLEX_UNARY)
def test_float_unary_complex(name: str, device: str) -> None:
    low, high = FLOAT_UNARY[name]
    helper_test_op([(7,)], getattr(torch, name), getattr(gt, name), device=device, dtype=C64,
                   low=max(low, 0.1), high=high, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float_unary_special_values(name: str, device: str) -> None:
    t, g = pair(SPECIALS, F, device)
    compare(getattr(torch, name), getattr(gt, name), [t], [g], rtol=1e-5, atol=1e-6)


def test_float_unary_methods_and_inplace(device: str) -> None:
    t, g = rand_pair((3, 5), F, device, 0.1, 3)
    for name in FLOAT_UNARY:
        assert_close(getattr(g, name)(), getattr(t, name)())
        g2, t2 = g.clone(), t.clone()
        assert getattr(g2, name + "_")() is g2
        getattr(t2, name + "_")()
        assert_close(g2, t2)


def test_float_unary_inplace_int_raises(device: str) -> None:
    x = gt.tensor([1, 2, 3], device=device)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        x.exp_()
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.sqrt_()
    assert x.tolist() == [1, 2, 3]


# -- other unary ops -------------------------------------------------------------------------
def _t(name: str) -> Callable:
    return lambda x: resolved(getattr(torch, name)(x))


def _g(name: str) -> Callable:
    return lambda x: getattr(gt, name)(x)


# name -> dtypes whose values are checked (the sweep covers every dtype's rules). Each
# integer or complex dtype listed is a kernel of its own; float16 shares float32's.
OTHER_UNARY = {
    "neg": [F, H, I64], "abs": [F, BF, I64, C64], "sign": [F, H, I64], "sgn": [C64],
    "square": [F, I64, B], "relu": [F], "floor": [F, H, I64], "ceil": [F, I64],
    "trunc": [F, I64], "round": [F, H, I64], "frac": [F, H], "isnan": [F, H],
    "isinf": [F], "isfinite": [F, H], "signbit": [F], "logical_not": [B, F],
    "bitwise_not": [I64, B], "conj": [C64], "nan_to_num": [F, H, C64],
}


@pytest.mark.parametrize("name,dtype", [(n, d) for n, ds in OTHER_UNARY.items() for d in ds],
                         ids=str)
def test_other_unary(name: str, dtype: gt.dtype, device: str) -> None:
    low, high = (-60, 60) if dtype in (I64, I8) else (-3, 3)
    helper_test_op([(3, 5)], _t(name), _g(name), device=device, dtype=dtype, low=low,
                   high=high)


@pytest.mark.parametrize("name", ["neg", "abs", "sign", "sgn", "relu", "floor", "ceil", "trunc",
                                  "round", "frac", "isnan", "isinf", "isfinite", "signbit",
                                  "nan_to_num", "square", "logical_not"])
def test_other_unary_special_values(name: str, device: str) -> None:
    t, g = pair(SPECIALS + [2.5, -0.5, 1.5, 0.49999997], F, device)
    compare(_t(name), _g(name), [t], [g])


def test_int_edge_values(device: str) -> None:
    # int64 kernels from test_other_unary: INT_MIN wraps under neg and abs, as in PyTorch.
    t, g = pair([-(2 ** 63), -5, 0, 2 ** 63 - 1], I64, device)
    for name in ("neg", "abs", "sign", "square", "bitwise_not"):
        compare(_t(name), _g(name), [t], [g])
    t8, g8 = pair([-128, -1, 0, 1, 127], I8, device)
    compare(torch.neg, gt.neg, [t8], [g8])
    t, g = pair([0, 1, 200, 255], U8, device)
    compare(torch.bitwise_not, gt.bitwise_not, [t], [g])


def test_round_decimals(device: str) -> None:
    t, g = pair([1.2345, -2.5551, 0.125, 1234.5678, -0.0, INF, NAN], F, device)
    for d in (0, 1, 2, -1, -2):
        compare(partial(torch.round, decimals=d), partial(gt.round, decimals=d), [t], [g])
    assert_close(g.round(decimals=1), t.round(decimals=1))
    ti, gi = pair([15, -25, 7], I64, device)
    assert_close(gt.round(gi), torch.round(ti))


def test_nan_to_num_params(device: str) -> None:
    t, g = pair([NAN, INF, -INF, 1.5, -0.0], F, device)
    for args in [(), (1.0,), (1.0, 2.0), (1.0, 2.0, -3.0)]:
        compare(lambda x, a=args: torch.nan_to_num(x, *a), lambda x, a=args: gt.nan_to_num(x, *a),
                [t], [g])
    compare(partial(torch.nan_to_num, neginf=-7.0), partial(gt.nan_to_num, neginf=-7.0), [t],
            [g])
    th, gh = pair([NAN, INF, -INF, 1.5], H, device)   # float16's own finfo.max
    compare(torch.nan_to_num, gt.nan_to_num, [th], [gh])
    tc, gc = pair([complex(NAN, INF), complex(-INF, 1), 1 + 2j], C64, device)
    compare(partial(torch.nan_to_num, nan=9.0), partial(gt.nan_to_num, nan=9.0), [tc], [gc])
    g2, t2 = g.clone(), t.clone()
    assert g2.nan_to_num_(0.5) is g2
    assert_close(g2, t2.nan_to_num_(0.5))


def test_conj_of_real_is_input(device: str) -> None:
    g = gt.tensor([1.0, 2.0], device=device)
    assert gt.conj(g) is g
    c = gt.tensor([1 + 2j], device=device)
    assert gt.conj(c).tolist() == [1 - 2j]
    assert c.conj().tolist() == [1 - 2j]


# -- activations -----------------------------------------------------------------------------
TF = torch.nn.functional if torch is not None else None
ACTIVATIONS = {
    "relu": (lambda x: torch.relu(x), lambda x: gt.relu(x)),
    "gelu": (lambda x: TF.gelu(x), lambda x: gt.gelu(x)),
    "gelu_tanh": (lambda x: TF.gelu(x, approximate="tanh"),
                  lambda x: gt.gelu(x, approximate="tanh")),
    "silu": (lambda x: TF.silu(x), lambda x: gt.silu(x)),
    "softplus": (lambda x: TF.softplus(x), lambda x: gt.softplus(x)),
    "softplus_beta": (lambda x: TF.softplus(x, beta=2.0, threshold=1.5),
                      lambda x: gt.softplus(x, beta=2.0, threshold=1.5)),
    "leaky_relu": (lambda x: TF.leaky_relu(x), lambda x: gt.leaky_relu(x)),
    "leaky_relu_02": (lambda x: TF.leaky_relu(x, 0.2), lambda x: gt.leaky_relu(x, 0.2)),
    "elu": (lambda x: TF.elu(x), lambda x: gt.elu(x)),
    "elu_alpha": (lambda x: TF.elu(x, alpha=0.5), lambda x: gt.elu(x, alpha=0.5)),
    "hardtanh": (lambda x: TF.hardtanh(x), lambda x: gt.hardtanh(x)),
    "hardtanh_range": (lambda x: TF.hardtanh(x, -2.0, 0.5), lambda x: gt.hardtanh(x, -2.0, 0.5)),
    "sigmoid": (lambda x: torch.sigmoid(x), lambda x: gt.sigmoid(x)),
    "tanh": (lambda x: torch.tanh(x), lambda x: gt.tanh(x)),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [F, H, BF], ids=str)
def test_activation(name: str, dtype: gt.dtype, device: str) -> None:
    tf, gf = ACTIVATIONS[name]
    helper_test_op([(3, 5)], tf, gf, device=device, dtype=dtype, low=-4, high=4)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_special_values(name: str, device: str) -> None:
    tf, gf = ACTIVATIONS[name]
    vals = [v for v in SPECIALS if not (name.startswith("gelu") and v == INF)]  # torch: nan
    t, g = pair(vals, F, device)
    compare(tf, gf, [t], [g])


def test_activation_float64(device: str) -> None:
    for name in ("gelu", "elu_alpha"):
        tf, gf = ACTIVATIONS[name]
        helper_test_op([(5,)], tf, gf, device=device, dtype=F64, low=-4, high=4)


def test_activation_int_inputs(device: str) -> None:
    t, g = pair([-3, 0, 2, 1, 5], I64, device)
    assert_close(gt.relu(g), torch.relu(t))
    assert_close(gt.hardtanh(g, -2, 1), TF.hardtanh(t, -2, 1))
    for name in ("gelu", "silu", "softplus", "leaky_relu", "elu"):
        with pytest.raises(RuntimeError):
            ACTIVATIONS[name][1](g)
    with pytest.raises(RuntimeError):
        gt.relu(gt.tensor([True], device=device))
    with pytest.raises(RuntimeError):
        gt.hardtanh(gt.tensor([True], device=device))
    with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
        gt.hardtanh(gt.tensor([1], dtype=U8, device=device))


def test_activation_inplace_and_complex(device: str) -> None:
    t, g = rand_pair((3, 5), F, device, -3, 3)
    for name in ("relu", "sigmoid", "tanh"):
        g2, t2 = g.clone(), t.clone()
        assert getattr(g2, name + "_")() is g2
        getattr(t2, name + "_")()
        assert_close(g2, t2)
    tc, gc = pair([1 + 1j, -2 + 0.5j, 0.5, 3j, -1, 2 + 2j, 1j], C64, device)
    compare(TF.silu, gt.silu, [tc], [gc], atol=1e-5, rtol=1e-5)   # sigmoid's complex kernel
    with pytest.raises(TypeError):
        gt.gelu(g, approximate="tanh", bogus=1)


# -- binary arithmetic -----------------------------------------------------------------------
def _div(mode: str | None) -> tuple[Callable, Callable]:
    return partial(torch.div, rounding_mode=mode), partial(gt.div, rounding_mode=mode)


BINARY = {
    "add": (torch.add, gt.add),
    "add_alpha": (partial(torch.add, alpha=2), partial(gt.add, alpha=2)),
    "sub": (torch.sub, gt.sub),
    "sub_alpha": (partial(torch.sub, alpha=3), partial(gt.sub, alpha=3)),
    "mul": (torch.mul, gt.mul),
    "div": _div(None), "div_trunc": _div("trunc"), "div_floor": _div("floor"),
    "true_divide": (torch.true_divide, gt.true_divide),
    "floor_divide": (torch.floor_divide, gt.floor_divide),
    "remainder": (torch.remainder, gt.remainder),
    "fmod": (torch.fmod, gt.fmod),
    "pow": (torch.pow, gt.pow),
    "atan2": (torch.atan2, gt.atan2),
    "maximum": (torch.maximum, gt.maximum),
    "minimum": (torch.minimum, gt.minimum),
}
# dtypes whose values are checked per op. add_alpha/sub_alpha, div/true_divide and
# div_floor/floor_divide share kernels (alpha is a kernel argument); ints divide in float32.
BINARY_DTYPES = {
    "add": [F, H, BF, I64, B, C64], "add_alpha": [F, I64], "sub": [F, I32],
    "sub_alpha": [F, H], "mul": [F, I64, C64], "div": [F, H, I64, C64],
    "div_trunc": [F, I64], "div_floor": [F, I64], "true_divide": [F, I32],
    "floor_divide": [F, BF, I64], "remainder": [F, I64], "fmod": [F, I64],
    "pow": [F, I64, C64], "atan2": [F, I64], "maximum": [F, H], "minimum": [F, I64],
}
NONZERO_RHS = {"div", "div_trunc", "div_floor", "true_divide", "floor_divide", "remainder",
               "fmod"}
REFLECTED = ["sub", "div", "remainder", "pow"]   # scalar on the left: 2 - x


def binary_inputs(name: str, dtype: gt.dtype, shape_a: tuple, shape_b: tuple,
                  device: str) -> tuple[list, list]:
    """Operands of a binary op: divisors nonzero (both signs), pow bases positive for floats."""
    low_a = 0.2 if name == "pow" and dtype.category >= 2 else -6
    ta, ga = rand_pair(shape_a, dtype, device, low_a, 6, seed=1)
    low, high = (1, 4) if name in NONZERO_RHS or name == "pow" else (-6, 6)
    tb, gb = rand_pair(shape_b, dtype, device, low, high, seed=2)
    if name in NONZERO_RHS and dtype.is_signed:
        sign = np.where(np.arange(math.prod(shape_b)) % 2 == 0, 1, -1).reshape(shape_b)
        tb, gb = pair(tb.float().numpy() * sign if dtype is BF else tb.numpy() * sign, dtype,
                      device)
    return [ta, tb], [ga, gb]


@pytest.mark.parametrize("name,dtype", [(n, d) for n, ds in BINARY_DTYPES.items() for d in ds],
                         ids=str)
def test_binary(name: str, dtype: gt.dtype, device: str) -> None:
    tf, gf = BINARY[name]
    t_args, g_args = binary_inputs(name, dtype, (3, 5), (3, 5), device)
    compare(tf, gf, t_args, g_args)


@pytest.mark.parametrize("name", BINARY)
def test_binary_special_values_grid(name: str, device: str) -> None:
    """Every pair of special values (nan, +-inf, +-0, ...) at once: a column against a row,
    which also checks broadcasting in both operands."""
    tf, gf = BINARY[name]
    ta, ga = pair(np.array(SPECIALS)[:, None], F, device)
    tb, gb = pair(np.array(SPECIALS + [2.0, -2.0])[None, :], F, device)
    compare(tf, gf, [ta, tb], [ga, gb], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", BINARY)
def test_binary_python_scalars(name: str, device: str) -> None:
    tf, gf = BINARY[name]
    t_args, g_args = binary_inputs(name, F, (3, 5), (3, 5), device)
    for s in (2, -2.5):
        compare(tf, gf, [t_args[0], s], [g_args[0], s])
        if name in REFLECTED:
            compare(tf, gf, [s, t_args[1]], [s, g_args[1]])
    compare(tf, gf, [t_args[0], t_args[1][1, 2]], [g_args[0], g_args[1][1, 2]])   # 0-dim


def test_binary_int_scalar_patterns(device: str) -> None:
    ta, ga = rand_pair((3, 5), I64, device, -9, 9)
    for op in (operator.add, operator.floordiv, operator.pow):
        compare(partial(_rop, op, 3), partial(_rop, op, 3), [ta], [ga])
    compare(lambda a: a / 2, lambda a: a / 2, [ta], [ga])       # int / int -> float32
    compare(lambda a: a + 1.5, lambda a: a + 1.5, [ta], [ga])   # int + float -> float32
    compare(lambda a: a + True, lambda a: a + True, [ta], [ga])
    compare(lambda a: a - 2.5, lambda a: a - 2.5, [ta], [ga])


def test_integer_division_semantics(device: str) -> None:
    ta, ga = pair([7, -7, 7, -7, 0, 9, 1, -9, 9, -9, 8, -8, 3, 5, 6], I64, device)
    tb, gb = pair([2, 2, -2, -2, 3, -1, -1, 4, -4, -4, 3, 3, 7, -7, 1], I64, device)
    for name in ("div", "div_trunc", "div_floor", "floor_divide", "remainder", "fmod"):
        tf, gf = BINARY[name]
        compare(tf, gf, [ta.reshape(3, 5), tb.reshape(3, 5)], [ga.reshape(3, 5),
                                                                gb.reshape(3, 5)])
    # INT_MIN / -1 wraps to INT_MIN (PyTorch's scalar path; its tensor path traps with SIGFPE,
    # so the tensor-divisor case is checked against the value, not against torch).
    tm, gm = pair([[-(2 ** 63), 5, 7]], I64, device)
    compare(lambda a: a // -1, lambda a: a // -1, [tm], [gm])
    compare(lambda a: a % -1, lambda a: a % -1, [tm], [gm])
    gm, minus_one = gm.expand(3, 3).contiguous(), gt.full((3, 3), -1, device=device)
    for mode in ("trunc", "floor"):
        assert gt.div(gm, minus_one, rounding_mode=mode)[0].tolist() == [-(2 ** 63), -5, -7]
    assert gt.fmod(gm, minus_one)[0].tolist() == [0, 0, 0]


def test_integer_pow(device: str) -> None:
    ta, ga = pair([[0, 1, -1, 2, -3], [7, 3, 2, 5, -2], [0, 1, 4, 9, 3]], I64, device)
    tb, gb = pair([[0, 5, 3, 62, 3], [2, 41, 0, 1, 63], [3, 64, 2, 2, 40]], I64, device)
    compare(torch.pow, gt.pow, [ta, tb], [ga, gb])   # 3 ** 41, 3 ** 40 wrap around
    t8, g8 = pair([[2, -2, 3, 1, 0], [5, 6, 7, -1, -3], [2, 2, 2, 2, 2]], I8, device)
    compare(lambda a: a * a * a, lambda a: a * a * a, [t8], [g8])   # wraps in int8
    compare(lambda a: a ** 0.5, lambda a: a ** 0.5, [ta], [ga])     # float result


def test_complex_arithmetic(device: str) -> None:
    ta, ga = pair([[1 + 2j, -3j, 2.5, 0j, 1 + 1j]] * 3, C64, device)
    tb, gb = pair([[2 - 1j, 0j, 0j, 0j, 1 - 1j]] * 3, C64, device)
    for name in ("add", "sub", "mul", "div"):
        tf, gf = BINARY[name]
        compare(tf, gf, [ta, tb], [ga, gb])   # includes division by 0j: inf/nan, no raise
    tp, gp = pair([[1 + 2j, 0j, 0j, 2.0, 1j]] * 3, C64, device)
    te, ge = pair([[1 + 1j, 2 + 0j, 0.5 - 1j, -1 + 0.5j, 2j]] * 3, C64, device)
    compare(torch.pow, gt.pow, [tp, te], [gp, ge], atol=1e-5, rtol=1e-5)   # 0 ** z = 0
    compare(torch.reciprocal, gt.reciprocal, [tb], [gb])
    ti, gi = pair([[0, 1, 2, -3, 4]] * 3, I64, device)
    compare(lambda a: a.to(torch.complex64) / (1 + 2j), lambda a: a.to(C64) / (1 + 2j), [ti],
            [gi])


# -- clamp, lerp, where ----------------------------------------------------------------------
def test_clamp(device: str) -> None:
    for dtype in (F, H, I64):
        t, g = rand_pair((3, 5), dtype, device, -5, 5)
        for lo, hi in [(-1, 1), (0, None), (None, 2), (2, -1)]:
            compare(partial(torch.clamp, min=lo, max=hi), partial(gt.clamp, min=lo, max=hi),
                    [t], [g])
            compare(partial(torch.clip, min=lo, max=hi), partial(gt.clip, min=lo, max=hi),
                    [t], [g])
        compare(partial(torch.clamp_min, min=1), partial(gt.clamp_min, min=1), [t], [g])
        compare(lambda x: x.clamp_max(1), lambda x: x.clamp_max(1), [t], [g])
    ti, gi = rand_pair((3, 5), I64, device, -5, 5)
    compare(partial(torch.clamp, min=0.5), partial(gt.clamp, min=0.5), [ti], [gi])   # float


def test_clamp_tensor_bounds_and_nan(device: str) -> None:
    t, g = rand_pair((3, 5), F, device, -3, 3)
    tlo, glo = rand_pair((3, 5), F, device, -2, 0, seed=5)
    thi, ghi = rand_pair((3, 5), F, device, 0, 2, seed=6)
    compare(torch.clamp, gt.clamp, [t, tlo, thi], [g, glo, ghi])
    compare(lambda x, lo: torch.clamp(x, min=lo), lambda x, lo: gt.clamp(x, min=lo), [t, tlo],
            [g, glo])
    compare(lambda x, hi: x.clamp(max=hi), lambda x, hi: x.clamp(max=hi), [t, thi], [g, ghi])
    ts, gs = pair(SPECIALS, F, device)
    compare(partial(torch.clamp, min=-1, max=1), partial(gt.clamp, min=-1, max=1), [ts], [gs])
    compare(partial(torch.clamp, min=NAN), partial(gt.clamp, min=NAN), [ts], [gs])


def test_clamp_inplace_and_out(device: str) -> None:
    t, g = rand_pair((3, 5), F, device, -3, 3)
    for method, args in [("clamp_", (-1, 1)), ("clip_", (0, None)), ("clamp_min_", (0.5,)),
                         ("clamp_max_", (0.5,))]:
        g2, t2 = g.clone(), t.clone()
        assert getattr(g2, method)(*args) is g2
        getattr(t2, method)(*args)
        assert_close(g2, t2)
    out = gt.empty(3, 5, device=device)
    assert gt.clamp(g, -1, 1, out=out) is out
    assert_close(out, torch.clamp(t, -1, 1))
    gi = gt.tensor([1, 5, -3], device=device)
    with pytest.raises(RuntimeError, match="can't be cast"):
        gi.clamp_(0.5)
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        gt.clamp(g)
    with pytest.raises(RuntimeError):
        gt.clamp(gt.tensor([1 + 1j], device=device), 0, 1)


def test_lerp(device: str) -> None:
    for dtype in (F, H, F64):
        ta, ga = rand_pair((3, 5), dtype, device, -3, 3, seed=1)
        tb, gb = rand_pair((3, 5), dtype, device, -3, 3, seed=2)
        tw, gw = rand_pair((3, 5), dtype, device, -0.5, 1.5, seed=3)   # both formula branches
        compare(torch.lerp, gt.lerp, [ta, tb, tw], [ga, gb, gw])
        if dtype is F:
            for w in (0.3, 0.75):
                compare(partial(torch.lerp, weight=w), partial(gt.lerp, weight=w), [ta, tb],
                        [ga, gb])
    ta, ga = rand_pair((3, 5), F, device, seed=1)
    tb, gb = rand_pair((3, 5), F, device, seed=2)
    w64 = (torch.tensor(0.25, dtype=torch.float64), gt.tensor(0.25, dtype=F64, device=device))
    compare(lambda a, b: torch.lerp(a, b, w64[0]), lambda a, b: gt.lerp(a, b, w64[1]), [ta, tb],
            [ga, gb])   # a 0-dim weight may be float64
    compare(lambda a, b: a.lerp(b, 0.5), lambda a, b: a.lerp(b, 0.5), [ta, tb], [ga, gb])
    g2, t2 = ga.clone(), ta.clone()
    assert g2.lerp_(gb, 0.6) is g2
    assert_close(g2, t2.lerp_(tb, 0.6))


def test_lerp_errors(device: str) -> None:
    a = gt.ones(3, device=device)
    with pytest.raises(RuntimeError, match="expected dtype Float for `end`"):
        gt.lerp(a, gt.ones(3, dtype=F64, device=device), 0.5)
    with pytest.raises(RuntimeError, match="for `weight`"):
        gt.lerp(a, a, gt.ones(3, dtype=F64, device=device))
    ints = gt.ones(3, dtype=I64, device=device)
    with pytest.raises(RuntimeError):
        gt.lerp(ints, ints, 0.5)


def test_where(device: str) -> None:
    tc, gc = rand_pair((3, 5), B, device)
    for dtype in (F, I64, H):
        ta, ga = rand_pair((3, 5), dtype, device, -5, 5, seed=1)
        tb, gb = rand_pair((3, 5), dtype, device, -5, 5, seed=2)
        compare(torch.where, gt.where, [tc, ta, tb], [gc, ga, gb])
    ta, ga = rand_pair((3, 5), F, device, seed=1)
    t8, g8 = rand_pair((3, 5), I8, device, -5, 5, seed=1)
    for x, y in [(ta, 0.5), (2, t8), (2.5, t8), (1, 2.5), (1, 2)]:   # Python scalar branches
        gx = ga if x is ta else g8 if x is t8 else x
        gy = ga if y is ta else g8 if y is t8 else y
        compare(torch.where, gt.where, [tc, x, y], [gc, gx, gy])
    compare(lambda c, a: torch.where(c, a, torch.tensor(2.0, dtype=torch.float64)),
            lambda c, a: gt.where(c, a, gt.tensor(2.0, dtype=F64, device=device)), [tc, ta],
            [gc, ga])
    compare(lambda c, a: a.where(c, -1.0), lambda c, a: a.where(c, -1.0), [tc, ta], [gc, ga])


def test_where_errors(device: str) -> None:
    a = gt.ones(3, device=device)
    with pytest.raises(RuntimeError, match="boolean tensor.*Long"):
        gt.where(gt.tensor([1, 0, 1], device=device), a, a)
    with pytest.raises(RuntimeError, match=r"\[2\].*\[3\]"):
        gt.where(gt.tensor([True, False], device=device), a, a)


# -- comparisons, logical and bitwise --------------------------------------------------------
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]


@pytest.mark.parametrize("name", COMPARE)
def test_comparison(name: str, device: str) -> None:
    tf, gf = getattr(torch, name), getattr(gt, name)
    ta, ga = pair(np.array(SPECIALS)[:, None], F, device)   # every pair, ties and nan included
    tb, gb = pair(np.array(SPECIALS + [2.0, -2.0])[None, :], F, device)
    compare(tf, gf, [ta, tb], [ga, gb])
    tr, gr = rand_pair((3, 5), F, device, -2, 2, seed=1)
    tr, gr = tr.round(), gr.round()   # ties happen
    compare(partial(_rop, tf, 1), partial(_rop, gf, 1), [tr], [gr])
    ti, gi = rand_pair((3, 5), I64, device, -2, 2, seed=1)
    compare(partial(_rop, tf, 0.5), partial(_rop, gf, 0.5), [ti], [gi])   # compares in float
    compare(tf, gf, [ti[:, :1], tb], [gi[:, :1], gb])                         # int vs float


def test_comparison_inplace_complex_and_bool(device: str) -> None:
    tr, gr = rand_pair((3, 5), F, device, -2, 2, seed=1)
    tr, gr = tr.round(), gr.round()
    g2, t2 = gr.clone(), tr.clone()
    assert g2.lt_(0.0) is g2   # in place keeps the float dtype
    assert_close(g2, t2.lt_(0.0))
    tc, gc = pair([1 + 1j, 2j, 3], C64, device)
    td, gd = pair([1 + 1j, 2, 3], C64, device)
    compare(torch.eq, gt.eq, [tc, td], [gc, gd])
    compare(torch.ne, gt.ne, [tc, td], [gc, gd])
    with pytest.raises(RuntimeError):
        gt.lt(gc, gd)
    tb, gb = rand_pair((3, 5), B, device)
    tb2, gb2 = rand_pair((3, 5), B, device, seed=3)
    compare(torch.lt, gt.lt, [tb, tb2], [gb, gb2])


@pytest.mark.parametrize("name", LOGICAL)
def test_logical(name: str, device: str) -> None:
    tf, gf = getattr(torch, name), getattr(gt, name)
    for dtype in (B, F):
        ta, ga = rand_pair((3, 5), dtype, device, -1, 1, seed=1)
        tb, gb = rand_pair((3, 5), dtype, device, -1, 1, seed=2)
        if dtype is F:
            ta, ga = ta.round(), ga.round()
        compare(tf, gf, [ta, tb], [ga, gb])
    ti, gi = rand_pair((3, 5), I64, device, -1, 1, seed=1)
    compare(tf, gf, [ti, tb], [gi, gb])   # mixed dtypes compute in float32
    if name == "logical_and":   # in place keeps the float dtype
        g2, t2 = ga.clone(), ta.clone()
        assert getattr(g2, name + "_")(gb) is g2
        assert_close(g2, getattr(t2, name + "_")(tb))


def test_logical_not_inplace(device: str) -> None:
    t, g = pair([0.0, 2.0, NAN, -1.0, 0.5], F, device)
    compare(torch.logical_not, gt.logical_not, [t], [g])
    g2, t2 = g.clone(), t.clone()
    assert g2.logical_not_() is g2
    assert_close(g2, t2.logical_not_())


@pytest.mark.parametrize("name", BITWISE)
def test_bitwise(name: str, device: str) -> None:
    tf, gf = getattr(torch, name), getattr(gt, name)
    for dtype in (I64, B):
        ta, ga = rand_pair((3, 5), dtype, device, -100, 100, seed=1)
        tb, gb = rand_pair((3, 5), dtype, device, -100, 100, seed=2)
        compare(tf, gf, [ta, tb], [ga, gb])
    compare(partial(_rop, tf, 6), partial(_rop, gf, 6), [ta], [ga])   # I64 with a scalar
    tf8, gf8 = rand_pair((3, 5), I8, device, -100, 100, seed=1)
    compare(tf, gf, [tf8.to(torch.int64), tb], [gf8.to(I64), gb])   # int64 with bool


def test_shifts(device: str) -> None:
    ta, ga = pair([[1, -8, 5, 3, -1], [7, 1, -2, 9, 100], [2, 3, 4, -5, 6]], I64, device)
    tb, gb = pair([[0, 1, 3, 62, 63], [64, -1, 70, 2, 4], [5, 6, 7, 8, 60]], I64, device)
    for tf, gf in [(torch.bitwise_left_shift, gt.bitwise_left_shift),   # out-of-range too
                   (torch.bitwise_right_shift, gt.bitwise_right_shift),
                   (operator.lshift, operator.lshift), (operator.rshift, operator.rshift)]:
        compare(tf, gf, [ta, tb], [ga, gb])
    t8, g8 = pair([[1, -8, 5, 100, -128]] * 3, I8, device)
    s8, h8 = pair([[1, 7, 8, 3, 9]] * 3, I8, device)
    compare(torch.bitwise_left_shift, gt.bitwise_left_shift, [t8, s8], [g8, h8])
    compare(torch.bitwise_right_shift, gt.bitwise_right_shift, [t8, s8], [g8, h8])
    compare(lambda a: a << 2, lambda a: a << 2, [ta], [ga])
    compare(lambda a: a >> 2, lambda a: a >> 2, [ta], [ga])


def test_bitwise_errors(device: str) -> None:
    f = gt.ones(3, device=device)
    for fn in (lambda: f & f, lambda: f | 1, lambda: f ^ f, lambda: gt.bitwise_not(f),
               lambda: f << 1, lambda: gt.ones(3, dtype=I64, device=device) & 1.5):
        with pytest.raises(RuntimeError):
            fn()
    with pytest.raises((RuntimeError, TypeError)):
        _ = ~f
    b = gt.tensor([True], device=device)
    with pytest.raises(RuntimeError):
        _ = b << b


# -- closeness and equality ------------------------------------------------------------------
def test_isclose_allclose(device: str) -> None:
    ta, ga = pair([1.0, 1.0 + 1e-6, 1.0 + 1e-3, NAN, INF, -INF, INF, 0.0, 1e-9], F, device)
    tb, gb = pair([1.0, 1.0, 1.0, NAN, INF, INF, 1.0, 1e-9, 0.0], F, device)
    compare(torch.isclose, gt.isclose, [ta, tb], [ga, gb])
    for kw in [{"equal_nan": True}, {"rtol": 1e-2}, {"atol": 1e-2, "rtol": 0.0},
               {"rtol": 0.0, "atol": 0.0}]:
        compare(partial(torch.isclose, **kw), partial(gt.isclose, **kw), [ta, tb], [ga, gb])
        assert gt.allclose(ga, gb, **kw) == torch.allclose(ta, tb, **kw)
    assert ga.isclose(gb).tolist() == ta.isclose(tb).tolist()
    assert gt.allclose(ga[:2], gb[:2]) and ga[:2].allclose(gb[:2])
    assert not gt.allclose(ga, gb)
    ti, gi = pair([1, 5, 100], I64, device)
    tj, gj = pair([1, 6, 102], I64, device)
    compare(partial(torch.isclose, atol=1), partial(gt.isclose, atol=1), [ti, tj], [gi, gj])
    tc, gc = pair([1 + 1j, 2 + 2j, complex(NAN, 0)], C64, device)
    td, gd = pair([1 + 1j, 2 + 2.1j, complex(NAN, 0)], C64, device)
    compare(partial(torch.isclose, equal_nan=True), partial(gt.isclose, equal_nan=True),
            [tc, td], [gc, gd])


def test_isclose_errors(device: str) -> None:
    a = gt.ones(2, device=device)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        gt.isclose(a, a.double())
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero"):
        gt.isclose(a, a, rtol=-1.0)
    with pytest.raises(RuntimeError, match="atol must be greater than or equal to zero"):
        gt.allclose(a, a, atol=-1.0)


def test_equal(device: str) -> None:
    ta, ga = rand_pair((3, 5), F, device)
    assert gt.equal(ga, ga.clone()) is True
    assert ga.equal(ga.clone()) is True
    gb = ga.clone()
    gb[1, 2] = 7.0
    assert gt.equal(ga, gb) is False
    assert gt.equal(ga, ga[:2]) is False
    assert gt.equal(ga, ga.reshape(5, 3)) is False
    n = gt.tensor([NAN], device=device)
    assert gt.equal(n, n) is torch.equal(torch.tensor([NAN]), torch.tensor([NAN]))
    assert gt.equal(gt.tensor([1, 2], device=device), gt.tensor([1.0, 2.0], device=device)) \
        is torch.equal(torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))


# -- float_power -----------------------------------------------------------------------------
def test_float_power(device: str) -> None:
    ta, ga = rand_pair((3, 5), F, device, 0.5, 3, seed=1)
    ti, gi = rand_pair((3, 5), I64, device, -3, 3, seed=2)
    compare(torch.float_power, gt.float_power, [ta, ti], [ga, gi])   # float64 result
    for e in (2, -1, 0.5):   # int ** negative is fine here: it computes in float64
        compare(partial(torch.float_power, exponent=e), partial(gt.float_power, exponent=e),
                [ti], [gi])
    compare(lambda a: torch.float_power(2, a), lambda a: gt.float_power(2, a), [ti], [gi])
    compare(lambda a: a.float_power(0.5), lambda a: a.float_power(0.5), [ta], [ga])
    compare(lambda a: torch.float_power(a, 1 + 1j), lambda a: gt.float_power(a, 1 + 1j), [ta],
            [ga])   # complex128 result
    out = gt.empty(3, 5, dtype=F64, device=device)
    assert gt.float_power(ga, 2, out=out) is out
    assert_close(out, torch.float_power(ta, 2))
    with pytest.raises(RuntimeError, match="requires dtype Double"):
        gt.float_power(ga, 2, out=gt.empty(3, 5, device=device))
    g64, t64 = ga.double(), ta.double()
    assert g64.float_power_(3) is g64
    assert_close(g64, t64.float_power_(3))
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float"):
        ga.float_power_(2)


# -- operators -------------------------------------------------------------------------------
BINARY_OPERATORS = [operator.add, operator.sub, operator.mul, operator.truediv,
                    operator.floordiv, operator.mod, operator.pow]
COMPARE_OPERATORS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt,
                     operator.ge]
INT_OPERATORS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]
INPLACE_OPERATORS = {operator.add: operator.iadd, operator.sub: operator.isub,
                     operator.mul: operator.imul, operator.truediv: operator.itruediv,
                     operator.floordiv: operator.ifloordiv, operator.mod: operator.imod,
                     operator.pow: operator.ipow, operator.and_: operator.iand,
                     operator.or_: operator.ior, operator.xor: operator.ixor,
                     operator.lshift: operator.ilshift, operator.rshift: operator.irshift}


@pytest.mark.parametrize("op", BINARY_OPERATORS + COMPARE_OPERATORS + INT_OPERATORS,
                         ids=lambda o: o.__name__)
def test_operators(op: Callable, device: str) -> None:
    dtype = I64 if op in INT_OPERATORS else F
    ta, ga = rand_pair((3, 5), dtype, device, 1, 3, seed=1)
    tb, gb = rand_pair((3, 5), dtype, device, 1, 3, seed=2)
    compare(op, op, [ta, tb], [ga, gb])
    compare(partial(_rop, op, 2), partial(_rop, op, 2), [ta], [ga])   # x - 2
    compare(op, op, [ta, tb[1, 2]], [ga, gb[1, 2]])                  # 0-dim operand
    if op not in (operator.add, operator.mul, *INT_OPERATORS):
        compare(partial(op, 2), partial(op, 2), [tb], [gb])           # reflected: 2 - x


def test_unary_operators(device: str) -> None:
    ta, ga = rand_pair((3, 5), F, device)
    compare(operator.neg, operator.neg, [ta], [ga])
    compare(abs, abs, [ta], [ga])
    assert (+ga) is ga
    ti, gi = rand_pair((3, 5), I64, device, -9, 9)
    compare(operator.invert, operator.invert, [ti], [gi])
    compare(operator.neg, operator.neg, [ti], [gi])
    tb, gb = rand_pair((3, 5), B, device)
    compare(operator.invert, operator.invert, [tb], [gb])
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        _ = -gb


@pytest.mark.parametrize("op", list(INPLACE_OPERATORS), ids=lambda o: o.__name__)
def test_inplace_operators(op: Callable, device: str) -> None:
    iop = INPLACE_OPERATORS[op]
    dtype = I64 if op in INT_OPERATORS else F
    ta, ga = rand_pair((3, 5), dtype, device, 1, 3, seed=1)
    tb, gb = rand_pair((3, 5), dtype, device, 1, 3, seed=2)
    for other_t, other_g in [(tb, gb), (2, 2)]:
        g2, t2 = ga.clone(), ta.clone()
        ptr = g2.data_ptr()
        g3 = iop(g2, other_g)
        assert g3 is g2 and g2.data_ptr() == ptr
        assert_close(g2, iop(t2, other_t))


# -- in-place methods and out= ---------------------------------------------------------------
INPLACE_METHODS = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder",
                   "fmod", "pow", "atan2", "square", "lerp"]


@pytest.mark.parametrize("name", INPLACE_METHODS)
def test_inplace_methods(name: str, device: str) -> None:
    ta, ga = rand_pair((3, 5), F, device, 0.5, 3, seed=1)
    tb, gb = rand_pair((3, 5), F, device, 0.5, 3, seed=2)
    args_t, args_g = ([], []) if name == "square" else ([tb], [gb])
    if name == "lerp":
        args_t, args_g = [tb, 0.3], [gb, 0.3]
    g2, t2 = ga.clone(), ta.clone()
    assert getattr(g2, name + "_")(*args_g) is g2
    assert_close(g2, getattr(t2, name + "_")(*args_t))


def test_inplace_on_views(device: str) -> None:
    # A transposed or strided self is written through its view; the base sees the change.
    ta, ga = rand_pair((5, 3), F, device, 0.5, 3, seed=1)
    tb, gb = rand_pair((3, 5), F, device, 0.5, 3, seed=2)
    g2, t2 = ga.clone(), ta.clone()
    g2.t().mul_(gb)
    t2.t().mul_(tb)
    assert_close(g2, t2)
    g2[:, ::2].add_(1.0)
    t2[:, ::2].add_(1.0)
    assert_close(g2, t2)
    g2[1].clamp_(0, 1)
    t2[1].clamp_(0, 1)
    assert_close(g2, t2)


def test_inplace_keyword_variants(device: str) -> None:
    ta, ga = rand_pair((3, 5), F, device, 1, 3, seed=1)
    tb, gb = rand_pair((3, 5), F, device, 1, 3, seed=2)
    for call in [lambda x, y: x.add_(y, alpha=2), lambda x, y: x.sub_(y, alpha=0.5),
                 lambda x, y: x.div_(y, rounding_mode="floor"),
                 lambda x, y: x.div_(y, rounding_mode="trunc"), lambda x, y: x.divide_(y),
                 lambda x, y: x.clip_(y, None)]:
        g2, t2 = ga.clone(), ta.clone()
        assert call(g2, gb) is g2
        assert_close(g2, call(t2, tb))
    gi, ti = gt.tensor([7, -7, 9], device=device), torch.tensor([7, -7, 9])
    assert_close(gi.div_(2, rounding_mode="floor"), ti.div_(2, rounding_mode="floor"))


def test_inplace_errors(device: str) -> None:
    gi = gt.tensor([1, 2, 3], device=device)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        gi.add_(1.5)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        gi.div_(2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        gi.mul_(gt.ones(3, device=device))
    with pytest.raises(RuntimeError, match="can't be cast"):
        gi += 0.5
    gb = gt.tensor([True, False], device=device)
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired "
                                           "output type Bool"):
        gb.add_(1)
    with pytest.raises(RuntimeError, match="can't be cast"):
        gb.square_()
    gf = gt.ones(2, 3, device=device)
    with pytest.raises(RuntimeError, match=r"output with shape \[2, 3\] doesn't match the "
                                           r"broadcast shape \[4, 2, 3\]"):
        gf.add_(gt.ones(4, 2, 3, device=device))
    assert gi.tolist() == [1, 2, 3] and gf.tolist() == [[1.0] * 3] * 2


OUT_CASES = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "pow": 2, "maximum": 2, "exp": 1, "neg": 1,
    "eq": 2, "logical_and": 2, "bitwise_and": 2, "atan2": 2, "sigmoid": 1, "square": 1,
}


@pytest.mark.parametrize("name", OUT_CASES)
def test_out(name: str, device: str) -> None:
    dtype = I64 if name == "bitwise_and" else F
    ta, ga = rand_pair((3, 5), dtype, device, 0.5, 3, seed=1)
    tb, gb = rand_pair((3, 5), dtype, device, 0.5, 3, seed=2)
    n = OUT_CASES[name]
    t_in, g_in = [ta, tb][:n], [ga, gb][:n]
    expected = getattr(torch, name)(*t_in)
    out = gt.empty(3, 5, dtype=getattr(gt, str(expected.dtype)[6:]), device=device)
    assert getattr(gt, name)(*g_in, out=out) is out
    assert_close(out, expected)
    out0 = gt.empty(0, dtype=out.dtype, device=device)   # an empty out is resized
    assert getattr(gt, name)(*g_in, out=out0) is out0
    assert_close(out0, expected)


def test_out_of_composites(device: str) -> None:
    ta, ga = rand_pair((3, 5), F, device, 0.5, 3, seed=1)
    tb, gb = rand_pair((3, 5), F, device, 0.5, 3, seed=2)
    tc, gc = ta > 1.5, ga > 1.5
    for tf, gf, t_in, g_in in [(torch.where, gt.where, [tc, ta, tb], [gc, ga, gb]),
                               (torch.clamp, gt.clamp, [ta, 1.0, 2.0], [ga, 1.0, 2.0]),
                               (torch.lerp, gt.lerp, [ta, tb, 0.3], [ga, gb, 0.3]),
                               (*_div("floor"), [ta, tb], [ga, gb])]:
        out = gt.empty(3, 5, device=device)
        assert gf(*g_in, out=out) is out
        assert_close(out, tf(*t_in))


def test_out_dtype_and_shape_rules(device: str) -> None:
    a = gt.ones(3, device=device)
    out64 = gt.empty(3, dtype=F64, device=device)
    assert_close(gt.add(a, a, out=out64), torch.full((3,), 2.0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        gt.add(a, a, out=gt.empty(3, dtype=I64, device=device))
    wrong = gt.empty(2, device=device)
    with pytest.warns(UserWarning, match="was resized"):  # PyTorch resizes, with a warning
        gt.add(a, a, out=wrong)
    assert wrong.shape == (3,) and wrong.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="can't be cast"):
        gt.exp(a, out=gt.empty(3, dtype=I64, device=device))
    outb = gt.empty(3, dtype=F, device=device)
    gt.eq(a, a, out=outb)   # bool results may go to a float out
    assert outb.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError):
        gt.add(a, a, out=[1, 2, 3])


def test_out_noncontiguous(device: str) -> None:
    ta, ga = rand_pair((4, 3), F, device)
    big = gt.zeros(4, 6, device=device)
    out = big[:, ::2]
    gt.mul(ga, 2.0, out=out)
    assert_close(out, ta * 2)
    assert big[:, 1::2].tolist() == [[0.0] * 3] * 4


# -- layouts, shapes and broadcasting --------------------------------------------------------
@pytest.mark.parametrize("name", ["exp"])   # the layout code is the same for every op
def test_unary_noncontiguous(name: str, device: str) -> None:
    helper_test_op([(3, 5)], _t(name), _g(name), device=device, noncontig=True)
    ta, ga = rand_pair((5, 3), F, device)
    compare(_t(name), _g(name), [ta.t()], [ga.t()])                  # transposed
    compare(_t(name), _g(name), [ta[::2, 1:]], [ga[::2, 1:]])        # sliced


@pytest.mark.parametrize("name", ["maximum"])
def test_binary_noncontiguous(name: str, device: str) -> None:
    tf, gf = BINARY[name]
    t_args, g_args = binary_inputs(name, F, (3, 5), (3, 5), device)
    compare(tf, gf, t_args, [noncontiguous(g_args[0]), g_args[1].t().contiguous().t()])


def test_broadcast_shapes(device: str) -> None:
    shapes = [((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 1), (1, 4)), ((3, 4), ()),
              ((), (3, 4)), ((), ()), ((0, 4), (4,)), ((0, 1), (5,)), ((1,), (2, 3, 1))]
    for sa, sb in shapes:
        ta, ga = rand_pair(sa, F, device, seed=1)
        tb, gb = rand_pair(sb, F, device, seed=2)
        compare(operator.add, operator.add, [ta, tb], [ga, gb])
    tc, gc = rand_pair((3, 1), B, device)
    ta, ga = rand_pair((4,), F, device, seed=1)
    compare(torch.where, gt.where, [tc, ta, 0.0], [gc, ga, 0.0])
    te, ge = rand_pair((2, 3, 4), F, device, seed=3)
    ta, ga = rand_pair((2, 1, 4), F, device, seed=1)
    compare(operator.add, operator.add, [te.permute(2, 0, 1), ta.reshape(4, 2, 1)],
            [ge.permute(2, 0, 1), ga.reshape(4, 2, 1)])
    compare(operator.sub, operator.sub, [te[:, ::2], ta], [ge[:, ::2], ga])
    compare(operator.add, operator.add, [te.expand(2, 2, 3, 4), ta], [ge.expand(2, 2, 3, 4),
                                                                       ga])


def test_broadcast_error_names_shapes(device: str) -> None:
    a, b = gt.ones(2, 3, device=device), gt.ones(4, device=device)
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[4\]"):
        a + b
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[4\]"):
        gt.maximum(a, b)
    with pytest.raises(RuntimeError, match=r"\[2, 3\]"):
        gt.where(gt.ones(5, dtype=B, device=device), a, a)


def test_zero_dim_and_empty(device: str) -> None:
    t0, g0 = pair(2.5, F, device)
    for fn in (lambda x: x * x, lambda x: x.exp(), lambda x: x + 1, lambda x: x > 1):
        r = fn(g0)
        assert r.shape == ()
        assert_close(r, fn(t0))
    te, ge = pair(np.zeros((0, 3)), F, device)
    for fn in (lambda x: x + 1, lambda x: x.exp(), lambda x: x > 0, lambda x: x.clamp(0, 1)):
        assert_close(fn(ge), fn(te))
    tb, gb = rand_pair((3,), F, device)
    assert_close(ge + gb, te + tb)
    assert (gt.empty(0, 1, device=device) * gt.empty(5, device=device)).shape == (0, 5)


def test_large_parallel_path(device: str) -> None:
    # Above the parallel threshold the kernel runs with prange: same values.
    ta, ga = rand_pair((300, 500), F, device)
    compare(lambda a: a * 2.0, lambda a: a * 2.0, [ta], [ga])


# -- result dtypes and errors for every dtype pair (frontend rules, no kernels) ----------------
SWEEP_BINARY = {
    **{n: pair for n, pair in BINARY.items() if not n.endswith("_alpha")},
    **{n: (getattr(torch, n), getattr(gt, n))
       for n in COMPARE + LOGICAL + BITWISE + ["bitwise_left_shift", "bitwise_right_shift"]},
    "float_power": (torch.float_power, gt.float_power),
}


@pytest.mark.parametrize("name", SWEEP_BINARY)
def test_binary_dtype_sweep(name: str, device: str) -> None:
    tf, gf = SWEEP_BINARY[name]
    bad = sweep_mismatches(name, tf, gf, device)
    assert not bad, "\n".join(bad)


UNARY_SWEEP = sorted(set(FLOAT_UNARY) | set(OTHER_UNARY)) + ["relu", "gelu", "silu", "softplus",
                                                             "leaky_relu", "elu", "hardtanh"]


@pytest.mark.parametrize("name", sorted(set(UNARY_SWEEP)))
def test_unary_dtype_sweep(name: str, device: str) -> None:
    mod = TF if name in ("gelu", "silu", "softplus", "leaky_relu", "elu", "hardtanh") else torch
    bad = []
    for dtype in ALL_DTYPES:
        te, ge = empty_pair(dtype, device)
        want = outcome(getattr(mod, name), te)
        got = outcome(getattr(gt, name), ge)
        if got != want:
            bad.append(f"{dtype}: got {got}, torch {want}")
    assert not bad, "\n".join(bad)


INPLACE_SWEEP = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
                 "pow", "atan2", "bitwise_and", "logical_or", "eq", "clamp_min", "lerp"]


@pytest.mark.parametrize("name", INPLACE_SWEEP)
def test_inplace_dtype_sweep(name: str, device: str) -> None:
    """x.op_(y) keeps x's dtype and raises where the result type can't be cast to it."""
    bad = []
    extra = (0.5,) if name == "lerp" else ()
    for a in ALL_DTYPES:
        for b in ALL_DTYPES + [2, -2, 2.5, True]:
            ta, ga = empty_pair(a, device)
            tb, gb = empty_pair(b, device) if isinstance(b, gt.dtype) else (b, b)
            try:
                want = outcome(getattr(ta, name + "_"), tb, *extra)
            except TypeError:
                continue
            if skipped_case(name, a, b, want):
                continue
            got = outcome(getattr(ga, name + "_"), gb, *extra)
            if got != want:
                bad.append(f"{a}.{name}_({b!r}): got {got}, torch {want}")
    assert not bad, "\n".join(bad)


def test_ternary_dtype_sweep(device: str) -> None:
    bad = []
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            ta, ga = empty_pair(a, device)
            tb, gb = empty_pair(b, device)
            tc, gc = empty_pair(B, device)
            for label, tf, gf, t_args, g_args in [
                ("where", torch.where, gt.where, (tc, ta, tb), (gc, ga, gb)),
                ("clamp", torch.clamp, gt.clamp, (ta, tb, tb), (ga, gb, gb)),
                ("lerp", torch.lerp, gt.lerp, (ta, tb, 0.5), (ga, gb, 0.5)),
                ("isclose", torch.isclose, gt.isclose, (ta, tb), (ga, gb)),
            ]:
                want = outcome(tf, *t_args)
                got = outcome(gf, *g_args)
                if want != got:
                    bad.append(f"{label}({a}, {b}): got {got}, torch {want}")
        for s in SCALARS:
            ta, ga = empty_pair(a, device)
            for label, tf, gf in [("clamp_s", lambda x, v: torch.clamp(x, min=v),
                                   lambda x, v: gt.clamp(x, min=v)),
                                  ("where_s", lambda x, v: torch.where(x > 0, x, v),
                                   lambda x, v: gt.where(x > 0, x, v))]:
                try:
                    want = outcome(tf, ta, s)
                except TypeError:
                    continue
                if skipped_case(label, a, s, want):
                    continue
                got = outcome(gf, ga, s)
                if want != got:
                    bad.append(f"{label}({a}, {s!r}): got {got}, torch {want}")
    assert not bad, "\n".join(bad)


# -- errors ----------------------------------------------------------------------------------
def test_error_cases(device: str) -> None:
    b = gt.tensor([True, False], device=device)
    i = gt.tensor([1, 2], device=device)
    f = gt.tensor([1.0, 2.0], device=device)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        gt.neg(b)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        b - b
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not "
                                           "allowed"):
        i ** -1
    assert_close(f ** -1, torch.tensor([1.0, 0.5]))   # floats may
    for fn in (lambda: i // 0, lambda: i % gt.tensor([1, 0], device=device),
               lambda: gt.fmod(i, 0), lambda: gt.div(i, 0, rounding_mode="trunc"),
               lambda: gt.div(i, gt.tensor([0, 1], device=device), rounding_mode="floor"),
               lambda: gt.remainder(5, gt.tensor([0, 1], device=device))):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn()
    assert_close(i / 0, torch.tensor([1, 2]) / 0)   # true division of ints by 0 is inf
    with pytest.raises(RuntimeError, match="rounding_mode"):
        gt.div(f, f, rounding_mode="round")
    with pytest.raises(TypeError):
        gt.add(f, f, f, f)
    with pytest.raises(TypeError):
        gt.add(f, f, beta=2)
    with pytest.raises(TypeError):
        gt.add(1, 2)


def test_no_kernel_runs_on_error(device: str) -> None:
    x = gt.tensor([1, 2, 3], device=device)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        x //= gt.tensor([1, 0, 1], device=device)
    assert x.tolist() == [1, 2, 3]


# -- PyTorch rules the frontend enforces beyond the dtype table -------------------------------
def test_uint8_with_negative_scalar_wraps(device: str) -> None:
    t, g = pair([[0, 3, 200, 255, 1]] * 3, U8, device)
    compare(lambda a: a + (-1), lambda a: a + (-1), [t], [g])
    compare(lambda a: a & -2, lambda a: a & -2, [t], [g])


def test_sub_rejects_any_bool_operand(device: str) -> None:
    for fn in (lambda: gt.ones(2, device=device) - gt.ones(2, dtype=B, device=device),
               lambda: gt.ones(2, dtype=I64, device=device) - True,
               lambda: gt.ones(2, dtype=B, device=device) - 1,
               lambda: gt.sub(True, gt.ones(2, device=device))):
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool"):
            fn()


def test_integer_pow_negative_tensor_exponent(device: str) -> None:
    # Only a Python-scalar exponent raises; tensor exponents follow C++ integer pow.
    ta, ga = pair([[2, 1, -1, 0, 3]] * 3, I64, device)
    tb, gb = pair([[-1, -2, -3, -1, 2]] * 3, I64, device)
    compare(torch.pow, gt.pow, [ta, tb], [ga, gb])
    compare(lambda e: 2 ** e, lambda e: 2 ** e, [tb], [gb])


# -- the CPU fast path's allocating ufunc form -----------------------------------------------------
@pytest.mark.parametrize("shape", [(16,), (3, 5), (2, 0), (), (1 << 17,)], ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "true_divide"])
def test_allocating_fast_path_gives_a_fresh_contiguous_result(shape, name: str) -> None:
    """Contiguous same-shape float operands take the ufunc's own result (0-d, empty-shaped and
    big ones the kernels): same values, dtype, strides and a storage of its own either way."""
    rng = np.random.default_rng(0)
    an, bn = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    a, b = gt.tensor(an), gt.tensor(bn)
    out = getattr(gt, name)(a, b)
    ufunc = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
             "true_divide": np.divide}[name]
    np.testing.assert_array_equal(out.numpy(), ufunc(an, bn))
    assert out.dtype is gt.float32 and out.is_contiguous() and out._storage is not a._storage
    assert out._storage._version == 0 and out.grad_fn is None
    np.testing.assert_array_equal(getattr(gt, name)(a, 2.0).numpy(), ufunc(an, np.float32(2)))


def test_allocating_fast_path_records_gradients_and_inference_tensors() -> None:
    a = gt.randn(8, requires_grad=True)
    b = gt.randn(8)
    out = a * b
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.numpy())
    with gt.no_grad():
        assert (a * b).grad_fn is None
    with gt.inference_mode():
        assert (b + b).is_inference()
    with np.errstate(all="raise"):   # PyTorch warns about nothing: inf - inf is nan, quietly
        inf = gt.full((4,), float("inf"))
        assert np.isnan((inf - inf).numpy()).all()

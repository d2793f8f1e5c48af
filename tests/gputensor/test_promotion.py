"""Type promotion against PyTorch: promote_types, result_type, can_cast and op result dtypes.

The dtype rules are pure Python, so these tests run every dtype pair; the few value checks at
the end run real kernels for the cases the brief singles out (integer tensor with a float
scalar, integer true division, bool arithmetic, wrap-around of narrow integers).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import ALL_DTYPES, assert_close, requires_torch, torch, torch_dtype

pytestmark = [requires_torch,
              pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")]

SCALARS = [True, False, 0, 3, -7, 2.5, -0.0, 1 + 2j, np.float64(2.5), np.int32(4)]
SHAPES = {"dim": (2,), "zero_dim": ()}


def name_of(dt: Any) -> str:
    return str(dt).removeprefix("torch.").removeprefix("gputensor.")


def tensor_pair(dtype: gt.dtype, shape: tuple[int, ...]) -> tuple[Any, gt.Tensor]:
    """Tensors of ones of a dtype and shape on both sides (values do not matter to promotion;
    ones keep integer division and pow legal)."""
    return torch.ones(shape, dtype=torch_dtype(dtype)), gt.ones(*shape, dtype=dtype)


def complex_half(want: str, got: str) -> bool:
    """float16 meeting complex is ComplexHalf (complex32) in PyTorch, which gputensor does not
    have: it gives complex64 (and computes where PyTorch's ComplexHalf kernels are missing).
    The only documented difference in this file."""
    return want == "complex32" and got == "complex64"


def scalar_id(s: Any) -> str:
    return f"{type(s).__name__}({s!r})"


# -- promote_types and can_cast -------------------------------------------------------------
@pytest.mark.parametrize("a", ALL_DTYPES, ids=str)
def test_promote_types_all_pairs(a: gt.dtype) -> None:
    for b in ALL_DTYPES:
        want = torch.promote_types(torch_dtype(a), torch_dtype(b))
        got = gt.promote_types(a, b)
        assert isinstance(got, gt.dtype)
        assert name_of(got) == name_of(want), f"promote_types({a}, {b})"


def test_promote_types_properties() -> None:
    for a in ALL_DTYPES:
        assert gt.promote_types(a, a) is a
        for b in ALL_DTYPES:
            assert gt.promote_types(a, b) is gt.promote_types(b, a)
    # aliases and other spellings of a dtype are accepted
    assert gt.promote_types(gt.float, gt.long) is gt.float32
    assert gt.promote_types(gt.half, gt.bfloat16) is gt.float32
    assert gt.promote_types(gt.uint8, gt.int8) is gt.int16
    assert gt.promote_types(gt.cfloat, gt.double) is gt.complex128


@pytest.mark.parametrize("a", ALL_DTYPES, ids=str)
def test_can_cast_all_pairs(a: gt.dtype) -> None:
    for b in ALL_DTYPES:
        assert gt.can_cast(a, b) == torch.can_cast(torch_dtype(a), torch_dtype(b)), \
            f"can_cast({a}, {b})"


# -- result_type ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind_b", SHAPES)
@pytest.mark.parametrize("kind_a", SHAPES)
def test_result_type_tensor_pairs(kind_a: str, kind_b: str) -> None:
    """Dimensioned tensors outrank 0-dim ones within a category; a higher category wins."""
    bad = []
    for a in ALL_DTYPES:
        ta, ga = tensor_pair(a, SHAPES[kind_a])
        for b in ALL_DTYPES:
            tb, gb = tensor_pair(b, SHAPES[kind_b])
            want, got = name_of(torch.result_type(ta, tb)), name_of(gt.result_type(ga, gb))
            if got != want and not complex_half(want, got):
                bad.append(f"{a}[{kind_a}], {b}[{kind_b}]: got {got}, torch {want}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("kind", SHAPES)
@pytest.mark.parametrize("s", SCALARS, ids=scalar_id)
def test_result_type_with_python_scalars(s: Any, kind: str) -> None:
    """Python numbers (and NumPy scalars) only change the category, never the width."""
    bad = []
    for a in ALL_DTYPES:
        ta, ga = tensor_pair(a, SHAPES[kind])
        for t_args, g_args in [((ta, s), (ga, s)), ((s, ta), (s, ga))]:
            want, got = name_of(torch.result_type(*t_args)), name_of(gt.result_type(*g_args))
            if got != want and not complex_half(want, got):
                bad.append(f"{g_args}: got {got}, torch {want}")
    assert not bad, "\n".join(bad)


def test_result_type_two_scalars() -> None:
    for a in SCALARS:
        for b in SCALARS:
            assert name_of(gt.result_type(a, b)) == name_of(torch.result_type(a, b)), (a, b)


@pytest.mark.parametrize("default", [gt.float64, gt.float16, gt.bfloat16], ids=str)
def test_result_type_follows_default_dtype(default: gt.dtype) -> None:
    # the conftest fixture restores both defaults after the test
    torch_default = torch.get_default_dtype()
    gt.set_default_dtype(default)
    torch.set_default_dtype(torch_dtype(default))
    try:
        for a in ALL_DTYPES:
            ta, ga = tensor_pair(a, (2,))
            for s in (2.5, True, 3, 1j):
                want, got = name_of(torch.result_type(ta, s)), name_of(gt.result_type(ga, s))
                assert got == want or complex_half(want, got), (a, s)
        assert gt.result_type(2, 2.5) is default
    finally:
        torch.set_default_dtype(torch_default)


def test_result_type_errors() -> None:
    with pytest.raises(TypeError):
        gt.result_type(gt.zeros(2), "x")
    with pytest.raises(TypeError):
        gt.promote_types(gt.float32, "not-a-dtype")


# -- result dtypes of ops (empty tensors: the frontend decides, no kernel runs) ---------------
OPS: dict[str, tuple[Callable, Callable]] = {
    "add": (operator.add, operator.add), "mul": (operator.mul, operator.mul),
    "truediv": (operator.truediv, operator.truediv),
    "floordiv": (operator.floordiv, operator.floordiv),
    "pow": (operator.pow, operator.pow), "lt": (operator.lt, operator.lt),
    "maximum": (lambda a, b: torch.maximum(a, b), lambda a, b: gt.maximum(a, b)),
    "where": (lambda a, b: torch.where(torch.zeros(a.shape, dtype=torch.bool), a, b),
              lambda a, b: gt.where(gt.zeros(*a.shape, dtype=gt.bool, device=a.device), a, b)),
}


def _outcome(fn: Callable, *args: Any) -> str:
    try:
        return name_of(fn(*args).dtype)
    except RuntimeError:  # NotImplementedError (a dtype without a kernel) included
        return "error"


@pytest.mark.parametrize("op", OPS)
def test_op_result_dtype_matches_result_type(op: str, device: str) -> None:
    """For every dtype pair, an op's result is result_type's (or the op's own rule)."""
    tf, gf = OPS[op]
    bad = []
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            for sb in ((0,), ()):   # with a dimensioned and with a 0-dim right operand
                ta, tb = torch.empty((0,), dtype=torch_dtype(a)), torch.ones(
                    sb, dtype=torch_dtype(b))
                ga, gb = gt.empty(0, dtype=a, device=device), gt.ones(*sb, dtype=b,
                                                                         device=device)
                want, got = _outcome(tf, ta, tb), _outcome(gf, ga, gb)
                # PyTorch has no ComplexHalf division or pow: it raises where gputensor
                # computes in complex64.
                half_complex = {a, b} & {gt.float16} and {a, b} & {gt.complex64, gt.complex128}
                if want != got and not complex_half(want, got) and not (
                        half_complex and want == "error" and got == "complex64"):
                    bad.append(f"{op}({a}, {b}{list(sb)}): got {got}, torch {want}")
    assert not bad, "\n".join(bad)


# -- the cases that matter most, with values --------------------------------------------------
def check(g: gt.Tensor, t: Any) -> None:
    assert name_of(g.dtype) == name_of(t.dtype), f"{g.dtype} != {t.dtype}"
    assert_close(g, t)


def both(values: Any, dtype: gt.dtype | None, device: str) -> tuple[Any, gt.Tensor]:
    t = torch.tensor(values, dtype=None if dtype is None else torch_dtype(dtype))
    return t, gt.tensor(values, dtype=dtype, device=device)


def test_integer_tensor_with_float_scalar(device: str) -> None:
    ti, gi = both([1, -2, 3], None, device)
    check(gi + 1.5, ti + 1.5)           # float32, the default dtype
    check(gi * 0.5, ti * 0.5)
    check(2.5 - gi, 2.5 - ti)
    check(gi + 2, ti + 2)                # an int scalar keeps int64
    t8, g8 = both([1, -2, 3], gt.int8, device)
    check(g8 + 2, t8 + 2)                # ...and int8 (a scalar never widens)
    check(g8 + 1000, t8 + 1000)          # 1000 wraps in int8, as in PyTorch
    check(g8 + 1.5, t8 + 1.5)
    gt.set_default_dtype(gt.float64)     # (the conftest fixture restores it)
    check(gi + 1.5, ti + torch.tensor(1.5, dtype=torch.float64))


def test_integer_true_division(device: str) -> None:
    ti, gi = both([7, -7, 0, 9], None, device)
    tj, gj = both([2, 2, 5, -4], None, device)
    check(gi / gj, ti / tj)                         # float32 from two int64s
    check(gi / 2, ti / 2)
    check(gt.div(gi, gj), torch.div(ti, tj))
    check(gt.true_divide(gi, gj), torch.true_divide(ti, tj))
    check(gi // gj, ti // tj)                       # floor division stays integral
    check(gt.div(gi, gj, rounding_mode="trunc"), torch.div(ti, tj, rounding_mode="trunc"))
    with pytest.raises(RuntimeError, match="can't be cast"):
        gi /= gj                                    # float result into an int tensor
    check(gi, ti)


def test_bool_arithmetic(device: str) -> None:
    ta, ga = both([True, True, False], None, device)
    tb, gb = both([True, False, False], None, device)
    check(ga + gb, ta + tb)              # bool stays bool: True + True is True
    check(ga * gb, ta * tb)
    check(ga + 1, ta + 1)                # int64
    check(ga + 1.5, ta + 1.5)            # float32
    check(ga / gb, ta / tb)              # float32 division
    check(ga & gb, ta & tb)
    check(ga | True, ta | True)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool"):
        ga - gb
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool"):
        _ = -ga


def test_mixed_width_and_zero_dim_tensors(device: str) -> None:
    t8, g8 = both([100, -100], gt.int8, device)
    tu, gu = both([200, 1], gt.uint8, device)
    check(g8 + gu, t8 + tu)              # int16: uint8 and int8 meet there
    t0, g0 = both(5, None, device)       # a 0-dim int64 does not widen int8
    check(g8 + g0, t8 + t0)
    tf0, gf0 = both(0.5, gt.float64, device)
    check(g8 * gf0, t8 * tf0)            # 0-dim float64 with int8: the category wins, float64
    tf, gf = both([1.5, 2.5], None, device)
    check(gf * gf0, tf * tf0)            # ...but with float32 it stays float32
    tc, gc = both([1 + 1j], None, device)
    t64, g64 = both([2.0], gt.float64, device)
    check(gc * g64, tc * t64)            # complex64 with float64 makes complex128

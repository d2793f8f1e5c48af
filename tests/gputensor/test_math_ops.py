"""addcmul/addcdiv and the binary and unary math ops PyTorch programs use (fmax, fmin, hypot,
copysign, logaddexp, xlogy, heaviside, sinc, deg2rad, rad2deg) against PyTorch: values at
ordinary and special points (0, +-inf, NaN), dtypes, in-place forms and gradients, on cpu and
emulated cuda."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close

torch = pytest.importorskip("torch")

INF, NAN = float("inf"), float("nan")
A = np.array([-2.0, 0.0, 1.5, NAN, 3.0, INF, -INF, 0.0, -0.5, 2.0])
B = np.array([1.0, 0.0, NAN, 2.0, -1.0, INF, -INF, 3.0, -0.25, 2.0])
BINARY = ["fmax", "fmin", "hypot", "copysign", "logaddexp", "xlogy", "heaviside"]
UNARY = ["sinc", "deg2rad", "rad2deg"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_binary_math_matches_torch(device: str, name: str, dtype: str) -> None:
    a, b = A.astype(dtype), B.astype(dtype)
    got = getattr(gt, name)(gt.tensor(a, device=device), gt.tensor(b, device=device))
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert got.dtype.name == str(want.dtype).split(".")[1]
    assert_close(got, want, equal_nan=True)
    assert_close(getattr(gt.tensor(a, device=device), name)(gt.tensor(b, device=device)), want,
                 equal_nan=True)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_keep_integers(device: str, name: str) -> None:
    a, b = np.array([3, -2, 7]), np.array([1, 5, 7])
    got = getattr(gt, name)(gt.tensor(a, device=device), gt.tensor(b, device=device))
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert got.dtype is gt.int64 and got.tolist() == want.tolist()


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_unary_math_matches_torch(device: str, name: str, dtype: str) -> None:
    data = np.array([-3, 0, 1, 2, 45, 180]) if dtype == "int64" else A.astype(dtype)
    got = getattr(gt, name)(gt.tensor(data, device=device))
    want = getattr(torch, name)(torch.tensor(data))
    assert got.dtype.name == str(want.dtype).split(".")[1]
    assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("name", BINARY[:-1] + UNARY)
def test_math_gradients_match_torch(device: str, name: str) -> None:
    a = np.array([-2.0, 0.5, 1.5, 3.0, -0.75])
    b = np.array([1.0, -0.25, 2.0, -1.0, 0.5])
    if name == "xlogy":
        a, b = np.append(a, [0.0, 0.0]), np.append(np.abs(b), [2.0, 0.0])  # x = 0 edges
    x, y = (gt.tensor(v, device=device, requires_grad=True) for v in (a, b))
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (a, b))
    unary = name in UNARY
    out = getattr(gt, name)(x) if unary else getattr(gt, name)(x, y)
    want = getattr(torch, name)(tx) if unary else getattr(torch, name)(tx, ty)
    weights = np.linspace(0.5, 2.0, a.size)
    (out * gt.tensor(weights, device=device)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    assert_close(x.grad, tx.grad)
    if not unary:
        assert_close(y.grad, ty.grad)


def test_heaviside_has_no_derivative(device: str) -> None:
    x = gt.tensor([1.0, -1.0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="heaviside"):
        gt.heaviside(x, gt.tensor([0.5], device=device)).sum().backward()


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_addcmul_addcdiv_match_torch(device: str, name: str, dtype: str) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 4)) for _ in range(3)]
    if dtype == "complex128":
        arrays = [a + 1j * rng.standard_normal(a.shape) for a in arrays]
    arrays = [a.astype(dtype) for a in arrays]
    arrays[2][0] += 3.0  # keep divisors away from 0
    g_in = [gt.tensor(a, device=device, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    got = getattr(gt, name)(g_in[0], g_in[1], g_in[2][:1], value=0.5)  # c broadcasts
    want = getattr(torch, name)(t_in[0], t_in[1], t_in[2][:1], value=0.5)
    assert_close(got, want)
    got.abs().sum().backward()
    want.abs().sum().backward()
    for g, t in zip(g_in, t_in, strict=True):
        assert_close(g.grad, t.grad)
    # the in-place form, as optimizers use it: p.addcdiv_(m, denom, value=-lr)
    p, tp = gt.tensor(arrays[0], device=device), torch.tensor(arrays[0])
    getattr(p, name + "_")(gt.tensor(arrays[1], device=device),
                           gt.tensor(arrays[2], device=device), value=-0.1)
    getattr(tp, name + "_")(torch.tensor(arrays[1]), torch.tensor(arrays[2]), value=-0.1)
    assert_close(p, tp)


def test_addcdiv_refuses_integer_division_like_torch(device: str) -> None:
    ints = [np.array([4, 6]), np.array([2, 4]), np.array([3, 5])]
    with pytest.raises(RuntimeError, match="Integer division with addcdiv") as want:
        torch.addcdiv(*(torch.tensor(a) for a in ints))
    with pytest.raises(RuntimeError) as got:
        gt.addcdiv(*(gt.tensor(a, device=device) for a in ints))
    assert str(got.value) == str(want.value)
    mixed = gt.addcdiv(gt.tensor([1.0], device=device), gt.tensor([3], device=device),
                       gt.tensor([2.0], device=device))
    assert mixed.tolist() == torch.addcdiv(torch.tensor([1.0]), torch.tensor([3]),
                                           torch.tensor([2.0])).tolist()
    got = gt.addcmul(*(gt.tensor(a, device=device) for a in ints), value=2)
    assert got.tolist() == torch.addcmul(*(torch.tensor(a) for a in ints), value=2).tolist()

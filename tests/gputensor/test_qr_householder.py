"""gt.geqrf, gt.orgqr, gt.ormqr (and their Tensor methods) against PyTorch on cpu and emulated
cuda: LAPACK's factor format, the products in all four (left, transpose) forms, batches, the
derivatives of ormqr/orgqr, PyTorch's errors; and the removed eig/lstsq/solve/symeig."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, assert_same_error, random_array, requires_torch, torch

pytestmark = requires_torch

DTYPES = [gt.float32, gt.float64, gt.complex64, gt.complex128]
TOL = {gt.float32: 1e-5, gt.float64: 1e-12, gt.complex64: 1e-5, gt.complex128: 1e-12}


def _pair(shape: tuple, dtype: gt.dtype, device: str, seed: int = 0) -> tuple:
    a = random_array(shape, dtype, seed=seed)
    return gt.tensor(a, device=device), torch.from_numpy(a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 1, 6, 2), (0, 3), (2, 3, 0)])
def test_geqrf_matches_torch(device: str, dtype: gt.dtype, shape: tuple) -> None:
    g, t = _pair(shape, dtype, device)
    got, want = gt.geqrf(g), torch.geqrf(t)
    assert type(got).__name__ == "geqrf" and got._fields == ("a", "tau")
    assert got.a.device == gt.device(device)
    tol = TOL[dtype] * 10
    assert_close(got.a, want.a, atol=tol, rtol=tol)
    assert_close(got.tau, want.tau, atol=tol, rtol=tol)
    assert_close(g.geqrf().a, want.a, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr_matches_torch(device: str, dtype: gt.dtype, left: bool, transpose: bool) -> None:
    a, ta = _pair((2, 6, 4), dtype, device)
    qr, tau = gt.geqrf(a)
    tqr, ttau = torch.geqrf(ta)
    c, tc = _pair((2, 6, 3) if left else (2, 3, 6), dtype, device, seed=1)
    want = torch.ormqr(tqr, ttau, tc, left, transpose)
    tol = TOL[dtype] * 10
    assert_close(gt.ormqr(qr, tau, c, left, transpose), want, atol=tol, rtol=tol)
    assert_close(qr.ormqr(tau, c, left=left, transpose=transpose), want, atol=tol, rtol=tol)
    out = gt.empty(0, dtype=dtype, device=device)
    assert gt.ormqr(qr, tau, c, left, transpose, out=out) is out
    assert_close(out, want, atol=tol, rtol=tol)


def test_ormqr_wide_input_and_empty(device: str) -> None:
    # input with more columns than reflectors; no reflectors at all; an empty other
    a, ta = _pair((3, 5), gt.float64, device)
    tau, ttau = _pair((3,), gt.float64, device, seed=1)
    c, tc = _pair((3, 2), gt.float64, device, seed=2)
    assert_close(gt.ormqr(a, tau, c), torch.ormqr(ta, ttau, tc), atol=1e-12, rtol=1e-12)
    got = gt.ormqr(a[:, :0], tau[:0], c)
    assert_close(got, torch.ormqr(ta[:, :0], ttau[:0], tc), atol=0, rtol=0)
    assert tuple(gt.ormqr(a, tau, c[:, :0]).shape) == (3, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_orgqr_is_householder_product(device: str, dtype: gt.dtype) -> None:
    a, ta = _pair((2, 5, 3), dtype, device)
    qr, tau = gt.geqrf(a)
    want = torch.orgqr(*torch.geqrf(ta))
    tol = TOL[dtype] * 10
    assert_close(gt.orgqr(qr, tau), want, atol=tol, rtol=tol)
    assert_close(qr.orgqr(tau), want, atol=tol, rtol=tol)
    q = gt.orgqr(qr, tau)
    eye = gt.eye(3, dtype=dtype, device=device).expand(2, 3, 3)
    assert_close(q.mH @ q, eye, atol=tol, rtol=tol, check_dtype=False)


@pytest.mark.parametrize("dtype", [gt.float64, gt.complex128])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr_gradients_match_torch(device: str, dtype: gt.dtype, left: bool,
                                     transpose: bool) -> None:
    shapes = [(5, 3), (3,), (5, 4) if left else (4, 5)]
    arrays = [random_array(s, dtype, seed=i) for i, s in enumerate(shapes)]
    weight = random_array(shapes[2], dtype, seed=9)
    t_in = [torch.from_numpy(x).requires_grad_() for x in arrays]
    g_in = [gt.tensor(x, device=device, requires_grad=True) for x in arrays]
    (torch.ormqr(*t_in, left, transpose) * torch.from_numpy(weight)).real.sum().backward()
    (gt.ormqr(*g_in, left, transpose) * gt.tensor(weight, device=device)).real.sum().backward()
    for g, t in zip(g_in, t_in, strict=True):
        assert_close(g.grad, t.grad, atol=1e-10, rtol=1e-10)
    if not dtype.is_complex:
        inputs = tuple(gt.tensor(x, device=device, requires_grad=True) for x in arrays)
        assert gt.autograd.gradcheck(lambda a, t, c: gt.ormqr(a, t, c, left, transpose), inputs)
        assert gt.autograd.gradgradcheck(lambda a, t, c: gt.ormqr(a, t, c, left, transpose),
                                         inputs)


def test_orgqr_gradient_matches_torch(device: str) -> None:
    a = random_array((4, 3), gt.float64)
    tau = random_array((3,), gt.float64, seed=1)
    ta, ttau = (torch.from_numpy(x).requires_grad_() for x in (a, tau))
    ga, gtau = (gt.tensor(x, device=device, requires_grad=True) for x in (a, tau))
    torch.orgqr(ta, ttau).sin().sum().backward()
    gt.orgqr(ga, gtau).sin().sum().backward()
    assert_close(ga.grad, ta.grad, atol=1e-10, rtol=1e-10)
    assert_close(gtau.grad, ttau.grad, atol=1e-10, rtol=1e-10)


def test_geqrf_has_no_derivative(device: str) -> None:
    a = gt.tensor(random_array((4, 3), gt.float64), device=device, requires_grad=True)
    qr, _ = gt.geqrf(a)
    with pytest.raises((RuntimeError, NotImplementedError), match="geqrf"):
        qr.sum().backward()


def test_errors_match_torch(device: str) -> None:
    d = gt.float64
    a, ta = _pair((5, 3), d, device)
    qr, tau = gt.geqrf(a)
    tqr, ttau = torch.geqrf(ta)

    def both(fn_g, fn_t):
        assert_same_error(fn_g, fn_t)

    both(lambda: gt.geqrf(a[0]), lambda: torch.geqrf(ta[0]))
    if device == "cpu":  # PyTorch names the CPU kernel
        both(lambda: gt.geqrf(a.long()), lambda: torch.geqrf(ta.long()))
        both(lambda: gt.geqrf(a.half()), lambda: torch.geqrf(ta.half()))
        both(lambda: gt.ormqr(qr.long(), tau.long(), a.long()),
             lambda: torch.ormqr(tqr.long(), ttau.long(), ta.long()))
    c, tc = _pair((5, 4), d, device, seed=1)
    cases = [
        ((qr, tau, c.mT), (tqr, ttau, tc.mT), {}),
        ((qr, tau, c), (tqr, ttau, tc), {"left": False}),
        ((qr, tau[:2], c), (tqr, ttau[:2], tc), {}),
        ((qr, tau.expand(2, 3), c), (tqr, ttau.expand(2, 3), tc), {}),
        ((qr.expand(2, 5, 3), tau.expand(2, 3), c), (tqr.expand(2, 5, 3), ttau.expand(2, 3), tc),
         {}),
        ((qr.expand(2, 5, 3), tau.expand(3, 3), c.expand(2, 5, 4)),
         (tqr.expand(2, 5, 3), ttau.expand(3, 3), tc.expand(2, 5, 4)), {}),
        ((qr.expand(2, 5, 3), tau.expand(2, 3), c.expand(3, 5, 4)),
         (tqr.expand(2, 5, 3), ttau.expand(2, 3), tc.expand(3, 5, 4)), {}),
        ((qr, tau, c.float()), (tqr, ttau, tc.float()), {}),
        ((qr, tau.float(), c), (tqr, ttau.float(), tc), {}),
        ((qr, tau, c[0]), (tqr, ttau, tc[0]), {}),
        ((qr[0], tau, c), (tqr[0], ttau, tc), {}),
    ]
    for g_args, t_args, kw in cases:
        both(lambda g_args=g_args, kw=kw: gt.ormqr(*g_args, **kw),
             lambda t_args=t_args, kw=kw: torch.ormqr(*t_args, **kw))
    both(lambda: gt.orgqr(qr, tau.float()), lambda: torch.orgqr(tqr, ttau.float()))
    both(lambda: gt.orgqr(qr.mT, tau), lambda: torch.orgqr(tqr.mT, ttau))


@pytest.mark.parametrize("name, args", [("eig", 0), ("symeig", 0), ("solve", 1), ("lstsq", 1)])
def test_removed_functions_raise_like_torch(device: str, name: str, args: int) -> None:
    g = gt.eye(3, device=device)
    t = torch.eye(3)
    assert_same_error(lambda: getattr(g, name)(*[g] * args),
                      lambda: getattr(t, name)(*[t] * args))
    assert_same_error(lambda: getattr(gt, name)(g, *[g] * args),
                      lambda: getattr(torch, name)(t, *[t] * args))
    if args:  # the methods take the other matrix
        with pytest.raises(TypeError):
            getattr(g, name)()


def test_geqrf_reconstructs(device: str) -> None:
    # R (upper part of a) and Q (orgqr) multiply back to the input
    a = gt.tensor(np.random.default_rng(3).standard_normal((3, 6, 4)), device=device)
    qr, tau = gt.geqrf(a)
    assert_close(gt.orgqr(qr, tau) @ qr.triu()[..., :4, :], a, atol=1e-12, rtol=1e-12)

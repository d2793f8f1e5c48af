"""torch.special and the matching top-level ops (lgamma, digamma, polygamma, mvlgamma, erfc,
erfinv, i0, igamma, igammac): values against SciPy over wide ranges and against PyTorch
(values, dtypes, edge cases, errors), on cpu and cuda."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.special as sc

import gputensor as gt
from tests.helpers import assert_close, assert_same_error, requires_torch, torch

pytestmark = requires_torch
S = gt.special
_RNG = np.random.default_rng(0)
# wide ranges and the edge cases: zeros of both signs, negative integers (poles), infinities,
# NaN, subnormals
_EDGES = np.array([0.0, -0.0, -1.0, -2.0, -3.0, 1.0, 2.0, 0.5, -0.5, np.inf, -np.inf, np.nan,
                   1e-310, -1e-310, 5e-324, 1e-30, 30.0, 100.0, -100.5])


def _wide(lo: float, hi: float, n: int = 300) -> np.ndarray:
    return np.concatenate([_RNG.uniform(lo, hi, n), _RNG.uniform(-3, 3, n // 3)])


# name -> (gputensor function, torch function, SciPy reference, (lo, hi) of the wide sample)
UNARY: dict[str, tuple[Callable, Callable, Callable, tuple[float, float]]] = {
    "lgamma": (gt.lgamma, torch.lgamma, sc.gammaln, (-40, 170)),
    "digamma": (gt.digamma, torch.digamma, sc.psi, (-40, 100)),
    "erfc": (gt.erfc, torch.erfc, sc.erfc, (-8, 27)),
    "erfinv": (gt.erfinv, torch.erfinv, sc.erfinv, (-1, 1)),
    "i0": (gt.i0, torch.i0, sc.i0, (-700, 700)),
    "erfcx": (S.erfcx, torch.special.erfcx, sc.erfcx, (-25, 1e4)),
    "i0e": (S.i0e, torch.special.i0e, sc.i0e, (-800, 800)),
    "i1": (S.i1, torch.special.i1, sc.i1, (-700, 700)),
    "i1e": (S.i1e, torch.special.i1e, sc.i1e, (-800, 800)),
    "ndtr": (S.ndtr, torch.special.ndtr, sc.ndtr, (-38, 9)),
    "ndtri": (S.ndtri, torch.special.ndtri, sc.ndtri, (0, 1)),
    "log_ndtr": (S.log_ndtr, torch.special.log_ndtr, sc.log_ndtr, (-100, 10)),
    "entr": (S.entr, torch.special.entr, sc.entr, (-1, 50)),
    "bessel_j0": (S.bessel_j0, torch.special.bessel_j0, sc.j0, (-100, 100)),
    "bessel_j1": (S.bessel_j1, torch.special.bessel_j1, sc.j1, (-100, 100)),
    "bessel_y0": (S.bessel_y0, torch.special.bessel_y0, sc.y0, (0, 100)),
    "bessel_y1": (S.bessel_y1, torch.special.bessel_y1, sc.y1, (0, 100)),
    "modified_bessel_i0": (S.modified_bessel_i0, torch.special.modified_bessel_i0, sc.i0,
                           (-700, 700)),
    "modified_bessel_i1": (S.modified_bessel_i1, torch.special.modified_bessel_i1, sc.i1,
                           (-700, 700)),
    "modified_bessel_k0": (S.modified_bessel_k0, torch.special.modified_bessel_k0, sc.k0,
                           (0, 700)),
    "modified_bessel_k1": (S.modified_bessel_k1, torch.special.modified_bessel_k1, sc.k1,
                           (0, 700)),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0,
                                  torch.special.scaled_modified_bessel_k0, sc.k0e, (0, 1e4)),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1,
                                  torch.special.scaled_modified_bessel_k1, sc.k1e, (0, 1e4)),
    "spherical_bessel_j0": (S.spherical_bessel_j0, torch.special.spherical_bessel_j0,
                            lambda x: sc.spherical_jn(0, x), (-100, 100)),
    "airy_ai": (S.airy_ai, torch.special.airy_ai, lambda x: sc.airy(x)[0], (-60, 60)),
}
# PyTorch's own kernels for these are less accurate than SciPy's (about 1e-6 relative in
# float64): the comparison with PyTorch uses a looser tolerance, SciPy stays the reference.
_TORCH_LOOSE = {"bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "airy_ai"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64_matches_scipy(device: str, name: str) -> None:
    fn, _, ref, (lo, hi) = UNARY[name]
    x = _wide(lo, hi)
    with np.errstate(all="ignore"):
        want = ref(x)
    got = fn(gt.tensor(x, device=device))
    assert got.dtype is gt.float64
    assert_close(got, want, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(device: str, name: str, dtype: gt.dtype) -> None:
    fn, tfn, _, _ = UNARY[name]
    x = np.concatenate([_RNG.uniform(-20, 20, 200), _RNG.uniform(0, 1, 50), _EDGES])
    if name == "erfinv" or name == "ndtri":
        x = np.concatenate([_RNG.uniform(-1, 1, 200), _EDGES])
    x = x.astype(dtype.np_dtype)
    want = tfn(torch.from_numpy(x))
    got = fn(gt.tensor(x, device=device))
    loose = name in _TORCH_LOOSE
    tol = (2e-5 if dtype is gt.float32 else (2e-6 if loose else 1e-9))
    assert_close(got, want, rtol=tol, atol=(2e-5 if loose else tol))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_integer_and_bool_inputs_promote(device: str, name: str) -> None:
    fn, tfn, _, _ = UNARY[name]
    x = np.array([0, 1, 2, 5])
    assert_close(fn(gt.tensor(x, device=device)), tfn(torch.from_numpy(x)), rtol=2e-5,
                 atol=2e-5)
    gt.set_default_dtype(gt.float64)
    torch.set_default_dtype(torch.float64)
    try:
        assert_close(fn(gt.tensor(x > 1, device=device)), tfn(torch.from_numpy(x > 1)),
                     rtol=2e-6, atol=2e-6)
    finally:
        torch.set_default_dtype(torch.float32)


def test_half_dtypes_keep_their_dtype(device: str) -> None:
    for dt in (gt.float16, gt.bfloat16):
        x = gt.tensor([0.25, 1.5, 3.0], dtype=dt, device=device)
        tx = torch.tensor([0.25, 1.5, 3.0], dtype=getattr(torch, dt.name))
        assert_close(gt.lgamma(x), torch.lgamma(tx))
        assert_close(S.i0e(x), torch.special.i0e(tx))


def test_lgamma_float32_within_one_ulp() -> None:
    """The CPU's float32 lgamma (vectorisable, float64 inside) against SciPy's float64 gammaln
    rounded to float32: within 1 ulp over wide ranges of both signs, near the roots 1 and 2
    and the poles, and PyTorch's inf/nan at the edges."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-60, 60, 20000), rng.uniform(0.5, 3, 20000),
                        np.exp(rng.uniform(-100, 88, 20000)),
                        -np.exp(rng.uniform(-80, 20, 20000)),
                        -np.arange(1, 50) + rng.uniform(-1e-3, 1e-3, 49)]).astype(np.float32)
    got = gt.lgamma(gt.tensor(x)).numpy().astype(np.float64)
    ref = sc.gammaln(x.astype(np.float64))
    finite = np.isfinite(ref) & (np.abs(ref) < 3e38)
    ulp = np.spacing(np.abs(ref[finite]).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[finite] - ref[finite]) / ulp) <= 1.0
    edges = np.array([0.0, -0.0, 1.0, 2.0, -1.0, -7.0, np.inf, -np.inf, np.nan, 1e-45,
                      3.4e38, -3.4e38], np.float32)
    np.testing.assert_array_equal(gt.lgamma(gt.tensor(edges)).numpy(),
                                  torch.lgamma(torch.from_numpy(edges)).numpy())


# -- binary functions ------------------------------------------------------------------------------
BINARY = {
    "igamma": (gt.igamma, torch.igamma, sc.gammainc),
    "igammac": (gt.igammac, torch.igammac, sc.gammaincc),
    "gammainc": (S.gammainc, torch.special.gammainc, sc.gammainc),
    "gammaincc": (S.gammaincc, torch.special.gammaincc, sc.gammaincc),
    "zeta": (S.zeta, torch.special.zeta, sc.zeta),
    "xlog1py": (S.xlog1py, torch.special.xlog1py, sc.xlog1py),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float64_matches_scipy(device: str, name: str) -> None:
    fn, _, ref = BINARY[name]
    a = np.concatenate([_RNG.uniform(0.01, 50, 300), _RNG.uniform(1, 3, 100)])
    x = np.concatenate([_RNG.uniform(0, 60, 300), _RNG.uniform(0, 3, 100)])
    if name == "zeta":
        a = a + 1
    got = fn(gt.tensor(a, device=device), gt.tensor(x, device=device))
    assert_close(got, ref(a, x), rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch_with_edges(device: str, name: str, dtype: gt.dtype) -> None:
    fn, tfn, _ = BINARY[name]
    edges = [0.0, 1.0, 2.0, -1.0, -1.5, np.inf, np.nan, 0.5]
    a = np.concatenate([_RNG.uniform(0.1, 20, 60), np.repeat(edges, len(edges))])
    x = np.concatenate([_RNG.uniform(0.1, 20, 60), np.tile(edges, len(edges))])
    a, x = a.astype(dtype.np_dtype), x.astype(dtype.np_dtype)
    want = tfn(torch.from_numpy(a), torch.from_numpy(x))
    got = fn(gt.tensor(a, device=device), gt.tensor(x, device=device))
    tol = 1e-4 if dtype is gt.float32 else 1e-8
    assert_close(got, want, rtol=tol, atol=tol)


# (a, x, P, Q) from mpmath (Q at 40 digits, P as 1 - Q at 400) for large orders, where the power
# series and the continued fraction need O(sqrt(a)) terms: Temme's expansion there. SciPy's
# Cephes (PyTorch's algorithm) gives P = 3.55e-9 for the 5e-9 at a = 1e8.
_LARGE_ORDERS = [
    (25.0, 30.0, 0.8427579727616084, 0.1572420272383916),
    (150.0, 120.0, 0.004563441304151243, 0.9954365586958488),
    (10000.0, 6800.0, 8.451577714176925e-288, 1.0),
    (10000.0, 14000.0, 1.0, 1.2615264204743979e-278),
    (1000000.0, 1000000.0, 0.5001329807608725, 0.4998670192391274),
    (1000000.0, 995360.0, 1.6851077370165254e-06, 0.999998314892263),
    (100000000.0, 99942700.0, 4.9902046146834495e-09, 0.9999999950097954),
    (100000000.0, 100080000.0, 0.9999999999999993, 6.327903413122214e-16),
    (10000000000.0, 10000000000.0, 0.5000013298076014, 0.4999986701923987),
    (1000000000000.0, 1000002000000.0, 0.9772498140608813, 0.022750185939118726),
]


def test_igamma_large_orders_match_mpmath(device: str) -> None:
    a, x, p, q = np.array(_LARGE_ORDERS).T
    ga, gx = gt.tensor(a, device=device), gt.tensor(x, device=device)
    assert_close(gt.igamma(ga, gx), p, rtol=1e-12, atol=0)
    assert_close(gt.igammac(ga, gx), q, rtol=1e-12, atol=0)
    # float32 operands: computed in double, rounded once
    fa, fx = ga.float(), gx.float()
    assert_close(gt.igamma(fa, fx), gt.igamma(fa.double(), fx.double()).float(), rtol=0, atol=0)


def test_binary_scalars_broadcasting_and_out(device: str) -> None:
    q = np.array([[0.5, 1.0, 2.5]])
    tq = torch.tensor(q)
    gq = gt.tensor(q, device=device)
    assert_close(S.zeta(2.0, gq), torch.special.zeta(2.0, tq))
    assert_close(S.zeta(gq.T + 1, gq), torch.special.zeta(tq.T + 1, tq))
    assert_close(S.xlog1py(3, gq), torch.special.xlog1py(3, tq))
    out = gt.empty(1, 3, dtype=gt.float64, device=device)
    assert S.zeta(gq + 1, gq, out=out) is out
    assert_close(out, torch.special.zeta(tq + 1, tq))
    assert_close(S.zeta(gq + 1, other=gq), torch.special.zeta(tq + 1, other=tq))


def test_igamma_rejects_integers_and_complex(device: str) -> None:
    i = gt.tensor([1, 2], device=device)
    with pytest.raises(RuntimeError, match="Long"):
        gt.igamma(i, i)
    z = gt.tensor([1j], device=device)
    for fn in (gt.igamma, gt.lgamma, gt.erfinv, S.zeta):
        with pytest.raises(RuntimeError, match="ComplexFloat"):
            fn(z, z) if fn in (gt.igamma, S.zeta) else fn(z)


# -- polygamma, mvlgamma ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(device: str, n: int) -> None:
    x = np.concatenate([_RNG.uniform(-10, 30, 200), [0.0, -0.0, -1.0, -2.5, 1.5, np.inf,
                                                     -np.inf, np.nan, 1e-300]])
    want = torch.polygamma(n, torch.from_numpy(x))
    gx = gt.tensor(x, device=device)
    assert_close(gt.polygamma(n, gx), want, rtol=1e-9, atol=1e-9)
    assert_close(gx.polygamma(n), want, rtol=1e-9, atol=1e-9)
    assert_close(S.polygamma(n, gx), want, rtol=1e-9, atol=1e-9)
    ok = np.isfinite(x) & ((x > 0) | (x != np.round(x)))
    assert_close(gt.polygamma(n, gt.tensor(x[ok], device=device)), sc.polygamma(n, x[ok]),
                 rtol=1e-9, atol=1e-12)
    y = gt.tensor(x, device=device)
    assert y.polygamma_(n) is y
    assert_close(y, want, rtol=1e-9, atol=1e-9)
    out = gt.empty(x.shape, dtype=gt.float64, device=device)
    assert gt.polygamma(n, gx, out=out) is out
    assert_close(out, want, rtol=1e-9, atol=1e-9)
    ints = torch.tensor([1, 2, 3])
    assert_close(gt.polygamma(n, gt.tensor([1, 2, 3], device=device)), torch.polygamma(n, ints))


def test_polygamma_negative_n(device: str) -> None:
    x = gt.tensor([1.0], device=device)
    assert_same_error(lambda: gt.polygamma(-1, x), lambda: torch.polygamma(-1, torch.ones(1)))
    assert_same_error(lambda: x.polygamma_(-1), lambda: torch.ones(1).polygamma_(-1))


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_mvlgamma(device: str, p: int) -> None:
    x = _RNG.uniform((p - 1) / 2 + 0.01, 40, 100)
    want = torch.mvlgamma(torch.from_numpy(x), p)
    gx = gt.tensor(x, device=device)
    assert_close(gt.mvlgamma(gx, p), want)
    assert_close(gx.mvlgamma(p=p), want)
    assert_close(S.multigammaln(gx, p), torch.special.multigammaln(torch.from_numpy(x), p))
    assert_close(sc.multigammaln(x[0], p), want[0].item())
    y = gx.clone()
    assert y.mvlgamma_(p) is y
    assert_close(y, want)


def test_mvlgamma_p_below_one(device: str) -> None:
    x = gt.tensor([2.0], device=device)
    assert_same_error(lambda: gt.mvlgamma(x, 0), lambda: torch.mvlgamma(torch.tensor([2.0]), 0))
    assert_same_error(lambda: x.mvlgamma_(0), lambda: torch.tensor([2.0]).mvlgamma_(0))


# -- in-place forms and methods of the top-level ops -----------------------------------------------
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "erfinv", "i0"])
def test_unary_methods_and_inplace(device: str, name: str) -> None:
    x = _RNG.uniform(0.05, 0.95, 20)
    want = getattr(torch.from_numpy(x), name)()
    g = gt.tensor(x, device=device)
    assert_close(getattr(g, name)(), want)
    assert getattr(g, name + "_")() is g
    assert_close(g, want)
    gi = gt.tensor([1, 2], device=device)
    assert_same_error(lambda: getattr(gi, name + "_")(),
                      lambda: getattr(torch.tensor([1, 2]), name + "_")())


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_binary_methods_and_inplace(device: str, name: str) -> None:
    a, x = _RNG.uniform(0.1, 5, 10), _RNG.uniform(0.1, 5, 10)
    ta, tx = torch.from_numpy(a), torch.from_numpy(x)
    want = getattr(torch, name)(ta, tx)
    ga, gx = gt.tensor(a, device=device), gt.tensor(x, device=device)
    assert_close(getattr(ga, name)(gx), want)
    assert getattr(ga, name + "_")(gx) is ga
    assert_close(ga, want)


# -- polynomials -------------------------------------------------------------------------------
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials(device: str, name: str) -> None:
    x = np.concatenate([_RNG.uniform(-1.2, 1.2, 150), [1.0, -1.0, 0.0, 0.5, 2.0, -2.0]])
    n = _RNG.integers(-1, 14, x.size).astype(np.float64)
    n[-6:] = [3, 4, 9, 10, 0, 1]
    want = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n))
    got = getattr(S, name)(gt.tensor(x, device=device), gt.tensor(n, device=device))
    assert_close(got, want, rtol=1e-8, atol=1e-8)
    # a Python int degree, integer tensors, keyword n, float32
    xf = x.astype(np.float32)
    assert_close(getattr(S, name)(gt.tensor(xf, device=device), n=3),
                 getattr(torch.special, name)(torch.from_numpy(xf), n=3), rtol=1e-4, atol=1e-4)
    assert_close(getattr(S, name)(gt.tensor([1, 2], device=device), gt.tensor([2, 3],
                                                                              device=device)),
                 getattr(torch.special, name)(torch.tensor([1, 2]), torch.tensor([2, 3])))
    if name.startswith(("chebyshev", "legendre")):
        ref = {"chebyshev_polynomial_t": sc.eval_chebyt, "chebyshev_polynomial_u": sc.eval_chebyu,
               "legendre_polynomial_p": sc.eval_legendre}.get(name)
        if ref is not None:
            ok = n >= 0
            assert_close(got.cpu().numpy()[ok], ref(n[ok].astype(int), x[ok]), rtol=1e-8,
                         atol=1e-8)


# -- derivatives -----------------------------------------------------------------------------------
def test_not_differentiable_outputs_do_not_require_grad(device: str) -> None:
    x = gt.tensor([0.5, 1.5], device=device, requires_grad=True)
    tx = torch.tensor([0.5, 1.5], requires_grad=True)
    for name in ["bessel_j0", "modified_bessel_k1", "airy_ai", "spherical_bessel_j0"]:
        assert getattr(S, name)(x).requires_grad == getattr(torch.special, name)(tx).requires_grad
    assert S.hermite_polynomial_h(x, 3).requires_grad is False


def test_first_argument_derivatives_raise(device: str) -> None:
    a = gt.tensor([0.5, 1.5], dtype=gt.float64, device=device, requires_grad=True)
    x = gt.tensor([1.0, 2.0], dtype=gt.float64, device=device)
    for fn, what in [(gt.igamma, "igamma: input"), (gt.igammac, "igammac: input"),
                     (S.zeta, "zeta")]:
        y = fn(a + 1, x).sum()
        with pytest.raises(RuntimeError, match=f"the derivative for '{what}' is not implemented"):
            y.backward()


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "erfinv", "i0", "i0e", "i1", "i1e",
                                  "erfcx", "ndtr", "ndtri", "log_ndtr", "entr"])
def test_gradients_match_torch(device: str, name: str) -> None:
    fn, tfn = UNARY[name][:2]
    x = np.array([0.1, 0.3, 0.45, 0.8, 0.95])
    if name in ("i1", "i1e", "i0e"):
        x = np.array([-2.0, -0.5, 0.0, 0.7, 3.0])
    g = gt.tensor(x, device=device, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    fn(g).sum().backward()
    tfn(t).sum().backward()
    assert_close(g.grad, t.grad, rtol=1e-8, atol=1e-10)


# -- the namespace ------------------------------------------------------------------------------
def test_every_torch_special_name_exists() -> None:
    assert sorted(S.__all__) == sorted(torch.special.__all__)
    for name in S.__all__:
        assert callable(getattr(S, name))


def test_shared_names_are_the_top_level_functions(device: str) -> None:
    assert S.erf is gt.erf and S.erfc is gt.erfc and S.erfinv is gt.erfinv
    assert S.expit is gt.sigmoid and S.exp2 is gt.exp2 and S.expm1 is gt.expm1
    assert S.log1p is gt.log1p and S.gammaln is gt.lgamma and S.psi is S.digamma is gt.digamma
    assert S.polygamma is gt.polygamma and S.i0 is gt.i0 and S.sinc is gt.sinc
    assert S.gammainc is gt.igamma and S.gammaincc is gt.igammac and S.xlogy is gt.xlogy
    assert S.round is gt.round and S.logsumexp is gt.logsumexp
    assert S.softmax is gt.softmax and S.log_softmax is gt.log_softmax
    x = np.array([[0.2, 0.7], [0.4, 0.9]])
    tx, gx = torch.from_numpy(x), gt.tensor(x, device=device)
    assert_close(S.logit(gx, 0.25), torch.special.logit(tx, 0.25))
    out = gt.empty(2, 2, dtype=gt.float64, device=device)
    assert S.logit(gx, out=out) is out
    assert_close(out, torch.special.logit(tx))
    assert_close(S.round(gx * 10, decimals=-1), torch.special.round(tx * 10, decimals=-1))
    assert_close(S.softmax(gx, 1), torch.special.softmax(tx, 1))
    assert_close(S.log_softmax(gx, 0, dtype=gt.float32),
                 torch.special.log_softmax(tx, 0, dtype=torch.float32))
    assert_close(S.logsumexp(gx, 1), torch.special.logsumexp(tx, 1))
    assert_close(S.expit(gx), torch.special.expit(tx))
    assert_close(S.xlogy(gx, gx), torch.special.xlogy(tx, tx))


def test_noncontiguous_and_broadcast(device: str) -> None:
    x = _RNG.uniform(0.1, 5, (4, 6))
    tx, gx = torch.from_numpy(x), gt.tensor(x, device=device)
    assert_close(gt.lgamma(gx.T), torch.lgamma(tx.T))
    assert_close(S.i1e(gx[:, ::2]), torch.special.i1e(tx[:, ::2]))
    assert_close(gt.igamma(gx[:1], gx), torch.igamma(tx[:1], tx))

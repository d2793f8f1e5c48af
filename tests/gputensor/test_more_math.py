"""angle, frexp, gcd/lcm, nextafter, conj_physical, the new torch.* in-place forms, and the
small factories and shape companions (is_signed, fill, scalar_tensor, range, detach,
empty_permuted, as_strided_, narrow_copy, nonzero_static, slice_inverse), against PyTorch on
cpu and emulated cuda: values, dtypes, out=, in-place forms, errors and derivatives."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import forward_ad as gfwd

torch = pytest.importorskip("torch")
tfwd = torch.autograd.forward_ad

_INTS = ("uint8", "int8", "int16", "int32", "int64")
_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _g(t: torch.Tensor, device: str, requires_grad: bool = False) -> gt.Tensor:
    """The gputensor copy of a torch tensor (bfloat16 travels as float32)."""
    if t.dtype is torch.bfloat16:
        out = gt.tensor(t.float().numpy(), device=device).to(gt.bfloat16)
    else:
        out = gt.tensor(t.detach().numpy(), device=device)
    return out.requires_grad_() if requires_grad else out


def _same(got: gt.Tensor, want: torch.Tensor, exact: bool = True) -> None:
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    g = got.detach().cpu().to(gt.float32).numpy() if got.dtype is gt.bfloat16 else \
        got.detach().cpu().numpy()
    w = want.detach().float().numpy() if want.dtype is torch.bfloat16 else want.detach().numpy()
    if exact:
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, equal_nan=True)


# -- gcd / lcm ---------------------------------------------------------------------------------
def _int_edges(dt: str) -> tuple[list[int], list[int]]:
    info = torch.iinfo(getattr(torch, dt))
    a = [info.min, info.min, info.min, 0, info.min, 6, info.max, info.max, 127, 100, -4, 0, 12,
         -18, info.max, info.min + 1]
    b = [6, 0, info.min, info.min, -1, 4, 2, info.max - 1, 2, 3, 6, 0, -18, -12, info.min, 3]
    if dt == "uint8":
        a, b = [v % 256 for v in a], [v % 256 for v in b]
    return a, b


@pytest.mark.parametrize("dt", _INTS)
@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_edges_match_torch(device, dt, name) -> None:
    # INT_MIN's absolute value wraps to itself; lcm past the range wraps as PyTorch's does.
    a, b = _int_edges(dt)
    if name == "lcm" and dt in ("int32", "int64"):
        # lcm(INT_MAX, INT_MIN): gcd is -1 and PyTorch's INT_MIN / -1 traps (SIGFPE); here
        # the quotient wraps like the rest of the arithmetic.
        pair = gt.tensor([a.pop(14), b.pop(14)], dtype=getattr(gt, dt), device=device)
        info = torch.iinfo(getattr(torch, dt))
        assert gt.lcm(pair, pair.flip(0)).tolist() == [info.min, info.min]
    ta, tb = (torch.tensor(v, dtype=getattr(torch, dt)) for v in (a, b))
    want = getattr(torch, name)(ta, tb)
    got = getattr(gt, name)(_g(ta, device), _g(tb, device))
    _same(got, want)
    # the other operand order, and the method
    _same(getattr(_g(tb, device), name)(_g(ta, device)), getattr(tb, name)(ta))


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_random_broadcast_promotion(device, name) -> None:
    rng = np.random.default_rng(1)
    ta = torch.tensor(rng.integers(-300, 300, (4, 1, 5)), dtype=torch.int16)
    tb = torch.tensor(rng.integers(-10**6, 10**6, (3, 1)), dtype=torch.int64)
    want = getattr(torch, name)(ta, tb)
    _same(getattr(gt, name)(_g(ta, device), _g(tb, device)), want)
    # a 0-dim tensor operand does not promote past the dimensioned one's category
    t0 = torch.tensor(12, dtype=torch.int64)
    _same(getattr(gt, name)(_g(ta, device), _g(t0, device)), getattr(torch, name)(ta, t0))
    # out= of a wider dtype, and the in-place forms (method and torch.<name>_)
    out = gt.empty(0, dtype=gt.int64, device=device)
    r = getattr(gt, name)(_g(ta, device), _g(tb, device), out=out)
    assert r is out
    _same(out, want)
    x, tx = _g(ta, device), ta.clone()
    assert getattr(x, name + "_")(_g(ta[0, 0], device)) is x
    getattr(tx, name + "_")(ta[0, 0])
    _same(x, tx)
    y, ty = _g(ta, device), ta.clone()
    assert getattr(gt, name + "_")(y, _g(ta.flip(0), device)) is y
    getattr(torch, name + "_")(ty, ta.flip(0))
    _same(y, ty)


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_errors(device, name) -> None:
    fn = getattr(gt, name)
    ints = gt.tensor([4, 6], device=device)
    kernel = f'"{name}_{gt.device(device).type}"'
    with pytest.raises(NotImplementedError, match=f"{kernel} not implemented for 'Float'"):
        fn(gt.tensor([4.0], device=device), ints)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        fn(gt.tensor([True], device=device), gt.tensor([True], device=device))
    with pytest.raises(TypeError, match="argument 'other' .* must be Tensor, not int"):
        fn(ints, 4)
    with pytest.raises(NotImplementedError, match="not implemented for 'Float'"):
        getattr(ints, name + "_")(gt.tensor([1.5], device=device))
    with pytest.raises(NotImplementedError):
        getattr(torch, name)(torch.tensor([4.0]), torch.tensor([4]))   # the oracle agrees
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        getattr(ints, name + "_")(gt.tensor([[1], [2]], device=device))


# -- angle -------------------------------------------------------------------------------------
_SPECIAL = [1.0, -2.5, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), 3.0]


@pytest.mark.parametrize("dt", ("bool", "uint8", "int32", "int64", *_FLOATS))
def test_angle_real_match_torch(device, dt) -> None:
    vals = [True, False] if dt == "bool" else ([v for v in _SPECIAL if math.isfinite(v) and
                                                 (v >= 0 or dt != "uint8")]
                                                if dt in _INTS else _SPECIAL)
    t = torch.tensor(vals).to(getattr(torch, dt))
    _same(gt.angle(_g(t, device)), torch.angle(t), exact=False)
    _same(_g(t, device).angle(), t.angle(), exact=False)


@pytest.mark.parametrize("dt", ("complex64", "complex128"))
def test_angle_complex_match_torch(device, dt) -> None:
    re = torch.tensor([1.0, -1.0, 0.0, -0.0, float("nan"), float("inf"), -2.0, 0.0])
    im = torch.tensor([1.0, 0.0, 0.0, -0.0, 1.0, 1.0, -3.0, float("nan")])
    t = torch.complex(re, im).to(getattr(torch, dt))
    got = gt.angle(_g(t, device))
    assert got.dtype is (gt.float32 if dt == "complex64" else gt.float64)
    _same(got, torch.angle(t), exact=False)
    out = gt.empty(8, dtype=gt.float64, device=device)
    assert gt.angle(_g(t, device), out=out) is out
    _same(out, torch.angle(t).double(), exact=False)
    with pytest.raises(RuntimeError, match="can't be cast"):
        gt.angle(_g(t, device), out=gt.empty(8, dtype=gt.int64, device=device))


def test_angle_derivatives_match_torch(device) -> None:
    z = torch.tensor([1 + 2j, -3 + 0.5j, 0j, -1 - 1j], dtype=torch.complex128,
                     requires_grad=True)
    w = torch.tensor([0.3, -1.0, 2.0, 0.5], dtype=torch.float64)
    (torch.angle(z) * w).sum().backward()
    gz = _g(z, device, requires_grad=True)
    (gt.angle(gz) * _g(w, device)).sum().backward()
    np.testing.assert_allclose(gz.grad.cpu().numpy(), z.grad.numpy(), rtol=1e-12)
    # real input: a zero gradient
    x = torch.tensor([-1.0, 2.0], dtype=torch.float64, requires_grad=True)
    torch.angle(x).sum().backward()
    gx = _g(x, device, requires_grad=True)
    gt.angle(gx).sum().backward()
    _same(gx.grad, x.grad)
    # forward mode
    tan = torch.tensor([0.5 - 1j, 2 + 1j, 1 + 1j, -0.25j], dtype=torch.complex128)
    with tfwd.dual_level():
        want = tfwd.unpack_dual(torch.angle(tfwd.make_dual(z.detach(), tan))).tangent
    with gfwd.dual_level():
        got = gfwd.unpack_dual(gt.angle(gfwd.make_dual(_g(z, device), _g(tan, device))))
    np.testing.assert_allclose(got.tangent.cpu().numpy(), want.numpy(), rtol=1e-12)
    # gradcheck compares real Jacobians: through the real and imaginary parts
    re, im = (gt.tensor(v, dtype=gt.float64, device=device, requires_grad=True)
              for v in ([1.0, -3.0], [2.0, 0.5]))
    assert gt.autograd.gradcheck(lambda r, i: gt.angle(gt.complex(r, i)), (re, im))


# -- frexp -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", _FLOATS)
def test_frexp_match_torch(device, dt) -> None:
    tdt = getattr(torch, dt)
    info = torch.finfo(tdt)
    vals = [0.0, -0.0, 1.0, 3.0, -5.5, float("inf"), -float("inf"), float("nan"), info.max,
            info.tiny, info.tiny / 4, -info.tiny / 2, 0.75, 1024.5]
    t = torch.tensor(vals, dtype=torch.float64).to(tdt)
    want = torch.frexp(t)
    got = gt.frexp(_g(t, device))
    assert type(got).__name__ == "frexp" and got._fields == ("mantissa", "exponent")
    _same(got.mantissa, want.mantissa)
    _same(got.exponent, want.exponent)
    m, e = _g(t, device).frexp()
    _same(m, want.mantissa)
    _same(e, want.exponent)
    outs = (gt.empty(0, dtype=getattr(gt, dt), device=device),
            gt.empty(0, dtype=gt.int32, device=device))
    r = gt.frexp(_g(t, device), out=outs)
    assert r.mantissa is outs[0] and r.exponent is outs[1]
    _same(outs[1], want.exponent)


def test_frexp_errors(device) -> None:
    for bad in (gt.tensor([1, 2], device=device), gt.tensor([1j], device=device)):
        with pytest.raises(RuntimeError, match=r"torch.frexp\(\) only supports floating-point"):
            gt.frexp(bad)
    x = gt.tensor([1.0], device=device)
    with pytest.raises(RuntimeError, match="expects exponent to have int dtype"):
        gt.frexp(x, out=(gt.empty(1, device=device), gt.empty(1, device=device)))
    with pytest.raises(RuntimeError, match="expects mantissa to have dtype float32"):
        gt.frexp(x, out=(gt.empty(1, dtype=gt.float64, device=device),
                         gt.empty(1, dtype=gt.int32, device=device)))


def test_frexp_derivatives_match_torch(device) -> None:
    t = torch.tensor([3.0, -0.1, 1e5, 0.5], dtype=torch.float64, requires_grad=True)
    m, _ = torch.frexp(t)
    (m * torch.arange(4.0, dtype=torch.float64)).sum().backward()
    g = _g(t, device, requires_grad=True)
    gm, ge = gt.frexp(g)
    assert not ge.requires_grad
    (gm * gt.arange(4.0, dtype=gt.float64, device=device)).sum().backward()
    np.testing.assert_allclose(g.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-12)
    tan = torch.tensor([1.0, 2.0, -3.0, 0.5], dtype=torch.float64)
    with tfwd.dual_level():
        want = tfwd.unpack_dual(torch.frexp(tfwd.make_dual(t.detach(), tan))[0]).tangent
    with gfwd.dual_level():
        got = gfwd.unpack_dual(gt.frexp(gfwd.make_dual(_g(t, device), _g(tan, device)))[0])
    np.testing.assert_allclose(got.tangent.cpu().numpy(), want.numpy(), rtol=1e-12)
    assert gt.autograd.gradcheck(lambda x: gt.frexp(x).mantissa,
                                 (_g(torch.tensor([3.0, -0.1, 7.0], dtype=torch.float64),
                                     device, True),))


# -- nextafter ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", _FLOATS)
def test_nextafter_match_torch(device, dt) -> None:
    tdt = getattr(torch, dt)
    info = torch.finfo(tdt)
    x = [0.0, 0.0, -0.0, 1.0, 1.0, -1.0, -1.0, float("nan"), 1.0, info.max, float("inf"),
         -float("inf"), info.tiny, -info.tiny, 2.0, 0.0]
    y = [1.0, -1.0, 1.0, 2.0, 0.0, 0.0, -2.0, 1.0, float("nan"), float("inf"), 0.0, 0.0,
         0.0, 0.0, 2.0, -0.0]
    tx, ty = (torch.tensor(v, dtype=torch.float64).to(tdt) for v in (x, y))
    want = torch.nextafter(tx, ty)
    got = gt.nextafter(_g(tx, device), _g(ty, device))
    _same(got, want)
    g32, w32 = got.cpu().to(gt.float32).numpy(), want.float().numpy()
    real = ~np.isnan(w32)   # (a NaN's sign bit is the platform's choice)
    assert np.array_equal(np.signbit(g32[real]), np.signbit(w32[real]))
    # in place (method only, as in PyTorch)
    gx = _g(tx, device)
    assert gx.nextafter_(_g(ty, device)) is gx
    _same(gx, want)


def test_nextafter_broadcast_promotion_out(device) -> None:
    tx = torch.tensor([[1.0], [2.0]], dtype=torch.float16)
    ty = torch.tensor([0.0, 3.0, 2.0], dtype=torch.float16)
    _same(gt.nextafter(_g(tx, device), _g(ty, device)), torch.nextafter(tx, ty))
    t32, t64 = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 3.0], dtype=torch.float64)
    _same(gt.nextafter(_g(t32, device), _g(t64, device)), torch.nextafter(t32, t64))
    # a 0-dim operand keeps the dimensioned float16 dtype
    t0 = torch.tensor(5.0, dtype=torch.float64)
    tx16 = torch.tensor([1.0, 7.0], dtype=torch.float16)
    _same(gt.nextafter(_g(tx16, device), _g(t0, device)), torch.nextafter(tx16, t0))
    for src, other in ((t32, t64), (tx16, t0)):
        want = torch.nextafter(src, other, out=torch.empty(0, dtype=torch.float64))
        out = gt.empty(0, dtype=gt.float64, device=device)
        assert gt.nextafter(_g(src, device), _g(other, device), out=out) is out
        _same(out, want)


def test_nextafter_errors(device) -> None:
    ints = gt.tensor([1, 2], device=device)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        gt.nextafter(ints, ints)
    with pytest.raises(TypeError, match="must be Tensor, not float"):
        gt.nextafter(gt.tensor([1.0], device=device), 3.0)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        ints.nextafter_(gt.tensor([2.0, 3.0], device=device))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([1, 2]).nextafter_(torch.tensor([2.0, 3.0]))
    # a wider other is computed in its dtype and rounded into self, as in PyTorch
    h = gt.tensor([1.0], dtype=gt.float16, device=device)
    h.nextafter_(gt.tensor([2.0], dtype=gt.float64, device=device))
    assert h.tolist() == torch.tensor([1.0], dtype=torch.float16).nextafter_(
        torch.tensor([2.0], dtype=torch.float64)).tolist()


@pytest.mark.parametrize("dt", ("float64", "float16"))
def test_nextafter_derivatives_match_torch(device, dt) -> None:
    tdt = getattr(torch, dt)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=tdt, requires_grad=True)
    y = torch.tensor([0.0, 2.0, 4.0], dtype=tdt, requires_grad=True)
    (torch.nextafter(x, y) * torch.tensor([1.0, 2.0, 3.0], dtype=tdt)).sum().backward()
    gx, gy = _g(x, device, True), _g(y, device, True)
    (gt.nextafter(gx, gy) * gt.tensor([1.0, 2.0, 3.0], dtype=gx.dtype, device=device)
     ).sum().backward()
    _same(gx.grad, x.grad)
    _same(gy.grad, y.grad)
    tan = torch.tensor([1.0, 1.0, -2.0], dtype=tdt)
    with tfwd.dual_level():
        want = tfwd.unpack_dual(torch.nextafter(tfwd.make_dual(x.detach(), tan),
                                                y.detach())).tangent
    with gfwd.dual_level():
        got = gfwd.unpack_dual(gt.nextafter(gfwd.make_dual(_g(x, device), _g(tan, device)),
                                            _g(y, device)))
    _same(got.tangent, want)


# -- conj_physical -----------------------------------------------------------------------------
def test_conj_physical_match_torch(device) -> None:
    t = torch.tensor([1 + 2j, -3 - 0.5j, 0j], dtype=torch.complex128)
    got = gt.conj_physical(_g(t, device))
    _same(got, torch.conj_physical(t))
    assert not got.is_conj()
    real = gt.tensor([1.0, -2.0], device=device)
    assert gt.conj_physical(real) is real and real.conj_physical() is real
    assert gt.conj_physical_(real) is real and real.conj_physical_() is real
    out = gt.empty(2, device=device)
    assert gt.conj_physical(real, out=out) is out
    _same(out, torch.tensor([1.0, -2.0]))
    z = _g(t, device)
    assert gt.conj_physical_(z) is z
    _same(z, torch.conj_physical(t))
    assert z.conj_physical_() is z
    _same(z, t)
    outc = gt.empty(3, dtype=gt.complex128, device=device)
    assert gt.conj_physical(_g(t, device), out=outc) is outc
    _same(outc, t.conj_physical())


def test_conj_physical_derivatives_match_torch(device) -> None:
    t = torch.tensor([1 + 2j, -3 - 0.5j], dtype=torch.complex128, requires_grad=True)
    w = torch.tensor([2 - 1j, 0.5j], dtype=torch.complex128)
    (torch.conj_physical(t) * w).abs().sum().backward()
    g = _g(t, device, True)
    (gt.conj_physical(g) * _g(w, device)).abs().sum().backward()
    np.testing.assert_allclose(g.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-12)
    # in place on a non-leaf keeps the graph
    g2 = _g(t, device, True)
    h = g2 * 1
    h.conj_physical_()
    (h * _g(w, device)).abs().sum().backward()
    np.testing.assert_allclose(g2.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-12)
    re, im = (gt.tensor(v, dtype=gt.float64, device=device, requires_grad=True)
              for v in ([1.0, -3.0], [2.0, 0.5]))
    assert gt.autograd.gradcheck(
        lambda r, i: gt.view_as_real(gt.conj_physical(gt.complex(r, i)) * (2 - 1j)), (re, im))


# -- the new torch.* in-place functions ----------------------------------------------------------
@pytest.mark.parametrize("name,args", [("erfc_", ()), ("i0_", ()), ("logit_", ()),
                                       ("logit_", (0.25,))])
def test_inplace_function_forms(device, name, args) -> None:
    data = np.array([0.1, 0.5, 0.9, 0.05])
    t, g = torch.tensor(data), gt.tensor(data, device=device)
    assert getattr(gt, name)(g, *args) is g
    getattr(torch, name)(t, *args)
    np.testing.assert_allclose(g.cpu().numpy(), t.numpy(), rtol=1e-12)


def test_ldexp_and_as_strided_function_forms(device) -> None:
    t, e = torch.tensor([1.0, -3.0, 0.5]), torch.tensor([2, -1, 0])
    g = _g(t, device)
    assert gt.ldexp_(g, _g(e, device)) is g
    _same(g, torch.ldexp_(t.clone(), e))
    with pytest.raises(RuntimeError, match="can't be cast"):
        gt.ldexp_(gt.tensor([1, 2], device=device), gt.tensor([1, 1], device=device))
    base = torch.arange(6.0)
    gb = _g(base, device)
    v = gb[1:]
    assert gt.as_strided_(v, (2, 2), (2, 1), 1) is v
    _same(v, torch.as_strided_(base[1:], (2, 2), (2, 1), 1))


# -- small functions and factories ---------------------------------------------------------------
def test_is_signed_and_detach(device) -> None:
    for dt in ("bool", "uint8", "int8", "int64", "float16", "bfloat16", "complex64"):
        x = gt.zeros(1, dtype=getattr(gt, dt), device=device)
        assert gt.is_signed(x) is torch.is_signed(torch.zeros(1, dtype=getattr(torch, dt)))
    a = gt.ones(2, device=device, requires_grad=True)
    d = gt.detach(a * 2)
    assert not d.requires_grad and d.grad_fn is None
    with pytest.raises(TypeError, match="must be Tensor"):
        gt.is_signed(3)


def test_fill(device) -> None:
    _same(gt.fill(gt.tensor([1, 2], device=device), 2.7), torch.fill(torch.tensor([1, 2]), 2.7))
    x = gt.ones(2, 3, device=device).t()
    r = gt.fill(x, gt.tensor(3, device=device))
    assert r.stride() == torch.fill(torch.ones(2, 3).t(), 3).stride()
    _same(r, torch.full((3, 2), 3.0))
    assert x.tolist() == [[1.0] * 2] * 3   # out of place
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor but "
                                           "got tensor with 1 dimensions"):
        gt.fill(x, gt.tensor([1.0, 2.0], device=device))
    with pytest.raises(RuntimeError, match="value cannot be converted to type float"):
        gt.fill(x, 1 + 2j)
    # derivatives: zeros for the input, the sum for a tensor value
    t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    v = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    (torch.fill(t, v) * torch.arange(3.0)).sum().backward()
    gtt, gv = _g(t, device, True), _g(v, device, True)
    (gt.fill(gtt, gv) * gt.arange(3.0, device=device)).sum().backward()
    _same(gtt.grad, t.grad)
    _same(gv.grad, v.grad)
    assert gt.autograd.gradcheck(lambda s: gt.fill(gt.zeros(4, dtype=gt.float64,
                                                             device=device), s) * 3,
                                 (_g(v.detach(), device, True),))
    with gfwd.dual_level():
        dual = gfwd.make_dual(_g(v.detach(), device), gt.tensor(5.0, dtype=gt.float64,
                                                                   device=device))
        tangent = gfwd.unpack_dual(gt.fill(gt.zeros(2, dtype=gt.float64, device=device),
                                           dual)).tangent
    assert tangent.tolist() == [5.0, 5.0]


def test_scalar_tensor(device) -> None:
    for value, kw in ((3, {}), (True, {}), (2.5, {"dtype": torch.int32}), (7, {"dtype":
                                                                               torch.int64})):
        want = torch.scalar_tensor(value, **kw)
        gkw = {k: getattr(gt, str(v).split(".")[-1]) for k, v in kw.items()}
        got = gt.scalar_tensor(value, **gkw, device=device)
        _same(got, want)
    r = gt.scalar_tensor(1.5, requires_grad=True, device=device)
    assert r.requires_grad and r.is_leaf
    gt.set_default_dtype(gt.float64)
    assert gt.scalar_tensor(1).dtype is gt.float64
    with pytest.raises(RuntimeError, match="value cannot be converted to type double"):
        gt.scalar_tensor(1 + 2j)


@pytest.mark.parametrize("args,kw", [((1, 4), {}), ((0, 1, 0.3), {}), ((5, 1, -2), {}),
                                     ((1, 4), {"dtype": "int64"}), ((-1, 2.5, 0.5), {}),
                                     ((0, 10, 3), {"dtype": "int32"}), ((2, 2), {}),
                                     ((0.1, 1.0, 0.1), {"dtype": "float64"})])
def test_range_matches_torch(device, args, kw) -> None:
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        want = torch.range(*args, **{k: getattr(torch, v) for k, v in kw.items()})
    with pytest.warns(UserWarning, match="torch.range is deprecated") as record:
        got = gt.range(*args, **{k: getattr(gt, v) for k, v in kw.items()}, device=device)
    assert record[0].filename == __file__   # reported at the caller, as PyTorch's is
    _same(got, want)
    out = gt.empty(0, dtype=got.dtype, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gt.range(*args, out=out) is out
    _same(out, want)


def test_range_errors() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            gt.range(0, 5, 0)
        with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent"):
            gt.range(4, 1)
        with pytest.raises(RuntimeError, match="unsupported range: 0 -> inf"):
            gt.range(0, float("inf"))
        with pytest.raises(TypeError, match="missing 1 required positional arguments"):
            gt.range(5)


def test_empty_permuted(device) -> None:
    for size, layout in (((2, 3, 4), (0, 2, 1)), ((2, 3, 4, 5), (0, 2, 3, 1)), ((3, 0, 2),
                                                                                   (2, 1, 0)),
                         ((), ())):
        want = torch.empty_permuted(size, layout)
        got = gt.empty_permuted(size, layout, dtype=gt.float64, device=device)
        assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
        assert got.dtype is gt.float64 and got.is_contiguous() == want.is_contiguous()
    with pytest.raises(RuntimeError, match=r"len\(size\) = 3 is not equal to "
                                           r"len\(physical_layout\) = 2"):
        gt.empty_permuted((2, 3, 4), (0, 1))
    with pytest.raises(RuntimeError, match="Duplicate dim not allowed"):
        gt.empty_permuted((2, 3, 4), (0, 1, 1))
    with pytest.raises(RuntimeError, match="but got 5 at index 2"):
        gt.empty_permuted((2, 3, 4), (0, 1, 5))
    r = gt.empty_permuted((2, 3), (1, 0), requires_grad=True, device=device)
    assert r.requires_grad and r.is_leaf


# -- narrow_copy, nonzero_static, slice_inverse ----------------------------------------------------
def test_narrow_copy(device) -> None:
    t = torch.arange(12.0, dtype=torch.float64).view(3, 4)
    g = _g(t, device)
    for args in ((1, 1, 2), (0, -2, 2), (1, 0, 0)):
        want = torch.narrow_copy(t, *args)
        got = gt.narrow_copy(g, *args)
        _same(got, want)
        assert got.is_contiguous() and got.untyped_storage().data_ptr() != \
            g.untyped_storage().data_ptr()
        _same(g.narrow_copy(*args), t.narrow_copy(*args))
    out = gt.empty(0, dtype=gt.float64, device=device)
    assert gt.narrow_copy(g, 1, 1, 2, out=out) is out
    _same(out, torch.narrow_copy(t, 1, 1, 2))
    with pytest.raises(RuntimeError, match="exceeds dimension size"):
        gt.narrow_copy(g, 1, 3, 2)
    tr = t.clone().requires_grad_()
    (torch.narrow_copy(tr, 1, 1, 2) * 3).sum().backward()
    gr = _g(t, device, True)
    (gt.narrow_copy(gr, 1, 1, 2) * 3).sum().backward()
    _same(gr.grad, tr.grad)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 6, 9])
@pytest.mark.parametrize("fill_value", [-1, 7])
def test_nonzero_static_matches_torch(device, size, fill_value) -> None:
    data = [torch.tensor([[1, 0, 2], [0, 0, 3]]), torch.tensor([0.0, float("nan"), -0.0, 2.0]),
            torch.tensor([True, False, True]), torch.tensor(5), torch.tensor(0),
            torch.zeros(2, 0, 3), torch.tensor([1 + 0j, 0j, 1j]),
            torch.tensor([[[1, 1], [0, 1]], [[0, 0], [1, 0]]], dtype=torch.int8)]
    for t in data:
        want = torch.nonzero_static(t, size=size, fill_value=fill_value)
        got = gt.nonzero_static(_g(t, device), size=size, fill_value=fill_value)
        _same(got, want)
        _same(_g(t, device).nonzero_static(size=size, fill_value=fill_value),
              t.nonzero_static(size=size, fill_value=fill_value))


def test_nonzero_static_errors(device) -> None:
    x = gt.tensor([1, 0], device=device)
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        gt.nonzero_static(x, size=-1)
    with pytest.raises(TypeError, match="'fill_value' must be int, not float"):
        gt.nonzero_static(x, size=2, fill_value=2.5)
    with pytest.raises(TypeError):
        gt.nonzero_static(x)   # size is required


def test_slice_inverse(device) -> None:
    t = torch.arange(10.0)
    g = _g(t, device)
    r = gt.slice_inverse(g[2:8:2], g, 0, 2, 8, 2)
    want = torch.slice_inverse(t[2:8:2], t, 0, 2, 8, 2)
    _same(r, want)
    assert r.stride() == want.stride() and r.storage_offset() == want.storage_offset()
    r[0] = 100.0   # a view of the input's storage
    assert g[0].item() == 100.0
    m = _g(torch.arange(12.0).view(3, 4), device)
    r2 = m[:, 1:3].slice_inverse(m, 1, 1, 3)
    assert tuple(r2.shape) == (3, 4) and r2.stride() == (4, 1)
    with pytest.raises(RuntimeError, match="storage"):
        gt.slice_inverse(gt.zeros(3, device=device), gt.zeros(10, device=device), 0, 0, 3)


def test_slice_inverse_derivatives_match_torch(device) -> None:
    base = torch.arange(10.0, dtype=torch.float64)
    w = torch.linspace(-1, 2, 10, dtype=torch.float64)
    tsrc = base.clone().requires_grad_()
    # the input must hold src's geometry: a slice of a buffer that does
    tbig = base.clone().requires_grad_()
    view = tbig[2:8:2]
    (torch.slice_inverse(view, tsrc, 0, 2, 8, 2) * w).sum().backward()
    gsrc, gbig = _g(base, device, True), _g(base, device, True)
    (gt.slice_inverse(gbig[2:8:2], gsrc, 0, 2, 8, 2) * _g(w, device)).sum().backward()
    np.testing.assert_allclose(gbig.grad.cpu().numpy(), tbig.grad.numpy())
    np.testing.assert_allclose(gsrc.grad.cpu().numpy(), tsrc.grad.numpy())


# -- the CUDA sources of these kernels compile for real GPUs (NVRTC), every dtype they take -------
def test_new_elementwise_kernels_compile_with_nvrtc() -> None:
    import re

    from gputensor._ops.elementwise import _rule_dtypes
    from gputensor.kernels.cuda import elementwise_codegen as cuda_ew
    from gputensor.kernels.cuda import nvrtc
    from gputensor.kernels.registry import OPS

    ok, why = nvrtc.availability()
    if not ok:
        pytest.skip(f"NVRTC wheel not installed: {why}")
    dtypes = {"_gcd": _INTS, "_lcm": _INTS, "_nextafter": ("float32", "float64"),
              "angle": ("bool", "int32", *_FLOATS, "complex64", "complex128"),
              "_frexp_mantissa": _FLOATS, "_frexp_exponent": _FLOATS}
    specs = []
    for name, names in dtypes.items():
        op = OPS[name]
        for n in names:
            dt = getattr(gt, n)
            compute, out_dt = _rule_dtypes(op, dt)
            specs.append(cuda_ew.KernelSpec(op.name, cuda_ew.effective_expr(op, compute),
                                            tuple(op.params), out_dt, compute, (dt,) * op.arity))
    prog = nvrtc.compile_program(cuda_ew.module_source(specs), "more_math.cu", arch="sm_80")
    assert {s.kernel_name for s in specs} <= set(re.findall(r"\.entry\s+(\w+)", prog.ptx))


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_zero_dim_operand_of_another_dtype(device, name) -> None:
    # The 0-dim operand converts into the dimensioned operand's dtype first (255 -> -1 in
    # int8, -5 -> 251 in uint8), on every backend.
    cases = [(torch.tensor([-35, 5, -128], dtype=torch.int8), torch.tensor(255, dtype=torch.uint8)),
             (torch.tensor([10, 255, 0], dtype=torch.uint8), torch.tensor(-5, dtype=torch.int8)),
             (torch.tensor([7, -6], dtype=torch.int32), torch.tensor(2**40 + 6))]
    for ta, tb in cases:
        for x, y in ((ta, tb), (tb, ta)):
            _same(getattr(gt, name)(_g(x, device), _g(y, device)), getattr(torch, name)(x, y))


def test_vmap_batches_the_new_binary_ops(device) -> None:
    tx, ty = torch.tensor([[4, 6], [9, -12]]), torch.tensor([[6, 4], [6, 8]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a batching rule, not the per-sample fallback
        for name in ("gcd", "lcm"):
            _same(gt.func.vmap(getattr(gt, name))(_g(tx, device), _g(ty, device)),
                  torch.func.vmap(getattr(torch, name))(tx, ty))
            _same(gt.func.vmap(getattr(gt, name), in_dims=(0, None))(_g(tx, device),
                                                                     _g(ty[0], device)),
                  torch.func.vmap(getattr(torch, name), in_dims=(0, None))(tx, ty[0]))
        hx, hy = tx.half(), ty.half()
        _same(gt.func.vmap(gt.nextafter)(_g(hx, device), _g(hy, device)),
              torch.func.vmap(torch.nextafter)(hx, hy))
        z = tx.to(torch.complex64) * (1 + 2j)
        got = gt.func.vmap(gt.conj_physical)(_g(z, device))
    _same(got, torch.func.vmap(torch.conj_physical)(z))   # (PyTorch's own falls back here)


def test_gradcheck_float64(device) -> None:
    def leaf(values: list[float]) -> gt.Tensor:
        return gt.tensor(values, dtype=gt.float64, device=device, requires_grad=True)

    other = gt.tensor([0.0, 5.0, -1.0], dtype=gt.float64, device=device)
    assert gt.autograd.gradcheck(lambda x: gt.nextafter(x, other), (leaf([1.0, 2.0, 3.0]),))
    assert gt.autograd.gradcheck(lambda x: gt.narrow_copy(x, 0, 1, 2), (leaf([1.0, 2.0, 3.0]),))
    # (slice_inverse is left out: its view reads all of the input's storage, while PyTorch's
    # formula, which test_slice_inverse_derivatives_match_torch checks, credits only the slice)

"""gt.linalg and the top-level decompositions against PyTorch: values, dtypes, shapes, named
results, out=, LinAlgError with PyTorch's messages and the _ex variants' info, on cpu and the
emulated cuda device. Gradients are gradchecked in tests/autograd/samples_linalg.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, assert_same_error, requires_torch, torch

pytestmark = requires_torch

DTYPES = [gt.float32, gt.float64, gt.complex64, gt.complex128]
TOL = {gt.float32: 2e-4, gt.float64: 1e-9, gt.complex64: 2e-4, gt.complex128: 1e-9}


def _array(shape: tuple, dtype: gt.dtype, seed: int = 0, shift: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, shape)
    if dtype.is_complex:
        a = a + 1j * rng.uniform(-1, 1, shape)
    if shift:
        a = a + shift * np.eye(shape[-2], shape[-1])
    return a.astype(dtype.np_dtype)


def _spd(shape: tuple, dtype: gt.dtype, seed: int = 0) -> np.ndarray:
    a = _array(shape, dtype, seed)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(
        dtype.np_dtype)


def _pair(a: np.ndarray, device: str) -> tuple[gt.Tensor, Any]:
    return gt.tensor(a, device=device), torch.from_numpy(a.copy())


def _same(g_fn: Callable, t_fn: Callable, arrays: list[np.ndarray], device: str,
          dtype: gt.dtype) -> None:
    gs, ts = zip(*(_pair(a, device) for a in arrays), strict=True)
    tol = TOL[dtype]
    expected = t_fn(*ts)
    if isinstance(expected, tuple):
        expected = tuple(e.resolve_conj() for e in expected)
    else:
        expected = expected.resolve_conj()
    assert_close(g_fn(*gs), expected, atol=tol, rtol=tol)


def _linalg_error(g_call: Callable, t_call: Callable) -> None:
    with pytest.raises(torch.linalg.LinAlgError) as want:
        t_call()
    with pytest.raises(gt.linalg.LinAlgError) as got:
        g_call()
    assert isinstance(got.value, RuntimeError)
    assert str(got.value) == str(want.value).replace("torch.", "gputensor.")


# -- determinants and inverses ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet_logdet_inv(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 3, 4, 4), dtype, shift=1.0)
    _same(gt.linalg.det, torch.linalg.det, [a], device, dtype)
    _same(gt.det, torch.det, [a], device, dtype)
    _same(lambda x: x.det(), lambda x: x.det(), [a], device, dtype)
    _same(lambda x: tuple(gt.linalg.slogdet(x)), lambda x: tuple(torch.linalg.slogdet(x)), [a],
          device, dtype)
    _same(lambda x: tuple(x.slogdet()), lambda x: tuple(x.slogdet()), [a], device, dtype)
    _same(gt.logdet, torch.logdet, [a], device, dtype)
    _same(gt.linalg.inv, torch.linalg.inv, [a], device, dtype)
    _same(lambda x: x.inverse(), lambda x: x.inverse(), [a], device, dtype)
    _same(lambda x: tuple(gt.linalg.inv_ex(x)), lambda x: tuple(torch.linalg.inv_ex(x)), [a],
          device, dtype)


def test_result_types_and_out(device: str) -> None:
    g, _ = _pair(_array((3, 3), gt.float64, shift=2.0), device)
    res = gt.linalg.slogdet(g)
    assert type(res).__name__ == "linalg_slogdet" and res.sign is res[0]
    assert type(gt.slogdet(g)).__name__ == "slogdet"
    assert type(gt.linalg.svd(g)).__name__ == "linalg_svd"
    assert gt.linalg.svd(g).Vh is not None and gt.svd(g).V is not None
    assert type(gt.linalg.qr(g)).__name__ == "linalg_qr"
    assert gt.linalg.eigh(g + g.mT).eigenvectors is not None
    assert gt.linalg.cholesky_ex(g @ g.mT).L is not None
    out = gt.empty(0, dtype=gt.float64, device=device)
    r = gt.linalg.inv(g, out=out)
    assert r is out and tuple(out.shape) == (3, 3)
    q, r_ = gt.empty(0, dtype=gt.float64, device=device), gt.empty(0, dtype=gt.float64,
                                                                    device=device)
    res = gt.linalg.qr(g, out=(q, r_))
    assert res.Q is q and tuple(r_.shape) == (3, 3)
    assert gt.linalg.det is gt.det and gt.linalg.matrix_power is gt.matrix_power
    assert gt.linalg.matrix_exp is gt.matrix_exp and gt.linalg.matmul is gt.matmul
    torch_names = {n for n in dir(torch.linalg) if not n.startswith("_")
                   and callable(getattr(torch.linalg, n))}
    assert {n for n in torch_names if not hasattr(gt.linalg, n)} == set()
    assert issubclass(gt.linalg.LinAlgError, RuntimeError)


def test_singular_errors_and_info(device: str) -> None:
    z = np.zeros((2, 2))
    batch = np.stack([np.eye(2), z])
    g, t = _pair(z, device)
    gb, tb = _pair(batch, device)
    _linalg_error(lambda: gt.linalg.inv(g), lambda: torch.linalg.inv(t))
    _linalg_error(lambda: gt.linalg.inv(gb), lambda: torch.linalg.inv(tb))
    _linalg_error(lambda: gt.inverse(gb), lambda: torch.inverse(tb))
    _linalg_error(lambda: gt.linalg.solve(g, g), lambda: torch.linalg.solve(t, t))
    _linalg_error(lambda: gt.linalg.solve(gb, gb), lambda: torch.linalg.solve(tb, tb))
    _linalg_error(lambda: gt.linalg.inv_ex(gb, check_errors=True),
                  lambda: torch.linalg.inv_ex(tb, check_errors=True))
    assert_close(gt.linalg.inv_ex(gb).info, torch.linalg.inv_ex(tb).info)
    assert_close(gt.linalg.solve_ex(gb, gb).info, torch.linalg.solve_ex(tb, tb).info)
    npd = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0])])
    gn, tn = _pair(npd, device)
    _linalg_error(lambda: gt.linalg.cholesky(gn), lambda: torch.linalg.cholesky(tn))
    _linalg_error(lambda: gt.linalg.cholesky(gn[1]), lambda: torch.linalg.cholesky(tn[1]))
    _linalg_error(lambda: gt.cholesky(gn), lambda: torch.cholesky(tn))
    assert_close(gt.linalg.cholesky_ex(gn).info, torch.linalg.cholesky_ex(tn).info)
    _same(gt.linalg.det, torch.linalg.det, [batch], device, gt.float64)
    _same(lambda x: tuple(gt.linalg.slogdet(x)), lambda x: tuple(torch.linalg.slogdet(x)),
          [batch], device, gt.float64)


def test_argument_errors(device: str) -> None:
    e = np.eye(2, dtype=np.float32)
    g, t = _pair(e, device)
    gl, tl = _pair(np.eye(2, dtype=np.int64), device)
    gh, th = gt.eye(2, dtype=gt.float16, device=device), torch.eye(2, dtype=torch.float16)
    gr, tr = _pair(np.ones((2, 3), dtype=np.float32), device)
    gv, tv = _pair(np.ones(3, dtype=np.float32), device)
    for name in ("inv", "det", "slogdet", "cholesky", "eigh", "matrix_exp", "svd", "qr"):
        gf, tf = getattr(gt.linalg, name), getattr(torch.linalg, name)
        assert_same_error(lambda gf=gf: gf(gl), lambda tf=tf: tf(tl))
        if name != "matrix_exp":
            assert_same_error(lambda gf=gf: gf(gh), lambda tf=tf: tf(th))
        assert_same_error(lambda gf=gf: gf(gv), lambda tf=tf: tf(tv))
        if name not in ("svd", "qr"):
            assert_same_error(lambda gf=gf: gf(gr), lambda tf=tf: tf(tr))
    assert_same_error(lambda: gt.linalg.solve(g, g.double()),
                      lambda: torch.linalg.solve(t, t.double()))
    assert_same_error(lambda: gt.linalg.solve(g, gr.mT.reshape(3, 2)[:, :1].reshape(3, 1)),
                      lambda: torch.linalg.solve(t, tr.mT.reshape(3, 2)[:, :1].reshape(3, 1)))
    assert_same_error(lambda: gt.linalg.qr(g, mode="x"), lambda: torch.linalg.qr(t, mode="x"))
    assert_same_error(lambda: gt.linalg.eigh(g, UPLO="X"), lambda: torch.linalg.eigh(t, UPLO="X"))
    assert_same_error(lambda: gt.linalg.eigvalsh(gl), lambda: torch.linalg.eigvalsh(tl))
    assert_same_error(lambda: gt.linalg.pinv(gl), lambda: torch.linalg.pinv(tl))
    assert_same_error(lambda: gt.linalg.matrix_power(gr, 2),
                      lambda: torch.linalg.matrix_power(tr, 2))
    assert_same_error(lambda: gt.linalg.matrix_power(gl, -1),
                      lambda: torch.linalg.matrix_power(tl, -1))
    assert_same_error(lambda: gt.linalg.solve_triangular(gl, gl, upper=True),
                      lambda: torch.linalg.solve_triangular(tl, tl, upper=True))
    if device == "cpu":  # a cuSOLVER choice: CUDA only
        assert_same_error(lambda: gt.linalg.svd(g, driver="gesvd"),
                          lambda: torch.linalg.svd(t, driver="gesvd"))
        assert_same_error(lambda: gt.linalg.svdvals(g, driver="gesvd"),
                          lambda: torch.linalg.svdvals(t, driver="gesvd"))
    else:
        assert_close(gt.linalg.svd(g, driver="gesvdj").S, torch.linalg.svd(t).S)


# -- solvers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_solve(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 3, 3), dtype, shift=2.0)
    b = _array((2, 3, 2), dtype, seed=1)
    _same(gt.linalg.solve, torch.linalg.solve, [a, b], device, dtype)
    _same(gt.linalg.solve, torch.linalg.solve, [a, b[..., 0]], device, dtype)   # batch vector
    _same(gt.linalg.solve, torch.linalg.solve, [a, b[0, :, 0]], device, dtype)  # 1-D B
    _same(gt.linalg.solve, torch.linalg.solve, [a[0], b], device, dtype)        # broadcast A
    _same(lambda x, y: gt.linalg.solve(x, y, left=False),
          lambda x, y: torch.linalg.solve(x, y, left=False), [a, b.swapaxes(-1, -2)], device,
          dtype)
    _same(lambda x, y: tuple(gt.linalg.solve_ex(x, y)),
          lambda x, y: tuple(torch.linalg.solve_ex(x, y)), [a, b], device, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper,left,unit", [(True, True, False), (False, False, True),
                                             (False, True, False)])
def test_solve_triangular(device: str, dtype: gt.dtype, upper: bool, left: bool,
                          unit: bool) -> None:
    a = _array((2, 3, 3), dtype, shift=2.0)
    b = _array((2, 3, 4) if left else (2, 4, 3), dtype, seed=1)
    _same(lambda x, y: gt.linalg.solve_triangular(x, y, upper=upper, left=left,
                                                  unitriangular=unit),
          lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left,
                                                     unitriangular=unit),
          [a, b], device, dtype)
    if left:
        _same(lambda x, y: tuple(gt.triangular_solve(y, x, upper=upper, transpose=unit)),
              lambda x, y: tuple(torch.triangular_solve(y, x, upper=upper, transpose=unit)),
              [a, b], device, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_family(device: str, dtype: gt.dtype) -> None:
    a = _spd((2, 4, 4), dtype)
    b = _array((2, 4, 3), dtype, seed=2)
    _same(gt.linalg.cholesky, torch.linalg.cholesky, [a], device, dtype)
    _same(lambda x: gt.linalg.cholesky(x, upper=True),
          lambda x: torch.linalg.cholesky(x, upper=True), [a], device, dtype)
    _same(lambda x: gt.cholesky(x, upper=True), lambda x: torch.cholesky(x, upper=True), [a],
          device, dtype)
    _same(lambda x: x.cholesky(), lambda x: x.cholesky(), [a], device, dtype)
    _same(lambda x: tuple(gt.linalg.cholesky_ex(x)), lambda x: tuple(torch.linalg.cholesky_ex(x)),
          [a], device, dtype)
    for upper in (False, True):
        _same(lambda x, y, u=upper: gt.cholesky_solve(y, gt.linalg.cholesky(x, upper=u), u),
              lambda x, y, u=upper: torch.cholesky_solve(y, torch.linalg.cholesky(x, upper=u), u),
              [a, b], device, dtype)
        _same(lambda x, u=upper: gt.cholesky_inverse(gt.linalg.cholesky(x, upper=u), u),
              lambda x, u=upper: torch.cholesky_inverse(torch.linalg.cholesky(x, upper=u), u),
              [a[0]], device, dtype)


# -- decompositions ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 4), (2, 3, 5)])
def test_qr(device: str, dtype: gt.dtype, shape: tuple) -> None:
    a = _array(shape, dtype)
    for mode in ("reduced", "complete", "r"):
        _same(lambda x, m=mode: tuple(gt.linalg.qr(x, m)),
              lambda x, m=mode: tuple(torch.linalg.qr(x, m)), [a], device, dtype)
    _same(lambda x: tuple(gt.qr(x, some=False)), lambda x: tuple(torch.qr(x, some=False)), [a],
          device, dtype)
    _same(lambda x: tuple(x.qr()), lambda x: tuple(x.qr()), [a], device, dtype)


def _phase_free(U: Any, S: Any, Vh: Any) -> Any:
    """U diag(S) Vh with the vectors' gauge removed: columns of U times rows of Vh."""
    k = S.shape[-1]
    return U[..., :k] @ Vh[..., :k, :]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 4), (0, 3), (2, 3, 0)])
def test_svd(device: str, dtype: gt.dtype, shape: tuple) -> None:
    a = _array(shape, dtype)
    for full in (True, False):
        g, t = _pair(a, device)
        gU, gS, gVh = gt.linalg.svd(g, full_matrices=full)
        tU, tS, tVh = torch.linalg.svd(t, full_matrices=full)
        tol = TOL[dtype]
        assert_close(gS, tS, atol=tol, rtol=tol)
        assert gU.shape == tU.shape and gVh.shape == tVh.shape and gU.dtype.name == \
            str(tU.dtype).removeprefix("torch.")
        assert_close(_phase_free(gU, gS, gVh), _phase_free(tU, tS, tVh), atol=tol, rtol=tol)
        eye = np.eye(gU.shape[-1])
        assert_close((gU.mH @ gU).cpu().numpy(), np.broadcast_to(eye, (*shape[:-2], *eye.shape)),
                     atol=tol, rtol=tol, check_dtype=False)
    _same(gt.linalg.svdvals, torch.linalg.svdvals, [a], device, dtype)
    g, t = _pair(a, device)
    gU, gS, gV = gt.svd(g)
    tU, tS, tV = torch.svd(t)
    assert_close(gS, tS, atol=TOL[dtype], rtol=TOL[dtype])
    assert gV.shape == tV.shape
    assert_close(gU @ gV.mH, tU @ tV.mH, atol=TOL[dtype], rtol=TOL[dtype])
    _same(lambda x: tuple(gt.svd(x, compute_uv=False)),
          lambda x: tuple(torch.svd(x, compute_uv=False)), [a], device, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_eig(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 4, 4), dtype)
    h = a + np.conj(np.swapaxes(a, -1, -2))
    for uplo in ("L", "U"):
        _same(lambda x, u=uplo: gt.linalg.eigvalsh(x, u),
              lambda x, u=uplo: torch.linalg.eigvalsh(x, u), [a], device, dtype)
        g, t = _pair(a, device)
        gL, gV = gt.linalg.eigh(g, uplo)
        tL, tV = torch.linalg.eigh(t, uplo)
        assert_close(gL, tL, atol=TOL[dtype], rtol=TOL[dtype])
        # V diag(L) V^H rebuilds the Hermitian matrix the chosen triangle defines
        assert_close((gV * gL.to(gV.dtype).unsqueeze(-2)) @ gV.mH,
                     (tV * tL.to(tV.dtype).unsqueeze(-2)) @ tV.mH, atol=TOL[dtype] * 10,
                     rtol=TOL[dtype] * 10)
    _same(gt.linalg.eigvalsh, torch.linalg.eigvalsh, [h], device, dtype)
    g, t = _pair(a, device)
    gL, gV = gt.linalg.eig(g)
    tL, tV = torch.linalg.eig(t)
    assert gL.dtype.name == str(tL.dtype).removeprefix("torch.") and gV.shape == tV.shape
    key = lambda v: np.sort_complex(np.round(v, 4))  # noqa: E731
    np.testing.assert_allclose(key(gL.cpu().numpy()), key(tL.numpy()), atol=1e-3)
    np.testing.assert_allclose(key(gt.linalg.eigvals(g).cpu().numpy()), key(tL.numpy()),
                               atol=1e-3)
    rebuilt = (gV * gL.unsqueeze(-2)) @ gt.linalg.inv(gV)
    assert_close(rebuilt, t.to(tV.dtype), atol=TOL[dtype] * 100, rtol=TOL[dtype] * 100)


# -- composites -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_cond_rank_pinv(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 4, 3), dtype)
    for ord_ in ("fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")):
        _same(lambda x, o=ord_: gt.linalg.matrix_norm(x, o),
              lambda x, o=ord_: torch.linalg.matrix_norm(x, o), [a], device, dtype)
        _same(lambda x, o=ord_: gt.linalg.norm(x[0], o),
              lambda x, o=ord_: torch.linalg.norm(x[0], o), [a], device, dtype)
    _same(lambda x: gt.linalg.matrix_norm(x, 2, dim=(0, 2), keepdim=True),
          lambda x: torch.linalg.matrix_norm(x, 2, dim=(0, 2), keepdim=True), [a], device, dtype)
    for ord_ in (2, 1, float("inf"), 0, 3.5):
        _same(lambda x, o=ord_: gt.linalg.vector_norm(x, o, dim=(1, 2)),
              lambda x, o=ord_: torch.linalg.vector_norm(x, o, dim=(1, 2)), [a], device, dtype)
    _same(gt.linalg.norm, torch.linalg.norm, [a], device, dtype)
    sq = _array((2, 3, 3), dtype, shift=1.0)
    for p in (None, 2, -2, "fro", "nuc", 1, float("inf")):
        _same(lambda x, p=p: gt.linalg.cond(x, p), lambda x, p=p: torch.linalg.cond(x, p), [sq],
              device, dtype)
    low_rank = a[..., :1] @ a[..., :1, :]
    _same(gt.linalg.matrix_rank, torch.linalg.matrix_rank, [low_rank], device, dtype)
    _same(gt.linalg.matrix_rank, torch.linalg.matrix_rank, [a], device, dtype)
    _same(lambda x: gt.linalg.matrix_rank(x, atol=0.5, rtol=0.1),
          lambda x: torch.linalg.matrix_rank(x, atol=0.5, rtol=0.1), [a], device, dtype)
    _same(gt.linalg.pinv, torch.linalg.pinv, [a], device, dtype)
    _same(gt.pinverse, torch.pinverse, [a], device, dtype)
    _same(lambda x: gt.pinverse(x, 1e-3), lambda x: torch.pinverse(x, 1e-3), [low_rank], device,
          dtype)
    herm = sq @ np.conj(np.swapaxes(sq, -1, -2))
    _same(lambda x: gt.linalg.pinv(x, hermitian=True),
          lambda x: torch.linalg.pinv(x, hermitian=True), [herm], device, dtype)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.complex128])
def test_powers_exp_products(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 3, 3), dtype, shift=2.0)
    for n in (0, 1, 2, 5, -1, -3):
        _same(lambda x, n=n: gt.linalg.matrix_power(x, n),
              lambda x, n=n: torch.linalg.matrix_power(x, n), [a], device, dtype)
    _same(lambda x: x.matrix_power(3), lambda x: x.matrix_power(3), [a], device, dtype)
    _same(gt.linalg.matrix_exp, torch.linalg.matrix_exp, [a], device, dtype)
    _same(lambda x: x.matrix_exp(), lambda x: x.matrix_exp(), [a], device, dtype)
    # float16 computes in float32 (PyTorch's CPU half kernel is not accurate enough to compare)
    half = (a.real / 4).astype(np.float16)
    assert_close(gt.linalg.matrix_exp(gt.tensor(half, device=device)),
                 torch.linalg.matrix_exp(torch.from_numpy(half).float()).half(), atol=1e-2,
                 rtol=1e-2)
    m = [_array(s, dtype, seed=i) for i, s in enumerate([(3,), (3, 5), (5, 2), (2, 4), (4,)])]
    _same(lambda *ts: gt.linalg.multi_dot(ts), lambda *ts: torch.linalg.multi_dot(ts), m, device,
          dtype)
    _same(lambda *ts: gt.chain_matmul(*ts), lambda *ts: torch.chain_matmul(*ts), m[1:4], device,
          dtype)
    gm = [gt.tensor(v, device=device) for v in m]
    tm = [torch.from_numpy(v) for v in m]
    assert_same_error(lambda: gt.linalg.multi_dot(gm[:1]), lambda: torch.linalg.multi_dot(tm[:1]))
    assert_same_error(lambda: gt.linalg.multi_dot([gm[1], gm[1]]),
                      lambda: torch.linalg.multi_dot([tm[1], tm[1]]))
    assert_same_error(lambda: gt.linalg.multi_dot([gm[1], gm[2][None], gm[3]]),
                      lambda: torch.linalg.multi_dot([tm[1], tm[2][None], tm[3]]))
    x = _array((2, 4, 3), dtype)
    y = _array((2, 4, 3), dtype, seed=1)
    _same(gt.linalg.cross, torch.linalg.cross, [x, y], device, dtype)
    _same(lambda u, v: gt.linalg.vecdot(u, v, dim=1), lambda u, v: torch.linalg.vecdot(u, v, dim=1),
          [x, y], device, dtype)
    _same(lambda u: gt.linalg.diagonal(u, offset=1), lambda u: torch.linalg.diagonal(u, offset=1),
          [x], device, dtype)
    _same(gt.linalg.vander, torch.linalg.vander, [x[0, 0]], device, dtype)
    _same(lambda u: gt.linalg.vander(u, N=5), lambda u: torch.linalg.vander(u, N=5), [x[:, 0]],
          device, dtype)


@pytest.mark.parametrize("dtype", [gt.float64, gt.complex64])
def test_lstsq_tensorinv_tensorsolve(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 5, 3), dtype)
    b = _array((2, 5, 2), dtype, seed=1)
    drivers = ("gels",) if device.startswith("cuda") else ("gelsy", "gelsd", "gelss", "gels")
    for driver in drivers:
        g = gt.linalg.lstsq(*(_pair(v, device)[0] for v in (a, b)), driver=driver)
        t = torch.linalg.lstsq(torch.from_numpy(a), torch.from_numpy(b), driver=driver)
        for gv, tv in zip(g, t, strict=True):
            assert_close(gv, tv, atol=TOL[dtype] * 10, rtol=TOL[dtype] * 10)
        assert type(g).__name__ == "linalg_lstsq"
    t4 = _array((4, 3, 6, 2), dtype, shift=0.0)
    t4 = (t4.reshape(12, 12) + 3 * np.eye(12)).reshape(4, 3, 6, 2).astype(dtype.np_dtype)
    _same(lambda x: gt.linalg.tensorinv(x, 2), lambda x: torch.linalg.tensorinv(x, 2), [t4],
          device, dtype)
    rhs = _array((4, 3), dtype, seed=3)
    _same(gt.linalg.tensorsolve, torch.linalg.tensorsolve, [t4, rhs], device, dtype)


def test_backward_errors(device: str) -> None:
    """PyTorch's errors for ill-defined gradients (mode='r' QR, the complex gauge)."""
    a = gt.tensor(_array((3, 3), gt.float64), device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        gt.linalg.qr(a, mode="r").R.sum().backward()
    z = gt.tensor(_array((3, 3), gt.complex128), device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        gt.linalg.svd(z).U.real.sum().backward()
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        gt.linalg.eigh(z + z.mH).eigenvectors.real.sum().backward()
    # a singular (rank n-1) matrix: det's gradient is the cofactor matrix (finite differences
    # agree; PyTorch 2.13's CPU build returns zeros here)
    s = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 1.0, 3.0]])
    gs = gt.tensor(s, device=device, requires_grad=True)
    gt.linalg.det(gs).backward()
    eps = 1e-6
    numeric = np.array([[(np.linalg.det(s + eps * np.eye(3)[[i]].T @ np.eye(3)[[j]]) -
                          np.linalg.det(s)) / eps for j in range(3)] for i in range(3)])
    assert_close(gs.grad, numeric, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [gt.float64, gt.complex64])
def test_large_matrices(device: str, dtype: gt.dtype) -> None:
    """Matrices from 64 on take SciPy's LAPACK one matrix at a time on the host."""
    a = _array((2, 70, 70), dtype, shift=8.0)
    spd = _spd((2, 70, 70), dtype)
    b = _array((2, 70, 3), dtype, seed=1)
    tol = {gt.float64: 1e-8, gt.complex64: 2e-3}[dtype]
    check = lambda g_fn, t_fn, *xs: assert_close(  # noqa: E731
        g_fn(*(gt.tensor(x, device=device) for x in xs)),
        t_fn(*(torch.from_numpy(x) for x in xs)), atol=tol, rtol=tol)
    check(gt.linalg.solve, torch.linalg.solve, a, b)
    check(gt.linalg.inv, torch.linalg.inv, a)
    check(gt.linalg.cholesky, torch.linalg.cholesky, spd)
    check(gt.linalg.eigvalsh, torch.linalg.eigvalsh, spd)
    check(gt.linalg.svdvals, torch.linalg.svdvals, a)
    check(lambda x: gt.linalg.qr(x, "r").R.abs(), lambda x: torch.linalg.qr(x, "r").R.abs(), a)
    g = gt.tensor(a, device=device)
    q, r = gt.linalg.qr(g)
    assert_close(q @ r, torch.from_numpy(a), atol=tol, rtol=tol)
    L, V = gt.linalg.eigh(gt.tensor(spd, device=device), "U")
    assert_close((V * L.to(V.dtype).unsqueeze(-2)) @ V.mH, torch.from_numpy(spd), atol=tol * 100,
                 rtol=tol)
    U, S, Vh = gt.linalg.svd(g, full_matrices=False)
    assert_close((U * S.to(U.dtype).unsqueeze(-2)) @ Vh, torch.from_numpy(a), atol=tol * 10,
                 rtol=tol)
    singular = np.zeros((2, 70, 70), dtype=dtype.np_dtype)
    singular[0] = np.eye(70)
    gs, ts = gt.tensor(singular, device=device), torch.from_numpy(singular)
    assert_close(gt.linalg.inv_ex(gs).info, torch.linalg.inv_ex(ts).info)
    assert_close(gt.linalg.solve_ex(gs, gt.tensor(b, device=device)).info,
                 torch.linalg.solve_ex(ts, torch.from_numpy(b)).info)
    _linalg_error(lambda: gt.linalg.cholesky(gs), lambda: torch.linalg.cholesky(ts))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 4), (3, 5), (5, 3)])
def test_lu_family(device: str, dtype: gt.dtype, shape: tuple) -> None:
    a = _array(shape, dtype, shift=0.5)
    _same(lambda x: tuple(gt.linalg.lu_factor(x)), lambda x: tuple(torch.linalg.lu_factor(x)),
          [a], device, dtype)
    _same(lambda x: tuple(gt.linalg.lu_factor_ex(x)),
          lambda x: tuple(torch.linalg.lu_factor_ex(x)), [a], device, dtype)
    _same(lambda x: tuple(gt.linalg.lu(x)), lambda x: tuple(torch.linalg.lu(x)), [a], device,
          dtype)
    _same(lambda x: tuple(gt.lu_unpack(*gt.linalg.lu_factor(x))),
          lambda x: tuple(torch.lu_unpack(*torch.linalg.lu_factor(x))), [a], device, dtype)
    _same(lambda x: tuple(gt.lu_unpack(*gt.linalg.lu_factor(x), unpack_pivots=False))[1:],
          lambda x: tuple(torch.lu_unpack(*torch.linalg.lu_factor(x), unpack_pivots=False))[1:],
          [a], device, dtype)
    _same(lambda x: tuple(x.lu()), lambda x: tuple(x.lu()), [a], device, dtype)
    _same(lambda x: tuple(gt.lu(x, get_infos=True)), lambda x: tuple(torch.lu(x, get_infos=True)),
          [a], device, dtype)
    if shape[-1] != shape[-2]:
        return
    b = _array((*shape[:-1], 2), dtype, seed=4)
    for left in (True, False):
        for adjoint in (True, False):
            rhs = b if left else b.swapaxes(-1, -2).copy()
            _same(lambda x, y, l_=left, ad=adjoint: gt.linalg.lu_solve(
                      *gt.linalg.lu_factor(x), y, left=l_, adjoint=ad),
                  lambda x, y, l_=left, ad=adjoint: torch.linalg.lu_solve(
                      *torch.linalg.lu_factor(x), y, left=l_, adjoint=ad), [a, rhs], device,
                  dtype)
    _same(lambda x, y: gt.lu_solve(y, *gt.linalg.lu_factor(x)),
          lambda x, y: torch.lu_solve(y, *torch.linalg.lu_factor(x)), [a, b], device, dtype)


def test_lu_errors(device: str) -> None:
    z = np.zeros((2, 3, 3))
    z[0] = np.eye(3)
    g, t = _pair(z, device)
    for fn in ("lu_factor",):
        with pytest.raises(RuntimeError) as want:
            getattr(torch.linalg, fn)(t)
        with pytest.raises(RuntimeError) as got:
            getattr(gt.linalg, fn)(g)
        assert str(got.value) == str(want.value).replace("torch.", "gputensor.")
    assert_close(gt.linalg.lu_factor_ex(g).info, torch.linalg.lu_factor_ex(t).info)
    gl, tl = _pair(np.eye(3, dtype=np.int64), device)
    assert_same_error(lambda: gt.linalg.lu_factor(gl), lambda: torch.linalg.lu_factor(tl))
    gv, tv = _pair(np.ones(3), device)
    assert_same_error(lambda: gt.linalg.lu_factor(gv), lambda: torch.linalg.lu_factor(tv))
    if device == "cpu":
        assert_same_error(lambda: gt.linalg.lu_factor(g, pivot=False),
                          lambda: torch.linalg.lu_factor(t, pivot=False))
    gf = gt.linalg.lu_factor(g[0])
    tf = torch.linalg.lu_factor(t[0])
    assert_same_error(lambda: gt.linalg.lu_solve(*gf, g[0, :2, :1]),
                      lambda: torch.linalg.lu_solve(*tf, t[0, :2, :1]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_product(device: str, dtype: gt.dtype) -> None:
    a = _array((2, 5, 3), dtype)
    tau = _array((2, 2), dtype, seed=1)
    _same(gt.linalg.householder_product, torch.linalg.householder_product, [a, tau], device,
          dtype)
    _same(gt.linalg.householder_product, torch.linalg.householder_product, [a, tau[..., :0]],
          device, dtype)
    for shapes in [((2, 3), (2,)), ((3, 2), (3,)), ((3,), (2,)), ((2, 3, 2), (3, 2))]:
        x, y = (_pair(_array(s, dtype), device) for s in shapes)
        assert_same_error(lambda x=x, y=y: gt.linalg.householder_product(x[0], y[0]),
                          lambda x=x, y=y: torch.linalg.householder_product(x[1], y[1]))


def test_householder_product_grad(device: str) -> None:
    a = gt.tensor(_array((4, 3), gt.float64), device=device, requires_grad=True)
    tau = gt.tensor(_array((2,), gt.float64, seed=1), device=device, requires_grad=True)
    assert gt.autograd.gradcheck(gt.linalg.householder_product, (a, tau))

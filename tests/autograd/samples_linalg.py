"""Derivative samples for test_every_derivative.py (same contract as its SAMPLES): the private
backend ops of gputensor/_ops/decompositions.py, reached through gt.linalg, each with a real
and a complex input (complex values enter and leave as view_as_complex / view_as_real of
float64 leaves). Losses of the eigen/singular vectors are gauge invariant (products such as
U diag(c) Vh), as PyTorch requires; the private ops' formulas are themselves differentiable, so
most samples check gradients of gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import gputensor as gt


def _leaf(device: str, values: np.ndarray) -> gt.Tensor:
    return gt.tensor(values, dtype=gt.float64, device=device, requires_grad=True)


def _mat(device: str, *shape: int, seed: int = 0, shift: float = 0.0) -> gt.Tensor:
    """Well-conditioned matrices: random entries plus ``shift`` on the diagonal."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1, 1, shape)
    if shift:
        values = values + shift * np.eye(shape[-2], shape[-1])
    return _leaf(device, values)


def _cmat(device: str, *shape: int, seed: int = 1, shift: float = 0.0) -> gt.Tensor:
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1, 1, (*shape, 2))
    if shift:
        values[..., 0] += shift * np.eye(shape[-2], shape[-1])
    return _leaf(device, values)


def _c(x: gt.Tensor) -> gt.Tensor:
    return gt.view_as_complex(x)


def _r(z: gt.Tensor) -> gt.Tensor:
    return gt.view_as_real(z) if z.is_complex() else z


def _herm(z: gt.Tensor) -> gt.Tensor:
    return z + z.mH


def _det(device: str) -> tuple:
    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        return gt.linalg.det(a), _r(gt.linalg.det(_c(c)))
    return fn, (_mat(device, 2, 3, 3), _cmat(device, 3, 3)), "gradgrad"


def _slogdet(device: str) -> tuple:
    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        s, la = gt.linalg.slogdet(a)
        sc, lc = gt.linalg.slogdet(_c(c))
        return s * la, la, _r(sc), lc
    return fn, (_mat(device, 2, 3, 3, shift=2.0), _cmat(device, 3, 3, shift=2.0)), "gradgrad"


def _inv(device: str) -> tuple:
    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        return gt.linalg.inv(a), _r(gt.linalg.inv(_c(c)))
    return fn, (_mat(device, 2, 3, 3, shift=2.0), _cmat(device, 3, 3, shift=2.0)), "gradgrad"


def _solve(device: str) -> tuple:
    def fn(a: gt.Tensor, b: gt.Tensor, c: gt.Tensor) -> tuple:
        return (gt.linalg.solve(a, b), gt.linalg.solve(a, b[0].mT, left=False),
                _r(gt.linalg.solve(_c(c), _c(c)[:, :2])))
    return fn, (_mat(device, 2, 3, 3, shift=2.0), _mat(device, 2, 3, 2, seed=3),
                _cmat(device, 3, 3, shift=2.0)), "gradgrad"


def _cholesky(device: str) -> tuple:
    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        spd = a @ a.mT + gt.eye(3, dtype=gt.float64, device=a.device)
        hpd = _c(c) @ _c(c).mH + gt.eye(3, dtype=gt.complex128, device=c.device)
        return gt.linalg.cholesky(spd), gt.linalg.cholesky(spd, upper=True), \
            _r(gt.linalg.cholesky(hpd))
    return fn, (_mat(device, 2, 3, 3), _cmat(device, 3, 3)), "gradgrad"


def _solve_triangular(device: str) -> tuple:
    def fn(a: gt.Tensor, b: gt.Tensor, c: gt.Tensor) -> tuple:
        return (gt.linalg.solve_triangular(a, b, upper=True),
                gt.linalg.solve_triangular(a, b.mT, upper=False, left=False, unitriangular=True),
                _r(gt.linalg.solve_triangular(_c(c), _c(c), upper=False)))
    return fn, (_mat(device, 3, 3, shift=2.0), _mat(device, 3, 2, seed=4),
                _cmat(device, 3, 3, shift=2.0)), "gradgrad"


def _eigh(device: str) -> tuple:
    w = gt.tensor([0.5, -1.0, 2.0], dtype=gt.float64, device=device)

    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        L, V = gt.linalg.eigh(a + a.mT)
        Lc, Vc = gt.linalg.eigh(_herm(_c(c)), UPLO="U")
        return L, (V * w) @ V.mT, Lc, _r((Vc * w.to(gt.complex128)) @ Vc.mH), \
            gt.linalg.eigvalsh(a + a.mT)
    return fn, (_mat(device, 3, 3), _cmat(device, 3, 3)), "grad"


def _eig(device: str) -> tuple:
    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        L, V = gt.linalg.eig(a)
        Lc, Vc = gt.linalg.eig(_c(c))
        k = gt.tensor([1.0, 2.0, -1.0], dtype=gt.complex128, device=a.device)
        return (_r(L), _r((V * k) @ gt.linalg.inv(V)), _r(Lc),
                _r((Vc * k) @ gt.linalg.inv(Vc)))
    return fn, (_mat(device, 3, 3, seed=5, shift=1.0), _cmat(device, 3, 3)), "grad"


def _svd(device: str) -> tuple:
    def fn(a: gt.Tensor, b: gt.Tensor, c: gt.Tensor) -> tuple:
        U, S, Vh = gt.linalg.svd(a, full_matrices=False)
        Ub, Sb, Vhb = gt.linalg.svd(b, full_matrices=True)
        Uc, Sc, Vhc = gt.linalg.svd(_c(c), full_matrices=False)
        return (S, U[..., :2] @ Vh[..., :2, :], Sb, Ub[..., :2] @ Vhb[..., :2, :], Sc,
                _r(Uc[..., :1] @ Vhc[..., :1, :]), gt.linalg.svdvals(a))
    return fn, (_mat(device, 4, 3), _mat(device, 3, 4, seed=2), _cmat(device, 3, 2)), "grad"


def _qr(device: str) -> tuple:
    def fn(a: gt.Tensor, b: gt.Tensor, c: gt.Tensor) -> tuple:
        Q, R = gt.linalg.qr(a)
        Qw, Rw = gt.linalg.qr(b)
        Qc, Rc = gt.linalg.qr(_c(c))
        return Q, R, Qw, Rw, _r(Qc), _r(Rc)
    return fn, (_mat(device, 4, 3), _mat(device, 2, 4, seed=2), _cmat(device, 3, 3)), "grad"


def _matrix_exp(device: str) -> tuple:
    def fn(a: gt.Tensor, c: gt.Tensor) -> tuple:
        return gt.linalg.matrix_exp(a), _r(gt.matrix_exp(_c(c)))
    return fn, (_mat(device, 2, 3, 3), _cmat(device, 2, 2)), "grad"


def _lu(device: str) -> tuple:
    def fn(a: gt.Tensor, b: gt.Tensor, c: gt.Tensor) -> tuple:
        LU, piv = gt.linalg.lu_factor(a)
        P, L, U = gt.linalg.lu(_c(c))
        return (LU, gt.linalg.lu_solve(LU, piv, b), gt.linalg.lu_solve(LU, piv, b, adjoint=True),
                _r(L), _r(U))
    return fn, (_mat(device, 2, 3, 3, shift=0.5), _mat(device, 3, 2, seed=3),
                _cmat(device, 3, 3)), "grad"


def _ormqr(device: str) -> tuple:
    # every side/adjoint combination, and a complex one; the reflectors come from geqrf of a
    # leaf, but gradcheck differentiates input (its strict lower part), tau and other directly
    def fn(a: gt.Tensor, tau: gt.Tensor, b: gt.Tensor, c: gt.Tensor, ct: gt.Tensor) -> tuple:
        return (gt.ormqr(a, tau, b), gt.ormqr(a, tau, b, transpose=True),
                gt.ormqr(a, tau, b.mT, left=False),
                gt.ormqr(a, tau, b.mT, left=False, transpose=True),
                _r(gt.ormqr(_c(c), _c(ct), _c(c)[:, :2], transpose=True)))
    return fn, (_mat(device, 4, 3), _mat(device, 3, seed=2), _mat(device, 4, 2, seed=3),
                _cmat(device, 3, 2), _cmat(device, 2, seed=4)), "gradgrad"


def _lobpcg(device: str) -> tuple:
    # A symmetric positive definite with well-separated eigenvalues, a fixed start X (LOBPCG
    # otherwise starts from randn); k = 2 of 6 takes the partial-eigenspace formula, and the
    # loss reads the eigenvectors through X diag(w) X^T (gauge invariant)
    rng = np.random.default_rng(7)
    Q, _ = np.linalg.qr(rng.uniform(-1, 1, (6, 6)))
    base = Q @ np.diag([1.0, 2.0, 3.5, 5.0, 7.0, 10.0]) @ Q.T
    X0 = gt.tensor(rng.uniform(-1, 1, (6, 2)), dtype=gt.float64, device=device)
    w = gt.tensor([1.0, -0.5], dtype=gt.float64, device=device)

    def fn(a: gt.Tensor) -> tuple:
        # LOBPCG is defined for symmetric A (only the differentiated path symmetrizes, as in
        # PyTorch), so finite differences along a non-symmetric direction need this
        a = (a + a.mT) / 2
        E, X = gt.lobpcg(a, k=2, X=X0, tol=1e-12, niter=200)
        return E, (X * w) @ X.mT
    return fn, (_leaf(device, base),), "grad"


SAMPLES: dict[str, Callable[[str], Any]] = {
    "_linalg_ormqr": _ormqr,
    "_lobpcg_dense": _lobpcg,
    "_linalg_det": _det,
    "_linalg_slogdet": _slogdet,
    "_linalg_inv_ex": _inv,
    "_linalg_solve_ex": _solve,
    "_linalg_cholesky_ex": _cholesky,
    "_linalg_solve_triangular": _solve_triangular,
    "_linalg_eigh": _eigh,
    "_linalg_eig": _eig,
    "_linalg_svd": _svd,
    "_linalg_qr": _qr,
    "_linalg_matrix_exp": _matrix_exp,
    "_linalg_lu_factor_ex": _lu,
}

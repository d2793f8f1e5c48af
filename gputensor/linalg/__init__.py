"""gt.linalg: torch.linalg's names over the backend ops of gputensor/_ops/decompositions.py.

Each function checks its arguments with PyTorch's messages, calls the private ops (one LAPACK /
cuSOLVER kernel each, with its derivative) and composes the rest from differentiable ops, so
autograd follows without formulas here. The names PyTorch also has at the top level (det,
matrix_power, matrix_exp, ...) are the same functions as ``gt.<name>``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor import return_types
from gputensor._ops.decompositions import (
    LinAlgError,
    _linalg_cholesky_ex,
    _linalg_eig,
    _linalg_eigh,
    _linalg_inv_ex,
    _linalg_lu_factor_ex,
    _linalg_qr,
    _linalg_slogdet,
    _linalg_solve_ex,
    _linalg_solve_triangular,
    _linalg_svd,
    check_dtype,
    check_matrix,
    deliver,
    deliver_all,
    lu_unpack_tensors,
    raise_for_info,
    real_dtype,
)
from gputensor._ops.decompositions import det as det
from gputensor._ops.decompositions import matrix_exp as matrix_exp
from gputensor._ops.decompositions import matrix_power as matrix_power
from gputensor._tensor import Tensor, normalize_dim
from gputensor.func._batched import physical

from ._ldl import ldl_factor, ldl_factor_ex, ldl_solve

__all__ = ["LinAlgError", "det", "slogdet", "inv", "inv_ex", "solve", "solve_ex", "cholesky",
           "cholesky_ex", "qr", "eigh", "eigvalsh", "eig", "eigvals", "svd", "svdvals",
           "vector_norm", "matrix_norm", "norm", "cond", "pinv", "matrix_rank", "matrix_power",
           "solve_triangular", "lstsq", "cross", "vecdot", "diagonal", "multi_dot", "matrix_exp",
           "vander", "tensorinv", "tensorsolve", "lu_factor", "lu_factor_ex", "lu", "lu_solve",
           "householder_product", "matmul", "ldl_factor", "ldl_factor_ex", "ldl_solve"]

matmul = gt.matmul  # torch.linalg.matmul is torch.matmul


def _grad_needed(*ts: Tensor) -> bool:
    return gt.is_grad_enabled() and any(t.requires_grad for t in ts)


# -- inverse, determinants ---------------------------------------------------------------------
def slogdet(A: Tensor, *, out: Any = None) -> return_types.linalg_slogdet:
    """(sign, log|det|) of square matrices; sign is 0 and logabsdet -inf when A is singular."""
    check_matrix(A, "linalg.slogdet")
    return deliver_all(_linalg_slogdet(A), out, "linalg_slogdet")


def inv_ex(A: Tensor, *, check_errors: bool = False, out: Any = None
           ) -> return_types.linalg_inv_ex:
    """(inverse, info): info[i] > 0 marks a singular matrix (its first zero pivot)."""
    check_matrix(A, "linalg.inv", low=None)
    res = _linalg_inv_ex(A)
    if check_errors:
        _raise_inv(res.info, A, "linalg.inv_ex")
    return deliver_all(res, out, "linalg_inv_ex")


def _raise_inv(info: Tensor, A: Tensor, fn: str = "linalg.inv") -> None:
    raise_for_info(info, A.dim() > 2, lambda code, p: (
        f"{fn}: {p}The diagonal element {code} is zero, the inversion could not be "
        f"completed because the input matrix is singular."))


def inv(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Inverse of square matrices; LinAlgError when one is singular."""
    check_matrix(A, "linalg.inv")
    res, info = _linalg_inv_ex(A)
    _raise_inv(info, A)
    return deliver(res, out, "linalg_inv")


# -- solve ------------------------------------------------------------------------------------
def _solve_operands(A: Tensor, B: Tensor, left: bool, fn: str) -> tuple[Tensor, bool]:
    """B as a batch of matrices, and whether it was a (batch of) vector(s) (PyTorch's rule:
    B is a vector when B.ndim == 1 or when B.shape == A.shape[:-1] with batch dims)."""
    check_matrix(A, fn)
    if not isinstance(B, Tensor):
        raise TypeError(f"{fn}(): argument 'B' must be Tensor, not {type(B).__name__}")
    check_dtype(B, fn)
    if A.dtype != B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{A.dtype.legacy_name} and B of type {B.dtype.legacy_name} instead")
    vector = B.dim() == 1 or (left and B.dim() == A.dim() - 1 and
                              tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if not left and vector:
        Bm = B.unsqueeze(-2)
    n = A.shape[-1]
    if (left and Bm.shape[-2] != n) or (not left and Bm.shape[-1] != n):
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {eq} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {Bm.shape[-2]}x{Bm.shape[-1]})")
    return Bm, vector


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False,
             out: Any = None) -> return_types.linalg_solve_ex:
    """(result, info) of AX = B (XA = B with left=False) without raising for singular A."""
    Bm, vector = _solve_operands(A, B, left, "linalg.solve")
    res, info = _linalg_solve_ex(A, Bm, left)
    if check_errors:
        _raise_solve(info, A)
    if vector:
        res = res.squeeze(-1) if left else res.squeeze(-2)
    return deliver_all(return_types.linalg_solve_ex(res, info), out, "linalg_solve_ex")


def _raise_solve(info: Tensor, A: Tensor) -> None:
    raise_for_info(info, info.dim() > 0, lambda code, p: (
        f"gputensor.linalg.solve: {p}The solver failed because the input matrix is singular."))


def solve(A: Tensor, B: Tensor, *, left: bool = True, out: Tensor | None = None) -> Tensor:
    """X with AX = B (XA = B with left=False); LinAlgError when A is singular."""
    Bm, vector = _solve_operands(A, B, left, "linalg.solve")
    res, info = _linalg_solve_ex(A, Bm, left)
    _raise_solve(info, A)
    if vector:
        res = res.squeeze(-1) if left else res.squeeze(-2)
    return deliver(res, out, "linalg_solve")


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out: Tensor | None = None) -> Tensor:
    """X with AX = B (XA = B) for triangular A (no singularity check, as PyTorch)."""
    for t in (A, B):
        if isinstance(t, Tensor) and not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise NotImplementedError(f'"triangular_solve_cpu" not implemented for '
                                      f"'{t.dtype.legacy_name}'")
    check_matrix(A, "linalg.solve_triangular", low="triangular_solve_cpu")
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.solve_triangular(): argument 'B' must be Tensor, not "
                        f"{type(B).__name__}")
    if B.dim() < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 "
                           "dimensions.")
    n = A.shape[-1]
    if (left and B.shape[-2] != n) or (not left and B.shape[-1] != n):
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                           f"equation {eq} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    res = _linalg_solve_triangular(A, B, bool(upper), bool(left), bool(unitriangular))
    return deliver(res, out, "linalg_solve_triangular")


# -- LU -------------------------------------------------------------------------------------
def _check_lu(A: Tensor, pivot: bool, fn: str) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"gputensor.lu_factor: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(A.shape)} instead")
    if not (A.dtype.is_floating_point or A.dtype.is_complex) or A.dtype in (D.float16,
                                                                          D.bfloat16):
        raise NotImplementedError(f'"lu_cpu" not implemented for \'{A.dtype.legacy_name}\'')
    if not pivot:
        raise RuntimeError(f"{fn}: LU without pivoting is not implemented on the "
                           f"{'CUDA' if A.is_cuda else 'CPU'}")


def _raise_lu(info: Tensor, A: Tensor, fn: str) -> None:
    raise_for_info(info, A.dim() > 2, lambda code, p: (
        f"gputensor.{fn}: {p}U[{code},{code}] is zero and using it on lu_solve would "
        f"result in a division by zero. If you still want to perform the factorization, "
        f"consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"))


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False,
                 out: Any = None) -> return_types.linalg_lu_factor_ex:
    """(LU, pivots, info) of partial-pivoting LU (pivots 1-based, int32)."""
    _check_lu(A, pivot, "linalg.lu_factor")
    res = _linalg_lu_factor_ex(A)
    if check_errors:
        _raise_lu(res.info, A, "linalg.lu_factor_ex")
    return deliver_all(res, out, "linalg_lu_factor_ex")


def lu_factor(A: Tensor, *, pivot: bool = True, out: Any = None
              ) -> return_types.linalg_lu_factor:
    """(LU, pivots); raises for a zero pivot, as PyTorch."""
    _check_lu(A, pivot, "linalg.lu_factor")
    LU, pivots, info = _linalg_lu_factor_ex(A)
    _raise_lu(info, A, "linalg.lu_factor")
    return deliver_all(return_types.linalg_lu_factor(LU, pivots), out, "linalg_lu_factor")


def lu(A: Tensor, *, pivot: bool = True, out: Any = None) -> return_types.linalg_lu:
    """(P, L, U) with A = P L U (L unit lower trapezoidal, U upper trapezoidal)."""
    _check_lu(A, pivot, "linalg.lu")
    LU, pivots, _ = _linalg_lu_factor_ex(A)
    return deliver_all(return_types.linalg_lu(*lu_unpack_tensors(LU, pivots)), out, "linalg_lu")


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,
             adjoint: bool = False, out: Tensor | None = None) -> Tensor:
    """X with A X = B (A^H X = B with adjoint; X A = B with left=False) from lu_factor."""
    n = LU.shape[-1]
    if LU.shape[-2] != n:
        raise RuntimeError(f"linalg.lu_solve: A must be batches of square matrices, but they "
                           f"are {LU.shape[-2]} by {n} matrices")
    if B.dim() < 2 or (left and B.shape[-2] != n) or (not left and B.shape[-1] != n):
        eq = "AX = B" if left else "XA = B"
        rows = B.shape[-2] if B.dim() >= 2 else B.shape[-1]
        cols = B.shape[-1] if B.dim() >= 2 else 1
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{eq} ({n}x{n} and {rows}x{cols})")
    if not left:  # X A = B  <=>  A^H X^H = B^H
        X = lu_solve(LU, pivots, B.mH, left=True, adjoint=not adjoint).mH
        return deliver(X, out, "linalg_lu_solve")
    P, L, U = lu_unpack_tensors(LU, pivots)
    if adjoint:  # A^H = U^H L^H P^T
        Y = _linalg_solve_triangular(U.mH, B, False, True, False)
        Y = _linalg_solve_triangular(L.mH, Y, True, True, True)
        X = P @ Y
    else:
        Y = _linalg_solve_triangular(L, P.mT @ B, False, True, True)
        X = _linalg_solve_triangular(U, Y, True, True, False)
    return deliver(X, out, "linalg_lu_solve")


# -- Cholesky ---------------------------------------------------------------------------------
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False,
                out: Any = None) -> return_types.linalg_cholesky_ex:
    """(L, info): info[i] = k > 0 when the leading minor of order k is not positive-definite."""
    check_matrix(A, "linalg.cholesky", low="cholesky_cpu")
    res = _linalg_cholesky_ex(A, upper)
    if check_errors:
        _raise_cholesky(res.info, A)
    return deliver_all(res, out, "linalg_cholesky_ex")


def _raise_cholesky(info: Tensor, A: Tensor, fn: str = "linalg.cholesky") -> None:
    raise_for_info(info, A.dim() > 2, lambda code, p: (
        f"{fn}: {p}The factorization could not be completed because the input is "
        f"not positive-definite (the leading minor of order {code} is not positive-definite)."))


def cholesky(A: Tensor, *, upper: bool = False, out: Tensor | None = None,
             _fn: str = "linalg.cholesky") -> Tensor:
    """The Cholesky factor of Hermitian positive-definite matrices (lower, or upper = L^H)."""
    check_matrix(A, _fn, low="cholesky_cpu")
    L, info = _linalg_cholesky_ex(A, upper)
    _raise_cholesky(info, A, _fn)
    return deliver(L, out, "linalg_cholesky")


# -- QR, eigensolvers, SVD --------------------------------------------------------------------
def qr(A: Tensor, mode: str = "reduced", *, out: Any = None) -> return_types.linalg_qr:
    """(Q, R) with mode 'reduced', 'complete' or 'r' (Q empty)."""
    check_matrix(A, "linalg.qr", square=False, low="geqrf_cpu")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    return deliver_all(_linalg_qr(A, mode), out, "linalg_qr")


def _check_uplo(UPLO: str) -> None:
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _check_eigh(A: Tensor, fn: str) -> None:
    if isinstance(A, Tensor) and not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise NotImplementedError(f"\"linalg_eigh_cpu\" not implemented for "
                                  f"'{A.dtype.legacy_name}'")
    check_matrix(A, fn, low="linalg_eigh_cpu")


def eigh(A: Tensor, UPLO: str = "L", *, out: Any = None) -> return_types.linalg_eigh:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices (one triangle read)."""
    _check_eigh(A, "linalg.eigh")
    _check_uplo(UPLO)
    return deliver_all(_linalg_eigh(A, UPLO.upper(), True), out, "linalg_eigh")


def eigvalsh(A: Tensor, UPLO: str = "L", *, out: Tensor | None = None) -> Tensor:
    """Eigenvalues (ascending) of Hermitian matrices."""
    _check_eigh(A, "linalg.eigvalsh")
    _check_uplo(UPLO)
    w = _linalg_eigh(A, UPLO.upper(), _grad_needed(A))[0]
    return deliver(w, out, "linalg_eigvalsh")


def eig(A: Tensor, *, out: Any = None) -> return_types.linalg_eig:
    """Complex eigenvalues and eigenvectors (unit norm columns) of general square matrices."""
    check_matrix(A, "linalg.eig", low="linalg_eig_cpu")
    return deliver_all(_linalg_eig(A, True), out, "linalg_eig")


def eigvals(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Complex eigenvalues of general square matrices."""
    check_matrix(A, "linalg.eigvals", low="linalg_eig_cpu")
    return deliver(_linalg_eig(A, _grad_needed(A))[0], out, "linalg_eigvals")


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None,
        out: Any = None) -> return_types.linalg_svd:
    """U, S, Vh with A = U diag(S) Vh (``driver`` names a cuSOLVER routine: CUDA only, as in
    PyTorch, where it is validated and CuPy picks the routine)."""
    check_matrix(A, "linalg.svd", square=False, low="linalg_svd_cpu")
    _check_driver(driver, A)
    return deliver_all(_linalg_svd(A, bool(full_matrices), True), out, "linalg_svd")


def _check_driver(driver: str | None, A: Tensor) -> None:
    if driver is None:
        return
    if not A.is_cuda:  # a cuSOLVER choice: PyTorch refuses it on the CPU
        raise RuntimeError("gputensor.linalg.svd: keyword argument `driver=` is only supported "
                           "on CUDA inputs with cuSOLVER backend.")
    if driver not in ("gesvd", "gesvdj", "gesvda"):
        raise RuntimeError(f"gputensor.linalg.svd: driver must be one of 'gesvd', 'gesvdj', "
                           f"'gesvda', but got {driver}")


def svdvals(A: Tensor, *, driver: str | None = None, out: Tensor | None = None) -> Tensor:
    """Singular values in descending order."""
    check_matrix(A, "linalg.svd", square=False, low="linalg_svd_cpu")
    _check_driver(driver, A)
    return deliver(_linalg_svd(A, False, _grad_needed(A))[1], out, "linalg_svdvals")


# -- norms ------------------------------------------------------------------------------------
def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: D.dtype | None = None, out: Tensor | None = None) -> Tensor:
    """The vector ord-norm over ``dim`` (all elements by default): gt.norm's reduction."""
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord}")
    return gt.norm(x, ord, dim, keepdim, dtype=dtype, out=out)


def _matrix_dims(A: Tensor, dim: Sequence[int], fn: str) -> tuple[int, int]:
    if len(dim) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = (normalize_dim(d, A.dim()) for d in dim)   # out of range: IndexError
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({d0}, {d1})")
    return d0, d1


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Sequence[int] = (-2, -1),
                keepdim: bool = False, *, dtype: D.dtype | None = None,
                out: Tensor | None = None) -> Tensor:
    """Frobenius, nuclear, +-1, +-2 and +-inf norms of the matrices in ``dim``."""
    fn = "linalg.matrix_norm"
    if A.dim() < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    check_dtype(A, fn)
    d0, d1 = _matrix_dims(A, dim, fn)
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        res = gt.norm(A, 2, (d0, d1), keepdim)
    elif ord in ("nuc", 2, -2):
        moved = A.movedim((d0, d1), (-2, -1))
        s = _linalg_svd(moved, False, _grad_needed(moved))[1]
        res = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            res = res.unsqueeze(-1).unsqueeze(-1).movedim((-2, -1), (d0, d1))
    elif ord in (1, -1, math.inf, -math.inf):
        # 1: max column sum (sum over rows d0), inf: max row sum
        summed, kept = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = A.abs().sum(summed, keepdim=True)
        res = sums.amax(kept, keepdim=True) if ord > 0 else sums.amin(kept, keepdim=True)
        if not keepdim:
            res = res.squeeze((d0, d1))
    else:
        raise RuntimeError(f"{fn}: Order {ord} not supported.")
    return deliver(res, out, "linalg_matrix_norm")


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
         dtype: D.dtype | None = None, out: Tensor | None = None) -> Tensor:
    """vector_norm or matrix_norm by ``ord``/``dim`` (PyTorch's dispatch rules)."""
    if dim is not None and isinstance(dim, int):
        dim = (dim,)
    if ord is not None and (isinstance(ord, str) or (dim is not None and len(dim) == 2) or
                            (dim is None and A.dim() == 2)):
        if dim is None:
            if A.dim() != 2:
                raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                                   f"must be 1D or 2D. Got {A.dim()}D.")
            dim = (-2, -1)
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype, out=out)
    if ord is not None and dim is None and A.dim() != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.dim()}D.")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)


def cond(A: Tensor, p: Any = None, *, out: Tensor | None = None) -> Tensor:
    """Condition number: ratio of extreme singular values (p None/2/-2), else
    norm(A, p) * norm(A^-1, p)."""
    check_matrix(A, "linalg.cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = _linalg_svd(A, False, _grad_needed(A))[1]
        res = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
            raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
        inverse = _linalg_inv_ex(A)[0]
        res = matrix_norm(A, p) * matrix_norm(inverse, p)
    return deliver(res, out, "linalg_cond")


# -- pseudo-inverse, rank, least squares -----------------------------------------------------
def _tolerances(S: Tensor, atol: Any, rtol: Any, hermitian_abs: bool = False
                ) -> tuple[Tensor, Tensor]:
    """(abs tol, rel tol) as tensors; rtol defaults to eps * max(m, n) when atol is unset."""
    zero = gt.zeros((), dtype=S.dtype, device=S.device)

    def as_t(v: Any) -> Tensor:
        return v.to(S.dtype) if isinstance(v, Tensor) else zero + v
    a = zero if atol is None else as_t(atol)
    return a, as_t(rtol)


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False,
         out: Tensor | None = None) -> Tensor:
    """Moore-Penrose pseudo-inverse from the SVD (the eigendecomposition with hermitian=True),
    singular values below max(atol, rtol * s_max) dropped."""
    fn = f"linalg.pinv({A.dtype.legacy_name}{{{list(A.shape)}}})"
    if A.dim() < 2 or not (A.dtype.is_floating_point or A.dtype.is_complex) or \
            A.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"{fn}: expected a tensor with 2 or more dimensions of float, double, "
                           f"cfloat or cdouble types")
    m, n = A.shape[-2:]
    if rtol is None:
        rtol = 0.0 if atol is not None and not (isinstance(atol, float | int) and atol == 0) \
            else gt.finfo(real_dtype(A.dtype)).eps * max(m, n)
    if hermitian:
        w, V = _linalg_eigh(A, "L", True)
        absw = w.abs()
        s_max = absw.amax(-1, keepdim=True) if w.shape[-1] else absw.sum(-1, keepdim=True)
    else:
        U, S, Vh = _linalg_svd(A, False, True)
        s_max = S[..., :1] if S.shape[-1] else S.sum(-1, keepdim=True)
    atol_t, rtol_t = _tolerances(s_max, atol, rtol)
    tol = gt.maximum(atol_t.unsqueeze(-1) if atol_t.dim() else atol_t,
                     rtol_t.unsqueeze(-1) * s_max if rtol_t.dim() else rtol_t * s_max)
    if hermitian:
        keep = absw > tol
        winv = gt.where(keep, 1 / gt.where(keep, w, gt.ones_like(w)), gt.zeros_like(w))
        res = (V * winv.unsqueeze(-2).to(V.dtype)) @ V.mH
    else:
        keep = S > tol
        sinv = gt.where(keep, 1 / gt.where(keep, S, gt.ones_like(S)), gt.zeros_like(S))
        res = (Vh.mH * sinv.unsqueeze(-2).to(A.dtype)) @ U.mH
    return deliver(res, out, "linalg_pinv")


def matrix_rank(A: Tensor, tol: Any = None, hermitian: bool = False, *, atol: Any = None,
                rtol: Any = None, out: Tensor | None = None) -> Tensor:
    """Number of singular values (|eigenvalues| with hermitian=True) above the tolerance."""
    check_matrix(A, "torch.linalg.matrix_rank", square=hermitian)
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = A.shape[-2:]
    with gt.no_grad():
        s = _linalg_eigh(A, "L", False)[0].abs() if hermitian else _linalg_svd(A, False,
                                                                               False)[1]
        s_max = s.amax(-1, keepdim=True) if s.shape[-1] else s.sum(-1, keepdim=True)
        if rtol is None:
            rtol = 0.0 if atol is not None and not (isinstance(atol, float | int) and atol == 0) \
                else gt.finfo(real_dtype(A.dtype)).eps * max(m, n)
        atol_t, rtol_t = _tolerances(s_max, atol, rtol)
        tol_t = gt.maximum(atol_t.unsqueeze(-1) if atol_t.dim() else atol_t,
                           rtol_t.unsqueeze(-1) * s_max if rtol_t.dim() else rtol_t * s_max)
        res = (s > tol_t).sum(-1)
    return deliver(res, out, "linalg_matrix_rank")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None
          ) -> return_types.linalg_lstsq:
    """Least-squares solution of AX = B through the pseudo-inverse (CPU drivers 'gelsy'
    (default), 'gelsd', 'gelss', 'gels' are accepted; residuals as PyTorch reports them)."""
    fn = "torch.linalg.lstsq"
    check_matrix(A, "linalg.lstsq", square=False)
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.lstsq(): argument 'b' must be Tensor, not {type(B).__name__}")
    if A.dtype != B.dtype:
        raise RuntimeError(f"{fn}: Expected input and other to have the same dtype, but got "
                           f"input's dtype {A.dtype.legacy_name} and other's dtype "
                           f"{B.dtype.legacy_name}")
    drivers = ("gels",) if A.is_cuda else ("gels", "gelsy", "gelsd", "gelss")
    if driver is not None and driver not in drivers:
        raise RuntimeError(f"{fn}: parameter `driver` should be one of ({', '.join(drivers)})")
    driver = driver or ("gels" if A.is_cuda else "gelsy")
    vector = B.dim() == A.dim() - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"{fn}: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2:]
    eps = gt.finfo(real_dtype(A.dtype)).eps
    rc = max(m, n) * eps if rcond is None or rcond < 0 else rcond
    U, S, Vh = _linalg_svd(A, False, True)
    keep = S > rc * S[..., :1]
    sinv = gt.where(keep, 1 / gt.where(keep, S, gt.ones_like(S)), gt.zeros_like(S))
    X = (Vh.mH * sinv.unsqueeze(-2).to(A.dtype)) @ (U.mH @ Bm)
    rank = keep.sum(-1)
    empty_int = gt.empty((0,), dtype=D.int64, device=A.device)
    empty_real = gt.empty((0,), dtype=real_dtype(A.dtype), device=A.device)
    # the whole batch at once, also under gt.func.vmap (PyTorch checks the batched rank)
    full_rank = bool(physical(rank == n).all()) if rank.numel() else True
    if m > n and driver != "gelsy" and full_rank:
        residuals = ((A @ X - Bm).abs() ** 2).sum(-2)
    else:
        residuals = empty_real
    if vector:
        X = X.squeeze(-1)
        if residuals.numel():
            residuals = residuals.squeeze(-1)
    return return_types.linalg_lstsq(
        X, residuals, rank if driver != "gels" else empty_int,
        S if driver in ("gelsd", "gelss") else empty_real)


# -- products and other helpers ---------------------------------------------------------------
def cross(input: Tensor, other: Tensor, *, dim: int = -1, out: Tensor | None = None) -> Tensor:
    """Cross product of 3-vectors along ``dim`` (default -1), broadcasting the other dims."""
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[dim]} and {other.shape[dim]}")
    return deliver(gt.cross(input, other, dim=dim), out, "linalg_cross")


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out: Tensor | None = None) -> Tensor:
    """sum(conj(x) * y) along ``dim``, broadcasting the other dims."""
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {x.dtype.legacy_name} and y of type "
                           f"{y.dtype.legacy_name} instead")
    res = (x.conj() * y).sum(dim) if x.is_complex() else (x * y).sum(dim)
    return deliver(res, out, "linalg_vecdot")


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonal of the matrices in (dim1, dim2) (a view, as gt.diagonal)."""
    return gt.diagonal(A, offset, dim1, dim2)


def multi_dot(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Product of a chain of matrices (first may be 1-D, last may be 1-D) in the cheapest order
    (dynamic programming over the chain's sizes, as PyTorch)."""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        edge = {0: "first", len(ts) - 1: "last"}.get(i)
        if edge and t.dim() not in (1, 2):
            raise RuntimeError(f"multi_dot(): the {edge} tensor must be 1D or 2D but got "
                               f"{t.dim()}D")
        if not edge and t.dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D")
    first_1d, last_1d = ts[0].dim() == 1, ts[-1].dim() == 1
    if first_1d:
        ts[0] = ts[0].unsqueeze(0)
    if last_1d:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(tensors[i].shape)} and {list(tensors[i + 1].shape)} "
                               f"cannot be multiplied")
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    res = _chain(ts, _chain_order(dims), 0, len(ts) - 1)
    if first_1d:
        res = res.squeeze(0)
    if last_1d:
        res = res.squeeze(-1)
    return deliver(res, out, "linalg_multi_dot")


def _chain_order(p: list[int]) -> list[list[int]]:
    n = len(p) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(ts: list[Tensor], split: list[list[int]], i: int, j: int) -> Tensor:
    if i == j:
        return ts[i]
    k = split[i][j]
    return gt.mm(_chain(ts, split, i, k), _chain(ts, split, k + 1, j))


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """Vandermonde matrix with increasing powers x^0 ... x^(N-1) in the last dim."""
    if x.dim() < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        if n < 1:
            raise RuntimeError("N must be greater than 1.")
    dt = D.promote_types(x.dtype, D.int64) if not (x.dtype.is_floating_point or
                                                   x.dtype.is_complex) else x.dtype
    ones = gt.ones((*x.shape, 1), dtype=dt, device=x.device)
    if n == 1:
        return ones
    powers = x.unsqueeze(-1).to(dt).expand(*x.shape, n - 1).cumprod(-1)
    return gt.cat([ones, powers], -1)


def tensorinv(A: Tensor, ind: int = 2, *, out: Tensor | None = None) -> Tensor:
    """The inverse with respect to tensordot over the first ``ind`` dims."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = list(A.shape[:ind]), list(A.shape[ind:])
    pr, pc = math.prod(rows), math.prod(cols)
    if pr != pc:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {pc} != {pr}")
    res = inv(A.reshape(pr, pc)).reshape(*cols, *rows)
    return deliver(res, out, "linalg_tensorinv")


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None, *,
                out: Tensor | None = None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        nd = A.dim()
        moved = [d % nd for d in dims]
        A = A.movedim(moved, list(range(nd - len(moved), nd)))
    rows = list(A.shape[:B.dim()])
    cols = list(A.shape[B.dim():])
    if math.prod(rows) != math.prod(cols) or tuple(rows) != tuple(B.shape):
        raise RuntimeError("Expected self to satisfy the requirement "
                           "prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
                           f"but got {math.prod(cols)} != {math.prod(rows)}")
    res = solve(A.reshape(math.prod(rows), math.prod(cols)), B.reshape(-1)).reshape(cols)
    return deliver(res, out, "linalg_tensorsolve")


def householder_product(A: Tensor, tau: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H with v_i the i-th column
    of A below the diagonal and a unit i-th entry (LAPACK's orgqr/ungqr). A formula over
    matrix products, so autograd follows it."""
    fn = "gputensor.linalg.householder_product"
    if A.dim() < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1]")
    k = tau.shape[-1] if tau.dim() else 1
    if n < k:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"{fn}: tau dtype {tau.dtype.legacy_name} does not match input dtype "
                           f"{A.dtype.legacy_name}")
    V = A[..., :, :k].tril(-1) + gt.eye(m, k, dtype=A.dtype, device=A.device)
    Q = gt.eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, n)
    for i in reversed(range(k)):  # Q = H_i Q, from the last reflector to the first
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * v) @ (v.mH @ Q)
    return deliver(Q, out, "linalg_householder_product")

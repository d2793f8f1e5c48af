"""Matrix decompositions and solvers: the backend ops behind gt.linalg and the top-level forms.

As in PyTorch's ATen, gt.linalg (gputensor/linalg) is composites over a few private ops, each
with one backend kernel (kernels/cpu/lapack.py; CUDA: kernels/cuda/ops/lapack.py) and the
derivative of PyTorch's derivatives.yaml / FunctionsManual.cpp, written with differentiable ops
(so gradients of gradients work):

    _linalg_det(A)                          det
    _linalg_slogdet(A)                      (sign, logabsdet)
    _linalg_inv_ex(A)                       (inverse, info)
    _linalg_solve_ex(A, B, left)            (result, info); B is a batch of matrices
    _linalg_cholesky_ex(A, upper)           (L, info)
    _linalg_eigh(A, UPLO, compute_v)        (eigenvalues, eigenvectors)
    _linalg_eig(A, compute_v)               (eigenvalues, eigenvectors), complex
    _linalg_svd(A, full_matrices, compute_uv)  (U, S, Vh)
    _linalg_qr(A, mode)                     (Q, R)
    _linalg_solve_triangular(A, B, upper, left, unitriangular)
    _linalg_matrix_exp(A)

A kernel call is ``kernel(A, name)(outs, ins, params)``: this module checks, broadcasts and
allocates; ``info`` (int32, one per matrix) is LAPACK's code and the non-``_ex`` forms raise
``LinAlgError`` from it with PyTorch's messages. Derivatives that need the gradient of an
output the loss did not use detect its zero fill (svd/eigh's value-only gradients then avoid
the 1/(s_i^2 - s_j^2) terms, PyTorch's undefined-gradient path).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor
from gputensor.func._batched import is_batched, physical
from gputensor.kernels.registry import memory_cost

from ._core import check_out, empty, kernel, op


class LinAlgError(RuntimeError):
    """Raised for singular, non-positive-definite or non-convergent input (torch.linalg's)."""


LinAlgError.__module__ = "gputensor.linalg"


# -- argument checks -------------------------------------------------------------------------
_LOW_PRECISION = (D.float16, D.bfloat16)


def check_matrix(A: Any, fn: str, square: bool = True, low: str | None = None,
                 name: str = "A") -> None:
    """PyTorch's checks on a (batch of) matrix input: a tensor, >= 2 dims, square, float or
    complex (``low``: the kernel PyTorch names for half inputs, else its low-precision error)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(A).__name__}")
    shape = A.shape
    if len(shape) < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")
    if square and shape[-1] != shape[-2]:
        raise RuntimeError(f"{fn}: {name} must be batches of square matrices, but they are "
                           f"{shape[-2]} by {shape[-1]} matrices")
    check_dtype(A, fn, low)


def check_dtype(A: Tensor, fn: str, low: str | None = None) -> None:
    dt = A.dtype
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{dt.legacy_name}")
    if dt in _LOW_PRECISION:
        if low is not None:
            raise NotImplementedError(f'"{low}" not implemented for \'{dt.legacy_name}\'')
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {dt.legacy_name}")


def real_dtype(dt: D.dtype) -> D.dtype:
    return dt.to_real() if dt.is_complex else dt


def _batch(A: Tensor) -> tuple[int, ...]:
    return tuple(A.shape[:-2])


def _run(name: str, A: Tensor, outs: Sequence[Tensor | None], ins: Sequence[Tensor],
         *params: Any) -> None:
    kernel(A, name)(tuple(outs), tuple(ins), params)


def info_codes(info: Tensor) -> list[tuple[int, int]]:
    """(batch index, code) of the first failed matrix, if any (one host read, as PyTorch's
    check does)."""
    info = physical(info)   # under gt.func.vmap: every sample's info at once
    if info.numel() == 0:
        return []
    import numpy as np
    flat = (info.cpu() if info.is_cuda else info)._host.reshape(-1)
    if not flat.any():  # the common case, without building an index array
        return []
    return [(int(i), int(flat[i])) for i in np.flatnonzero(flat)[:1]]


def raise_for_info(info: Tensor, batched: bool, message: Any) -> None:
    """LinAlgError for the first failed matrix: ``message(code)`` with PyTorch's
    "(Batch element k): " prefix for batched input."""
    failed = info_codes(info)
    if failed:
        i, code = failed[0]
        prefix = f"(Batch element {i}): " if batched or is_batched(info) else ""
        raise LinAlgError(message(code, prefix))


def _zero_grad(t: Tensor | None) -> bool:
    """Whether an output's gradient is missing or the node's zero fill (no loss term used it)."""
    return t is None or t.numel() == 0 or not bool(t.ne(0).any())


def _eye_mask(n: int, like: Tensor) -> Tensor:
    return gt.eye(n, dtype=D.bool, device=like.device)


def _set_diag(m: Tensor, d: Tensor) -> Tensor:
    """``m`` with its diagonal replaced by ``d`` (out of place, differentiable)."""
    return gt.where(_eye_mask(m.shape[-1], m), gt.diag_embed(d).to(m.dtype), m)


# -- det, slogdet, inverse ---------------------------------------------------------------------
def _det_grad(g: Tensor, A: Tensor, out: Tensor) -> Tensor:
    # d det = det tr(A^{-1} dA): gA = conj(g det) A^{-H}. Singular A (det == 0) goes through
    # the SVD's cofactor form adj(A)^H = conj(det(U Vh)) U diag(prod_{j!=i} s_j) Vh.
    n = A.shape[-1]
    if n == 0:
        return gt.zeros_like(A)
    scaled = (g * out.conj()) if A.is_complex() else g * out
    inv, info = _linalg_inv_ex(A)
    if not bool(info.ne(0).any()):
        return scaled.unsqueeze(-1).unsqueeze(-1) * inv.mH
    U, S, Vh = _linalg_svd(A, False, True)
    others = gt.stack([gt.cat([S[..., :i], S[..., i + 1:]], -1).prod(-1) for i in range(n)], -1)
    phase = _linalg_det(U @ Vh)
    cof = (U * others.unsqueeze(-2).to(U.dtype)) @ Vh
    return (g.unsqueeze(-1).unsqueeze(-1) * (phase.conj() if A.is_complex() else phase)
            .unsqueeze(-1).unsqueeze(-1) * cof)


@op("_linalg_det", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda g, A, out: _det_grad(g, A, out)}, jvp="transpose")
def _linalg_det(A: Tensor) -> Tensor:
    out = empty(_batch(A), A.dtype, A.device)
    _run("_linalg_det", A, (out,), (A,))
    return out


def _slogdet_grad(grads: list, A: Tensor, outs: tuple) -> Tensor:
    # d log det = tr(A^{-1} dA): logabsdet takes its real part and the sign's phase its
    # imaginary part, so gA = w A^{-H} with w = g_logabsdet - i Im(conj(g_sign) sign).
    g_sign, g_abs = grads
    sign = outs[0]
    w = g_abs
    if A.is_complex():
        w = g_abs.to(A.dtype) - 1j * (g_sign.conj() * sign).imag.to(A.dtype)
    return w.unsqueeze(-1).unsqueeze(-1) * _linalg_inv_ex(A)[0].mH


@op("_linalg_slogdet", method=False, cost=memory_cost(1, "A"),
    output_differentiable=(True, True),
    grad={"A": lambda grads, A, outs: _slogdet_grad(grads, A, outs)}, jvp="transpose")
def _linalg_slogdet(A: Tensor) -> tuple[Tensor, Tensor]:
    sign = empty(_batch(A), A.dtype, A.device)
    logabs = empty(_batch(A), real_dtype(A.dtype), A.device)
    _run("_linalg_slogdet", A, (sign, logabs), (A,))
    return return_types.linalg_slogdet(sign, logabs)


@op("_linalg_inv_ex", method=False, cost=memory_cost(1, "A"),
    output_differentiable=(True, False),
    grad={"A": "-(out.mH @ g @ out.mH)"}, jvp="(-(out @ A_t @ out), None)")
def _linalg_inv_ex(A: Tensor) -> tuple[Tensor, Tensor]:
    inv = empty(tuple(A.shape), A.dtype, A.device)
    info = empty(_batch(A), D.int32, A.device)
    _run("_linalg_inv_ex", A, (inv, info), (A,))
    return return_types.linalg_inv_ex(inv, info)


# -- solve ------------------------------------------------------------------------------------
def _solve_grad(g: Tensor, A: Tensor, out: Tensor, left: bool, wrt_a: bool) -> Tensor:
    gB = _linalg_solve_ex(A.mH, g, left)[0]
    if not wrt_a:
        return gB
    return -(gB @ out.mH) if left else -(out.mH @ gB)


@op("_linalg_solve_ex", method=False, cost=memory_cost(1, "A"),
    output_differentiable=(True, False),
    grad={"A": lambda g, A, out, left: _solve_grad(g, A, out, left, True),
          "B": lambda g, A, out, left: _solve_grad(g, A, out, left, False)},
    jvp="(_linalg_solve_ex(A, B_t - (A_t @ out if left else out @ A_t), left)[0], None)")
def _linalg_solve_ex(A: Tensor, B: Tensor, left: bool = True) -> tuple[Tensor, Tensor]:
    """AX = B (left) or XA = B for a batch of matrices B whose batch dims broadcast with A's."""
    if not left:  # XA = B  <=>  A^T X^T = B^T
        res, info = _linalg_solve_ex(A.mT, B.mT, True)
        return return_types.linalg_solve_ex(res.mT, info)
    a_shape, b_shape = tuple(A.shape), tuple(B.shape)
    batch = a_shape[:-2]
    if b_shape[:-2] != batch:  # broadcast batch dims (views; the common case needs none)
        batch = tuple(gt.broadcast_shapes(batch, b_shape[:-2]))
        A = A.expand(*batch, *a_shape[-2:]) if a_shape[:-2] != batch else A
        B = B.expand(*batch, *b_shape[-2:]) if b_shape[:-2] != batch else B
    res = empty((*batch, *b_shape[-2:]), A.dtype, A.device)
    info = empty(batch, D.int32, A.device)
    _run("_linalg_solve_ex", A, (res, info), (A, B))
    return return_types.linalg_solve_ex(res, info)


# -- LU -------------------------------------------------------------------------------------
def lu_unpack_tensors(LU: Tensor, pivots: Tensor, unpack_data: bool = True,
                      unpack_pivots: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """(P, L, U) with A = P L U from getrf's packed factors and 1-based row swaps."""
    m, n = LU.shape[-2:]
    k = min(m, n)
    if unpack_data:
        eye = gt.eye(m, k, dtype=LU.dtype, device=LU.device)
        L = LU[..., :, :k].tril(-1) + eye
        U = LU[..., :k, :].triu()
    else:
        L = gt.empty((0,), dtype=LU.dtype, device=LU.device)
        U = gt.empty((0,), dtype=LU.dtype, device=LU.device)
    if not unpack_pivots:
        return gt.empty((0,), dtype=LU.dtype, device=LU.device), L, U
    with gt.no_grad():
        # perm[r]: the row of A that lands in row r of P^T A (the swaps applied in order)
        swaps = pivots.to(D.int64) - 1
        # built from the pivots, so that under gt.func.vmap it carries their batch
        perm = swaps.sum(-1, keepdim=True) * 0 + gt.arange(m, device=LU.device)
        for i in range(pivots.shape[-1]):
            j = swaps[..., i:i + 1]
            here = perm[..., i:i + 1].clone()
            perm[..., i:i + 1] = perm.gather(-1, j)
            perm.scatter_(-1, j, here)
        rows = gt.arange(m, device=LU.device)
        P = (perm.unsqueeze(-2) == rows.unsqueeze(-1)).to(LU.dtype)
    return P, L, U


def _lu_factor_grad(g: Tensor, outs: tuple) -> Tensor:
    # PyTorch's linalg_lu_backward for square A = P L U:
    # gA = P L^{-H} (tril(L^H gL, -1) + triu(gU U^H)) U^{-H}, gL/gU the parts of g.
    LU, pivots = outs[0], outs[1]
    m, n = LU.shape[-2:]
    if m != n:
        raise RuntimeError("linalg.lu_factor: the derivative is implemented for square "
                           "matrices only")
    P, L, U = lu_unpack_tensors(LU, pivots)
    gL, gU = g.tril(-1), g.triu()
    gR = (L.mH @ gL).tril(-1) + (gU @ U.mH).triu()
    gA = _linalg_solve_triangular(L.mH, gR, True, True, True)
    gA = _linalg_solve_triangular(U.mH, gA, False, False, False)
    return P @ gA


@op("_linalg_lu_factor_ex", method=False, cost=memory_cost(1, "A"),
    output_differentiable=(True, False, False),
    grad={"A": lambda g, outs: _lu_factor_grad(g, outs)}, jvp="transpose")
def _linalg_lu_factor_ex(A: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    m, n = A.shape[-2:]
    LU = empty(tuple(A.shape), A.dtype, A.device)
    pivots = empty((*_batch(A), min(m, n)), D.int32, A.device)
    info = empty(_batch(A), D.int32, A.device)
    _run("_linalg_lu_factor_ex", A, (LU, pivots, info), (A,))
    return return_types.linalg_lu_factor_ex(LU, pivots, info)


# -- Cholesky ---------------------------------------------------------------------------------
def _cholesky_grad(g: Tensor, out: Tensor, upper: bool) -> Tensor:
    # PyTorch's cholesky_backward: gA = L^{-H} Phi(L^H gL) L^{-1}, Phi = lower triangle with
    # a halved diagonal, then the Hermitian part.
    L, gL = (out.mH, g.mH) if upper else (out, g)
    phi = (L.mH @ gL).tril()
    phi = phi - 0.5 * gt.diag_embed(phi.diagonal(0, -2, -1))
    gA = _linalg_solve_triangular(L.mH, phi, True, True, False)
    gA = _linalg_solve_triangular(L, gA, False, False, False)
    return 0.5 * (gA + gA.mH)


@op("_linalg_cholesky_ex", method=False, cost=memory_cost(1, "A"),
    output_differentiable=(True, False),
    grad={"A": lambda g, out, upper: _cholesky_grad(g, out, upper)}, jvp="transpose")
def _linalg_cholesky_ex(A: Tensor, upper: bool = False) -> tuple[Tensor, Tensor]:
    shape = tuple(A.shape)
    L = empty(shape, A.dtype, A.device)
    info = empty(shape[:-2], D.int32, A.device)
    _run("_linalg_cholesky_ex", A, (L, info), (A,), bool(upper))
    return return_types.linalg_cholesky_ex(L, info)


# -- triangular solve -------------------------------------------------------------------------
def _solve_triangular_grad(g: Tensor, A: Tensor, out: Tensor, upper: bool, left: bool,
                           unitriangular: bool, wrt_a: bool) -> Tensor:
    gB = _linalg_solve_triangular(A.mH, g, not upper, left, unitriangular)
    if not wrt_a:
        return gB
    gA = -(gB @ out.mH) if left else -(out.mH @ gB)
    gA = gA.triu(1 if unitriangular else 0) if upper else gA.tril(-1 if unitriangular else 0)
    return gA


@op("_linalg_solve_triangular", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda g, A, out, upper, left, unitriangular:
          _solve_triangular_grad(g, A, out, upper, left, unitriangular, True),
          "B": lambda g, A, out, upper, left, unitriangular:
          _solve_triangular_grad(g, A, out, upper, left, unitriangular, False)}, jvp="transpose")
def _linalg_solve_triangular(A: Tensor, B: Tensor, upper: bool, left: bool = True,
                             unitriangular: bool = False) -> Tensor:
    batch = gt.broadcast_shapes(_batch(A), _batch(B))
    dt = D.promote_types(A.dtype, B.dtype)
    A_ = A.to(dt).expand(*batch, *A.shape[-2:])
    B_ = B.to(dt).expand(*batch, *B.shape[-2:])
    res = empty(tuple(B_.shape), dt, A.device)
    _run("_linalg_solve_triangular", A, (res,), (A_, B_), bool(upper), bool(left),
         bool(unitriangular))
    return res


# -- Hermitian eigensolver ------------------------------------------------------------------
def eig_grad_core(gL: Tensor | None, gV: Tensor | None, L: Tensor, V: Tensor,
                  hermitian: bool) -> Tensor:
    """PyTorch's linalg_eig_backward (Hermitian and general), gradients possibly zero-filled."""
    if _zero_grad(gV):
        if _zero_grad(gL):
            return gt.zeros(V.shape, dtype=V.dtype, device=V.device)
        gA = gt.diag_embed(gL.to(V.dtype))
        return (V @ gA @ V.mH) if hermitian else gt.linalg.solve(V.mH, gA @ V.mH)
    VhgV = V.mH @ gV
    diag = VhgV.diagonal(0, -2, -1)
    if V.is_complex() and not gt.allclose(diag.imag, gt.zeros_like(diag.imag), 1e-2, 1e-2):
        what = "eigh" if hermitian else "eig"
        raise RuntimeError(f"linalg_{what}_backward: The eigenvectors in the complex case are "
                           f"specified up to multiplication by e^{{i phi}}. The specified loss "
                           f"function depends on this quantity, so it is ill-defined.")
    if hermitian:
        VhgV = 0.5 * (VhgV - VhgV.mH)
        Lc = L
    else:
        VhgV = VhgV - V.mH @ (V * diag.real.unsqueeze(-2).to(V.dtype))
        Lc = L.conj()
    E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1)
    E = gt.where(_eye_mask(E.shape[-1], E), gt.ones_like(E), E)
    gA = VhgV / E.to(VhgV.dtype)
    if gL is not None:
        gA = _set_diag(gA, gL.to(gA.dtype))
    if hermitian:
        return V @ gA @ V.mH
    return gt.linalg.solve(V.mH, gA @ V.mH)


@op("_linalg_eigh", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda grads, outs: eig_grad_core(grads[0], grads[1], outs[0], outs[1], True)},
    jvp="linalg_eigh_jvp(A, A_t, outs, UPLO, compute_v)")
def _linalg_eigh(A: Tensor, UPLO: str = "L", compute_v: bool = True) -> tuple[Tensor, Tensor]:
    n = A.shape[-1]
    w = empty((*_batch(A), n), real_dtype(A.dtype), A.device)
    v = empty(tuple(A.shape), A.dtype, A.device) if compute_v else \
        empty((0,), A.dtype, A.device)
    _run_converging("_linalg_eigh", "linalg.eigh", A, (w, v if compute_v else None), (A,),
                    UPLO, what="eigenvalues")
    return return_types.linalg_eigh(w, v)


@op("_linalg_eig", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda grads, outs, A: _eig_grad(grads, outs, A)},
    jvp="linalg_eig_jvp(A, A_t, outs, compute_v)")
def _linalg_eig(A: Tensor, compute_v: bool = True) -> tuple[Tensor, Tensor]:
    n = A.shape[-1]
    cdt = A.dtype if A.is_complex() else D.promote_types(A.dtype, D.complex64)
    w = empty((*_batch(A), n), cdt, A.device)
    v = empty(tuple(A.shape), cdt, A.device) if compute_v else empty((0,), cdt, A.device)
    _run_converging("_linalg_eig", "linalg.eig", A, (w, v if compute_v else None), (A,),
                    what="eigenvalues")
    return return_types.linalg_eig(w, v)


def _eig_grad(grads: list, outs: tuple, A: Tensor) -> Tensor:
    gA = eig_grad_core(grads[0], grads[1], outs[0], outs[1], False)
    return gA if A.is_complex() else gA.real


def _run_converging(name: str, fn: str, A: Tensor, outs: Sequence[Tensor | None],
                    ins: Sequence[Tensor], *params: Any, what: str) -> None:
    import numpy as np
    try:
        _run(name, A, outs, ins, *params)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{fn}: The algorithm failed to converge because the input matrix "
                          f"is ill-conditioned or has too many repeated {what} (error code: "
                          f"1).") from None


# -- SVD --------------------------------------------------------------------------------------
def _svd_grad(grads: list, outs: tuple, full_matrices: bool) -> Tensor:
    """PyTorch's svd_backward (vectors beyond min(m, n) of full_matrices are ignored)."""
    gU, gS, gVh = grads
    U, S, Vh = outs
    m, n = U.shape[-2], Vh.shape[-1]
    k = S.shape[-1]
    if full_matrices:
        U, Vh = U[..., :k], Vh[..., :k, :]
        gU = None if gU is None else gU[..., :k]
        gVh = None if gVh is None else gVh[..., :k, :]
    no_u, no_v = _zero_grad(gU), _zero_grad(gVh)
    if no_u and no_v:
        return (U * gS.unsqueeze(-2).to(U.dtype)) @ Vh
    V = Vh.mH
    gV = None if no_v else gVh.mH
    Sc = S.to(U.dtype)
    UhgU = None if no_u else U.mH @ gU
    VhgV = None if no_v else V.mH @ gV
    UhgU = None if UhgU is None else UhgU - UhgU.mH
    VhgV = None if VhgV is None else VhgV - VhgV.mH
    if U.is_complex():
        total = (0 if UhgU is None else UhgU.diagonal(0, -2, -1)) + \
            (0 if VhgV is None else VhgV.diagonal(0, -2, -1))
        if not gt.allclose(total.imag, gt.zeros_like(total.imag), 1e-2, 1e-2):
            raise RuntimeError("svd_backward: The singular vectors in the complex case are "
                               "specified up to multiplication by e^{i phi}. The specified loss "
                               "function depends on this phase term, making it ill-defined.")
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    E = gt.where(_eye_mask(k, E), gt.ones_like(E), E).to(U.dtype)
    if UhgU is not None and VhgV is not None:
        gA = (UhgU * Sc.unsqueeze(-2) + Sc.unsqueeze(-1) * VhgV) / E
    elif UhgU is not None:
        gA = (UhgU / E) * Sc.unsqueeze(-2)
    else:
        gA = Sc.unsqueeze(-1) * (VhgV / E)
    gA = gA + gt.diag_embed(gS.to(U.dtype))
    if U.is_complex() and UhgU is not None:
        gA = gA + gt.diag_embed(UhgU.diagonal(0, -2, -1) / (2 * Sc))
    if m > n and UhgU is not None:
        gA = U @ gA
        gUSinv = gU / Sc.unsqueeze(-2)
        gA = gA + gUSinv - U @ (U.mH @ gUSinv)
        return gA @ Vh
    if m < n and VhgV is not None:
        gA = gA @ Vh
        gVSinv = gV / Sc.unsqueeze(-2)
        gA = gA + gVSinv.mH - (gVSinv.mH @ V) @ Vh
        return U @ gA
    return U @ gA @ Vh


@op("_linalg_svd", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda grads, outs, full_matrices: _svd_grad(grads, outs, full_matrices)},
    jvp="linalg_svd_jvp(A, A_t, outs, full_matrices, compute_uv)")
def _linalg_svd(A: Tensor, full_matrices: bool = False, compute_uv: bool = True
                ) -> tuple[Tensor, Tensor, Tensor]:
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = _batch(A)
    S = empty((*batch, k), real_dtype(A.dtype), A.device)
    if compute_uv:
        cu, rv = (m, n) if full_matrices else (k, k)
        U = empty((*batch, m, cu), A.dtype, A.device)
        Vh = empty((*batch, rv, n), A.dtype, A.device)
    else:
        U = Vh = None
    _run_converging("_linalg_svd", "linalg.svd", A, (U, S, Vh), (A,), bool(full_matrices),
                    what="singular values")
    if not compute_uv:
        U = empty((0,), A.dtype, A.device)
        Vh = empty((0,), A.dtype, A.device)
    return return_types.linalg_svd(U, S, Vh)


# -- QR ---------------------------------------------------------------------------------------
def _qr_grad(grads: list, outs: tuple, mode: str) -> Tensor:
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    gQ, gR = grads
    Q, R = outs
    m, n = Q.shape[-2], R.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    if m >= n:
        return _qr_grad_tall(gQ, gR, Q, R)
    # A = Q [X | Y]: X = Q R1 is square, Y = Q R2 (PyTorch's wide case)
    R1, gR1, gR2 = R[..., :m], gR[..., :m], gR[..., m:]
    Y = Q @ R[..., m:]
    gX = _qr_grad_tall(gQ + Y @ gR2.mH, gR1, Q, R1)
    return gt.cat([gX, Q @ gR2], -1)


def _qr_grad_tall(gQ: Tensor, gR: Tensor, Q: Tensor, R: Tensor) -> Tensor:
    # gA = (gQ + Q copyltu(M)) R^{-H}, M = R gR^H - gQ^H Q; copyltu makes M's lower triangle
    # Hermitian (the real part of its diagonal kept).
    M = R @ gR.mH - gQ.mH @ Q
    low = M.tril(-1)
    sym = low + low.mH + gt.diag_embed(M.diagonal(0, -2, -1).real.to(M.dtype))
    return _linalg_solve_triangular(R.mH, gQ + Q @ sym, False, False, False)


@op("_linalg_qr", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda grads, outs, mode: _qr_grad(grads, outs, mode)}, jvp="transpose")
def _linalg_qr(A: Tensor, mode: str = "reduced") -> tuple[Tensor, Tensor]:
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = _batch(A)
    if mode == "r":
        Q = None
        R = empty((*batch, k, n), A.dtype, A.device)
    else:
        qc = m if mode == "complete" else k
        Q = empty((*batch, m, qc), A.dtype, A.device)
        R = empty((*batch, qc, n), A.dtype, A.device)
    _run("_linalg_qr", A, (Q, R), (A,), mode)
    if Q is None:
        Q = empty((0,), A.dtype, A.device)
    return return_types.linalg_qr(Q, R)


# -- matrix exponential -----------------------------------------------------------------------
def _matrix_exp_grad(g: Tensor, A: Tensor) -> Tensor:
    # The Frechet derivative's adjoint: exp([[A^H, G], [0, A^H]]) holds it in the top right.
    n = A.shape[-1]
    Ah = A.mH
    top = gt.cat([Ah, g], -1)
    bottom = gt.cat([gt.zeros_like(Ah), Ah], -1)
    return _linalg_matrix_exp(gt.cat([top, bottom], -2))[..., :n, n:]


@op("_linalg_matrix_exp", method=False, cost=memory_cost(1, "A"),
    grad={"A": lambda g, A: _matrix_exp_grad(g, A)}, jvp="transpose")
def _linalg_matrix_exp(A: Tensor) -> Tensor:
    out = empty(tuple(A.shape), A.dtype, A.device)
    _run("_linalg_matrix_exp", A, (out,), (A,))
    return out


# -- results into out= --------------------------------------------------------------------------
def deliver(result: Tensor, out: Tensor | None, fn: str) -> Tensor:
    """``result``, or copied into ``out`` (PyTorch's linalg out= rules: same device, a dtype
    the result casts to, resized when its shape differs)."""
    if out is None:
        return result
    check_out(out, tuple(result.shape), result.dtype, result.device, fn)
    out.copy_(result)
    return out


def deliver_all(results: tuple, out: Any, fn: str) -> tuple:
    if out is None:
        return results
    if not isinstance(out, tuple | list) or len(out) != len(results):
        raise TypeError(f"{fn}(): argument 'out' must be tuple of {len(results)} Tensors")
    for o, r in zip(out, results, strict=True):
        deliver(r, o, fn)
    return type(results)(*out)


# -- public ops: the top-level forms and Tensor methods (gt.linalg reuses det, matrix_power,
# matrix_exp as they are) -----------------------------------------------------------------------
@op(cost=memory_cost(1, "A"))
def det(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Determinant of square matrices (batched)."""
    check_matrix(A, "linalg.det", low="lu_cpu")
    return deliver(_linalg_det(A), out, "linalg_det")


@op(cost=memory_cost(1, "input"))
def logdet(input: Tensor) -> Tensor:
    """log(det(A)): NaN for a negative real determinant, -inf for a singular matrix."""
    check_matrix(input, "logdet")
    sign, logabs = _linalg_slogdet(input)
    if input.is_complex():
        return sign.log() + logabs
    return gt.where(sign < 0, gt.full_like(logabs, float("nan")), logabs)


@op(cost=memory_cost(1, "input"))
def slogdet(input: Tensor) -> Any:
    """(sign, log|det|) as torch.slogdet's named tuple."""
    check_matrix(input, "linalg.slogdet")
    sign, logabs = _linalg_slogdet(input)
    return return_types.slogdet(sign, logabs)


@op(cost=memory_cost(1, "input"))
def inverse(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Inverse of square matrices (gt.linalg.inv)."""
    return gt.linalg.inv(input, out=out)


@op("cholesky", cost=memory_cost(1, "input"))
def cholesky_(input: Tensor, upper: bool = False, *, out: Tensor | None = None) -> Tensor:
    """torch.cholesky: the lower factor, or the upper one with upper=True."""
    return gt.linalg.cholesky(input, upper=upper, out=out, _fn="cholesky")


@op("qr", cost=memory_cost(1, "input"))
def qr_(input: Tensor, some: bool = True, *, out: Any = None) -> Any:
    """torch.qr: reduced (some=True) or complete QR."""
    Q, R = gt.linalg.qr(input, "reduced" if some else "complete")
    return deliver_all(return_types.qr(Q, R), out, "qr")


@op("svd", cost=memory_cost(1, "input"))
def svd_(input: Tensor, some: bool = True, compute_uv: bool = True, *, out: Any = None) -> Any:
    """torch.svd: (U, S, V) with V (not Vh); zero U and V when compute_uv=False."""
    check_matrix(input, "linalg.svd", square=False, low="linalg_svd_cpu")
    if compute_uv:
        U, S, Vh = _linalg_svd(input, not some, True)
        res = return_types.svd(U, S, Vh.mH)
    else:
        S = _linalg_svd(input, False, input.requires_grad and gt.is_grad_enabled())[1]
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        cu, cv = m, n  # PyTorch's zero-filled square U and V
        res = return_types.svd(gt.zeros((*batch, m, cu), dtype=input.dtype,
                                        device=input.device), S,
                               gt.zeros((*batch, n, cv), dtype=input.dtype,
                                        device=input.device))
    return deliver_all(res, out, "svd")


@op(cost=memory_cost(1, "input"))
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """Pseudo-inverse with singular values below rcond * s_max dropped."""
    return gt.linalg.pinv(input, rtol=rcond)


@op(cost=memory_cost(1, "A"))
def matrix_power(A: Tensor, n: int, *, out: Tensor | None = None) -> Tensor:
    """A^n by repeated squaring (n < 0: of the inverse; n = 0: the identity)."""
    _square_any(A)
    if n < 0:
        check_matrix(A, "linalg.inv")
    if n == 0:
        res = gt.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape).clone()
        return deliver(res, out, "linalg_matrix_power")
    base = gt.linalg.inv(A) if n < 0 else A
    k = abs(n)
    res = None
    while k:
        if k & 1:
            res = base if res is None else res @ base
        k >>= 1
        if k:
            base = base @ base
    if res is A:
        res = A.clone()
    return deliver(res, out, "linalg_matrix_power")


def _square_any(A: Tensor) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"matrix_power(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2]} by {A.shape[-1]} matrices")


@op(cost=memory_cost(1, "A"))
def matrix_exp(A: Tensor) -> Tensor:
    """exp(A) of square matrices (SciPy's / CuPy's Pade scaling and squaring)."""
    if isinstance(A, Tensor) and A.dtype in _LOW_PRECISION:  # PyTorch's CPU computes these
        check_matrix(A.float(), "linalg.matrix_exp")
        return _linalg_matrix_exp(A.float()).to(A.dtype)
    check_matrix(A, "linalg.matrix_exp")
    return _linalg_matrix_exp(A)


@op(method=False, cost=memory_cost(1, "matrices"))
def chain_matmul(*matrices: Tensor, out: Tensor | None = None) -> Tensor:
    """Product of 2-D matrices in the cheapest order (gt.linalg.multi_dot of 2-D factors)."""
    if len(matrices) == 1 and isinstance(matrices[0], list | tuple):
        matrices = tuple(matrices[0])
    if len(matrices) == 1:
        return deliver(matrices[0].clone(), out, "chain_matmul")
    return gt.linalg.multi_dot(matrices, out=out)


@op(cost=memory_cost(1, "input"))
def triangular_solve(input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False, *, out: Any = None) -> Any:
    """torch.triangular_solve: (X with op(A) X = input, a copy of A)."""
    M = A.mT if transpose else A
    X = gt.linalg.solve_triangular(M, input, upper=upper != transpose,
                                   unitriangular=unitriangular)
    return deliver_all(return_types.triangular_solve(X, A.clone()), out, "triangular_solve")


@op(cost=memory_cost(1, "input"))
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False, *,
                   out: Tensor | None = None) -> Tensor:
    """X with A X = input for A = L L^H given its factor ``input2`` (U^H U with upper=True)."""
    L = input2.mH if upper else input2
    Y = _linalg_solve_triangular(L, input, False, True, False)
    return deliver(_linalg_solve_triangular(L.mH, Y, True, True, False), out, "cholesky_solve")


@op(cost=memory_cost(1, "input"))
def cholesky_inverse(input: Tensor, upper: bool = False, *, out: Tensor | None = None) -> Tensor:
    """(L L^H)^-1 from the factor L (U^H U with upper=True)."""
    check_matrix(input, "cholesky_inverse")
    eye = gt.eye(input.shape[-1], dtype=input.dtype, device=input.device)
    return cholesky_solve(eye.expand(input.shape), input, upper, out=out)


@op(method=False, cost=memory_cost(1, "LU_data"))
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True, *, out: Any = None) -> Any:
    """(P, L, U) from lu_factor's packed result (empty tensors for the parts not unpacked)."""
    if not isinstance(LU_data, Tensor) or LU_data.dim() < 2:
        raise RuntimeError("gputensor.lu_unpack: Expected tensor with 2 or more dimensions. "
                           f"Got size: {list(getattr(LU_data, 'shape', []))} instead")
    res = return_types.lu_unpack(*lu_unpack_tensors(LU_data, LU_pivots, unpack_data,
                                                    unpack_pivots))
    return deliver_all(res, out, "lu_unpack")


@op("lu", cost=memory_cost(1, "A"), function=True)
def lu_(A: Tensor, pivot: bool = True, get_infos: bool = False) -> Any:
    """torch.lu: (LU, pivots) or (LU, pivots, infos) (raises for singular A without infos)."""
    res = gt.linalg.lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    return tuple(res) if get_infos else (res.LU, res.pivots)


@op(cost=memory_cost(1, "b"))
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out: Tensor | None = None
             ) -> Tensor:
    """torch.lu_solve: X with A X = b from A's LU factorization."""
    return gt.linalg.lu_solve(LU_data, LU_pivots, b, out=out)

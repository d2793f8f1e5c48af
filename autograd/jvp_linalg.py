"""Forward (JVP) formulas of the spectral decompositions, derived from the perturbation of
``A = V diag(L) V^-1`` and ``A = U diag(S) V^H``. Their outputs are defined up to a gauge (the
phase, or sign, of each vector); the formulas pick the tangent that keeps the solver's
normalisation (unit vectors) and otherwise the one with no component along the vector itself,
the choice PyTorch's forward AD makes, so gauge-invariant functions of them are exact.
"""

from __future__ import annotations

from typing import Any


def _off_diagonal_quotient(num: Any, den: Any) -> Any:
    """``num / den`` off the diagonal and 0 on it (the diagonal of ``den`` is 0 there)."""
    import gputensor as gt
    eye = gt.eye(num.shape[-1], dtype=gt.bool, device=num.device)
    return gt.where(eye, gt.zeros_like(num), num / gt.where(eye, gt.ones_like(den), den))


def eig_jvp(A_t: Any, L: Any, V: Any, hermitian: bool) -> tuple[Any, Any]:
    """(dL, dV) of ``A = V diag(L) V^-1`` along ``A_t`` (Hermitian: ``V^-1 = V^H``, and
    ``A_t`` is taken to be Hermitian too). With ``dP = V^-1 A_t V``: ``dL = diag(dP)`` and
    ``dV = V (dP_ij / (L_j - L_i))`` off the diagonal, then (general case) projected so the
    columns keep unit norm, as LAPACK's eigenvectors have."""
    import gputensor as gt
    A_t = A_t.to(V.dtype)
    dP = V.mH @ A_t @ V if hermitian else gt.linalg.solve(V, A_t @ V)
    dL = dP.diagonal(0, -2, -1)
    if hermitian and dL.is_complex() and not L.is_complex():
        dL = dL.real
    gap = (L.unsqueeze(-2) - L.unsqueeze(-1)).to(dP.dtype)
    dV = V @ _off_diagonal_quotient(dP, gap)
    if not hermitian:
        dV = dV - V * (V.mH @ dV).diagonal(0, -2, -1).real.unsqueeze(-2).to(V.dtype)
    return dL, dV


def linalg_eig_jvp(A: Any, A_t: Any, outs: Any, compute_v: bool) -> tuple[Any, Any]:
    """Tangents of ``_linalg_eig``'s (eigenvalues, eigenvectors); without ``compute_v`` the
    vectors are computed here, as the eigenvalues' tangent needs them."""
    L, V = outs
    if not compute_v:
        from gputensor.kernels.registry import OPS
        L, V = OPS["_linalg_eig"].frontend(A, True)
    dL, dV = eig_jvp(A_t, L, V, hermitian=False)
    return dL, dV if compute_v else None


def linalg_eigh_jvp(A: Any, A_t: Any, outs: Any, UPLO: str, compute_v: bool
                    ) -> tuple[Any, Any]:
    """Tangents of ``_linalg_eigh``'s (eigenvalues, eigenvectors)."""
    L, V = outs
    if not compute_v:
        from gputensor.kernels.registry import OPS
        L, V = OPS["_linalg_eigh"].frontend(A, UPLO, True)
    dL, dV = eig_jvp(A_t, L, V, hermitian=True)
    return dL, dV if compute_v else None


def linalg_svd_jvp(A: Any, A_t: Any, outs: Any, full_matrices: bool, compute_uv: bool
                   ) -> tuple[Any, Any, Any]:
    """Tangents of ``_linalg_svd``'s (U, S, Vh). With ``dP = U^H A_t V`` (thin factors):
    ``dS = Re diag(dP)``, ``dU = U Ωu + (I - U U^H) A_t V S^-1``, ``dV = V Ωv + (I - V V^H)
    A_t^H U S^-1``, where off the diagonal ``Ωu = (dP S + S dP^H) / E`` and
    ``Ωv = (S dP + dP^H S) / E`` with ``E_ij = s_j^2 - s_i^2``; on it Ωv = 0 and Ωu carries
    the phase ``i Im(dP_ii) / s_i``. As in PyTorch, the extra columns of full_matrices
    factors get zero tangents."""
    import gputensor as gt
    U, S, Vh = outs
    if not compute_uv:
        from gputensor.kernels.registry import OPS
        U, S, Vh = OPS["_linalg_svd"].frontend(A, False, True)
    m, n = A.shape[-2], A.shape[-1]
    k = S.shape[-1]
    U, Vh = U[..., :k], Vh[..., :k, :]
    V = Vh.mH
    A_t = A_t.to(U.dtype)
    dP = U.mH @ A_t @ V
    dS = dP.diagonal(0, -2, -1)
    dS = dS.real if dS.is_complex() else dS
    if not compute_uv:
        return None, dS, None
    Sc = S.to(U.dtype)
    S2 = S * S
    gap = (S2.unsqueeze(-2) - S2.unsqueeze(-1)).to(U.dtype)
    dPh = dP.mH
    omega_u = _off_diagonal_quotient(dP * Sc.unsqueeze(-2) + Sc.unsqueeze(-1) * dPh, gap)
    omega_v = _off_diagonal_quotient(Sc.unsqueeze(-1) * dP + dPh * Sc.unsqueeze(-2), gap)
    if U.is_complex():
        phase = dP.diagonal(0, -2, -1).imag / S
        omega_u = omega_u + gt.diag_embed(gt.complex(gt.zeros_like(phase), phase))
    dU = U @ omega_u
    dV = V @ omega_v
    if m > k:
        AVS = A_t @ (V / Sc.unsqueeze(-2))
        dU = dU + AVS - U @ (U.mH @ AVS)
    if n > k:
        AUS = A_t.mH @ (U / Sc.unsqueeze(-2))
        dV = dV + AUS - V @ (V.mH @ AUS)
    dVh = dV.mH
    if full_matrices:
        dU = gt.cat([dU, gt.zeros((*dU.shape[:-1], m - k), dtype=dU.dtype,
                                  device=dU.device)], -1)
        dVh = gt.cat([dVh, gt.zeros((*dVh.shape[:-2], n - k, n), dtype=dVh.dtype,
                                    device=dVh.device)], -2)
    return dU, dS, dVh

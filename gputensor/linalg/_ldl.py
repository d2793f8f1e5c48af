"""gt.linalg.ldl_factor, ldl_factor_ex and ldl_solve (torch.linalg's signatures)."""

from __future__ import annotations

from typing import Any

from gputensor import return_types
from gputensor._ops.decompositions import deliver, deliver_all, raise_for_info
from gputensor._ops.ldl import _linalg_ldl_factor_ex, _linalg_ldl_solve
from gputensor._tensor import Tensor


def _raise_ldl(info: Tensor, A: Tensor, fn: str) -> None:
    # LAPACK's info > 0: the factorisation finished but D[k, k] is exactly zero, so D (and A)
    # is singular. (PyTorch 2.13 reaches an internal assert here; a LinAlgError says why.)
    raise_for_info(info, A.dim() > 2, lambda code, p: (
        f"{fn}: {p}The factorization could not be completed because the input is singular: "
        f"D[{code - 1},{code - 1}] is exactly zero"))


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False,
                  out: Any = None) -> return_types.linalg_ldl_factor_ex:
    """(LD, pivots, info): the compact LDL^T (LDL^H with ``hermitian``) factorisation of
    symmetric matrices, LAPACK's sytrf format (only A's lower triangle is read)."""
    res = _linalg_ldl_factor_ex(A, hermitian)
    if check_errors:
        _raise_ldl(res.info, A, "gputensor.linalg.ldl_factor_ex")
    return deliver_all(res, out, "linalg_ldl_factor_ex")


def ldl_factor(A: Tensor, *, hermitian: bool = False,
               out: Any = None) -> return_types.linalg_ldl_factor:
    """(LD, pivots) of ldl_factor_ex; a singular D raises LinAlgError."""
    LD, pivots, info = _linalg_ldl_factor_ex(A, hermitian)
    _raise_ldl(info, A, "gputensor.linalg.ldl_factor")
    return deliver_all(return_types.linalg_ldl_factor(LD, pivots), out, "linalg_ldl_factor")


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False,
              out: Tensor | None = None) -> Tensor:
    """X with A X = B, from ldl_factor's (LD, pivots) of A (batch dims broadcast)."""
    return deliver(_linalg_ldl_solve(LD, pivots, B, hermitian), out, "linalg_ldl_solve")


__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

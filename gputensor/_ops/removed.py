"""Linear-algebra functions PyTorch removed in 1.9 but still defines (torch.eig, torch.lstsq,
torch.solve, torch.symeig and their Tensor methods) only to raise a RuntimeError that names
the torch.linalg replacement; here too, with PyTorch's messages.
(Their messages name gputensor where PyTorch writes torch, as every message here does.)"""

from __future__ import annotations

from typing import Any, NoReturn

from gputensor._tensor import Tensor

from ._core import op

_REMOVED = "This function was deprecated since version 1.9 and is now removed. "


@op(differentiable=False)
def solve(input: Tensor, A: Tensor, *, out: Any = None) -> NoReturn:
    """Removed: use gt.linalg.solve(A, B) (arguments reversed)."""
    raise RuntimeError(
        _REMOVED + "`gputensor.solve` is deprecated in favor of `gputensor.linalg.solve`. "
        "`gputensor.linalg.solve` has its arguments reversed and does not return the LU "
        "factorization.\n\nTo get the LU factorization see `gputensor.lu`, which can be used "
        "with `gputensor.lu_solve` or `gputensor.lu_unpack`.\nX = gputensor.solve(B, A).solution "
        "should be replaced with:\nX = gputensor.linalg.solve(A, B)")


@op(differentiable=False)
def lstsq(input: Tensor, A: Tensor, *, out: Any = None) -> NoReturn:
    """Removed: use gt.linalg.lstsq(A, B).solution (arguments reversed)."""
    raise RuntimeError(
        _REMOVED + "`gputensor.lstsq` is deprecated in favor of `gputensor.linalg.lstsq`.\n"
        "`gputensor.linalg.lstsq` has reversed arguments and does not return the QR decomposition "
        "in the returned tuple (although it returns other information about the problem).\n\n"
        "To get the QR decomposition consider using `gputensor.linalg.qr`.\n\nThe returned "
        "solution in `gputensor.lstsq` stored the residuals of the solution in the last m - n "
        "columns of the returned value whenever m > n. In gputensor.linalg.lstsq, the residuals "
        "are in the field 'residuals' of the returned named tuple.\n\nThe unpacking of the "
        "solution, as in\nX, _ = gputensor.lstsq(B, A).solution[:A.size(1)]\nshould be replaced "
        "with:\nX = gputensor.linalg.lstsq(A, B).solution")


@op(differentiable=False)
def symeig(input: Tensor, eigenvectors: bool = False, upper: bool = True, *,
           out: Any = None) -> NoReturn:
    """Removed: use gt.linalg.eigh / eigvalsh (which read the lower triangle by default)."""
    raise RuntimeError(
        _REMOVED + "The default behavior has changed from using the upper triangular portion "
        "of the matrix by default to using the lower triangular portion.\n\nL, _ = "
        "gputensor.symeig(A, upper=upper) should be replaced with:\nL = "
        "gputensor.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = "
        "gputensor.symeig(A, eigenvectors=True) should be replaced with:\nL, V = "
        "gputensor.linalg.eigh(A, UPLO='U' if upper else 'L')")


@op(differentiable=False)
def eig(self: Tensor, eigenvectors: bool = False, *, e: Any = None, v: Any = None) -> NoReturn:
    """Removed: use gt.linalg.eig / eigvals (complex results)."""
    raise RuntimeError(
        _REMOVED + "`gputensor.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` "
        "rather than real tensors mimicking complex tensors.\n\nL, _ = gputensor.eig(A) should be "
        "replaced with:\nL_complex = gputensor.linalg.eigvals(A)\n\nand\n\nL, V = gputensor.eig(A, "
        "eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
        "gputensor.linalg.eig(A)")


__all__ = ["eig", "lstsq", "solve", "symeig"]

"""LDL^T factorisation of symmetric / hermitian matrices (Bunch-Kaufman pivoting): the backend
ops of gt.linalg.ldl_factor(_ex) and ldl_solve. One LAPACK (sytrf/hetrf, sytrs/hetrs) or
cuSOLVER kernel each (kernels/cpu/lapack.py); like PyTorch, neither has a derivative.
"""

from __future__ import annotations

from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor
from gputensor.kernels.registry import memory_cost

from ._core import empty, kernel, op
from .decompositions import check_matrix


def _refuse_hermitian_complex_on_cuda(t: Tensor, hermitian: bool, fn: str) -> None:
    # cuSOLVER has no hermitian LDL (PyTorch's CUDA backend refuses it the same way).
    if hermitian and t.dtype.is_complex and t.is_cuda:
        raise RuntimeError(f"{fn}: complex tensors with hermitian=True flag are not "
                           f"supported with cuSOLVER backend (the only CUDA linear algebra "
                           f"backend here); factor on the CPU instead")


@op("_linalg_ldl_factor_ex", method=False, cost=memory_cost(1, "A"))
def _linalg_ldl_factor_ex(A: Tensor, hermitian: bool = False
                          ) -> return_types.linalg_ldl_factor_ex:
    fn = "gputensor.linalg.ldl_factor_ex"
    check_matrix(A, fn, low="ldl_factor_kernel_cpu")
    _refuse_hermitian_complex_on_cuda(A, hermitian, fn)
    batch, n = tuple(A.shape[:-2]), A.shape[-1]
    LD = empty((*batch, n, n), A.dtype, A.device)
    pivots = empty((*batch, n), D.int32, A.device)
    info = empty(batch, D.int32, A.device)
    kernel(A, "_linalg_ldl_factor_ex")((LD, pivots, info), (A.contiguous(),),
                                       (bool(hermitian),))
    return return_types.linalg_ldl_factor_ex(LD, pivots, info)


def _check_solve(LD: Tensor, pivots: Tensor, B: Tensor, fn: str) -> None:
    check_matrix(LD, fn)
    for name, t in (("pivots", pivots), ("B", B)):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg_ldl_solve(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{fn}: Expected LD.shape[:-1] and pivots.shape to be the same, "
                           f"but got pivots with shape {list(pivots.shape)} instead")
    if pivots.dtype.is_floating_point or pivots.dtype.is_complex or pivots.dtype is D.bool:
        raise RuntimeError(f"{fn}: Expected pivots to be integers. Got "
                           f"{pivots.dtype.legacy_name}")
    if B.dim() < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(B.dim(), 1)}, {max(B.dim(), 1) - 1}], but got -2)")
    if B.dtype is not LD.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{B.dtype.legacy_name} and A of type {LD.dtype.legacy_name} "
                           f"instead.")
    if B.shape[-2] != LD.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for {fn}: each A matrix is "
                           f"{LD.shape[-2]} by {LD.shape[-1]} but each b matrix is "
                           f"{B.shape[-2]} by {B.shape[-1]}")
    for t in (pivots, B):
        if t.device != LD.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {LD.device} and {t.device}!")


@op("_linalg_ldl_solve", method=False, cost=memory_cost(1, "B"))
def _linalg_ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, hermitian: bool = False
                      ) -> Tensor:
    fn = "gputensor.linalg.ldl_solve"
    _check_solve(LD, pivots, B, fn)
    _refuse_hermitian_complex_on_cuda(LD, hermitian, fn)
    import gputensor as gt
    batch = tuple(gt.broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2])))
    n, k = LD.shape[-1], B.shape[-1]
    LDb = LD.expand(*batch, n, n).contiguous()
    pivb = pivots.to(D.int32).expand(*batch, n).contiguous()
    Bb = B.expand(*batch, n, k).contiguous()
    X = empty((*batch, n, k), B.dtype, B.device)
    kernel(LD, "_linalg_ldl_solve")((X,), (LDb, pivb, Bb), (bool(hermitian),))
    return X


__all__ = ["_linalg_ldl_factor_ex", "_linalg_ldl_solve"]

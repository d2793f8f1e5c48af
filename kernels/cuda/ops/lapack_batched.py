"""Cholesky (any order), solve and inverse (of stacks of small matrices) on a GPU in a handful
of calls: cuSOLVER's ``potrfBatched`` (``potrf`` above order 64) and cuBLAS'
``getrfBatched``/``getrsBatched`` work in place on the output tensors, and the project's
kernels (lapack.cu) do the rest.

CuPy's ``cholesky``/``solve`` (what kernels/cpu/lapack.py's array-level kernels call) and the
info codes computed from their results with array expressions took 15-20 library calls per
call; each costs the host 10-30 us on an H200's host, and these calls read ``info`` back, so
the host's time is the call's time (256 8x8 Cholesky factors: 650 us, PyTorch 53 us).

Layouts, with row-major (C-ordered) stacks: the memory of a row-major A is the column-major
A^T, which is what the routines read.
- Cholesky: ``potrfBatched(UPPER)`` of the column-major A^T (= A for a Hermitian A, conj(A)
  for a complex one) leaves U with A^T = U^H U in the column-major upper triangle, which is
  the row-major lower triangle holding U^T = L, with L L^H = A (as CuPy's cholesky does).
  ``chol_finish`` zeroes the row-major strict upper triangle and reads LAPACK's info off L's
  diagonal (first entry not finite and positive), as the array-level kernel does.
- Solve: ``getrfBatched`` factors the column-major A^T, and ``getrsBatched`` with op T solves
  (A^T)^T X = B, i.e. A X = B, on B copied column-major; X is copied back row-major.
- Inverse: the same factorization with op N solves A^T Y = I for column-major Y = A^-T, whose
  row-major reading is A^-1: the identity is written straight into the output.
``info`` is getrfBatched's own (LAPACK's: U(i,i) exactly zero) for solve and inverse.

The emulator keeps the array-level kernels (NumPy/SciPy LAPACK on its memory): the cuSOLVER
calls here run on a GPU only, tested by tests/gpu and the device-parametrised suites there.
"""

from __future__ import annotations

import importlib

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty

from ..device import CudaSource, grid_for, launch, ptr, runtime, strided_pointers
from .linalg import copy_into

SRC = CudaSource("lapack.cu")
_TYPES = {D.float32: ("f32", "float", "s"), D.float64: ("f64", "double", "d"),
          D.complex64: ("c64", "gt::complex<float>", "c"),
          D.complex128: ("c128", "gt::complex<double>", "z")}
_V = [{"s": s, "T": t} for s, t, _ in _TYPES.values()]
SRC.instantiate("lapack_eye_{s}", "{T}* out, int n, long long total",
                "gtlapack::eye<{T}>(out, n, total)", _V)
SRC.instantiate("lapack_chol_finish_{s}", "{T}* a, int* info, int n, long long total",
                "gtlapack::chol_finish<{T}>(a, info, n, total)", _V)

# cuBLAS' batched LU is built for small matrices (kernels/cpu/lapack.py's _BATCHED_LU_MAX),
# potrfBatched likewise: larger LU solves keep the array-level kernels, larger Cholesky
# factors take cuSOLVER's potrf matrix by matrix.
MAX_ORDER = 64
_FILL_UPPER, _OP_N, _OP_T = 1, 0, 1  # cublasFillMode_t, cublasOperation_t
_CUBLAS = "cupy_backends.cuda.libs.cublas"  # imported when first used, as CuPy itself


def _applies(rt: object, a: Tensor, *outs: Tensor, max_order: int = MAX_ORDER) -> bool:
    """The fast path serves CuPy runtimes (not while a graph is captured), stacks of square
    matrices of a LAPACK dtype up to ``max_order``, and contiguous outputs it writes in
    place."""
    n = a._shape[-1]
    return (getattr(rt, "name", None) == "cupy" and not rt.capturing and a._dtype in _TYPES
            and 0 < n <= max_order and a.numel() > 0
            and all(o.is_contiguous() for o in outs))


def _stack_pointers(t: Tensor) -> int:
    """Device array of each matrix's address in a contiguous stack (cuBLAS' Aarray)."""
    n, m = t._shape[-2:]
    count = t.numel() // (n * m)
    return int(strided_pointers(int(ptr(t)), n * m * t._dtype.itemsize, count).ptr)


def cholesky(outs: tuple, ins: tuple, upper: bool) -> bool:
    """``_linalg_cholesky_ex`` on a GPU, or False where the array-level kernel must run."""
    (factor, info), (a,) = outs, ins
    rt = runtime()
    if upper or not _applies(rt, a, factor, info, max_order=1 << 30) or \
            info._dtype is not D.int32:
        return False
    s, _, prefix = _TYPES[a._dtype]
    n = a._shape[-1]
    count = a.numel() // (n * n)
    copy_into(factor, a)
    with rt.array_library() as lib:
        handle = lib.device.get_cusolver_handle()
        if n <= MAX_ORDER:
            potrf = getattr(lib.cusolver, f"{prefix}potrfBatched")
            potrf(handle, _FILL_UPPER, n, _stack_pointers(factor), n, int(ptr(info)), count)
        else:  # one potrf per matrix, one workspace for all (what CuPy's cholesky calls)
            potrf = getattr(lib.cusolver, f"{prefix}potrf")
            base, step = int(ptr(factor)), n * n * factor._dtype.itemsize
            lwork = getattr(lib.cusolver, f"{prefix}potrf_bufferSize")(handle, _FILL_UPPER, n,
                                                                       base, n)
            work = empty((max(1, lwork),), a._dtype, a.device)
            for i in range(count):
                potrf(handle, _FILL_UPPER, n, base + i * step, n, int(ptr(work)), lwork,
                      int(ptr(info)) + 4 * i)
    total = factor.numel()
    launch(SRC, f"lapack_chol_finish_{s}", grid_for(total), 256,
           [factor, info, np.int32(n), np.int64(total)])
    return True


def _lu(lib: object, lu: Tensor, piv: Tensor, info: Tensor, prefix: str) -> int:
    """getrfBatched of every column-major matrix of ``lu`` in place; its pointer array."""
    cublas = importlib.import_module(_CUBLAS)
    n = lu._shape[-1]
    count = lu.numel() // (n * n)
    a_ptrs = _stack_pointers(lu)
    getattr(cublas, f"{prefix}getrfBatched")(lib.device.get_cublas_handle(), n, a_ptrs, n,
                                             int(ptr(piv)), int(ptr(info)), count)
    return a_ptrs


def _getrs(lib: object, op: int, lu: Tensor, a_ptrs: int, piv: Tensor, rhs: Tensor,
           prefix: str) -> None:
    """getrsBatched: solve with every factor of ``lu`` for the column-major (n, k) matrices
    stored as ``rhs``'s row-major (k, n) ones, in place."""
    cublas = importlib.import_module(_CUBLAS)
    n = lu._shape[-1]
    count, k = lu.numel() // (n * n), rhs._shape[-2]
    status = np.zeros(1, np.int32)  # getrs reports only bad parameters, on the host
    getattr(cublas, f"{prefix}getrsBatched")(lib.device.get_cublas_handle(), op, n, k, a_ptrs,
                                             n, int(ptr(piv)), _stack_pointers(rhs), n,
                                             status.ctypes.data, count)
    if status[0]:
        raise RuntimeError(f"cuBLAS {prefix}getrsBatched: parameter {-int(status[0])} had an "
                           f"illegal value")


def solve(outs: tuple, ins: tuple) -> bool:
    """``_linalg_solve_ex`` on a GPU (A X = B, B a stack of matrices), or False."""
    (x, info), (a, b) = outs, ins
    rt = runtime()
    if not _applies(rt, a, x, info) or info._dtype is not D.int32 or b._dtype is not a._dtype \
            or b._shape[:-2] != a._shape[:-2] or b.numel() == 0:
        return False
    prefix = _TYPES[a._dtype][2]
    n, k = a._shape[-1], b._shape[-1]
    lu = empty(a._shape, a._dtype, a.device)
    copy_into(lu, a)  # row-major A: the column-major A^T
    batch = a._shape[:-2]
    rhs = empty((*batch, k, n), a._dtype, a.device)
    copy_into(rhs, b.transpose(-1, -2))  # B column-major
    piv = empty((*batch, n), D.int32, a.device)
    with rt.array_library() as lib:
        a_ptrs = _lu(lib, lu, piv, info, prefix)
        _getrs(lib, _OP_T, lu, a_ptrs, piv, rhs, prefix)
    copy_into(x, rhs.transpose(-1, -2))
    return True


def inv(outs: tuple, ins: tuple) -> bool:
    """``_linalg_inv_ex`` on a GPU, or False."""
    (ainv, info), (a,) = outs, ins
    rt = runtime()
    if not _applies(rt, a, ainv, info) or info._dtype is not D.int32:
        return False
    s, _, prefix = _TYPES[a._dtype]
    n = a._shape[-1]
    lu = empty(a._shape, a._dtype, a.device)
    copy_into(lu, a)
    total = ainv.numel()
    launch(SRC, f"lapack_eye_{s}", grid_for(total), 256, [ainv, np.int32(n), np.int64(total)])
    piv = empty((*a._shape[:-2], n), D.int32, a.device)
    with rt.array_library() as lib:
        a_ptrs = _lu(lib, lu, piv, info, prefix)
        _getrs(lib, _OP_N, lu, a_ptrs, piv, ainv, prefix)
    return True


FAST = {"_linalg_cholesky_ex": cholesky, "_linalg_solve_ex": solve, "_linalg_inv_ex": inv}

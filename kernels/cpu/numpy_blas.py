"""NumPy's own BLAS ``gemm``, callable from Numba kernels (the fused recurrences' time loops in
kernels/cpu/rnn.py).

A Numba loop that needs a product per iteration would otherwise go back to Python for each
``np.matmul`` (~10-20 us of dispatch per step on a small RNN), or call SciPy's BLAS
(``scipy.linalg.cython_blas``). SciPy and NumPy ship separate OpenBLAS builds, each with its
own thread pool whose workers spin after a call: alternating between the two made a training
step 3-4x slower on two cores. So this module calls the library NumPy's matmul itself uses,
found through threadpoolctl, by its CBLAS entry point: one pool, one thread budget
(gputensor/_threads.py limits it like every BLAS).

NumPy's wheels link a 64-bit-integer OpenBLAS whose symbols carry a suffix
(``scipy_cblas_sgemm64_`` from NumPy 2, ``cblas_sgemm64_`` before); those are the entry points
looked for. Where NumPy uses another BLAS (MKL, Accelerate) none is found, ``available()`` is
False and callers keep their Python loop around ``np.matmul``.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir as llvm_ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["available", "gemm", "gemm_beta"]

# CBLAS enums (cblas.h): row-major storage, op(X) = X or X^T.
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
_SYMBOL = "gputensor_numpy_cblas_{}gemm"   # the LLVM names compiled kernels link against
_CANDIDATES = ("scipy_cblas_{}gemm64_", "cblas_{}gemm64_")   # ILP64 builds only


def _numpy_blas_paths() -> list[str]:
    """Files of the BLAS libraries loaded from NumPy's own install (its wheel's vendored
    OpenBLAS), most specific first."""
    from threadpoolctl import threadpool_info

    root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    paths = [info["filepath"] for info in threadpool_info() if info.get("user_api") == "blas"]
    return [p for p in paths if os.path.abspath(p).startswith(root) and "numpy" in p]


@functools.cache
def available() -> bool:
    """Whether NumPy's BLAS has the ILP64 CBLAS gemm entry points; registers them with LLVM
    (before any kernel that calls them is compiled or loaded from the disk cache)."""
    for path in _numpy_blas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pattern in _CANDIDATES:
            found = {p: getattr(lib, pattern.format(p), None) for p in "sd"}
            if all(found.values()):
                for prefix, fn in found.items():
                    llvm.add_symbol(_SYMBOL.format(prefix), ctypes.cast(fn, ctypes.c_void_p).value)
                return True
    return False


def _gemm_typing(a, b, c) -> bool:
    """Whether a, b and c are arrays of one float dtype NumPy's BLAS has a gemm for."""
    return all(isinstance(x, types.Array) for x in (a, b, c)) and \
        c.dtype in (types.float32, types.float64) and a.dtype == c.dtype == b.dtype


def _gemm_codegen(dtype, with_beta: bool):
    """The call of NumPy's s/dgemm for ``gemm`` (beta 0) or ``gemm_beta`` (beta an argument)."""
    symbol = _SYMBOL.format("s" if dtype == types.float32 else "d")

    def codegen(context, builder, signature, args):
        i32, i64 = llvm_ir.IntType(32), llvm_ir.IntType(64)
        real = context.get_value_type(dtype)
        ptr = llvm_ir.IntType(8).as_pointer()
        ta, tb, mm, nn, kk, aa, la, bb, lb, cc, lc = args[:11]
        tys = signature.args
        beta = context.cast(builder, args[11], tys[11], dtype) if with_beta else \
            llvm_ir.Constant(real, 0.0)

        def int_arg(val, ty, width):
            return context.cast(builder, val, ty, types.int32 if width == 32 else types.int64)

        def data(val, ty):
            return builder.bitcast(context.make_array(ty)(context, builder, val).data, ptr)

        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [
            i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64, real, ptr, i64])
        fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
        builder.call(fn, [
            llvm_ir.Constant(i32, ROW_MAJOR), int_arg(ta, tys[0], 32), int_arg(tb, tys[1], 32),
            int_arg(mm, tys[2], 64), int_arg(nn, tys[3], 64), int_arg(kk, tys[4], 64),
            llvm_ir.Constant(real, 1.0), data(aa, tys[5]), int_arg(la, tys[6], 64),
            data(bb, tys[7]), int_arg(lb, tys[8], 64), beta,
            data(cc, tys[9]), int_arg(lc, tys[10], 64)])
        return context.get_dummy_value()

    return codegen


@intrinsic
def gemm(typingctx, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc):
    """c (m x n, row-major, leading dim ldc) = op(a) @ op(b), by NumPy's BLAS: the s or d
    routine by c's dtype (a, b and c share it), alpha 1, beta 0. Only for kernels run after
    ``available()`` returned True."""
    if not _gemm_typing(a, b, c):
        return None
    return (types.none(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc),
            _gemm_codegen(c.dtype, False))


@intrinsic
def gemm_beta(typingctx, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, beta):
    """c = op(a) @ op(b) + beta c: ``gemm`` with BLAS's beta (1 accumulates into c; 0 ignores
    what c held)."""
    if not _gemm_typing(a, b, c) or not isinstance(beta, types.Number):
        return None
    return (types.none(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, beta),
            _gemm_codegen(c.dtype, True))

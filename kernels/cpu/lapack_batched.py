"""Batches of small real matrices through LAPACK in one compiled loop (the CPU's linalg kernels,
kernels/cpu/lapack.py, call these for float32/float64 below 64 rows and columns).

NumPy's batched gufuncs copy, call LAPACK and check each matrix with several layers of Python
and C around every batch, and SciPy's wrappers cost microseconds per matrix; an 8x8 factorization
itself takes a few hundred nanoseconds. Here Numba calls SciPy's LAPACK (its
``scipy.linalg.cython_lapack`` entry points, registered with LLVM as external symbols so the disk
cache keeps working) matrix by matrix, with one workspace per thread, splitting the batch over
the thread budget only when it is large enough to pay for the parallel region (see
_PARALLEL_FLOPS). Each matrix is copied into a column-major workspace and goes through the
routines PyTorch's CPU kernels call, in the input's precision (NumPy's linalg computes float32
in double).

Every kernel takes 3-d arrays (the batch flattened to one dim) and leaves LAPACK's ``info`` per
matrix in an int32 array; nothing raises in compiled code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir as llvm_ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic

__all__ = ["cholesky", "solve", "qr", "eigh", "svd", "SMALL"]

SMALL = 64  # from this order on, LAPACK's own blocking and threads win: kernels/cpu/lapack.py


_ROUTINES: list[str] = []


@functools.cache
def _link() -> None:
    """Register the routines' addresses with LLVM: on first use, not at import (importing
    scipy.linalg costs ~0.3 s), and before any compiled kernel is loaded from the cache."""
    for name in _ROUTINES:
        for prefix in "sd":
            llvm.add_symbol(f"gputensor_lapack_{prefix}{name}", get_cython_function_address(
                "scipy.linalg.cython_lapack", prefix + name))


def _routine(name: str, key: int) -> Callable:
    """LAPACK's s<name>/d<name> as a Numba intrinsic ``f((arg, ...))``, chosen by the dtype of
    argument ``key``. Fortran takes every argument by reference: an array passes its data
    pointer, a uint8 scalar a one-byte slot (a CHARACTER), any other integer an int32 slot."""
    _ROUTINES.append(name)

    @intrinsic
    def call(typingctx, args):
        if not isinstance(args, types.BaseTuple) or len(args) <= key:
            return None
        dtype = args[key].dtype
        if dtype not in (types.float32, types.float64):
            return None
        symbol = f"gputensor_lapack_{'s' if dtype == types.float32 else 'd'}{name}"

        def codegen(context, builder, signature, llargs):
            i8p = llvm_ir.IntType(8).as_pointer()
            ptrs = []
            for ty, val in zip(signature.args[0], cgutils.unpack_tuple(builder, llargs[0]),
                               strict=True):
                if isinstance(ty, types.Array):
                    ptr = context.make_array(ty)(context, builder, val).data
                else:
                    slot_type = types.int8 if ty == types.uint8 else types.int32
                    ptr = cgutils.alloca_once(builder, context.get_value_type(slot_type))
                    builder.store(context.cast(builder, val, ty, slot_type), ptr)
                ptrs.append(builder.bitcast(ptr, i8p))
            fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [i8p] * len(ptrs))
            builder.call(cgutils.get_or_insert_function(builder.module, fnty, symbol), ptrs)
            return context.get_dummy_value()
        return types.none(args), codegen
    return call


_potrf = _routine("potrf", 2)    # uplo, n, a, lda, info
_gesv = _routine("gesv", 2)      # n, nrhs, a, lda, ipiv, b, ldb, info
_getrs = _routine("getrs", 3)    # trans, n, nrhs, a, lda, ipiv, b, ldb, info
_geqrf = _routine("geqrf", 2)    # m, n, a, lda, tau, work, lwork, info
_orgqr = _routine("orgqr", 3)    # m, n, k, a, lda, tau, work, lwork, info
_syevd = _routine("syevd", 3)    # jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info
_gesdd = _routine("gesdd", 3)    # jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork,
#                                  info

_N, _V, _L, _U, _S, _A = (np.uint8(ord(c)) for c in "NVLUSA")
_jit = njit(cache=True, error_model="numpy", nogil=True)


@_jit
def _transpose_into(dst, src):
    """dst = src^T: a matrix into a column-major workspace (dst (n, m) C-ordered holds the
    (m, n) src column by column), or a column-major result back out."""
    m, n = src.shape
    for r in range(m):
        for c in range(n):
            dst[c, r] = src[r, c]


@_jit
def _chunk(batch, parts, part):
    size = (batch + parts - 1) // parts
    return min(batch, part * size), min(batch, (part + 1) * size)


# -- Cholesky ---------------------------------------------------------------------------------
@_jit
def _cholesky_range(lo, hi, a, out, info, upper):
    n = a.shape[-1]
    w = np.empty((n, n), a.dtype)
    code = np.zeros(1, np.int32)
    for i in range(lo, hi):
        _transpose_into(w, a[i])
        _potrf((_L, n, w, n, code))  # A = L L^T, L in the lower triangle (column-major)
        info[i] = code[0]
        for r in range(n):  # L[r, c] = w[c, r]; upper: L^T
            for c in range(n):
                if upper:
                    out[i, r, c] = w[r, c] if c >= r else 0
                else:
                    out[i, r, c] = w[c, r] if c <= r else 0



# -- solve (gesv: getrf + getrs) ----------------------------------------------------------------
@_jit
def _solve_range(lo, hi, a, b, x, info):
    n, k = b.shape[-2], b.shape[-1]
    w = np.empty((n, n), a.dtype)
    wb = np.empty((k, n), a.dtype)
    piv = np.empty(n, np.int32)
    code = np.zeros(1, np.int32)
    for i in range(lo, hi):
        _transpose_into(w, a[i])
        _transpose_into(wb, b[i])
        # gesv, not getrf + getrs: OpenBLAS's getrs starts its thread pool whatever the size
        _gesv((n, k, w, n, piv, wb, n, code))
        info[i] = code[0]
        if code[0] > 0:  # gesv stops at a zero pivot; PyTorch's result is getrs' inf/nan
            _getrs((_N, n, k, w, n, piv, wb, n, code))
        _transpose_into(x[i], wb)



# -- QR (geqrf + orgqr) ---------------------------------------------------------------------
@_jit
def _qr_range(lo, hi, a, q, r, want_q):
    """Householder QR: R is k x n (reduced, 'r') or m x n (complete), Q m x q.shape[-1]."""
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    qc = q.shape[-1] if want_q else 0
    w = np.empty((max(n, qc), m), a.dtype)
    tau = np.empty(max(k, 1), a.dtype)
    code = np.zeros(1, np.int32)
    query = np.empty(1, a.dtype)
    _geqrf((m, n, w, m, tau, query, -1, code))
    lwork = int(query[0])
    if want_q:
        _orgqr((m, qc, k, w, m, tau, query, -1, code))
        lwork = max(lwork, int(query[0]))
    work = np.empty(max(lwork, 1), a.dtype)
    rr = r.shape[-2]
    for i in range(lo, hi):
        _transpose_into(w[:n], a[i])
        _geqrf((m, n, w, m, tau, work, lwork, code))
        for row in range(rr):
            for c in range(n):
                r[i, row, c] = w[c, row] if c >= row else 0
        if want_q:
            _orgqr((m, qc, k, w, m, tau, work, lwork, code))
            _transpose_into(q[i], w[:qc])



# -- symmetric eigensolver (syevd, PyTorch's and NumPy's driver) -------------------------------
@_jit
def _eigh_range(lo, hi, a, w, v, want_v, lower, info):
    n = a.shape[-1]
    job = _V if want_v else _N
    uplo = _L if lower else _U
    z = np.empty((n, n), a.dtype)
    code = np.zeros(1, np.int32)
    query = np.empty(1, a.dtype)
    iquery = np.empty(1, np.int32)
    _syevd((job, uplo, n, z, n, w[0], query, -1, iquery, -1, code))
    lwork, liwork = max(int(query[0]), 1), max(int(iquery[0]), 1)
    work = np.empty(lwork, a.dtype)
    iwork = np.empty(liwork, np.int32)
    for i in range(lo, hi):
        _transpose_into(z, a[i])
        _syevd((job, uplo, n, z, n, w[i], work, lwork, iwork, liwork, code))
        info[i] = code[0]
        if want_v:  # column c of z is the c-th eigenvector
            _transpose_into(v[i], z)



# -- SVD (gesdd, PyTorch's and NumPy's driver) -------------------------------------------------
@_jit
def _svd_range(lo, hi, a, u, s, vh, want_uv, full, info):
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    job = (_A if full else _S) if want_uv else _N
    uc, vr = (m, n) if full else (k, k)
    wa = np.empty((n, m), a.dtype)
    wu = np.empty((uc, m), a.dtype)     # U column-major (ldu = m)
    wv = np.empty((n, vr), a.dtype)     # VT column-major (ldvt = vr)
    iwork = np.empty(8 * max(k, 1), np.int32)
    code = np.zeros(1, np.int32)
    query = np.empty(1, a.dtype)
    _gesdd((job, m, n, wa, m, s[0], wu, m, wv, vr, query, -1, iwork, code))
    lwork = max(int(query[0]), 1)
    work = np.empty(lwork, a.dtype)
    for i in range(lo, hi):
        _transpose_into(wa, a[i])
        _gesdd((job, m, n, wa, m, s[i], wu, m, wv, vr, work, lwork, iwork, code))
        info[i] = code[0]
        if want_uv:
            _transpose_into(u[i], wu)
            _transpose_into(vh[i], wv)



@njit(cache=True, error_model="numpy", parallel=True)
def _split(fn, batch, parts, *args):
    """fn(lo, hi, *args) over the batch in ``parts`` parts, one thread each at a time."""
    for p in prange(parts):
        lo, hi = _chunk(batch, parts, p)
        fn(lo, hi, *args)


# -- host entry points ------------------------------------------------------------------------
# A parallel region costs a few microseconds on an idle machine, but on a busy one (the 2-core
# CI machine shared with other jobs) every region waits for a thread the OS has descheduled, up
# to a scheduler time slice: measured there, the 256-matrix 8x8 batches (0.07-2 ms serially)
# ran 2-4x slower split over 2 threads. So the batch is split only from ~10 ms of work on.
_PARALLEL_FLOPS = 1 << 24


_PART = 16  # matrices per part: the unit of work a thread takes
# Up to this order no BLAS call inside the routines starts OpenBLAS's own threads (gesdd's gemm
# does from ~48: inside a parallel region OpenBLAS then warns that it may hang).
_PARALLEL_ORDER = 32


def _parts(batch: int, flops_per_matrix: int, order: int) -> int:
    """How many parts to split the batch into (1: run serially). Parts are handed out
    dynamically, so a thread the OS deschedules on a busy machine does not hold up the rest."""
    if batch < 2 or order > _PARALLEL_ORDER or batch * flops_per_matrix < _PARALLEL_FLOPS:
        return 1
    threads = numba.get_num_threads()
    return 1 if threads < 2 else max(threads, -(-batch // _PART))


def _flat(x: np.ndarray) -> np.ndarray:
    """An input's batch as one leading dim (a view when the layout allows, else a copy)."""
    return x.reshape(-1, *x.shape[-2:])


def _out(x: np.ndarray, core: int = 2) -> np.ndarray:
    """An output's batch as one leading dim ahead of its ``core`` dims: always a view (setting
    ``shape`` raises rather than copy)."""
    y = x.view()
    y.shape = (-1, *x.shape[x.ndim - core:])
    return y


def _run(fn: Callable, flops_per_matrix: int, order: int, *args: object) -> None:
    """``fn(lo, hi, *args)`` over the whole batch (``args[0]``, 3-d), serially or in parts."""
    _link()
    batch = args[0].shape[0]  # type: ignore[attr-defined]
    parts = _parts(batch, flops_per_matrix, order)
    if parts == 1:
        fn(0, batch, *args)
    else:
        with numba.parallel_chunksize(1):  # dynamic: parts go to whichever thread is free
            _split(fn, batch, parts, *args)


def cholesky(a: np.ndarray, out: np.ndarray, info: np.ndarray, upper: bool) -> None:
    n = a.shape[-1]
    _run(_cholesky_range, n ** 3, n, _flat(a), _out(out), _out(info, 0), upper)


def solve(a: np.ndarray, b: np.ndarray, x: np.ndarray, info: np.ndarray) -> None:
    n = a.shape[-1]
    _run(_solve_range, n ** 3 + n * n * b.shape[-1], n, _flat(a), _flat(b), _out(x),
         _out(info, 0))


def qr(a: np.ndarray, q: np.ndarray | None, r: np.ndarray) -> None:
    m, n = a.shape[-2:]
    r3 = _out(r)
    q3 = r3 if q is None else _out(q)  # a typed placeholder when Q is not wanted
    _run(_qr_range, 4 * m * n * n, max(m, n), _flat(a), q3, r3, q is not None)


def eigh(a: np.ndarray, w: np.ndarray, v: np.ndarray | None, lower: bool) -> np.ndarray:
    """Eigenvalues into ``w`` (and vectors into ``v``); returns syevd's info per matrix."""
    n = a.shape[-1]
    a3 = _flat(a)
    v3 = a3 if v is None else _out(v)  # a placeholder, never written, when v is not wanted
    info = np.zeros(a3.shape[0], np.int32)
    _run(_eigh_range, 9 * n ** 3, n, a3, _out(w, 1), v3, v is not None, lower, info)
    return info


def svd(a: np.ndarray, u: np.ndarray | None, s: np.ndarray, vh: np.ndarray | None,
        full_matrices: bool) -> np.ndarray:
    """Singular values into ``s`` (and vectors into ``u``, ``vh``); returns gesdd's info."""
    m, n = a.shape[-2:]
    a3 = _flat(a)
    want = u is not None and vh is not None
    u3 = _out(u) if want else a3  # placeholders, never written, when the vectors are not wanted
    vh3 = _out(vh) if want else a3
    info = np.zeros(a3.shape[0], np.int32)
    _run(_svd_range, 22 * m * n * min(m, n), max(m, n), a3, u3, _out(s, 1), vh3, want,
         full_matrices, info)
    return info

"""gt.linalg's backend kernels, written once over the array-library interface and registered for
the CPU here (NumPy's batched LAPACK gufuncs and SciPy's LAPACK/BLAS wrappers on the tensors'
host views) and for CUDA in kernels/cuda/ops/lapack.py (the same functions on CuPy's cuSOLVER
routines over zero-copy device arrays, or on SciPy over the emulator's memory).

A registered kernel is ``kernel(outs, ins, params)``; it runs ``fn(lib, outs, ins, *params)``:
``lib`` is a runtime ArrayLibrary (``xp``, ``linalg``, ``scipy_linalg``), ``outs`` the arrays
the frontend allocated (None for outputs not requested), ``ins`` the validated inputs (matrices
in the last two dims, batch dims already broadcast). Results land with ``out[...] = result``.
``info`` outputs hold LAPACK's code per matrix (0: success; k > 0: the k-th pivot / leading
minor failed). Small matrices go through NumPy's batched gufuncs; NumPy raises for a whole
batch when one matrix fails, so the host then redoes the batch matrix by matrix with SciPy's
LAPACK wrappers to get each code. Matrices from 64 rows or columns on go through SciPy's
LAPACK one matrix at a time (faster there). CuPy does not raise and the codes are read off the
results on the device (no host round trip).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gputensor._tensor import Tensor
from gputensor.kernels.cpu import lapack_batched as batched
from gputensor.kernels.registry import CPU

KERNELS: dict[str, Callable[..., None]] = {}


def _kernel(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        KERNELS[name] = fn
        return fn
    return deco


def _on_host(lib: Any) -> bool:
    from gputensor.kernels.cuda.runtime import HOST_LIBRARY
    return lib is HOST_LIBRARY or lib.xp is np  # the first test spares a module lookup


def _small_real(lib: Any, a: np.ndarray) -> bool:
    """Host float32/float64 matrices below SMALL rows and columns: one compiled loop calls
    LAPACK matrix by matrix (lapack_batched.py)."""
    return (a.dtype.kind == "f" and a.dtype.itemsize in (4, 8) and a.shape[-1] < batched.SMALL
            and a.shape[-2] < batched.SMALL and _on_host(lib))


def _lapack(name: str, a: np.ndarray) -> Callable:
    from scipy.linalg import get_lapack_funcs
    return get_lapack_funcs((name,), (a,))[0]


# From this order on, SciPy's LAPACK wrappers (one call per matrix) beat NumPy's gufunc loop,
# whose per-matrix work is sized for small matrices (measured on 512x512: 2-10x); below it,
# real matrices go through lapack_batched (complex ones through NumPy's gufuncs).
_LARGE = batched.SMALL


def _large(a: np.ndarray) -> bool:
    return a.shape[-1] >= _LARGE or a.shape[-2] >= _LARGE


# BLAS/LAPACK/cuSOLVER routine prefix of each dtype (sgetrf, dgetrf, cgetrf, zgetrf)
BLAS_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


def positive_zeros(a: Any) -> Any:
    """``a`` with every -0.0 made +0.0 (a copy). Householder QR reflects a column onto
    -sign(pivot) * its norm, and LAPACK builds differ on the sign of a -0.0 pivot (SciPy's
    OpenBLAS reads it as negative, PyTorch's LAPACK as positive): as +0.0 both agree."""
    return a + 0


def _first_failure(bad: Any, xp: Any) -> Any:
    """1-based index of the first True along the last dim, 0 where there is none (int32)."""
    n = bad.shape[-1]
    if n == 0:
        return xp.zeros(bad.shape[:-1], dtype=xp.int32)
    first = xp.argmax(bad, axis=-1) + 1
    return xp.where(bad.any(axis=-1), first, 0).astype(xp.int32)


def _diag(a: Any, xp: Any) -> Any:
    return xp.diagonal(a, axis1=-2, axis2=-1)


# -- LU family: solve, inv, det, slogdet -----------------------------------------------------
def _column_major(xp: Any, m: Any, rows: int, cols: int) -> Any:
    """The matrices of ``m`` (a stack of rows x cols) as one fresh C-ordered (count, cols,
    rows) array: each matrix column-major, as cuBLAS reads it. Never a view of ``m`` (a
    transposed input would come back as itself), since the routines write in place."""
    cm = xp.ascontiguousarray(xp.swapaxes(m.reshape(-1, rows, cols), -1, -2))
    return cm.copy() if cm.data.ptr == m.data.ptr else cm


def _addresses(xp: Any, stack: Any) -> Any:
    """The device array of each matrix's address in a C-ordered stack (cuBLAS' Aarray)."""
    step = stack.shape[-1] * stack.shape[-2] * stack.itemsize
    return stack.data.ptr + xp.arange(stack.shape[0], dtype=xp.uint64) * step


def _lu_solve_cuda(lib: Any, a: Any, b: Any | None) -> tuple[Any, Any]:
    """On a GPU: A X = B for every (square) matrix of ``a`` from ONE LU factorization of each
    (cuBLAS' batched getrf then getrs, cupy/cublas.py ``batched_gesv``'s calls, up to order
    ``_BATCHED_LU_MAX``; cuSOLVER's per matrix above it). B is the identity when ``b`` is
    None, which gives the inverse as LAPACK's getrs would (inf/nan for a singular matrix).
    Also LAPACK getrf's info of each matrix: the 1-based index of the first exactly zero diagonal
    entry of U (read off U: CuPy's solve/inv keep their own info, and a singular 70x70 inverse
    came back finite from them on an H200). Returns (X as (count, k, n), column-major
    matrices; info as (count,))."""
    import cupy_backends.cuda.libs.cublas as cublas
    xp = lib.xp
    n = a.shape[-1]
    lu = _column_major(xp, a, n, n)
    count = lu.shape[0]
    if b is None:
        rhs = xp.broadcast_to(xp.eye(n, dtype=lu.dtype), (count, n, n)).copy()
    else:
        rhs = _column_major(xp, xp.broadcast_to(b, a.shape[:-2] + b.shape[-2:]), n,
                            b.shape[-1])
    piv = xp.empty((count, n), xp.int32)
    prefix = BLAS_PREFIX[a.dtype.name]
    if n > _BATCHED_LU_MAX:
        _lu_solve_each(lib, prefix, lu, piv, rhs)
        return rhs, _first_failure(_diag(lu, xp) == 0, xp)
    a_ptrs, b_ptrs = _addresses(xp, lu), _addresses(xp, rhs)
    codes = xp.empty(count, xp.int32)
    handle = lib.device.get_cublas_handle()
    getattr(cublas, f"{prefix}getrfBatched")(handle, n, a_ptrs.data.ptr, n, piv.data.ptr,
                                             codes.data.ptr, count)
    status = np.zeros(1, np.int32)  # getrs reports only bad parameters, on the host
    getattr(cublas, f"{prefix}getrsBatched")(handle, cublas.CUBLAS_OP_N, n, rhs.shape[1],
                                             a_ptrs.data.ptr, n, piv.data.ptr, b_ptrs.data.ptr,
                                             n, status.ctypes.data, count)
    if status[0]:
        raise RuntimeError(f"cuBLAS {prefix}getrsBatched: parameter {-int(status[0])} had an "
                           f"illegal value")
    return rhs, _first_failure(_diag(lu, xp) == 0, xp)


# cuBLAS' batched LU is built for small matrices; above this order each matrix goes through
# cuSOLVER's getrf/getrs (what cupyx.lapack.gesv calls), as CuPy's own solve does.
_BATCHED_LU_MAX = 64


def _lu_solve_each(lib: Any, prefix: str, lu: Any, piv: Any, rhs: Any) -> None:
    """cuSOLVER getrf then getrs on each column-major matrix of ``lu`` and right-hand side
    of ``rhs``, in place (one workspace for all)."""
    xp, cusolver = lib.xp, lib.cusolver
    count, n, k = lu.shape[0], lu.shape[-1], rhs.shape[1]
    handle = lib.device.get_cusolver_handle()
    getrf, getrs = getattr(cusolver, f"{prefix}getrf"), getattr(cusolver, f"{prefix}getrs")
    lwork = getattr(cusolver, f"{prefix}getrf_bufferSize")(handle, n, n, lu.data.ptr, n)
    work, dinfo = xp.empty(max(1, lwork), lu.dtype), xp.empty(1, xp.int32)
    a_step, b_step, p_step = n * n * lu.itemsize, n * k * rhs.itemsize, n * piv.itemsize
    for i in range(count):  # the codes come from U's diagonal afterwards
        a_i, p_i = lu.data.ptr + i * a_step, piv.data.ptr + i * p_step
        getrf(handle, n, n, a_i, n, work.data.ptr, p_i, dinfo.data.ptr)
        getrs(handle, 0, n, k, a_i, n, p_i, rhs.data.ptr + i * b_step, n, dinfo.data.ptr)


@_kernel("_linalg_solve_ex")
def solve(lib: Any, outs: list, ins: list) -> None:
    (x, info), (a, b) = outs, ins
    if a.size == 0 or b.size == 0:
        x[...] = 0
        info[...] = 0
        return
    if _small_real(lib, a):
        batched.solve(a, b, x, info)
        return
    if _on_host(lib):
        if not _large(a):
            try:
                x[...] = np.linalg.solve(a, b)
                info[...] = 0
                return
            except np.linalg.LinAlgError:
                pass
        # LU of A^T (A's transpose view is Fortran-ordered: no copy), then A x = b as
        # (A^T)^T x = b (trans=1, a plain transpose for complex too).
        getrf, getrs = _lapack("getrf", a), _lapack("getrs", a)
        for i in np.ndindex(*a.shape[:-2]):
            lu, piv, code = getrf(a[i].T)
            with np.errstate(all="ignore"):
                x[i] = getrs(lu, piv, b[i], trans=1)[0]
            info[i] = code
        return
    xs, codes = _lu_solve_cuda(lib, a, b)
    x[...] = lib.xp.swapaxes(xs, -1, -2).reshape(x.shape)
    info[...] = codes.reshape(info.shape)


@_kernel("_linalg_inv_ex")
def inv(lib: Any, outs: list, ins: list) -> None:
    (ainv, info), (a,) = outs, ins
    if a.size == 0:
        info[...] = 0
        return
    if _on_host(lib):
        if not _large(a):
            try:
                ainv[...] = np.linalg.inv(a)
                info[...] = 0
                return
            except np.linalg.LinAlgError:
                pass
        getrf, getri = _lapack("getrf", a), _lapack("getri", a)
        for i in np.ndindex(*a.shape[:-2]):
            lu, piv, code = getrf(a[i])
            info[i] = code
            with np.errstate(all="ignore"):
                ainv[i] = getri(lu, piv)[0] if code == 0 else _singular_inverse(lu, piv)
        return
    inverse, codes = _lu_solve_cuda(lib, a, None)
    ainv[...] = lib.xp.swapaxes(inverse, -1, -2).reshape(ainv.shape)
    info[...] = codes.reshape(info.shape)


def _singular_inverse(lu: np.ndarray, piv: np.ndarray) -> np.ndarray:
    # getri refuses a zero pivot; PyTorch's result there is getrs' inf/nan, so solve with I.
    getrs = _lapack("getrs", lu)
    with np.errstate(all="ignore"):
        return getrs(lu, piv, np.eye(lu.shape[0], dtype=lu.dtype))[0]


@_kernel("_linalg_det")
def det(lib: Any, outs: list, ins: list) -> None:
    (d,), (a,) = outs, ins
    d[...] = lib.linalg.det(a) if a.shape[-1] else 1


@_kernel("_linalg_slogdet")
def slogdet(lib: Any, outs: list, ins: list) -> None:
    (sign, logabs), (a,) = outs, ins
    if a.shape[-1] == 0:
        sign[...] = 1
        logabs[...] = 0
        return
    s, l_ = lib.linalg.slogdet(a)
    sign[...] = s
    logabs[...] = l_


@_kernel("_linalg_lu_factor_ex")
def lu_factor(lib: Any, outs: list, ins: list) -> None:
    """Partial-pivoting LU (getrf) of (possibly rectangular) matrices; LAPACK's 1-based
    pivots, as PyTorch returns them."""
    (lu, piv, info), (a,) = outs, ins
    xp = lib.xp
    k = min(a.shape[-2:])
    if a.size == 0:
        info[...] = 0
        if piv.size:
            piv[...] = xp.arange(1, k + 1, dtype=piv.dtype)
        return
    if _on_host(lib):
        getrf = _lapack("getrf", a)
        for i in np.ndindex(*a.shape[:-2]):
            lu[i], p, info[i] = getrf(a[i])
            piv[i] = p + 1
        return
    lu_factor = lib.scipy_linalg.lu_factor
    for i in np.ndindex(*a.shape[:-2]):
        lu[i], p = lu_factor(a[i], check_finite=False)
        piv[i] = p[:k] + 1
    d = _diag(lu, xp)
    info[...] = _first_failure(d == 0, xp)


# -- Cholesky ---------------------------------------------------------------------------------
@_kernel("_linalg_cholesky_ex")
def cholesky(lib: Any, outs: list, ins: list, upper: bool) -> None:
    (factor, info), (a,) = outs, ins
    if a.size == 0:
        info[...] = 0
        return
    if _small_real(lib, a):
        batched.cholesky(a, factor, info, upper)
        return
    xp = lib.xp
    if _on_host(lib):
        if not _large(a):
            try:
                lower = np.linalg.cholesky(a)
                info[...] = 0
                factor[...] = np.conj(np.swapaxes(lower, -1, -2)) if upper else lower
                return
            except np.linalg.LinAlgError:
                pass
        # The transpose of a C-ordered matrix is Fortran-ordered (no copy for LAPACK):
        # potrf of A^T's upper triangle (A's lower one) gives U with L = U^T (and L^H = conj(U)).
        potrf = _lapack("potrf", a)
        for i in np.ndindex(*a.shape[:-2]):
            c, code = potrf(a[i].T, lower=False, clean=True)
            factor[i] = np.conj(c) if upper else c.T
            info[i] = code
        return
    lower = lib.linalg.cholesky(a)
    d = _diag(lower, xp)
    info[...] = _first_failure(~(xp.isfinite(d) & (d.real > 0)), xp)
    factor[...] = xp.conj(xp.swapaxes(lower, -1, -2)) if upper else lower


# -- symmetric eigensolver, SVD, QR -------------------------------------------------------------
@_kernel("_linalg_eigh")
def eigh(lib: Any, outs: list, ins: list, uplo: str) -> None:
    (w, v), (a,) = outs, ins
    if a.size == 0:
        return
    if _small_real(lib, a):
        if batched.eigh(a, w, v, uplo == "L").any():  # NumPy's exception, as on the path below
            raise np.linalg.LinAlgError("Eigenvalues did not converge")
        return
    if _on_host(lib) and _large(a):
        from scipy.linalg import eigh as sp_eigh
        for i in np.ndindex(*a.shape[:-2]):
            if v is None:
                w[i] = sp_eigh(a[i], lower=uplo == "L", eigvals_only=True, driver="evd",
                               check_finite=False)
            else:
                w[i], v[i] = sp_eigh(a[i], lower=uplo == "L", driver="evd", check_finite=False)
        return
    if v is None:
        w[...] = lib.linalg.eigvalsh(a, UPLO=uplo)
    else:
        w[...], v[...] = lib.linalg.eigh(a, UPLO=uplo)


@_kernel("_linalg_eig")
def eig(lib: Any, outs: list, ins: list) -> None:
    (w, v), (a,) = outs, ins
    if a.size == 0:
        return
    if v is None:
        w[...] = lib.linalg.eigvals(a)
    else:
        w[...], v[...] = lib.linalg.eig(a)


@_kernel("_linalg_svd")
def svd(lib: Any, outs: list, ins: list, full_matrices: bool) -> None:
    (u, s, vh), (a,) = outs, ins
    if a.size == 0:  # LAPACK has nothing to do: identity bases, no singular values
        xp = lib.xp
        for q in (u, vh):
            if q is not None and q.size:
                q[...] = xp.eye(q.shape[-2], q.shape[-1], dtype=q.dtype)
        return
    if _small_real(lib, a):
        if batched.svd(a, u, s, vh, full_matrices).any():  # NumPy's exception, as below
            raise np.linalg.LinAlgError("SVD did not converge")
        return
    if _on_host(lib) and _large(a):
        from scipy.linalg import svd as sp_svd
        for i in np.ndindex(*a.shape[:-2]):
            if u is None:
                s[i] = sp_svd(a[i], compute_uv=False, check_finite=False)
            else:
                u[i], s[i], vh[i] = sp_svd(a[i], full_matrices=full_matrices,
                                           check_finite=False)
        return
    if u is None:
        s[...] = lib.linalg.svd(a, compute_uv=False)
    else:
        u[...], s[...], vh[...] = lib.linalg.svd(a, full_matrices=full_matrices)


@_kernel("_linalg_qr")
def qr(lib: Any, outs: list, ins: list, mode: str) -> None:
    (q, r), (a,) = outs, ins
    a = positive_zeros(a)
    if a.size == 0:
        if q is not None and q.size:
            q[...] = lib.xp.eye(q.shape[-2], q.shape[-1], dtype=q.dtype)
        if r.size:
            r[...] = 0
        return
    if _small_real(lib, a):
        batched.qr(a, q, r)
        return
    if _on_host(lib) and _large(a):
        from scipy.linalg import qr as sp_qr
        sp_mode = {"reduced": "economic", "complete": "full", "r": "r"}[mode]
        for i in np.ndindex(*a.shape[:-2]):
            res = sp_qr(a[i], mode=sp_mode, check_finite=False)
            if q is None:
                r[i] = res[0][:r.shape[-2]]
            else:
                q[i], r[i] = res
        return
    if q is None:
        r[...] = lib.linalg.qr(a, mode="r")
    else:
        q[...], r[...] = lib.linalg.qr(a, mode=mode)


# -- triangular solve, matrix exponential -------------------------------------------------------
@_kernel("_linalg_solve_triangular")
def solve_triangular(lib: Any, outs: list, ins: list, upper: bool, left: bool,
                     unitriangular: bool) -> None:
    """BLAS trsm per matrix (no singularity check: a zero diagonal gives inf/nan, as PyTorch)."""
    (x,), (a, b) = outs, ins
    if x.size == 0:
        return
    if _on_host(lib):
        from scipy.linalg import get_blas_funcs
        trsm = get_blas_funcs(("trsm",), (a, b))[0]
        with np.errstate(all="ignore"):
            for i in np.ndindex(*x.shape[:-2]):
                x[i] = trsm(1.0, a[i], b[i], side=0 if left else 1, lower=not upper,
                            diag=int(unitriangular))
        return
    solve_t = lib.scipy_linalg.solve_triangular
    for i in np.ndindex(*x.shape[:-2]):
        if left:
            x[i] = solve_t(a[i], b[i], lower=not upper, unit_diagonal=unitriangular)
        else:  # X A = B  <=>  A^T X^T = B^T
            x[i] = solve_t(a[i], b[i].T, trans=1, lower=not upper,
                           unit_diagonal=unitriangular).T


@_kernel("_linalg_matrix_exp")
def matrix_exp(lib: Any, outs: list, ins: list) -> None:
    (e,), (a,) = outs, ins
    if a.size == 0:
        return
    expm = lib.scipy_linalg.expm
    if _on_host(lib) or a.ndim == 2:
        e[...] = expm(a)
        return
    for i in np.ndindex(*a.shape[:-2]):
        e[i] = expm(a[i])


# -- LDL^T (Bunch-Kaufman) ----------------------------------------------------------------------
# LAPACK's sytrf/hetrf on the lower triangle, as PyTorch calls it: the factor's strictly lower
# part is L (unit diagonal implied), its diagonal and first subdiagonal hold the 1x1 and 2x2
# blocks of D, and the pivots are LAPACK's (1-based; a 2x2 block has both entries negative).
# cuSOLVER's sytrf writes the same format; cuSOLVER has no hermitian variant (the frontend
# refuses hermitian complex input on CUDA, as PyTorch does) and CuPy binds no sytrs, so the
# solve runs sytrs's two sweeps as array operations there.
_CUSOLVER_LOWER = 0  # cublasFillMode_t CUBLAS_FILL_MODE_LOWER


@_kernel("_linalg_ldl_factor_ex")
def ldl_factor(lib: Any, outs: list, ins: list, hermitian: bool) -> None:
    (ld, piv, info), (a,) = outs, ins
    if a.size == 0:
        info[...] = 0
        return
    if _on_host(lib):
        # A C-ordered matrix is its transpose in Fortran order; for a symmetric (hermitian)
        # input, the lower triangle of A^T (A^H) is the upper triangle of A (conjugated).
        sytrf = _lapack("hetrf" if hermitian and a.dtype.kind == "c" else "sytrf", a)
        for i in np.ndindex(*a.shape[:-2]):
            f, p, info[i] = sytrf(np.asfortranarray(a[i]), lower=1)
            ld[i], piv[i] = np.tril(f), p
        return
    _ldl_factor_cusolver(lib, ld, piv, info, a)


def _ldl_factor_cusolver(lib: Any, ld: Any, piv: Any, info: Any, a: Any) -> None:
    xp, solver = lib.xp, lib.cusolver
    prefix = BLAS_PREFIX[a.dtype.name]
    handle = lib.device.get_cusolver_handle()
    n = a.shape[-1]
    for i in np.ndindex(*a.shape[:-2]):
        f = xp.asfortranarray(a[i])  # a copy: cuSOLVER factors in place, column-major
        lwork = getattr(solver, f"{prefix}sytrf_bufferSize")(handle, n, f.data.ptr, n)
        work = xp.empty(max(lwork, 1), a.dtype)
        p = xp.empty(n, xp.int32)
        code = xp.empty((), xp.int32)
        getattr(solver, f"{prefix}sytrf")(handle, _CUSOLVER_LOWER, n, f.data.ptr, n,
                                          p.data.ptr, work.data.ptr, lwork, code.data.ptr)
        # LAPACK's info > 0 names the FIRST exactly zero 1x1 pivot of D; cuSOLVER's may name
        # another (2 for a zero 2x2 matrix on an H200, LAPACK 1): take the first, on the device
        zero = (xp.diagonal(f) == 0) & (p > 0)
        first = xp.where(zero.any(), xp.argmax(zero) + 1, 0).astype(xp.int32)
        ld[i], piv[i] = xp.tril(f), p
        info[i] = xp.where((code > 0) & (first > 0), first, code)


@_kernel("_linalg_ldl_solve")
def ldl_solve(lib: Any, outs: list, ins: list, hermitian: bool) -> None:
    (x,), (ld, piv, b) = outs, ins
    if x.size == 0:
        return
    hermitian = hermitian and ld.dtype.kind == "c"
    if _on_host(lib):
        sytrs = _lapack("hetrs" if hermitian else "sytrs", ld)
        for i in np.ndindex(*x.shape[:-2]):
            x[i], _ = sytrs(np.asfortranarray(ld[i]), piv[i], b[i], lower=1)
        return
    pivots = lib.xp.asnumpy(piv)  # the sweeps branch on the pivots: one host read
    for i in np.ndindex(*x.shape[:-2]):
        x[i] = _sytrs_lower(lib.xp, ld[i], pivots[i], b[i])


def _sytrs_lower(xp: Any, ld: Any, piv: np.ndarray, b: Any) -> Any:
    """LAPACK's sytrs (uplo L) as array operations: solve L D L^T X = P B, then undo P."""
    x = b.copy()
    n, k = ld.shape[-1], 0
    while k < n:  # forward: L D y = P b, one 1x1 or 2x2 block of D at a time
        if piv[k] > 0:
            _swap_rows(x, k, piv[k] - 1)
            x[k + 1:] -= ld[k + 1:, k, None] * x[k]
            x[k] /= ld[k, k]
            k += 1
        else:
            _swap_rows(x, k + 1, -piv[k] - 1)
            x[k + 2:] -= ld[k + 2:, k, None] * x[k] + ld[k + 2:, k + 1, None] * x[k + 1]
            d11, d21, d22 = ld[k, k], ld[k + 1, k], ld[k + 1, k + 1]
            det = d11 * d22 - d21 * d21
            y0 = (d22 * x[k] - d21 * x[k + 1]) / det
            x[k + 1] = (d11 * x[k + 1] - d21 * x[k]) / det
            x[k] = y0
            k += 2
    k = n - 1
    while k >= 0:  # backward: L^T x = y, then the rows swapped back
        if piv[k] > 0:
            x[k] -= ld[k + 1:, k] @ x[k + 1:]
            _swap_rows(x, k, piv[k] - 1)
            k -= 1
        else:
            x[k] -= ld[k + 1:, k] @ x[k + 1:]
            x[k - 1] -= ld[k + 1:, k - 1] @ x[k + 1:]
            _swap_rows(x, k, -piv[k] - 1)
            k -= 2
    return x


def _swap_rows(x: Any, i: int, j: int) -> None:
    if i != j:
        x[[i, j]] = x[[j, i]]


# -- CPU registration --------------------------------------------------------------------------
def _host(t: Tensor | None) -> np.ndarray | None:
    return None if t is None else t._host


def _register_cpu(name: str, fn: Callable) -> None:
    from gputensor.kernels.cuda.runtime import HOST_LIBRARY

    @CPU.register(name)
    def run(outs: tuple, ins: tuple, params: tuple) -> None:
        fn(HOST_LIBRARY, [_host(t) for t in outs], [_host(t) for t in ins], *params)


for _name, _fn in KERNELS.items():
    _register_cpu(_name, _fn)

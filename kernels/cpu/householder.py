"""Householder QR kernels: ``_linalg_geqrf`` (LAPACK's geqrf: R above the diagonal, the
reflectors' vectors below it, and their scalars tau) and ``_linalg_ormqr`` (LAPACK's
ormqr/unmqr: Q, Q^T or Q^H of those reflectors times a matrix, from the left or the right).

Written once over the array library like kernels/cpu/lapack.py: on the host (the CPU, and the
CUDA emulator's memory) SciPy's LAPACK wrappers, one matrix at a time; on CuPy cuSOLVER's
geqrf / ormqr / unmqr through the raw bindings (``lib.cusolver``, the handle from
``lib.device``), column-major copies factored in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .lapack import BLAS_PREFIX, _lapack, _on_host, _register_cpu, positive_zeros

KERNELS: dict[str, Callable[..., None]] = {}

_BLOCK = 64  # workspace columns per row of C for ormqr's blocked algorithm


def _kernel(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        KERNELS[name] = fn
        return fn
    return deco


@_kernel("_linalg_geqrf")
def geqrf(lib: Any, outs: list, ins: list) -> None:
    (qr, tau), (a,) = outs, ins
    if a.size == 0:
        return
    a = positive_zeros(a)
    if _on_host(lib):
        fn = _lapack("geqrf", a)
        for i in np.ndindex(*a.shape[:-2]):
            qr[i], tau[i], _, _ = fn(a[i])
        return
    xp, solver = lib.xp, lib.cusolver
    prefix, handle = BLAS_PREFIX[a.dtype.name], lib.device.get_cusolver_handle()
    m, n = a.shape[-2:]
    for i in np.ndindex(*a.shape[:-2]):
        f = a[i].copy(order="F")  # cuSOLVER factors in place, column-major
        t = xp.empty(min(m, n), a.dtype)
        lwork = getattr(solver, f"{prefix}geqrf_bufferSize")(handle, m, n, f.data.ptr, m)
        work = xp.empty(max(lwork, 1), a.dtype)
        code = xp.empty((), xp.int32)
        getattr(solver, f"{prefix}geqrf")(handle, m, n, f.data.ptr, m, t.data.ptr,
                                          work.data.ptr, lwork, code.data.ptr)
        qr[i], tau[i] = f, t


@_kernel("_linalg_ormqr")
def ormqr(lib: Any, outs: list, ins: list, left: bool, transpose: bool) -> None:
    """``out = op(Q) C`` (left) or ``C op(Q)``, op the (conjugate) transpose or nothing; Q is
    the product of the k = tau.shape[-1] reflectors stored in a's first k columns."""
    (out,), (a, tau, c) = outs, ins
    if c.size == 0:
        return
    k = tau.shape[-1]
    if k == 0:  # no reflectors: Q = I
        out[...] = c
        return
    cplx = a.dtype.kind == "c"
    if _on_host(lib):
        fn = _lapack("unmqr" if cplx else "ormqr", a)
        side, trans = "L" if left else "R", ("C" if cplx else "T") if transpose else "N"
        lwork = max(1, c.shape[-1] if left else c.shape[-2]) * _BLOCK
        for i in np.ndindex(*c.shape[:-2]):
            out[i], _, _ = fn(side, trans, a[i][:, :k], tau[i], c[i], lwork)
        return
    xp, solver = lib.xp, lib.cusolver
    name = f"{BLAS_PREFIX[a.dtype.name]}{'unmqr' if cplx else 'ormqr'}"
    handle = lib.device.get_cusolver_handle()
    side = 0 if left else 1  # cublasSideMode_t
    trans = (2 if cplx else 1) if transpose else 0  # cublasOperation_t: N, T, C
    m, n = c.shape[-2:]
    lda = a.shape[-2]
    for i in np.ndindex(*c.shape[:-2]):
        v = a[i][:, :k].copy(order="F")
        t = xp.ascontiguousarray(tau[i])
        f = c[i].copy(order="F")  # overwritten with the product
        lwork = getattr(solver, f"{name}_bufferSize")(handle, side, trans, m, n, k, v.data.ptr,
                                                       lda, t.data.ptr, f.data.ptr, m)
        work = xp.empty(max(lwork, 1), a.dtype)
        code = xp.empty((), xp.int32)
        getattr(solver, name)(handle, side, trans, m, n, k, v.data.ptr, lda, t.data.ptr,
                              f.data.ptr, m, work.data.ptr, lwork, code.data.ptr)
        out[i] = f


for _name, _fn in KERNELS.items():
    _register_cpu(_name, _fn)

"""kernels/cuda/ops/lapack_batched.py: its kernels (lapack.cu) on the emulator, and its
cuSOLVER/cuBLAS calls against the stand-in cupy (the layouts that make them right: UPPER on
the row-major copy for Cholesky, op T for solve, op N straight into the output for inverse)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda.ops import lapack_batched as LB

from . import fake_cupy

needs_cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="needs the CUDA emulator")
DTYPES = [gt.float32, gt.float64, gt.complex64, gt.complex128]


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_eye_writes_an_identity_per_matrix(dtype) -> None:
    from gputensor.kernels.cuda.device import grid_for, launch

    out = gt.full((3, 5, 5), 7.0, dtype=dtype, device="cuda")
    launch(LB.SRC, f"lapack_eye_{LB._TYPES[dtype][0]}", grid_for(out.numel()), 256,
           [out, np.int32(5), np.int64(out.numel())])
    np.testing.assert_array_equal(out.cpu().numpy(), np.broadcast_to(np.eye(5), (3, 5, 5)))


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_chol_finish_zeroes_the_upper_triangle_and_reads_info_off_the_diagonal(dtype) -> None:
    from gputensor.kernels.cuda.device import grid_for, launch

    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, (5, 4, 4)).astype(dtype.np_dtype)
    a[1, 2, 2] = 0.0          # a zero pivot: minor 3 fails
    a[2, 0, 0] = -1.0         # the first one
    a[3, 3, 3] = np.nan       # NaN is a failure too
    a[4, 1, 1] = np.inf
    factor = gt.tensor(a, device="cuda")
    info = gt.full((5,), 99, dtype=gt.int32, device="cuda")
    launch(LB.SRC, f"lapack_chol_finish_{LB._TYPES[dtype][0]}", grid_for(factor.numel()), 256,
           [factor, info, np.int32(4), np.int64(factor.numel())])
    np.testing.assert_array_equal(factor.cpu().numpy(), np.tril(a))
    assert info.cpu().tolist() == [0, 3, 1, 4, 2]


# ---- the library calls, against the stand-in cupy ----------------------------------------------
@pytest.fixture
def fake_gpu(monkeypatch):
    """A CupyRuntime over the stand-in cupy as the active CUDA runtime, with logging batched
    cuSOLVER/cuBLAS routines (launches of the project's kernels are logged, not run)."""
    from gputensor.kernels.cuda import device, nvrtc
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime
    from gputensor.kernels.cuda.storage_driver import RuntimeStorageDriver
    from gputensor.storage import allocator

    cp = fake_cupy.install(monkeypatch)
    rt = CupyRuntime()
    monkeypatch.setitem(allocator.DRIVERS, "cuda", RuntimeStorageDriver(rt))
    monkeypatch.setattr(device, "_runtime", rt)
    monkeypatch.setattr(device, "_CONSTANTS", {})
    calls: list = []

    def logger(name):
        def call(*args):
            calls.append((name, *args))
        return call

    cusolver = types.SimpleNamespace(**{f"{p}potrfBatched": logger(f"{p}potrfBatched")
                                        for p in "sdcz"})
    for p in "sdcz":
        for r in ("getrfBatched", "getrsBatched"):
            monkeypatch.setattr(cp.cublas_module, p + r, logger(p + r), raising=False)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cusolver", cusolver)
    monkeypatch.setitem(sys.modules, "cupy.cuda.device", types.SimpleNamespace(
        get_cusolver_handle=lambda: 11, get_cublas_handle=lambda: 22))
    yield rt, cp, calls
    nvrtc.prefer_major(None)


def _pointers(rt, address: int, count: int) -> list[int]:
    out = np.empty(count, np.uint64)
    rt.memcpy_dtoh(out, address)
    return out.tolist()


def _new(shape, dtype=gt.float32):
    from gputensor.kernels.allocation import empty

    return empty(shape, dtype, gt.device("cuda"))


def _addr(t) -> int:
    from gputensor.kernels.cuda.device import ptr

    return int(ptr(t))


def test_cholesky_is_one_potrf_batched_upper_on_the_output(fake_gpu, monkeypatch) -> None:
    rt, cp, calls = fake_gpu
    launched = []
    monkeypatch.setattr(LB, "launch", lambda src, name, *a: launched.append(name))
    monkeypatch.setattr(LB, "copy_into", lambda dst, src: launched.append(("copy", dst, src)))
    a, factor, info = _new((3, 8, 8)), _new((3, 8, 8)), _new((3,), gt.int32)
    assert LB.cholesky((factor, info), (a,), False)
    assert launched[0] == ("copy", factor, a) and launched[1] == "lapack_chol_finish_f32"
    (name, handle, uplo, n, ptrs, lda, info_ptr, count), = calls
    assert (name, handle, uplo, n, lda, info_ptr, count) == ("spotrfBatched", 11, 1, 8, 8,
                                                             _addr(info), 3)
    assert _pointers(rt, ptrs, 3) == [_addr(factor) + i * 256 for i in range(3)]
    assert not LB.cholesky((factor, info), (a,), True)  # declined: the upper factor
    assert len(calls) == 1


def test_large_cholesky_is_one_potrf_per_matrix(fake_gpu, monkeypatch) -> None:
    rt, cp, calls = fake_gpu
    monkeypatch.setattr(LB, "launch", lambda *a: None)
    monkeypatch.setattr(LB, "copy_into", lambda dst, src: None)
    monkeypatch.setattr(sys.modules["cupy_backends.cuda.libs.cusolver"], "dpotrf_bufferSize",
                        lambda *a: calls.append(("bufferSize", *a)) or 1000, raising=False)
    monkeypatch.setattr(sys.modules["cupy_backends.cuda.libs.cusolver"], "dpotrf",
                        lambda *a: calls.append(("dpotrf", *a)), raising=False)
    a, factor, info = _new((2, 70, 70), gt.float64), _new((2, 70, 70), gt.float64), \
        _new((2,), gt.int32)
    assert LB.cholesky((factor, info), (a,), False)
    size, *potrfs = calls
    assert size == ("bufferSize", 11, 1, 70, _addr(factor), 70)
    work = potrfs[0][6]
    assert potrfs == [("dpotrf", 11, 1, 70, _addr(factor) + i * 70 * 70 * 8, 70, work, 1000,
                       _addr(info) + 4 * i) for i in range(2)]


def test_solve_factors_the_row_major_copy_and_solves_with_op_t(fake_gpu, monkeypatch) -> None:
    rt, cp, calls = fake_gpu
    copies = []
    monkeypatch.setattr(LB, "copy_into", lambda dst, src: copies.append((dst, src)))
    a, b = _new((2, 4, 4), gt.float64), _new((2, 4, 3), gt.float64)
    x, info = _new((2, 4, 3), gt.float64), _new((2,), gt.int32)
    assert LB.solve((x, info), (a, b))
    (lu, a_src), (rhs, b_t), (x_dst, x_src) = copies
    assert a_src is a and lu._shape == (2, 4, 4) and lu.is_contiguous()
    assert rhs._shape == (2, 3, 4) and b_t._shape == (2, 3, 4) and b_t._stride == (12, 1, 3)
    assert x_dst is x and x_src._shape == (2, 4, 3) and x_src._storage is rhs._storage
    (f, h, n, a_ptrs, lda, piv, info_ptr, count), (s, h2, op, n2, k, a_ptrs2, lda2, piv2,
                                                   b_ptrs, ldb, status, count2) = calls
    assert (f, h, n, lda, info_ptr, count) == ("dgetrfBatched", 22, 4, 4, _addr(info), 2)
    assert (s, h2, op, n2, k, a_ptrs2, lda2, piv2, ldb, count2) == (
        "dgetrsBatched", 22, 1, 4, 3, a_ptrs, 4, piv, 4, 2)
    assert _pointers(rt, a_ptrs, 2) == [_addr(lu), _addr(lu) + 128]
    assert _pointers(rt, b_ptrs, 2) == [_addr(rhs), _addr(rhs) + 96]


def test_inverse_solves_with_op_n_straight_into_the_output(fake_gpu, monkeypatch) -> None:
    rt, cp, calls = fake_gpu
    launched = []
    monkeypatch.setattr(LB, "launch", lambda src, name, *a: launched.append((name, a[2][0])))
    monkeypatch.setattr(LB, "copy_into", lambda dst, src: None)
    a, ainv, info = _new((5, 6, 6), gt.complex64), _new((5, 6, 6), gt.complex64), \
        _new((5,), gt.int32)
    assert LB.inv((ainv, info), (a,))
    assert launched == [("lapack_eye_c64", ainv)]
    (f, *_), (s, h, op, n, k, a_ptrs, lda, piv, b_ptrs, ldb, status, count) = calls
    assert (f, s, op, n, k, ldb, count) == ("cgetrfBatched", "cgetrsBatched", 0, 6, 6, 6, 5)
    assert _pointers(rt, b_ptrs, 5) == [_addr(ainv) + i * 288 for i in range(5)]

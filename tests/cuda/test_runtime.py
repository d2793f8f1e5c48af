"""The device runtime: the emulator driver and the storage adapter (CuPy: test_cupy_driver.py)."""

from __future__ import annotations

import contextlib
import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda.emulator_driver import DEVICE_NAME, EmulatorRuntime, size_class
from gputensor.kernels.cuda.runtime import (
    AllocationTable,
    DeviceProperties,
    DevicePtr,
    OutOfMemoryError,
    missing_methods,
)
from gputensor.kernels.cuda.storage_driver import RuntimeStorageDriver
from gputensor.storage import STORAGE_TYPES, copy_table
from gputensor.storage.allocator import DRIVERS, LAZY_INIT, CPUDriver

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture
def rt() -> EmulatorRuntime:
    return EmulatorRuntime()


def _upload(rt, host: np.ndarray) -> DevicePtr:
    ptr = rt.alloc(host.nbytes)
    rt.memcpy_htod(ptr, host)
    return ptr


def _download(rt, ptr: int, like: np.ndarray) -> np.ndarray:
    out = np.empty_like(like)
    rt.memcpy_dtoh(out, ptr)
    return out


# -- emulator: memory and statistics -----------------------------------------------------------
def test_interface_is_complete(rt) -> None:
    assert missing_methods(rt) == []
    assert missing_methods(object()) != []


def test_alloc_free_stats_peak_and_empty_cache(rt) -> None:
    assert rt.memory_allocated() == rt.memory_reserved() == 0
    a = rt.alloc(100)
    b = rt.alloc(1000)
    assert isinstance(a, DevicePtr) and a != 0 and a % 256 == 0 and a != b
    assert isinstance(a + 8, DevicePtr) and isinstance(a + 8 - 4, DevicePtr)
    assert (a + 8) - a == 8 and type((a + 8) - a) is int
    assert rt.memory_allocated() == size_class(100) + size_class(1000) == 512 + 1024
    assert rt.max_memory_allocated() == 1536 and rt.memory_reserved() == 1536
    rt.free(a)
    assert rt.memory_allocated() == 1024 and rt.memory_reserved() == 1536  # a is cached
    c = rt.alloc(300)  # same size class as a: the cached block comes back
    assert c == a and rt.memory_reserved() == 1536
    rt.free(c)
    rt.reset_peak_memory_stats()
    assert rt.max_memory_allocated() == 1024
    rt.empty_cache()
    assert rt.memory_reserved() == rt.memory_allocated() == 1024
    rt.free(b)
    assert rt.memory_allocated() == 0 and rt.max_memory_allocated() == 1024
    assert rt.alloc(0) == 0
    rt.free(0)  # freeing null is a no-op, as in CUDA
    with pytest.raises(ValueError, match="negative"):
        rt.alloc(-1)


def test_bad_frees_and_illegal_addresses(rt) -> None:
    p = rt.alloc(64)
    with pytest.raises(ValueError, match="not the start of a live"):
        rt.free(p + 8)
    rt.free(p)
    with pytest.raises(ValueError, match="double free .*64-byte allocation was already freed"):
        rt.free(p)
    with pytest.raises(IndexError, match="illegal device address .*use after free"):
        rt.memcpy_dtoh(np.empty(4, np.uint8), p)  # stale pointer
    q = rt.alloc(64)
    with pytest.raises(IndexError, match="overruns its allocation of 64 bytes"):
        rt.memcpy_htod(q + 60, np.zeros(8, np.uint8))
    with pytest.raises(IndexError, match="illegal device address"):
        rt.memcpy_htod(DevicePtr(12345), np.zeros(1, np.uint8))


def test_allocation_table_reuses_the_slot_of_a_freed_base() -> None:
    """Pools hand the same addresses out again: re-adding a freed base must not use up a new
    dict slot, or every few thousand frees the whole table is rebuilt (a host allocation the
    profiler's memory meter reads as memory the program kept)."""
    table = AllocationTable()
    for base in range(0, 5000 * 4096, 4096):
        table.add(base, 64, object())
    entries = table.by_base
    size = sys.getsizeof(entries)
    for _ in range(20_000):  # > the ~5,700 free slots a 5,000-entry dict has left
        owner = table.pop(0)[1]
        table.add(0, 64, owner)
    assert sys.getsizeof(entries) == size and len(table) == 5000


def test_allocation_table_retires_freed_bases() -> None:
    table = AllocationTable()
    table.add(4096, 1024, "a")
    assert table.pop(4096) == (1024, "a")
    assert 4096 not in table and len(table) == 0
    with pytest.raises(IndexError, match="use after free, inside the freed 1024-byte"):
        table.lookup(4096 + 100, 4)
    # A pool may merge freed blocks into a bigger one: a retired base inside a live block
    # does not hide it.
    table.add(0, 8192, "merged")
    assert table.lookup(4096 + 100, 4) == (0, "merged", 4196)
    with pytest.raises(ValueError, match="handed out twice"):
        table.add(0, 64, "again")
    table.RETIRED_LIMIT = 3
    for base in range(10_000, 10_005):
        table.add(base, 1, base)
        table.pop(base)
    assert len(table.by_base) <= 1 + 3  # retired bases beyond the limit were dropped
    assert table.lookup(0, 8) == (0, "merged", 0)


def test_out_of_memory_frees_cache_then_raises() -> None:
    rt = EmulatorRuntime(memory_limit=4096)
    p = rt.alloc(2048)
    rt.free(p)
    assert rt.memory_reserved() == 2048
    big = rt.alloc(4096)  # only fits once the cached 2048-byte block is released
    assert rt.memory_reserved() == 4096 and rt.memory_allocated() == 4096
    with pytest.raises(OutOfMemoryError, match=r"tried to allocate 100 bytes .*4096 bytes in use"):
        rt.alloc(100)
    rt.free(big)
    assert rt.alloc(100) != 0  # the failed request left the allocator usable


def test_device_properties(rt) -> None:
    props = rt.properties()
    assert isinstance(props, DeviceProperties)
    assert props.name == DEVICE_NAME and rt.device_count() == 1
    assert props.total_memory == rt.memory_limit and props.multi_processor_count >= 1
    assert props.compute_capability == (8, 0)
    with pytest.raises(ValueError, match="invalid CUDA device index 1"):
        rt.properties(1)


# -- emulator: copies, streams and events ------------------------------------------------------
def test_htod_dtoh_dtod_round_trips_with_offsets(rt) -> None:
    host = np.arange(64, dtype=np.float32)
    d = _upload(rt, host)
    np.testing.assert_array_equal(_download(rt, d, host), host)
    part = np.empty(8, np.float32)
    rt.memcpy_dtoh(part, d + 16 * 4)
    np.testing.assert_array_equal(part, host[16:24])
    rt.memcpy_htod(d + 4 * 4, np.full(3, -1.0, np.float32))
    expected = host.copy()
    expected[4:7] = -1
    np.testing.assert_array_equal(_download(rt, d, host), expected)
    e = rt.alloc(host.nbytes)
    rt.memcpy_dtod(e, d, host.nbytes)
    rt.memcpy_dtod(e + 8, d + 40, 12)  # offsets on both sides
    expected2 = expected.copy()
    expected2[2:5] = expected[10:13]
    np.testing.assert_array_equal(_download(rt, e, host), expected2)
    rt.memcpy_dtod(d + 4, d, 16)  # overlapping copy inside one block behaves like memmove
    expected[1:5] = expected[0:4].copy()
    np.testing.assert_array_equal(_download(rt, d, host), expected)


def test_async_copies_on_streams_with_events(rt) -> None:
    s1, s2 = rt.create_stream(), rt.create_stream()
    start, mid, end = rt.create_event(), rt.create_event(), rt.create_event()
    host = rt.alloc_host(4096)
    host[:] = np.arange(4096) % 251
    d = rt.alloc(4096)
    start.record(s1)
    rt.memcpy_htod(d, host, stream=s1)
    mid.record(s1)
    out = rt.alloc_host(4096)
    rt.memcpy_dtoh(out, d, stream=s2)
    end.record(s2)
    s1.synchronize()
    end.synchronize()
    s2.synchronize()
    rt.synchronize()
    np.testing.assert_array_equal(out, host)
    assert 0 <= rt.elapsed_time(start, mid) <= rt.elapsed_time(start, end)
    with pytest.raises(RuntimeError, match="must be recorded"):
        rt.elapsed_time(start, rt.create_event())
    with pytest.raises(RuntimeError, match="never recorded"):
        rt.create_event().synchronize()


# -- emulator: kernels and gemm ----------------------------------------------------------------
@pytest.fixture(scope="module")
def vector_add():
    rt = EmulatorRuntime()
    return rt, rt.compile((KERNELS / "vector_add.cu").read_text(), "vector_add",
                          options=("-DUNUSED=1", "--use_fast_math"))


def test_launch_on_device_pointers(vector_add) -> None:
    rt, mod = vector_add
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    dx, dy, dout = _upload(rt, x), _upload(rt, y), rt.alloc(x.nbytes)
    add = rt.get_kernel(mod, "add")
    stream = rt.create_stream()
    rt.launch(add, grid=4, block=128, shared_bytes=0, args=[dx, dy, dout, np.int64(n)],
              stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(_download(rt, dout, x), x + y)
    # Pointers with offsets reach the kernel as views of the rest of the block.
    rt.launch(add, (1,), (64,), 0, [dx + 4 * 10, dy, dout + 4 * 500, np.int64(20)])
    got = _download(rt, dout, x)
    np.testing.assert_array_equal(got[500:520], x[10:30] + y[:20])
    axpy = rt.get_kernel(mod, "axpy_inplace")
    rt.launch(axpy, 8, 128, 0, [np.float32(2.0), dx, dy, np.int32(n)])
    np.testing.assert_allclose(_download(rt, dy, y), y + 2 * x, rtol=1e-6)


def test_launch_errors(vector_add) -> None:
    rt, mod = vector_add
    add = rt.get_kernel(mod, "add")
    d = rt.alloc(16)
    with pytest.raises(TypeError, match="expected a DevicePtr"):
        rt.launch(add, 1, 1, 0, [np.zeros(4, np.float32), d, d, np.int64(4)])
    with pytest.raises(TypeError, match="takes 4 arguments"):
        rt.launch(add, 1, 1, 0, [d, d])
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        rt.get_kernel(mod, "nope")
    rt.free(d)
    with pytest.raises(IndexError, match="illegal device address"):
        rt.launch(add, 1, 1, 0, [d, d, d, np.int64(1)])


def _colmajor_buffer(mat: np.ndarray, ld: int) -> np.ndarray:
    """``mat`` stored column-major with leading dimension ``ld`` (padding rows are NaN)."""
    rows, cols = mat.shape
    buf = np.full(ld * cols, np.nan, mat.dtype)
    buf.reshape(cols, ld)[:, :rows] = mat.T
    return buf


@pytest.mark.parametrize("transa,transb", [("N", "N"), ("T", "N"), ("N", "T"), ("T", "T")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_matches_numpy(rt, transa: str, transb: str, dtype) -> None:
    rng = np.random.default_rng(3)
    m, n, k = 5, 4, 3
    opa = rng.standard_normal((m, k)).astype(dtype)
    opb = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    a_st = opa if transa == "N" else opa.T.copy()
    b_st = opb if transb == "N" else opb.T.copy()
    lda, ldb, ldc = a_st.shape[0] + 2, b_st.shape[0] + 1, m + 3
    da = _upload(rt, _colmajor_buffer(a_st, lda))
    db = _upload(rt, _colmajor_buffer(b_st, ldb))
    cbuf = _colmajor_buffer(c0, ldc)
    dc = _upload(rt, cbuf)
    rt.gemm(transa, transb, m, n, k, 1.5, da, lda, db, ldb, 0.5, dc, ldc, dtype)
    got = _download(rt, dc, cbuf).reshape(n, ldc)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[:, :m].T, 1.5 * opa @ opb + 0.5 * c0, rtol=tol, atol=tol)
    assert np.isnan(got[:, m:]).all()  # padding rows of C untouched


def test_gemm_beta_zero_ignores_nan_c_conj_and_row_major_trick(rt) -> None:
    rng = np.random.default_rng(4)
    # Row-major out(2x3) = x(2x4) @ w(4x3) is column-major out^T = w^T @ x^T: swap operands.
    x = rng.standard_normal((2, 4))
    w = rng.standard_normal((4, 3))
    dx, dw = _upload(rt, x), _upload(rt, w)
    dout = _upload(rt, np.full((2, 3), np.nan))
    rt.gemm("N", "N", 3, 2, 4, 1.0, dw, 3, dx, 4, 0.0, dout, 3, np.float64)
    np.testing.assert_allclose(_download(rt, dout, np.empty((2, 3))), x @ w, rtol=1e-12)
    a = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(np.complex128)
    da = _upload(rt, _colmajor_buffer(a, 3))
    dc = rt.alloc(4 * 16)
    rt.gemm("C", "N", 2, 2, 3, 1.0, da, 3, da, 3, 0.0, dc, 2, np.complex128)
    got = _download(rt, dc, np.empty(4, np.complex128)).reshape(2, 2).T
    np.testing.assert_allclose(got, a.conj().T @ a, rtol=1e-12)


def test_gemm_errors(rt) -> None:
    d = rt.alloc(16 * 4)
    with pytest.raises(ValueError, match="transpose flag"):
        rt.gemm("X", "N", 2, 2, 2, 1.0, d, 2, d, 2, 0.0, d, 2, np.float32)
    with pytest.raises(ValueError, match="smaller than its 4 rows"):
        rt.gemm("N", "N", 2, 2, 4, 1.0, d, 2, d, 2, 0.0, d, 2, np.float32)  # ldb=2 < k=4
    with pytest.raises(IndexError, match="overruns"):
        rt.gemm("N", "N", 8, 8, 8, 1.0, d, 8, d, 8, 0.0, d, 8, np.float32)


# -- the DeviceDriver adapter ------------------------------------------------------------------
@pytest.fixture
def drv() -> RuntimeStorageDriver:
    return RuntimeStorageDriver(EmulatorRuntime())


def test_adapter_contract_matches_cpu_driver(drv) -> None:
    cpu = CPUDriver()
    for d in (cpu, drv):
        buf = d.alloc(32, None)
        assert d.nbytes(buf) == 32 and d.data_ptr(buf) != 0
        d.from_host(buf, 0, np.arange(32, dtype=np.uint8))
        d.from_host(buf, 4, np.array([1000, 2000], np.int32))  # any dtype, written as bytes
        got = d.to_host(buf, 2, 10).copy()
        other = d.alloc(32, 0)
        d.from_host(other, 0, np.zeros(32, np.uint8))
        d.copy(other, 3, buf, 5, 7)
        copied = d.to_host(other, 0, 32).copy()
        if d is cpu:
            cpu_got, cpu_copied = got, copied
    np.testing.assert_array_equal(got, cpu_got)
    np.testing.assert_array_equal(copied, cpu_copied)
    assert drv.device_count() == 1 and drv.device_name(0) == DEVICE_NAME
    drv.synchronize()
    with pytest.raises(RuntimeError, match="outside the 32-byte cuda buffer"):
        drv.to_host(drv.alloc(32), 30, 4)
    with pytest.raises(RuntimeError, match=r"invalid device ordinal \(cuda:1 requested"):
        drv.alloc(8, 1)


@pytest.mark.parametrize("src,dst", [("float64", "int32"), ("float32", "float16"),
                                     ("complex128", "float32"), ("int64", "bool"),
                                     ("float32", "float32"), ("uint8", "float64")])
def test_adapter_cast_is_the_cpu_cast(drv, src: str, dst: str) -> None:
    s, d = np.dtype(src), np.dtype(dst)
    vals = np.array([0, 1.5, -2.25, np.nan, 300, 7], np.complex128)
    if s.kind != "c":
        vals = np.real(vals)
    with np.errstate(all="ignore"):
        data = vals.astype(s) if s.kind in "fc" else np.nan_to_num(vals).astype(s)
    cpu = CPUDriver()
    want = np.zeros(8 * d.itemsize, np.uint8)
    cpu.cast(want, d.itemsize, d, data.view(np.uint8).copy(), s.itemsize, s, 5)
    sbuf, dbuf = drv.alloc(data.nbytes), drv.alloc(want.nbytes)
    drv.from_host(sbuf, 0, data)
    drv.from_host(dbuf, 0, np.zeros(want.nbytes, np.uint8))
    drv.cast(dbuf, d.itemsize, d, sbuf, s.itemsize, s, 5)
    np.testing.assert_array_equal(drv.to_host(dbuf, 0, want.nbytes), want)


def test_adapter_buffers_free_when_collected(drv) -> None:
    rt = drv.runtime
    buf = drv.alloc(1000)
    assert rt.memory_allocated() == 1024
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is None and rt.memory_allocated() == 0 and rt.memory_reserved() == 1024


@contextlib.contextmanager
def _no_cuda_driver() -> Iterator[None]:
    """No "cuda" driver registered (nor a lazy initialiser that would register one) inside the
    block; the session's own state is put back afterwards. CI runs the suite with the emulator
    serving "cuda" (GPUTENSOR_CUDA_EMULATOR=1), so these tests must not assume a bare process."""
    saved_driver = DRIVERS.pop("cuda", None)
    saved_init = LAZY_INIT.pop("cuda", None)
    copy_table.rebuild(list(STORAGE_TYPES.values()))
    try:
        yield
    finally:
        DRIVERS.pop("cuda", None)
        if saved_driver is not None:
            DRIVERS["cuda"] = saved_driver
        if saved_init is not None:
            LAZY_INIT["cuda"] = saved_init
        copy_table.rebuild(list(STORAGE_TYPES.values()))


@pytest.fixture
def registered_cuda() -> Iterator[RuntimeStorageDriver]:
    """The adapter registered as the "cuda" driver for one test, then removed again."""
    with _no_cuda_driver():
        assert "cuda" not in DRIVERS, "a CUDA driver is already registered"
        drv = RuntimeStorageDriver(EmulatorRuntime())
        DRIVERS["cuda"] = drv
        copy_table.rebuild(list(STORAGE_TYPES.values()))
        yield drv


def test_storages_move_through_the_registered_adapter(registered_cuda) -> None:
    assert gt.cuda.is_available() and gt.cuda.get_device_name() == DEVICE_NAME
    gt.cuda.synchronize()
    s = gt.FloatStorage([1, 2, 3]).cuda()
    assert isinstance(s, gt.cuda.FloatStorage) and s.is_cuda
    assert isinstance(s._untyped._buf, type(registered_cuda.alloc(1)))
    assert s.tolist() == [1.0, 2.0, 3.0] and s[1] == 2.0 and s[-1] == 3.0
    s[0] = 7
    assert s.tolist() == [7.0, 2.0, 3.0]
    s.fill_(2.5)
    assert s.tolist() == [2.5] * 3 and s[0:2].tolist() == [2.5, 2.5]
    assert s.data_ptr() != 0 and s.nbytes() == 12
    d = gt.cuda.DoubleStorage([0.0, 1.5, -2.0])
    for method, dtype in [("long", gt.int64), ("half", gt.float16), ("bool", gt.bool),
                          ("bfloat16", gt.bfloat16)]:
        out = getattr(d, method)()
        assert out.is_cuda and out.dtype is dtype
        expected = np.array([0.0, 1.5, -2.0]).astype(dtype.np_dtype)
        np.testing.assert_array_equal(np.array(out.tolist(), dtype=dtype.np_dtype), expected)
    back = d.cpu()
    assert not back.is_cuda and back.tolist() == [0.0, 1.5, -2.0]
    b = gt.cuda.LongStorage(3).copy_(d)
    assert b.tolist() == [0, 1, -2]
    c = b.clone()
    c[0] = 9
    assert b[0] == 0 and c[0] == 9
    u = gt.UntypedStorage(8, device="cuda")
    u.fill_(3)
    assert u.tolist() == [3] * 8 and u.is_cuda and u.cpu().tolist() == [3] * 8
    with pytest.raises(RuntimeError, match="size mismatch"):
        gt.cuda.FloatStorage(2).copy_(s)


def test_copy_table_gains_and_loses_cuda_pairs(registered_cuda) -> None:
    cpu = STORAGE_TYPES[gt.float32, "cpu"]
    cuda = STORAGE_TYPES[gt.float32, "cuda"]
    assert (cpu, cuda) in copy_table.COPY_TABLE and (cuda, cpu) in copy_table.COPY_TABLE


def test_cuda_stays_unavailable_without_registration() -> None:
    with _no_cuda_driver():
        assert "cuda" not in DRIVERS and not gt.cuda.is_available()
        assert (STORAGE_TYPES[gt.float32, "cpu"], STORAGE_TYPES[gt.float32, "cuda"]) \
            not in copy_table.COPY_TABLE


def test_as_array_is_a_writable_view_of_device_memory(rt) -> None:
    """The emulator's library arrays are NumPy views, so SciPy works on device memory in place
    (the gt.linalg / gt.fft backends' contract)."""
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    p = _upload(rt, x)
    view = rt.as_array(p + 8, (3, 2), (32, 16), np.float64)  # x[:, 1::2]
    np.testing.assert_array_equal(view, x[:, 1::2])
    view[...] = -1.0
    expect = x.copy()
    expect[:, 1::2] = -1.0
    np.testing.assert_array_equal(_download(rt, p, x), expect)
    assert rt.as_array(p, (0, 4), (32, 8), np.float64).shape == (0, 4)
    with pytest.raises(IndexError):
        rt.as_array(p, (4, 4), (32, 8), np.float64)  # past the allocation
    with rt.array_library() as lib:
        assert lib.xp is np and lib.fft.__name__ == "scipy.fft"

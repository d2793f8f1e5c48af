"""The CuPy driver against a stand-in cupy (tests/cuda/fake_cupy.py) that encodes CuPy's
behaviour: which stream a call uses, when the host waits, which pool memory comes from, what
stays alive while queued work uses it. The real GPU runs of the same facts are tests/gpu/."""

from __future__ import annotations

import gc
import sys
import threading
import weakref

import numpy as np
import pytest

from gputensor.kernels.cuda import nvrtc
from gputensor.kernels.cuda.runtime import (
    CUPY_LIBRARY,
    DeviceProperties,
    DevicePtr,
    OutOfMemoryError,
    missing_methods,
)

from . import fake_cupy

_NVRTC, _WHY = nvrtc.availability()
needs_nvrtc = pytest.mark.skipif(not _NVRTC, reason=f"NVRTC wheel not installed: {_WHY}")


@pytest.fixture
def cp(monkeypatch):
    return fake_cupy.install(monkeypatch)


@pytest.fixture
def rt(cp):
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    yield CupyRuntime()
    nvrtc.prefer_major(None)


def _kinds(cp, prefix: str = "copy") -> list[str]:
    return [e[0] for e in cp.log if e[0].startswith(prefix)]


def test_is_usable_reports_why_not(monkeypatch) -> None:
    from gputensor.kernels.cuda import cupy_driver

    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError
    ok, why = cupy_driver.is_usable()
    assert not ok and "CuPy is not installed" in why
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy.make(devices=0))
    assert cupy_driver.is_usable() == (False, "no CUDA device found")
    broken = fake_cupy.make()

    def no_driver():
        raise RuntimeError("cudaErrorInsufficientDriver")
    broken.cuda.runtime.getDeviceCount = no_driver
    monkeypatch.setitem(sys.modules, "cupy", broken)
    ok, why = cupy_driver.is_usable()
    assert not ok and "cudaErrorInsufficientDriver" in why
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy.make())
    assert cupy_driver.is_usable() == (True, "")


# ---- memory: one pool, PyTorch's statistics, OOM -----------------------------------------
def test_memory_stats_count_blocks_and_segments(rt, cp) -> None:
    assert missing_methods(rt) == []
    a = rt.alloc(100)                       # one 512-byte block from a new segment
    b = rt.alloc(2 << 20)                   # a large-pool block
    st = rt.memory_stats()
    assert st["allocation.all.current"] == 2 and st["allocation.small_pool.current"] == 1
    assert st["allocated_bytes.all.current"] == 512 + (2 << 20) == rt.memory_allocated()
    assert st["requested_bytes.all.current"] == 100 + (2 << 20)
    assert st["segment.all.current"] == 2 and st["num_device_alloc"] == 2
    assert st["reserved_bytes.all.current"] == rt.memory_reserved() == 512 + (2 << 20)
    assert ("cudaMalloc", 512) in cp.log
    rt.free(b)
    gc.collect()
    st = rt.memory_stats()
    assert st["allocated_bytes.all.current"] == 512 and st["allocated_bytes.all.peak"] > 512
    assert st["allocated_bytes.large_pool.freed"] == 2 << 20
    assert st["inactive_split_bytes.all.current"] == 2 << 20  # cached, unused
    rt.empty_cache()
    gc.collect()
    st = rt.memory_stats()
    assert st["segment.all.current"] == 1 and st["num_device_free"] == 1
    assert st["reserved_bytes.all.current"] == 512 and rt.max_memory_reserved() > 512
    rt.reset_peak_memory_stats()
    assert rt.max_memory_allocated() == 512
    rt.free(a)
    for key in ("active_bytes.all.current", "num_alloc_retries", "num_ooms", "max_split_size",
                "oversize_allocations.current", "inactive_split.small_pool.peak"):
        assert key in st
    assert rt.mem_get_info() == ((80 << 30) - 1024, 80 << 30)
    assert rt.properties(0) == DeviceProperties("Fake GPU", 80 << 30, 132, 9, 0)


def test_oom_retries_once_after_freeing_the_cache_and_counts(monkeypatch) -> None:
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    cp = fake_cupy.install(monkeypatch, fail_mallocs=1)
    rt = CupyRuntime()
    assert rt.alloc(100) != 0
    assert [e[0] for e in cp.log if e[0] in ("malloc", "free_all_blocks")] == \
        ["malloc", "free_all_blocks", "malloc"]
    assert rt.memory_stats()["num_alloc_retries"] == 1
    cp = fake_cupy.install(monkeypatch, fail_mallocs=2)
    rt = CupyRuntime()
    with pytest.raises(OutOfMemoryError, match="tried to allocate 100 bytes; 0 bytes in use"):
        rt.alloc(100)
    assert rt.memory_stats()["num_ooms"] == 1
    nvrtc.prefer_major(None)


def test_memory_fraction_caps_the_pool(rt) -> None:
    rt.set_memory_fraction(1e-9)  # about 85 bytes of an 80 GiB device
    with pytest.raises(OutOfMemoryError):
        rt.alloc(4096)


def test_gemm_is_one_raw_cublas_call_outside_any_cupy_allocator(rt, cp) -> None:
    """The cuBLAS call is CuPy's thin binding (no CuPy allocation, so no allocator scope):
    host-pointer alpha/beta from read-only arrays cached per value (zeros never: -0.0 keeps
    its sign)."""
    from gputensor.kernels.cuda.cupy_driver import _host_scalar

    d = rt.alloc(64)
    for _ in range(2):
        rt.gemm("N", "N", 2, 2, 2, 1.0, d, 2, d, 2, 0.0, d, 2, np.float32)
    calls = [e for e in cp.log if e[0] == "gemmStridedBatchedEx"]
    assert len(calls) == 2 and calls[-1][-1] is None  # no using_allocator around it
    assert not any(e[0] == "using_allocator" for e in cp.log)
    one, address = _host_scalar(1.0, np.float32)
    assert _host_scalar(1.0, np.float32)[0] is one and not one.flags.writeable
    assert address == one.ctypes.data  # what cuBLAS reads in host pointer mode
    assert _host_scalar(1, np.float64) is not _host_scalar(1.0, np.float64)  # keyed by type
    zero = _host_scalar(0.0, np.float64)[0]
    assert _host_scalar(0.0, np.float64)[0] is zero and not np.signbit(zero[0])  # beta = 0
    assert np.signbit(_host_scalar(-0.0, np.float64)[0][0])  # not the +0.0 array


# ---- streams: host reads, default stream, what stays alive -----------------------------------
def test_host_reads_wait_for_the_current_stream_only(rt, cp) -> None:
    """A host read (stream=None) is queued on CuPy's current stream (a non-blocking side stream
    inside ``gt.cuda.stream``) and waits for that stream, never the legacy stream's
    synchronous copy, which does not wait for non-blocking streams."""
    host = np.arange(8, dtype=np.float32)
    d = rt.alloc(host.nbytes)
    s = rt.create_stream()
    assert s.non_blocking
    with s:
        rt.memcpy_htod(d, host)
        out = np.empty(8, np.float32)
        rt.memcpy_dtoh(out, d)
    np.testing.assert_array_equal(out, host)
    assert _kinds(cp) == ["copy_from_host_async", "copy_to_host_async"]
    copies = [e for e in cp.log if e[0].startswith("copy")]
    assert all(e[2] is s for e in copies)
    assert cp.log[-1] == ("stream_sync", s) and s.done
    rt.memcpy_dtoh(out, d)  # outside: the default stream
    assert cp.log[-2][2] is cp.cuda.Stream.null and cp.log[-1] == ("stream_sync",
                                                                   cp.cuda.Stream.null)


def test_default_stream_is_cupys_null_stream(rt, cp, monkeypatch) -> None:
    from gputensor.cuda import streams

    assert rt.default_stream() is cp.cuda.Stream.null
    monkeypatch.setattr(streams, "_require", lambda: rt)
    monkeypatch.setattr(streams, "current_device", lambda: 0)
    monkeypatch.setattr(streams, "_checked", lambda index: index)
    monkeypatch.setattr(streams, "_index", lambda d, optional=True: 0 if d is None else d)
    monkeypatch.setattr(streams._kdevice, "runtime_of", lambda index: rt)
    monkeypatch.setattr(streams, "_defaults", {})
    side = streams.Stream()
    default = streams.default_stream()
    assert default.raw is cp.cuda.Stream.null and default.cuda_stream == 0
    d = rt.alloc(64)
    with streams.stream(side):  # events and queries of the default stream act on it
        rt.memcpy_dtod(d, d, 64, stream=default.raw)
        ev = default.record_event()
        assert ev.raw.stream is cp.cuda.Stream.null
        assert not default.query() and not ev.query()
        side.wait_stream(default)
        kind, waiter, event = cp.log[-1]
        assert (kind, waiter, event.stream) == ("wait_event", side.raw, cp.cuda.Stream.null)
    default.synchronize()
    assert default.query() and ev.query()


def test_pinned_buffers_live_until_their_async_copy_ran(rt, cp) -> None:
    d = rt.alloc(1024)
    s = rt.create_stream()
    host = rt.alloc_host(1024)
    host[:] = 7
    rt.memcpy_htod(d, host, stream=s)
    block = weakref.ref(next(iter(cp.live_pinned)))
    del host
    gc.collect()
    rt.alloc_host(16)  # the pool must not get the block back while the copy is queued
    assert block() is not None
    s.synchronize()
    rt.alloc_host(16)  # releases what completed work kept
    gc.collect()
    assert block() is None
    pageable = np.ones(256, np.float32)
    rt.memcpy_htod(d, pageable, stream=s)  # pageable: staged by the driver, nothing kept
    assert not rt._watch.items


def test_record_stream_delays_reuse_until_that_stream_is_done(rt, cp) -> None:
    side = rt.create_stream()
    p = rt.alloc(4096)
    with side:
        rt.memcpy_dtod(p, p, 4096)  # queued work on the side stream uses the block
    used = rt.pool.used_bytes()
    rt.free(p, [side])
    gc.collect()
    assert rt.pool.used_bytes() == used  # still held: the side stream has not finished
    assert rt.memory_stats()["allocated_bytes.all.current"] == 0  # no longer the tensor's
    side.synchronize()
    rt.alloc(16)
    gc.collect()
    assert rt.pool.used_bytes() == 512


def test_frees_from_finalizers_inside_alloc_are_deferred(rt) -> None:
    """A GC finalizer may free a block while alloc/free runs: it waits, nothing deadlocks."""
    p = rt.alloc(64)
    rt._in_pool = True
    rt.free(p)
    assert rt._deferred and rt.memory_allocated() == 512
    rt._in_pool = False
    rt.alloc(64)
    assert not rt._deferred and rt.memory_allocated() == 512


def test_device_arrays_upload_without_a_host_sync(cp, monkeypatch) -> None:
    """Shapes and strides for a kernel are staged in pinned memory and copied asynchronously on
    the current stream: never a synchronous copy from pageable memory (which drains the GPU's
    queue before it starts)."""
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime
    from gputensor.kernels.cuda.device import DeviceArray
    from gputensor.kernels.cuda.storage_driver import RuntimeStorageDriver
    from gputensor.storage import allocator

    rt = CupyRuntime()
    monkeypatch.setitem(allocator.DRIVERS, "cuda", RuntimeStorageDriver(rt))
    s = rt.create_stream()
    with s:
        arr = DeviceArray([3, 4, 5])
    assert arr.size == 3 and _kinds(cp) == ["copy_from_host_async"]
    assert [e[0] for e in cp.log if e[0] == "pinned_malloc"] == ["pinned_malloc"]
    copy = next(e for e in cp.log if e[0] == "copy_from_host_async")
    assert copy[2] is s and not any(e[0] == "stream_sync" for e in cp.log)
    out = np.empty(3, np.int64)
    rt.memcpy_dtoh(out, arr.ptr)
    assert out.tolist() == [3, 4, 5]
    nvrtc.prefer_major(None)


def test_constant_metadata_is_uploaded_once_per_stream(cp, monkeypatch) -> None:
    """Read-only kernel metadata is cached by (runtime, stream, values): a repeated layout is
    not uploaded again on the stream that has it, and another stream gets its own copy
    (ordered on that stream), never one whose upload is queued elsewhere."""
    from gputensor.kernels.cuda import device
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime
    from gputensor.kernels.cuda.storage_driver import RuntimeStorageDriver
    from gputensor.storage import allocator

    rt = CupyRuntime()
    monkeypatch.setitem(allocator.DRIVERS, "cuda", RuntimeStorageDriver(rt))
    monkeypatch.setattr(device, "_runtime", rt)
    monkeypatch.setattr(device, "_CONSTANTS", {})
    s1, s2 = rt.create_stream(), rt.create_stream()

    def uploads() -> list:
        return [e[2] for e in cp.log if e[0] == "copy_from_host_async"]

    with s1:
        a = device.constant_array([2, 3, 4])
        assert device.constant_array((2, 3, 4)) is a and uploads() == [s1]
        b = device.constant_array([2, 3, 5])
    with s2:
        c = device.constant_array([2, 3, 4])
    assert b is not a and c is not a and uploads() == [s1, s1, s2]
    assert device.constant_array([2, 3, 4]) is not a  # the null stream: its own copy too
    out = np.empty(3, np.int64)
    rt.memcpy_dtoh(out, c.ptr)
    assert out.tolist() == [2, 3, 4]
    before = rt.memory_allocated()
    device.clear_constants()
    assert rt.memory_allocated() < before
    monkeypatch.setattr(device, "CONSTANTS_MAX", 2)
    with s1:
        first = device.constant_array([1])
        device.constant_array([2])
        device.constant_array([3])  # full: the cache starts over
        assert device.constant_array([1]) is not first
    nvrtc.prefer_major(None)


# ---- kernels: the project's NVRTC step, launches ---------------------------------------------
_SRC = ('#include "common.cuh"\n'
        'extern "C" __global__ void k(float* x, const int* y, float s, int n) '
        '{ if (n) x[0] = x[0] * s; }\n'
        'template <typename T> __global__ void tk(T* x) { x[0] = T(1); }\n')


@needs_nvrtc
def test_compile_loads_the_project_nvrtc_binary(rt, cp, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    from gputensor.kernels.cuda.device import NVRTC_OPTIONS

    mod = rt.compile(_SRC, "m", options=NVRTC_OPTIONS, name_expressions=("tk<float>",))
    load = next(e for e in cp.log if e[0] == "module_load")
    assert load[1] == b"\x7fELF"  # a CUBIN for the device's own sm_90, not PTX for CuPy to JIT
    assert rt.binary_arch() == "sm_90"
    assert list((tmp_path / "cuda_nvrtc").glob("m-*.cubin"))
    assert mod.lowered_names["tk<float>"].startswith("_Z2tkIfEvPT_")
    tk = rt.get_kernel(mod, "tk<float>")
    assert tk.function.name == mod.lowered_names["tk<float>"]
    assert "-ftz=false" in NVRTC_OPTIONS  # float32 subnormals survive, as on the CPU


@needs_nvrtc
def test_launch_converts_arguments_and_uses_the_current_stream(rt, cp, tmp_path,
                                                               monkeypatch) -> None:
    """A kernel's first launch on a thread goes through CuPy's Function (NumPy scalars of the
    declared types; it also makes sure the thread has a CUDA context); later ones pack the
    arguments into one parameter buffer for cuLaunchKernel (cupy_driver.PackedArgs): the
    buffer holds the same values in the CUDA ABI's layout."""
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    from gputensor.kernels.cuda.cupy_driver import packed_values
    from gputensor.kernels.cuda.device import NVRTC_OPTIONS

    k = rt.get_kernel(rt.compile(_SRC, "m", options=NVRTC_OPTIONS), "k")
    d = rt.alloc(16)
    s = rt.create_stream()
    start, end = rt.create_event(), rt.create_event()
    start.record(s)
    rt.launch(k, 2, (32, 2), 128, [d + 4, None, 1.5, 7], stream=s)
    end.record(s)
    name, grid, block, args, shared, stream = next(
        e for e in reversed(cp.log) if e[0] == "kernel")[1:]
    assert (name, grid, block, shared, stream) == ("k", (2,), (32, 2), 128, s)
    assert args[0] == np.uint64(int(d) + 4) and args[0].dtype == np.uint64
    assert args[1] == 0 and args[1].dtype == np.uint64
    assert args[2] == 1.5 and args[2].dtype == np.float32
    assert args[3] == 7 and args[3].dtype == np.int32
    assert k.packed is not None and k.packed.owner == threading.get_ident()

    rt.launch(k, 3, (32, 2), 64, [d + 4, None, 1.5, 7], stream=s)  # packed from now on
    name, grid, block, raw, shared, stream = cp.log[-1][1:]
    assert (name, grid, block, shared, stream) == ("k", (3, 1, 1), (32, 2, 1), 64, s)
    assert len(raw) == 24  # float* x, const int* y, float s (then 4 bytes padding), int n
    got = packed_values(k.params, raw)
    assert [v.dtype for v in got] == [np.uint64, np.uint64, np.float32, np.int32]
    assert got == (int(d) + 4, 0, 1.5, 7)
    rt.launch(k, 1, 1, 0, [d, d, np.float64(2.5), np.int64(-3)])  # the checked converters
    assert packed_values(k.params, cp.log[-1][4]) == (int(d), int(d), 2.5, -3)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        rt.launch(k, 1, 1, 0, [d])
    with pytest.raises(OverflowError, match="'n'.*does not fit"):
        rt.launch(k, 1, 1, 0, [d, d, 1.0, 2**40])
    with pytest.raises(OverflowError, match="'s'.*overflows float"):
        rt.launch(k, 1, 1, 0, [d, d, 1e39, 1])
    with pytest.raises(TypeError, match="'s'.*expected a real number"):
        rt.launch(k, 1, 1, 0, [d, d, True, 1])
    with pytest.raises(TypeError, match="'x'.*expected a DevicePtr"):
        rt.launch(k, 1, 1, 0, [int(d), d, 1.0, 1])
    rt.launch(k, 1, 1, 0, [d, d, 0.5, 1])
    assert cp.log[-1][-1] is cp.cuda.Stream.null  # no stream given: CuPy's current stream
    with s:
        rt.launch(k, 1, 1, 0, [d, d, 0.5, 1])
    assert cp.log[-1][-1] is s
    assert rt.elapsed_time(start, end) >= 0

    # another thread launches through CuPy's Function (the buffer is the owner's)
    worker = threading.Thread(target=rt.launch, args=(k, 1, 1, 0, [d, d, 0.25, 2]))
    worker.start()
    worker.join()
    assert cp.log[-1][4][2] == np.float32(0.25) and cp.log[-1][4][2].dtype == np.float32


def test_parameter_buffer_has_no_tail_padding() -> None:
    """cuLaunchKernel's CU_LAUNCH_PARAM_BUFFER_SIZE is the end of the last parameter: a buffer
    padded to the largest alignment (a C struct's size) fails with "too many resources
    requested for launch" (seen on an H200 for every kernel ending in an int)."""
    import struct

    from gputensor.kernels.cuda.arg_packing import cuda_format
    from gputensor.kernels.cuda.runtime import parse_kernels

    params = parse_kernels('extern "C" __global__ void k(int* a, short b, double c, int d, '
                           'bool e) {}')["k"]
    fmt = cuda_format(params, exact=True)
    assert struct.calcsize(fmt) == 8 + 2 + 6 + 8 + 4 + 1  # pointer, short, pad, double, int, bool
    assert [struct.calcsize(cuda_format(params[:i], exact=True)) for i in (1, 2)] == [8, 10]


@needs_nvrtc
def test_packed_buffer_holds_what_the_function_path_passes(rt, cp, tmp_path,
                                                           monkeypatch) -> None:
    """Every scalar type, in an order that needs padding (tests/gpu/test_packed_launch.py
    runs the same kernel on a GPU): the parameter buffer decodes to the NumPy scalars CuPy's
    Function receives for the same arguments, fast path and checked path alike."""
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    from gputensor.kernels.cuda.cupy_driver import packed_values
    from gputensor.kernels.cuda.device import NVRTC_OPTIONS
    from tests.gpu.test_packed_launch import _SRC, _values

    k = rt.get_kernel(rt.compile(_SRC, "every", options=NVRTC_OPTIONS), "every")
    d = rt.alloc(256)
    numpy_args = [np.float32(0.1) if v == 0.1 else v for v in _values(d + 8)]
    for args in (_values(d + 8), _values(None), numpy_args):
        args[0] = d
        rt.launch(k, 1, 1, 0, args)
        assert k.packed.owner is not None
        function_args = cp.log[-1][4]
        if not isinstance(function_args, tuple):  # packed: compare with a Function launch
            decoded = packed_values(k.params, function_args)
            k.packed.owner = -1  # no thread owns the buffer now: Function it is
            rt.launch(k, 1, 1, 0, args)
            k.packed.owner = threading.get_ident()
            function_args = cp.log[-1][4]
            assert [v.dtype for v in decoded] == [v.dtype for v in function_args]
            assert [v.tobytes() for v in decoded] == [v.tobytes() for v in function_args]


def test_driver_version_picks_the_nvrtc_major(cp, monkeypatch) -> None:
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    cp.cuda.runtime.driverGetVersion = lambda: 12080
    CupyRuntime()
    try:
        if _NVRTC:
            assert nvrtc.toolkit().major <= 12
    finally:
        nvrtc.prefer_major(None)


# ---- cuBLAS ------------------------------------------------------------------------------------
def _upload(rt, x: np.ndarray) -> DevicePtr:
    p = rt.alloc(x.nbytes)
    rt.memcpy_htod(p, x)
    return p


def test_strided_batched_gemm_is_one_call(rt, cp) -> None:
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 5, 2)), \
        rng.standard_normal((3, 4, 2))
    # column-major batches: each matrix stored transposed in row-major terms
    pa, pb, pc = (_upload(rt, np.ascontiguousarray(x.transpose(0, 2, 1))) for x in (a, b, c))
    rt.gemm("N", "N", 4, 2, 5, 2.0, pa, 4, pb, 5, 0.5, pc, 4, np.float64,
            batch=3, stride_a=20, stride_b=10, stride_c=8)
    out = np.empty((3, 2, 4))
    rt.memcpy_dtoh(out, pc)
    np.testing.assert_allclose(out.transpose(0, 2, 1), 2.0 * a @ b + 0.5 * c, rtol=1e-12)
    calls = [e for e in cp.log if e[0] == "gemmStridedBatchedEx"]
    assert len(calls) == 1 and calls[0][12] == 3 and calls[0][13] == 70  # batch, COMPUTE_64F
    with pytest.raises(IndexError, match="overruns"):
        rt.gemm("N", "N", 4, 2, 5, 1.0, pa, 4, pb, 5, 0.0, pc, 4, np.float64,
                batch=4, stride_a=20, stride_b=10, stride_c=8)


def test_gemm_plan_checks_once_and_makes_one_call_per_run(rt, cp) -> None:
    """A prepared gemm (what the ``_gemm`` kernel caches per layout): shape arguments checked
    when it is made, each run one cuBLAS call with the run's scalars and pointers."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 3))
    pa, pb = (_upload(rt, np.ascontiguousarray(x.transpose(0, 2, 1))) for x in (a, b))
    pc = rt.alloc(2 * 9 * 8)
    run = rt.gemm_plan("N", "N", 3, 3, 4, 3, 4, 3, np.float64, batch=2, stride_a=12,
                       stride_b=12, stride_c=9)
    for alpha in (1.0, 0.5):
        run(alpha, int(pa), int(pb), 0.0, int(pc))
        out = np.empty((2, 3, 3))
        rt.memcpy_dtoh(out, pc)
        np.testing.assert_allclose(out.transpose(0, 2, 1), alpha * a @ b, rtol=1e-12)
    assert len([e for e in cp.log if e[0] == "gemmStridedBatchedEx"]) == 2
    with pytest.raises(ValueError, match="ldb=2 is smaller than its 4 rows"):
        rt.gemm_plan("N", "N", 3, 3, 4, 3, 2, 3, np.float64)
    with pytest.raises(TypeError, match="does not take int64"):
        rt.gemm_plan("N", "N", 3, 3, 4, 3, 4, 3, np.int64)
    rt.gemm_plan("N", "N", 0, 3, 4, 1, 4, 1, np.float64)(1.0, 0, 0, 0.0, 0)  # empty: no call
    assert len([e for e in cp.log if e[0] == "gemmStridedBatchedEx"]) == 2


@pytest.mark.parametrize("dtype,tf32,compute", [("float32", False, 68), ("float32", True, 77),
                                                ("float16", True, 68), ("bfloat16", False, 68)])
def test_gemm_compute_types(rt, cp, dtype, tf32, compute) -> None:
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    x = np.arange(4, dtype=np.float32).astype(dt)
    p = _upload(rt, x)
    q = rt.alloc(x.nbytes)
    rt.gemm("N", "N", 2, 2, 2, 1.0, p, 2, p, 2, 0.0, q, 2, dt, allow_tf32=tf32)
    assert next(e for e in cp.log if e[0] == "gemmStridedBatchedEx")[13] == compute
    out = np.empty(4, dt)
    rt.memcpy_dtoh(out, q)
    m = np.arange(4, dtype=np.float32).reshape(2, 2).T
    np.testing.assert_array_equal(out.astype(np.float32).reshape(2, 2).T, m @ m)


# ---- availability: a probe kernel must compile and run -----------------------------------------
@needs_nvrtc
@pytest.mark.parametrize("broken", ["", "load"])
def test_is_available_only_when_a_probe_kernel_runs(tmp_path, broken) -> None:
    import os
    import subprocess
    from pathlib import Path

    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(fake_cupy.PACKAGE_INIT)
    root = Path(__file__).resolve().parents[2]
    code = ("import gputensor as gt, gputensor.nn as nn\n"
            "print(gt.cuda.is_available(), gt.cuda.why_unavailable() or '-')\n"
            "for f in (lambda: gt.ones(2).cuda(), lambda: gt.tensor([1.0], device='cuda'),\n"
            "          lambda: nn.Linear(2, 2).cuda().weight):\n"
            "    try:\n"
            "        print('ok', f().device)\n"
            "    except RuntimeError as e:\n"
            "        print('error', e)\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUTENSOR_CUDA_EMULATOR"}
    env.update(PYTHONPATH=f"{tmp_path}{os.pathsep}{root}", FAKE_CUPY_BROKEN=broken,
               GPUTENSOR_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    if not broken:
        assert lines[0] == "True -"
        assert lines[1] == "ok cuda:0" and len(lines) == 4
    else:
        assert lines[0].startswith("False RuntimeError: CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
        errors = lines[1:]
        assert len(errors) == 3 and all(e.startswith("error CUDA is not available") and
                                        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in e
                                        for e in errors), errors


def test_a_buffer_whose_alloc_failed_frees_nothing(monkeypatch) -> None:
    """OOM in DeviceBuffer.__init__: the half-made buffer's __del__ must not raise."""
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime
    from gputensor.kernels.cuda.storage_driver import DeviceBuffer

    fake_cupy.install(monkeypatch, fail_mallocs=2)
    rt = CupyRuntime()
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(OutOfMemoryError):
        DeviceBuffer(rt, 100)
    gc.collect()
    assert unraisable == [] and rt.memory_allocated() == 0
    nvrtc.prefer_major(None)


def test_each_gpu_has_its_own_runtime_working_on_its_own_device(monkeypatch) -> None:
    """Two GPUs: the runtime of GPU 1 allocates, loads modules, launches, copies and
    synchronises with GPU 1 current (the stand-in fails a launch made from another device, as
    CUDA does) and puts the caller's current device back; a third index is refused."""
    cp = fake_cupy.install(monkeypatch, devices=2)
    from gputensor.kernels.cuda.cupy_driver import all_devices, probe
    from gputensor.kernels.cuda.storage_driver import RuntimeStorageDriver

    rts = all_devices()
    assert [rt.device_index for rt in rts] == [0, 1]
    drv = RuntimeStorageDriver(rts)
    assert drv.device_count() == 2
    probe(rts[1])  # compile, load, launch and read back, all on GPU 1
    assert cp.cuda.runtime.getDevice() == 0
    cp.malloc_devices.clear()
    buf = drv.alloc(4096, 1)  # more than the probe's cached block: a new segment
    assert buf.runtime is rts[1] and cp.malloc_devices == [1]
    assert cp.cuda.runtime.getDevice() == 0
    drv.from_host(buf, 0, np.arange(8, dtype=np.int64))
    on0 = drv.alloc(64, 0)
    drv.copy(on0, 0, buf, 0, 64)  # between GPUs: through the host
    assert drv.to_host(on0, 0, 64).view(np.int64).tolist() == list(range(8))
    assert cp.malloc_devices == [1, 0] and rts[1].memory_allocated() == 4096
    rts[1].make_current()
    assert cp.cuda.runtime.getDevice() == 1
    rts[0].make_current()
    with pytest.raises(RuntimeError, match=r"invalid device ordinal \(cuda:2 requested, 2"):
        drv.alloc(8, 2)
    del buf, on0
    gc.collect()
    assert rts[1].memory_allocated() == 0 and rts[0].memory_allocated() == 0
    nvrtc.prefer_major(None)


# ---- array library (gt.linalg / gt.fft backends) -----------------------------------------------
def test_as_array_views_pool_memory_without_a_copy(rt, cp) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    p = _upload(rt, x)
    cp.log.clear()
    view = rt.as_array(p + 4, (3, 2), (16, 8), np.float32)  # x[:, 1::2]
    assert [e[0] for e in cp.log] == ["ndarray"]  # no copy, no allocation
    np.testing.assert_array_equal(view.get(), x[:, 1::2])
    with pytest.raises(IndexError):  # a span past the block is refused by the address table
        rt.as_array(p, (4, 4), (16, 4), np.float32)


def test_array_library_allocates_from_the_pool_on_its_device(rt, cp) -> None:
    cp.log.clear()
    with rt.array_library() as lib:
        assert [e[0] for e in cp.log] == ["Device", "using_allocator"]
        assert cp.log[1][1] == rt.malloc  # CuPy's allocations come from the project's pool
        assert lib is CUPY_LIBRARY


def test_ipc_exports_the_blocks_segment_and_its_offset(rt, cp) -> None:
    """cudaIpcGetMemHandle takes the base of a cudaMalloc allocation, not a pool block inside
    it: the export names the block's segment and the block's offset in it, after the current
    stream's work; the opened allocation is usable by copies until closed."""
    a = rt.alloc(256)
    b = rt.alloc(256)  # a second block, possibly in the same segment
    host = np.arange(64, dtype=np.float32)
    rt.memcpy_htod(b, host)
    handle, offset = rt.ipc_export(b)
    raw, size = handle
    base = int.from_bytes(raw[:8], "little")
    assert base in cp.allocation_bases and size == cp.allocation_bases[base]
    assert base + offset == int(b) and 0 <= offset < size
    assert [e for e in cp.log if e[0] in ("stream_sync", "ipcGetMemHandle")][-2:] == [
        ("stream_sync", cp.cuda.Stream.null), ("ipcGetMemHandle", base)]
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime
    receiver = CupyRuntime()  # another process's runtime (the fake maps the same memory)
    opened = receiver.ipc_open(handle)
    out = np.empty(64, np.float32)
    receiver.memcpy_dtoh(out, opened + offset)
    np.testing.assert_array_equal(out, host)
    receiver.ipc_close(opened)
    assert cp.log[-1] == ("ipcCloseMemHandle", int(opened))
    with pytest.raises(RuntimeError, match="not in this runtime's memory pool"):
        rt.ipc_export(12345)
    rt.free(a)
    rt.free(b)


def test_external_memory_is_registered_for_its_import_only(rt, cp) -> None:
    """Another library's device memory (DLPack, CUDA array interface) is registered as an
    UnownedMemory block so copies find it; memory inside one of the pool's live blocks is
    already known; a consumer's stream handle becomes a cupy ExternalStream."""
    own = rt.alloc(64)
    assert rt.adopt_external(own + 16, 32) is False
    foreign = cp.cuda.Memory(128)  # allocated by "another library"
    assert rt.adopt_external(foreign.ptr, 128) is True
    host = np.arange(32, dtype=np.float32)
    rt.memcpy_htod(foreign.ptr, host)
    out = np.empty(32, np.float32)
    rt.memcpy_dtoh(out, foreign.ptr)
    np.testing.assert_array_equal(out, host)
    rt.drop_external(foreign.ptr)
    with pytest.raises(IndexError):
        rt.memcpy_dtoh(out, foreign.ptr)
    stream = rt.external_stream(0xABC)
    assert cp.log[-1] == ("ExternalStream", 0xABC, 0) and stream is not None
    rt.free(own)

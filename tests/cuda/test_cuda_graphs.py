"""CUDA graphs (gt.cuda.CUDAGraph, gt.cuda.graph) on the emulator, and the CuPy driver's
capture calls against the stand-in cupy."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

from . import fake_cupy

needs_cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="needs the CUDA emulator")


@needs_cuda
def test_capture_records_and_replay_recomputes_from_static_inputs() -> None:
    x = gt.randn(8, device="cuda")
    w = gt.randn(8, 8, device="cuda")
    g = gt.cuda.CUDAGraph()
    with gt.cuda.graph(g):
        assert gt.cuda.is_current_stream_capturing()
        y = ((w @ x) * 2).relu()
    assert not gt.cuda.is_current_stream_capturing()
    for _ in range(3):
        new = gt.randn(8, device="cuda")
        x.copy_(new)
        g.replay()
        np.testing.assert_allclose(y.cpu().numpy(), ((w @ new) * 2).relu().cpu().numpy(),
                                   rtol=1e-6)


@needs_cuda
def test_nothing_runs_during_capture() -> None:
    x = gt.ones(4, device="cuda")
    out = gt.zeros(4, device="cuda")
    g = gt.cuda.CUDAGraph()
    with gt.cuda.graph(g):
        out.add_(x)
    np.testing.assert_array_equal(out.cpu().numpy(), [0.0] * 4)
    g.replay()
    g.replay()
    np.testing.assert_array_equal(out.cpu().numpy(), [2.0] * 4)


@needs_cuda
@pytest.mark.parametrize("what", ["item", "cpu", "synchronize"])
def test_host_reads_and_syncs_raise_during_capture(what: str) -> None:
    x = gt.ones(4, device="cuda")
    g = gt.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        with gt.cuda.graph(g):
            y = x * 2
            {"item": lambda: y.sum().item(), "cpu": lambda: y.cpu(),
             "synchronize": gt.cuda.synchronize}[what]()
    assert not gt.cuda.is_current_stream_capturing()  # the failed capture was closed
    np.testing.assert_array_equal((x * 3).cpu().numpy(), [3.0] * 4)


@needs_cuda
def test_memory_freed_during_capture_stays_with_the_graph() -> None:
    x = gt.full((256,), 2.0, device="cuda")
    g = gt.cuda.CUDAGraph()
    with gt.cuda.graph(g):
        tmp = x * 3          # freed before the capture ends: the graph still writes it
        out = tmp + 1
        del tmp
    other = gt.zeros(256, device="cuda")  # must not land on the temporary's block
    g.replay()
    np.testing.assert_array_equal(other.cpu().numpy(), [0.0] * 256)
    np.testing.assert_array_equal(out.cpu().numpy(), [7.0] * 256)
    g.reset()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()


@needs_cuda
def test_capture_api_errors() -> None:
    g = gt.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with gt.cuda.graph(g):
        gt.ones(2, device="cuda") * 2
    with pytest.raises(RuntimeError, match="already owns a captured graph"):
        with gt.cuda.graph(g):
            pass
    with pytest.raises(NotImplementedError, match="capture_error_mode"):
        gt.cuda.CUDAGraph().capture_begin(capture_error_mode="relaxed")
    assert isinstance(gt.cuda.graph_pool_handle(), tuple)


# ---- the CuPy driver's capture calls -----------------------------------------------------------
@pytest.fixture
def cupy_rt(monkeypatch):
    from gputensor.kernels.cuda import nvrtc
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    cp = fake_cupy.install(monkeypatch)
    yield CupyRuntime(), cp
    nvrtc.prefer_major(None)


def test_cupy_capture_needs_a_side_stream_and_keeps_freed_blocks(cupy_rt) -> None:
    rt, cp = cupy_rt
    with pytest.raises(RuntimeError, match="side stream"):
        rt.begin_capture()  # the current stream is the legacy default stream
    side = cp.cuda.Stream(non_blocking=True)
    with side:
        p = rt.alloc(1024)
        used = rt.pool.used_bytes()
        rt.begin_capture()
        assert rt.capturing and ("begin_capture", side) in cp.log
        rt.free(p)  # the graph may still use it: not back in the pool
        assert rt.pool.used_bytes() == used
        with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
            rt.memcpy_dtoh(np.empty(4, np.uint8), rt.alloc(4))
        with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
            rt.synchronize()
        # CuPy refuses H2D copies on a capturing stream: the bytes go from a pinned buffer
        # through cudaMemcpyAsync, which captures
        q = rt.alloc(64)
        rt.memcpy_htod(q, np.arange(4, dtype=np.uint8))
        assert ("memcpyAsync", 4, side) in cp.log
        # and its cuBLAS wrappers refuse a capturing stream (with no libcublas mapped into the
        # process for cublas_capture.py, as here, products go to the tiled kernel)
        assert not rt.blas_captures
        with pytest.raises(NotImplementedError, match="cuBLAS API during stream capture"):
            rt.gemm("N", "N", 2, 2, 2, 1.0, q, 2, q, 2, 0.0, q, 2, np.float32)
        rt.free(q)
        graph = rt.end_capture()
        assert not rt.capturing and ("end_capture", side) in cp.log
        graph.launch()
        assert cp.log[-1] == ("graph_launch", side)
    graph.release()
    import gc
    gc.collect()
    assert rt.pool.used_bytes() < used  # released with the graph


class _FakeCublas:
    """libcublas as cublas_capture.py calls it through ctypes: a log of the calls."""

    def __init__(self, log: list) -> None:
        self.log = log

    def cublasCreate_v2(self, handle) -> int:  # noqa: N802 - the C names
        handle._obj.value = 0xC0B1A5
        self.log.append(("cublasCreate",))
        return 0

    def cublasSetWorkspace_v2(self, handle, ptr, nbytes) -> int:  # noqa: N802
        self.log.append(("cublasSetWorkspace", handle, ptr, nbytes))
        return 0

    def cublasSetStream_v2(self, handle, stream) -> int:  # noqa: N802
        self.log.append(("cublasSetStream", handle, stream))
        return 0

    def cublasGemmStridedBatchedEx(self, handle, *args) -> int:  # noqa: N802
        self.log.append(("cublasGemmStridedBatchedEx", handle, *args))
        return 0


def test_cupy_products_inside_a_capture_go_to_cublas_through_ctypes(cupy_rt, monkeypatch) -> None:
    """CuPy's gemmStridedBatchedEx refuses a capturing stream (cublas.pyx, setStream); the
    driver then calls libcublas itself, on its own handle whose workspace (from the pool) and
    creation come before the capture begins, on the capturing stream."""
    from gputensor.kernels.cuda import cublas_capture

    rt, cp = cupy_rt
    log: list = []
    monkeypatch.setattr(cublas_capture, "load_library", lambda: _FakeCublas(log))
    side = cp.cuda.Stream(non_blocking=True)
    with side:
        q = rt.alloc(64)
        rt.gemm("N", "N", 2, 2, 2, 1.0, q, 2, q, 2, 0.0, q, 2, np.float32)  # eager: CuPy's
        assert cp.log[-1][0] == "gemmStridedBatchedEx" and not log
        rt.begin_capture()
        assert rt.blas_captures
        (create,), (_, handle, workspace, nbytes) = log[0], log[1]
        assert create == "cublasCreate" and handle == 0xC0B1A5
        assert nbytes == cublas_capture.WORKSPACE_BYTES and workspace in rt._table.by_base
        del log[:]
        n_cupy = sum(e[0] == "gemmStridedBatchedEx" for e in cp.log)
        run = rt.gemm_plan("T", "N", 2, 3, 4, 4, 4, 2, np.float32, batch=5, stride_a=8,
                           stride_b=12, stride_c=6)
        run(2.0, int(q), int(q) + 4, 0.0, int(q) + 8)
        assert sum(e[0] == "gemmStridedBatchedEx" for e in cp.log) == n_cupy  # not CuPy's
        assert log[0] == ("cublasSetStream", 0xC0B1A5, side.ptr)
        name, h, opa, opb, m, n, k, alpha, a, atype, lda, sa, b, btype, ldb, sb, beta, c, \
            ctype, ldc, sc, batch, compute, algo = log[1]
        assert (name, h, opa, opb, m, n, k) == ("cublasGemmStridedBatchedEx", 0xC0B1A5, 1, 0,
                                                2, 3, 4)
        assert (a, lda, sa, b, ldb, sb, c, ldc, sc, batch) == (int(q), 4, 8, int(q) + 4, 4, 12,
                                                               int(q) + 8, 2, 6, 5)
        assert atype == btype == ctype == 0 and compute == 68  # CUDA_R_32F, CUBLAS_COMPUTE_32F
        assert np.frombuffer(fake_cupy._bytes_at(alpha, 4), np.float32)[0] == 2.0
        assert np.frombuffer(fake_cupy._bytes_at(beta, 4), np.float32)[0] == 0.0
        rt.free(q)
        rt.end_capture().release()


@needs_cuda
def test_make_graphed_callables_matches_eager_forward_and_backward() -> None:
    import copy

    import gputensor.nn as nn

    gt.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).cuda()
    ref = copy.deepcopy(m)

    def fn(a, b):
        return (a * b).sin(), a + b

    graphed_m, graphed_fn = gt.cuda.make_graphed_callables(
        (m, fn), ((gt.randn(5, 8, device="cuda", requires_grad=True),),
                  (gt.randn(3, device="cuda", requires_grad=True),
                   gt.randn(3, device="cuda"))))
    assert graphed_m is m
    for _ in range(3):
        x = gt.randn(5, 8, device="cuda", requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        y, e = m(x), ref(xr)
        # equal: captured products are cuBLAS's as eager ones (NumPy's on the emulator)
        np.testing.assert_array_equal(y.detach().cpu().numpy(), e.detach().cpu().numpy())
        (y * y).sum().backward()
        (e * e).sum().backward()
        np.testing.assert_array_equal(x.grad.cpu().numpy(), xr.grad.cpu().numpy())
        for p, q in zip(m.parameters(), ref.parameters(), strict=True):
            np.testing.assert_array_equal(p.grad.cpu().numpy(), q.grad.cpu().numpy())
        m.zero_grad()
        ref.zero_grad()
        a = gt.randn(3, device="cuda", requires_grad=True)
        b = gt.randn(3, device="cuda")
        s, t = graphed_fn(a, b)
        (s.sum() + t.sum()).backward()
        np.testing.assert_allclose(a.grad.cpu().numpy(), (b.cpu() * (a * b).cos().cpu()
                                                          + 1).detach().numpy(), rtol=1e-6)
    m.eval()  # another training state: the module's own forward
    x = gt.randn(5, 8, device="cuda")
    np.testing.assert_array_equal(m(x).detach().cpu().numpy(), ref(x).detach().cpu().numpy())


@needs_cuda
def test_make_graphed_callables_argument_errors() -> None:
    import gputensor.nn as nn

    with pytest.raises(TypeError, match="must contain only Tensors"):
        gt.cuda.make_graphed_callables(lambda a, k: a * k, (gt.ones(2, device="cuda"), 3))
    m = nn.Linear(2, 2).cuda()
    m.register_forward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="must not have hooks"):
        gt.cuda.make_graphed_callables(m, (gt.ones(1, 2, device="cuda"),))

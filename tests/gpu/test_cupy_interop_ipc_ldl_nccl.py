"""This session's CuPy-only paths, on a real GPU (skipped elsewhere; their call patterns are
checked without a GPU against stand-ins): DLPack and the CUDA array interface with CuPy, CUDA
IPC between processes, cuSOLVER's sytrf for LDL, and NCCL with world size 1."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import gputensor as gt


def test_dlpack_and_cuda_array_interface_with_cupy() -> None:
    import cupy
    t = gt.arange(12.0, device="cuda").reshape(3, 4)
    c = cupy.from_dlpack(t.t())
    assert c.data.ptr == t.data_ptr() and c.strides == (4, 16)
    c[1, 0] = -1.0
    gt.cuda.synchronize()
    assert t[0, 1].item() == -1.0
    a = cupy.arange(6, dtype=cupy.float32)
    u = gt.from_dlpack(a)
    assert u.data_ptr() == a.data.ptr and u.device.type == "cuda"
    u.mul_(2)
    assert cupy.asnumpy(a).tolist() == [0, 2, 4, 6, 8, 10]
    v = gt.asarray(a[::2])  # through __cuda_array_interface__
    assert v.tolist() == [0.0, 4.0, 8.0]
    w = cupy.asarray(t)  # cupy reads ours through __cuda_array_interface__
    assert w.data.ptr == t.data_ptr()


def _child_adds_one(q_in, q_out) -> None:
    x = q_in.get()
    x.add_(1)
    gt.cuda.synchronize()
    q_out.put(x.tolist())
    q_in.get()


def test_cuda_ipc_between_processes() -> None:
    ctx = gt.multiprocessing.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_child_adds_one, args=(q_in, q_out))
    p.start()
    x = gt.arange(4.0, device="cuda")
    q_in.put(x[1:])
    assert q_out.get(timeout=120) == [2.0, 3.0, 4.0]
    assert x.tolist() == [0.0, 2.0, 3.0, 4.0]
    q_in.put(None)
    p.join(60)
    assert p.exitcode == 0


def test_ldl_on_cusolver_matches_lapack() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 6, 6))
    a = a + np.swapaxes(a, -1, -2)
    a[0, 0, 0] = a[0, 1, 1] = 0
    b = rng.standard_normal((2, 6, 3))
    cpu = gt.linalg.ldl_factor(gt.tensor(a))
    gpu = gt.linalg.ldl_factor(gt.tensor(a, device="cuda"))
    np.testing.assert_allclose(gpu.LD.cpu().numpy(), cpu.LD.numpy(), atol=1e-10)
    assert gpu.pivots.tolist() == cpu.pivots.tolist()
    x = gt.linalg.ldl_solve(gpu.LD, gpu.pivots, gt.tensor(b, device="cuda"))
    np.testing.assert_allclose(x.cpu().numpy(), np.linalg.solve(a, b), atol=1e-9)
    # info names the first exactly zero pivot, as LAPACK's (cuSOLVER's sytrf said 2 here)
    z = np.zeros((3, 3))
    z[2, 2] = 1.0
    for m in (np.zeros((2, 2)), z):
        want = gt.linalg.ldl_factor_ex(gt.tensor(m)).info.item()
        assert gt.linalg.ldl_factor_ex(gt.tensor(m, device="cuda")).info.item() == want == 1


def _mpi_works() -> bool:
    try:
        from mpi4py import MPI  # noqa: F401 - the import loads the MPI library
    except Exception:  # noqa: BLE001 - mpi4py without an MPI library raises RuntimeError
        return False
    return True


@pytest.mark.parametrize("bootstrap", ["tcp_store", "mpi"])
def test_nccl_world_size_one(bootstrap: str, unused_port: int) -> None:
    import gputensor.distributed as dist
    if not dist.is_nccl_available():
        pytest.skip("no NCCL library for CuPy on this machine (the nvidia-nccl wheel)")
    if bootstrap == "mpi":
        if not _mpi_works():
            pytest.skip("mpi4py has no MPI library on this machine")
        dist.init_process_group("nccl")
    else:  # the NCCL unique id travels through the TCP store, as with torchrun
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{unused_port}",
                                rank=0, world_size=1)
    try:
        assert dist.get_backend() == "nccl"
        x = gt.arange(8.0, device="cuda")
        dist.all_reduce(x, dist.ReduceOp.AVG)
        out = gt.empty(8, device="cuda")
        dist.all_gather_into_tensor(out, x)
        dist.broadcast(x, src=0)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        gt.cuda.synchronize()
        assert x.tolist() == list(range(8)) and out.tolist() == x.tolist()
        b = gt.tensor([1, 0, 1], dtype=gt.bool, device="cuda")
        dist.all_reduce(b, dist.ReduceOp.MAX)
        assert b.tolist() == [True, False, True]
    finally:
        dist.destroy_process_group()


def test_spawn_start_method_is_usable() -> None:
    assert "spawn" in multiprocessing.get_all_start_methods()

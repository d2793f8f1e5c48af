"""The CuPy path on a real GPU: every defect of issue 13, checked where only hardware shows it."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import header_probe_results

TINY = np.array([1e-40, 3e-39, -5e-41], np.float32)  # float32 subnormals


def test_float32_subnormals_survive_elementwise_and_sum() -> None:
    x = gt.tensor(TINY, device="cuda")
    np.testing.assert_array_equal((x * 1.0).cpu().numpy(), TINY)
    np.testing.assert_array_equal((x + 0.0).cpu().numpy(), TINY)
    assert x.sum().item() != 0.0


def test_reads_in_a_side_stream_wait_for_that_stream(busy) -> None:
    s = gt.cuda.Stream()
    m = gt.rand(1 << 20, device="cuda") > 0.5
    want = int(m.sum().item())
    for _ in range(3):
        with gt.cuda.stream(s):
            busy(60)
            count = gt.nonzero(m).shape[0]   # the count is read on s, after busy()
            picked = m[m].numel()             # masked_select: same path
        assert count == want and picked == want
        s.synchronize()


def test_deferred_index_error_inside_a_side_stream_is_raised(busy) -> None:
    s = gt.cuda.Stream()
    x = gt.zeros(10, device="cuda")
    idx = gt.tensor([100], device="cuda")
    with pytest.raises(IndexError, match="index 100 is out of bounds|out of range"):
        with gt.cuda.stream(s):
            busy(60)
            y = x.index_select(0, idx)
            y.cpu()                            # a synchronising read on s
    gt.cuda.synchronize()                      # nothing left pending afterwards
    x.index_select(0, gt.tensor([1], device="cuda")).cpu()


def test_default_stream_events_and_queries_act_on_the_default_stream(busy) -> None:
    s = gt.cuda.Stream()
    gt.cuda.synchronize()
    busy(150)                                  # queued on the default stream
    with gt.cuda.stream(s):
        ev = gt.cuda.default_stream().record_event()
        assert not ev.query()
        assert not gt.cuda.default_stream().query()
        s.wait_stream(gt.cuda.default_stream())
    gt.cuda.synchronize()
    assert ev.query() and gt.cuda.default_stream().query()


def test_pinned_source_is_not_reused_while_its_copy_is_queued(busy) -> None:
    s = gt.cuda.Stream()
    n = 1 << 22
    src = gt.full((n,), 1.0).pin_memory()
    gt.cuda.synchronize()
    with gt.cuda.stream(s):
        busy(100)
        y = src.cuda()
        del src
        other = gt.full((n,), 2.0).pin_memory()  # may take a freed pinned block
        assert other.is_pinned()
    s.synchronize()
    assert y.min().item() == y.max().item() == 1.0


def test_record_stream_keeps_the_block_until_the_stream_is_done(busy) -> None:
    side = gt.cuda.Stream()
    x = gt.full((1 << 20,), 3.0, device="cuda")
    gt.cuda.synchronize()
    with gt.cuda.stream(side):
        busy(100)
        y = x * 2                              # reads x on the busy side stream
    x.record_stream(side)
    del x
    z = gt.full((1 << 20,), 7.0, device="cuda")  # must not land on x's block yet
    side.synchronize()
    assert y.min().item() == y.max().item() == 6.0 and z.max().item() == 7.0


def test_cupy_allocations_come_from_the_one_pool() -> None:
    import cupy

    default_pool = cupy.get_default_memory_pool()
    gt.cuda.empty_cache()
    default_pool.free_all_blocks()
    x = gt.randn(2048, 2048, device="cuda")
    before = gt.cuda.memory_stats()["num_device_alloc"]
    y = x @ x
    del y
    assert default_pool.total_bytes() == 0
    st = gt.cuda.memory_stats()
    assert st["num_device_alloc"] >= before and st["allocated_bytes.all.current"] > 0
    assert gt.cuda.max_memory_reserved() >= gt.cuda.memory_reserved() > 0
    free, total = gt.cuda.mem_get_info()
    assert 0 < free <= total


def test_oom_is_gputensors_error_and_counted() -> None:
    gt.cuda.empty_cache()
    ooms = gt.cuda.memory_stats()["num_ooms"]
    total = gt.cuda.get_device_properties(0).total_memory
    try:
        gt.cuda.set_per_process_memory_fraction(0.01)
        with pytest.raises(gt.cuda.OutOfMemoryError, match="tried to allocate"):
            gt.empty(int(total * 0.02) // 4, device="cuda")
    finally:
        gt.cuda.set_per_process_memory_fraction(1.0)
    assert gt.cuda.memory_stats()["num_ooms"] == ooms + 1


def test_an_edited_header_is_recompiled(tmp_path) -> None:
    from gputensor.kernels.cuda.device import runtime

    assert header_probe_results(runtime(), tmp_path) == [1, 2]


def test_broadcast_launch_does_not_wait_for_the_gpu(busy) -> None:
    x = gt.randn(1024, 1024, device="cuda")
    b = gt.randn(1024, device="cuda")
    x + b  # compiled and warm
    gt.cuda.synchronize()
    busy(150)
    x + b                                       # uploads shapes/strides: must not sync
    assert not gt.cuda.current_stream().query()  # the GPU is still busy: the host did not wait
    gt.cuda.synchronize()


def test_bmm_is_strided_batched_and_correct() -> None:
    import torch

    a, b = gt.randn(512, 64, 64, device="cuda"), gt.randn(512, 64, 64, device="cuda")
    got = gt.bmm(a, b).cpu().numpy()
    want = torch.bmm(torch.from_numpy(a.cpu().numpy()).double(),
                     torch.from_numpy(b.cpu().numpy()).double()).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    h = gt.bmm(a.bfloat16(), b.bfloat16()).float().cpu().numpy()
    np.testing.assert_allclose(h, want, rtol=5e-2, atol=1.0)


def test_tf32_only_when_allowed() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    ref = a.astype(np.float64) @ a.astype(np.float64)
    x = gt.tensor(a, device="cuda")

    def err() -> float:
        return float(np.abs((x @ x).cpu().numpy() - ref).max() / np.abs(ref).max())
    try:
        exact = err()
        gt.set_float32_matmul_precision("high")
        fast = err()
    finally:
        gt.set_float32_matmul_precision("highest")
    assert exact < 1e-5 < fast < 1e-2, (exact, fast)

"""Several CUDA devices (issue 13, item 7), on an emulated two-GPU machine.

Each device has its own runtime (pool, statistics, streams, modules, error record). An op runs
on its tensors' device whatever device is current; "cuda" without an index means the current
device; data moves between devices through the host; mixing devices in one op is an error.
The emulated devices hand out disjoint address ranges, so a kernel launched on the wrong
device meets a stray address instead of silently reading another device's memory.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda import device as kdevice
from gputensor.kernels.cuda.emulator_driver import EmulatorRuntime, emulated_devices
from gputensor.storage.allocator import LAZY_INIT


@pytest.fixture(scope="module", autouse=True)
def two_devices():
    """An emulated two-device machine for this module; the previous runtimes afterwards."""
    running = kdevice.runtimes()
    if len(running) >= 2 and isinstance(running[0], EmulatorRuntime):
        yield
        return
    lazy = LAZY_INIT.pop("cuda", None)
    kdevice.activate(emulated_devices(2))
    try:
        yield
    finally:
        gc.collect()
        if running:
            kdevice.activate(list(running))
        else:
            kdevice.deactivate()
            if lazy is not None:
                LAZY_INIT["cuda"] = lazy


@pytest.fixture(autouse=True)
def device_zero_current():
    gt.cuda.set_device(0)
    yield
    gt.cuda.set_device(0)


def test_two_devices_with_their_own_properties_and_ordinals() -> None:
    assert gt.cuda.is_available() and gt.cuda.device_count() == 2
    assert [gt.cuda.get_device_properties(i).name for i in range(2)] == \
        ["gputensor CUDA emulator (CPU)"] * 2
    with pytest.raises(RuntimeError, match=r"invalid device ordinal \(device 2 requested, 2"):
        gt.cuda.set_device(2)
    with pytest.raises(RuntimeError, match=r"invalid device ordinal \(cuda:2 requested, 2"):
        gt.zeros(1, device="cuda:2")


def test_an_op_runs_on_its_tensors_device_whatever_is_current() -> None:
    base0, base1 = gt.cuda.memory_allocated(0), gt.cuda.memory_allocated(1)
    gt.cuda.reset_peak_memory_stats(0)
    x_host = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    x = gt.tensor(x_host, device="cuda:1")
    assert x.device == gt.device("cuda:1") and gt.cuda.current_device() == 0
    y = (x * 2 + 1).relu().sum(dim=0)  # elementwise, a reduction and their temporaries
    s, _ = x.sort(dim=1)
    n = (x > 0).nonzero()  # reads a count back from device 1
    assert y.device == s.device == n.device == x.device
    np.testing.assert_allclose(y.cpu().numpy(), np.maximum(x_host * 2 + 1, 0).sum(0), rtol=1e-6)
    np.testing.assert_array_equal(s.cpu().numpy(), np.sort(x_host, 1))
    np.testing.assert_array_equal(n.cpu().numpy(), np.argwhere(x_host > 0))
    assert gt.cuda.memory_allocated(1) > base1
    assert gt.cuda.memory_allocated(0) == base0 and gt.cuda.max_memory_allocated(0) == base0


def test_a_kernel_on_the_wrong_device_meets_a_stray_address() -> None:
    """What the guard prevents: device 1's memory handed to a kernel launched on device 0."""
    x = gt.ones(4, device="cuda:1")
    kernel = gt.cuda.compile_kernel(
        'extern "C" __global__ void twice(float* x, long long n) '
        '{ long long i = threadIdx.x; if (i < n) x[i] *= 2; }', "twice")
    with gt.cuda.device(1):
        kernel((1,), (4,), (x, 4))
    assert x.tolist() == [2.0] * 4
    with pytest.raises(Exception, match="0x7f"):  # an address of device 1's range
        kdevice.launch_kernel(kdevice.runtime_of(0), kernel._handle(kdevice.runtime_of(0)),
                              1, 4, 0, [kdevice.ptr(x), 4])


def test_cuda_without_an_index_means_the_current_device() -> None:
    with gt.cuda.device(1):
        assert gt.cuda.current_device() == 1
        assert gt.zeros(2, device="cuda").device == gt.device("cuda:1")
        assert gt.ones(2).cuda().device == gt.device("cuda:1")
        assert gt.device("cuda") != gt.device("cuda:1")  # as in PyTorch: the index stays unset
        m = gt.nn.Linear(2, 2).cuda()
        assert m.weight.device == gt.device("cuda:1")
    assert gt.cuda.current_device() == 0
    assert gt.ones(1).cuda().device == gt.device("cuda:0")
    gt.cuda.set_device("cuda:1")
    assert gt.empty(1, device="cuda").device == gt.device("cuda:1")
    x = gt.ones(3, device="cuda:0")
    with gt.cuda.device_of(x):
        assert gt.cuda.current_device() == 0


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_moves_between_devices_keep_values_and_cast(dtype) -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    x0 = gt.tensor(host, device="cuda:0")
    x1 = x0.to("cuda:1", dtype)
    assert x1.device == gt.device("cuda:1") and x1.dtype is dtype
    np.testing.assert_array_equal(x1.cpu().numpy(), host.astype(dtype.np_dtype))
    back = x1.t().to("cuda:0")  # a strided view crosses too
    np.testing.assert_array_equal(back.cpu().numpy(), host.T.astype(dtype.np_dtype))
    dst = gt.zeros(3, 4, device="cuda:1", dtype=gt.int64)
    dst.copy_(x0)
    np.testing.assert_array_equal(dst.cpu().numpy(), host.astype(np.int64))
    dst[0].copy_(gt.full((4,), 7, device="cuda:0"))
    assert dst[0].tolist() == [7] * 4 and dst.device == gt.device("cuda:1")


def test_gradients_flow_back_across_a_device_move() -> None:
    a = gt.tensor([1.0, -2.0, 3.0], device="cuda:0", requires_grad=True)
    b = a.to("cuda:1")
    (b * b).sum().backward()
    assert a.grad.device == gt.device("cuda:0")
    assert a.grad.tolist() == [2.0, -4.0, 6.0]


def test_mixing_devices_in_one_op_is_an_error_naming_both() -> None:
    a, b = gt.ones(2, device="cuda:0"), gt.ones(2, device="cuda:1")
    with pytest.raises(RuntimeError, match=r"same device.*cuda:0 and cuda:1"):
        a + b
    with pytest.raises(RuntimeError, match=r"same device.*cuda:1 and cuda:0"):
        gt.matmul(b.view(1, 2), a.view(2, 1))
    with pytest.raises(RuntimeError, match=r"cuda:1"):
        gt.add(a, a, out=gt.empty(2, device="cuda:1"))


def test_training_on_the_second_device_matches_the_cpu() -> None:
    def run(dev: str) -> list[float]:
        gt.manual_seed(0)
        model = gt.nn.Sequential(gt.nn.Linear(6, 16), gt.nn.ReLU(), gt.nn.Linear(16, 3)).to(dev)
        opt = gt.optim.Adam(model.parameters(), lr=1e-2)
        g = gt.Generator().manual_seed(1)
        x = gt.randn(32, 6, generator=g).to(dev)
        y = gt.randint(0, 3, (32,), generator=g).to(dev)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = gt.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert all(p.device == gt.device(dev) for p in model.parameters())
        return losses

    before = gt.cuda.memory_allocated(0)
    np.testing.assert_allclose(run("cuda:1"), run("cpu"), rtol=1e-5)
    assert gt.cuda.memory_allocated(0) == before


def test_each_device_has_its_own_statistics_and_cache() -> None:
    gc.collect()
    gt.cuda.empty_cache()
    x = gt.empty(1 << 16, device="cuda:1")
    assert gt.cuda.memory_allocated(1) >= 1 << 18 and gt.cuda.memory_reserved(1) >= 1 << 18
    del x
    gc.collect()
    assert gt.cuda.memory_reserved(1) >= 1 << 18  # cached, not returned
    gt.cuda.empty_cache()  # every device's cache, as PyTorch
    assert gt.cuda.memory_reserved(1) == gt.cuda.memory_allocated(1)
    assert gt.cuda.memory_stats(1)["allocation.all.allocated"] >= 1
    assert "device 1" in gt.cuda.memory_summary(1)
    gt.cuda.synchronize(1)


def test_streams_belong_to_a_device() -> None:
    s1 = gt.cuda.Stream(device=1)
    assert s1.device == gt.device("cuda:1") and gt.cuda.Stream().device == gt.device("cuda:0")
    assert gt.cuda.current_stream(1) == gt.cuda.default_stream(1)
    assert gt.cuda.default_stream(0) != gt.cuda.default_stream(1)
    with gt.cuda.stream(s1):  # entering a stream of device 1 makes device 1 current
        assert gt.cuda.current_device() == 1
        assert gt.cuda.current_stream() is s1 and gt.cuda.current_stream(1) is s1
        assert gt.cuda.current_stream(0) == gt.cuda.default_stream(0)
        x = gt.ones(3, device="cuda") * 3
        ev = s1.record_event()
    assert gt.cuda.current_device() == 0 and x.device == gt.device("cuda:1")
    ev.synchronize()
    assert x.tolist() == [3.0] * 3
    with pytest.raises(RuntimeError, match="Event device cuda:0 does not match recording "
                                           "stream's device cuda:1"):
        gt.cuda.Event().record(s1)


def test_index_errors_are_reported_from_the_device_that_found_them() -> None:
    x = gt.arange(4.0, device="cuda:1")
    with pytest.raises(IndexError, match="out of bounds"):
        x[gt.tensor([0, 9], device="cuda:1")]
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    assert x[gt.tensor([3], device="cuda:1")].tolist() == [3.0]


def test_each_device_has_its_own_generator() -> None:
    gt.cuda.manual_seed_all(5)
    a1 = gt.randn(6, device="cuda:1")
    a0 = gt.randn(6, device="cuda:0")
    b0 = gt.randn(6, device="cuda:0")
    assert a0.tolist() == a1.tolist() and a0.tolist() != b0.tolist()
    assert len(gt.cuda.get_rng_state_all()) == 2


def test_checkpoints_load_onto_a_chosen_device(tmp_path) -> None:
    model = gt.nn.Linear(3, 2).to("cuda:1")
    path = tmp_path / "m.pt"
    gt.save(model.state_dict(), path)
    on1 = gt.load(path)
    assert on1["weight"].device == gt.device("cuda:1")
    on0 = gt.load(path, map_location="cuda:0")
    assert on0["weight"].device == gt.device("cuda:0")
    assert on0["weight"].tolist() == model.weight.tolist()


def test_sparse_tensors_work_on_the_second_device() -> None:
    i = gt.tensor([[0, 1, 1], [2, 0, 2]])
    v = gt.tensor([3.0, 4.0, 5.0])
    sp = gt.sparse_coo_tensor(i, v, (2, 3)).to("cuda:1")
    dense = gt.ones(3, 2, device="cuda:1")
    out = gt.sparse.mm(sp, dense)
    assert out.device == gt.device("cuda:1")
    assert out.tolist() == [[3.0, 3.0], [9.0, 9.0]]


def test_the_environment_setting_emulates_that_many_devices() -> None:
    code = ("import gputensor as gt; print(gt.cuda.device_count(), "
            "gt.ones(2, device='cuda:1').device)")
    env = dict(os.environ, GPUTENSOR_CUDA_EMULATOR="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["2", "cuda:1"]
    env["GPUTENSOR_CUDA_EMULATOR"] = "two"
    err = subprocess.run([sys.executable, "-c", "import gputensor as gt; "
                          "gt.cuda.is_available()"], env=env, capture_output=True,
                         text=True).stderr
    assert "GPUTENSOR_CUDA_EMULATOR='two': expected 1" in err

"""Kernel launch cost (issue 4): the Python and runtime cost of one CUDA kernel launch.

- the CPU emulator: one launch of a 16-element add (launch overhead: argument packing, the
  fiber runtime's setup, 128 fibers) and of a 1M-element add (the emulated kernel's speed);
- the CuPy driver's Python cost per launch, against a stand-in ``cupy`` whose kernels do
  nothing (the goal: <= 10 us), both through ``runtime.launch`` and through ``device.launch``
  with tensors, the path the CUDA backend's ops take;
- with ``GPUTENSOR_CUDA_EMULATOR=1``: ``gt.add`` of 16 elements on "cuda" next to "cpu".

No timing is asserted; compare the groups' means.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda import device
from gputensor.kernels.cuda.emulator_driver import EmulatorRuntime
from gputensor.kernels.cuda.runtime import DevicePtr

ADD_SRC = r"""
#include "common.cuh"
extern "C" __global__ void add_f32(float* __restrict__ out, const float* __restrict__ a,
                                   const float* __restrict__ b, float alpha, long long n,
                                   const long long* __restrict__ meta) {
    for (GT_GRID_STRIDE(i, n)) out[i] = a[i] + alpha * b[i];
}
"""
BLOCK = 128


def _emulator_add(n: int) -> tuple[EmulatorRuntime, Any, list]:
    rt = EmulatorRuntime()
    kernel = rt.get_kernel(rt.compile(ADD_SRC, "bench_launch_add"), "add_f32")
    ptrs = [rt.alloc(4 * n) for _ in range(3)]
    for p in ptrs[1:]:
        rt.memcpy_htod(p, np.ones(n, np.float32))
    return rt, kernel, [ptrs[0], ptrs[1], ptrs[2], 2.0, n, None]


@pytest.mark.parametrize("n", [16, 1 << 20], ids=["16", "1M"])
def test_emulator_launch(benchmark, n):
    benchmark.group = f"launch: emulator add {n}"
    rt, kernel, args = _emulator_add(n)
    grid = max(1, min(device.MAX_GRID, -(-n // BLOCK)))
    benchmark(rt.launch, kernel, grid, BLOCK, 0, args)
    out = np.empty(n, np.float32)
    rt.memcpy_dtoh(out, args[0])
    assert (out == 3).all()


# ---- the CuPy driver against a stand-in cupy -----------------------------------------------------
class _Tensor:
    """What ``device.ptr`` reads from a CUDA tensor."""

    def __init__(self, address: int) -> None:
        self._storage = types.SimpleNamespace(
            _buf=types.SimpleNamespace(ptr=DevicePtr(address), size=64),
            device=types.SimpleNamespace(type="cuda"))
        self._offset = 0
        self._dtype = types.SimpleNamespace(itemsize=4)


@pytest.fixture
def cupy_runtime(monkeypatch, tmp_path):
    """A CupyRuntime over the suite's stand-in cupy (tests/cuda/fake_cupy.py), whose kernels
    only log their call; kernels are built by the project's NVRTC step (needs its wheel)."""
    from gputensor.kernels.cuda import nvrtc

    ok, why = nvrtc.availability()
    if not ok:
        pytest.skip(f"NVRTC wheel not installed: {why}")
    from tests.cuda import fake_cupy

    cp = fake_cupy.install(monkeypatch)
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    rt = CupyRuntime()
    monkeypatch.setattr(device, "_runtime", rt)
    yield rt
    cp.log.clear()


def _last_kernel_args(rt) -> tuple:
    return next(e for e in reversed(rt.cp.log) if e[0] == "kernel")[4]


def test_cupy_runtime_launch(benchmark, cupy_runtime):
    benchmark.group = "launch: CuPy driver, Python cost"
    rt = cupy_runtime
    kernel = rt.get_kernel(rt.compile(ADD_SRC, "bench_add", options=device.NVRTC_OPTIONS),
                           "add_f32")
    ptrs = [rt.alloc(64) for _ in range(3)]
    benchmark(rt.launch, kernel, 1, BLOCK, 0, [*ptrs, 2.0, 16, None])
    assert _last_kernel_args(rt)[3].dtype == np.float32


def test_cupy_device_launch_tensors(benchmark, cupy_runtime):
    benchmark.group = "launch: CuPy driver, Python cost"
    rt = cupy_runtime
    src = device.CudaSource("bench_add_device.cu", code=ADD_SRC)
    tensors = [_Tensor(int(rt.alloc(64))) for _ in range(3)]
    device.launch(src, "add_f32", 1, BLOCK, [*tensors, 2.0, 16, None])  # compiles the module
    benchmark(device.launch, src, "add_f32", 1, BLOCK, [*tensors, 2.0, 16, None])
    assert _last_kernel_args(rt)[4].dtype == np.int64


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_add_16(benchmark, dev):
    if dev == "cuda" and not gt.cuda.is_available():
        pytest.skip("no CUDA runtime (set GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
    benchmark.group = "launch: gt.add of 16 float32"
    a = gt.arange(16, dtype=gt.float32, device=dev)
    b = gt.ones(16, dtype=gt.float32, device=dev)
    gt.add(a, b)
    benchmark(gt.add, a, b)

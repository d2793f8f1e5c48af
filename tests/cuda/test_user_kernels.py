"""User CUDA kernels (gt.cuda.compile_kernel, gt.cuda.load_inline) and custom ops built on them.

The launches run on the active CUDA runtime (the emulator in CI, CuPy on a GPU) and are checked
against NumPy; the argument checks, headers found through -I with the compile caches keyed by
their text, dynamic shared memory, streams, the profiler's view, gradcheck through a custom op
whose CUDA implementation is a user kernel. Without a GPU, the GPU path is checked too: the
project's NVRTC step builds the user source (NVRTC wheel), and the CuPy driver (against the
stand-in cupy of fake_cupy.py) loads it and converts the arguments.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import gputensor as gt
from gputensor import Tensor
from gputensor.cuda import kernels as user_kernels
from gputensor.kernels.cuda import device as kdevice
from gputensor.kernels.cuda import nvrtc
from gputensor.kernels.cuda.emulator import build as emulator_build

from . import fake_cupy

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
_NVRTC, _WHY = nvrtc.availability()
needs_nvrtc = pytest.mark.skipif(not _NVRTC, reason=f"NVRTC wheel not installed: {_WHY}")

SAXPY = r"""
#include "common.cuh"
template <class T>
__device__ void saxpy_impl(T a, const T* x, T* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    saxpy_impl(a, x, y, n);
}
extern "C" __global__ void saxpy_f64(double a, const double* x, double* y, int n) {
    saxpy_impl(a, x, y, n);
}
"""

MISC = r"""
#include "common.cuh"
// C++ linkage on purpose: NVRTC lowers the name, the emulator launches it by name
__global__ void fill_cpp(float* out, float v, long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = v;
}
extern "C" __global__ void add_or_double(const float* bias, float* out, int n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = bias ? out[i] + bias[i] : 2.0f * out[i];
}
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
    GT_DYNAMIC_SHARED(float, tile);
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    tile[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) tile[t] += tile[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = tile[0];
}
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
extern "C" __global__ void iota64(long long* out, unsigned long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = i;
}
template <class T> __global__ void templated(T* x) { x[0] = T(1); }
"""


@pytest.fixture(scope="module")
def misc():
    return gt.cuda.load_inline("gt_test_misc", cuda_sources=MISC)


def _np(t: Tensor) -> np.ndarray:
    return t.cpu().numpy()


# -- compile_kernel --------------------------------------------------------------------------------
@cuda
def test_saxpy_matches_numpy():
    k = gt.cuda.compile_kernel(SAXPY, "saxpy")
    assert k.signature() == "saxpy(float a, const float* x, float* y, int n)"
    rng = np.random.default_rng(0)
    xn, yn = rng.standard_normal((2, 3000)).astype(np.float32)
    x, y = gt.tensor(xn, device="cuda"), gt.tensor(yn, device="cuda")
    k(4, 128, (2.5, x, y, x.numel()))  # grid-stride: 512 threads cover 3000 elements
    np.testing.assert_allclose(_np(y), np.float32(2.5) * xn + yn, rtol=1e-6)
    # NumPy scalars, tuple grid/block, keyword launch options
    k((2,), (64,), [np.float32(-1.0), x, y, np.int32(3000)], shared_mem=0, stream=None)
    np.testing.assert_allclose(_np(y), np.float32(1.5) * xn + yn, rtol=1e-5, atol=1e-6)
    # a view passes a pointer to its first element
    y2 = gt.zeros(3000, device="cuda")
    k(1, 256, (1.0, x[1000:], y2[10:], 5))
    np.testing.assert_array_equal(_np(y2)[10:15], xn[1000:1005])
    assert not _np(y2)[:10].any() and not _np(y2)[15:].any()


@cuda
def test_load_inline_module(misc):
    assert set(misc.kernels) == {"fill_cpp", "add_or_double", "block_sum", "transpose",
                                 "iota64"}
    assert "block_sum" in dir(misc) and "templated" not in misc.kernels
    out = gt.empty(1000, device="cuda")
    misc.fill_cpp(8, 128, (out, 0.25, out.numel()))
    assert (_np(out) == 0.25).all()
    with pytest.raises(AttributeError, match=r"has no kernel 'nope' \(kernels: fill_cpp, "):
        misc.nope  # noqa: B018
    mod = gt.cuda.load_inline("gt_test_some", cuda_sources=[SAXPY],
                              functions={"saxpy_f64": "y = a * x + y in float64"})
    assert list(mod.kernels) == ["saxpy_f64"] and mod.saxpy_f64.__doc__.startswith("y = a")
    x = gt.arange(10, dtype=gt.float64, device="cuda")
    y = gt.ones(10, dtype=gt.float64, device="cuda")
    mod.saxpy_f64(1, 32, (3.0, x, y, 10))
    np.testing.assert_array_equal(_np(y), 3.0 * np.arange(10) + 1)


def test_load_inline_refuses_what_it_does_not_do():
    from gputensor.utils.cpp_extension import load_inline

    assert load_inline is gt.cuda.load_inline  # where PyTorch code imports it from
    with pytest.raises(NotImplementedError, match="host C.. code .cpp_sources. is not supported"):
        gt.cuda.load_inline("m", cpp_sources="int f();", cuda_sources=SAXPY)
    with pytest.raises(ValueError, match="defines no kernel 'nope'"):
        gt.cuda.load_inline("m", cuda_sources=SAXPY, functions=["nope"])
    with pytest.raises(ValueError, match="name must be a file-name-like identifier"):
        gt.cuda.load_inline("has space", cuda_sources=SAXPY)
    with pytest.raises(ValueError, match="cuda_sources is empty"):
        gt.cuda.load_inline("m", cuda_sources=[])


def test_kernel_name_must_exist():
    with pytest.raises(ValueError, match=r"defines no kernel 'nope' \(its non-template "
                                         r"__global__ kernels: saxpy, saxpy_f64\)"):
        gt.cuda.compile_kernel(SAXPY, "nope")
    with pytest.raises(ValueError, match="template kernel needs an extern \"C\" wrapper"):
        gt.cuda.compile_kernel(MISC, "templated")
    with pytest.raises(ValueError, match="the architecture is the device's"):
        gt.cuda.compile_kernel(SAXPY, "saxpy", ["-arch=sm_80"])


@cuda
def test_null_pointers_two_dim_launches_and_unsigned_scalars(misc):
    out = gt.ones(300, device="cuda")
    misc.add_or_double(2, 128, (None, out, 300))
    assert (_np(out) == 2).all()
    misc.add_or_double(2, 128, (gt.full((300,), 0.5, device="cuda"), out, 300))
    assert (_np(out) == 2.5).all()
    a = np.arange(37 * 45, dtype=np.float32).reshape(37, 45)
    t = gt.empty(45, 37, device="cuda")
    misc.transpose((3, 3), (16, 16), (gt.tensor(a, device="cuda"), t, 37, 45))
    np.testing.assert_array_equal(_np(t), a.T)
    idx = gt.empty(70, dtype=gt.int64, device="cuda")
    misc.iota64(1, 32, (idx, 70))
    np.testing.assert_array_equal(_np(idx), np.arange(70))


@cuda
def test_dynamic_shared_memory(misc):
    xn = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    out = gt.empty(4, device="cuda")
    misc.block_sum(4, 256, (gt.tensor(xn, device="cuda"), out, 1000), shared_mem=256 * 4)
    want = [xn[i * 256:(i + 1) * 256].sum(dtype=np.float64) for i in range(4)]
    np.testing.assert_allclose(_np(out), want, rtol=1e-5)


@cuda
def test_streams():
    k = gt.cuda.compile_kernel(SAXPY, "saxpy")
    x, y = gt.ones(100, device="cuda"), gt.zeros(100, device="cuda")
    s = gt.cuda.Stream()
    k(1, 128, (1.0, x, y, 100), stream=s)
    s.synchronize()
    with gt.cuda.stream(s):
        k(1, 128, (2.0, x, y, 100))
    s.synchronize()
    assert (_np(y) == 3).all()
    with pytest.raises(TypeError, match="stream must be a gputensor.cuda.Stream or None"):
        k(1, 128, (1.0, x, y, 100), stream=0)


@cuda
def test_argument_errors():
    k = gt.cuda.compile_kernel(SAXPY, "saxpy")
    x, y = gt.ones(8, device="cuda"), gt.ones(8, device="cuda")
    with pytest.raises(RuntimeError, match=r"argument 1 \('const float\* x'\): expected a CUDA "
                                           r"tensor, got one on cpu"):
        k(1, 32, (1.0, gt.ones(8), y, 8))
    with pytest.raises(TypeError, match=r"takes 4 arguments, got 3"):
        k(1, 32, (1.0, x, y))
    with pytest.raises(TypeError, match=r"argument 2 \('float\* y'\): a tensor of dtype "
                                        r"gputensor.float64 does not match the pointee type "
                                        r"'float' \(expected gputensor.float32\)"):
        k(1, 32, (1.0, x, y.double(), 8))
    with pytest.raises(TypeError, match=r"argument 0 \('float a'\): a scalar parameter takes a "
                                        r"Python or NumPy number, got a Tensor"):
        k(1, 32, (gt.tensor(1.0, device="cuda"), x, y, 8))
    with pytest.raises(TypeError, match=r"argument 1 .*a pointer parameter takes a CUDA tensor "
                                        r"or None, got float"):
        k(1, 32, (1.0, 3.0, y, 8))
    with pytest.raises(TypeError, match=r"parameter 'n' \(int\): expected an integer"):
        k(1, 32, (1.0, x, y, 8.0))  # the runtime's converter, from the parsed parameter types
    with pytest.raises(OverflowError, match=r"'n'.*does not fit"):
        k(1, 32, (1.0, x, y, 2**40))
    with pytest.raises(ValueError, match=r"block\[0\] = 2048 is outside \[1, 1024\]"):
        k(1, 2048, (1.0, x, y, 8))
    with pytest.raises(ValueError, match=r"block \(64, 32\) has 2048 threads"):
        k(1, (64, 32), (1.0, x, y, 8))
    with pytest.raises(ValueError, match="grid must be an int or a tuple"):
        k("1", 32, (1.0, x, y, 8))
    with pytest.raises(ValueError, match="shared_mem must be a non-negative int"):
        k(1, 32, (1.0, x, y, 8), shared_mem=-1)
    with pytest.raises(TypeError, match="args must be a tuple or list"):
        k(1, 32, x)
    assert (_np(y) == 1).all()  # nothing ran


@cuda
def test_user_headers_key_the_compile_cache(tmp_path, monkeypatch):
    """-I<dir> finds a user header; an edited header compiles anew (both runtimes' disk caches
    and the in-process program cache key every included header's text), an unchanged one is
    reused without running the compiler."""
    calls = []
    real_gxx, real_nvrtc = emulator_build._invoke_compiler, nvrtc.compile_program
    monkeypatch.setattr(emulator_build, "_invoke_compiler",
                        lambda cmd: calls.append("g++") or real_gxx(cmd))
    monkeypatch.setattr(nvrtc, "compile_program",
                        lambda *a, **k: calls.append("nvrtc") or real_nvrtc(*a, **k))
    inc = tmp_path / "include"
    inc.mkdir()
    header = inc / "user_scale.cuh"
    src = ('#include "user_scale.cuh"\n'
           'extern "C" __global__ void scaled(float* y, int n) {\n'
           '    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = USER_SCALE * y[i];\n'
           '}\n')
    got, counts = [], []
    for i, (text, options) in enumerate((("2.0f", [f"-I{inc}"]), ("30.0f", ["-I", str(inc)]),
                                         ("30.0f", [f"--include-path={inc}"]))):
        if i == 2:
            user_kernels._programs.clear()  # the disk caches must answer this one
        else:
            header.write_text(f"#define USER_SCALE {text}\n")
            os.utime(header, ns=(10**18 + i, 10**18 + i))
        y = gt.ones(4, device="cuda")
        gt.cuda.compile_kernel(src, "scaled", options)(1, 32, (y, 4))
        got.append(float(_np(y)[0]))
        counts.append(len(calls))
    assert got == [2.0, 30.0, 30.0]
    assert counts[0] >= 1 and counts[1] > counts[0] and counts[2] == counts[1]
    mod = gt.cuda.load_inline("gt_test_scaled", cuda_sources=src,
                              extra_include_paths=[str(inc)])
    y = gt.ones(4, device="cuda")
    mod.scaled(1, 32, (y, 4))
    assert float(_np(y)[0]) == 30.0


@cuda
def test_launches_are_profiled():
    k = gt.cuda.compile_kernel(SAXPY, "saxpy").compile()
    x, y = gt.ones(64, device="cuda"), gt.zeros(64, device="cuda")
    with gt.profiler.profile() as prof:
        k((2, 1), (32,), (1.0, x, y, 64), shared_mem=16)
    (ev,) = [e for e in prof.events() if e.name == "saxpy"]
    assert ev.kind == "launch" and ev.device == "cuda:0"
    assert ev.extra["grid"] == [2, 1] and ev.extra["block"] == [32]
    assert ev.extra["shared_bytes"] == 16 and ev.extra["source"] == "saxpy.cu"
    assert "saxpy" in prof.key_averages().table()


# -- custom ops whose CUDA implementation is a user kernel -----------------------------------------
# compile_kernel compiles on first launch (load_inline would compile at import)
_SAXPY = {gt.float32: gt.cuda.compile_kernel(SAXPY, "saxpy"),
          gt.float64: gt.cuda.compile_kernel(SAXPY, "saxpy_f64")}


@gt.library.custom_op("gtuser::saxpy", mutates_args=(),
                      cost=lambda inputs, out: (3 * out.numel() * out.element_size(),
                                                2 * out.numel()))
def saxpy_op(a: float, x: Tensor, y: Tensor) -> Tensor:
    return a * x + y


@saxpy_op.register_kernel("cuda")
def _saxpy_cuda(a, x, y):
    if x.shape != y.shape or x.dtype != y.dtype or x.dtype not in (gt.float32, gt.float64):
        raise ValueError("gtuser::saxpy on CUDA takes float32/float64 x and y of one shape")
    out = y.contiguous().clone()
    n = out.numel()
    _SAXPY[x.dtype](kdevice.grid_for(n), kdevice.BLOCK, (a, x.contiguous(), out, n))
    return out


saxpy_op.register_autograd(lambda ctx, g: (None, g * ctx.a, g),
                           setup_context=lambda ctx, inputs, output: setattr(ctx, "a",
                                                                             inputs[0]))
saxpy_op.register_fake(lambda a, x, y: gt.empty_like(y))


@gt.library.custom_op("gtuser::fill_", mutates_args={"out"})
def fill_(out: Tensor, v: float) -> None:
    out.fill_(v)


_FILL = gt.cuda.compile_kernel(MISC, "fill_cpp")


@fill_.register_kernel("cuda")
def _fill_cuda(out, v):
    _FILL(kdevice.grid_for(out.numel()), kdevice.BLOCK, (out, v, out.numel()))


@cuda
def test_custom_op_runs_the_user_kernel_and_gradchecks():
    x = gt.randn(1000, device="cuda")
    y = gt.randn(1000, device="cuda")
    with gt.profiler.profile() as prof:
        out = saxpy_op(3.0, x, y)
    np.testing.assert_allclose(_np(out), 3 * _np(x) + _np(y), rtol=1e-6)
    (ev,) = [e for e in prof.events() if e.name == "gtuser::saxpy"]
    assert (ev.bytes, ev.flops) == (12000, 2000) and ev.backend == "CUDA"
    assert [c.name for c in ev.children if c.kind == "launch"] == ["saxpy"]
    row = next(r for r in prof.key_averages().table().splitlines()
               if r.startswith("gtuser::saxpy"))
    assert row.split()[-3] != "-"
    xd = gt.randn(7, dtype=gt.float64, device="cuda", requires_grad=True)
    yd = gt.randn(7, dtype=gt.float64, device="cuda", requires_grad=True)
    assert gt.autograd.gradcheck(lambda x, y: saxpy_op(-1.5, x, y), (xd, yd))
    assert gt.library.opcheck(saxpy_op, (2.0, xd.detach(), yd.detach())) == {
        "test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
        "test_faketensor": "SUCCESS"}
    # the CPU tensors take the default implementation
    np.testing.assert_allclose(_np(saxpy_op(3.0, x.cpu(), y.cpu())), _np(out), rtol=1e-6)


@cuda
def test_a_kernel_that_writes_a_tensor_bumps_its_version_through_mutates_args():
    w = gt.ones(5, device="cuda", requires_grad=True)
    t = gt.ones(5, device="cuda")
    out = w * t
    v0 = t._version
    fill_(t, 7.0)
    assert (_np(t) == 7).all() and t._version == v0 + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    assert gt.library.opcheck(fill_, (gt.zeros(3, device="cuda"), 1.0),
                              test_utils="test_schema") == {"test_schema": "SUCCESS"}


# -- the GPU path without a GPU --------------------------------------------------------------------
@needs_nvrtc
def test_nvrtc_builds_user_kernels_and_keys_user_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    compiles = []
    real = nvrtc.compile_program
    monkeypatch.setattr(nvrtc, "compile_program",
                        lambda *a, **k: compiles.append(a[1]) or real(*a, **k))
    b = gt.cuda.compile_kernel(MISC, "fill_cpp").nvrtc_check("sm_80")
    assert b.image[:4] == b"\x7fELF" and b.lowered_names["fill_cpp"].startswith("_Z8fill_cpp")
    b = gt.cuda.load_inline("gt_test_nvrtc", cuda_sources=SAXPY).saxpy.nvrtc_check("compute_80")
    assert b.lowered_names == {"saxpy": "saxpy", "saxpy_f64": "saxpy_f64"}
    inc = tmp_path / "inc"
    inc.mkdir()
    src = ('#include "k.cuh"\n'
           'extern "C" __global__ void probe(long long* out) { out[0] = K_VALUE; }\n')
    keys = []
    for i, value in enumerate((1, 22, 22)):
        (inc / "k.cuh").write_text(f"#define K_VALUE {value}\n")
        os.utime(inc / "k.cuh", ns=(10**18 + i, 10**18 + i))
        b = gt.cuda.compile_kernel(src, "probe", [f"-I{inc}"]).nvrtc_check("compute_80")
        assert f", {value};" in b.image.decode(errors="replace")
        keys.append(b.key)
    assert keys[0] != keys[1] == keys[2]
    # (with a CUDA runtime, load_inline also built gt_test_nvrtc for the device itself)
    assert compiles[0] == "fill_cpp" and "gt_test_nvrtc" in compiles
    assert compiles.count("probe") == 2  # the third probe build came from the cache


@needs_nvrtc
def test_the_cupy_driver_loads_and_launches_a_user_kernel(tmp_path, monkeypatch):
    gt.cuda.is_available()  # pick the real runtime first: the stand-in must never become it
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    cp = fake_cupy.install(monkeypatch)
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    rt = CupyRuntime()
    monkeypatch.setattr(kdevice, "_runtime", rt)
    try:
        k = gt.cuda.compile_kernel(MISC, "fill_cpp")
        d = rt.alloc(64)
        k((2, 1), 32, (d, 1.5, 16), shared_mem=128)
        load = next(e for e in cp.log if e[0] == "module_load")
        assert load[1] == b"\x7fELF"  # the project's NVRTC CUBIN for the device's sm_90
        assert list((tmp_path / "cuda_nvrtc").glob("fill_cpp-*.cubin"))
        name, grid, block, args, shared, stream = next(
            e for e in reversed(cp.log) if e[0] == "kernel")[1:]
        assert name.startswith("_Z8fill_cpp")  # the lowered C++ name
        assert (grid, block, shared, stream) == ((2, 1), (32,), 128, None)
        assert [a.dtype for a in args] == [np.uint64, np.float32, np.int64]
        assert int(args[0]) == int(d) and args[1] == 1.5 and args[2] == 16
        if gt.cuda.is_available() and not isinstance(gt.cuda.devices._require(), CupyRuntime):
            with pytest.raises(RuntimeError, match="belongs to another CUDA runtime"):
                k(1, 32, (gt.ones(4, device="cuda"), 1.0, 4))
    finally:
        nvrtc.prefer_major(None)

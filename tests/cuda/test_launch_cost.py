"""The launch path's prepared argument handling (issue 4: launch cost), checked for results, not
speed (benchmarks/test_bench_launch.py times it):

- the emulator packs a launch into one blob with a per-kernel struct format; its fast path must
  give the same bytes as the checked path (``scalar_value``) for every value it accepts;
- the CuPy driver converts each argument with a per-kernel converter (against a stand-in
  ``cupy``): the values the kernel receives must have the declared C types;
- ``device.launch`` passes tensors as pointers through either driver;
- the elementwise kernels' vectorised contiguous path (16-byte chunks) gives the scalar path's
  results for aligned, unaligned, tail and mixed-dtype operands, and compiles to vector
  loads with NVRTC.
"""

from __future__ import annotations

import math
import struct
import types
from pathlib import Path

import numpy as np
import pytest

import gputensor as gt
from gputensor import _dtype as D
from gputensor.kernels.cuda import device, nvrtc
from gputensor.kernels.cuda import elementwise_codegen as E
from gputensor.kernels.cuda.emulator import compile_source
from gputensor.kernels.cuda.emulator_driver import EmulatorRuntime
from gputensor.kernels.cuda.runtime import DevicePtr, Param, scalar_value
from gputensor.kernels.registry import BACKENDS, OPS

from . import fake_cupy as _fake

KERNELS = Path(__file__).parent / "kernels"

_SCALARS_SRC = r"""#include <cuda_fp16.h>
extern "C" __global__ void every(float* out, const float* x, float f, double d, int i32,
                                 unsigned u32, long long i64, unsigned long long u64, short i16,
                                 unsigned char u8, signed char i8, bool flag, __half h) {
    double* o = reinterpret_cast<double*>(out);
    o[0] = f; o[1] = d; o[2] = i32; o[3] = u32; o[4] = (double)i64; o[5] = (double)u64;
    o[6] = i16; o[7] = u8; o[8] = i8; o[9] = flag; o[10] = __half2float(h);
    o[11] = x == nullptr ? -1.0 : 1.0;
}
"""


@pytest.fixture(scope="module")
def every():
    return compile_source(_SCALARS_SRC, "launch_cost_every")


def _param(k, name: str) -> Param:
    return next(p for p in k.params if p.name == name)


# ---- the emulator's packing ---------------------------------------------------------------------
FLT_MAX = float(np.finfo(np.float32).max)
CASES = {
    "f": [0.1, -0.0, 1, 3, np.float64(1 / 3), np.float32(2.5), np.float16(0.1), np.int64(-7),
          FLT_MAX, -FLT_MAX, 2**24 + 1, 1e-45, 1e-40, math.inf, -math.inf, math.nan],
    "d": [0.1, 1e308, -1e-320, 2**62 + 1, np.float32(0.1), math.nan, math.inf, np.uint64(5)],
    "i32": [0, -1, 2**31 - 1, -(2**31), True, np.int64(12), np.uint8(200), np.int32(-5)],
    "u32": [0, 2**32 - 1, np.uint32(7), np.int16(3), False],
    "i64": [-(2**63), 2**63 - 1, np.uint64(2**63 - 1), np.int8(-3)],
    "u64": [0, 2**64 - 1, np.uint64(2**64 - 1)],
    "i16": [-(2**15), 2**15 - 1, np.int16(-2)],
    "u8": [0, 255, np.uint8(9)],
    "i8": [-128, 127],
    "flag": [True, False, np.True_, np.False_, 0, 1, np.int64(1)],
    "h": [0.1, 1, 65504.0, -65504.0, 1e-8, 6e-8, math.inf, math.nan, np.float16(0.3),
          np.float32(2.0), 65519.0],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_packing_matches_checked_conversion(every, name):
    """Every value the fast path packs comes out as the bytes scalar_value's conversion packs
    (the reference: the emulator's behaviour before packing was prepared per kernel)."""
    k = every.kernel("every")
    p = _param(k, name)
    idx = k.params.index(p)
    base = [0, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, False, 0.0]
    for value in CASES[name]:
        args = list(base)
        args[idx] = value
        blob = k.pack(1, 1, 0, args)
        ref = scalar_value("every", p, value)
        fmt = {"float32": "<f", "float64": "<d", "bool": "<?"}.get(ref.dtype.name)
        expected = struct.pack(fmt, ref) if fmt else ref.tobytes()
        slot = blob[48 + 8 * idx:48 + 8 * idx + len(expected)]
        assert slot == expected, (name, value, slot, expected)


@pytest.mark.parametrize("name,value,error,match", [
    ("i32", 2**31, OverflowError, r"parameter 'i32' \(int\): 2147483648 does not fit"),
    ("u32", -1, OverflowError, "does not fit"),
    ("u64", 2**64, OverflowError, "does not fit"),
    ("flag", 2, OverflowError, r"parameter 'flag' \(bool\): 2 does not fit"),
    ("i32", 1.0, TypeError, r"parameter 'i32' \(int\): expected an integer, got float"),
    ("i64", np.float64(2.0), TypeError, "expected an integer"),
    ("f", True, TypeError, r"parameter 'f' \(float\): expected a real number, got bool"),
    ("f", "1.0", TypeError, "expected a real number, got str"),
    ("f", 1e39, OverflowError, r"1e\+39 overflows float"),
    ("h", 70000.0, OverflowError, "overflows __half"),
    ("d", np.ones(2), TypeError, r"expected a scalar, got an array of shape \(2,\)"),
    ("d", 1j, TypeError, "expected a real number, got complex"),
])
def test_bad_scalars_keep_their_errors(every, name, value, error, match):
    k = every.kernel("every")
    args: list = [None, None, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, False, 0.0]
    args[k.params.index(_param(k, name))] = value
    with pytest.raises(error, match=match):
        every.launch("every", 1, 1, args)


def test_scalars_reach_the_kernel(every):
    out = np.zeros(24, np.float32)  # the kernel writes 12 doubles through its float*
    x = np.zeros(1, np.float32)
    every.launch("every", 1, 1, [out, x, 0.1, np.float32(0.25), -3, 2**32 - 1, -(2**40),
                                 2**64 - 1, np.int16(-9), 255, -128, np.True_, 0.5])
    got = out.view(np.float64)
    assert got[0] == np.float32(0.1) and got[1] == 0.25
    assert got[2:9].tolist() == [-3, 2**32 - 1, -(2**40), float(2**64 - 1), -9, 255, -128]
    assert got[9] == 1 and got[10] == 0.5 and got[11] == 1
    every.launch("every", (1, 1), (1, 1, 1), [out, None, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0,
                                              False, 0.0])
    assert got[11] == -1  # None is a null pointer


def test_launch_config_errors(every):
    args = [np.zeros(24, np.float32), None, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, False, 0.0]
    with pytest.raises(ValueError, match=r"grid\[0\] = 0 is outside"):
        every.launch("every", 0, 1, args)
    with pytest.raises(ValueError, match=r"block\[0\] = 1025 is outside"):
        every.launch("every", 1, 1025, args)
    with pytest.raises(ValueError, match="must be an int or 1-3 ints"):
        every.launch("every", 1.5, 1, args)
    with pytest.raises(ValueError, match="shared_bytes must be a non-negative int"):
        every.launch("every", 1, 1, args, shared_bytes=-1)
    with pytest.raises(TypeError, match=r"takes 13 arguments \(float\* out, .*got 2"):
        every.launch("every", 1, 1, args[:2])
    every.launch("every", np.int64(1), np.int32(1), args, shared_bytes=np.uint16(0))


def test_driver_translates_device_pointers(every):
    rt = EmulatorRuntime()
    k = rt.get_kernel(every, "every")
    out = rt.alloc(96)
    x = rt.alloc(8)
    args = [out, x + 4, 1.5, 2.0, 3, 4, 5, 6, 7, 8, 9, True, 10.0]
    rt.launch(k, 1, 1, 0, args)
    host = np.empty(12)
    rt.memcpy_dtoh(host, out)
    assert host.tolist() == [1.5, 2.0, 3, 4, 5, 6, 7, 8, 9, 1, 10.0, 1.0]
    for null in (0, DevicePtr(0), None):  # NULL (an empty tensor's pointer) and plain 0 too
        args[1] = null
        host[11] = 0
        rt.launch(k, 1, 1, 0, args)
        rt.memcpy_dtoh(host, out)
        assert host[11] == -1
    for bad, error, match in [(int(x), TypeError, r"parameter 'x' \(const float\*\): expected "
                                                  r"a DevicePtr, got int"),
                              (DevicePtr(12345), IndexError, "illegal device address"),
                              ("x", TypeError, "expected a DevicePtr, got str")]:
        args[1] = bad
        with pytest.raises(error, match=match):
            rt.launch(k, 1, 1, 0, args)
    with pytest.raises(TypeError, match="takes 13 arguments, got 12"):
        rt.launch(k, 1, 1, 0, args[:12])


# ---- the CuPy driver against a stand-in cupy ----------------------------------------------------
@pytest.fixture
def fake_cupy(monkeypatch):
    yield _fake.install(monkeypatch)
    nvrtc.prefer_major(None)


def test_cupy_arguments_have_the_declared_types(fake_cupy):
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    rt = CupyRuntime()
    k = rt.get_kernel(rt.compile(_SCALARS_SRC, "every"), "every")
    out = rt.alloc(96)
    rt.launch(k, 3, 64, 0, [out, None, 0.1, 2, -3, 2**32 - 1, np.int8(-4), 2**64 - 1, 7, 255,
                            -128, True, 0.5])
    name, grid, block, args, shared, stream = fake_cupy.log[-1][1:]
    assert (name, grid, block, shared, stream) == ("every", (3,), (64,), 0, None)
    expected = [(np.uint64, int(out)), (np.uint64, 0), (np.float32, np.float32(0.1)),
                (np.float64, 2.0), (np.int32, -3), (np.uint32, 2**32 - 1), (np.int64, -4),
                (np.uint64, 2**64 - 1), (np.int16, 7), (np.uint8, 255), (np.int8, -128),
                (np.bool_, True), (np.uint16, 0x3800)]  # __half 0.5 as its bit pattern
    assert [type(a) for a in args] == [t for t, _ in expected]
    assert [a.item() for a in args] == [v.item() if isinstance(v, np.generic) else v
                                        for _, v in expected]
    # Everything the fast converters take matches the checked conversion, bit for bit.
    for p, conv in zip(k.params, k.converters, strict=True):
        if p.pointer:
            continue
        for value in CASES.get(p.name, []):
            ref = scalar_value("every", p, value)
            got = conv(value)
            assert type(got) is type(ref) and got.tobytes() == ref.tobytes(), (p.name, value)


def test_cupy_argument_errors(fake_cupy):
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    rt = CupyRuntime()
    k = rt.get_kernel(rt.compile(_SCALARS_SRC, "every"), "every")
    out = rt.alloc(96)
    good = [out, None, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, False, 0.0]
    launches = sum(1 for e in fake_cupy.log if e[0] == "kernel")
    for i, bad, error, match in [
            (4, 2**31, OverflowError, r"'i32' \(int\): 2147483648 does not fit"),
            (4, 1.0, TypeError, "expected an integer, got float"),
            (2, 1e39, OverflowError, "overflows float"),
            (2, True, TypeError, "expected a real number, got bool"),
            (11, 3, OverflowError, "3 does not fit"),
            (0, int(out), TypeError, r"'out' \(float\*\): expected a DevicePtr, got int")]:
        args = list(good)
        args[i] = bad
        with pytest.raises(error, match=match):
            rt.launch(k, 1, 1, 0, args)
    with pytest.raises(TypeError, match="takes 13 arguments"):
        rt.launch(k, 1, 1, 0, good[:3])
    assert sum(1 for e in fake_cupy.log if e[0] == "kernel") == launches  # nothing launched
    args = list(good)
    args[2], args[3] = math.inf, math.nan  # non-finite values are not overflows
    rt.launch(k, 1, 1, 0, args)
    sent = fake_cupy.log[-1][4]
    assert sent[2] == np.inf and sent[2].dtype == np.float32 and np.isnan(sent[3])


# ---- device.launch on tensors -------------------------------------------------------------------
class _FakeTensor:
    """Just what ``device.ptr`` reads from a CUDA tensor."""

    def __init__(self, address: int, offset: int, itemsize: int) -> None:
        self._storage = types.SimpleNamespace(
            _buf=types.SimpleNamespace(ptr=DevicePtr(address), size=64),
            device=types.SimpleNamespace(type="cuda"))
        self._offset = offset
        self._dtype = types.SimpleNamespace(itemsize=itemsize)


@pytest.mark.parametrize("driver", ["emulator", "cupy"])
def test_device_launch_passes_tensors_as_pointers(monkeypatch, driver):
    if driver == "cupy":
        cp = _fake.install(monkeypatch)
        from gputensor.kernels.cuda.cupy_driver import CupyRuntime

        rt = CupyRuntime()
        monkeypatch.setattr(nvrtc, "_preferred_major", None)
    else:
        rt = EmulatorRuntime()
    monkeypatch.setattr(device, "_runtime", rt)
    src = device.CudaSource("launch_cost_device.cu", code=_SCALARS_SRC)
    out = rt.alloc(128)
    t = _FakeTensor(int(out), 2, 4)  # element 2 of a float tensor: 8 bytes in
    args = [t, None, 1.0, 2.0, 3, 4, 5, 6, 7, 8, 9, True, 0.25]
    device.launch(src, "every", 1, 1, args)
    if driver == "cupy":
        sent = cp.log[-1][4]
        assert sent[0] == int(out) + 8 and sent[0].dtype == np.uint64
        assert sent[2].dtype == np.float32 and sent[12] == np.uint16(0x3400)
    else:
        host = np.empty(12)
        rt.memcpy_dtoh(host, out + 8)
        assert host.tolist() == [1.0, 2.0, 3, 4, 5, 6, 7, 8, 9, 1, 0.25, -1.0]
    seen = []
    monkeypatch.setattr(device, "launch_observer",
                        lambda s, n, g, b, sh, run: (seen.append((s, n, g, b, sh)), run()))
    device.launch(src, "every", 1, 1, args)
    assert seen == [("launch_cost_device.cu", "every", 1, 1, 0)]


# ---- the vectorised elementwise path ------------------------------------------------------------
def test_vector_width():
    f32, f64, f16, b = D.float32, D.float64, D.float16, D.bool
    spec = E.KernelSpec("add", "a + b", (), f32, f32, (f32, f32))
    assert E.vector_width(spec) == 4
    assert E.vector_width(E.KernelSpec("add", "a + b", (), f64, f64, (f64, None))) == 2
    assert E.vector_width(E.KernelSpec("neg", "-a", (), f16, f16, (f16,))) == 8
    assert E.vector_width(E.KernelSpec("lt", "a < b", (), b, f32, (f32, f32))) == 4
    assert E.vector_width(E.KernelSpec("not", "not a", (), b, b, (b,))) == 16
    c64 = D.complex64
    assert E.vector_width(E.KernelSpec("neg", "-a", (), c64, c64, (c64,))) == 1
    assert "ew_vec" in E.kernel_source(spec) and "% 16 == 0" in E.kernel_source(spec)
    assert "ew_vec" not in E.kernel_source(E.KernelSpec("neg", "-a", (), c64, c64, (c64,)))


@pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime")
def test_elementwise_grid_covers_one_vector_chunk_per_thread(monkeypatch):
    """The launcher sizes the grid by vector chunks (4 float32 per thread), bounded by
    MAX_GRID: the grid-stride loop covers the rest."""
    xs = [gt.zeros(n, device="cuda") for n in (1, 4 * E.BLOCK * 8, 8 * E.BLOCK * device.MAX_GRID)]
    grids = []
    monkeypatch.setattr(device, "launch_observer",
                        lambda s, n, g, b, sh, run: (grids.append((g, b)), run()))
    for x in xs:
        x + x
    assert grids == [(1, E.BLOCK), (8, E.BLOCK), (device.MAX_GRID, E.BLOCK)]


cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime")


def _offset_view(a: np.ndarray, offset: int) -> gt.Tensor:
    """``a``'s values on the device, starting ``offset`` elements past an aligned block."""
    t = gt.empty(a.size + offset, dtype=gt.from_numpy(a[:0]).dtype, device="cuda")[offset:]
    return t.copy_(gt.from_numpy(a))


def _launch(name: str, out: gt.Tensor, inputs: list, params: list, compute: D.dtype) -> None:
    BACKENDS["cuda", "strided"].kernel(name)(out, inputs, params, compute)


@cuda
@pytest.mark.parametrize("n", [1, 7, 8, 33, 1000, 4099])
@pytest.mark.parametrize("offsets", [(0, 0, 0), (1, 0, 0), (0, 0, 3)])
def test_vectorised_add_matches_numpy(n, offsets):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = _offset_view(np.full(n, np.nan, np.float32), offsets[0])
    xs, ys = _offset_view(x, offsets[1]), _offset_view(y, offsets[2])
    _launch("add", out, [xs, ys], [2.0], D.float32)
    np.testing.assert_array_equal(out.cpu().numpy(), x + np.float32(2.0) * y)


@cuda
@pytest.mark.parametrize("op,out_dt,in_dt,compute", [
    ("lt", np.bool_, np.float32, D.float32),       # 1-byte output, 4-byte inputs: V = 4
    ("add", np.float64, np.float64, D.float64),    # V = 2
    ("mul", np.float16, np.float16, D.float16),    # V = 8, computed in float
    ("add", np.int8, np.int8, D.int8),             # V = 16, wrapping
    ("maximum", np.int64, np.int64, D.int64),      # V = 2
])
def test_vectorised_mixed_dtypes(op, out_dt, in_dt, compute):
    n = 203  # several chunks and a tail for every width
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(n) * 50).astype(in_dt)
    y = (rng.standard_normal(n) * 50).astype(in_dt)
    out = _offset_view(np.zeros(n, out_dt), 0)
    params = [1] if OPS[op].params else []
    _launch(op, out, [_offset_view(x, 0), _offset_view(y, 0)], params, compute)
    ref = {"lt": np.less, "add": np.add, "mul": np.multiply, "maximum": np.maximum}[op]
    with np.errstate(over="ignore"):
        expected = ref(x, y)
    np.testing.assert_array_equal(out.cpu().numpy(), expected.astype(out_dt))


def test_vector_path_compiles_to_vector_loads_with_nvrtc():
    from gputensor.kernels.cuda import nvrtc

    ok, why = nvrtc.availability()
    if not ok:
        pytest.skip(f"NVRTC wheel not installed: {why}")
    specs = [E.KernelSpec("add", "a + b", (), D.float32, D.float32, (D.float32, D.float32)),
             E.KernelSpec("add", "a + b", (), D.float16, D.float16, (D.float16, D.float16))]
    ptx = nvrtc.compile_program(E.module_source(specs), "vec.cu", arch="sm_80").ptx
    assert "ld.global.nc.v4.f32" in ptx and "st.global.v4.f32" in ptx
    assert "ld.global.nc.v4.u32" in ptx  # 8 halves as one 16-byte load


@pytest.mark.parametrize("compute", [D.float32, D.float64, D.float16, D.bfloat16, D.int32,
                                     D.int8, D.uint8, D.int64, D.bool])
def test_elementwise_scalar_fast_path_matches_general_conversion(monkeypatch, compute):
    """Python numbers that skip the NumPy round trip reach the kernel with the same bits."""
    values = [0, 1, -1, 2**31, 2**53, 2**53 + 1, -(2**63), 2**63 - 1, 0.1, 1e39, -1e39,
              3.4028235e38, 1e-45, math.inf, math.nan, -0.0, 255, 256, -129, True,
              np.float32(2.5), 1e308]
    fast = [E._scalar_param(v, compute) for v in values]
    monkeypatch.setattr(E, "_FAST_PARAM", {})
    general = [E._scalar_param(v, compute) for v in values]
    if compute.is_floating_point:
        fmt = "<d" if compute == D.float64 else "<f"
        assert [struct.pack(fmt, v) for v in fast] == [struct.pack(fmt, v) for v in general]
    else:
        assert fast == general and [type(v) for v in fast] == [type(v) for v in general]

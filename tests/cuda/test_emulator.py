"""The CUDA-on-CPU emulator: kernels from tests/cuda/kernels/*.cu run through g++ + the shim."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from gputensor.kernels.cuda.emulator import (
    CompileError,
    KernelError,
    build,
    clear_memory_cache,
    compile_source,
    parse_kernels,
)

KERNELS = Path(__file__).parent / "kernels"


def _load(name: str):
    return compile_source((KERNELS / f"{name}.cu").read_text(), name)


@pytest.fixture(scope="module")
def vector_add():
    return _load("vector_add")


@pytest.fixture(scope="module")
def reduce_mod():
    return _load("reduce")


@pytest.fixture(scope="module")
def matmul():
    return _load("matmul")


@pytest.fixture(scope="module")
def templates():
    return _load("templates")


@pytest.fixture(scope="module")
def misc():
    return _load("misc")


def _run_with_timeout(fn, timeout: float = 20.0):
    """Run fn in a thread; fail (instead of hanging the suite) if it does not finish."""
    result: dict = {}

    def target():
        try:
            fn()
        except BaseException as exc:  # handed back to the test
            result["exc"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "kernel launch hung"
    return result.get("exc")


# ---- correctness ---------------------------------------------------------------------------
@pytest.mark.parametrize("grid,block", [(1, 32), (7, 96), (64, 256)])
def test_vector_add_grid_stride(vector_add, grid, block):
    n = 10_007
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.full(n, -1.0, np.float32)
    vector_add.launch("add", grid, block, [x, y, out, n])
    np.testing.assert_array_equal(out, x + y)


def test_axpy_accepts_int_for_float(vector_add):
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    vector_add.launch("axpy_inplace", 4, 32, [2, x, y, 100])
    np.testing.assert_array_equal(y, 1 + 2 * x)


def test_block_sum_shared_and_shuffles(reduce_mod):
    n = 1 << 16
    x = np.random.default_rng(1).random(n, dtype=np.float32)
    out = np.zeros(1, np.float32)
    reduce_mod.launch("block_sum", 32, 256, [x, out, n])
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)


def test_full_mask_on_partial_warp_is_an_error(reduce_mod):
    # 80 threads: the third warp has 16 lanes, so a full-mask shuffle names lanes that can never
    # arrive (undefined behaviour on a GPU): reported instead of silently inventing values.
    x = np.ones(1000, np.float32)
    with pytest.raises(KernelError, match=r"__shfl_xor_sync: mask 0xffffffff names lanes missing "
                                          r"from a partial warp \(warp 2 has 16 threads"):
        reduce_mod.launch("block_sum", 3, 80, [x, np.zeros(1, np.float32), 1000])


def test_tree_sum_dynamic_shared(reduce_mod):
    n, block = 5000, 128
    grid = (n + block - 1) // block
    x = np.random.default_rng(3).standard_normal(n)
    partials = np.empty(grid)
    reduce_mod.launch("tree_sum", grid, block, [x, partials, n], shared_bytes=block * 8)
    np.testing.assert_allclose(partials.sum(), x.sum(), rtol=1e-12)
    np.testing.assert_allclose(partials[0], x[:block].sum(), rtol=1e-12)


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (37, 50, 23)])
def test_tiled_matmul(matmul, m, n, k):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    t = 16
    grid = ((n + t - 1) // t, (m + t - 1) // t)
    matmul.launch("matmul_tiled", grid, (t, t), [a, b, c, m, n, k], shared_bytes=2 * t * t * 4)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_atomic_histogram(misc):
    n, nbins = 20_000, 37
    values = np.random.default_rng(5).integers(0, 1000, n).astype(np.int32)
    bins = np.zeros(nbins, np.uint32)
    misc.launch("histogram", 16, 128, [values, bins, n, nbins])
    np.testing.assert_array_equal(bins, np.bincount(values % nbins, minlength=nbins))


def test_ballot_any_all(misc):
    x = -np.ones(128, np.float32)  # 4 warps
    x[32:64] = 1.0  # warp 1: all positive
    x[64 + 3] = x[64 + 31] = 2.0  # warp 2: two lanes
    ballots = np.zeros(4, np.uint32)
    any_ = np.zeros(4, np.int32)
    all_ = np.zeros(4, np.int32)
    misc.launch("votes", 2, 64, [x, ballots, any_, all_])
    assert ballots.tolist() == [0, 0xFFFFFFFF, (1 << 3) | (1 << 31), 0]
    assert any_.tolist() == [0, 1, 1, 0]
    assert all_.tolist() == [0, 1, 0, 0]


def test_shuffle_variants_with_width(misc):
    x = (np.arange(64, dtype=np.int32) * 10 + 1)
    outs = [np.zeros(64, np.int32) for _ in range(4)]
    misc.launch("shuffles", 1, 64, [x, *outs])
    lane = np.arange(64)
    seg = lane & ~7
    np.testing.assert_array_equal(outs[0], x[seg + 3])
    up = np.where(lane - 2 >= seg, lane - 2, lane)
    np.testing.assert_array_equal(outs[1], x[up])
    down = np.where(lane + 2 < seg + 8, lane + 2, lane)
    np.testing.assert_array_equal(outs[2], x[down])
    np.testing.assert_array_equal(outs[3], x[lane ^ 5])


def test_half_round_trip(misc):
    x = np.array([0.0, 1.0, -2.5, 1e-3, 65504.0, 3.14159, 1e-8, 70000.0], np.float32)
    out = np.empty_like(x)
    bits = np.empty(x.size, np.uint16)
    misc.launch("half_roundtrip", 1, 32, [x, out, bits, 0.5, x.size])
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)  # 70000 -> inf, like __float2half
    np.testing.assert_array_equal(bits, h.view(np.uint16))
    np.testing.assert_array_equal(out, (h * np.float16(0.5)).astype(np.float32))


def test_half_pointers(misc):
    x = np.array([1.5, -3.0, 0.1], np.float16)
    y = np.empty_like(x)
    misc.launch("half_in", 1, 32, [x, y, 3])
    np.testing.assert_array_equal(y, x + x)


def test_bfloat16(templates):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.5, 3.14159, -2e5, 7e-3, 0.0], ml_dtypes.bfloat16)
    y = np.empty_like(x)
    templates.launch("bf16_scale", 1, 32, [x, y, 3.0, x.size])
    np.testing.assert_array_equal(y, (x.astype(np.float32) * 3).astype(ml_dtypes.bfloat16))


def test_shared_memory_in_template_device_function(templates):
    # Each instantiation of a templated helper gets its own per-block __shared__ array.
    x = np.random.default_rng(7).random(256, dtype=np.float32)
    out = np.empty_like(x)
    templates.launch("totals_f", 2, 128, [x, out])
    np.testing.assert_allclose(out.reshape(2, 128),
                               np.repeat(x.reshape(2, 128).sum(1, keepdims=True), 128, 1),
                               rtol=1e-5)
    xi = np.arange(256, dtype=np.int32)
    oi = np.empty_like(xi)
    templates.launch("totals_i", 2, 128, [xi, oi])
    np.testing.assert_array_equal(oi[:128], xi[:128].sum() + 128)
    np.testing.assert_array_equal(oi[128:], xi[128:].sum() + 128)


def test_thread_and_block_coordinates(misc):
    grid, block = (2, 3, 2), (4, 2, 3)
    nb, nt = 12, 24
    out = np.full(nb * nt * 6, -1, np.int32)
    misc.launch("coords", grid, block, [out])
    got = out.reshape(grid[2], grid[1], grid[0], block[2], block[1], block[0], 6)
    tz, ty, tx = np.meshgrid(range(3), range(2), range(4), indexing="ij")
    for bz in range(2):
        for by in range(3):
            for bx in range(2):
                g = got[bz, by, bx]
                np.testing.assert_array_equal(g[..., 0], tx)
                np.testing.assert_array_equal(g[..., 1], ty)
                np.testing.assert_array_equal(g[..., 2], tz)
                assert (g[..., 3] == bx).all() and (g[..., 4] == by).all()
                assert (g[..., 5] == bz).all()


def test_early_exit_counts_as_arrived(misc):
    x = np.arange(128, dtype=np.int32)
    out = np.full(128, -1, np.int32)
    misc.launch("early_exit_barrier", 1, 128, [x, out, 100])
    np.testing.assert_array_equal(out[:100], x[:100][::-1])
    assert (out[100:] == -1).all()


def test_scalar_types(misc):
    out = np.zeros(6)
    misc.launch("scalars", 1, 1, [-5, 2**32 - 1, -(2**40), 0.25, True, 255, out])
    assert out.tolist() == [-5, 2**32 - 1, -(2**40), 0.25, 1, 255]


# ---- debugging aids ------------------------------------------------------------------------
def test_reverse_order_exposes_missing_barrier(misc):
    x = np.arange(512, dtype=np.float32) + 1
    expected = np.concatenate([[0], x[:255], [0], x[256:511]])
    good, bad_fwd, bad_rev = (np.empty_like(x) for _ in range(3))
    misc.launch("shift_with_barrier", 2, 256, [x, good], reverse_threads=True)
    np.testing.assert_array_equal(good, expected)
    # Forward order happens to hide the bug; reverse order reads poisoned (NaN) shared memory.
    misc.launch("shift_no_barrier", 2, 256, [x, bad_fwd])
    np.testing.assert_array_equal(bad_fwd, expected)
    misc.launch("shift_no_barrier", 2, 256, [x, bad_rev], reverse_threads=True)
    assert np.isnan(bad_rev[1:256]).all() and np.isnan(bad_rev[257:]).all()


def test_ucontext_fallback(reduce_mod):
    # The portable (non-x86-64) context switch, forced on: same results as the fast one.
    uc = compile_source((KERNELS / "reduce.cu").read_text(), "reduce",
                        extra_flags=["-DGT_EMU_FORCE_UCONTEXT"])
    assert uc.path != reduce_mod.path
    n = 5000
    x = np.random.default_rng(6).random(n, dtype=np.float32)
    outs = [np.zeros(1, np.float32), np.zeros(1, np.float32)]
    for mod, out in zip((uc, reduce_mod), outs, strict=True):
        mod.launch("block_sum", 4, 128, [x, out, n])
    assert outs[0][0] == outs[1][0]
    np.testing.assert_allclose(outs[0][0], x.sum(dtype=np.float64), rtol=1e-5)


def test_divergent_barrier_is_an_error(misc):
    exc = _run_with_timeout(lambda: misc.launch("divergent_barrier", 1, 64, [np.zeros(64,
                                                                                      np.float32)]))
    assert isinstance(exc, KernelError)
    msg = str(exc)
    assert "divergent __syncthreads" in msg and "block (0, 0, 0)" in msg
    assert "misc.cu:" in msg and "divergent_barrier" in msg


def test_warp_deadlock_is_an_error(misc):
    exc = _run_with_timeout(lambda: misc.launch("warp_deadlock", (1, 2), 64,
                                                [np.zeros(64, np.float32)]))
    assert isinstance(exc, KernelError)
    assert "deadlock in block (0, 0, 0)" in str(exc) and "__shfl_down_sync" in str(exc)


def test_assert_names_block_thread_line(misc):
    x = np.zeros(128, np.int32)
    x[101] = -1  # block 3, thread 5 with 32-thread blocks
    with pytest.raises(KernelError) as info:
        misc.launch("checked", 4, 32, [x, 128])
    msg = str(info.value)
    assert "x[i] >= 0" in msg and "block (3, 0, 0), thread (5, 0, 0)" in msg
    line = next(i for i, s in enumerate((KERNELS / "misc.cu").read_text().splitlines(), 1)
                if "assert(x[i] >= 0)" in s)
    assert f"misc.cu:{line}" in msg
    # The module stays usable after a failed launch.
    misc.launch("checked", 4, 32, [np.zeros(128, np.int32), 128])


def test_stack_overflow_is_an_error(misc):
    out = np.zeros(4, np.int32)
    misc.launch("recurse", 1, 4, [3, out])
    assert out.tolist() == [3] * 4
    with pytest.raises(KernelError, match=r"stack overflow in block \(0, 0, 0\), thread"):
        misc.launch("recurse", 1, 4, [64, out])
    misc.launch("recurse", 1, 4, [64, out], stack_size=1 << 20)
    assert out.tolist() == [64] * 4


def test_stack_overflow_on_a_fresh_thread(misc):
    """A thread's first launch gets a signal stack too (only the main thread has Python's)."""
    out = np.zeros(4, np.int32)
    exc = _run_with_timeout(lambda: misc.launch("recurse", 1, 4, [64, out]))
    assert isinstance(exc, KernelError) and "stack overflow" in str(exc)
    misc.launch("recurse", 1, 4, [3, out])  # and the calling thread still works
    assert out.tolist() == [3] * 4


_SEGV_SCRIPT = """
import ctypes, faulthandler, signal, sys
import numpy as np
from gputensor.kernels.cuda.emulator import KernelError, compile_source
faulthandler.enable()
mod = compile_source(open(sys.argv[1]).read(), "misc")
out = np.zeros(4, np.int32)
try:
    mod.launch("recurse", 1, 4, [64, out])
except KernelError:
    print("overflow reported", flush=True)
# Another handler replaces ours between launches: the next launch re-installs it.
signal.signal(signal.SIGSEGV, signal.SIG_DFL)
faulthandler.enable()
try:
    mod.launch("recurse", 1, 4, [64, out])
except KernelError:
    print("overflow reported again", flush=True)
ctypes.string_at(0)  # a fault that is not a fiber overflow reaches faulthandler
"""


def test_foreign_segfault_reaches_the_previous_handler(tmp_path):
    """The overflow handler stays installed between launches, but a fault outside the fiber
    stacks' guard pages still goes to the handler that was there before (here faulthandler,
    which prints the Python traceback), and a replaced handler is re-installed on launch."""
    script = tmp_path / "segv.py"
    script.write_text(_SEGV_SCRIPT)
    res = subprocess.run([sys.executable, str(script), str(KERNELS / "misc.cu")],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert res.stdout.splitlines() == ["overflow reported", "overflow reported again"]
    assert res.returncode != 0
    assert "Fatal Python error: Segmentation fault" in res.stderr
    assert "string_at" in res.stderr


# ---- argument checking ---------------------------------------------------------------------
def test_wrong_arg_count(vector_add):
    with pytest.raises(TypeError, match=r"kernel 'add' takes 4 arguments.*got 3"):
        vector_add.launch("add", 1, 32, [np.zeros(4, np.float32)] * 3)


def test_wrong_pointer_dtype(vector_add):
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"kernel 'add', parameter 'y' \(const float\*\): "
                                        r"expected an array of float32, got float64"):
        vector_add.launch("add", 1, 32, [x, np.zeros(4), x, 4])


def test_int_overflow(vector_add):
    x = np.zeros(4, np.float32)
    with pytest.raises(OverflowError, match=r"parameter 'n' \(int\): 2147483648 does not fit"):
        vector_add.launch("axpy_inplace", 1, 32, [1.0, x, x, 2**31])


def test_float_for_int_param(vector_add):
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"parameter 'n' \(int\): expected an integer"):
        vector_add.launch("axpy_inplace", 1, 32, [1.0, x, x, 4.0])


def test_non_array_and_readonly_and_strided(vector_add):
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="parameter 'x'.*expected a NumPy array, got list"):
        vector_add.launch("add", 1, 32, [[0.0], x, x, 1])
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    vector_add.launch("add", 1, 32, [ro, ro, x, 8])  # const pointers may be read-only
    with pytest.raises(ValueError, match="parameter 'out'.*read-only"):
        vector_add.launch("add", 1, 32, [x, x, ro, 8])
    with pytest.raises(ValueError, match="parameter 'x'.*C-contiguous"):
        vector_add.launch("add", 1, 32, [x[::2], x, x, 4])


def test_bad_launch_config(vector_add):
    x = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="block .* has 2048 threads"):
        vector_add.launch("add", 1, (64, 32), [x, x, x, 8])
    with pytest.raises(ValueError, match=r"grid\[1\] = 0"):
        vector_add.launch("add", (1, 0), 32, [x, x, x, 8])
    with pytest.raises(KeyError, match="no kernel 'sub'"):
        vector_add.launch("sub", 1, 32, [x, x, x, 8])


# ---- parsing, compiling, caching -------------------------------------------------------------
def test_parse_kernels():
    src = """
    template <class T> __global__ void tmpl(T* x) {}
    // __global__ void commented(int a) {}
    extern "C" __global__ void __launch_bounds__(256) k(const float* __restrict__ x,
                                                       unsigned long long n, __half h) {}
    __global__ void none() {}
    """
    ks = parse_kernels(src)
    assert list(ks) == ["k", "none"]
    x, n, h = ks["k"]
    assert (x.name, x.ctype, x.base, x.pointer, x.const) == ("x", "const float*", "float",
                                                             True, True)
    assert (n.name, n.base, n.pointer) == ("n", "unsigned long long", False)
    assert h.base == "__half" and ks["none"] == ()


def test_compile_error_reports_compiler_output(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    with pytest.raises(CompileError, match="undeclared_thing"):
        compile_source("__global__ void k(int n) { undeclared_thing(n); }", "broken")


def test_disk_cache_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    src = "__global__ void fill(int* x, int v) { x[threadIdx.x] = v; }\n"
    calls = []
    real = build._invoke_compiler
    monkeypatch.setattr(build, "_invoke_compiler", lambda cmd: (calls.append(cmd), real(cmd)))
    mod = compile_source(src, "cache_probe")
    assert len(calls) == 2  # runtime library + module
    clear_memory_cache()

    def no_compiler(cmd):
        raise AssertionError("g++ invoked although the module is cached")

    monkeypatch.setattr(build, "_invoke_compiler", no_compiler)
    again = compile_source(src, "cache_probe")
    assert again is not mod and again.path == mod.path
    out = np.zeros(8, np.int32)
    again.launch("fill", 1, 8, [out, 7])
    assert (out == 7).all()
    with pytest.raises(AssertionError, match="g\\+\\+ invoked"):
        compile_source(src + "// changed\n", "cache_probe")


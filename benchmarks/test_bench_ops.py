"""More op benchmarks, gputensor beside NumPy and PyTorch (CPU) on the same data: elementwise
ops small (cache-resident) and large, reductions, matmul at three sizes, conv2d forward and
forward + backward, softmax forward + backward, and the per-call dispatch overhead of a range
of small ops. Each op's variants share one pytest-benchmark group; no timing is asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from test_bench_core import F32, N16M, gt_function, need, run, vec3

if TYPE_CHECKING:
    from conftest import Data, Lib

SMALL = 4096          # 16 KiB per float32 operand: stays in L1/L2
N1M = 1 << 20
TINY = 16             # the dispatch-overhead groups: the op itself is nearly free


def _skip_numpy(lib: Lib, why: str = "NumPy has no autograd") -> None:
    if lib.name == "numpy":
        pytest.skip(why)


# --- elementwise: small and large ----------------------------------------------------------------

def test_add_small_out(benchmark: Any, lib: Lib, data: Data) -> None:
    a, b, c = vec3(lib, data, SMALL)
    run(benchmark, lib, "add 4096 f32 (cache-resident), out=", lambda: lib.xp.add(a, b, out=c),
        nbytes=3 * SMALL * F32)


def test_mul_large_out(benchmark: Any, lib: Lib, data: Data) -> None:
    a, b, c = vec3(lib, data)
    mul = lib.xp.multiply if lib.name == "numpy" else lib.xp.mul
    run(benchmark, lib, "mul 16M f32, out=", lambda: mul(a, b, out=c), nbytes=3 * N16M * F32)


def test_relu_large(benchmark: Any, lib: Lib, data: Data) -> None:
    a, _, c = vec3(lib, data)
    if lib.name == "numpy":
        fn = lambda: np.maximum(a, np.float32(0), out=c)  # noqa: E731
    elif lib.name == "torch":
        fn = lambda: lib.xp.clamp(a, min=0, out=c)  # noqa: E731  (torch.relu has no out=)
    else:
        fn = lambda: lib.xp.relu(a, out=c)  # noqa: E731
    run(benchmark, lib, "relu 16M f32, out=", fn, nbytes=2 * N16M * F32)


def test_sigmoid_1m(benchmark: Any, lib: Lib, data: Data) -> None:
    a, _, c = vec3(lib, data, N1M)
    if lib.name == "numpy":
        from scipy.special import expit
        fn = lambda: expit(a, out=c)  # noqa: E731
    else:
        fn = lambda: lib.xp.sigmoid(a, out=c)  # noqa: E731
    run(benchmark, lib, "sigmoid 1M f32, out=", fn, nbytes=2 * N1M * F32)


# --- reductions ----------------------------------------------------------------------------------

def test_amax(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "amax")
    a, _, _ = vec3(lib, data)
    run(benchmark, lib, "amax 16M f32", lambda: lib.xp.amax(a), nbytes=N16M * F32)


def test_sum_small(benchmark: Any, lib: Lib, data: Data) -> None:
    a, _, _ = vec3(lib, data, SMALL)
    run(benchmark, lib, "sum 4096 f32 (cache-resident)", lambda: lib.xp.sum(a),
        nbytes=SMALL * F32)


# --- matmul --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [128, 512])
def test_matmul_sizes(benchmark: Any, lib: Lib, data: Data, n: int) -> None:
    a, b = lib.wrap(data.get("ma", (n, n))), lib.wrap(data.get("mb", (n, n)))
    c = lib.wrap(data.get("mc", (n, n)))
    run(benchmark, lib, f"matmul {n}x{n} f32, out=", lambda: lib.xp.matmul(a, b, out=c),
        nbytes=3 * n * n * F32, flops=2 * n ** 3)


# --- conv2d --------------------------------------------------------------------------------------
CONV_X, CONV_W = (8, 16, 32, 32), (32, 16, 3, 3)
CONV_FLOPS = 2 * 8 * 32 * 32 * 32 * 16 * 9


def _numpy_conv2d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NumPy has no convolution: im2col as a strided window view, contracted by tensordot."""
    xpad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xpad, (3, 3), axis=(2, 3))
    y = np.tensordot(cols, w, axes=([1, 4, 5], [1, 2, 3]))
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2))


def _conv_inputs(lib: Lib, data: Data) -> tuple[Any, Any]:
    w = data.get("cw", CONV_W) / np.float32(16)  # keep activations near 1
    return lib.wrap(data.get("cx", CONV_X)), lib.wrap(np.ascontiguousarray(w))


def test_conv2d_forward(benchmark: Any, lib: Lib, data: Data) -> None:
    x, w = _conv_inputs(lib, data)
    if lib.name == "numpy":
        fn = lambda: _numpy_conv2d(x, w)  # noqa: E731
    else:
        conv2d = lib.xp.nn.functional.conv2d
        fn = lambda: conv2d(x, w, padding=1)  # noqa: E731
    run(benchmark, lib, "conv2d 8x16x32x32, 32 3x3 filters, pad 1: forward", fn,
        flops=CONV_FLOPS)


def test_conv2d_forward_backward(benchmark: Any, lib: Lib, data: Data) -> None:
    _skip_numpy(lib)
    x, w = _conv_inputs(lib, data)
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    grad = lib.wrap(data.get("cg", (8, 32, 32, 32)))
    conv2d = lib.xp.nn.functional.conv2d

    def step() -> None:
        x.grad = w.grad = None
        conv2d(x, w, padding=1).backward(grad)
    # backward: input gradient and weight gradient, each as much work as the forward
    run(benchmark, lib, "conv2d 8x16x32x32, 32 3x3 filters, pad 1: forward + backward", step,
        flops=3 * CONV_FLOPS)


# --- softmax forward + backward ------------------------------------------------------------------

def test_softmax_forward_backward(benchmark: Any, lib: Lib, data: Data) -> None:
    _skip_numpy(lib)
    need(lib, "softmax")
    x = lib.wrap(data.get("sm", (4096, 1024))).clone().requires_grad_()
    grad = lib.wrap(data.get("smg", (4096, 1024)))
    softmax = lib.xp.softmax if lib.name == "torch" else gt_function("softmax")

    def step() -> None:
        x.grad = None
        softmax(x, dim=-1).backward(grad)
    # forward reads x, writes y; backward reads y and the gradient, writes x.grad
    run(benchmark, lib, "softmax(dim=-1) 4096x1024 f32: forward + backward", step,
        nbytes=5 * 4096 * 1024 * F32)


# --- per-op dispatch overhead --------------------------------------------------------------------

def _overhead_ops(lib: Lib, data: Data) -> dict[str, Callable[[], Any]]:
    xp = lib.xp
    a, b, c = vec3(lib, data, TINY)
    m = lib.wrap(data.get("m4", (4, 4)))
    v = lib.wrap(data.get("v44", (4, 4)))
    is_np = lib.name == "numpy"
    # an operand in a graph (a non-leaf that requires grad): the recorded op issue 14 targets
    r = None if is_np else (b.clone().requires_grad_() * 1.0)
    return {
        "c.add_(b)": lambda: c.__iadd__(b),
        "r * a (recorded)": (lambda: a * b) if is_np else (lambda: r * a),
        "a * 2.0": lambda: a * 2.0,
        "exp(a, out=c)": lambda: xp.exp(a, out=c),
        "relu(a)": (lambda: np.maximum(a, np.float32(0))) if is_np else (lambda: xp.relu(a)),
        "sum(a)": lambda: xp.sum(a),
        "matmul 4x4": lambda: xp.matmul(m, v),
        "a.reshape(4, 4)": lambda: a.reshape(4, 4),
        "a[2:10]": lambda: a[2:10],
        "a.T of 4x4": lambda: m.T,
    }


OVERHEAD_OPS = ("c.add_(b)", "r * a (recorded)", "a * 2.0", "exp(a, out=c)", "relu(a)",
                "sum(a)", "matmul 4x4", "a.reshape(4, 4)", "a[2:10]", "a.T of 4x4")


@pytest.mark.parametrize("op", OVERHEAD_OPS)
def test_dispatch_overhead(benchmark: Any, lib: Lib, data: Data, op: str) -> None:
    if op == "r * a (recorded)":
        _skip_numpy(lib)
    fn = _overhead_ops(lib, data)[op]
    run(benchmark, lib, f"overhead: {op}, 16 elems", fn, small=True)

"""The kernels ``gputensor bench`` sweeps: how each builds its inputs for a size and dtype, and
what gputensor and each comparison library run on them.

A *size* is the element count of the main operand. Shaped kernels derive their shape from it:
matmul multiplies two square ``n x n`` matrices with ``n = round(sqrt(size))``; softmax runs
over rows of 1024 (or ``size``, when smaller); conv2d takes an NCHW input of 8 images of 16
channels, ``H = W = round(sqrt(size / 128))``, with 32 3x3 filters and padding 1.

Every implementation is ``impl(lib, tensors, params) -> call``: it receives the case's arrays
already on the library's device and returns the zero-argument call that is timed. Outputs are
preallocated (``out=``) wherever every library allows it, so allocation is not what's measured.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import gputensor as gt
from gputensor import _dtype as D
from gputensor.kernels.registry import OPS

from .inputs import random_array
from .libs import Lib

Impl = Callable[[Lib, Mapping[str, Any], Mapping[str, Any]], Callable[[], Any]]

NUMERIC = tuple(d for d in D.DTYPES if d is not D.bool and not d.is_complex)
FLOATING = tuple(d for d in D.DTYPES if d.is_floating_point)
ANY = tuple(D.DTYPES)


@dataclass(frozen=True)
class Case:
    """One kernel's data for one (size, dtype)."""

    shape: tuple[int, ...]             # the main operand's shape
    label: str                         # the shapes as the table shows them
    arrays: dict[str, np.ndarray]      # host data: inputs and preallocated outputs
    inputs: tuple[str, ...]            # which arrays the op reads (for its cost model)
    host: frozenset[str] = frozenset()  # arrays that stay on the host (transfer sources)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Kernel:
    name: str
    family: str
    build: Callable[[int, D.dtype, np.random.Generator], Case]
    impls: Mapping[str, Impl]          # library name -> implementation; "gputensor" always
    dtypes: tuple[D.dtype, ...]
    sizes: tuple[int, ...]             # the default sweep
    quick_sizes: tuple[int, ...]       # --quick
    op: str | None = None              # the registry op whose cost model counts bytes/flops
    metric: str = "GB/s"               # "GB/s" (memory-bound) or "GFLOP/s" (compute-bound)
    devices: tuple[str, ...] = ("cpu", "cuda")
    roofline: bool = True              # False: not bound by device memory (host transfers)
    doc: str = ""

    def cost(self, case: Case, tensors: Mapping[str, Any], result: Any) -> tuple[int, int]:
        """(bytes, flops) of one call, from the op's declaration in the registry."""
        if self.op is None:  # a transfer: the bytes that cross between host and device
            return sum(case.arrays[n].nbytes for n in case.inputs), 0
        return OPS[self.op].cost([tensors[n] for n in case.inputs], result)


# ---- sizes --------------------------------------------------------------------------------------
# Defaults end where a 2-core CPU spends about a second per kernel (all libraries, all repeats);
# transcendental ops cost ~10x an add per element, so they stop earlier. The CUDA emulator runs
# every CUDA thread as a fiber on that CPU: it sweeps only the first EMULATED_SIZES sizes.
FLAT_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
TRANSCENDENTAL_SIZES = (1_000, 10_000, 100_000, 1_000_000, 4_000_000)
EMULATED_SIZES = 3
FLAT_QUICK = (256, 4096)
SOFTMAX_COLS = 1024
SOFTMAX_SIZES = (1024, 16_384, 262_144, 4_194_304)
MATMUL_SIZES = tuple(n * n for n in (64, 128, 256, 512, 1024))
MATMUL_QUICK = (16 * 16, 32 * 32)
CONV_N, CONV_C, CONV_OUT, CONV_K = 8, 16, 32, 3
CONV_SIZES = tuple(CONV_N * CONV_C * h * h for h in (8, 16, 32))
CONV_QUICK = (CONV_N * CONV_C * 4 * 4,)


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape)


# ---- builders -----------------------------------------------------------------------------------
def _unary(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    a = random_array((size,), dt, rng)
    return Case((size,), _fmt_shape(a.shape), {"a": a, "out": np.zeros_like(a)}, ("a",))


def _binary(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    a, b = random_array((size,), dt, rng), random_array((size,), dt, rng)
    return Case((size,), _fmt_shape(a.shape), {"a": a, "b": b, "out": np.zeros_like(a)},
                ("a", "b"))


def _single(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    a = random_array((size,), dt, rng)
    return Case((size,), _fmt_shape(a.shape), {"a": a}, ("a",))


def _softmax(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    cols = min(size, SOFTMAX_COLS)
    x = random_array((max(1, size // cols), cols), dt, rng)
    return Case(x.shape, _fmt_shape(x.shape) + ", dim=-1", {"x": x}, ("x",))


def _matmul(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    n = max(1, round(math.sqrt(size)))
    a, b = random_array((n, n), dt, rng), random_array((n, n), dt, rng)
    return Case((n, n), f"{n}x{n} @ {n}x{n}", {"a": a, "b": b, "out": np.zeros_like(a)},
                ("a", "b"))


def _conv2d(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    h = max(1, round(math.sqrt(size / (CONV_N * CONV_C))))
    x = random_array((CONV_N, CONV_C, h, h), dt, rng)
    # Small weights keep float16 sums in range.
    w = (random_array((CONV_OUT, CONV_C, CONV_K, CONV_K), dt, rng) / 16).astype(x.dtype)
    return Case(x.shape, f"{_fmt_shape(x.shape)} * {_fmt_shape(w.shape)}, pad 1",
                {"x": x, "w": w}, ("x", "w"))


def _cast_target(dt: D.dtype) -> D.dtype:
    """float32 and float64 cast to float16 (mixed precision's cast); the rest to float32."""
    return D.float16 if dt in (D.float32, D.float64) else D.float32


def _cast(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    a = random_array((size,), dt, rng)
    target = _cast_target(dt)
    return Case((size,), f"{size} -> {target.name}", {"a": a}, ("a",),
                params={"dtype": target})


def _transfer(size: int, dt: D.dtype, rng: np.random.Generator) -> Case:
    a = random_array((size,), dt, rng)
    return Case((size,), _fmt_shape(a.shape), {"a": a}, ("a",), host=frozenset({"a"}))


# ---- implementations ----------------------------------------------------------------------------
ALL_LIBS = ("gputensor", "numpy", "torch", "cupy")


def _same(impl: Impl, libs: tuple[str, ...] = ALL_LIBS) -> dict[str, Impl]:
    """One implementation that every library spells the same way through its module."""
    return {name: impl for name in libs}


def _ufunc_out(name: str) -> Impl:
    """``xp.<name>(*inputs, out=out)``: add, mul and exp read the same in all four libraries."""
    def impl(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        f, out = getattr(lib.xp, name), t["out"]
        args = [t[k] for k in ("a", "b") if k in t]
        return lambda: f(*args, out=out)
    return impl


def _full_reduction(name: str) -> Impl:
    def impl(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        f, a = getattr(lib.xp, name), t["a"]
        return lambda: f(a)
    return impl


def _relu_impls() -> dict[str, Impl]:
    def ours(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, out = t["a"], t["out"]
        return lambda: gt.relu(a, out=out)

    def maximum(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, out, zero = t["a"], t["out"], _zero_of(t["a"])
        return lambda: lib.xp.maximum(a, zero, out=out)

    def clamp(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, out = t["a"], t["out"]
        return lambda: lib.xp.clamp(a, min=0, out=out)  # torch.relu has no out=

    return {"gputensor": ours, "numpy": maximum, "cupy": maximum, "torch": clamp}


def _zero_of(a: Any) -> Any:
    """A zero of ``a``'s dtype (so NumPy/CuPy keep the dtype for any input)."""
    return a.dtype.type(0)


def _sigmoid_impls() -> dict[str, Impl]:
    def ours_or_torch(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, out = t["a"], t["out"]
        return lambda: lib.xp.sigmoid(a, out=out)

    def numpy_expit(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        from scipy.special import expit
        a, out = t["a"], t["out"]
        return lambda: expit(a, out=out)

    def cupy_expit(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        from cupyx.scipy.special import expit
        a, out = t["a"], t["out"]
        return lambda: expit(a, out=out)

    return {"gputensor": ours_or_torch, "torch": ours_or_torch, "numpy": numpy_expit,
            "cupy": cupy_expit}


def _softmax_impls() -> dict[str, Impl]:
    def dim_api(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        x = t["x"]
        return lambda: lib.xp.softmax(x, dim=-1)

    def composite(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        xp, x = lib.xp, t["x"]

        def softmax() -> Any:  # the max-shifted form scipy.special.softmax also uses
            e = xp.exp(x - x.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e
        return softmax

    return {"gputensor": dim_api, "torch": dim_api, "numpy": composite, "cupy": composite}


def _conv2d_impls() -> dict[str, Impl]:
    def functional(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        conv2d, x, w = lib.xp.nn.functional.conv2d, t["x"], t["w"]
        return lambda: conv2d(x, w, padding=1)

    def im2col(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        # NumPy has no convolution: windows as a strided view, contracted with the filters
        # by one tensordot (BLAS), the usual im2col formulation.
        xp, x, w = lib.xp, t["x"], t["w"]
        windows = xp.lib.stride_tricks.sliding_window_view

        def conv() -> Any:
            xpad = xp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
            cols = windows(xpad, (CONV_K, CONV_K), axis=(2, 3))  # N, C, H, W, kh, kw
            y = xp.tensordot(cols, w, axes=([1, 4, 5], [1, 2, 3]))  # N, H, W, O
            return xp.ascontiguousarray(y.transpose(0, 3, 1, 2))
        return conv

    return {"gputensor": functional, "torch": functional, "numpy": im2col, "cupy": im2col}


def _copy_impls() -> dict[str, Impl]:
    def copy_(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, out = t["a"], t["out"]
        return lambda: out.copy_(a)

    def copyto(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, out, f = t["a"], t["out"], lib.xp.copyto
        return lambda: f(out, a)

    return {"gputensor": copy_, "torch": copy_, "numpy": copyto, "cupy": copyto}


def _cast_impls() -> dict[str, Impl]:
    def ours(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, dt = t["a"], p["dtype"]
        return lambda: a.to(dt)

    def torch_to(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, dt = t["a"], getattr(lib.xp, p["dtype"].name)
        return lambda: a.to(dt)

    def astype(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, dt = t["a"], p["dtype"].np_dtype
        return lambda: a.astype(dt)

    return {"gputensor": ours, "torch": torch_to, "numpy": astype, "cupy": astype}


def _to_cuda_impls() -> dict[str, Impl]:
    def cuda(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a = t["a"]
        return lambda: a.cuda()

    def cupy_asarray(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a, f = t["a"], lib.xp.asarray
        return lambda: f(a)

    return {"gputensor": cuda, "torch": cuda, "cupy": cupy_asarray}


def _to_cpu_impls() -> dict[str, Impl]:
    def cpu(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a = t["a"]
        return lambda: a.cpu()

    def cupy_get(lib: Lib, t: Mapping[str, Any], p: Mapping[str, Any]) -> Callable[[], Any]:
        a = t["a"]
        return lambda: a.get()

    return {"gputensor": cpu, "torch": cpu, "cupy": cupy_get}


# ---- the catalogue ------------------------------------------------------------------------------
def _elementwise(name: str, impls: dict[str, Impl], dtypes: tuple[D.dtype, ...],
                 build: Callable[..., Case] = _unary,
                 sizes: tuple[int, ...] = FLAT_SIZES) -> Kernel:
    return Kernel(name, "elementwise", build, impls, dtypes, sizes, FLAT_QUICK, op=name,
                  doc=f"{name}(..., out=) on a contiguous 1-d tensor")


CATALOGUE: tuple[Kernel, ...] = (
    _elementwise("add", _same(_ufunc_out("add")), NUMERIC, _binary),
    _elementwise("mul", _same(_ufunc_out("multiply")) | {"gputensor": _ufunc_out("mul")},
                 NUMERIC, _binary),
    _elementwise("exp", _same(_ufunc_out("exp")), FLOATING, sizes=TRANSCENDENTAL_SIZES),
    _elementwise("relu", _relu_impls(), NUMERIC),
    _elementwise("sigmoid", _sigmoid_impls(), FLOATING, sizes=TRANSCENDENTAL_SIZES),
    Kernel("sum", "reduction", _single, _same(_full_reduction("sum")), NUMERIC, FLAT_SIZES,
           FLAT_QUICK, op="sum", doc="sum of all elements"),
    Kernel("amax", "reduction", _single, _same(_full_reduction("amax")), NUMERIC, FLAT_SIZES,
           FLAT_QUICK, op="amax", doc="maximum of all elements"),
    Kernel("mean", "reduction", _single, _same(_full_reduction("mean")), FLOATING, FLAT_SIZES,
           FLAT_QUICK, op="mean", doc="mean of all elements"),
    Kernel("softmax", "reduction", _softmax, _softmax_impls(), FLOATING, SOFTMAX_SIZES,
           FLAT_QUICK, op="softmax", doc=f"softmax over rows of {SOFTMAX_COLS}"),
    Kernel("matmul", "matmul", _matmul, _same(_ufunc_out("matmul")), FLOATING, MATMUL_SIZES,
           MATMUL_QUICK, op="matmul", metric="GFLOP/s", doc="square n x n @ n x n, out="),
    Kernel("conv2d", "conv", _conv2d, _conv2d_impls(), FLOATING, CONV_SIZES, CONV_QUICK,
           op="conv2d", metric="GFLOP/s",
           doc=f"NCHW {CONV_N}x{CONV_C}xHxW, {CONV_OUT} {CONV_K}x{CONV_K} filters, padding 1"),
    Kernel("copy", "copy", _unary, _copy_impls(), ANY, FLAT_SIZES, FLAT_QUICK, op="_copy",
           doc="out.copy_(a) on the device"),
    Kernel("cast", "copy", _cast, _cast_impls(), ANY, FLAT_SIZES, FLAT_QUICK, op="_copy",
           doc="a.to(dtype): float32/float64 to float16, the rest to float32"),
    Kernel("to_cuda", "transfer", _transfer, _to_cuda_impls(), ANY, FLAT_SIZES, FLAT_QUICK,
           devices=("cuda",), roofline=False, doc="host tensor .cuda()"),
    Kernel("to_cpu", "transfer", _single, _to_cpu_impls(), ANY, FLAT_SIZES, FLAT_QUICK,
           devices=("cuda",), roofline=False, doc="device tensor .cpu()"),
)

BY_NAME: dict[str, Kernel] = {k.name: k for k in CATALOGUE}


class SelectionError(ValueError):
    """A ``-k`` selection that names no kernel runnable on the device."""


def _matches(kernel: Kernel, pattern: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(kernel.name, pattern) or \
            fnmatch.fnmatchcase(kernel.family, pattern)
    return pattern in kernel.name or pattern == kernel.family


def select(patterns: list[str], device: str) -> list[Kernel]:
    """Kernels whose name contains (or, with ``* ? [``, glob-matches) any pattern, or whose
    family equals one; all kernels for no pattern. Only kernels that run on ``device``."""
    chosen = [k for k in CATALOGUE if not patterns or any(_matches(k, p) for p in patterns)]
    if not chosen:
        raise SelectionError(f"no catalogued kernel matches {', '.join(map(repr, patterns))}; "
                             f"kernels: {', '.join(BY_NAME)}")
    runnable = [k for k in chosen if device in k.devices]
    if not runnable:
        names = ", ".join(k.name for k in chosen)
        raise SelectionError(f"{names} only run(s) on "
                             f"{' or '.join(sorted({d for k in chosen for d in k.devices}))}, "
                             f"not on {device!r}")
    return runnable

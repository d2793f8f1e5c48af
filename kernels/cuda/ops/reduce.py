"""The CUDA backend's reductions, arg-extrema, scans and softmax (kernels/cuda/reduce.cu).

Same names and signatures as kernels/cpu/reduce.py. The CPU backend plans a reduction as a
strided (O, K, I) view; here the input is described to the kernel directly: its kept dims (one
output each, in the result's row-major order) and its reduced dims, size-1 dims dropped and
neighbours merged where memory allows, with their element strides in a small device array.
Any layout (permuted, sliced, expanded, offset) is read in place, never copied.

The launch shape follows the innermost memory dim: when a reduced dim is innermost, each
output gets T consecutive threads (row mode); otherwise neighbouring threads own neighbouring
outputs and split the reduced index among T lanes (column mode). Few outputs with a long
reduction also split the reduced index over blocks (blockIdx.y), whose partial accumulators a
second kernel combines in a fixed order. Scans and softmax run along lines of one dim into a
contiguous result. Complex dtypes (gt::complex<float>/<double>, complex.cuh) cover what the CPU
backend accepts them for: sum, prod, mean, all/any/count_nonzero, var/std (a real result, a
complex mean), norms (real results, accumulated from moduli) and cumsum/cumprod.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.layout import merge_dims
from gputensor.kernels.reduce import (
    REDUCTIONS,
    Reduction,
    int_to_int64,
    norm_reduction,
    real,
    same,
)
from gputensor.kernels.registry import CUDA

from ..device import (
    CONSTANTS_MAX,
    MAX_GRID,
    CudaSource,
    constant_array,
    grid_for,
    launch,
)
from ..dtypes import (
    ACC_CTYPES,
    ALL_DTYPES,
    COMPLEX_DTYPES,
    CTYPES,
    FLOAT_DTYPES,
    INEXACT_DTYPES,
    REAL_DTYPES,
    SHORT,
    short_name,
)
from ..fold_codegen import fold_struct, fold_struct_name

BLOCK = 256        # threads per block (P * T lanes in reduce.cu)
ACC_BYTES = 32     # bytes reserved per accumulator (reduce.cu's kMaxAcc)
SHARED_BYTES = BLOCK * ACC_BYTES
MIN_PER_THREAD = 32  # elements per thread before the reduced index is split over blocks
# Blocks a split reduction aims for: enough resident threads to fill a large GPU (132 SMs x 8
# blocks of 256 threads on an H100/H200); 128 left a full reduction at ~25% of the bandwidth.
SPLIT_TARGET = 1024
# The split pass is compiled for 4 resident blocks per SM (at most 64 registers): on an H200 it
# used 70-114 registers (2-3 blocks) and read 1-14 points of bandwidth slower than with the cap.
RED_BLOCKS_PER_SM = 4
CHUNK_ALIGN = 16   # elements: a split's share of a contiguous line starts on a 16-byte boundary

# One module per op family, so each compiles (lazily) only the instantiations it needs.
SUMS = CudaSource("reduce.cu")
SELECTS = CudaSource("reduce.cu")
ARGS = CudaSource("reduce.cu")
NORMS = CudaSource("reduce.cu")
MOMENTS = CudaSource("reduce.cu")
SCANS = CudaSource("reduce.cu")
SOFTMAX = CudaSource("reduce.cu")

_RED_PARAMS = ("const {T}* x, {O}* out1, {O2}* out2, unsigned char* ws, const long long* meta, "
               "long long N, long long K, long long row, long long P, long long lanes, "
               "long long chunk, double p, long long flag")
_RED_CALL = ("gtr::reduce<{OP}, {T}>(x, out1, out2, ws, meta, N, K, (int)row, (int)P, "
             "(int)lanes, chunk, p, flag)")
_FIN_PARAMS = ("const unsigned char* ws, {O}* out1, {O2}* out2, long long N, long long S, "
               "long long K, double p, long long flag, long long lanes")
_FIN_CALL = "gtr::reduce_finish<{OP}>(ws, out1, out2, N, S, K, p, flag, (int)lanes)"


@dataclass(frozen=True)
class Kernels:
    """One reduction's kernels: the op struct for an input dtype, and its outputs' dtypes."""

    src: CudaSource
    dtypes: tuple[D.dtype, ...]
    # (T, A) C types -> the reduce.cu op struct; it may also name {O} (out1's C type) and {M}
    # (var's mean type)
    op: Callable[[str, str], str]
    out: Callable[[D.dtype], D.dtype]        # out1's dtype for an input dtype
    out2: Callable[[D.dtype], str] = lambda d: "long long"  # out2's C type
    fold: Reduction | None = None            # the declaration its op structs are rendered from


def fold_kernels(fold: Reduction, src: CudaSource) -> Kernels:
    """The kernels of a fold declared in kernels/reduce.py: one generated struct per dtype."""
    return Kernels(src, fold.dtypes, lambda T, A: f"gtr::{fold_struct_name(fold.name, T)}",
                   fold.out, fold=fold)


# The folds, grouped into modules as they are used together.
_FOLD_MODULES = {"sum": SUMS, "nansum": SUMS, "prod": SUMS, "mean": SUMS, "amax": SELECTS,
                 "amin": SELECTS, "all": SELECTS, "any": SELECTS, "count_nonzero": SELECTS}
KERNELS: dict[str, Kernels] = {name: fold_kernels(r, _FOLD_MODULES.get(name, NORMS))
                               for name, r in REDUCTIONS.items()}
# Algorithms whose accumulator is more than one number, written in reduce.cu.
KERNELS.update({
    "argmax": Kernels(ARGS, REAL_DTYPES, lambda T, A: f"gtr::ArgOp<{T}, {A}, true>", same),
    "argmin": Kernels(ARGS, REAL_DTYPES, lambda T, A: f"gtr::ArgOp<{T}, {A}, false>", same),
    "var": Kernels(MOMENTS, INEXACT_DTYPES, lambda T, A: f"gtr::VarOp<{T}, {{M}}, {{O}}>",
                   real, lambda d: CTYPES[d]),
    "logsumexp": Kernels(MOMENTS, FLOAT_DTYPES, lambda T, A: f"gtr::LogSumExpOp<{T}>", same),
})


def declare(name: str, k: Kernels) -> None:
    """Add the red_/fin_ kernels of reduction ``name`` (and its op structs) to ``k.src``."""
    for d in k.dtypes:
        if k.fold is not None:
            k.src.declare(fold_struct(k.fold, d))
        v = {"s": SHORT[d], "T": CTYPES[d], "O": CTYPES[k.out(d)], "O2": k.out2(d),
             "M": "gt::complex<double>" if d in COMPLEX_DTYPES else "double"}
        v["OP"] = k.op(CTYPES[d], ACC_CTYPES[d]).format(**v)
        k.src.instantiate(f"red_{name}_{{s}}", _RED_PARAMS, _RED_CALL, [v],
                          launch_bounds=(BLOCK, RED_BLOCKS_PER_SM))
        k.src.instantiate(f"fin_{name}_{{s}}", _FIN_PARAMS, _FIN_CALL, [v])


for _name, _k in KERNELS.items():
    declare(_name, _k)


# ---- layout ---------------------------------------------------------------------------------
def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _merge(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(size, stride) dims in row-major order, neighbours merged where they are contiguous with
    each other (the row-major linear index over them is unchanged)."""
    out: list[tuple[int, int]] = []
    for n, s in pairs:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


@dataclass
class ReducePlan:
    """How one reduction launches: N outputs of K reduced elements."""

    meta: tuple[int, ...]
    N: int
    K: int
    row: bool
    P: int
    T: int
    grid: int
    splits: int
    chunk: int


# (shape, strides, dims) -> plan: a training step reduces the same layouts every step.
_PLANS: dict[tuple, ReducePlan] = {}


def plan(x: Tensor, dims: Sequence[int]) -> ReducePlan:
    """The kernel's view of reducing ``x`` over ``dims`` and its launch shape (memoised)."""
    key = (x._shape, x._stride, tuple(dims))
    pl = _PLANS.get(key)
    if pl is None:
        if len(_PLANS) >= CONSTANTS_MAX:
            _PLANS.clear()
        pl = _PLANS[key] = _make_plan(x._shape, x._stride, dims)
    return pl


def _make_plan(shape: tuple[int, ...], stride: tuple[int, ...], dims: Sequence[int]
               ) -> ReducePlan:
    reduced = set(dims)
    kept = _merge([(shape[i], stride[i]) for i in range(len(shape))
                   if i not in reduced and shape[i] != 1])
    red = _merge([(shape[i], stride[i]) for i in sorted(reduced) if shape[i] != 1])
    N = math.prod(n for n, _ in kept)
    K = math.prod(n for n, _ in red)
    row = bool(red) and (not kept or abs(red[-1][1]) <= abs(kept[-1][1]))
    if row:
        T = min(BLOCK, _pow2(K))
        P = BLOCK // T
    else:
        P = min(BLOCK, _pow2(N))
        T = BLOCK // P
        # Too few blocks: give each column more threads (down to a warp's 32 columns, still
        # one coalesced line per row) before splitting the reduced index over blocks, which
        # costs a second launch to merge the partials.
        while P > 32 and -(-N // P) < SPLIT_TARGET // 2 and K >= 2 * T * MIN_PER_THREAD:
            P //= 2
            T *= 2
    groups = max(1, -(-N // P))
    grid = min(groups, MAX_GRID)
    splits, chunk = 1, K
    if grid < SPLIT_TARGET // 2 and K >= 2 * T * MIN_PER_THREAD:
        splits = min(-(-K // (T * MIN_PER_THREAD)), max(1, SPLIT_TARGET // grid))
        chunk = -(-K // splits)
        chunk = -(-chunk // CHUNK_ALIGN) * CHUNK_ALIGN  # split starts stay 16-byte aligned
        splits = -(-K // chunk)
    meta = (len(kept), *(n for n, _ in kept), *(s for _, s in kept),
            len(red), *(n for n, _ in red), *(s for _, s in red))
    return ReducePlan(meta, N, K, row, P, T, grid, splits, chunk)


def _check_out(t: Tensor | None, dt: D.dtype, name: str, what: str) -> None:
    if t is not None and t._dtype is not dt:
        raise TypeError(f"CUDA '{name}' writes {what} as {dt}, got a {t._dtype} result")


def _staged(t: Tensor | None, dt: D.dtype) -> Tensor | None:
    """``t`` itself, or a temporary in the dtype the kernel writes (e.g. sum(dtype=bool)),
    copied into ``t`` on the device afterwards."""
    if t is None or t._dtype is dt:
        return t
    return empty(t._shape, dt, t.device)


def reduce(name: str, x: Tensor, dims: Sequence[int], out1: Tensor | None,
           out2: Tensor | None = None, p: float = 0.0, flag: int = 0) -> None:
    """Launch the reduction ``name`` (a KERNELS key) of ``x`` over ``dims`` into the flat,
    contiguous ``out1`` (and ``out2``: the mean of var, the indices of an arg-extremum)."""
    red = KERNELS[name]
    d = x._dtype
    s = short_name(d, name)
    if d not in red.dtypes:
        raise TypeError(f"'{name}' on CUDA does not support dtype {d}")
    pl = plan(x, dims)
    if pl.N == 0:
        return
    target = _staged(out1, red.out(d))
    _launch_reduce(red, f"{name}_{s}", x, pl, target, out2, p, flag)
    if target is not out1:
        out1.copy_(target)


def _launch_reduce(red: Kernels, kname: str, x: Tensor, pl: ReducePlan, out1: Tensor | None,
                   out2: Tensor | None, p: float, flag: int) -> None:
    meta = constant_array(pl.meta)
    ws = None
    if pl.splits > 1:
        ws = empty((pl.splits * pl.N * ACC_BYTES,), D.uint8, x.device)
    scalars = [float(p), int(flag)]
    xp = x if pl.K else None  # nothing to read (an empty input): a null pointer
    launch(red.src, f"red_{kname}", (pl.grid, pl.splits), BLOCK,
           [xp, out1, out2, ws, meta, int(pl.N), int(pl.K), int(pl.row),
            int(pl.P), int(pl.T), int(pl.chunk), *scalars], SHARED_BYTES)
    if ws is not None:
        lanes = min(32, _pow2(pl.splits))  # lanes per output merging its partials
        launch(red.src, f"fin_{kname}", grid_for(pl.N * lanes, BLOCK), BLOCK,
               [ws, out1, out2, int(pl.N), int(pl.splits), int(pl.K), *scalars, lanes])


# ---- the registered reductions ----------------------------------------------------------------
def _acc_kernel(name: str) -> Callable[..., None]:
    def run(result: Tensor, inp: Tensor, dims: tuple[int, ...]) -> None:
        op = "sum" if name == "nansum" and inp._dtype not in FLOAT_DTYPES else name
        reduce(op, inp, dims, result)
    run.__name__ = name
    run.__doc__ = f"{name} over ``dims`` into the contiguous ``result`` (reduce.cu)."
    return run


for _name in ("sum", "nansum", "prod", "mean", "amax", "amin", "all", "any", "count_nonzero"):
    CUDA.register(_name)(_acc_kernel(_name))


@CUDA.register("norm")
def norm(result: Tensor, inp: Tensor, dims: tuple[int, ...], p: float) -> None:
    """Vector p-norm: 0, 1, 2, +-inf accumulate in the sum dtype, other p in float64."""
    reduce(norm_reduction(p), inp, dims, result, p=float(p))


@CUDA.register("_var_mean")
def var_mean(var: Tensor, mean: Tensor | None, inp: Tensor, dims: tuple[int, ...],
             correction: float, take_sqrt: bool) -> None:
    """var (or std) and optionally the mean in one pass (Welford, float64)."""
    _check_out(mean, inp._dtype, "_var_mean", "the mean")
    reduce("var", inp, dims, var, mean, p=float(correction), flag=int(bool(take_sqrt)))


@CUDA.register("logsumexp")
def logsumexp(result: Tensor, inp: Tensor, dims: tuple[int, ...]) -> None:
    """log(sum(exp(x))) in one pass: a running max and the sum shifted by it (float64)."""
    reduce("logsumexp", inp, dims, result)


@CUDA.register("_arg_extreme")
def arg_extreme(values: Tensor | None, indices: Tensor, inp: Tensor, dim: int | None,
                largest: bool) -> None:
    """Extremum along ``dim`` with its (first) index; None: over the flattened input."""
    _check_out(indices, D.int64, "_arg_extreme", "indices")
    dims = tuple(range(inp.dim())) if dim is None else (dim,)
    reduce("argmax" if largest else "argmin", inp, dims, values, indices)


# ---- lines: scans and softmax ----------------------------------------------------------------
@dataclass
class Lines:
    """L lines of K elements along one dim; the contiguous output steps by I along it."""

    meta: list[int]
    L: int
    K: int
    I: int
    kstrides: list[int]


def lines(shape: tuple[int, ...], dim: int, operands: Sequence[Tensor]) -> Lines:
    """Describe ``operands`` (all of ``shape``) as lines along ``dim`` for reduce.cu."""
    if not shape:
        return Lines([0], 1, 1, 1, [0] * len(operands))
    other = [i for i in range(len(shape)) if i != dim]
    mshape, mstrides = merge_dims([shape[i] for i in other],
                                  [[t._stride[i] for i in other] for t in operands],
                                  drop_ones=True)
    meta = [len(mshape), *mshape]
    for st in mstrides:
        meta += st
    K = shape[dim]
    n = math.prod(shape)
    return Lines(meta, n // K if K else 0, K, math.prod(shape[dim + 1:]),
                 [t._stride[dim] for t in operands])


def _line_launch(ln: Lines) -> tuple[int, int, int]:
    """(grid, P, T) for softmax-like kernels: lanes along a line when its output is contiguous."""
    if ln.I == 1:
        T = min(BLOCK, _pow2(ln.K))
        P = BLOCK // T
    else:
        P = min(BLOCK, _pow2(ln.L))
        T = BLOCK // P
    return min(MAX_GRID, max(1, -(-ln.L // P))), P, T


def _declare_lines() -> None:
    ints = [d for d in REAL_DTYPES if d not in FLOAT_DTYPES]
    for d in ALL_DTYPES:
        w = "gt::complex<double>" if d in COMPLEX_DTYPES else "double"
        v = {"s": SHORT[d], "T": CTYPES[d], "O": CTYPES[int_to_int64(d)],
             "W": "long long" if d in ints else w}
        for op, mul in (("add", "false"), ("mul", "true")):
            SCANS.instantiate(
                f"scan_{op}_{{s}}",
                "const {T}* x, {O}* out, const long long* lmeta, long long L, long long K, "
                "long long xs, long long I, long long reverse",
                f"gtr::scan<{{T}}, {{W}}, {{O}}, {mul}>(x, out, lmeta, L, K, xs, I, reverse)",
                [v])
    for d in FLOAT_DTYPES:
        v = {"s": SHORT[d], "T": CTYPES[d], "A": ACC_CTYPES[d]}
        SOFTMAX.instantiate(
            "softmax_{s}",
            "const {T}* x, {T}* out, const long long* lmeta, long long L, long long K, "
            "long long xs, long long I, long long P, long long lanes, long long log",
            "gtr::softmax<{T}, {A}>(x, out, lmeta, L, K, xs, I, (int)P, (int)lanes, log)", [v])
        SOFTMAX.instantiate(
            "softmax_bw_{s}",
            "const {T}* g, const {T}* y, {T}* out, const long long* lmeta, long long L, "
            "long long K, long long gs, long long ys, long long I, long long P, long long lanes, "
            "long long log",
            "gtr::softmax_backward<{T}, {A}>(g, y, out, lmeta, L, K, gs, ys, I, (int)P, "
            "(int)lanes, log)", [v])


_declare_lines()


@CUDA.register("_scan")
def scan(result: Tensor, inp: Tensor, dim: int, op: str, reverse: bool = False) -> None:
    """cumsum (op '+') / cumprod (op '*') along ``dim`` in float64 / complex128 / int64, as
    the CPU does; ``reverse`` scans from the end (cumsum's gradient)."""
    s = short_name(inp._dtype, "_scan")
    if op not in ("+", "*"):
        raise ValueError(f"_scan: unknown op {op!r}")
    ln = lines(inp._shape, dim, [inp])
    if ln.L == 0 or ln.K == 0:
        return
    target = _staged(result, int_to_int64(inp._dtype))
    threads = ln.L * 32 if ln.I == 1 else ln.L  # a warp per contiguous line, else a thread
    launch(SCANS, f"scan_{'mul' if op == '*' else 'add'}_{s}", grid_for(threads, BLOCK), BLOCK,
           [inp, target, constant_array(ln.meta), int(ln.L), int(ln.K),
            int(ln.kstrides[0]), int(ln.I), int(bool(reverse))])
    if target is not result:
        result.copy_(target)


def _float_short(t: Tensor, name: str) -> str:
    s = short_name(t._dtype, name)
    if t._dtype not in FLOAT_DTYPES:
        raise TypeError(f"'{name}' on CUDA needs a floating point tensor, got {t._dtype}")
    return s


@CUDA.register("softmax")
def softmax(result: Tensor, inp: Tensor, dim: int, log: bool) -> None:
    """softmax / log_softmax along ``dim``: a running (max, sum of exp) per line, then the
    normalised values (a slice with a NaN or infinite max is NaN, as on the CPU)."""
    s = _float_short(inp, "softmax")
    _check_out(result, inp._dtype, "softmax", "its result")
    ln = lines(inp._shape, dim, [inp])
    if ln.L == 0 or ln.K == 0:
        return
    grid, P, T = _line_launch(ln)
    launch(SOFTMAX, f"softmax_{s}", grid, BLOCK,
           [inp, result, constant_array(ln.meta), int(ln.L), int(ln.K),
            int(ln.kstrides[0]), int(ln.I), int(P), int(T),
            int(bool(log))], SHARED_BYTES)


@CUDA.register("_softmax_backward")
def softmax_backward(result: Tensor, grad: Tensor, output: Tensor, dim: int, log: bool) -> None:
    """The gradient of softmax / log_softmax's input from the output's gradient and the
    output: one sum per line, then one elementwise pass."""
    s = _float_short(output, "_softmax_backward")
    _check_out(result, output._dtype, "_softmax_backward", "its result")
    _check_out(grad, output._dtype, "_softmax_backward", "the gradient")
    ln = lines(output._shape, dim, [grad, output])
    if ln.L == 0 or ln.K == 0:
        return
    grid, P, T = _line_launch(ln)
    launch(SOFTMAX, f"softmax_bw_{s}", grid, BLOCK,
           [grad, output, result, constant_array(ln.meta), int(ln.L), int(ln.K),
            int(ln.kstrides[0]), int(ln.kstrides[1]), int(ln.I), int(P),
            int(T), int(bool(log))], SHARED_BYTES)


"""CUDA reductions, scans and softmax (kernels/cuda/reduce.cu) against the CPU backend.

The shared suites (tests/gputensor/test_reduction.py, tests/autograd/test_grad_reduction.py)
check values against PyTorch on small shapes; these cover what they don't reach on CUDA:
layouts the launcher must describe (permuted, sliced, expanded, offset views), sizes that
cross blocks and split the reduced index over blocks, 16-bit floats, NaN and tie rules across
those splits, and that reduce.cu compiles with NVRTC for real GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gputensor as gt

pytestmark = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime")


def _reduction() -> Any:
    from gputensor.kernels.cuda.ops import reduce as reduction

    return reduction


def _np(t: gt.Tensor) -> np.ndarray:
    return t.cpu().numpy()


def check(fn: Callable[[gt.Tensor], Any], a: np.ndarray, rtol: float = 1e-5,
          atol: float = 1e-6, dtype: gt.dtype | None = None) -> None:
    """``fn`` on CUDA matches ``fn`` on the CPU backend (values, dtype and shape)."""
    cpu = gt.tensor(a, dtype=dtype)
    want, got = fn(cpu), fn(cpu.to("cuda"))
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, tuple) else (got,)
    for w, g in zip(wants, gots, strict=True):
        assert g.device.type == "cuda"
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        gv, wv = _np(g), w.numpy()
        if gv.dtype.kind in "biu":
            np.testing.assert_array_equal(gv, wv)
        else:
            np.testing.assert_allclose(gv.astype(np.float64), wv.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True)


def rand(shape: tuple[int, ...], seed: int = 0, low: float = -2.0, high: float = 2.0
         ) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


# ---- layouts ---------------------------------------------------------------------------------
VIEWS: dict[str, Callable[[gt.Tensor], gt.Tensor]] = {
    "contiguous": lambda x: x,
    "permuted": lambda x: x.permute(2, 0, 3, 1),
    "sliced": lambda x: x[1:, ::2, :, 1::2],
    "expanded": lambda x: x[:, :1].expand(4, 6, 5, 6),
    "transposed": lambda x: x.transpose(1, 3),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("dims", [None, 0, 3, (1, 2), (0, 2), (0, 1, 3)])
def test_layouts(view: str, dims: Any) -> None:
    a = rand((4, 6, 5, 6))
    v = VIEWS[view]
    kw = {} if dims is None else {"dim": dims}
    check(lambda x: v(x).sum(**kw), a)
    check(lambda x: v(x).amax(**kw), a)
    check(lambda x: v(x).var(**kw), a, rtol=1e-4)
    check(lambda x: v(x).logsumexp(dims if dims is not None else (0, 1, 2, 3)), a)
    check(lambda x: v(x).norm(3, dim=dims), a, rtol=1e-4)


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("dim", [0, 1, 3])
def test_line_ops_on_views(view: str, dim: int) -> None:
    a = rand((4, 6, 5, 6), seed=1)
    v = VIEWS[view]
    check(lambda x: v(x).max(dim), a)
    check(lambda x: v(x).argmin(dim, keepdim=True), a)
    check(lambda x: v(x).cumsum(dim), a)
    check(lambda x: v(x).softmax(dim), a)
    check(lambda x: v(x).log_softmax(dim), a)


def test_offset_view_and_argmax_of_flattened_view() -> None:
    a = rand((7, 9), seed=2)
    check(lambda x: x[2:, 3:].sum(0), a)
    check(lambda x: x[2:, 3:].t().argmax(), a)
    check(lambda x: x[2:5, 1:].t().max(1), a)


# ---- sizes crossing blocks, split reductions ---------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((3, 40000), 1), ((40000, 3), 0), ((100000,), 0),
                                       ((5, 300, 7), 1), ((2, 70, 700), (0, 2))])
def test_long_reductions(shape: tuple, dim: Any) -> None:
    a = rand(shape, seed=3)
    check(lambda x: x.sum(dim), a, rtol=1e-4, atol=1e-3)
    check(lambda x: x.mean(dim), a, rtol=1e-4, atol=1e-5)
    check(lambda x: x.amin(dim), a)
    check(lambda x: x.var(dim), a, rtol=1e-4)
    check(lambda x: gt.std_mean(x, dim), a, rtol=1e-4, atol=1e-5)
    check(lambda x: x.logsumexp(dim), a, rtol=1e-5)
    check(lambda x: x.norm(dim=dim), a, rtol=1e-4)
    check(lambda x: (x > 0).all(dim), a)
    check(lambda x: gt.count_nonzero(x > 1, dim), a)


def test_many_partials_are_merged_by_lanes_of_a_warp() -> None:
    """74 partials per output (more than the 32 lanes that merge them, not a power of two),
    three outputs: the finishing pass strides lanes over partials, then shuffles."""
    a = rand((3, 600000), seed=5)
    a[1, 599_000] = 9.0
    a[1, 7] = 9.0  # the first of two maxima, in another split
    assert _reduction().plan(gt.tensor(a, device="cuda"), (1,)).splits == 74
    check(lambda x: x.sum(1), a, rtol=1e-4, atol=1e-3)
    check(lambda x: x.var(1), a, rtol=1e-4)
    check(lambda x: x.argmax(1), a)


def test_split_reduction_keeps_first_extremum_and_first_nan() -> None:
    n = 100000
    a = np.zeros(n, np.float32)
    a[[77, 50000, n - 1]] = 5.0
    check(lambda x: x.argmax(), a)
    check(lambda x: x.max(0), a)
    a[[60000, 90000]] = np.nan
    check(lambda x: x.argmax(), a)
    check(lambda x: x.amax(), a)
    check(lambda x: x.argmin(), a)
    cols = np.zeros((50000, 2), np.float32)
    cols[[3, 40000], 0] = -1.0
    cols[[49999], 1] = np.nan
    check(lambda x: x.min(0), cols)


def test_integer_sums_accumulate_in_int64() -> None:
    a = np.full((3, 5000), 100, np.int8)
    check(lambda x: x.sum(1), a)
    check(lambda x: x.sum(), a)
    big = np.full(40, 3, np.int64)
    check(lambda x: x.prod(), big)  # wraps like int64 on the CPU
    check(lambda x: x.cumprod(0), big)
    check(lambda x: x.cumsum(0), np.arange(70000, dtype=np.int32))


def test_empty_and_all_reduced_to_nothing() -> None:
    e = np.zeros((0, 4), np.float32)
    check(lambda x: x.sum(0), e)
    check(lambda x: x.prod(0), e)
    check(lambda x: x.mean(0), e)
    check(lambda x: x.norm(dim=0), e)
    check(lambda x: x.amax(1), e)
    check(lambda x: x.cumsum(0), e)
    check(lambda x: x.softmax(1), e)


# ---- 16-bit floats -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float16, gt.bfloat16])
def test_half_precision(dtype: gt.dtype) -> None:
    a = rand((6, 700), seed=4)
    tol = {"rtol": 1e-2, "atol": 1e-2}
    check(lambda x: x.sum(1), a, dtype=dtype, **tol)
    check(lambda x: x.mean(0), a, dtype=dtype, **tol)
    check(lambda x: x.amax(1), a, dtype=dtype)
    check(lambda x: x.max(0), a, dtype=dtype)
    check(lambda x: x.argmin(1), a, dtype=dtype)
    check(lambda x: x.var(1), a, dtype=dtype, **tol)
    check(lambda x: x.norm(dim=1), a, dtype=dtype, **tol)
    check(lambda x: x.logsumexp(1), a, dtype=dtype, **tol)
    check(lambda x: x.softmax(1), a, dtype=dtype, **tol)
    check(lambda x: x.log_softmax(0), a, dtype=dtype, **tol)
    check(lambda x: x.cumsum(1), a, dtype=dtype, **tol)
    check(lambda x: x.prod(0), a, dtype=dtype, **tol)


def test_half_sum_overflows_like_torch() -> None:
    ones = gt.ones(70000, dtype=gt.float16, device="cuda")
    assert math.isinf(ones.sum().item())
    assert ones.sum(dtype=gt.float32).item() == 70000.0


# ---- scans, softmax ------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((3, 1000), 1), ((1000, 3), 0), ((4, 33, 5), 1),
                                       ((2, 3), 1)])
def test_scans(shape: tuple, dim: int) -> None:
    from gputensor.kernels.registry import OPS

    a = rand(shape, seed=5, low=0.9, high=1.1)
    check(lambda x: x.cumsum(dim), a, rtol=1e-5, atol=1e-4)
    check(lambda x: x.cumprod(dim), a, rtol=1e-4)
    check(lambda x: OPS["_reverse_cumsum"].frontend(x, dim), a, rtol=1e-5, atol=1e-4)
    check(lambda x: (x > 1).cumsum(dim), a)


@pytest.mark.parametrize("shape,dim", [((3, 3000), 1), ((3000, 3), 0), ((64, 40), -1),
                                       ((5, 17, 9), 1)])
def test_softmax_and_backward(shape: tuple, dim: int) -> None:
    from gputensor.kernels.registry import OPS

    a = rand(shape, seed=6, low=-20, high=20)
    g = rand(shape, seed=7)
    check(lambda x: x.softmax(dim), a)
    check(lambda x: x.log_softmax(dim), a, rtol=1e-5, atol=1e-5)
    for name in ("_softmax_backward", "_log_softmax_backward"):
        # the gradient as a non-contiguous view: the two operands have different strides
        check(lambda x, n=name: OPS[n].frontend(
            gt.tensor(g, device=x.device).transpose(0, -1).contiguous().transpose(0, -1),
            x.softmax(dim), dim), a, atol=1e-5)


@pytest.mark.parametrize("dtype,cols", [(gt.float32, 4096), (gt.float32, 2051),
                                        (gt.float64, 2050), (gt.float16, 4104)])
def test_softmax_long_lines_in_chunks(dtype: gt.dtype, cols: int) -> None:
    """Long contiguous lines take reduce.cu's 16-byte chunk path (aligned lines; the others,
    e.g. every second line of 2051 float32, and the tails, take the element path): the same
    values, special values inside long lines included, and the backward with contiguous g."""
    from gputensor.kernels.registry import OPS

    a = rand((4, cols), seed=8, low=-20, high=20)
    a[1, 5], a[2, 100], a[3, 7:cols:3] = np.nan, np.inf, -np.inf
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype is gt.float16 else {"rtol": 1e-5, "atol": 1e-5}
    check(lambda x: x.softmax(1), a, dtype=dtype, **tol)
    check(lambda x: x.log_softmax(1), a, dtype=dtype, **tol)
    check(lambda x: x[:, 1:].softmax(1), a, dtype=dtype, **tol)  # lines start off alignment
    g = rand((4, cols), seed=9)
    b = rand((4, cols), seed=10)
    for name, log in (("_softmax_backward", False), ("_log_softmax_backward", True)):
        check(lambda x, n=name, lg=log: OPS[n].frontend(
            x, gt.tensor(b, dtype=dtype, device=x.device).log_softmax(1) if lg else
            gt.tensor(b, dtype=dtype, device=x.device).softmax(1), 1),
            g, dtype=dtype, **tol)


def test_softmax_special_values() -> None:
    inf = math.inf
    a = np.array([[-inf, 0.0, 1.0], [-inf, -inf, -inf], [inf, 0.0, 1.0], [np.nan, 0.0, 1.0],
                  [1e30, -1e30, 0.0]], np.float32)
    check(lambda x: x.softmax(1), a)
    check(lambda x: x.log_softmax(1), a)
    check(lambda x: x.logsumexp(1), a)
    check(lambda x: x.t().softmax(0), a)


def test_results_in_another_dtype_are_cast_on_the_device() -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    check(lambda x: x.sum(1, dtype=gt.bool), a)
    check(lambda x: x.cumsum(0, dtype=gt.int8), a)
    R = _reduction()
    out = gt.empty(4, dtype=gt.float32, device="cuda")
    R.reduce("sum", gt.tensor(a, device="cuda"), (0,), out)
    assert out.tolist() == a.sum(0).astype(np.float32).tolist()


# ---- launcher plan ---------------------------------------------------------------------------
def test_plan_merges_dims_and_picks_the_mode() -> None:
    R = _reduction()
    x = gt.zeros(4, 6, 5, device="cuda")
    p = R.plan(x, (1, 2))
    assert p.meta == (1, 4, 30, 1, 30, 1) and p.row and (p.N, p.K) == (4, 30)
    p = R.plan(x, (0,))
    assert p.meta == (1, 30, 1, 1, 4, 30) and not p.row
    p = R.plan(x.permute(2, 0, 1), (0,))  # reduced dim innermost in memory: rows
    assert p.row and p.meta[-1] == 1
    p = R.plan(x, (0, 2))  # reduced dims not adjacent: two reduced dims, no copy
    assert p.meta[:3] == (1, 6, 5) and p.meta[3] == 2
    p = R.plan(gt.zeros(3, 100000, device="cuda"), (1,))
    assert p.splits > 1 and p.chunk * p.splits >= 100000
    # A bias gradient (batch 128, 256 features, over the batch): more threads per column
    # instead of a split, so one launch and no partials to merge.
    p = R.plan(gt.zeros(128, 256, device="cuda"), (0,))
    assert not p.row and (p.P, p.T, p.grid, p.splits) == (64, 4, 4, 1)
    check(lambda x: x.sum(0), rand((128, 256), seed=4), rtol=1e-5, atol=1e-5)
    check(lambda x: x.var(0), rand((128, 300), seed=4), rtol=1e-4)
    # Long columns still split, with 32 columns of 8 threads per block.
    p = R.plan(gt.zeros(4096, 128, device="cuda"), (0,))
    assert (p.P, p.T) == (32, 8) and p.splits > 1


def test_unsupported_dtypes_are_rejected_clearly() -> None:
    R = _reduction()
    x = gt.zeros(3, device="cuda")
    with pytest.raises(TypeError, match="writes indices as gputensor.int64"):
        R.arg_extreme(None, gt.zeros((), device="cuda"), x, 0, True)
    fake = type("Fake", (), {"_dtype": gt.complex64})()
    with pytest.raises(TypeError, match="'amax' on CUDA does not support dtype .*complex64"):
        R.reduce("amax", fake, (0,), None)  # complex sums exist; complex extrema do not
    with pytest.raises(TypeError, match="'logsumexp' on CUDA does not support dtype .*complex"):
        R.reduce("logsumexp", type("Fake", (), {"_dtype": gt.complex128})(), (0,), None)


# ---- NVRTC ---------------------------------------------------------------------------------
# Every instantiation is compiled for sm_70/80/90 by tests/cuda/test_nvrtc.py (all backend
# sources); this is the quick per-file check: every op template of reduce.cu with the dtypes
# that stress it (16-bit floats, double, narrow ints, bool), for each architecture.
_NVRTC_DTYPES = ("_f16", "_bf16", "_f64", "_b")


def _reduce_cu_sample() -> tuple[str, list[str]]:
    R = _reduction()
    body, names = None, []
    wrappers = []
    for src in (R.SUMS, R.SELECTS, R.ARGS, R.NORMS, R.MOMENTS, R.SCANS, R.SOFTMAX):
        head, _, tail = src.source().partition("// ---- generated instantiations ----\n")
        body = head
        for line in tail.splitlines():
            name = line.split("void ", 1)[1].split("(", 1)[0]
            if name.endswith(_NVRTC_DTYPES):
                wrappers.append(line)
                names.append(name)
    assert body is not None
    return body + "\n".join(wrappers) + "\n", names


# ---- contiguous lines: 16-byte vector loads --------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.bool_])
def test_long_contiguous_lines_match_the_cpu(dtype) -> None:
    """Lines long enough for the vectorised path (two 16-byte chunks per thread and more):
    aligned and unaligned starts (an offset view), a tail shorter than a chunk, and a full
    reduction split over blocks whose shares must stay aligned."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-2, 2, (3, 17001))
    a = (a > 0) if dtype is np.bool_ else (a * 40).astype(dtype) if dtype is np.int8 \
        else a.astype(dtype)
    tol = {"rtol": 2e-2, "atol": 2e-1} if dtype is np.float16 else {"rtol": 1e-4, "atol": 1e-3}
    for view in (lambda x: x, lambda x: x[:, 1:], lambda x: x[:, 3:-2]):
        check(lambda x, v=view: v(x).sum(1), a, **tol)
        check(lambda x, v=view: v(x).amax(1), a)
        if dtype is not np.bool_:
            check(lambda x, v=view: v(x).argmax(1), a)
            check(lambda x, v=view: v(x).argmin(1), a)
    big = rng.uniform(-1, 1, 300001).astype(np.float32)
    check(lambda x: x.sum(), big, rtol=1e-4, atol=1e-2)
    check(lambda x: x[5:].sum(), big, rtol=1e-4, atol=1e-2)


def test_arg_extrema_of_long_lines_keep_the_first_tie() -> None:
    a = np.zeros((2, 9000), np.float32)
    a[0, [700, 701, 5000, 8999]] = 3.0
    a[1, [4097, 2, 8000]] = -3.0
    x = gt.tensor(a, device="cuda")
    assert x.argmax(1).tolist() == [700, 0] and x.argmin(1).tolist() == [0, 2]
    assert x.max(1).indices.tolist() == [700, 0]

"""Reductions declared once: each is a fold of its input's elements, one record per reduction.

A :class:`Reduction` says what the fold computes, in the expression language of the elementwise
ops (Python syntax over the ``scalar_fns`` vocabulary), and nothing about how a backend walks
memory:

- ``map``: the value one element contributes, over ``x`` (the element) and ``p`` (the op's
  float parameter, e.g. a norm's order) and ``identity``;
- ``combine``: two partial results ``a`` and ``b`` into one (associative; the backends split a
  fold into lanes, blocks and threads and combine them in a fixed order);
- ``identity``: where every fold starts, a number or ``"lowest"``/``"highest"`` (the extreme
  values of the accumulator type: -inf/+inf for floats);
- ``finalize``: the result from the folded value ``a``, the element count ``n`` and ``p``;
- ``acc``: the accumulator rule (:data:`ACC_RULES`), which each backend turns into its types;
- ``out``: the result dtype for an input dtype, the rule the frontends also apply;
- ``ordered``: ``combine`` is a NaN-aware select, which must not be reassociated (the CPU
  backend compiles it without fast-math and folds SIMD lanes explicitly);
- ``dtypes``: the input dtypes kernels exist for.

The CPU backend (``kernels/cpu/reduce.py``) pastes the expressions into its Numba row and
column templates; the CUDA backend (``kernels/cuda/ops/reduce.py``) renders them with the
elementwise renderer into the op struct ``reduce.cu``'s block reduction calls. Reductions whose
accumulator is more than one number (var/std: Welford's (count, mean, M2) on CUDA, two exact
passes on the CPU; logsumexp: a running (max, sum); the arg-extrema: (value, index)) are
algorithms each backend writes for itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gputensor import _dtype as D

from .cuda.dtypes import ALL_DTYPES, FLOAT_DTYPES, INEXACT_DTYPES, REAL_DTYPES

# How the accumulator follows the input dtype (the CPU sums float32 rows in float32 lanes and
# combines blocks in float64; CUDA accumulates in one type per thread):
#   sum:    float for float16/bfloat16, the input's own precision for float/complex, int64
#           for integers and bools
#   same:   the input's type (float for float16/bfloat16 on CUDA)
#   bool:   a truth value (int64 0/1 on CUDA, where shuffles need a word)
#   int:    int64
#   real:   the real type of the input's precision (float for float16..complex64)
#   real64: float64
ACC_RULES = ("sum", "same", "bool", "int", "real", "real64")


def int_to_int64(d: D.dtype) -> D.dtype:
    """Sums and products of ints and bools are int64; floats and complex keep their dtype."""
    return D.int64 if d.category <= D.INTEGRAL else d


def logical(d: D.dtype) -> D.dtype:
    """all/any: bool, except that PyTorch keeps uint8 for uint8 inputs."""
    return D.uint8 if d is D.uint8 else D.bool


def real(d: D.dtype) -> D.dtype:
    """Norms of a complex input are real."""
    return d.to_real()


def same(d: D.dtype) -> D.dtype:
    return d


@dataclass(frozen=True)
class Reduction:
    """One fold (see the module docstring)."""

    name: str
    map: str
    combine: str
    identity: float | bool | str
    finalize: str = "a"
    acc: str = "sum"
    out: Callable[[D.dtype], D.dtype] = same
    ordered: bool = False
    dtypes: tuple[D.dtype, ...] = ALL_DTYPES

    def __post_init__(self) -> None:
        if self.acc not in ACC_RULES:
            raise ValueError(f"reduction '{self.name}': unknown accumulator rule {self.acc!r} "
                             f"(one of {', '.join(ACC_RULES)})")


# NaN wins and sticks, like torch.amax/amin.
_LARGER = "b if b > a or b != b else a"
_SMALLER = "b if b < a or b != b else a"

REDUCTIONS: dict[str, Reduction] = {r.name: r for r in (
    Reduction("sum", "x", "a + b", 0, out=int_to_int64),
    # Integers have no NaN: their nansum is "sum".
    Reduction("nansum", "x if x == x else identity", "a + b", 0, out=int_to_int64,
              dtypes=FLOAT_DTYPES),
    Reduction("prod", "x", "a * b", 1, out=int_to_int64),
    Reduction("mean", "x", "a + b", 0, finalize="a / n", dtypes=INEXACT_DTYPES),
    Reduction("amax", "x", _LARGER, "lowest", acc="same", ordered=True, dtypes=REAL_DTYPES),
    Reduction("amin", "x", _SMALLER, "highest", acc="same", ordered=True, dtypes=REAL_DTYPES),
    Reduction("all", "x != 0", "a & b", True, acc="bool", out=logical),
    Reduction("any", "x != 0", "a | b", False, acc="bool", out=logical),
    Reduction("count_nonzero", "x != 0", "a + b", 0, acc="int", out=lambda d: D.int64),
    # Vector norms by order: 0, 1, 2 and +-inf in the input's precision, any other p in float64.
    Reduction("norm0", "x != 0", "a + b", 0, acc="real", out=real, dtypes=INEXACT_DTYPES),
    Reduction("norm1", "abs(x)", "a + b", 0, acc="real", out=real, dtypes=INEXACT_DTYPES),
    Reduction("norm2", "abs2(x)", "a + b", 0, finalize="sqrt(a)", acc="real", out=real,
              dtypes=INEXACT_DTYPES),
    Reduction("norminf", "abs(x)", _LARGER, 0, acc="real", out=real, ordered=True,
              dtypes=INEXACT_DTYPES),
    Reduction("normninf", "abs(x)", _SMALLER, "highest", acc="real", out=real, ordered=True,
              dtypes=INEXACT_DTYPES),
    Reduction("normp", "ipow(abs(x), p)", "a + b", 0, finalize="ipow(a, 1.0 / p)",
              acc="real64", out=real, dtypes=INEXACT_DTYPES),
)}

# torch.norm's orders with a reduction of their own; any other p is "normp".
NORM_ORDERS = {0.0: "norm0", 1.0: "norm1", 2.0: "norm2", float("inf"): "norminf",
               float("-inf"): "normninf"}


def norm_reduction(p: float) -> str:
    return NORM_ORDERS.get(float(p), "normp")

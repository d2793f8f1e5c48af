"""The standing fuzz guard (issue 15): property-based calls of every public registry op
(elementwise, reductions, views and shape ops, scatter/sort/indexing, creation, composites)
against PyTorch as the oracle, on cpu and emulated cuda.

Each op gets random shapes (0-size and 0-d included), all 12 dtypes, strided, expanded,
transposed and offset inputs, NaN/inf values and out-of-range dims, indices and scalars
(tests/fuzz/_specs.py generates the arguments, _gen.py the tensors). Each call's outcome is
classified (tests/fuzz/_oracle.py): match, both_raise, gap, leniency, mismatch, internal. The
test fails on a mismatch or an internal error unless ``INTENDED`` below lists it with its
reason. CI runs a fixed, derandomized budget; ``pytest tests/fuzz --fuzz-deep`` (or
GPUTENSOR_FUZZ_DEEP=1) runs many more examples. The counts per class are printed in the
terminal summary (tests/fuzz/conftest.py)."""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from gputensor.kernels.registry import OPS

from ._gen import DT, Call, Drawer, Recipe
from ._oracle import CLASSES, FAILING, Outcome, classify
from ._specs import EXCLUDED, SPECS

__all__ = ["CLASSES"]

CI_EXAMPLES = 10
DEEP_EXAMPLES = 300


@dataclass(frozen=True)
class Intended:
    """A reviewed difference from PyTorch: ``op`` (a name or "*"), the outcome class, a regex
    on the outcome's description (searched), optionally a predicate on the call, and why."""
    op: str
    cls: str
    detail: str
    reason: str
    when: Callable[[Call, str], bool] | None = None

    def matches(self, call: Call, device: str, out: Outcome) -> bool:
        return (self.op in ("*", call.name) and self.cls == out.cls
                and re.search(self.detail, out.detail) is not None
                and (self.when is None or self.when(call, device)))

    def key(self) -> str:
        return f"{self.op} {self.cls}: {self.reason}"


# Reviewed differences. Entries marked "KNOWN BUG, not intended" are real bugs found by this
# fuzz test, listed only until they are fixed (remove the entry with the fix).
def _bug(op: str, cls: str, detail: str, what: str,
         when: Callable[[Call, str], bool] | None = None) -> Intended:
    return Intended(op, cls, detail, f"KNOWN BUG, not intended: {what}", when)


def _recipes(obj: object) -> list[Recipe]:
    if isinstance(obj, Recipe):
        return [obj]
    if isinstance(obj, tuple | list):
        return [r for o in obj for r in _recipes(o)]
    if isinstance(obj, dict):
        return [r for o in obj.values() for r in _recipes(o)]
    return []


def _all_empty(call: Call, device: str) -> bool:
    """Every tensor argument (or, for a factory, the size) has no elements."""
    rs = _recipes((call.args, call.kwargs))
    if rs:
        return all(0 in r.shape for r in rs)
    return any(isinstance(a, int) and a == 0 for a in call.args) or \
        any(isinstance(a, tuple) and 0 in a for a in call.args)


def _has_dtype(call: Call, *names: str) -> bool:
    rs = _recipes((call.args, call.kwargs))
    dts = {r.dtype for r in rs} | {v.name for v in call.kwargs.values() if isinstance(v, DT)}
    return bool(dts & set(names))


def _is_one(x: object) -> bool:
    if isinstance(x, Recipe):
        t = x.build(torch, "cpu")
        return t.numel() > 0 and bool((t == 1).all())
    return x is True or x == 1


def _has_huge(call: Call, device: str) -> bool:
    """Some floating (or complex: either part) argument holds a finite value of magnitude
    >= 1e20 (the fuzz's huge values), next to which ordinary values vanish in a sum."""
    for r in _recipes((call.args, call.kwargs)):
        t = r.build(torch, "cpu")
        if t.is_complex():
            t = torch.view_as_real(t.resolve_conj())
        if t.is_floating_point() and t.numel():
            finite = t.double()[t.double().isfinite()]
            if finite.numel() and bool((finite.abs() >= 1e20).any()):
                return True
    return False


def _overflowing_power(call: Call) -> bool:
    """pow's result (as PyTorch computes it) has an infinite part."""
    if call.name != "pow":
        return False
    args = [a.build(torch, "cpu") if isinstance(a, Recipe) else a for a in call.args]
    try:
        out = torch.pow(*args)
    except Exception:  # noqa: BLE001 - no result, nothing overflowed
        return False
    if out.is_complex():
        out = torch.view_as_real(out.resolve_conj())
    return bool(out.isinf().any())


_SINGLE = ("float32", "float16", "bfloat16", "complex64")


def _large_power_phase(call: Call) -> bool:
    """A complex power a ** b (ldexp, exp2: a = 2) with |b| max |log a| above 64, where float's
    rounding of the phase of exp(b log a), |b log a| 2^-24 rad, passes the tolerance."""
    def largest(v: object, f: Callable[[np.ndarray], np.ndarray]) -> float:
        x = np.asarray(v.base if isinstance(v, Recipe) else v, dtype=np.complex128).ravel()
        with np.errstate(all="ignore"):
            y = np.abs(f(x[(x != 0) & np.isfinite(x)]))
        return float(y.max(initial=0.0))
    args = call.args
    if call.name in ("ldexp", "exp2") and args:
        base, exponent = math.log(2), args[-1]
    elif call.name in ("pow", "float_power") and len(args) > 1:
        base, exponent = largest(args[0], np.log), args[1]
    else:
        return False
    return largest(exponent, lambda x: x) * base > 64


def _power_overflows(magnitude: float, p: object) -> bool:
    """|x|^p past float's range for an order p other than 0, 1, 2 and +-inf."""
    if not isinstance(p, int | float) or float(p) in (0.0, 1.0, 2.0, math.inf, -math.inf):
        return False
    with np.errstate(all="ignore"):
        return bool(magnitude ** float(p) > np.finfo(np.float32).max)


def _single_precision_power_overflow(call: Call, device: str) -> bool:
    """A float32/16-bit norm of order p (not 0, 1, 2, inf) whose |x|^p overflows float."""
    x = call.args[0]
    p = call.kwargs.get("p", call.args[1] if len(call.args) > 1 else 2)
    if not isinstance(x, Recipe) or x.dtype not in _SINGLE:
        return False
    return _power_overflows(np.abs(x.base.astype(np.complex128)).max(initial=0.0), p)


def _complex_with_infinities_on_cuda(call: Call, device: str) -> bool:
    """A complex input (or one converted by ``dtype=``) holding an infinite part, reduced on a
    CUDA device."""
    x, to = call.args[0], call.kwargs.get("dtype")
    if not (device.startswith("cuda") and isinstance(x, Recipe)):
        return False
    complex_ = x.dtype.startswith("complex") or isinstance(to, DT) and to.name.startswith("complex")
    return complex_ and bool(np.isinf(x.base).any())


def _bfloat16_nan(call: Call, device: str) -> bool:
    """A bfloat16 operand holding a NaN."""
    return any(r.dtype == "bfloat16" and bool(np.isnan(r.base).any())
               for r in _recipes((call.args, call.kwargs)))


def _past_cephes_asymptotic_region(call: Call, device: str) -> bool:
    """igamma/igammac operands with a > 200 and 4.5 sqrt(a) <= |x - a| < 0.3 a for some pair:
    where gputensor uses Temme's expansion and Cephes its truncated series."""
    def values(v: object) -> np.ndarray:
        base = v.base if isinstance(v, Recipe) else np.asarray(v)
        return np.asarray(base, dtype=np.float64).ravel()
    if len(call.args) < 2:
        return False
    a, x = values(call.args[0]), np.sort(values(call.args[1]))
    a = a[np.isfinite(a) & (a > 200)]
    lo, hi = np.searchsorted(x, a - 0.3 * a), np.searchsorted(x, a - 4.5 * np.sqrt(a), "right")
    lo2, hi2 = np.searchsorted(x, a + 4.5 * np.sqrt(a)), np.searchsorted(x, a + 0.3 * a)
    return bool(np.any(hi > lo) or np.any(hi2 > lo2))


def _complex64_input(call: Call, device: str) -> bool:
    return isinstance(call.args[0], Recipe) and call.args[0].dtype == "complex64"


def _int64_limit_fill(call: Call, device: str) -> bool:
    v = call.kwargs.get("value", call.args[2] if len(call.args) > 2 else 0)
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2 ** 53


def _single_precision_dist_overflow(call: Call, device: str) -> bool:
    """dist(a, b, p) of float32/16-bit tensors whose |a - b|^p overflows float."""
    a, b = call.args[:2]
    p = call.kwargs.get("p", call.args[2] if len(call.args) > 2 else 2)
    if not isinstance(a, Recipe) or not isinstance(b, Recipe) or a.dtype not in _SINGLE:
        return False
    diff = (a.build(torch, "cpu").to(torch.complex128) - b.build(torch, "cpu")
            .to(torch.complex128)).abs()
    return _power_overflows(float(diff.max()) if diff.numel() else 0.0, p)


def _single_precision_pole(call: Call, device: str) -> bool:
    """polygamma(n >= 1, x) of a non-double x holding a non-positive integer."""
    x = call.args[1] if len(call.args) > 1 else None
    if not isinstance(x, Recipe) or x.dtype == "float64":
        return False
    t = x.build(torch, "cpu").double()
    return bool(((t <= 0) & (t == t.floor())).any())


def _rank_deficient(call: Call, device: str) -> bool:
    """The matrix argument is singular to within its dtype's rounding (times a condition
    margin of 1e3) in some batch element."""
    t = call.args[0].build(torch, "cpu")
    if t.dim() < 2 or 0 in t.shape:
        return False
    eps = torch.finfo(t.real.dtype if t.is_complex() else t.dtype).eps
    s = torch.linalg.svdvals(t.to(torch.complex128 if t.is_complex() else torch.float64))
    return bool((s[..., -1] <= s[..., 0] * eps * 1e3).any()) if s.shape[-1] else False


def _overlapping_view(call: Call, device: str) -> bool:
    """as_strided_scatter's (size, stride) view names some element more than once."""
    size, stride = call.args[2], call.args[3]
    offsets = [0]
    for n, step in zip(size, stride, strict=True):
        offsets = [o + i * step for o in offsets for i in range(n)]
    return len(set(offsets)) < len(offsets)


def _expanded_reduced(call: Call, device: str) -> bool:
    x = call.args[0]
    return call.kwargs.get("dim") is not None and any(k == "expand" for k, _ in x.steps)


def _float_to_int_undefined(call: Call, device: str) -> bool:
    """A dtype= integer cast of floating values outside its range (or non-finite)."""
    dt = call.kwargs.get("dtype")
    if not isinstance(dt, DT) or dt.name not in ("uint8", "int8", "int16", "int32", "int64"):
        return False
    info = np.iinfo(dt.name)
    for r in _recipes(call.args):
        t = r.build(torch, "cpu")
        if t.is_floating_point() and t.numel():
            v = t.double()
            if not bool(((v >= info.min) & (v <= info.max)).all()):
                return True
    return False


def _nan_and_inf_parts(call: Call, device: str) -> bool:
    """A complex argument holds an element with one NaN and one infinite part."""
    for r in _recipes(call.args):
        t = r.build(torch, "cpu")
        if t.is_complex() and t.numel():
            re, im = t.real, t.imag
            if bool(((re.isnan() & im.isinf()) | (re.isinf() & im.isnan())).any()):
                return True
    return False


def _floating_nan(call: Call, device: str) -> bool:
    """A floating (or complex) argument holds a NaN."""
    for r in _recipes(call.args):
        t = r.build(torch, "cpu")
        if (t.is_floating_point() or t.is_complex()) and t.numel() and bool(t.isnan().any()):
            return True
    return False


def _single_in_double_out(call: Call, device: str) -> bool:
    """A double out= holding a result computed in single precision (no double input)."""
    out = call.kwargs.get("out")
    return isinstance(out, Recipe) and out.dtype in ("float64", "complex128") and \
        not any(r.dtype in ("float64", "complex128") for r in _recipes(call.args))


def _complex64_power_of_double_on_cuda(call: Call, device: str) -> bool:
    """ldexp of a double input whose factor 2 ** other is complex64 (a complex64 exponent, or a
    complex128 input with a single-precision exponent), on a CUDA device."""
    if not device.startswith("cuda") or len(call.args) < 2:
        return False
    x, e = call.args[0], call.args[1]
    if not (isinstance(x, Recipe) and isinstance(e, Recipe)) or \
            x.dtype not in ("float64", "complex128"):
        return False
    return e.dtype == "complex64" or x.dtype == "complex128" and e.dtype in _SINGLE


INTENDED: list[Intended] = [
    *(Intended(name, "mismatch", r"values differ", "var/std of a whole float32 tensor on the "
               "CPU centre on PyTorch's float32 mean, whose rounding (1.00000009e30 for three "
               "1.0000000150e30) makes equal huge values deviate, and the square of that "
               "deviation overflows float (inf); CUDA runs Welford's update in double (PyTorch's "
               "CUDA algorithm) and gives 0", lambda c, d: d.startswith("cuda") and _has_huge(c, d))
      for name in ("var", "std")),
    Intended("geqrf", "mismatch", r"values differ", "a (numerically) rank-deficient matrix: "
             "after the first reflectors a column is zero up to rounding, and its Householder "
             "vector and tau are made from that rounding, which differs between LAPACK builds "
             "(SciPy's vs PyTorch's); both results are valid factorizations of the input",
             _rank_deficient),
    *(Intended(name, "mismatch", r"values differ", "the mean/variance of input whose sum "
               "cancels (e.g. -1e30, 1e30 and O(1) values in one reduction) is below the "
               "inputs' rounding error either way; the digits left depend on the summation "
               "order (PyTorch's Welford update vs gputensor's two-pass)", _has_huge)
      for name in ("std_mean", "var_mean")),
    Intended("*", "mismatch", r"Half.* \| torch works|vs torch complex32",
             "gputensor has no complex32 (chalf): complex(float16, float16), "
             "view_as_complex(float16) and float16-with-complex promotion differ",
             lambda c, d: _has_dtype(c, "float16")),
    *(Intended(op, "mismatch", r"raises IndexError: .*out of bounds.*torch RuntimeError: "
               r"setStorage", "an out-of-range index raises IndexError; PyTorch's CPU kernel "
               "does not check it and fails later in setStorage")
      for op in ("index_copy", "index_fill")),
    Intended("*", "mismatch", r"(not implemented for|Dimension out of range|out of bounds|"
             r"Expected dtype|"
             r"more than one "
             r"element of the written-to|must be a floating point|needs a floating point).*"
             r"torch works$", "dtype, dim, index-range and overlap checks run on empty "
             "tensors too; PyTorch skips some of them when there is nothing to compute",
             _all_empty),
    Intended("cov", "mismatch", r"values differ", "a complex covariance whose products "
             "overflow (|x|^2 past complex64's range): where an overflowing complex GEMM puts "
             "inf and nan depends on the BLAS kernel's arithmetic (PyTorch's conjugate-"
             "transposed gemm gives nan+nanj, NumPy's product of the conjugated copy inf+nanj)",
             lambda c, d: isinstance(c.args[0], Recipe) and c.args[0].dtype == "complex64"
             and bool(np.abs(c.args[0].base.astype(np.complex128)).max(initial=0.0) > 1e19)),
    Intended("norm", "mismatch", r"values differ", "a norm of order p other than 0, 1, 2 and "
             "+-inf sums |x|^p in float64 (kernels/reduce.py's normp), where PyTorch sums it "
             "in float for single and half precision: |x|^p past float's range (1e30 ** 3) "
             "is inf there and the exact norm here", _single_precision_power_overflow),
    Intended("prod", "mismatch", r"values differ", "a complex product with infinite parts "
             "depends on the order of its factors ((a c) b can be nan where (a b) c is inf): "
             "the CUDA reduction multiplies in a tree order, as PyTorch's CUDA kernels do, "
             "PyTorch's CPU oracle left to right", _complex_with_infinities_on_cuda),
    Intended("*", "mismatch", r"values differ", "the bits of a bfloat16 NaN: PyTorch's "
             "float-to-bfloat16 conversion gives 0x7FC0 for any NaN in its scalar path and "
             "0xFFFF in its vectorised .to(), ml_dtypes' keeps the sign (0x7FC0 or 0xFFC0); only "
             "ops that read a NaN's sign or bits (copysign, signbit, hash_tensor) see the "
             "difference", lambda c, d: c.name in ("copysign", "signbit", "hash_tensor")
             and _bfloat16_nan(c, d)),
    *(Intended(op, "mismatch", r"values differ", "large orders: for a > 200 PyTorch (Cephes) "
               "uses Temme's expansion only where |x - a| < 4.5 sqrt(a), elsewhere a power "
               "series cut at 2000 terms that needs O(sqrt(a)); gputensor uses the expansion up "
               "to |x - a| < 0.3 a on both devices and matches mpmath (P(1e8, 99942700) is "
               "4.99e-9, PyTorch 3.55e-9)", _past_cephes_asymptotic_region)
      for op in ("igamma", "igammac")),
    Intended("sinc", "mismatch", r"values differ", "complex64 sinc near a zero of sin(pi z): "
             "PyTorch evaluates sin(pi z) / (pi z) in single precision (1.7960951e-07 at "
             "1.0000001 + 1e-7i); gputensor gives the correctly rounded value "
             "(1.1920928e-07)", _complex64_input),
    Intended("pad", "mismatch", r"values differ", "PyTorch's constant pad converts its fill "
             "value through double, so an int64 value past 2**53 is rounded (2**63 - 1 "
             "becomes int64's minimum); gputensor fills the exact integer", _int64_limit_fill),
    Intended("dist", "mismatch", r"values differ", "dist(a, b, p) is the norm of a - b: as "
             "for norm, an order p other than 0, 1, 2 and +-inf sums |a - b|^p in float64 "
             "where PyTorch overflows float", _single_precision_dist_overflow),
    Intended("polygamma", "mismatch", r"values differ", "polygamma at a pole (a non-positive "
             "integer) in single precision: PyTorch's float trigamma evaluates pi^2 / "
             "sin^2(pi x) in float (7.9e10 at -128), gputensor in double (4.0e28, what PyTorch "
             "gives in float64); both stand for the pole", _single_precision_pole),
    Intended("*", "mismatch", r"more than one element of the written-to tensor.*torch works",
             "an expanded in-place target is refused even when it has no elements (PyTorch "
             "writes nothing and does not check)",
             lambda c, d: isinstance(c.args[0], Recipe) and 0 in c.args[0].shape),
    *(Intended(op, "mismatch", r"values differ", "a large complex exponent (|b log a| from "
               "64 up to 1e30), or a power that overflows, leaves the phase of exp(b log a) "
               "(and so the values, and the signs of infinite parts: inf * cos(phase)) to "
               "float rounding, |b log a| 2^-24 rad: CUDA computes complex64 powers in double "
               "(the complex128 value, rounded), PyTorch in float",
               lambda c, d: d.startswith("cuda") and _has_dtype(c, "complex64")
               and (_has_huge(c, d) or _overflowing_power(c) or _large_power_phase(c)))
      for op in ("pow", "float_power", "ldexp", "exp2")),
    Intended("ldexp", "mismatch", r"values differ", "ldexp(x, other) is x * pow(2, other) "
             "with the power in other's precision: for a double x and a complex64 power the "
             "result carries the power's rounding (|x 2^other| 2^-24, all of a part that "
             "cancels to near 0) and is compared at double tolerance; CUDA computes complex64 "
             "powers in double, PyTorch's CPU in float", _complex64_power_of_double_on_cuda),
    Intended("pow", "mismatch", r"values differ", "complex x ** 1 is exact (issue 15); "
             "PyTorch's complex pow goes through exp/log and loses precision at extreme "
             "magnitudes", lambda c, d: _has_dtype(c, "complex64", "complex128")
             and _is_one(c.args[1])),
    Intended("*", "mismatch", r"raises IndexError: .* out of bounds.*torch works",
             "index values are range-checked even when the source has no elements (PyTorch "
             "skips the check when there is nothing to add)",
             lambda c, d: c.name in ("index_add", "index_copy")
             and (0 in c.args[3].shape or 0 in c.args[0].shape)),
    Intended("take_along_dim", "mismatch", r"raises IndexError: index .* out of bounds.*torch "
             "works", "PyTorch's take_along_dim does not range-check an index along dim: past a "
             "size-1 dim it reads the input broadcast to the index's size, past a strided "
             "view a wrong element ([1., 2., 3., 4.][::2] at index 2 gave 1.); gputensor raises"),
    Intended("index_reduce", "mismatch", r"raises IndexError: index .* out of bounds.*torch "
             r"RuntimeError: setStorage", "an out-of-range index raises IndexError; PyTorch's "
             "CPU index_reduce does not check it and fails later in setStorage"),
    Intended("as_strided_scatter", "mismatch", r"values differ", "the (size, stride) view "
             "overlaps itself, so several source elements land on one element; which one wins "
             "is unspecified (PyTorch's iteration order differs from gputensor's row-major "
             "one)", _overlapping_view),
    *(Intended(op, "mismatch", r"values differ", "along an expanded (stride-0) dim PyTorch's "
               "CPU median kernel returns uninitialised memory (median(tensor([0.]).expand(3), "
               "0) gives 4.6e-41); gputensor gives the median", _expanded_reduced)
      for op in ("median", "nanmedian")),
    Intended("*", "mismatch", r"values differ", "floating values outside an integer dtype's "
             "range (inf, nan, 1e30) cast to it by dtype=: the conversion is undefined in C++, "
             "and PyTorch's own kernels disagree (sum gives 0, nansum 224 for inf to uint8)",
             _float_to_int_undefined),
    Intended("*", "mismatch", r"values differ", "a double out= holding a float32 result "
             "compares at double tolerance what both compute in float: PyTorch's vectorised "
             "float32 transcendentals are not correctly rounded (cos(1) is 1 ulp off), and "
             "near a nonzero integer sinc's float value is rounding noise (sin(pi x) ~ 1e-8)",
             _single_in_double_out),
    *(Intended(op, "mismatch", r"values differ", "C99 leaves the sign of an infinite part "
               "unspecified for asinh(nan +- inf i) (asin(+-inf + nan i)); PyTorch's scalar "
               "and vectorised CPU paths disagree on it (0-d -inf, longer tensors +inf); "
               "gputensor gives +inf", _nan_and_inf_parts)
      for op in ("asinh", "asin")),
    Intended("index_add", "mismatch", r"raises IndexError: index_add_\(\): index .* out of "
             r"bounds.*torch RuntimeError: index .* out of bounds", "an out-of-range index "
             "raises IndexError; PyTorch raises IndexError for a 1-d self but RuntimeError "
             "(the same words) for a self of more dims"),
    Intended("index_select", "mismatch", r"raises IndexError: .*out of bounds.*torch "
             r"RuntimeError: INDICES element is out of DATA bounds", "an out-of-range index "
             "raises IndexError; PyTorch raises it too except for a source with no elements, "
             "whose kernel reports a RuntimeError"),
    *(Intended(op, "mismatch", r"raises IndexError: .*out of bounds.*torch RuntimeError: "
               r"ZeroDivisionError", "an index into a dim of size 0 raises IndexError; "
               "PyTorch's CPU kernel divides by the zero size and reports a RuntimeError")
      for op in ("take_along_dim", "gather")),
    Intended("lobpcg", "mismatch", r"not positive-definite.*torch works", "method='basic' "
             "breaks down once converged (the Cholesky factor of a Gram matrix of nearly "
             "dependent vectors); whether it does depends on rounding: PyTorch fails on the "
             "same inputs in float64", lambda c, d: c.kwargs.get("method") == "basic"),
    Intended("lobpcg", "internal", r"ZeroDivisionError: lobpcg\(\): the initial X is zero",
             "a zero X: PyTorch raises Python's ZeroDivisionError ('0.0 cannot be raised to a "
             "negative power'); gputensor raises the same type, saying what is wrong"),
    Intended("unique", "mismatch", r"values differ", "unique(dim=...) of values with a NaN: "
             "PyTorch's CPU kernel std::sort-s the slices with a comparator that NaN makes "
             "inconsistent (neither below nor equal to anything), so where a NaN lands depends "
             "on libstdc++'s insertion/introsort steps; gputensor sorts NaN last, as unique() "
             "without dim does", lambda c, d: c.kwargs.get("dim") is not None
             and _floating_nan(c, d)),
    Intended("logcumsumexp", "mismatch", r"values differ", "complex values with a huge "
             "part (1e30): the phase of exp there is rounding noise, and gputensor's log-step "
             "scan (pairs, then pairs of pairs) associates the logaddexps differently from "
             "PyTorch's sequential loop, so later elements take another rounding-bound phase "
             "(mpmath's exact value is neither: seed 16411's third element is 0.52 + 2.74j, "
             "PyTorch's -0.141 + 4.380j, gputensor's -0.160 + 4.457j)",
             lambda c, d: _has_dtype(c, "complex64", "complex128") and _has_huge(c, d)),
    Intended("trapezoid", "mismatch", r"values differ",
             "PyTorch's integer trapezoid subtracts the end halves after an integer sum that "
             "wraps (uint8 [128] gives 64); gputensor gives the exact 0",
             lambda c, d: c.args[0].dtype in ("uint8", "int8", "int16", "int32", "int64")),
]


def _intended(call: Call, device: str, out: Outcome) -> Intended | None:
    for entry in INTENDED:
        if entry.matches(call, device, out):
            return entry
    return None


def test_every_public_op_is_fuzzed_or_excluded() -> None:
    public = {n for n in OPS if not n.startswith("_")}
    missing = sorted(public - set(SPECS) - set(EXCLUDED))
    assert not missing, f"public ops with no fuzz generator and no exclusion: {missing}"
    stale = sorted((set(SPECS) | set(EXCLUDED)) - public - {"__getitem__", "__setitem__"})
    assert not stale, f"fuzz generators for ops not in the registry: {stale}"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_fuzz_op(name: str, device: str, fuzz_deep: bool, fuzz_examples: int | None,
                 fuzz_seed: int | None, fuzz_record) -> None:
    salt = zlib.crc32(name.encode())
    examples = fuzz_examples or (DEEP_EXAMPLES if fuzz_deep else CI_EXAMPLES)
    seeded = "" if fuzz_seed is None else f" (fuzz seed {fuzz_seed})"

    @settings(max_examples=examples, derandomize=fuzz_seed is None,
              deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate, Phase.shrink])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        d = Drawer(data, fuzz_deep, salt)
        call = SPECS[name](d)
        out = classify(call, device)
        entry = _intended(call, device, out)
        fuzz_record(device, out.cls, f"{call!r} on {device}: {out.detail}"[:600],
                    None if entry is None else entry.key())
        if out.cls in FAILING and entry is None:
            raise AssertionError(f"{out.cls}: {call!r} on {device}: {out.detail}{seeded}") \
                from (out.gt_exc if out.cls == "internal" else None)

    if fuzz_seed is not None:
        run = seed(fuzz_seed ^ salt)(run)    # per-op seeds: ops do not share one draw sequence
    run()

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

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
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


def _scalar_out_of_range(call: Call, device: str) -> bool:
    if call.name not in ("bucketize", "searchsorted"):
        return False
    rs = [r for r in _recipes(call.args) if r.dtype in ("uint8", "int8", "int16", "int32")]
    info = np.iinfo(rs[0].dtype) if rs else None
    return info is not None and any(type(a) is int and not info.min <= a <= info.max
                                    for a in call.args)


INTENDED: list[Intended] = [
    *(_bug(name, "mismatch", r"values differ", "var/std of complex input with an inf "
           "entry is NaN (torch gives a finite value); found when fast_math changed the CPU "
           "vocabulary's kernel cache") for name in ("std_mean", "var_mean")),
    _bug("trapezoid", "internal", r"IndexError: tuple index out of range",
         "trapezoid of a 0-d tensor leaks IndexError (PyTorch: IndexError 'Dimension "
         "specified as 0 but tensor has no dimensions')"),
    _bug("cumulative_trapezoid", "internal", r"IndexError: tuple index out of range",
         "cumulative_trapezoid of a 0-d tensor leaks IndexError"),
    _bug("nan_to_num", "internal", r"int\(\) argument must be",
         "nan_to_num(int tensor, nan=None) leaks TypeError from int(None)"),
    _bug("nan_to_num", "mismatch", r"values differ: np.float64\(nan\) vs torch",
         "nan_to_num(x, nan=None) keeps NaN (PyTorch: None means the default 0.0)",
         lambda c, d: "nan" in c.kwargs and c.kwargs["nan"] is None),
    _bug("unique_consecutive", "internal", r"IndexError: tuple index out of range",
         "unique_consecutive(0-d, dim=0) on cuda leaks IndexError"),
    _bug("addr", "mismatch", r"dtype int64 vs torch bool",
         "addr of bool tensors with int beta/alpha returns int64 (PyTorch: bool)"),
    _bug("adjoint", "mismatch", r"raises IndexError.*torch RuntimeError",
         "adjoint of a 1-D/0-d tensor raises IndexError (PyTorch RuntimeError 'only "
         "supported on matrices')"),
    _bug("aminmax", "mismatch", r"raises RuntimeError.*torch IndexError",
         "aminmax over an empty dim raises RuntimeError (PyTorch IndexError)"),
    _bug("bincount", "mismatch", r"dtype \w+ vs torch int64",
         "bincount of an empty input with weights returns the weights' dtype (PyTorch: "
         "int64)"),
    _bug("clamp", "mismatch", r"not supported for bool tensors \| torch works",
         "clamp of bool tensors raises (PyTorch computes it)"),
    _bug("clamp_min", "mismatch", r"not supported for bool tensors \| torch works",
         "clamp_min of bool tensors raises"),
    _bug("clamp_max", "mismatch", r"not supported for bool tensors \| torch works",
         "clamp_max of bool tensors raises"),
    Intended("*", "mismatch", r"Half.* \| torch works|vs torch complex32",
             "gputensor has no complex32 (chalf): complex(float16, float16), "
             "view_as_complex(float16) and float16-with-complex promotion differ",
             lambda c, d: _has_dtype(c, "float16")),
    _bug("diff", "mismatch", r"shape", "diff(n=0, prepend=, append=) concatenates "
         "(PyTorch returns the input unchanged)"),
    *(_bug(op, "mismatch", r"raises IndexError: index .* out of bounds.*torch RuntimeError: "
           r"index", f"{op} with an out-of-range index raises IndexError (PyTorch "
           "RuntimeError)") for op in ("gather", "scatter_add", "scatter_reduce", "scatter")),
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
    Intended("*", "mismatch", r"values differ", "a Python int searched in integer boundaries "
             "that cannot hold it: PyTorch first casts it to their dtype (-3 wraps to 253 in "
             "uint8); gputensor compares the values", _scalar_out_of_range),
    _bug("__getitem__", "mismatch", r"shape .* vs torch",
         "x[False, False] adds a dim per bool (PyTorch: one dim for all of them)",
         lambda c, d: isinstance(c.args[1], tuple)
         and sum(type(i) is bool for i in c.args[1]) > 1),
    _bug("__setitem__", "mismatch", r"can't be broadcast to the destination shape \[\] \| "
         "torch works", "x[0] = tensor([v]) into a 0-d slot raises (PyTorch drops the leading "
         "1-dims of the value)"),
    _bug("argmax", "mismatch", r"raises RuntimeError.*torch IndexError", "argmax of an empty "
         "tensor without dim raises RuntimeError (PyTorch IndexError)"),
    _bug("argmin", "mismatch", r"raises RuntimeError.*torch IndexError", "as argmax"),
    _bug("block_diag", "mismatch", r"dtype", "block_diag's result dtype differs from PyTorch's "
         "for mixed dtypes (bool 0-d, float16 0-d, bfloat16[0]: float32 vs bfloat16)"),
    _bug("logaddexp", "mismatch", r"complex.*torch works", "logaddexp refuses complex inputs"),
    _bug("logsumexp", "mismatch", r"complex inputs are not supported \| torch works",
         "logsumexp refuses complex inputs"),
    _bug("logcumsumexp", "mismatch", r"raises NotImplementedError.*torch IndexError",
         "logcumsumexp checks the dtype before the dim"),
    _bug("logspace", "mismatch", r"values differ", "logspace with an integer dtype rounds "
         "differently (logspace(0, 2.5, 2, base=2, dtype=uint8): [1, 5] vs PyTorch [1, 4])",
         lambda c, d: _has_dtype(c, "uint8", "int8", "int16", "int32", "int64")),
    _bug("max", "mismatch", r"does not support complex.*torch IndexError", "max checks the "
         "dtype before the empty-dim check"),
    _bug("min", "mismatch", r"does not support complex.*torch IndexError", "as max"),
    _bug("median", "mismatch", r"cannot be converted to type .* torch works",
         "median of an empty integer tensor raises (PyTorch returns a value)"),
    _bug("nanmedian", "mismatch", r"cannot be converted to type .* torch works", "as median"),
    _bug("movedim", "mismatch", r"raises RuntimeError.*torch IndexError", "movedim checks "
         "duplicates before the range of the dims"),
    _bug("flip", "mismatch", r"raises IndexError.*torch RuntimeError: dim \d+ appears multiple",
         "flip checks the range of the dims before duplicates (PyTorch: duplicates first)"),
    _bug("narrow", "mismatch", r"raises IndexError.*torch RuntimeError", "narrow past the end "
         "raises IndexError (PyTorch RuntimeError)"),
    _bug("renorm", "mismatch", r"raises IndexError.*torch RuntimeError", "renorm of a 0-d/1-d "
         "tensor checks the dim before the rank"),
    _bug("tanh", "mismatch", r"values differ.*nan", "complex tanh with a large real part "
         "returns nan (PyTorch +-1)"),
    _bug("rand_like", "internal", r"putmask", "rand_like(float16 0-d) leaks NumPy's putmask "
         "TypeError"),
    _bug("topk", "internal", r"could not broadcast|kth\(=", "topk(0-d, k=0 or 1) leaks "
         "NumPy's ValueError"),
    _bug("__setitem__", "internal", r"setting an array element with a sequence",
         "x[tensor(0)] = tensor([3]) on a 1-element tensor leaks NumPy's ValueError (PyTorch "
         "writes 3)"),
    _bug("topk", "mismatch", r"values differ", "topk(0-d, k=0) on cuda returns an unwritten "
         "value (PyTorch returns the input element)",
         lambda c, d: isinstance(c.args[0], Recipe) and c.args[0].shape == ()),
    _bug("__setitem__", "mismatch", r"raises IndexError.*torch RuntimeError: value cannot be "
         "converted", "x[0] = -2.25 on a 0-d uint8 tensor checks the index before the value "
         "(PyTorch: RuntimeError 'value cannot be converted')"),
    Intended("*", "mismatch", r"more than one element of the written-to tensor.*torch works",
             "an expanded in-place target is refused even when it has no elements (PyTorch "
             "writes nothing and does not check)",
             lambda c, d: isinstance(c.args[0], Recipe) and 0 in c.args[0].shape),
    _bug("index_copy", "mismatch", r"same dtype.*torch IndexError", "index_copy on a 0-d "
         "tensor checks dtypes before the index count"),
    _bug("scatter_add", "mismatch", r"raises RuntimeError.*torch IndexError: Dimension out",
         "scatter_add checks the index dtype before the dim"),
    _bug("logspace", "mismatch", r"values differ", "logspace with an infinite end: "
         "logspace(0, inf, 2, base=2) is [nan, inf] (PyTorch [nan, nan])",
         lambda c, d: any(a == float("inf") for a in c.args[:2])),
    Intended("pow", "mismatch", r"values differ", "complex x ** 1 is exact (issue 15); "
             "PyTorch's complex pow goes through exp/log and loses precision at extreme "
             "magnitudes", lambda c, d: _has_dtype(c, "complex64", "complex128")
             and _is_one(c.args[1])),
    _bug("index_add", "mismatch", r"raises RuntimeError.*torch IndexError: Dimension specified",
         "index_add on a 0-d tensor checks sizes before the dim (PyTorch IndexError)"),
    _bug("index_reduce", "mismatch", r"raises RuntimeError.*torch IndexError: Dimension",
         "index_reduce on a 0-d tensor raises RuntimeError (PyTorch IndexError)"),
    _bug("index_select", "mismatch", r"raises IndexError.*torch RuntimeError",
         "index_select of a 0-d tensor with a bad index raises IndexError (PyTorch "
         "RuntimeError)"),
    _bug("kthvalue", "mismatch", r"not implemented for 'Bool'",
         "kthvalue of a 0-d bool tensor raises (PyTorch computes it)"),
    _bug("linspace", "mismatch", r"values differ", "linspace with an infinite end: "
         "linspace(0, inf, 2, dtype=float16) is [nan, inf] (PyTorch [nan, nan])"),
    _bug("logit", "mismatch", r"with a bool tensor is not supported.*torch works",
         "logit of a bool tensor raises (PyTorch computes it in float)"),
    _bug("*", "mismatch", r"values differ", "elementwise ops with out= of another dtype "
         "compute in out's dtype (PyTorch computes in the promoted dtype, then casts): "
         "add(uint8 255, uint8 1, alpha=-3, out=int16) gives 508 (PyTorch 252), "
         "atan2(bool, float16, out=float32) is not rounded to float16",
         lambda c, d: "out" in c.kwargs),
    _bug("nansum", "mismatch", r"dtype (bool|uint8|int8|int16|int32) vs torch int64",
         "nansum of bool/integer tensors keeps their dtype (PyTorch: int64)"),
    _bug("put", "mismatch", r"shape '\[\]' is invalid for input of size \d+.*torch works",
         "put on a 0-d tensor raises RuntimeError \"shape '[]' is invalid\""),
    _bug("cumulative_trapezoid", "mismatch", r"dtype (uint8|int8|int16|int32|int64|bool) vs "
         r"torch float32", "cumulative_trapezoid of an empty integer input keeps its dtype "
         "(PyTorch: float32)"),
    _bug("trapezoid", "mismatch", r"dtype int64 vs torch (bool|uint8|int8|int16|int32)",
         "trapezoid of an empty bool/integer input returns int64 (PyTorch keeps the input's "
         "dtype for an empty input)"),
    Intended("*", "mismatch", r"raises IndexError: .* out of bounds.*torch works",
             "index values are range-checked even when the source has no elements (PyTorch "
             "skips the check when there is nothing to add)",
             lambda c, d: c.name in ("index_add", "index_copy")
             and (0 in c.args[3].shape or 0 in c.args[0].shape)),
    Intended("index_reduce", "mismatch", r"raises IndexError: index .* out of bounds.*torch "
             r"RuntimeError: setStorage", "an out-of-range index raises IndexError; PyTorch's "
             "CPU index_reduce does not check it and fails later in setStorage"),
    Intended("trapezoid", "mismatch", r"values differ",
             "PyTorch's integer trapezoid subtracts the end halves after an integer sum that "
             "wraps (uint8 [128] gives 64); gputensor gives the exact 0",
             lambda c, d: c.args[0].dtype in ("uint8", "int8", "int16", "int32", "int64")),
    _bug("index_reduce", "mismatch", r"raises IndexError.*torch NotImplementedError",
         "index_reduce range-checks the index before refusing a bool input"),
    _bug("kthvalue", "mismatch", r"raises RuntimeError.*torch IndexError: kthvalue\(\): "
         "Expected reduction dim", "kthvalue over an empty dim raises RuntimeError "
         "'selected number k out of range' (PyTorch IndexError)"),
    _bug("repeat", "mismatch", r"raises RuntimeError.*torch TypeError: repeat\(\) missing",
         "x.repeat() with no sizes raises RuntimeError (PyTorch TypeError)"),
    _bug("softmax", "mismatch", r"raises RuntimeError.*torch IndexError: Dimension out of",
         "softmax checks the dtype before the dim (PyTorch IndexError first)"),
    _bug("log_softmax", "mismatch", r"raises RuntimeError.*torch IndexError: Dimension out of",
         "log_softmax checks the dtype before the dim"),
    _bug("unique", "mismatch", r"raises IndexError.*torch NotImplementedError",
         "unique(complex, dim=) checks the dim before the dtype"),
    _bug("where", "mismatch", r"got a tensor with dtype Byte \| torch works",
         "where refuses a uint8 condition (PyTorch accepts it with a deprecation warning)"),
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
                 fuzz_record) -> None:
    salt = zlib.crc32(name.encode())
    examples = fuzz_examples or (DEEP_EXAMPLES if fuzz_deep else CI_EXAMPLES)

    @settings(max_examples=examples, derandomize=True,
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
            raise AssertionError(f"{out.cls}: {call!r} on {device}: {out.detail}") \
                from (out.gt_exc if out.cls == "internal" else None)

    run()

"""Python numbers written into tensors follow PyTorch's range checks (issue 15): fill-like ops
(fill_, full, new_full, full_like, x[i] = v, masked_fill, index_fill) raise "value cannot be
converted to type ... without overflow" where PyTorch does and wrap where it wraps; gt.tensor
checks its Python data the way torch.tensor does. Each case runs on both libraries and must
give the same values or the same exception type and message."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import gputensor as gt

INT = ["uint8", "int8", "int16", "int32", "int64"]
FLOAT = ["float16", "bfloat16", "float32", "float64"]
COMPLEX = ["complex64", "complex128"]
VALUES = [0, -1, 127, 128, 255, 256, -255, -256, -129, 2**31, -(2**31) - 1, 2**63 - 1, 2**63,
          -(2**63), 2**64, -(2**63) - 1, 0.5, -0.5, 255.5, 256.0, -1.0, 7e4, 1e6, 3e38, 3.5e38,
          1e39, 1e300, -1e300, float(2**63), math.inf, -math.inf, math.nan, True, False,
          1 + 0j, 1 + 2j, complex(math.nan, 0), 1e39j, np.int64(300), np.float64(3e9)]


def _outcome(fn: Callable[[Any], Any], lib: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(lib)
    except (RuntimeError, TypeError, ValueError, OverflowError) as e:
        return type(e).__name__, str(e)


def _same(fn: Callable[[Any], Any], device: str) -> None:
    want = _outcome(fn, torch)
    got = _outcome(lambda lib: fn(lib) if lib is torch else fn(_OnDevice(device)), gt)
    if want[0] == "ok" and got[0] == "ok":
        np.testing.assert_array_equal(np.asarray(got[1], dtype=complex),
                                      np.asarray(want[1], dtype=complex))
    else:
        assert got == want


class _OnDevice:
    """gputensor with ``device`` filled into the creation calls the cases make."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __getattr__(self, name: str) -> Any:
        attr = getattr(gt, name)
        if name in ("zeros", "full", "tensor", "full_like"):
            return lambda *a, **k: attr(*a, device=self.device, **k)
        return attr


@pytest.mark.parametrize("dtype", INT + FLOAT + COMPLEX + ["bool"])
def test_fill_checks_the_value_like_pytorch(device: str, dtype: str) -> None:
    for v in VALUES:
        def case(lib: Any, v: Any = v) -> Any:
            return lib.zeros(3, dtype=getattr(lib, dtype)).fill_(v).tolist()
        _same(case, device)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int64", "float16", "float32"])
def test_full_and_fill_like_ops(device: str, dtype: str) -> None:
    def dt(lib: Any) -> Any:
        return getattr(lib, dtype)

    for v in (300, -1, -256, 1e6, math.nan, 1 + 2j, 2**63):
        _same(lambda lib, v=v: lib.full((2,), v, dtype=dt(lib)).tolist(), device)
        _same(lambda lib, v=v: lib.full_like(lib.zeros(2, dtype=dt(lib)), v).tolist(), device)
        _same(lambda lib, v=v: lib.zeros(1, dtype=dt(lib)).new_full((2,), v).tolist(), device)


@pytest.mark.parametrize("index", [0, slice(0, 1), [0], "mask"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32"])
def test_setitem_with_a_python_number(device: str, dtype: str, index: Any) -> None:
    for v in (300, -1, 1e6, 1e39, math.inf, 1 + 0j, 1 + 2j, True):
        def case(lib: Any, v: Any = v) -> Any:
            x = lib.zeros(3, dtype=getattr(lib, dtype))
            idx = lib.tensor([True, False, True]) if index == "mask" else index
            x[idx] = v
            return x.tolist()
        _same(case, device)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "float16", "float32"])
def test_masked_fill_and_index_fill(device: str, dtype: str) -> None:
    for v in (300, -1, 1000, math.inf, 1 + 2j, 2 + 0j, 5):
        for wrap in (False, True):  # the value as a Python number or a 0-dim tensor
            def fill(lib: Any, v: Any = v, wrap: bool = wrap) -> Any:
                x = lib.zeros(3, dtype=getattr(lib, dtype))
                val = lib.tensor(v) if wrap else v
                mask = lib.tensor([True, False, True])
                return x.masked_fill(mask, val).tolist()

            def index_fill(lib: Any, v: Any = v, wrap: bool = wrap) -> Any:
                x = lib.zeros(3, dtype=getattr(lib, dtype))
                val = lib.tensor(v) if wrap else v
                return x.index_fill(0, lib.tensor([0, 2]), val).tolist()
            if wrap and isinstance(v, complex) and dtype != "float32":
                continue  # torch.tensor(complex) is complex64 whatever the target: same path
            _same(fill, device)
            _same(index_fill, device)


@pytest.mark.parametrize("dtype", INT + FLOAT + COMPLEX + ["bool", None])
def test_tensor_from_python_numbers(device: str, dtype: str | None) -> None:
    data = [[300], [-1], [-256], [255.9], [-0.5], [2.5], [math.nan], [math.inf], [1e39], [2**63],
            [2**64], [2**63 - 1], [1 + 2j, 3], [1 + 0j], [True, 2], [1, 2.5], [[1], [300]]]
    for d in data:
        def case(lib: Any, d: Any = d) -> Any:
            kw = {} if dtype is None else {"dtype": getattr(lib, dtype)}
            return lib.tensor(d, **kw).tolist()
        _same(case, device)


def test_numpy_data_converts_without_python_checks() -> None:
    """torch.tensor(ndarray, dtype=...) casts like NumPy (no range check): so does gt.tensor."""
    a = np.array([300, -1], np.int64)
    assert gt.tensor(a, dtype=gt.uint8).tolist() == torch.tensor(a, dtype=torch.uint8).tolist()


ALPHAS = [("int64", "int64", 0.5), ("float64", "float32", False), ("float32", "float32", 1j),
          ("bool", "bool", True), ("int64", "float32", 0.5), ("int64", "int64", 2),
          ("complex64", "float32", 1j), ("int32", "int32", np.float64(2.0))]


@pytest.mark.parametrize("a,b,alpha", ALPHAS)
def test_add_sub_alpha_kind_follows_the_result_dtype(device: str, a: str, b: str,
                                                     alpha: Any) -> None:
    for name in ("add", "sub"):
        if name == "sub" and a == b == "bool":
            continue  # PyTorch refuses bool subtraction for its own reason
        def case(lib: Any, name: str = name) -> Any:
            x = lib.tensor([1, 0], dtype=getattr(lib, a))
            y = lib.tensor([1, 1], dtype=getattr(lib, b))
            return getattr(lib, name)(x, y, alpha=alpha).tolist()

        def inplace(lib: Any, name: str = name) -> Any:
            x = lib.tensor([1, 0], dtype=getattr(lib, a))
            return getattr(x, name + "_")(lib.tensor([1, 1], dtype=getattr(lib, a)),
                                          alpha=alpha).tolist()
        _same(case, device)
        _same(inplace, device)

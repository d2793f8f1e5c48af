"""Writes into memory that the written-to tensor or an input shares follow PyTorch (issue 15):
an expanded (self-overlapping) output and an input that partly overlaps the output are refused
with PyTorch's message; the identical view, fills and undecidable (non-dense) layouts are
allowed. Each case runs on both libraries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import gputensor as gt

CASES: dict[str, Callable[[Any, str], Any]] = {
    "expand add_": lambda lib, d: lib.zeros(3, 1, device=d).expand(3, 4).add_(1),
    "expand mul_": lambda lib, d: lib.arange(3.0, device=d).expand(4, 3).mul_(2),
    "expand exp_": lambda lib, d: lib.zeros(3, 1, device=d).expand(3, 4).exp_(),
    "expand clamp_": lambda lib, d: lib.zeros(3, 1, device=d).expand(3, 4).clamp_(0, 1),
    "expand relu_": lambda lib, d: lib.relu_(lib.zeros(3, 1, device=d).expand(3, 4)),
    "expand copy_": lambda lib, d: lib.zeros(3, 1, device=d).expand(3, 4).copy_(
        lib.ones(3, 4, device=d)),
    "expand out=": lambda lib, d: lib.add(lib.ones(3, 4, device=d), 1,
                                          out=lib.zeros(3, 1, device=d).expand(3, 4)),
    "expand fill_": lambda lib, d: lib.zeros(3, 1, device=d).expand(3, 4).fill_(1),
    "expand zero_": lambda lib, d: lib.ones(3, 1, device=d).expand(3, 4).zero_(),
    "expand setitem": lambda lib, d: _setitem(lib.zeros(3, 1, device=d).expand(3, 4), 2.0),
    "row into its matrix": lambda lib, d: (lambda a: a.add_(a[0]))(
        lib.arange(12.0, device=d).view(3, 4)),
    "shifted copy_": lambda lib, d: (lambda a: a[:2].copy_(a[1:3]))(lib.arange(4.0, device=d)),
    "shifted out=": lambda lib, d: (lambda a: lib.mul(a[:-1], 2, out=a[1:]))(
        lib.arange(5.0, device=d)),
    "transposed": lambda lib, d: (lambda a: a.add_(a.t()))(lib.arange(4.0, device=d).view(2, 2)),
    "same view": lambda lib, d: (lambda a: a.add_(a, alpha=2))(lib.arange(4.0, device=d)),
    "same view out=": lambda lib, d: (lambda a: lib.add(a, 1, out=a))(lib.arange(4.0, device=d)),
    "interleaved (not dense)": lambda lib, d: (lambda a: a[::2].add_(a[1::2]))(
        lib.arange(6.0, device=d)),
    "disjoint halves": lambda lib, d: (lambda a: a[:2].add_(a[2:]))(lib.arange(4.0, device=d)),
}


def _setitem(x: Any, v: Any) -> Any:
    x[:] = v
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_overlapping_writes_match_pytorch(device: str, name: str) -> None:
    fn = CASES[name]
    try:
        want = fn(torch, "cpu")
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            fn(gt, device)
        assert str(got.value) == str(e)
        return
    np.testing.assert_array_equal(fn(gt, device).cpu().numpy(), want.numpy())

"""The dtype registry: names, aliases, finfo/iinfo, default dtype, promotion against PyTorch."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import ALL_DTYPES, requires_torch, torch, torch_dtype


def test_names_and_aliases() -> None:
    assert str(gt.float32) == "gputensor.float32"
    assert repr(gt.int64) == "gputensor.int64"
    assert gt.float is gt.float32 and gt.double is gt.float64 and gt.half is gt.float16
    assert gt.long is gt.int64 and gt.int is gt.int32 and gt.short is gt.int16
    assert isinstance(gt.bfloat16, gt.dtype)
    assert [d.itemsize for d in (gt.uint8, gt.int16, gt.bfloat16, gt.complex128)] == [1, 2, 2, 16]


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_dtype_pickles_to_singleton(dt: gt.dtype) -> None:
    assert pickle.loads(pickle.dumps(dt)) is dt


def test_flags() -> None:
    assert gt.float16.is_floating_point and not gt.int8.is_floating_point
    assert gt.complex64.is_complex and not gt.float64.is_complex
    assert gt.int8.is_signed and not gt.uint8.is_signed and not gt.bool.is_signed


@requires_torch
@pytest.mark.parametrize("dt", [gt.float16, gt.bfloat16, gt.float32, gt.float64])
def test_finfo_matches_torch(dt: gt.dtype) -> None:
    ours, theirs = gt.finfo(dt), torch.finfo(torch_dtype(dt))
    for field in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(ours, field) == pytest.approx(getattr(theirs, field)), field


@requires_torch
@pytest.mark.parametrize("dt", [gt.uint8, gt.int8, gt.int16, gt.int32, gt.int64])
def test_iinfo_matches_torch(dt: gt.dtype) -> None:
    ours, theirs = gt.iinfo(dt), torch.iinfo(torch_dtype(dt))
    assert (ours.bits, ours.min, ours.max) == (theirs.bits, theirs.min, theirs.max)


def test_finfo_iinfo_reject_wrong_kind() -> None:
    with pytest.raises(TypeError, match="floating"):
        gt.finfo(gt.int32)
    with pytest.raises(TypeError, match="integer"):
        gt.iinfo(gt.float32)


def test_default_dtype() -> None:
    assert gt.get_default_dtype() is gt.float32
    gt.set_default_dtype(gt.float64)
    assert gt.tensor([1.5]).dtype is gt.float64
    assert gt.tensor([1j]).dtype is gt.complex128
    assert gt.tensor([1]).dtype is gt.int64
    with pytest.raises(TypeError, match="floating"):
        gt.set_default_dtype(gt.int32)


@requires_torch
@pytest.mark.parametrize("a", ALL_DTYPES)
def test_promote_types_matches_torch(a: gt.dtype) -> None:
    for b in ALL_DTYPES:
        expected = torch.promote_types(torch_dtype(a), torch_dtype(b))
        assert gt.promote_types(a, b).name == str(expected).removeprefix("torch."), (a, b)


def test_dtype_from_numpy_errors() -> None:
    with pytest.raises(TypeError, match="no gputensor equivalent"):
        gt.from_numpy(np.array(["a"]))

"""Creation ops against PyTorch: ranges, spaced sequences, eye and full, on every device."""

from __future__ import annotations

import pytest

import gputensor as gt
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("args", [(5,), (1, 7), (0, 1, 0.25), (10, 0, -3), (-2.5, 2.5, 0.5)])
def test_arange_matches_torch(device, args):
    got, want = gt.arange(*args, device=device), torch.arange(*args)
    assert got.dtype.name == str(want.dtype).split(".")[1]
    assert_close(got, want)


@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize("args", [(0, 1, 5), (-3, 2, 1), (2, -1, 7), (1, 1, 0)])
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_spaced_sequences_match_torch(device, fn, args, dtype):
    got = getattr(gt, fn)(*args, dtype=dtype, device=device)
    want = getattr(torch, fn)(*args, dtype=getattr(torch, dtype.name))
    assert got.dtype is dtype and tuple(got.shape) == tuple(want.shape)
    assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_logspace_base_matches_torch(device):
    assert_close(gt.logspace(0, 3, 4, base=2.0, device=device), torch.logspace(0, 3, 4, base=2.0))
    with pytest.raises(RuntimeError, match="non-negative"):
        gt.logspace(0, 1, -1)


@pytest.mark.parametrize("args", [(3,), (2, 4), (4, 2), (0,)])
def test_eye_matches_torch(device, args):
    assert_close(gt.eye(*args, device=device), torch.eye(*args))


def test_full_matches_torch(device):
    assert_close(gt.full((2, 3), 7, device=device), torch.full((2, 3), 7))
    assert_close(gt.full((2,), 1.5, device=device), torch.full((2,), 1.5))
    assert_close(gt.full((1,), True, device=device), torch.full((1,), True))


@pytest.mark.parametrize(("size", "stride"), [((2, 3), (1, 2)), ((2, 3), (3, 1)),
                                              ((0, 3), (5, 1)), ((4,), (2,)), ((), ())])
def test_empty_strided_matches_torch(device, size, stride):
    got = gt.empty_strided(size, stride, dtype=gt.float32, device=device)
    want = torch.empty_strided(size, stride, dtype=torch.float32)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    assert got.device.type == gt.device(device).type
    got.copy_(gt.arange(got.numel(), dtype=gt.float32).reshape(size))  # writable where it says
    assert got.cpu().tolist() == gt.arange(got.numel(), dtype=gt.float32).reshape(size).tolist()


@pytest.mark.parametrize("make", [
    lambda: gt.empty(-2, 3), lambda: gt.zeros((2, -1)), lambda: gt.ones([-1]),
    lambda: gt.full((-3,), 1.0), lambda: gt.rand(-1), lambda: gt.randperm(-2),
    lambda: gt.empty_strided((-2, 3), (3, 1)), lambda: gt.FloatTensor(-1, 2)])
def test_a_negative_size_is_pytorchs_error(make):
    with pytest.raises(RuntimeError, match="Trying to create tensor with negative dimension"):
        make()


def test_empty_strided_errors():
    with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match .* \(1\)"):
        gt.empty_strided((2, 3), (3,))
    with pytest.raises(RuntimeError, match="negative strides are not supported"):
        gt.empty_strided((2, 3), (-1, 1))

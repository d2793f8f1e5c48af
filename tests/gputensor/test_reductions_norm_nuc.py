"""torch.norm with a string order other than 'fro' is linalg.matrix_norm over ``dim`` (every
dim by default), values, gradients and errors as PyTorch's (fuzz seed 13011: p='nuc' was
refused)."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, torch


@pytest.mark.parametrize("shape, kwargs", [((3, 4), {}), ((0, 0), {}), ((2, 3, 4),
                                           {"dim": (1, 2), "keepdim": True}),
                                           ((2, 3, 4), {"dim": (0, 2)})])
def test_nuclear_norm_as_pytorch(device, shape, kwargs) -> None:
    x = np.random.default_rng(0).standard_normal(shape)
    got_x = gt.tensor(x, device=device, requires_grad=True)
    want_x = torch.tensor(x, requires_grad=True)
    got, want = gt.norm(got_x, p="nuc", **kwargs), torch.norm(want_x, p="nuc", **kwargs)
    assert_close(got, want)
    assert_close(got_x.norm("nuc", **kwargs), want)
    if got.numel() and x.size:
        got.sum().backward()
        want.sum().backward()
        assert_close(got_x.grad, want_x.grad)


@pytest.mark.parametrize("shape, p, kwargs", [((2, 3, 4), "nuc", {}), ((3, 4), "nuc", {"dim": 1}),
                                              ((3, 3), "bad", {})])
def test_matrix_orders_refused_as_pytorch(device, shape, p, kwargs) -> None:
    with pytest.raises(RuntimeError) as want:
        torch.norm(torch.ones(shape), p=p, **kwargs)
    with pytest.raises(RuntimeError) as got:
        gt.norm(gt.ones(shape, device=device), p=p, **kwargs)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("dim", [(0, 2), (0, -3), (1, -1), (-2, 0)])
def test_matrix_norm_dims_checked_as_pytorch(device, dim) -> None:
    """Out-of-range dims are PyTorch's IndexError (they wrapped silently, so (0, 2) of a
    matrix was 'dims must be different'; fuzz seed 15111), equal ones named wrapped."""
    for call in (lambda m, x: m.linalg.matrix_norm(x, dim=dim),
                 lambda m, x: m.norm(x, p="nuc", dim=dim)):
        with pytest.raises((RuntimeError, IndexError)) as want:
            call(torch, torch.ones(2, 3))
        with pytest.raises(want.type) as got:
            call(gt, gt.ones(2, 3, device=device))
        assert str(got.value) == str(want.value)

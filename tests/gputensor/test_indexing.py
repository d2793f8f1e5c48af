"""__getitem__/__setitem__ and index_put_ against PyTorch, including the error cases."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, requires_torch, torch

GET_CASES = [
    ("int", lambda x: x[1]),
    ("neg_int", lambda x: x[-1, -2]),
    ("slices", lambda x: x[1:, :2]),
    ("step", lambda x: x[::2, 1::3]),
    ("none", lambda x: x[None, :, None]),
    ("ellipsis", lambda x: x[..., 1]),
    ("ellipsis_mid", lambda x: x[0, ..., 2]),
    ("int_list", lambda x: x[[0, 2]]),
    ("int_tensor", lambda x: x[gt.tensor([2, 0, 2]) if isinstance(x, gt.Tensor)
                              else torch.tensor([2, 0, 2])]),
    ("two_int_lists", lambda x: x[[0, 1], [3, 2]]),
    ("list_and_slice", lambda x: x[1:, [0, 3]]),
    ("separated_advanced", lambda x: x[[0, 1], :, [1, 2]] if x.dim() == 3 else x[[0, 1]]),
    ("negative_index_list", lambda x: x[[-1, -3]]),
    ("bool_mask", lambda x: x[x > 5]),
    ("bool_mask_rows", lambda x: x[(x.sum(1) > 10) if x.dim() == 2 else x > 0]),
    ("scalar_bool", lambda x: x[True]),
    ("broadcast_index", lambda x: x[[[0], [1]], [1, 2]]),
]


@requires_torch
@pytest.mark.parametrize("name,fn", GET_CASES, ids=[c[0] for c in GET_CASES])
def test_getitem_matches_torch(device: str, name: str, fn) -> None:
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_close(fn(gt.tensor(base, device=device)), fn(torch.tensor(base)))


@requires_torch
def test_getitem_3d_separated_advanced(device: str) -> None:
    base = np.arange(24).reshape(2, 3, 4)
    ours = gt.tensor(base, device=device)[[0, 1], :, [1, 2]]
    assert_close(ours, torch.tensor(base)[[0, 1], :, [1, 2]])
    ours = gt.tensor(base, device=device)[:, [0, 2]][..., [1]]
    assert_close(ours, torch.tensor(base)[:, [0, 2]][..., [1]])


def test_getitem_on_noncontiguous(device: str) -> None:
    a = np.arange(20).reshape(4, 5)
    x = gt.tensor(a, device=device).t()
    np.testing.assert_array_equal(x[[1, 3], 1:].cpu().numpy(), a.T[[1, 3], 1:])
    np.testing.assert_array_equal(x[x > 10].cpu().numpy(), a.T[a.T > 10])


SET_CASES = [
    ("int", lambda x: x.__setitem__(1, 7)),
    ("slice_tensor", lambda x: x.__setitem__((slice(None), 0), x[:, 1] * 2)),
    ("broadcast_row", lambda x: x.__setitem__(slice(0, 2), x[2])),
    ("list", lambda x: x.__setitem__([0, 2], -1)),
    ("mask", lambda x: x.__setitem__(x > 6, 0)),
    ("pairs", lambda x: x.__setitem__(([0, 1], [1, 3]), 9)),
    ("ellipsis", lambda x: x.__setitem__((Ellipsis, -1), 3)),
]


@requires_torch
@pytest.mark.parametrize("name,fn", SET_CASES, ids=[c[0] for c in SET_CASES])
def test_setitem_matches_torch(device: str, name: str, fn) -> None:
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    ours, theirs = gt.tensor(base, device=device), torch.tensor(base)
    v0 = ours._version
    fn(ours)
    fn(theirs)
    assert_close(ours, theirs)
    assert ours._version > v0


@requires_torch
def test_index_put_accumulate(device: str) -> None:
    ours = gt.zeros(5, device=device)
    theirs = torch.zeros(5)
    idx = [0, 2, 2, 4, 0]
    ours.index_put_((gt.tensor(idx, device=device),), gt.ones(5, device=device), accumulate=True)
    theirs.index_put_((torch.tensor(idx),), torch.ones(5), accumulate=True)
    assert_close(ours, theirs)
    out = gt.zeros(3, device=device).index_put((gt.tensor([1], device=device),), gt.tensor(2.0))
    assert out.tolist() == [0.0, 2.0, 0.0]


def test_index_errors_never_touch_memory() -> None:
    x = gt.arange(6).reshape(2, 3)
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        x[2]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 3"):
        x[:, [0, 5]]
    with pytest.raises(IndexError, match="index -4 is out of bounds"):
        x[[-4]]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="tensors used as indices"):
        x[gt.tensor([0.5])]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[gt.tensor([True, False, True])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 7]] = 1
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be "
                                         r"broadcast together with shapes \[2\], \[3\]"):
        x[[0, 1], [0, 1, 2]]  # PyTorch's IndexError
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]

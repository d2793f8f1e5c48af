"""View ops share storage and match PyTorch's shapes and strides; property tests with hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gputensor as gt
from tests.helpers import assert_close, requires_torch, torch

VIEW_CASES = [
    ("view", lambda x: x.view(4, 6)),
    ("view_infer", lambda x: x.view(-1, 3)),
    ("reshape", lambda x: x.reshape(3, 8)),
    ("permute", lambda x: x.permute(2, 0, 1)),
    ("transpose", lambda x: x.transpose(0, 2)),
    ("swapaxes", lambda x: x.swapaxes(1, 2)),
    ("mT", lambda x: x.mT),
    ("expand", lambda x: x[:, :1].expand(2, 5, 4)),
    ("expand_new_dims", lambda x: x[0, 0].expand(3, 4)),
    ("squeeze", lambda x: x[:, :1].squeeze()),
    ("squeeze_dim", lambda x: x[:, :1].squeeze(1)),
    ("squeeze_dims", lambda x: x[:1, :1].squeeze((0, 1))),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("unsqueeze_neg", lambda x: x.unsqueeze(-1)),
    ("flatten", lambda x: x.flatten()),
    ("flatten_range", lambda x: x.flatten(1)),
    ("unflatten", lambda x: x.unflatten(2, (2, 2))),
    ("narrow", lambda x: x.narrow(1, 1, 2)),
    ("select", lambda x: x.select(2, -1)),
    ("as_strided", lambda x: x.as_strided((2, 2), (3, 1), 1)),
    ("movedim", lambda x: x.movedim(0, -1)),
    ("diagonal", lambda x: x.diagonal(0, 1, 2)),
    ("diagonal_off", lambda x: x.diagonal(1, 1, 2)),
    ("slice_step", lambda x: x[:, ::2, 1:]),
    ("T_2d", lambda x: x[0].T),
    ("t", lambda x: x[0].t()),
]


@requires_torch
@pytest.mark.parametrize("name,fn", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_views_match_torch(device: str, name: str, fn) -> None:
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = gt.tensor(base, device=device)
    ours, theirs = fn(x), fn(torch.tensor(base))
    assert ours.shape == tuple(theirs.shape) and ours.stride() == theirs.stride()
    assert ours.storage_offset() == theirs.storage_offset()
    assert ours.untyped_storage() is x.untyped_storage()
    assert_close(ours, theirs)


def test_views_write_through(device: str) -> None:
    x = gt.zeros(3, 4, device=device)
    x.t()[1].fill_(5)
    x.view(12)[0] = 1
    assert x.cpu().numpy()[:, 1].tolist() == [5, 5, 5] and x[0, 0].item() == 1


def test_view_errors() -> None:
    x = gt.zeros(2, 3).t()
    with pytest.raises(RuntimeError, match=r"view size is not compatible.*reshape"):
        x.view(6)
    assert x.reshape(6).is_contiguous()
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        x.reshape(4, 2)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        x.reshape(-1, -1)
    with pytest.raises(RuntimeError, match="expanded size"):
        gt.zeros(2, 3).expand(4, 3)
    with pytest.raises(IndexError, match="out of range"):
        gt.zeros(2).unsqueeze(3)
    with pytest.raises(RuntimeError, match="storage"):
        gt.zeros(4).as_strided((3,), (2,))
    with pytest.raises(RuntimeError, match="exceeds dimension size"):
        gt.zeros(4).narrow(0, 3, 2)
    with pytest.raises(RuntimeError, match="2 dimensions"):
        gt.zeros(2, 2, 2).t()


def test_unbind_and_iter(device: str) -> None:
    x = gt.arange(6, device=device).reshape(2, 3)
    rows = x.unbind(0)
    assert len(rows) == 2 and rows[1].tolist() == [3, 4, 5]
    assert [c.tolist() for c in x.unbind(1)] == [[0, 3], [1, 4], [2, 5]]
    assert [r.tolist() for r in x] == [[0, 1, 2], [3, 4, 5]]


def test_contiguous_and_clone(device: str) -> None:
    x = gt.arange(6.0, device=device).reshape(2, 3)
    assert x.contiguous() is x
    y = x.t().contiguous()
    assert y.is_contiguous() and y.tolist() == [[0, 3], [1, 4], [2, 5]]
    z = x.clone()
    z[0, 0] = 9
    assert x[0, 0].item() == 0


# -- property tests ----------------------------------------------------------------------------
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def broadcastable_pair(draw):
    shape = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    other = [draw(st.sampled_from([1, s])) for s in shape]
    cut = draw(st.integers(0, len(other)))
    return tuple(shape), tuple(other[cut:])


@settings(max_examples=60, deadline=None)
@given(broadcastable_pair())
def test_broadcasting_matches_numpy(pair) -> None:
    a_shape, b_shape = pair
    a = np.arange(int(np.prod(a_shape)), dtype=np.float64).reshape(a_shape)
    b = np.asarray(np.arange(int(np.prod(b_shape)), dtype=np.float64).reshape(b_shape) * 10)
    assert gt.broadcast_shapes(a_shape, b_shape) == np.broadcast_shapes(a_shape, b_shape)
    out = gt.from_numpy(a) + gt.from_numpy(b)
    np.testing.assert_array_equal(out.numpy(), a + b)
    out2 = gt.from_numpy(b) * gt.from_numpy(a)
    np.testing.assert_array_equal(out2.numpy(), b * a)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), st.data())
def test_permute_then_reshape_matches_numpy(shape, data) -> None:
    perm = data.draw(st.permutations(range(len(shape))))
    a = np.arange(int(np.prod(shape))).reshape(shape)
    x = gt.from_numpy(a).permute(*perm)
    np.testing.assert_array_equal(x.numpy(), a.transpose(perm))
    np.testing.assert_array_equal(x.reshape(-1).numpy(), a.transpose(perm).reshape(-1))
    np.testing.assert_array_equal(x.contiguous().numpy(), a.transpose(perm))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple), st.data())
def test_basic_slicing_matches_numpy(shape, data) -> None:
    a = np.arange(int(np.prod(shape))).reshape(shape)
    index = []
    for n in shape:
        kind = data.draw(st.sampled_from(["int", "slice", "full"]) if n else st.just("full"))
        if kind == "int":
            index.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            index.append(slice(data.draw(st.integers(-n - 1, n + 1)),
                               data.draw(st.integers(-n - 1, n + 1)),
                               data.draw(st.integers(1, 3))))
        else:
            index.append(slice(None))
    x = gt.from_numpy(a)[tuple(index)]
    np.testing.assert_array_equal(x.numpy(), a[tuple(index)])

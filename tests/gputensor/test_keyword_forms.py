"""Keyword forms PyTorch accepts and real programs use: arange(end=), max/min(other=),
Tensor.split(split_size=), broadcast_shapes of ints, and NumPy's axis=/keepdims= wherever an
op takes dim/keepdim. Each is compared with PyTorch on cpu and emulated cuda."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close

torch = pytest.importorskip("torch")

DATA = np.array([[0.5, -1.5, 2.0, 0.25], [3.0, 1.0, -0.5, -2.0], [1.5, 2.5, -1.0, 0.0]])


def test_arange_end_keyword(device: str) -> None:
    for kw in (dict(end=5), dict(start=2, end=7, step=2), dict(end=2.5)):
        got = gt.arange(**kw, device=device)
        want = torch.arange(**kw)
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    with pytest.raises(TypeError, match="missing required argument 'end'"):
        gt.arange()


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_other_keyword(device: str, name: str) -> None:
    a, b = DATA[0], DATA[1]
    x = gt.tensor(a, device=device, requires_grad=True)
    y = gt.tensor(b, device=device, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    got, want = getattr(gt, name)(x, other=y), getattr(torch, name)(tx, other=ty)
    (got * gt.tensor([1.0, 2.0, 3.0, 4.0], device=device)).sum().backward()
    (want * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert_close(got, want)
    assert_close(x.grad, tx.grad)
    assert_close(y.grad, ty.grad)
    assert_close(getattr(x, name)(other=y), getattr(tx, name)(other=ty))
    with pytest.raises(TypeError, match="both dim=0 and other="):
        getattr(gt, name)(x, 0, other=y)


def test_split_method_takes_split_size(device: str) -> None:
    x, tx = gt.arange(7, device=device), torch.arange(7)
    for got, want in ((x.split(split_size=3), tx.split(split_size=3)),
                      (x.split(split_size=[2, 5]), tx.split(split_size=[2, 5])),
                      (gt.split(x, split_size_or_sections=2), torch.split(tx, 2))):
        assert [t.tolist() for t in got] == [t.tolist() for t in want]


def test_broadcast_shapes_takes_ints() -> None:
    for shapes in ((3,), (), ((2, 1), [1, 3], 3), (gt.Size([4, 1]), (1,))):
        got = gt.broadcast_shapes(*shapes)
        assert isinstance(got, gt.Size)
        assert tuple(got) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(RuntimeError, match="must match"):
        gt.broadcast_shapes((2, 3), (4, 3))
    with pytest.raises(ValueError, match="negative length"):
        gt.broadcast_shapes(-1)


# (name, kwargs): every op PyTorch lets NumPy's names reach
AXIS_FORMS = [
    (name, kw) for name in ("sum", "mean", "prod", "amax", "amin", "std", "var", "nansum",
                            "logsumexp", "any", "all")
    for kw in (dict(axis=1), dict(axis=1, keepdims=True), dict(dim=0, keepdims=True))
] + [(name, dict(axis=1)) for name in ("argmax", "argmin", "cumsum", "softmax",
                                       "count_nonzero", "max", "min")] \
  + [(name, dict(axis=0, keepdims=True)) for name in ("max", "min", "argmax")]


@pytest.mark.parametrize(("name", "kw"), AXIS_FORMS,
                         ids=[f"{n}-{'-'.join(k)}" for n, k in AXIS_FORMS])
def test_axis_and_keepdims_are_dim_and_keepdim(device: str, name: str, kw: dict) -> None:
    x, tx = gt.tensor(DATA, device=device), torch.tensor(DATA)
    if name in ("any", "all"):
        x, tx = x > 0, tx > 0
    for got, want in ((getattr(gt, name)(x, **kw), getattr(torch, name)(tx, **kw)),
                      (getattr(x, name)(**kw), getattr(tx, name)(**kw))):
        if isinstance(want, tuple):  # max/min with a dim: (values, indices)
            for g, w in zip(got, want, strict=True):
                assert_close(g, w)
        else:
            assert_close(got, want)


def test_a_keyword_and_its_alias_together_are_refused(device: str) -> None:
    x = gt.tensor(DATA, device=device)
    with pytest.raises(TypeError, match="got both 'dim' and its alias 'axis'"):
        x.sum(axis=1, dim=0)
    with pytest.raises(TypeError, match="got both 'keepdim' and its alias 'keepdims'"):
        gt.mean(x, 1, keepdim=True, keepdims=False)

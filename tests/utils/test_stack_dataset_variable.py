"""utils.data.StackDataset and autograd.Variable against PyTorch: samples, lengths, loading
through a DataLoader, errors; Variable returns a tensor and every tensor is a Variable."""

from __future__ import annotations

import pytest

import gputensor as gt
from gputensor.utils.data import DataLoader, StackDataset, TensorDataset

torch = pytest.importorskip("torch")


def test_stack_dataset_like_torch() -> None:
    ta = torch.utils.data.TensorDataset(torch.arange(4))
    ga = TensorDataset(gt.arange(4))
    tt, gg = torch.utils.data.StackDataset(ta, torch.arange(4) * 2), StackDataset(ga,
                                                                                  gt.arange(4) * 2)
    assert len(gg) == len(tt) == 4
    assert [g[0].item() for g in gg[2][:1]] == [t[0].item() for t in tt[2][:1]]
    assert gg[2][1].item() == tt[2][1].item() == 4
    td = torch.utils.data.StackDataset(x=ta, y=torch.arange(4))
    gd = StackDataset(x=ga, y=gt.arange(4))
    assert set(gd[3]) == set(td[3]) == {"x", "y"} and gd[3]["y"].item() == 3
    batch = next(iter(DataLoader(gd, batch_size=3)))
    assert batch["y"].tolist() == [0, 1, 2] and batch["x"][0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(ga, gt.arange(5))
    with pytest.raises(ValueError, match="both types are given"):
        StackDataset(ga, y=ga)
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()


def test_variable_is_a_tensor() -> None:
    base = gt.ones(2) * 3
    v = gt.autograd.Variable(base, requires_grad=True)
    assert type(v) is gt.Tensor and v.requires_grad and v.grad_fn is None
    (v * v).sum().backward()
    assert v.grad.tolist() == [6.0, 6.0]
    assert isinstance(gt.zeros(1), gt.autograd.Variable)
    assert not isinstance(3, gt.autograd.Variable)
    assert not gt.autograd.Variable(gt.ones(1)).requires_grad
    with pytest.raises(TypeError, match="Variable data has to be a tensor"):
        gt.autograd.Variable([1.0])

"""Lazy layers against PyTorch: shapes inferred from the first input, the class they become,
reprs, state_dict loading into an uninitialised layer, parameters keeping their identity
(an optimizer made first keeps working), on cpu and emulated cuda."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

CASES = [("LazyLinear", (3,), (2, 5)), ("LazyConv1d", (4, 3), (2, 2, 7)),
         ("LazyConv2d", (4, 3), (1, 2, 5, 5)), ("LazyConvTranspose1d", (4, 3, 2), (2, 6, 5)),
         ("LazyConvTranspose2d", (4, 3), (1, 2, 4, 4)), ("LazyBatchNorm1d", (), (4, 3)),
         ("LazyBatchNorm2d", (), (2, 3, 4, 4)), ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)),
         ("LazyInstanceNorm1d", (), (2, 3, 5)), ("LazyInstanceNorm2d", (), (2, 3, 4, 4)),
         ("LazyInstanceNorm3d", (), (1, 3, 2, 2, 2))]


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("name,args,shape", CASES)
def test_lazy_layers_become_their_class_like_torch(device, name, args, shape) -> None:
    tm, gm = _quiet(getattr(torch.nn, name), *args), _quiet(getattr(gt.nn, name), *args)
    gm = gm.to(device)
    assert repr(gm) == repr(tm)
    assert gm.has_uninitialized_params()
    params = list(gm.parameters())
    x = np.random.default_rng(0).standard_normal(shape)
    tm(torch.tensor(x, dtype=torch.float32))
    out = gm(gt.tensor(x, dtype=gt.float32, device=device))
    assert type(gm).__name__ == type(tm).__name__ and repr(gm) == repr(tm)
    assert [p for p in gm.parameters()] == params or not params  # the same objects
    for (tk, tv), (gk, gv) in zip(tm.state_dict().items(), gm.state_dict().items(),
                                  strict=True):
        assert tk == gk and tuple(tv.shape) == tuple(gv.shape), (tk, gk)
    # Same weights: the same outputs
    fresh = _quiet(getattr(gt.nn, name), *args).to(device)
    fresh.load_state_dict({k: gt.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    assert type(fresh).__name__ == type(tm).__name__
    fresh.train(tm.training)
    np.testing.assert_allclose(
        fresh(gt.tensor(x, dtype=gt.float32, device=device)).detach().cpu().numpy(),
        tm(torch.tensor(x, dtype=torch.float32)).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert out.device == gt.device(device)


def test_optimizer_made_before_the_first_forward(device) -> None:
    m = _quiet(gt.nn.LazyLinear, 2).to(device)
    opt = gt.optim.SGD(m.parameters(), lr=0.5)
    x = gt.ones(3, 4, device=device)
    m(x).sum().backward()
    before = m.weight.detach().clone()
    opt.step()
    np.testing.assert_allclose(m.weight.detach().cpu().numpy(),
                               (before - 0.5 * m.weight.grad).cpu().numpy(), rtol=1e-6)
    assert isinstance(m.weight, gt.nn.Parameter) and \
        not isinstance(m.weight, gt.nn.UninitializedParameter)


def test_construction_warns_like_torch() -> None:
    with pytest.warns(UserWarning, match="Lazy modules are a new feature"):
        gt.nn.LazyLinear(2)
    assert isinstance(_quiet(gt.nn.LazyConv2d, 3, 3).weight, gt.nn.UninitializedParameter)

"""InstanceNorm1d/2d/3d and F.instance_norm against PyTorch: values, gradients, running
statistics, unbatched inputs, reprs and errors, on cpu and emulated cuda."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

LAYERS = {1: "InstanceNorm1d", 2: "InstanceNorm2d", 3: "InstanceNorm3d"}


def _data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float64)


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True),
                                          (False, True)])
def test_layers_match_torch(device, spatial, affine, track) -> None:
    shape = (2, 3) + (4, 3, 2)[:spatial]
    x = _data(shape)
    tm = getattr(torch.nn, LAYERS[spatial])(3, affine=affine, track_running_stats=track,
                                            momentum=0.3, dtype=torch.float64)
    gm = getattr(gt.nn, LAYERS[spatial])(3, affine=affine, track_running_stats=track,
                                         momentum=0.3, dtype=gt.float64).to(device)
    if affine:
        with torch.no_grad():
            tm.weight.copy_(torch.tensor([1.5, -0.5, 2.0]))
            tm.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
        gm.load_state_dict({k: gt.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    assert repr(gm) == repr(tm)
    tx = torch.tensor(x, requires_grad=True)
    gx = gt.tensor(x, device=device, requires_grad=True)
    w = _data(shape, seed=1)
    for _ in range(2):  # twice: running statistics accumulate
        (tm(tx) * torch.tensor(w)).sum().backward()
        (gm(gx) * gt.tensor(w, device=device)).sum().backward()
    np.testing.assert_allclose(gm(gx).detach().cpu().numpy(), tm(tx).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    if affine:
        for name in ("weight", "bias"):
            np.testing.assert_allclose(getattr(gm, name).grad.cpu().numpy(),
                                       getattr(tm, name).grad.numpy(), rtol=1e-9, atol=1e-12)
    if track:
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(getattr(gm, name).cpu().numpy(),
                                       getattr(tm, name).numpy(), rtol=1e-12)
        tm.eval()
        gm.eval()  # eval: the running statistics normalise
        np.testing.assert_allclose(gm(gx).detach().cpu().numpy(), tm(tx).detach().numpy(),
                                   rtol=1e-10, atol=1e-12)


def test_unbatched_input_and_functional(device) -> None:
    x = _data((3, 5, 4))
    tm, gm = torch.nn.InstanceNorm2d(3), gt.nn.InstanceNorm2d(3)
    np.testing.assert_allclose(gm(gt.tensor(x, device=device)).cpu().numpy(),
                               tm(torch.tensor(x)).numpy(), rtol=1e-10, atol=1e-12)
    x4 = _data((2, 3, 5, 4))
    mean, var = np.zeros(3), np.ones(3)
    got = gt.nn.functional.instance_norm(gt.tensor(x4, device=device),
                                         gt.tensor(mean, device=device),
                                         gt.tensor(var, device=device), eps=1e-3)
    want = torch.nn.functional.instance_norm(torch.tensor(x4), torch.tensor(mean),
                                             torch.tensor(var), eps=1e-3)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_errors_like_torch(device) -> None:
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        gt.nn.InstanceNorm1d(3)(gt.ones(1, 3, 2, 2, device=device))
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        gt.nn.InstanceNorm2d(3)(gt.ones(2, 3, 1, 1, device=device))
    with pytest.raises(ValueError, match="to match num_features"):
        gt.nn.InstanceNorm1d(4, affine=True)(gt.ones(2, 3, 5, device=device))
    with pytest.warns(UserWarning, match="does not match num_features"):
        gt.nn.InstanceNorm1d(4)(gt.randn(2, 3, 5, device=device))

"""DataParallel on an emulated two-GPU machine: the batch split over both devices gives the
module's own outputs and gradients (summed into the original parameters), outputs gathered on
the output device; and the single-device and no-CUDA paths."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.cuda.test_multi_device import two_devices  # noqa: F401  (module fixture)


@pytest.fixture(autouse=True)
def device_zero_current():
    gt.cuda.set_device(0)
    yield
    gt.cuda.set_device(0)


def _net() -> gt.nn.Module:
    gt.manual_seed(0)
    return gt.nn.Sequential(gt.nn.Linear(5, 8), gt.nn.Tanh(), gt.nn.Linear(8, 3))


def test_two_devices_match_one() -> None:
    x = gt.tensor(np.random.default_rng(0).standard_normal((6, 5)), dtype=gt.float32)
    ref = _net().to("cuda:0")
    want = ref(x.to("cuda:0"))
    (want * want).sum().backward()
    net = _net().to("cuda:0")
    dp = gt.nn.DataParallel(net)
    assert dp.device_ids == [0, 1] and dp.output_device == 0
    got = dp(x.to("cuda:0"))
    assert got.device == gt.device("cuda:0") and tuple(got.shape) == (6, 3)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(),
                               rtol=1e-6, atol=1e-6)
    (got * got).sum().backward()
    for p_ref, p in zip(ref.parameters(), net.parameters(), strict=True):
        assert p.grad.device == gt.device("cuda:0")
        np.testing.assert_allclose(p.grad.cpu().numpy(), p_ref.grad.cpu().numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert list(dp.state_dict())[0].startswith("module.")


def test_output_device_kwargs_and_structures() -> None:
    class Pair(gt.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = gt.nn.Linear(2, 2)

        def forward(self, x, *, scale=1.0):
            y = self.lin(x) * scale
            return {"y": y, "mean": y.mean()}

    m = Pair().to("cuda:0")
    x = gt.randn(4, 2, device="cuda:0")
    out = gt.nn.DataParallel(m, device_ids=["cuda:0", "cuda:1"], output_device=1)(x,
                                                                                  scale=2.0)
    assert out["y"].device == gt.device("cuda:1") and tuple(out["mean"].shape) == (2,)
    np.testing.assert_allclose(out["y"].detach().cpu().numpy(),
                               (m.lin(x) * 2).detach().cpu().numpy(), rtol=1e-6, atol=1e-6)
    one = gt.nn.DataParallel(m, device_ids=[0])
    assert one(x)["y"].device == gt.device("cuda:0")
    with pytest.raises(RuntimeError, match="must have its parameters and buffers on device "
                                           "cuda:0"):
        gt.nn.DataParallel(Pair())


def test_without_cuda_the_module_runs_as_is(monkeypatch) -> None:
    monkeypatch.setattr(gt.cuda, "is_available", lambda: False)
    m = _net()
    x = gt.randn(3, 5)
    np.testing.assert_array_equal(gt.nn.DataParallel(m)(x).detach().numpy(),
                                  m(x).detach().numpy())
    np.testing.assert_array_equal(gt.nn.parallel.data_parallel(m, x).detach().numpy(),
                                  m(x).detach().numpy())

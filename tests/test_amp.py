"""Mixed precision: autocast regions follow PyTorch's op lists per device type, gradients reach
float32 parameters, and GradScaler scales, skips and adapts exactly as PyTorch's does."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F

torch = pytest.importorskip("torch")

CUDA = "cuda:0" if gt.cuda.is_available() else None


def _ops(lib, x, w, y):
    """The same ops in gputensor or torch: name -> result under the current autocast."""
    f = lib.nn.functional
    target = lib.tensor([0, 2, 1, 0])
    return {"linear": f.linear(x, w), "matmul": x @ w.t(), "mm": lib.mm(x, w.t()),
            "bmm": lib.bmm(x[None], w.t()[None]), "softmax": y.softmax(-1), "exp": y.exp(),
            "sum": y.sum(), "prod": y.prod(), "log_softmax": y.log_softmax(-1),
            "cross_entropy": f.cross_entropy(y, target), "mse_loss": f.mse_loss(y, y * 2),
            "layer_norm": f.layer_norm(y, (3,)), "add": y + x[:, :3], "relu": y.relu(),
            "cat": lib.cat([y, x[:, :3]]), "cdist": lib.cdist(y, y),
            "addcmul": lib.addcmul(x[:, :3], y, y), "double_mm": lib.mm(x.double(),
                                                                       w.t().double()),
            # F.conv2d reached through nn.functional's own import of the op
            "conv2d": f.conv2d(x.reshape(1, 1, 4, 5), w[:1, :4].reshape(1, 1, 2, 2))}


def test_cpu_autocast_gives_torch_s_dtypes() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((3, 5))
    w = w.astype(np.float32)
    with torch.autocast("cpu"):
        tx, tw = torch.tensor(x), torch.tensor(w)
        want = _ops(torch, tx, tw, torch.nn.functional.linear(tx, tw))
    with gt.autocast("cpu"):
        assert gt.is_autocast_enabled("cpu") and gt.get_autocast_dtype("cpu") is gt.bfloat16
        gx, gw = gt.tensor(x), gt.tensor(w)
        got = _ops(gt, gx, gw, F.linear(gx, gw))
    assert not gt.is_autocast_enabled("cpu")
    for name, t in want.items():
        assert str(got[name].dtype).split(".")[1] == str(t.dtype).split(".")[1], name
        np.testing.assert_allclose(got[name].float().numpy(), t.float().detach().numpy(),
                                   rtol=3e-2, atol=3e-2, err_msg=name)


def test_gradients_reach_float32_parameters_like_torch() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    tm, gm = torch.nn.Linear(4, 3), gt.nn.Linear(4, 3)
    gm.load_state_dict({k: gt.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor([0, 1, 2] * 2))
    with gt.autocast("cpu", dtype=gt.bfloat16):
        gl = F.cross_entropy(gm(gt.tensor(x)), gt.tensor([0, 1, 2] * 2))
    tl.backward()
    gl.backward()
    assert gl.dtype is gt.float32 and gm.weight.grad.dtype is gt.float32
    np.testing.assert_allclose(gm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=2e-2,
                               atol=2e-2)


def test_regions_nest_decorate_and_cache_casts() -> None:
    lin = gt.nn.Linear(4, 4)
    x = gt.randn(2, 4)

    @gt.autocast("cpu")
    def forward(v):
        return lin(v)

    assert forward(x).dtype is gt.bfloat16
    with gt.amp.autocast("cpu"):
        assert lin(x).dtype is gt.bfloat16
        with gt.autocast("cpu", enabled=False):
            assert not gt.is_autocast_enabled("cpu") and lin(x).dtype is gt.float32
        assert gt.is_autocast_enabled("cpu")
        with gt.autocast("cpu", dtype=gt.float16):
            assert lin(x).dtype is gt.float16
        # A parameter is cast once per region: its bfloat16 copy is reused.
        from gputensor.amp import autocast_mode

        lin(x)
        cached = autocast_mode._state.cache[id(lin.weight)][1]
        lin(x)
        assert autocast_mode._state.cache[id(lin.weight)][1] is cached
    assert not autocast_mode._state.cache
    with pytest.warns(FutureWarning, match=r"torch.cpu.amp.autocast\(args...\)` is deprecated"):
        ctx = gt.cpu.amp.autocast()
    with ctx:
        assert lin(x).dtype is gt.bfloat16
    with pytest.warns(UserWarning, match="not supported"):
        with gt.autocast("cpu", dtype=gt.float64):
            assert lin(x).dtype is gt.float32
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xla'"):
        gt.autocast("xla")


@pytest.mark.skipif(CUDA is None, reason="needs CUDA (the emulator in CI)")
def test_cuda_autocast_follows_the_cuda_lists() -> None:
    x = gt.randn(4, 5, device=CUDA)
    w = gt.randn(3, 5, device=CUDA)
    with gt.autocast("cuda"):
        y = F.linear(x, w)
        assert y.dtype is gt.float16 and (x @ w.t()).dtype is gt.float16
        assert gt.mv(x, w[0]).dtype is gt.float16
        assert y.softmax(-1).dtype is gt.float32 and y.exp().dtype is gt.float32
        assert y.sum().dtype is gt.float32 and F.layer_norm(y, (3,)).dtype is gt.float32
        assert (y + x[:, :3]).dtype is gt.float32  # not listed: ordinary promotion
        assert y.relu().dtype is gt.float16
        assert gt.addcmul(x[:, :3], y, y).dtype is gt.float32  # promote to the widest
        assert gt.mm(x.double(), w.t().double()).dtype is gt.float64  # float64 untouched
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(y.sigmoid(), gt.ones_like(y))
        on_cpu = gt.randn(2, 2)
        assert (on_cpu @ on_cpu).dtype is gt.float32  # only the region's device type casts
    with pytest.warns(FutureWarning, match="torch.cuda.amp.autocast"):
        ctx = gt.cuda.amp.autocast(dtype=gt.bfloat16)
    with ctx:
        assert F.linear(x, w).dtype is gt.bfloat16


def test_cuda_region_without_cuda_is_disabled_with_a_warning(monkeypatch) -> None:
    monkeypatch.setattr(gt.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling"):
        region = gt.autocast("cuda")
    with region:
        assert not gt.is_autocast_enabled("cuda")


# -- GradScaler ---------------------------------------------------------------------------------
def _scaler_run(lib, device: str, grads: list[np.ndarray]) -> tuple[list, list, dict]:
    """Five steps of SGD through a GradScaler with the given gradients (one may hold inf):
    the parameter after each step and the scale after each update."""
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0], device=device))
    opt = lib.optim.SGD([p], lr=0.5)
    scaler = lib.amp.GradScaler(device, init_scale=8.0, growth_interval=2)
    params, scales = [], []
    for g in grads:
        opt.zero_grad()
        loss = (p * lib.tensor(g, device=device)).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        params.append(p.detach().cpu().numpy().copy())
        scales.append(scaler.get_scale())
    return params, scales, scaler.state_dict()


@pytest.mark.parametrize("device", ["cpu"] + ([CUDA] if CUDA else []))
def test_grad_scaler_matches_torch(device: str) -> None:
    grads = [np.array(v, np.float32) for v in
             ([1.0, 2.0, 3.0], [0.5, np.inf, 1.0], [1.0, 1.0, 1.0], [2.0, 0.0, -1.0],
              [np.nan, 0.0, 0.0], [1.0, -1.0, 0.25])]
    want = _scaler_run(torch, "cpu", grads)
    got = _scaler_run(gt, device, grads)
    for a, b in zip(got[0], want[0], strict=True):
        np.testing.assert_array_equal(a, b.astype(np.float32))
    assert got[1] == want[1]  # backs off after inf/NaN, grows after two clean steps
    assert got[2] == want[2]


def test_grad_scaler_api_and_errors() -> None:
    p = gt.nn.Parameter(gt.ones(2))
    opt = gt.optim.SGD([p], lr=0.1)
    scaler = gt.amp.GradScaler("cpu", init_scale=4.0)
    assert scaler.scale([gt.ones(1), (gt.ones(1) * 2,)])[1][0].item() == 8.0
    (scaler.scale(p.sum())).backward()
    scaler.unscale_(opt)
    assert p.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    fresh = gt.amp.GradScaler("cpu")
    fresh.load_state_dict(scaler.state_dict())
    assert fresh.get_scale() == scaler.get_scale()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        off = gt.cuda.amp.GradScaler(enabled=False)
    assert not off.is_enabled() and off.state_dict() == {} and off.get_scale() == 1.0
    loss = p.sum()
    assert off.scale(loss) is loss
    with pytest.raises(ValueError, match="growth factor must be > 1.0"):
        gt.amp.GradScaler("cpu", growth_factor=0.5)


def test_training_under_autocast_learns_like_float32() -> None:
    """The demo's digits: an MLP trained in bfloat16 autocast reaches float32's accuracy."""
    train, test = gt.datasets.digits("train"), gt.datasets.digits("test")

    def accuracy(use_autocast: bool) -> float:
        gt.manual_seed(0)
        model = gt.nn.Sequential(gt.nn.Flatten(), gt.nn.Linear(64, 64), gt.nn.ReLU(),
                                 gt.nn.Linear(64, 10))
        opt = gt.optim.Adam(model.parameters(), lr=1e-2)
        scaler = gt.amp.GradScaler("cpu", enabled=use_autocast)
        for _ in range(4):
            for i in range(0, len(train.targets), 64):
                xb, yb = train.images[i:i + 64], train.targets[i:i + 64]
                with gt.autocast("cpu", enabled=use_autocast):
                    loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        with gt.no_grad(), gt.autocast("cpu", enabled=use_autocast):
            pred = model(test.images).argmax(1)
        return float((pred == test.targets).float().mean())

    full, mixed = accuracy(False), accuracy(True)
    assert full > 0.9 and abs(mixed - full) < 0.03, (full, mixed)

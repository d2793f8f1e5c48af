"""Memory formats against PyTorch: the strides that contiguous, clone, to, empty and the
*_like factories give for each format, with values and gradients unchanged, on cpu and
emulated cuda."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close

torch = pytest.importorskip("torch")

FORMATS = ["contiguous_format", "channels_last", "preserve_format"]


def _pair(shape, device, view=lambda t: t):
    data = np.arange(float(np.prod(shape))).reshape(shape)
    return view(gt.tensor(data, device=device)), view(torch.tensor(data))


# inputs: row-major, NHWC-permuted, sliced, transposed 2-d, expanded
VIEWS = {
    "plain": ((2, 3, 4, 5), lambda t: t),
    "nhwc": ((2, 4, 5, 3), lambda t: t.permute(0, 3, 1, 2)),
    "sliced": ((2, 4, 5, 6), lambda t: t.permute(0, 3, 1, 2)[:, ::2]),
    "transposed": ((3, 4), lambda t: t.t()),
    "expanded": ((3, 1, 4), lambda t: t.expand(3, 5, 4)),
}


@pytest.mark.parametrize("view", VIEWS)
def test_clone_and_like_factories_preserve_like_torch(device: str, view: str) -> None:
    shape, fn = VIEWS[view]
    x, tx = _pair(shape, device, fn)
    assert x.clone().stride() == tx.clone().stride()
    assert_close(x.clone(), tx.clone())
    for name in ("empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"):
        assert getattr(gt, name)(x).stride() == getattr(torch, name)(tx).stride(), name
    assert gt.full_like(x, 2.5).stride() == torch.full_like(tx, 2.5).stride()
    assert gt.zeros_like(x, memory_format=gt.contiguous_format).stride() == \
        torch.zeros_like(tx, memory_format=torch.contiguous_format).stride()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("view", ["plain", "nhwc", "sliced"])
def test_four_d_formats_match_torch(device: str, fmt: str, view: str) -> None:
    shape, fn = VIEWS[view]
    x, tx = _pair(shape, device, fn)
    g_fmt, t_fmt = getattr(gt, fmt), getattr(torch, fmt)
    for got, want in ((x.clone(memory_format=g_fmt), tx.clone(memory_format=t_fmt)),
                      (x.to(memory_format=g_fmt), tx.to(memory_format=t_fmt)),
                      (x.to(gt.float32, memory_format=g_fmt),
                       tx.to(torch.float32, memory_format=t_fmt)),
                      (gt.empty_like(x, memory_format=g_fmt),
                       torch.empty_like(tx, memory_format=t_fmt))):
        assert got.stride() == want.stride()
    assert_close(x.to(gt.float32, memory_format=g_fmt), tx.to(torch.float32, memory_format=t_fmt))
    if fmt != "preserve_format":
        got, want = x.contiguous(memory_format=g_fmt), tx.contiguous(memory_format=t_fmt)
        assert got.stride() == want.stride()
        assert_close(got, want)
        assert got.is_contiguous(memory_format=g_fmt)
        assert x.is_contiguous(memory_format=g_fmt) == tx.is_contiguous(memory_format=t_fmt)
        assert gt.empty(2, 3, 4, 5, memory_format=g_fmt, device=device).stride() == \
            torch.empty(2, 3, 4, 5, memory_format=t_fmt).stride()


def test_channels_last_3d_and_the_rank_rule(device: str) -> None:
    x, tx = _pair((2, 3, 2, 4, 5), device)
    got = x.contiguous(memory_format=gt.channels_last_3d)
    assert got.stride() == tx.contiguous(memory_format=torch.channels_last_3d).stride()
    assert_close(got, tx)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
        gt.zeros(3, 4, device=device).contiguous(memory_format=gt.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        x.contiguous(memory_format=gt.preserve_format)
    with pytest.raises(TypeError, match="memory_format must be"):
        x.contiguous(memory_format="channels_last")


def test_gradients_flow_through_format_changes(device: str) -> None:
    data = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    x = gt.tensor(data, device=device, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    w = np.random.default_rng(1).standard_normal((2, 3, 4, 4))
    for lib, t in ((gt, x), (torch, tx)):
        y = t.contiguous(memory_format=lib.channels_last).to(lib.float32,
                                                             memory_format=lib.preserve_format)
        wt = gt.tensor(w, device=device) if lib is gt else torch.tensor(w)
        (y.double() * wt).sum().backward()
    assert_close(x.grad, tx.grad)


def test_module_to_channels_last_converts_four_d_parameters(device: str) -> None:
    torch.manual_seed(0)
    t_mod = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    g_mod = gt.nn.Sequential(gt.nn.Conv2d(3, 4, 3), gt.nn.BatchNorm2d(4))
    g_mod.load_state_dict({k: gt.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    g_mod.to(device, memory_format=gt.channels_last)
    t_mod.to(memory_format=torch.channels_last)
    for (name, g), t in zip(g_mod.state_dict().items(), t_mod.state_dict().values(),
                            strict=True):
        assert g.stride() == t.stride(), name
    data = np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32)
    got = g_mod(gt.tensor(data, device=device).contiguous(memory_format=gt.channels_last))
    want = t_mod(torch.tensor(data).contiguous(memory_format=torch.channels_last))
    assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_formats_print_and_pickle_like_torchs() -> None:  # (as gputensor.<name>)
    for name in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
        fmt = getattr(gt, name)
        assert repr(fmt) == repr(getattr(torch, name)).replace("torch.", "gputensor.")
        assert isinstance(fmt, gt.memory_format)
        assert pickle.loads(pickle.dumps(fmt)) is fmt

"""In-place view ops, scatters into copies, put/fill_diagonal_/index_reduce, addr, dist,
logit, renorm, trace, sum_to_size, cumsum_/cumprod_, the unsafe_ splits, legacy constructors
and nn.init's deprecated names, against PyTorch on cpu and emulated cuda."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

A = np.arange(12.0).reshape(3, 4) / 7 + 0.1


def _pair(data, device, grad=False):
    return torch.tensor(data, requires_grad=grad), gt.tensor(data, device=device,
                                                             requires_grad=grad)


def _close(g, t):
    np.testing.assert_allclose(g.detach().cpu().numpy(), t.detach().numpy(), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("name,args", [("t_", ()), ("transpose_", (0, 1)),
                                       ("swapaxes_", (1, 0)), ("swapdims_", (0, 1)),
                                       ("unsqueeze_", (1,)), ("squeeze_", ()),
                                       ("as_strided_", ((2, 2), (1, 2), 1))])
def test_inplace_views(device, name, args) -> None:
    (t, g) = _pair(A[:1] if name == "squeeze_" else A, device, grad=True)
    t2, g2 = t * 2, g * 2
    assert getattr(g2, name)(*args) is g2
    getattr(t2, name)(*args)
    assert tuple(g2.shape) == tuple(t2.shape) and g2.stride() == t2.stride()
    _close(g2, t2)
    (t2 * torch.arange(t2.numel()).reshape(t2.shape)).sum().backward()
    (g2 * gt.arange(g2.numel(), device=device).reshape(g2.shape)).sum().backward()
    _close(g.grad, t.grad)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(gt.ones(2, 2, requires_grad=True), name)(*args)


def test_scatters_into_copies(device) -> None:
    for name, src_shape, args in (("slice_scatter", (2, 4), (0, 0, 3, 2)),
                                  ("select_scatter", (4,), (0, 1)),
                                  ("diagonal_scatter", (3,), (0, 0, 1))):
        (t, g), (ts, gs) = _pair(A, device, True), _pair(np.full(src_shape, 5.0), device, True)
        want, got = getattr(torch, name)(t, ts, *args), getattr(gt, name)(g, gs, *args)
        _close(got, want)
        (want * torch.tensor(A)).sum().backward()
        (got * gt.tensor(A, device=device)).sum().backward()
        _close(g.grad, t.grad)
        _close(gs.grad, ts.grad)
    with pytest.raises(RuntimeError, match="src to have a size equal to the slice"):
        gt.select_scatter(gt.zeros(2, 2, device=device), gt.ones(3, device=device), 0, 0)


def test_put_fill_diagonal_index_reduce(device) -> None:
    for accumulate in (False, True):
        t, g = torch.tensor(A), gt.tensor(A, device=device)
        ti, gi = torch.tensor([0, 5, -1, 5]), gt.tensor([0, 5, -1, 5], device=device)
        src = np.array([1.0, 2.0, 3.0, 4.0])
        if accumulate:
            t.put_(ti, torch.tensor(src), True)
            g.put_(gi, gt.tensor(src, device=device), True)
            _close(g, t)
        _close(gt.put(gt.tensor(A, device=device).t(), gi[:3], gt.tensor(src[:3],
                                                                          device=device)),
               torch.put(torch.tensor(A).t(), ti[:3], torch.tensor(src[:3])))
    for shape, wrap in (((5, 2), True), ((5, 2), False), ((3, 4), False), ((3, 3, 3), False)):
        t, g = torch.zeros(shape), gt.zeros(shape, device=device)
        t.fill_diagonal_(7, wrap=wrap)
        g.fill_diagonal_(7, wrap=wrap)
        _close(g, t)
    src = np.array([[2.0, 3.0], [4.0, 5.0], [6.0, 7.0]])
    for reduce in ("prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            want = torch.ones(3, 2, dtype=torch.float64).index_reduce(
                0, torch.tensor([0, 0, 2]), torch.tensor(src), reduce, include_self=include_self)
            got = gt.ones(3, 2, dtype=gt.float64, device=device).index_reduce(
                0, gt.tensor([0, 0, 2], device=device), gt.tensor(src, device=device), reduce,
                include_self=include_self)
            _close(got, want)


def test_small_arithmetic(device) -> None:
    (t, g) = _pair(A, device, True)
    v1, v2 = np.array([1.0, -2.0, 0.5]), np.array([0.5, 1.0, -1.0, 2.0])
    for tf, gf in ((lambda x: torch.addr(x, torch.tensor(v1), torch.tensor(v2), beta=0.5,
                                         alpha=2),
                    lambda x: gt.addr(x, gt.tensor(v1, device=device),
                                      gt.tensor(v2, device=device), beta=0.5, alpha=2)),
                   (lambda x: torch.dist(x, x.flip(0), 3), lambda x: gt.dist(x, x.flip(0), 3)),
                   (lambda x: torch.logit(x / 3, 0.1), lambda x: gt.logit(x / 3, 0.1)),
                   (lambda x: x.renorm(2, 0, 2.0), lambda x: x.renorm(2, 0, 2.0)),
                   (lambda x: torch.trace(x), lambda x: gt.trace(x)),
                   (lambda x: x.sum_to_size(1, 4), lambda x: x.sum_to_size(1, 4)),
                   (lambda x: x.hardshrink(0.5), lambda x: x.hardshrink(0.5))):
        t.grad = g.grad = None
        want, got = tf(t), gf(g)
        _close(got, want)
        want.sum().backward()
        got.sum().backward()
        _close(g.grad, t.grad)
    t2, g2 = torch.tensor(A), gt.tensor(A, device=device)
    t2.cumsum_(1)
    g2.cumsum_(1)
    t2.cumprod_(0)
    g2.cumprod_(0)
    _close(g2, t2)
    parts_t = torch.unsafe_split(torch.tensor(A), 2, 1)
    parts_g = gt.unsafe_split(gt.tensor(A, device=device), 2, 1)
    assert [tuple(p.shape) for p in parts_g] == [tuple(p.shape) for p in parts_t]
    assert len(gt.unsafe_chunk(g2, 3)) == 3
    assert [p.shape[1] for p in gt.unsafe_split_with_sizes(g2, [1, 3], 1)] == [1, 3]


def test_legacy_constructors_and_init_aliases(device) -> None:
    x = gt.ones(2, dtype=gt.float64, device=device)
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new(3).shape == (3,)
    assert x.new().numel() == 0 and x.new(2, 3).dtype is gt.float64
    s = x.new_empty_strided((2, 2), (1, 2))
    assert s.stride() == (1, 2) and s.device == x.device
    assert x.storage_type() is type(x.storage())
    with pytest.warns(FutureWarning, match="`nn.init.normal` is now deprecated in favor of "
                                           "`nn.init.normal_`"):
        gt.nn.init.normal(gt.empty(3))

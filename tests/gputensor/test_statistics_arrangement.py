"""median/nanmedian/quantile/nanquantile, cov/corrcoef, trapezoid/cumulative_trapezoid, the
atleast/block_diag/vander/combinations/unravel_index arrangements and small predicates, against
PyTorch on cpu and emulated cuda: values, gradients and errors."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")


def _both(data, device, grad=False):
    return (torch.tensor(data, requires_grad=grad),
            gt.tensor(data, device=device, requires_grad=grad))


def _close(g, t, **kw):
    np.testing.assert_allclose(g.detach().cpu().numpy(), t.detach().numpy(), equal_nan=True,
                               **({"rtol": 1e-10, "atol": 1e-12} | kw))


DATA = np.random.default_rng(0).permutation(24).reshape(4, 6) * 0.37 - 3.0


@pytest.mark.parametrize("fn", ["median", "nanmedian"])
@pytest.mark.parametrize("args", [(), (1,), (0, True), (-1, False)])
def test_medians(device, fn, args) -> None:
    data = DATA.copy()
    data[1, 3] = np.nan
    t, g = _both(data, device, grad=True)
    want, got = getattr(torch, fn)(t, *args), getattr(gt, fn)(g, *args)
    if args:
        _close(got.values, want.values)
        assert type(got).__name__ == fn
        idx = got.indices if len(args) > 1 and args[1] else got.indices.unsqueeze(args[0])
        picked = g.gather(args[0], idx).squeeze(args[0]) if not (len(args) > 1 and args[1]) \
            else g.gather(args[0], idx)
        _close(picked, want.values)
        want, got = want.values, got.values
    else:
        _close(got, want)
    w = np.nan_to_num(want.detach().numpy()) + 1.0
    (torch.nan_to_num(want) * torch.tensor(w)).sum().backward()
    (gt.nan_to_num(got) * gt.tensor(w, device=device)).sum().backward()
    _close(g.grad, t.grad)


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantiles(device, fn, interpolation) -> None:
    data = DATA.copy()
    data[2, 1] = np.nan
    for q in (0.3, [0.0, 0.25, 0.5, 1.0]):
        for dim, keepdim in ((None, False), (1, False), (0, True), (None, True)):
            t, g = _both(data, device, grad=True)
            tq = q if isinstance(q, float) else torch.tensor(q, dtype=torch.float64)
            gq = q if isinstance(q, float) else gt.tensor(q, dtype=gt.float64, device=device)
            want = getattr(torch, fn)(t, tq, dim, keepdim, interpolation=interpolation)
            got = getattr(gt, fn)(g, gq, dim, keepdim, interpolation=interpolation)
            assert tuple(got.shape) == tuple(want.shape)
            _close(got, want)
            torch.nan_to_num(want).sum().backward()
            gt.nan_to_num(got).sum().backward()
            _close(g.grad, t.grad)


def test_quantile_errors(device) -> None:
    x = gt.ones(3, device=device)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        gt.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="must be either float or double dtype"):
        gt.quantile(gt.ones(3, dtype=gt.int64, device=device), 0.5)
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        gt.quantile(x, 0.5, interpolation="cubic")


def test_cov_and_corrcoef(device) -> None:
    x = np.random.default_rng(1).standard_normal((3, 5))
    fw, aw = np.array([1, 2, 1, 3, 1]), np.random.default_rng(2).uniform(0.5, 1.0, 5)
    for kwargs in ({}, {"correction": 0}, {"fweights": fw}, {"aweights": aw},
                   {"fweights": fw, "aweights": aw, "correction": 2}):
        t, g = _both(x, device, grad=True)
        want = torch.cov(t, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                               for k, v in kwargs.items()})
        got = gt.cov(g, **{k: gt.tensor(v, device=device) if isinstance(v, np.ndarray) else v
                           for k, v in kwargs.items()})
        _close(got, want)
        want.sum().backward()
        got.sum().backward()
        _close(g.grad, t.grad, rtol=1e-9)
    t, g = _both(x, device, grad=True)
    _close(gt.corrcoef(g), torch.corrcoef(t))
    _close(gt.cov(g[0]), torch.cov(t[0]))
    with pytest.raises(RuntimeError, match="fweights cannot be negative"):
        gt.cov(g, fweights=gt.tensor([1, -1, 1, 1, 1], device=device))


def test_trapezoid_family(device) -> None:
    y = np.random.default_rng(3).standard_normal((2, 5))
    xs = np.sort(np.random.default_rng(4).uniform(0, 3, 5))
    for kwargs in ({}, {"dx": 0.5}, {"dim": 0}, {"x": xs}):
        t, g = _both(y, device, grad=True)
        tk = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        gk = {k: gt.tensor(v, device=device) if isinstance(v, np.ndarray) else v
              for k, v in kwargs.items()}
        for name in ("trapezoid", "trapz", "cumulative_trapezoid"):
            if name == "trapz" and "dim" in kwargs:
                continue
            want, got = getattr(torch, name)(t, **tk), getattr(gt, name)(g, **gk)
            _close(got, want)
            want.sum().backward()
            got.sum().backward()
            _close(g.grad, t.grad)


def test_arrangements(device) -> None:
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in ((), (3,), (2, 3), (1, 2, 3)):
            want = getattr(torch, fn)(torch.ones(shape))
            assert tuple(getattr(gt, fn)(gt.ones(shape, device=device)).shape) == \
                tuple(want.shape)
        both = getattr(gt, fn)(gt.ones(2, device=device), gt.ones((), device=device))
        assert isinstance(both, tuple) and len(both) == 2
    blocks = [np.ones((2, 2)), np.array(3.0), np.array([1.0, 2.0])]
    _close(gt.block_diag(*(gt.tensor(b, device=device) for b in blocks)),
           torch.block_diag(*(torch.tensor(b) for b in blocks)))
    assert tuple(gt.block_diag().shape) == (1, 0)
    v = np.array([1.0, 2.0, 3.0])
    for kwargs in ({}, {"N": 4}, {"increasing": True}):
        _close(gt.vander(gt.tensor(v, device=device), **kwargs),
               torch.vander(torch.tensor(v), **kwargs))
    for r, rep in ((2, False), (2, True), (3, False)):
        assert gt.combinations(gt.tensor([1, 2, 3, 4], device=device), r, rep).tolist() == \
            torch.combinations(torch.tensor([1, 2, 3, 4]), r, rep).tolist()
    got = gt.unravel_index(gt.tensor([5, 7, -1], device=device), (2, 4))
    want = torch.unravel_index(torch.tensor([5, 7, -1]), (2, 4))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


def test_predicates_and_small_ops(device) -> None:
    x = np.array([1.0, np.inf, -np.inf, np.nan])
    t, g = _both(x, device)
    for fn in ("isposinf", "isneginf"):
        assert getattr(gt, fn)(g).tolist() == getattr(torch, fn)(t).tolist()
    with pytest.raises(RuntimeError, match="on a bool tensor is not supported"):
        gt.positive(gt.tensor([True], device=device))
    a, b = np.array([1.0, -2.0, 700.0]), np.array([3.0, -2.0, 690.0])
    (ta, ga), (tb, gb) = _both(a, device, True), _both(b, device, True)
    want, got = torch.logaddexp2(ta, tb), gt.logaddexp2(ga, gb)
    _close(got, want)
    want.sum().backward()
    got.sum().backward()
    _close(ga.grad, ta.grad)
    _close(gt.rsub(ga, gb, alpha=2), torch.rsub(ta, tb, alpha=2))
    _close(gt.ldexp(ga, gt.tensor([1, 2, 3], device=device)),
           torch.ldexp(ta, torch.tensor([1, 2, 3])))
    assert gt.is_nonzero(gt.tensor([2.0], device=device)) and not gt.is_nonzero(gt.tensor(0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        gt.is_nonzero(gt.ones(2))
    assert gt.is_same_size(gt.ones(2, 3), gt.zeros(2, 3)) and not gt.is_conj(ga)
    assert not gt.is_neg(ga)
    assert gt.resolve_conj(ga) is ga and gt.resolve_neg(ga) is ga
    assert gt.get_device(ga) == (-1 if device == "cpu" else int(device.split(":")[1]))
    assert gt.typename(gt.ones(1)) == "gputensor.FloatTensor"

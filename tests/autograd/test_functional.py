"""gt.autograd.functional against torch.autograd.functional: the same functions (small
networks, multi-input/multi-output functions) on the same inputs, every strategy, and the
strict-mode and argument errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.autograd.functional as TAF

import gputensor as gt
import gputensor.autograd.functional as AF

RNG = np.random.default_rng(0)
W1, B1, W2 = RNG.standard_normal((4, 5)), RNG.standard_normal(5), RNG.standard_normal((5, 2))


def _mlp(m: Any, x: Any) -> Any:
    """A two-layer tanh network; ``m`` is gputensor or torch."""
    dev = x.device
    w1, b1, w2 = (m.tensor(a, device=dev) if m is gt else m.tensor(a) for a in (W1, B1, W2))
    return m.tanh(x @ w1 + b1) @ w2


def _scalar(m: Any, x: Any, y: Any) -> Any:
    return (_mlp(m, x).sin().sum() * y.exp()).sum() + (x * x).sum() * y[0]


def _pair(m: Any, x: Any, y: Any) -> tuple:
    return _mlp(m, x), x.sum(1) * y


def _to(device: str, *arrays: np.ndarray) -> tuple[tuple, tuple]:
    return (tuple(gt.tensor(a, device=device) for a in arrays),
            tuple(torch.tensor(a) for a in arrays))


def _same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, tuple | list):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _same(a, b)
        return
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().cpu().numpy(), theirs.detach().numpy(), rtol=1e-6,
                               atol=1e-9)


X = RNG.uniform(-1, 1, (3, 4))
Y = RNG.uniform(-1, 1, 3)


def _call(name: str, fn: Callable, gi: tuple, ti: tuple, **kw: Any) -> tuple[Any, Any]:
    ours = getattr(AF, name)(lambda *a: fn(gt, *a), gi if len(gi) > 1 else gi[0], **kw)
    theirs = getattr(TAF, name)(lambda *a: fn(torch, *a), ti if len(ti) > 1 else ti[0], **kw)
    return ours, theirs


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("case", ["mlp", "pair", "scalar"])
def test_jacobian(device: str, case: str, strategy: str) -> None:
    fn = {"mlp": lambda m, x: _mlp(m, x), "pair": _pair, "scalar": _scalar}[case]
    gi, ti = _to(device, X, Y) if case != "mlp" else _to(device, X)
    vec = strategy == "forward-mode"
    _same(*_call("jacobian", fn, gi, ti, strategy=strategy, vectorize=vec))


@pytest.mark.parametrize("outer", ["reverse-mode", "forward-mode"])
def test_hessian(device: str, outer: str) -> None:
    gi, ti = _to(device, X, Y)
    vec = outer == "forward-mode"
    _same(*_call("hessian", _scalar, gi, ti, outer_jacobian_strategy=outer, vectorize=vec))
    gi, ti = _to(device, X)
    _same(*_call("hessian", lambda m, x: _mlp(m, x).pow(2).sum(), gi, ti,
                 outer_jacobian_strategy=outer, vectorize=vec))


@pytest.mark.parametrize("name", ["vjp", "jvp", "vhp", "hvp"])
def test_vector_products(device: str, name: str) -> None:
    gi, ti = _to(device, X, Y)
    if name == "vjp":
        out = _pair(torch, *ti)
        vs = tuple(RNG.standard_normal(tuple(o.shape)) for o in out)
        fn = _pair
    else:
        vs = (RNG.standard_normal(X.shape), RNG.standard_normal(Y.shape))
        fn = _pair if name == "jvp" else _scalar
    gv, tv = _to(device, *vs)
    ours = getattr(AF, name)(lambda *a: fn(gt, *a), gi, gv)
    theirs = getattr(TAF, name)(lambda *a: fn(torch, *a), ti, tv)
    _same(ours, theirs)


def test_create_graph_gives_differentiable_results(device: str) -> None:
    x = gt.tensor(X, device=device, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    jac = AF.jacobian(lambda a: _mlp(gt, a), x, create_graph=True)
    tjac = TAF.jacobian(lambda a: _mlp(torch, a), tx, create_graph=True)
    (g,) = gt.autograd.grad(jac.pow(2).sum(), x)
    (tg,) = torch.autograd.grad(tjac.pow(2).sum(), tx)
    _same(g, tg)


def _raises_like(ours: Callable, theirs: Callable) -> None:
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(type(expected.value)) as got:
        ours()
    assert str(got.value) == str(expected.value).replace("torch.", "gputensor.")


def test_errors(device: str) -> None:
    (gx,), (tx,) = _to(device, X)

    def both(name: str, fn: Callable, *args: Any, **kw: Any) -> None:
        _raises_like(lambda: getattr(AF, name)(lambda *a: fn(gt, *a), *args[0], **kw),
                     lambda: getattr(TAF, name)(lambda *a: fn(torch, *a), *args[1], **kw))

    def const(m: Any, x: Any) -> Any:
        return x.detach() * 2

    both("jacobian", const, (gx,), (tx,), strict=True)
    both("jacobian", lambda m, x: _mlp(m, x), (gx,), (tx,), strategy="sideways")
    both("jacobian", lambda m, x: _mlp(m, x), (gx,), (tx,), strategy="forward-mode")
    both("jacobian", lambda m, x: _mlp(m, x), (gx,), (tx,), strategy="forward-mode",
         create_graph=True)
    both("jacobian", lambda m, x: _mlp(m, x), (gx,), (tx,), strict=True, vectorize=True)
    both("hessian", lambda m, x: _mlp(m, x), (gx,), (tx,))
    both("vjp", lambda m, x: _mlp(m, x), (gx,), (tx,))
    both("jvp", lambda m, x: _mlp(m, x), (gx, gt.ones(2, device=device)),
         (tx, torch.ones(2)))
    both("vhp", lambda m, x: x * 2, ((gx,), (gx,)), ((tx,), (tx,)))
    both("hvp", lambda m, x, y: (x * x).sum() + y.sum(),
         ((gx, gt.tensor(Y, device=device)), (gx, gt.ones(2, device=device))),
         ((tx, torch.tensor(Y)), (tx, torch.ones(2))))
    _raises_like(lambda: AF.jacobian(lambda x: x, [gx]), lambda: TAF.jacobian(lambda x: x, [tx]))

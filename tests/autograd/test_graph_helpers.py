"""torch.autograd.graph's helpers: gradient edges, version bumps, multi-tensor hooks and
disabling saved-tensor hooks, against PyTorch."""

from __future__ import annotations

import pytest

import gputensor as gt
from gputensor.autograd import graph
from tests.helpers import requires_torch, torch

pytestmark = requires_torch


def test_gradient_edges_as_grad_inputs(device: str) -> None:
    x = gt.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * 2
    edge = graph.get_gradient_edge(y)
    assert edge.node is y.grad_fn and edge.output_nr == 0 and edge.ownership_token is None
    gy, gx = gt.autograd.grad((y * y).sum(), [edge, x])
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = tx * 2
    want = torch.autograd.grad((ty * ty).sum(), [torch.autograd.graph.get_gradient_edge(ty), tx])
    assert gy.tolist() == want[0].tolist() and gx.tolist() == want[1].tolist()
    leaf_edge = graph.get_gradient_edge(x)
    assert type(leaf_edge.node).__name__ == "AccumulateGrad"
    assert gt.autograd.grad((x * 3).sum(), leaf_edge)[0].tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="not possible to get the gradient edge"):
        graph.get_gradient_edge(gt.ones(1, device=device))


def test_increment_version(device: str) -> None:
    a, b = gt.ones(2, device=device), gt.ones(3, device=device)
    va, vb = a._version, b._version
    graph.increment_version(a)
    graph.increment_version([a, b])
    assert (a._version - va, b._version - vb) == (2, 1)
    x = gt.ones(2, device=device, requires_grad=True)
    y = x.exp()  # saves its output
    graph.increment_version(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_multi_grad_hook_all_and_any(device: str) -> None:
    def run(lib, dev):
        kw = {"device": dev} if dev else {}
        a, c, d = (lib.ones(2, requires_grad=True, **kw) for _ in range(3))
        calls: list = []
        h = lib.autograd.graph.register_multi_grad_hook(
            [a, c, d], lambda gs: calls.append([None if g is None else g.tolist() for g in gs]))
        (a * 3 + c * 5).sum().backward()
        (c * 2 + d).sum().backward()
        h.remove()
        (a * 3).sum().backward()
        firsts: list = []
        h = lib.autograd.graph.register_multi_grad_hook([a, c], lambda g: firsts.append(
            g.tolist()), mode="any")
        (a * 3 + c * 5).sum().backward()
        h.remove()
        return calls, firsts

    assert run(gt, device) == run(torch, None)
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        graph.register_multi_grad_hook([gt.ones(1, requires_grad=True)], print, mode="some")


def test_multi_grad_hook_ignores_tensors_autograd_grad_does_not_need(device: str) -> None:
    a, c = gt.ones(2, device=device, requires_grad=True), gt.ones(2, device=device,
                                                                   requires_grad=True)
    y = a * 2
    calls: list = []
    graph.register_multi_grad_hook([y, c], lambda gs: calls.append(
        [None if g is None else g.tolist() for g in gs]))
    gt.autograd.grad((y * 3 + c).sum(), [y])
    assert calls == [[[3.0, 3.0], None]]


def test_disable_saved_tensors_hooks() -> None:
    with graph.disable_saved_tensors_hooks("no hooks in here"):
        with pytest.raises(RuntimeError, match="no hooks in here"):
            with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass  # allowed again outside

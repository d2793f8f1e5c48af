"""The backward engine: graph structure, accumulation, retain_graph, version checks, hooks,
autograd.grad, higher-order gradients, anomaly mode."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close


def close(actual, expected, **kw) -> None:
    if isinstance(expected, list | float):
        expected = np.asarray(expected, dtype=actual.dtype.np_dtype)
    assert_close(actual, expected, **kw)


def leaf(values, device: str = "cpu", dtype=gt.float64) -> gt.Tensor:
    return gt.tensor(values, dtype=dtype, device=device).requires_grad_()


def test_grad_fn_names_and_edges(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    y = x * 2
    z = (y + x).exp()
    assert type(z.grad_fn).__name__ == "ExpBackward0"
    add = z.grad_fn.next_functions[0][0]
    assert add.name() == "AddBackward0"
    mul, acc = add.next_functions[0][0], add.next_functions[1][0]
    assert mul.name() == "MulBackward0"
    assert acc.name() == "AccumulateGrad" and acc.variable is x
    assert mul.next_functions[0][0] is acc  # one AccumulateGrad per leaf
    assert x.is_leaf and not z.is_leaf and z.requires_grad


def test_backward_accumulates_and_matches_analytic(device: str) -> None:
    x = leaf([0.5, -1.0, 2.0], device)
    (x * x * x).sum().backward()
    close(x.grad, 3 * np.array([0.5, -1.0, 2.0]) ** 2)
    (x * x * x).sum().backward()
    close(x.grad, 6 * np.array([0.5, -1.0, 2.0]) ** 2)


def test_broadcast_gradient_summed_to_input_shape(device: str) -> None:
    a = leaf(np.ones((3, 1)), device)
    b = leaf(np.arange(4.0), device)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    close(a.grad, np.full((3, 1), 6.0))
    close(b.grad, np.full(4, 3.0))


def test_non_scalar_backward_needs_gradient(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(gt.tensor([1.0, 10.0], dtype=gt.float64, device=device))
    close(x.grad, [2.0, 20.0])


def test_second_backward_raises_unless_retained(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_inplace_change_of_saved_tensor_is_caught(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    h = x * 1
    y = (h * h).sum()
    h.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*MulBackward0"):
        y.backward()


def test_inplace_on_leaf_requiring_grad_raises(device: str) -> None:
    x = leaf([1.0], device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with gt.no_grad():
        x.add_(1)  # fine: optimizers update leaves under no_grad
    assert x.item() == 2.0


def test_inplace_on_non_leaf_keeps_history(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    y = x * 3
    y.mul_(2).exp_()
    y.sum().backward()
    close(x.grad, 6 * np.exp(6 * np.array([1.0, 2.0])))


def test_leaf_grads_never_alias(device: str) -> None:
    a, b = leaf([1.0], device), leaf([2.0], device)
    (a + b).sum().backward()
    assert a.grad is not b.grad
    a.grad.zero_()
    assert b.grad.item() == 1.0


def test_deep_graph_has_no_recursion_limit(device: str) -> None:
    x = leaf([1.0], device)
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.sum().backward()
    close(x.grad, [1.0001 ** 5000], rtol=1e-9)


def test_tensor_hooks_and_retain_grad(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    seen = []
    y = x * 2
    y.retain_grad()
    handle = y.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    x.register_hook(lambda g: g + 1)
    (y * y).sum().backward()
    assert seen == [[4.0, 8.0]]
    close(y.grad, [4.0, 8.0])        # retained before the hook replaced it
    close(x.grad, [81.0, 161.0])      # (2y * 10) * 2 + 1
    handle.remove()
    x.grad = None
    (x * 2 * (x * 2)).sum().backward()
    close(x.grad, [9.0, 17.0])


def test_node_hooks(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    y = x.exp()
    calls = []
    y.grad_fn.register_prehook(lambda go: calls.append("pre"))
    y.grad_fn.register_hook(lambda gi, go: calls.append("post") or (gi[0] * 0,))
    y.sum().backward()
    assert calls == ["pre", "post"]
    close(x.grad, [0.0, 0.0])


def test_autograd_grad_and_higher_order(device: str) -> None:
    x = leaf([0.5, 1.5], device)
    y = (x ** 3).sum()
    (g,) = gt.autograd.grad(y, x, create_graph=True)
    close(g, 3 * np.array([0.5, 1.5]) ** 2)
    assert x.grad is None                           # grad() accumulates nothing
    (gg,) = gt.autograd.grad(g.sum(), x, retain_graph=True)
    close(gg, 6 * np.array([0.5, 1.5]))
    g.sum().backward()
    close(x.grad, 6 * np.array([0.5, 1.5]))


def test_autograd_grad_unused_inputs(device: str) -> None:
    x, z = leaf([1.0], device), leaf([2.0], device)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        gt.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = gt.autograd.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gz is None and gx.item() == 2.0
    gx, gz = gt.autograd.grad(y, [x, z], materialize_grads=True)
    assert gz.item() == 0.0


def test_grad_of_intermediate(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    h = x * 3
    y = (h * h).sum()
    (gh,) = gt.autograd.grad(y, h)
    close(gh, [6.0, 12.0])


def test_backward_inputs_restricts_accumulation(device: str) -> None:
    a, b = leaf([1.0], device), leaf([2.0], device)
    (a * b).sum().backward(inputs=[a])
    assert a.grad.item() == 2.0 and b.grad is None


def test_no_grad_and_inference_mode_record_nothing(device: str) -> None:
    x = leaf([1.0], device)
    with gt.no_grad():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad
    with gt.inference_mode():
        y = x.exp()
    assert not y.requires_grad

    @gt.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_detach(device: str) -> None:
    x = leaf([1.0, 2.0], device)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 5  # shares storage
    assert y[0].item() == 5
    y.detach_()
    assert y.is_leaf and not y.requires_grad


def test_requires_grad_errors() -> None:
    with pytest.raises(RuntimeError, match="floating point and complex"):
        gt.tensor([1, 2]).requires_grad_()
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="leaf variables"):
        (x * 2).requires_grad = False
    with pytest.raises(RuntimeError, match="does not require grad"):
        gt.tensor([1.0]).sum().backward()


def test_missing_derivative_raises_naming_the_op(device: str) -> None:
    from gputensor.autograd.derivatives import differentiable

    def kernel_only(t):  # computes through a kernel, records nothing itself
        return (t.detach() * 2).to(t.device)
    op = differentiable(kernel_only, None, "kernel_only")
    x = leaf([1.0, 2.0], device)
    y = op(x)
    assert y.requires_grad
    (x * 2).sum().backward()  # other graphs are unaffected
    with pytest.raises(RuntimeError, match="derivative for 'kernel_only' is not implemented"):
        y.sum().backward()


def test_anomaly_mode_names_the_forward_op(device: str) -> None:
    x = leaf([0.0, 1.0], device)
    with gt.autograd.detect_anomaly():
        y = (x.sqrt() * 0).sum()
        with pytest.raises(RuntimeError, match=r"'SqrtBackward0' returned nan values"):
            y.backward()
    y = (x.sqrt() * 0).sum()
    y.backward()  # without anomaly mode the NaN just flows
    assert np.isnan(x.grad.numpy(force=True)[0])


def test_grad_matches_torch_on_a_small_network(device: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs, w1, w2 = rng.normal(size=(5, 4)), rng.normal(size=(4, 6)), rng.normal(size=(6, 3))
    tw1, tw2 = (torch.tensor(w, requires_grad=True) for w in (w1, w2))
    tl = ((torch.tensor(xs) @ tw1).tanh() @ tw2).sigmoid().log().mean()
    tl.backward()
    gw1, gw2 = leaf(w1, device), leaf(w2, device)
    loss = ((gt.tensor(xs, device=device) @ gw1).tanh() @ gw2).sigmoid().log().mean()
    loss.backward()
    close(loss, tl.item())
    close(gw1.grad, tw1.grad.numpy())
    close(gw2.grad, tw2.grad.numpy())


def test_view_taken_before_an_inplace_write_through_another_view() -> None:
    """A view made before its base took a new history (an in-place op through another view)
    sees that history when used, like PyTorch's regenerated view grad_fn."""
    torch = pytest.importorskip("torch")

    def run(xp):
        x = xp.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        v = xp.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.sin() * 1
        row = y[1]
        y.t()[2].mul_(v)
        (row * xp.tensor([1.0, 2.0, 3.0, 4.0], dtype=row.dtype)).sum().backward()
        return x.grad.numpy().copy(), v.grad.numpy().copy()

    (gx, gv), (tx, tv) = run(gt), run(torch)
    np.testing.assert_allclose(gx, tx, rtol=1e-12)
    np.testing.assert_allclose(gv, tv, rtol=1e-12)

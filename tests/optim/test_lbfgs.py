"""LBFGS against torch.optim.LBFGS with closures that set .grad from NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.optim as optim
from tests.optim import to_np

torch = pytest.importorskip("torch")


def rosenbrock(x: np.ndarray) -> tuple[float, np.ndarray]:
    f = ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()
    g = np.zeros_like(x)
    g[:-1] += -2 * (1 - x[:-1]) - 400 * x[:-1] * (x[1:] - x[:-1] ** 2)
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return float(f), g


A = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 1.0]])
B = np.array([1.0, -2.0, 0.5])


def quadratic(x: np.ndarray) -> tuple[float, np.ndarray]:
    """0.5 x'Ax - b'x over x of shape (3,) (the second param is folded in as a shift)."""
    return float(0.5 * x @ A @ x - B @ x), (A @ x - B).astype(x.dtype)


def _closures(objective, g_params, t_params, tensor_loss: bool):
    """Closures that write each param's slice of the objective's gradient into .grad."""
    sizes = [p.numel() for p in g_params]

    def split(grad):
        return np.split(grad, np.cumsum(sizes)[:-1])

    def g_closure():
        x = np.concatenate([p.detach().numpy().ravel() for p in g_params])
        f, grad = objective(x)
        for p, gr in zip(g_params, split(grad), strict=True):
            p.grad = gt.tensor(gr.reshape(tuple(p.shape)))
        return gt.tensor(f, dtype=g_params[0].dtype) if tensor_loss else f

    def t_closure():
        x = np.concatenate([p.detach().numpy().ravel() for p in t_params])
        f, grad = objective(x)
        for p, gr in zip(t_params, split(grad), strict=True):
            p.grad = torch.from_numpy(gr.reshape(tuple(p.shape)).copy())
        return torch.tensor(f, dtype=t_params[0].dtype)

    return g_closure, t_closure


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("tensor_loss", [False, True], ids=["float_loss", "tensor_loss"])
def test_rosenbrock_float64_matches_torch(line_search_fn, tensor_loss):
    x0 = np.array([-1.2, 1.0, -0.5, 0.8])
    g_params = [gt.tensor(x0[:2]).requires_grad_(), gt.tensor(x0[2:]).requires_grad_()]
    t_params = [torch.tensor(x0[:2], requires_grad=True),
                torch.tensor(x0[2:], requires_grad=True)]
    kwargs = {"lr": 1 if line_search_fn else 0.1, "max_iter": 20, "history_size": 5,
              "line_search_fn": line_search_fn}
    g_opt, t_opt = optim.LBFGS(g_params, **kwargs), torch.optim.LBFGS(t_params, **kwargs)
    g_closure, t_closure = _closures(rosenbrock, g_params, t_params, tensor_loss)
    for _ in range(4):
        g_loss, t_loss = g_opt.step(g_closure), t_opt.step(t_closure)
        assert float(g_loss) == pytest.approx(float(t_loss), rel=1e-6)
    for gp, tp in zip(g_params, t_params, strict=True):
        np.testing.assert_allclose(to_np(gp), to_np(tp), rtol=1e-8, atol=1e-10)
    gs, ts = g_opt.state[g_params[0]], t_opt.state[t_params[0]]
    for key in ("func_evals", "n_iter"):
        assert gs[key] == ts[key]
    assert len(gs["old_dirs"]) == len(ts["old_dirs"]) <= 5
    np.testing.assert_allclose(to_np(gs["d"]), to_np(ts["d"]), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_quadratic_float32(line_search_fn):
    x0 = np.array([2.0, -1.0, 0.5], dtype=np.float32)
    g_params = [gt.tensor(x0).requires_grad_()]
    t_params = [torch.tensor(x0, requires_grad=True)]
    kwargs = {"max_iter": 5, "line_search_fn": line_search_fn}
    g_opt, t_opt = optim.LBFGS(g_params, **kwargs), torch.optim.LBFGS(t_params, **kwargs)
    g_closure, t_closure = _closures(quadratic, g_params, t_params, tensor_loss=False)
    for _ in range(2):
        g_opt.step(g_closure)
        t_opt.step(t_closure)
    np.testing.assert_allclose(to_np(g_params[0]), to_np(t_params[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(g_params[0]), np.linalg.solve(A, B), rtol=1e-3)


def test_stops_when_gradient_is_small():
    p = gt.tensor([1.0, 2.0]).requires_grad_()
    opt = optim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        p.grad = gt.zeros(2)
        return 1.0

    assert opt.step(closure) == 1.0
    assert len(calls) == 1
    np.testing.assert_array_equal(to_np(p), [1.0, 2.0])


def test_requires_closure():
    opt = optim.LBFGS([gt.zeros(2).requires_grad_()])
    with pytest.raises(RuntimeError, match="requires a closure"):
        opt.step(None)


def test_params_without_grad_count_as_zero():
    a, b = gt.tensor([3.0]).requires_grad_(), gt.tensor([5.0]).requires_grad_()
    opt = optim.LBFGS([a, b], max_iter=3)

    def closure():
        x = a.detach().numpy()
        a.grad = gt.tensor(2 * x)
        return float((x ** 2).sum())

    opt.step(closure)
    assert abs(a.item()) < 3.0
    assert b.item() == 5.0

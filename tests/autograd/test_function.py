"""Custom differentiable ops with gt.autograd.Function, and gradcheck itself."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close


def close(actual, expected, **kw) -> None:
    if isinstance(expected, list | float):
        expected = np.asarray(expected, dtype=actual.dtype.np_dtype)
    assert_close(actual, expected, **kw)


class Cube(gt.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * ctx.scale, None


class SortWithIndex(gt.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = x.sort()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return values, idx

    @staticmethod
    def backward(ctx, g_values, g_idx):
        (idx,) = ctx.saved_tensors
        out = gt.zeros_like(g_values)
        out[idx] = g_values
        return out


def test_function_forward_backward(device: str) -> None:
    x = gt.tensor([1.0, -2.0], dtype=gt.float64, device=device, requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert type(y.grad_fn).__name__ == "CubeBackward"
    assert y.grad_fn.next_functions[0][0].variable is x
    y.sum().backward()
    close(x.grad, [6.0, 24.0])
    assert gt.autograd.gradcheck(lambda t: Cube.apply(t, 0.5), (x,))
    assert gt.autograd.gradgradcheck(lambda t: Cube.apply(t, 0.5), (x,))


def test_needs_input_grad_and_non_differentiable(device: str) -> None:
    seen = {}

    class Probe(gt.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            seen["needs"] = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None

    a = gt.ones(2, device=device, requires_grad=True)
    Probe.apply(a, gt.ones(2, device=device)).sum().backward()
    assert seen["needs"] == (True, False)
    x = gt.tensor([3.0, 1.0, 2.0], device=device, requires_grad=True)
    values, idx = SortWithIndex.apply(x)
    assert values.requires_grad and not idx.requires_grad
    (values * gt.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    close(x.grad, [3.0, 1.0, 2.0])


def test_function_without_grad_inputs_records_nothing() -> None:
    y = Cube.apply(gt.ones(2), 1.0)
    assert y.grad_fn is None and not y.requires_grad


def test_saved_tensors_freed_after_backward() -> None:
    x = gt.ones(2, requires_grad=True)
    y = Cube.apply(x, 1.0)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        _ = y.grad_fn.saved_tensors


def test_wrong_gradient_shape_is_reported() -> None:
    class Bad(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return gt.ones(5)

    x = gt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        Bad.apply(x).sum().backward()


def test_once_differentiable() -> None:
    class Square(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @gt.autograd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    x = gt.tensor([3.0], dtype=gt.float64, requires_grad=True)
    (g,) = gt.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    assert g.item() == 6.0 and not g.requires_grad


def test_gradcheck_catches_a_wrong_derivative() -> None:
    class Wrong(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            return g  # should be g * cos(x)

    x = gt.tensor(np.linspace(0.1, 1.0, 4), requires_grad=True)
    with pytest.raises(gt.autograd.GradcheckError, match="Jacobian mismatch"):
        gt.autograd.gradcheck(Wrong.apply, (x,))
    assert gt.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False

"""gt.nn.grad (torch.nn.grad): conv1d/2d/3d gradients with respect to input and weight,
against PyTorch's, and differentiable like them."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")

# (dims, input shape, weight shape, keyword arguments)
CASES = [
    (1, (2, 4, 11), (6, 4, 3), {}),
    (1, (2, 4, 12), (6, 2, 3), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}),
    (2, (2, 3, 7, 6), (4, 3, 3, 2), {"padding": 1}),
    (2, (2, 4, 9, 8), (6, 2, 3, 3), {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2),
                                     "groups": 2}),
    (3, (2, 2, 5, 6, 4), (3, 2, 3, 2, 2), {"padding": 1}),
    (3, (1, 4, 6, 5, 7), (4, 2, 2, 3, 3), {"stride": 2, "dilation": (1, 1, 2), "groups": 2}),
]


def _pair(shape, device, seed, dtype=gt.float32):
    arr = random_array(shape, dtype, seed=seed)
    return gt.tensor(arr, dtype=dtype, device=device), torch.tensor(arr)


@pytest.mark.parametrize("dims,x_shape,w_shape,kw", CASES)
def test_conv_grads_match_torch(device, dims, x_shape, w_shape, kw):
    x, tx = _pair(x_shape, device, 0)
    w, tw = _pair(w_shape, device, 1)
    t_out = getattr(torch.nn.functional, f"conv{dims}d")(tx, tw, **kw)
    g, tg = _pair(tuple(t_out.shape), device, 2)
    name = f"conv{dims}d"
    gi = getattr(gt.nn.grad, name + "_input")(x.shape, w, g, **kw)
    gw = getattr(gt.nn.grad, name + "_weight")(x, w.shape, g, **kw)
    assert gi.device == gt.device(device)
    assert_close(gi, getattr(torch.nn.grad, name + "_input")(tx.shape, tw, tg, **kw),
                 atol=1e-5, rtol=1e-5)
    assert_close(gw, getattr(torch.nn.grad, name + "_weight")(tx, tw.shape, tg, **kw),
                 atol=1e-4, rtol=1e-5)
    assert not gi.requires_grad and not gw.requires_grad


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_grads_are_differentiable(dims):
    """Each gradient is linear in what it takes: gradcheck in float64 through both."""
    x_shape = {1: (1, 2, 6), 2: (1, 2, 4, 5), 3: (1, 2, 3, 4, 3)}[dims]
    w_shape = {1: (3, 2, 2), 2: (3, 2, 2, 2), 3: (3, 2, 2, 2, 2)}[dims]
    kw = {"padding": 1}
    x = gt.tensor(random_array(x_shape, gt.float64, seed=0), dtype=gt.float64,
                  requires_grad=True)
    w = gt.tensor(random_array(w_shape, gt.float64, seed=1), dtype=gt.float64,
                  requires_grad=True)
    out = getattr(gt.nn.functional, f"conv{dims}d")(x, w, **kw)
    g = gt.tensor(random_array(tuple(out.shape), gt.float64, seed=2), dtype=gt.float64,
                  requires_grad=True)
    name = f"conv{dims}d"
    assert gradcheck(lambda w_, g_: getattr(gt.nn.grad, name + "_input")(x_shape, w_, g_, **kw),
                     (w, g))
    assert gradcheck(lambda x_, g_: getattr(gt.nn.grad, name + "_weight")(x_, w_shape, g_, **kw),
                     (x, g))


def test_grad_module_is_functionals_too():
    import gputensor.nn.functional as F
    assert F.grad is gt.nn.grad
    assert sorted(n for n in dir(torch.nn.grad) if n.startswith("conv")) == \
        sorted(gt.nn.grad.__all__)
    np.testing.assert_equal(gt.nn.grad.conv2d_input.__name__, "conv2d_input")

"""gradcheck / gradgradcheck with complex inputs and outputs (PyTorch's Wirtinger semantics):
correct complex derivatives pass on both devices and in fast mode, a derivative missing its
conjugate fails with PyTorch's GradcheckError message, exactly where torch's gradcheck fails."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import gputensor as gt

C128 = np.complex128
# torch.autograd.gradcheck is shadowed by the function of that name
TorchGradcheckError = importlib.import_module("torch.autograd.gradcheck").GradcheckError


def _data(shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(C128)


def _leaf(mod, arr: np.ndarray, device: str = "cpu"):
    return mod.tensor(arr, device=device, requires_grad=True)


# (name, function of the module (gt or torch), input arrays)
CASES = [
    ("mul", lambda m, a, b: a * b, [(2, 3), (2, 3)]),
    ("exp", lambda m, a: m.exp(a), [(3,)]),
    ("abs", lambda m, a: m.abs(a), [(4,)]),                  # C -> R
    ("angle", lambda m, a: m.angle(a), [(4,)]),              # C -> R
    ("matmul", lambda m, a, b: a @ b, [(2, 3), (3, 2)]),
    ("sum", lambda m, a: a.sum(0), [(3, 2)]),
    ("view_as_real", lambda m, a: m.view_as_real(a * 2), [(3,)]),  # C -> R pairs
    ("logaddexp", lambda m, a, b: m.logaddexp(a, b), [(3,), (3,)]),
    ("mixed", lambda m, a, r: (a * r, (a.abs() * r).sum()), [(3,), None]),  # C and R inputs
]


def _inputs(mod, shapes: list, device: str = "cpu") -> tuple:
    out = []
    for i, s in enumerate(shapes):
        if s is None:  # a real float64 input beside the complex ones
            out.append(mod.tensor(np.linspace(0.5, 1.5, 3), device=device, requires_grad=True))
        else:
            out.append(_leaf(mod, _data(s, i), device))
    return tuple(out)


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_complex_gradcheck_passes(device, name, fn, shapes, fast_mode):
    # the oracle agrees the derivative is right at these points
    assert torch.autograd.gradcheck(lambda *a: fn(torch, *a), _inputs(torch, shapes),
                                    fast_mode=fast_mode)
    assert gt.autograd.gradcheck(lambda *a: fn(gt, *a), _inputs(gt, shapes, device),
                                 fast_mode=fast_mode)


@pytest.mark.parametrize("name,fn,shapes", [c for c in CASES if c[0] in ("mul", "exp", "abs")],
                         ids=["mul", "exp", "abs"])
def test_complex_gradgradcheck_passes(device, name, fn, shapes):
    assert torch.autograd.gradgradcheck(lambda *a: fn(torch, *a), _inputs(torch, shapes))
    assert gt.autograd.gradgradcheck(lambda *a: fn(gt, *a), _inputs(gt, shapes, device))


def _scale_function(mod, conj_in_backward: bool, complex_output: bool = True):
    """y = c * z (or |c * z|^2 summed as a real output) with a hand-written backward."""
    c = 2.0 - 3.0j

    class Scale(mod.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            return z * c

        @staticmethod
        def backward(ctx, g):
            return g * (c.conjugate() if conj_in_backward else c)

    if complex_output:
        return Scale.apply
    return lambda z: (Scale.apply(z).abs() ** 2).sum()


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("complex_output", [True, False], ids=["C->C", "C->R"])
def test_missing_conj_fails_like_torch(device, complex_output, fast_mode):
    z = _data((3,), 7)
    ok = _scale_function(gt, True, complex_output)
    assert gt.autograd.gradcheck(ok, (_leaf(gt, z, device),), fast_mode=fast_mode)
    wrong_t = _scale_function(torch, False, complex_output)
    with pytest.raises(TorchGradcheckError) as t_err:
        torch.autograd.gradcheck(wrong_t, (_leaf(torch, z),), fast_mode=fast_mode)
    wrong = _scale_function(gt, False, complex_output)
    with pytest.raises(gt.autograd.GradcheckError) as g_err:
        gt.autograd.gradcheck(wrong, (_leaf(gt, z, device),), fast_mode=fast_mode)
    # the same headline: the imaginary part of complex outputs is checked first
    assert str(g_err.value).split(",")[0] == str(t_err.value).split(",")[0]
    assert not gt.autograd.gradcheck(wrong, (_leaf(gt, z, device),), fast_mode=fast_mode,
                                     raise_exception=False)


def test_complex_jacobian_convention(device):
    """The analytical Jacobian column of a complex input is ds/dx + i ds/dy: for the real
    output s = re(z)^2 + 3 im(z) a wrong real-only gradient 2 re(z) is reported."""
    z = _data((2,), 3)

    class Bad(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.real ** 2 + 3 * x.imag

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return (g * 2 * x.real).to(x.dtype)  # missing the + 3i of the imaginary direction

    with pytest.raises(gt.autograd.GradcheckError,
                       match=r"^Jacobian mismatch for output 0 with respect to input 0,"):
        gt.autograd.gradcheck(Bad.apply, (_leaf(gt, z, device),))
    good = lambda x: x.real ** 2 + 3 * x.imag  # noqa: E731
    assert gt.autograd.gradcheck(good, (_leaf(gt, z, device),))


def test_complex64_input_warns_like_torch():
    x = gt.tensor(_data((2,), 1).astype(np.complex64), requires_grad=True)
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double"):
        gt.autograd.gradcheck(lambda t: t * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-3)


def test_no_input_requires_grad_raises_like_torch():
    x = gt.tensor(_data((2,), 1))
    with pytest.raises(ValueError, match="gradcheck expects at least one input tensor to "
                                         "require gradient, but none of them have"):
        gt.autograd.gradcheck(lambda t: t * 2, (x,))

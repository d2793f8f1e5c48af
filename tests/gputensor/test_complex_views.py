"""view_as_real/view_as_complex, real/imag (views and Tensor properties), complex, polar and
isreal against PyTorch on cpu and emulated cuda: values, strides, shared storage, gradients and
errors."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

Z = np.array([[1 + 2j, 3 - 4j, -0.5j], [2.5, -1 + 1j, 0.25 + 0.75j]])


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_views_share_storage_and_match_torch(device, dtype) -> None:
    t = torch.tensor(Z, dtype=getattr(torch, dtype))
    g = gt.tensor(Z, dtype=getattr(gt, dtype), device=device)
    for view in (lambda x: x, lambda x: x.t(), lambda x: x[:, 1:]):
        tr, gr = torch.view_as_real(view(t)), gt.view_as_real(view(g))
        assert tuple(gr.shape) == tuple(tr.shape) and gr.stride() == tr.stride()
        assert gr.storage_offset() == tr.storage_offset() and gr.dtype is gt.float32 \
            if dtype == "complex64" else gr.dtype is gt.float64
        np.testing.assert_array_equal(gr.cpu().numpy(), tr.numpy())
        np.testing.assert_array_equal(view(g).real.cpu().numpy(), view(t).real.numpy())
        np.testing.assert_array_equal(gt.imag(view(g)).cpu().numpy(), view(t).imag.numpy())
    back = gt.view_as_complex(gt.view_as_real(g))
    np.testing.assert_array_equal(back.cpu().numpy(), Z.astype(dtype))
    gt.view_as_real(g)[0, 0, 1] = 9.0  # a write through the view reaches the complex tensor
    g.real[1] = -7.0
    g.imag = gt.zeros(2, 3, device=device)
    assert g[0, 0].item() == 1 + 0j and g[1, 2].item() == -7 + 0j


def test_gradients_match_torch(device) -> None:
    t = torch.tensor(Z, requires_grad=True)
    g = gt.tensor(Z, device=device, requires_grad=True)
    w = np.arange(6.0).reshape(2, 3)
    (t.real * torch.tensor(w) - 2 * t.imag ** 2).sum().backward()
    (g.real * gt.tensor(w, device=device) - 2 * g.imag ** 2).sum().backward()
    np.testing.assert_allclose(g.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-12)
    r = np.arange(12.0).reshape(2, 3, 2)
    tr, gr = torch.tensor(r, requires_grad=True), gt.tensor(r, device=device,
                                                           requires_grad=True)
    (torch.view_as_complex(tr).abs() ** 2).sum().backward()
    (gt.view_as_complex(gr).abs() ** 2).sum().backward()
    np.testing.assert_allclose(gr.grad.cpu().numpy(), tr.grad.numpy(), rtol=1e-12)


def test_complex_and_polar(device) -> None:
    a, b = np.array([1.0, 2.0, 0.5]), np.array([0.3, 2.0, -1.0])  # polar: abs >= 0
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ga = gt.tensor(a, device=device, requires_grad=True)
    gb = gt.tensor(b, device=device, requires_grad=True)
    for tf, gf in ((torch.complex, gt.complex), (torch.polar, gt.polar)):
        ta.grad = tb.grad = ga.grad = gb.grad = None
        want, got = tf(ta, tb), gf(ga, gb)
        np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(),
                                   rtol=1e-12)
        want.abs().sum().backward()
        got.abs().sum().backward()
        np.testing.assert_allclose(ga.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-9)
        np.testing.assert_allclose(gb.grad.cpu().numpy(), tb.grad.numpy(), rtol=1e-9,
                                   atol=1e-12)
    assert gt.isreal(gt.tensor([1 + 0j, 1j], device=device)).tolist() == [True, False]
    assert gt.isreal(gt.tensor([1.0, np.nan], device=device)).tolist() == [True, True]


def test_errors_like_torch(device) -> None:
    with pytest.raises(RuntimeError, match="only supported for complex tensors"):
        gt.view_as_real(gt.ones(2, device=device))
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        gt.view_as_complex(gt.ones(2, 3, device=device))
    with pytest.raises(RuntimeError, match="last dimension with stride 1"):
        gt.view_as_complex(gt.ones(2, 2, device=device).t())
    with pytest.raises(RuntimeError, match="storage_offset divisible by 2"):
        gt.view_as_complex(gt.ones(5, device=device)[1:].reshape(2, 2))
    with pytest.raises(RuntimeError, match="non-complex dtypes"):
        _ = gt.ones(2, device=device).imag
    with pytest.raises(RuntimeError, match="Expected object of scalar type"):
        gt.complex(gt.ones(1, device=device), gt.ones(1, dtype=gt.float64, device=device))

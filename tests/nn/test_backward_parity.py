"""Backward parity with PyTorch for the linear, flatten and activation layers (weights copied
through state_dict), gradchecks of gt.linear, and full backward hooks on modules."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor import nn

torch = pytest.importorskip("torch")

# (constructor arguments as a string evaluated against gt.nn / torch.nn, input shape)
LAYERS = [
    ("Linear(6, 4)", (5, 6)),
    ("Linear(6, 4, bias=False)", (2, 3, 6)),
    ("Linear(6, 4)", (6,)),
    ("Bilinear(3, 4, 2)", None),
    ("Flatten()", (2, 3, 2)),
    ("Unflatten(1, (2, 3))", (4, 6)),
    ("Identity()", (3, 2)),
    ("PReLU(3)", (4, 3, 2)),
    *[(f"{name}()", (4, 5)) for name in
      ("ReLU", "SELU", "SiLU", "Mish", "Hardsigmoid", "Hardswish", "Sigmoid", "Tanh",
       "LogSigmoid", "Softsign", "Tanhshrink", "Hardtanh", "ReLU6", "LeakyReLU", "ELU",
       "CELU", "GELU", "Softplus", "Hardshrink", "Softshrink")],
    ("GELU(approximate='tanh')", (4, 5)),
    ("Threshold(0.1, -2.0)", (4, 5)),
    ("GLU()", (4, 6)),
    ("Softmax(dim=1)", (4, 5)),
    ("LogSoftmax(dim=0)", (4, 5)),
    ("Softmin(dim=1)", (4, 5)),
]


def _pair(spec: str):
    torch.manual_seed(0)
    tm = eval("torch.nn." + spec)  # noqa: S307 (test table)
    gm = eval("nn." + spec)  # noqa: S307
    gm.load_state_dict({k: gt.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    return tm, gm


@pytest.mark.parametrize(("spec", "shape"), LAYERS, ids=[s for s, _ in LAYERS])
def test_layer_backward_matches_torch(spec: str, shape, device: str) -> None:
    rng = np.random.default_rng(1)
    tm, gm = _pair(spec)
    gm = gm.to(device)
    arrays = ([rng.normal(size=(5, 3)), rng.normal(size=(5, 4))] if shape is None
              else [rng.normal(size=shape)])
    arrays = [a.astype(np.float32) for a in arrays]
    tin = [torch.tensor(a, requires_grad=True) for a in arrays]
    gin = [gt.tensor(a, device=device, requires_grad=True) for a in arrays]
    tout, gout = tm(*tin), gm(*gin)
    weights = rng.normal(size=tuple(tout.shape)).astype(np.float32)
    (tout * torch.tensor(weights)).sum().backward()
    (gout * gt.tensor(weights, device=device)).sum().backward()
    np.testing.assert_allclose(gout.detach().cpu().numpy(), tout.detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    for t, g in zip(tin, gin, strict=True):
        np.testing.assert_allclose(g.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    tgrads = {k: p.grad for k, p in tm.named_parameters()}
    for name, p in gm.named_parameters():
        np.testing.assert_allclose(p.grad.cpu().numpy(), tgrads[name].numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (4,)])
def test_linear_gradcheck(shape, device: str) -> None:
    g = gt.Generator().manual_seed(0)
    x = gt.randn(shape, dtype=gt.float64, generator=g).to(device).requires_grad_()
    w = gt.randn(5, 4, dtype=gt.float64, generator=g).to(device).requires_grad_()
    b = gt.randn(5, dtype=gt.float64, generator=g).to(device).requires_grad_()
    assert gt.autograd.gradcheck(gt.linear, (x, w, b))
    assert gt.autograd.gradgradcheck(gt.linear, (x, w, b))
    assert gt.autograd.gradcheck(gt.linear, (x, w))


def test_linear_records_one_node() -> None:
    layer = nn.Linear(3, 2)
    y = layer(gt.ones(4, 3))
    assert type(y.grad_fn).__name__ == "LinearBackward0"
    assert {e[0].name() for e in y.grad_fn.next_functions} == {"AccumulateGrad"}


def test_linear_errors() -> None:
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 "
                                           r"and 5x2\)"):
        gt.linear(gt.ones(4, 3), gt.ones(2, 5))
    with pytest.raises(RuntimeError, match="one dtype"):
        gt.linear(gt.ones(4, 3), gt.ones(2, 3, dtype=gt.float64))


class TwoOut(nn.Module):
    def forward(self, x, y):
        return x * 2 + y, x * 3


def test_full_backward_hooks_match_torch() -> None:
    class TTwoOut(torch.nn.Module):
        def forward(self, x, y):
            return x * 2 + y, x * 3

    results = {}
    for lib, mod in (("gt", TwoOut()), ("torch", TTwoOut())):
        xp = gt if lib == "gt" else torch
        seen = []
        mod.register_full_backward_pre_hook(lambda m, go, s=seen: s.append(
            ("pre", [None if g is None else g.tolist() for g in go])))
        mod.register_full_backward_hook(lambda m, gi, go, s=seen: s.append(
            ("post", [None if g is None else g.tolist() for g in gi],
             [None if g is None else g.tolist() for g in go])))
        x = xp.tensor([1.0, 2.0], requires_grad=True)
        y = xp.tensor([3.0, 4.0])
        a, b = mod(x, y)
        (a.sum() + 2 * b.sum()).backward()
        results[lib] = (seen, x.grad.tolist())
    assert results["gt"] == results["torch"]

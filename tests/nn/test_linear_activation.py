"""Forward parity with PyTorch for Identity/Linear/Bilinear/Flatten/Unflatten and activations.

Weights are copied from the torch module through state_dict (same parameter names), so the
outputs must agree to rounding.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
import gputensor.nn.functional as F
from tests.helpers import assert_close, random_array, torch_dtype

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [gt.float32, gt.float64]


def _load_from_torch(g_mod, t_mod, device="cpu", dtype=gt.float32):
    state = {k: gt.tensor(v.detach().numpy(), dtype=dtype, device=device)
             for k, v in t_mod.state_dict().items()}
    result = g_mod.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def _inputs(shape, dtype, device, low=-3.0, high=3.0, seed=0):
    arr = random_array(shape, dtype, low, high, seed)
    return gt.tensor(arr, dtype=dtype, device=device), torch.from_numpy(arr.copy())


def _tol(dtype):
    return (1e-5, 1e-5) if dtype is gt.float32 else (1e-10, 1e-10)


# -- Linear ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 4), (4,), (2, 3, 4), (2, 1, 3, 4), (0, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_parity(device, dtype, shape, bias):
    t = torch.nn.Linear(4, 3, bias=bias, dtype=torch_dtype(dtype))
    g = nn.Linear(4, 3, bias=bias, device=device, dtype=dtype)
    assert [n for n, _ in g.named_parameters()] == [n for n, _ in t.named_parameters()]
    _load_from_torch(g, t, device, dtype)
    x, tx = _inputs(shape, dtype, device)
    out = g(x)
    assert out.device == gt.device(device)
    atol, rtol = _tol(dtype)
    assert_close(out, t(tx).detach(), atol=atol, rtol=rtol)
    assert repr(g) == repr(t)


def test_linear_noncontiguous_input_and_errors():
    t = torch.nn.Linear(4, 3)
    g = nn.Linear(4, 3)
    _load_from_torch(g, t)
    x, tx = _inputs((3, 2, 4), gt.float32, "cpu")
    assert_close(g(x.transpose(0, 1)), t(tx.transpose(0, 1)).detach(), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError) as info:
        g(gt.zeros(2, 4, 5))
    with pytest.raises(RuntimeError) as tinfo:
        t(torch.zeros(2, 4, 5))
    assert str(info.value) == str(tinfo.value)
    with pytest.raises(RuntimeError, match="at least 1 dimension"):
        F.linear(gt.tensor(1.0), g.weight)


def test_linear_default_init_statistics():
    gt.manual_seed(0)
    g = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = g.weight.detach().numpy()
    b = g.bias.detach().numpy()
    # kaiming_uniform_(a=sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(b).max() <= bound and abs(b.mean()) < 0.1 * bound
    gt.manual_seed(0)
    again = nn.Linear(400, 300)
    np.testing.assert_array_equal(again.weight.detach().numpy(), w)
    assert g.weight.requires_grad and g.bias.requires_grad
    assert nn.Linear(3, 2, dtype=gt.float64).weight.dtype is gt.float64


def test_functional_linear_matches_torch():
    x, tx = _inputs((6, 5), gt.float64, "cpu")
    w, tw = _inputs((2, 5), gt.float64, "cpu", seed=1)
    b, tb = _inputs((2,), gt.float64, "cpu", seed=2)
    assert_close(F.linear(x, w, b), TF.linear(tx, tw, tb))
    assert_close(F.linear(x, w), TF.linear(tx, tw))
    assert_close(F.linear(x[0], w, b), TF.linear(tx[0], tw, tb))


# -- Bilinear ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(5,), (2, 3), ()])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_parity(device, dtype, batch, bias):
    t = torch.nn.Bilinear(3, 4, 2, bias=bias, dtype=torch_dtype(dtype))
    g = nn.Bilinear(3, 4, 2, bias=bias, device=device, dtype=dtype)
    _load_from_torch(g, t, device, dtype)
    x1, t1 = _inputs(batch + (3,), dtype, device, seed=1)
    x2, t2 = _inputs(batch + (4,), dtype, device, seed=2)
    atol, rtol = _tol(dtype)
    assert_close(g(x1, x2), t(t1, t2).detach(), atol=atol, rtol=rtol)
    assert repr(g) == repr(t)


def test_bilinear_errors_match_torch():
    cases = [((2, 3), (3, 4), (5, 3, 4), None), ((2, 3), (2, 2, 4), (5, 3, 4), None),
             ((2, 5), (2, 4), (5, 3, 4), None), ((2, 3), (2, 3), (5, 3, 4), None),
             ((2, 3), (2, 4), (5, 3, 4), (4,))]
    for s1, s2, sw, sb in cases:
        args = [gt.zeros(*s1), gt.zeros(*s2), gt.zeros(*sw), None if sb is None else gt.zeros(*sb)]
        targs = [torch.zeros(*s1), torch.zeros(*s2), torch.zeros(*sw),
                 None if sb is None else torch.zeros(*sb)]
        with pytest.raises(RuntimeError) as info:
            F.bilinear(*args)
        with pytest.raises(RuntimeError) as tinfo:
            TF.bilinear(*targs)
        assert str(info.value) == str(tinfo.value)


def test_bilinear_default_init_bound():
    gt.manual_seed(1)
    g = nn.Bilinear(16, 8, 32)
    bound = 1 / math.sqrt(16)
    assert np.abs(g.weight.detach().numpy()).max() <= bound
    assert np.abs(g.bias.detach().numpy()).max() <= bound
    assert g.weight.shape == (32, 16, 8)


# -- Identity, Flatten, Unflatten ---------------------------------------------------------------
def test_identity_flatten_unflatten(device):
    x, tx = _inputs((2, 3, 4, 5), gt.float32, device)
    assert nn.Identity(54, unused=True)(x) is x
    for args in [(), (0, -1), (2, 3), (1, 2)]:
        g, t = nn.Flatten(*args), torch.nn.Flatten(*args)
        assert_close(g(x), t(tx))
        assert repr(g) == repr(t)
    for dim, sizes in [(1, (3, 1)), (-1, [5, 1]), (2, (2, -1))]:
        g, t = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
        assert_close(g(x), t(tx))
        assert repr(g) == repr(t)
    with pytest.raises(TypeError, match="unflattened_size must be tuple of ints"):
        nn.Unflatten(1, 3)
    with pytest.raises(TypeError, match="found element of type float at pos 1"):
        nn.Unflatten(1, (3, 1.5))


# -- activations ---------------------------------------------------------------------------------
MODULES = [
    ("ReLU", (), {}), ("ReLU", (True,), {}), ("ReLU6", (), {}), ("LeakyReLU", (0.2,), {}),
    ("LeakyReLU", (), {"inplace": True}), ("ELU", (), {}), ("ELU", (0.5, True), {}),
    ("SELU", (), {}), ("CELU", (2.0,), {}), ("GELU", (), {}), ("GELU", ("tanh",), {}),
    ("SiLU", (), {}), ("SiLU", (True,), {}), ("Mish", (), {}), ("Mish", (True,), {}),
    ("Sigmoid", (), {}), ("Tanh", (), {}), ("Softplus", (), {}), ("Softplus", (2.0, 1.0), {}),
    ("Hardtanh", (), {}), ("Hardtanh", (-2.0, 0.5, True), {}), ("Softmax", (1,), {}),
    ("Softmax", (), {"dim": -1}), ("LogSoftmax", (0,), {}), ("LogSoftmax", (), {"dim": 2}),
    ("Softmin", (1,), {}), ("LogSigmoid", (), {}), ("Hardsigmoid", (), {}),
    ("Hardsigmoid", (True,), {}), ("Hardswish", (), {}), ("Hardswish", (True,), {}),
    ("Softsign", (), {}), ("Tanhshrink", (), {}), ("Threshold", (0.5, -2.0), {}),
    ("Threshold", (0.1, 20.0, True), {}), ("Hardshrink", (), {}), ("Softshrink", (0.3,), {}),
    ("GLU", (), {}), ("GLU", (0,), {}), ("PReLU", (), {}), ("PReLU", (3,), {"init": 0.1}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,args,kwargs", MODULES,
                         ids=[f"{n}{a}{k}" for n, a, k in MODULES])
def test_activation_module_parity(device, dtype, name, args, kwargs):
    t = getattr(torch.nn, name)(*args, **kwargs)
    g = getattr(nn, name)(*args, **kwargs)
    assert repr(g) == repr(t)
    if name == "PReLU":
        g = nn.PReLU(*args, **kwargs, device=device, dtype=dtype)
        t = t.to(torch_dtype(dtype))
        assert_close(g.weight, t.weight.detach(), atol=1e-7, rtol=1e-7)  # the init value
        with torch.no_grad():
            t.weight.uniform_(-0.5, 0.5)  # per-channel slopes that differ
        _load_from_torch(g, t, device, dtype)
    # Values span the interesting regions (around 0, the thresholds, large magnitudes).
    x, tx = _inputs((2, 3, 4), dtype, device, low=-8.0, high=8.0)
    x.view(-1)[0] = 0.0
    tx.view(-1)[0] = 0.0
    out = g(x)
    expected = t(tx).detach()
    atol, rtol = _tol(dtype)
    assert_close(out, expected, atol=atol * 10, rtol=rtol * 10)
    if getattr(t, "inplace", False):
        assert out is x or out.data_ptr() == x.data_ptr()
        assert_close(x, tx)  # the input itself was overwritten, as in PyTorch
    assert out.device == gt.device(device)


FUNCTIONAL = [
    ("relu", {}), ("relu6", {}), ("leaky_relu", {"negative_slope": 0.3}), ("elu", {"alpha": 2.0}),
    ("selu", {}), ("celu", {"alpha": 0.5}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
    ("mish", {}), ("sigmoid", {}), ("tanh", {}), ("softplus", {"beta": 0.5, "threshold": 3.0}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}), ("softmax", {"dim": 0}),
    ("log_softmax", {"dim": 1, "dtype": torch.float64}), ("softmin", {"dim": -1}),
    ("logsigmoid", {}), ("hardsigmoid", {}), ("hardswish", {}), ("softsign", {}),
    ("tanhshrink", {}), ("threshold", {"threshold": 0.0, "value": 9.0}), ("hardshrink", {}),
    ("softshrink", {"lambd": 1.0}), ("glu", {"dim": 0}),
]


@pytest.mark.parametrize("name,kwargs", FUNCTIONAL, ids=[n for n, _ in FUNCTIONAL])
def test_functional_parity(name, kwargs):
    g_kwargs = {k: (gt.float64 if v is torch.float64 else v) for k, v in kwargs.items()}
    x, tx = _inputs((4, 6), gt.float32, "cpu", low=-30.0, high=30.0)
    assert_close(getattr(F, name)(x, **g_kwargs), getattr(TF, name)(tx, **kwargs),
                 atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["relu_", "elu_", "leaky_relu_", "selu_", "celu_",
                                  "hardtanh_", "threshold_"])
def test_functional_inplace_variants(name):
    args = (0.5, 2.0) if name == "threshold_" else ()
    x, tx = _inputs((3, 5), gt.float32, "cpu")
    out = getattr(F, name)(x, *args)
    expected = getattr(TF, name)(tx, *args)
    assert out.data_ptr() == x.data_ptr()
    assert_close(x, expected, atol=1e-6, rtol=1e-6)


def test_functional_errors_match_torch():
    cases = [
        (lambda m: m.gelu, (2,), {"approximate": "x"}),
        (lambda m: m.glu, (3,), {}),
        (lambda m: m.glu, (), {}),
        (lambda m: m.celu, (3,), {"alpha": 0.0}),
    ]
    for fn, shape, kwargs in cases:
        with pytest.raises(RuntimeError) as info:
            fn(F)(gt.zeros(shape), **kwargs)
        with pytest.raises(RuntimeError) as tinfo:
            fn(TF)(torch.zeros(shape), **kwargs)
        assert str(info.value) == str(tinfo.value)
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(gt.zeros(2), 2.0, 1.0)
    for w_shape, x_shape in [((2,), (2, 3)), ((1, 3), (2, 3))]:
        with pytest.raises(RuntimeError) as info:
            F.prelu(gt.zeros(*x_shape), gt.zeros(*w_shape))
        with pytest.raises(RuntimeError) as tinfo:
            TF.prelu(torch.zeros(*x_shape), torch.zeros(*w_shape))
        assert str(info.value) == str(tinfo.value)


def test_prelu_shapes():
    for x_shape, w_shape in [((3,), (1,)), ((), (1,)), ((2, 3), (3,)), ((2, 3, 4, 5), (3,)),
                             ((2, 3, 4), ())]:
        x, tx = _inputs(x_shape, gt.float32, "cpu")
        w, tw = _inputs(w_shape, gt.float32, "cpu", seed=3)
        assert_close(F.prelu(x, w), TF.prelu(tx, tw))


def test_softmax_implicit_dim_warns_like_torch():
    x, tx = _inputs((2, 3), gt.float32, "cpu")
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = nn.Softmax()(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.nn.Softmax()(tx)
    assert_close(out, expected)


def test_half_precision_activations():
    x, tx = _inputs((4, 8), gt.float16, "cpu")
    for name in ("relu", "gelu", "silu", "sigmoid", "tanh", "softplus", "elu"):
        out = getattr(F, name)(x)
        assert out.dtype is gt.float16
        assert_close(out, getattr(TF, name)(tx), atol=2e-3, rtol=2e-3)

"""RNN / LSTM / GRU and their cells against PyTorch: forward, backward through time, init.

Each test builds the torch module, copies its state_dict into the gputensor module (the
parameter names must line up), runs both on the same inputs and compares outputs, final
states, and the gradients of the inputs, the initial states and every parameter.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")

# torch's oneDNN path warns that it falls back to its default kernel for LSTM projections.
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning")

TOL = {"atol": 2e-5, "rtol": 1e-4}


def _load_from_torch(g_mod, t_mod, device):
    state = {k: gt.tensor(v.detach().numpy(), device=device)
             for k, v in t_mod.state_dict().items()}
    result = g_mod.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def _pair(shape, device, seed, scale=1.0):
    """The same random float32 tensor in gputensor (on ``device``) and torch, both requiring
    grad."""
    arr = (random_array(shape, gt.float32, -1.0, 1.0, seed) * scale).astype(np.float32)
    g = gt.tensor(arr, device=device).requires_grad_()
    t = torch.from_numpy(arr.copy()).requires_grad_()
    return g, t


def _weighted_sum(tensors, torch_tensors):
    """A scalar loss with a distinct random weight per element, so every gradient entry
    matters."""
    g_loss, t_loss = 0, 0
    for i, (g, t) in enumerate(zip(tensors, torch_tensors, strict=True)):
        w = random_array(tuple(t.shape), gt.float32, -1.0, 1.0, 100 + i)
        g_loss = g_loss + (g * gt.tensor(w, device=g.device)).sum()
        t_loss = t_loss + (t * torch.from_numpy(w)).sum()
    return g_loss, t_loss


def _compare_param_grads(g_mod, t_mod):
    for name, tp in t_mod.named_parameters():
        gp = g_mod.get_parameter(name)
        assert gp.grad is not None, f"no gradient for {name}"
        assert_close(gp.grad, tp.grad, **TOL)


# (class name, constructor kwargs, batched input shape as (L, B) or None for unbatched,
#  whether h_0 (and c_0) are given)
LAYER_CASES = [
    ("RNN", {"num_layers": 2, "bidirectional": True}, (5, 3), True),
    ("RNN", {"nonlinearity": "relu", "batch_first": True}, (4, 2), False),
    ("RNN", {"bias": False}, None, True),
    ("LSTM", {"num_layers": 2, "bidirectional": True}, (5, 3), True),
    ("LSTM", {"num_layers": 2, "bidirectional": True}, (5, 3), False),
    ("LSTM", {"batch_first": True, "bias": False}, (4, 2), True),
    ("LSTM", {"proj_size": 3, "num_layers": 2, "bidirectional": True}, (4, 2), True),
    ("LSTM", {"proj_size": 2, "batch_first": True}, (3, 2), False),
    ("LSTM", {"num_layers": 2}, None, True),
    ("LSTM", {}, None, False),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}, (5, 3), True),
    ("GRU", {"bias": False}, (4, 2), False),
    ("GRU", {"bidirectional": True}, None, True),
]


def _case_id(case):
    name, kw, shape, with_hx = case
    opts = ",".join(f"{k}={v}" for k, v in kw.items())
    return (f"{name}[{opts}]{'-unbatched' if shape is None else ''}"
            f"{'-hx' if with_hx else ''}")


@pytest.mark.parametrize("case", LAYER_CASES, ids=[_case_id(c) for c in LAYER_CASES])
def test_layer_matches_torch(case, device):
    name, kw, shape, with_hx = case
    in_size, hidden = 4, 6
    torch.manual_seed(0)
    t_mod = getattr(torch.nn, name)(in_size, hidden, **kw)
    g_mod = getattr(nn, name)(in_size, hidden, **kw).to(device)
    _load_from_torch(g_mod, t_mod, device)

    batch_first = kw.get("batch_first", False)
    if shape is None:
        x_shape = (5, in_size)
    else:
        seq, batch = shape
        x_shape = (batch, seq, in_size) if batch_first else (seq, batch, in_size)
    gx, tx = _pair(x_shape, device, 1)
    g_in, t_in = [gx], [tx]
    if with_hx:
        dirs = 2 if kw.get("bidirectional") else 1
        n = kw.get("num_layers", 1) * dirs
        lead = (n,) if shape is None else (n, shape[1])
        out_h = kw.get("proj_size") or hidden
        gh, th = _pair((*lead, out_h), device, 2)
        g_in.append(gh)
        t_in.append(th)
        if name == "LSTM":
            gc, tc = _pair((*lead, hidden), device, 3)
            g_in.append(gc)
            t_in.append(tc)
            g_out, (g_h, g_c) = g_mod(gx, (gh, gc))
            t_out, (t_h, t_c) = t_mod(tx, (th, tc))
        else:
            g_out, g_h = g_mod(gx, gh)
            t_out, t_h = t_mod(tx, th)
    elif name == "LSTM":
        g_out, (g_h, g_c) = g_mod(gx)
        t_out, (t_h, t_c) = t_mod(tx)
    else:
        g_out, g_h = g_mod(gx)
        t_out, t_h = t_mod(tx)

    g_res, t_res = [g_out, g_h], [t_out, t_h]
    if name == "LSTM":
        g_res.append(g_c)
        t_res.append(t_c)
    for g, t in zip(g_res, t_res, strict=True):
        assert_close(g, t, **TOL)

    g_loss, t_loss = _weighted_sum(g_res, t_res)
    g_loss.backward()
    t_loss.backward()
    for g, t in zip(g_in, t_in, strict=True):
        assert_close(g.grad, t.grad, **TOL)
    _compare_param_grads(g_mod, t_mod)


@pytest.mark.parametrize("name,kw", [("RNN", {"num_layers": 3, "bidirectional": True}),
                                     ("LSTM", {"num_layers": 2, "proj_size": 2}),
                                     ("LSTM", {"bidirectional": True, "bias": False}),
                                     ("GRU", {"num_layers": 2})])
def test_parameter_names_shapes_and_init(name, kw):
    hidden = 5
    t_mod = getattr(torch.nn, name)(3, hidden, **kw)
    g_mod = getattr(nn, name)(3, hidden, **kw)
    t_shapes = [(k, tuple(v.shape)) for k, v in t_mod.state_dict().items()]
    g_shapes = [(k, tuple(v.shape)) for k, v in g_mod.state_dict().items()]
    assert g_shapes == t_shapes
    assert [k for k, _ in g_mod.named_parameters()] == [k for k, _ in t_mod.named_parameters()]
    assert [[tuple(p.shape) for p in ps] for ps in g_mod.all_weights] == \
        [[tuple(p.shape) for p in ps] for ps in t_mod.all_weights]
    bound = 1 / math.sqrt(hidden)
    values = np.concatenate([p.detach().numpy().ravel() for p in g_mod.parameters()])
    assert np.abs(values).max() <= bound
    assert values.std() > bound / 4   # spread over the range, not constant
    assert repr(g_mod) == repr(t_mod)


def test_rnn_positional_nonlinearity_and_repr():
    g_mod = nn.RNN(3, 4, 2, "relu", False, True)
    t_mod = torch.nn.RNN(3, 4, 2, "relu", False, True)
    assert g_mod.nonlinearity == "relu" and g_mod.mode == "RNN_RELU"
    assert not g_mod.bias and g_mod.batch_first
    assert repr(g_mod) == repr(t_mod)


def test_dropout_between_layers():
    # p = 1 zeroes the first layer's output in training, deterministically, in both libraries.
    torch.manual_seed(0)
    t_mod = torch.nn.GRU(3, 4, num_layers=2, dropout=1.0)
    g_mod = nn.GRU(3, 4, num_layers=2, dropout=1.0)
    _load_from_torch(g_mod, t_mod, "cpu")
    gx, tx = _pair((5, 2, 3), "cpu", 4)
    g_out, g_h = g_mod(gx)
    t_out, t_h = t_mod(tx)
    assert_close(g_out, t_out, **TOL)
    assert_close(g_h, t_h, **TOL)
    # eval() switches dropout off: the first layer's output reaches the second.
    g_mod.eval()
    t_mod.eval()
    assert_close(g_mod(gx)[0], t_mod(tx)[0], **TOL)
    assert not np.allclose(g_mod(gx)[0].detach().numpy(), g_out.detach().numpy())


def test_dropout_half_is_random_in_training_only():
    g_mod = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = gt.randn(6, 2, 3)
    gt.manual_seed(1)
    a = g_mod(x)[0].detach().numpy()
    gt.manual_seed(1)
    b = g_mod(x)[0].detach().numpy()
    c = g_mod(x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    g_mod.eval()
    np.testing.assert_array_equal(g_mod(x)[0].detach().numpy(),
                                  g_mod(x)[0].detach().numpy())


def test_single_layer_dropout_warns():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)


def test_float64_module():
    torch.manual_seed(0)
    t_mod = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    g_mod = nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    state = {k: gt.tensor(v.numpy()) for k, v in t_mod.state_dict().items()}
    g_mod.load_state_dict(state)
    x = random_array((5, 2, 3), gt.float64, -1, 1, 0)
    g_out, (g_h, g_c) = g_mod(gt.tensor(x))
    t_out, (t_h, t_c) = t_mod(torch.from_numpy(x))
    assert g_out.dtype is gt.float64
    for g, t in ((g_out, t_out), (g_h, t_h), (g_c, t_c)):
        assert_close(g, t, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("fn,match,exc", [
    (lambda m: m(gt.randn(5, 2, 7)), "input_size", RuntimeError),
    (lambda m: m(gt.randn(1, 5, 2, 3)), "2D or 3D", ValueError),
    (lambda m: m(gt.randn(5, 2, 3, dtype=gt.float64)), "type", ValueError),
    (lambda m: m(gt.randn(5, 2, 3), (gt.randn(2, 2, 4), gt.randn(2, 2, 4))),
     r"hidden\[0\] size", RuntimeError),
    (lambda m: m(gt.randn(5, 2, 3), (gt.randn(1, 2, 4), gt.randn(1, 3, 4))),
     r"hidden\[1\] size", RuntimeError),
    (lambda m: m(gt.randn(5, 3), (gt.randn(1, 2, 4), gt.randn(1, 2, 4))), "2-D", RuntimeError),
    (lambda m: m(gt.randn(5, 2, 3), (gt.randn(2, 4), gt.randn(2, 4))), "3-D", RuntimeError),
    (lambda m: m(gt.randn(0, 2, 3)), "sequence length", RuntimeError),
])
def test_lstm_errors(fn, match, exc):
    with pytest.raises(exc, match=match):
        fn(nn.LSTM(3, 4))


def test_constructor_errors():
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.RNN(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size"):
        nn.GRU(3, 0)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]"):
        nn.RNN(3, 4)(gt.randn(5, 2, 3), gt.randn(1, 3, 4))


# -- cells -----------------------------------------------------------------------------------
CELL_CASES = [
    ("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}),
    ("LSTMCell", {}), ("LSTMCell", {"bias": False}),
    ("GRUCell", {}), ("GRUCell", {"bias": False}),
]


@pytest.mark.parametrize("name,kw", CELL_CASES)
@pytest.mark.parametrize("batched,with_hx", [(True, True), (False, True), (True, False)])
def test_cell_matches_torch(name, kw, batched, with_hx, device):
    in_size, hidden = 4, 5
    torch.manual_seed(0)
    t_mod = getattr(torch.nn, name)(in_size, hidden, **kw)
    g_mod = getattr(nn, name)(in_size, hidden, **kw).to(device)
    _load_from_torch(g_mod, t_mod, device)
    lead = (3,) if batched else ()
    gx, tx = _pair((*lead, in_size), device, 1, scale=2.0)
    g_in, t_in = [gx], [tx]
    g_args, t_args = [gx], [tx]
    if with_hx:
        gh, th = _pair((*lead, hidden), device, 2)
        g_in.append(gh)
        t_in.append(th)
        if name == "LSTMCell":
            gc, tc = _pair((*lead, hidden), device, 3)
            g_in.append(gc)
            t_in.append(tc)
            g_args.append((gh, gc))
            t_args.append((th, tc))
        else:
            g_args.append(gh)
            t_args.append(th)
    g_res, t_res = g_mod(*g_args), t_mod(*t_args)
    if name != "LSTMCell":
        g_res, t_res = [g_res], [t_res]
    for g, t in zip(g_res, t_res, strict=True):
        assert_close(g, t, **TOL)
    g_loss, t_loss = _weighted_sum(g_res, t_res)
    g_loss.backward()
    t_loss.backward()
    for g, t in zip(g_in, t_in, strict=True):
        assert_close(g.grad, t.grad, **TOL)
    _compare_param_grads(g_mod, t_mod)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_names_init_repr(name):
    t_mod = getattr(torch.nn, name)(3, 4, bias=False)
    g_mod = getattr(nn, name)(3, 4, bias=False)
    assert [(k, tuple(v.shape)) for k, v in g_mod.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t_mod.state_dict().items()]
    assert repr(g_mod) == repr(t_mod)
    values = np.concatenate([p.detach().numpy().ravel() for p in g_mod.parameters()])
    assert np.abs(values).max() <= 0.5


def test_cell_errors():
    cell = nn.GRUCell(3, 4)
    with pytest.raises(RuntimeError, match="input_size"):
        cell(gt.randn(2, 5))
    with pytest.raises(ValueError, match="1D or 2D"):
        cell(gt.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match="batch size"):
        cell(gt.randn(2, 3), gt.randn(3, 4))
    with pytest.raises(RuntimeError, match="hidden_size"):
        cell(gt.randn(2, 3), gt.randn(2, 5))
    with pytest.raises(ValueError, match=r"hidden\[1\] to be 2D"):
        nn.LSTMCell(3, 4)(gt.randn(2, 3), (gt.randn(2, 4), gt.randn(4)))


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
def test_cell_gradcheck(name):
    gt.manual_seed(0)
    cell = getattr(nn, name)(2, 2).double()
    x = gt.randn(2, 2, dtype=gt.float64, requires_grad=True)
    h = gt.randn(2, 2, dtype=gt.float64, requires_grad=True)
    params = tuple(cell.parameters())
    if name == "LSTMCell":
        c = gt.randn(2, 2, dtype=gt.float64, requires_grad=True)

        def fn(x, h, c, *_params):
            return cell(x, (h, c))
        inputs = (x, h, c, *params)
    else:
        def fn(x, h, *_params):
            return cell(x, h)
        inputs = (x, h, *params)
    # gradcheck perturbs the parameters in place, so the cell sees each perturbation.
    assert gt.autograd.gradcheck(fn, inputs)


def test_flatten_parameters_and_to():
    mod = nn.GRU(3, 4)
    mod.flatten_parameters()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, h = mod.double()(gt.randn(2, 1, 3, dtype=gt.float64))
    assert out.dtype is gt.float64 and h.dtype is gt.float64


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_gradgradcheck(name):
    gt.manual_seed(0)
    cell = getattr(nn, name)(2, 2).double()
    x = gt.randn(1, 2, dtype=gt.float64, requires_grad=True)
    h = gt.randn(1, 2, dtype=gt.float64, requires_grad=True)
    if name == "LSTMCell":
        assert gt.autograd.gradgradcheck(lambda x, h: cell(x, (h, h * 0.5))[1], (x, h))
    else:
        assert gt.autograd.gradgradcheck(cell, (x, h))

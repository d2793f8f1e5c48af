"""nn.utils.parametrize, parametrizations (weight_norm, spectral_norm), the hook-based
weight_norm / spectral_norm and stateless.functional_call, against PyTorch.

Each test builds the same small module in both libraries, copies PyTorch's state_dict into the
gputensor one (so PyTorch-format checkpoints are exercised too) and compares forward values,
gradients, state_dict keys and values, and buffers updated by the forward.
"""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.nn.utils import parametrizations as PZ
from gputensor.nn.utils import parametrize as P
from gputensor.nn.utils import stateless
from tests.helpers import assert_close

torch = pytest.importorskip("torch")
TP = torch.nn.utils.parametrize
TPZ = torch.nn.utils.parametrizations

TOL = {"atol": 1e-5, "rtol": 1e-4}


# -- helpers -----------------------------------------------------------------------------------
def _g(t, device="cpu"):
    return gt.from_numpy(t.detach().numpy().copy()).to(device)


def _load(tmod, gmod, device):
    """Load the torch module's state_dict (PyTorch's keys) into the gt module, move it."""
    gmod.load_state_dict({k: _g(v) for k, v in tmod.state_dict().items()})
    return gmod.to(device)


def _assert_same_state(tmod, gmod):
    tsd, gsd = tmod.state_dict(), gmod.state_dict()
    assert list(gsd) == list(tsd)
    for k in tsd:
        assert_close(gsd[k], tsd[k], **TOL)


def _assert_same_grads(tmod, gmod):
    tnamed = dict(tmod.named_parameters())
    gnamed = dict(gmod.named_parameters())
    assert list(gnamed) == list(tnamed)
    for name, p in tnamed.items():
        assert_close(gnamed[name].grad, p.grad, **TOL)


def _same_error(torch_fn, gt_fn):
    """Both raise, with the same exception type; returns the two messages (gputensor's with
    its own name spelled "torch", so type and Size reprs compare equal)."""
    with pytest.raises(Exception) as t_err:
        torch_fn()
    with pytest.raises(Exception) as g_err:
        gt_fn()
    assert type(g_err.value).__name__ == type(t_err.value).__name__, (g_err.value, t_err.value)
    return str(t_err.value), str(g_err.value).replace("gputensor", "torch")


def _input(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return torch.from_numpy(x.copy()), x


def _run_both(tmod, gmod, shape, device, seed=0):
    """Forward and backward of sum(out * fixed weights) in both; returns the outputs."""
    tx, x = _input(shape, seed)
    gx = gt.from_numpy(x).to(device)
    tout, gout = tmod(tx), gmod(gx)
    w = np.random.default_rng(seed + 1).standard_normal(tuple(tout.shape)).astype(np.float32)
    (tout * torch.from_numpy(w)).sum().backward()
    (gout * gt.from_numpy(w).to(device)).sum().backward()
    return tout, gout


# Parametrizations written against each library's Module (same code, two base classes).
def _symmetric(lib, with_inverse):
    class Symmetric(lib.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(0, 1)

        if with_inverse:
            def right_inverse(self, A):
                return A.triu()

    return Symmetric()


def _scale(lib, factor=2.0):
    class Scale(lib.Module):
        def forward(self, X):
            return X * factor

        def right_inverse(self, Y):
            return Y / factor

    return Scale()


class _Counting(nn.Module):
    calls = 0

    def forward(self, X):
        type(self).calls += 1
        return X * 3


# -- parametrize ---------------------------------------------------------------------------------
@pytest.mark.parametrize("with_inverse", [False, True])
def test_custom_parametrization_matches_torch(device, with_inverse):
    torch.manual_seed(0)
    tmod = TP.register_parametrization(torch.nn.Linear(4, 4), "weight",
                                       _symmetric(torch.nn, with_inverse))
    gmod = P.register_parametrization(nn.Linear(4, 4), "weight",
                                      _symmetric(nn, with_inverse))
    assert type(gmod).__name__ == "ParametrizedLinear"
    assert isinstance(gmod, nn.Linear)
    assert P.type_before_parametrizations(gmod) is nn.Linear
    assert P.type_before_parametrizations(nn.Linear(2, 2)) is nn.Linear
    assert P.is_parametrized(gmod) and P.is_parametrized(gmod, "weight")
    assert not P.is_parametrized(gmod, "bias") and not P.is_parametrized(nn.Linear(2, 2))
    assert isinstance(gmod.parametrizations.weight, P.ParametrizationList)
    assert "weight" not in gmod._parameters
    _load(tmod, gmod, device)
    _assert_same_state(tmod, gmod)
    assert [n for n, _ in gmod.named_parameters()] == ["bias", "parametrizations.weight.original"]
    w = gmod.weight
    assert w.grad_fn is not None and w.device == gmod.bias.device
    assert_close(w, tmod.weight, **TOL)
    assert_close(w, w.t(), **TOL)
    tout, gout = _run_both(tmod, gmod, (3, 4), device)
    assert_close(gout, tout, **TOL)
    _assert_same_grads(tmod, gmod)


def test_register_keeps_value_through_right_inverse(device):
    torch.manual_seed(1)
    tlin = torch.nn.Linear(3, 3)
    glin = _load(tlin, nn.Linear(3, 3), device)
    sym = 0.5 * (tlin.weight.detach() + tlin.weight.detach().T)
    with torch.no_grad():
        tlin.weight.copy_(sym)
    glin.weight.data = _g(sym, device)
    TP.register_parametrization(tlin, "weight", _symmetric(torch.nn, True))
    P.register_parametrization(glin, "weight", _symmetric(nn, True))
    # original = right_inverse(weight) = triu(weight); reading gives the symmetric weight back.
    assert_close(glin.parametrizations.weight.original, tlin.parametrizations.weight.original)
    assert_close(glin.weight, sym)


def test_assignment_calls_right_inverse(device):
    tmod = TP.register_parametrization(torch.nn.Linear(3, 3), "weight",
                                       _symmetric(torch.nn, True))
    gmod = _load(tmod, P.register_parametrization(nn.Linear(3, 3), "weight",
                                                  _symmetric(nn, True)), device)
    original = gmod.parametrizations.weight.original
    a = torch.arange(9.0).reshape(3, 3)
    a = a + a.T
    tmod.weight = a
    gmod.weight = _g(a, device)
    # The original Parameter keeps its identity (optimizers hold it) and its new value.
    assert gmod.parametrizations.weight.original is original
    assert isinstance(original, nn.Parameter) and original.is_leaf
    assert_close(original, tmod.parametrizations.weight.original)
    assert_close(gmod.weight, a)
    # A parametrization without right_inverse cannot be assigned to.
    t2 = TP.register_parametrization(torch.nn.Linear(3, 3), "weight",
                                     _symmetric(torch.nn, False))
    g2 = P.register_parametrization(nn.Linear(3, 3), "weight", _symmetric(nn, False))
    tmsg, gmsg = _same_error(lambda: setattr(t2, "weight", a),
                             lambda: setattr(g2, "weight", _g(a)))
    assert gmsg == tmsg
    # A Parameter cannot replace the property.
    _same_error(lambda: setattr(tmod, "weight", torch.nn.Parameter(a)),
                lambda: setattr(gmod, "weight", nn.Parameter(_g(a, device))))


def test_chained_parametrizations(device):
    torch.manual_seed(2)
    tmod = torch.nn.Linear(4, 4)
    gmod = nn.Linear(4, 4)
    for mod, lib, reg in ((tmod, torch.nn, TP), (gmod, nn, P)):
        reg.register_parametrization(mod, "weight", _symmetric(lib, True))
        reg.register_parametrization(mod, "weight", _scale(lib))
    _load(tmod, gmod, device)
    plist = gmod.parametrizations.weight
    assert len(plist) == 2 and [type(m).__name__ for m in plist] == ["Symmetric", "Scale"]
    _assert_same_state(tmod, gmod)
    assert_close(gmod.weight, tmod.weight, **TOL)
    tout, gout = _run_both(tmod, gmod, (2, 4), device)
    assert_close(gout, tout, **TOL)
    _assert_same_grads(tmod, gmod)
    # Assignment runs both right_inverses, last registered first.
    a = torch.ones(4, 4)
    tmod.weight = a
    gmod.weight = _g(a, device)
    assert_close(plist.original, tmod.parametrizations.weight.original)
    assert_close(gmod.weight, a)
    # Several tensors of one module: one ModuleDict entry each, one generated class.
    cls = type(gmod)
    P.register_parametrization(gmod, "bias", _scale(nn, 3.0))
    assert type(gmod) is cls and list(gmod.parametrizations) == ["weight", "bias"]
    TP.register_parametrization(tmod, "bias", _scale(torch.nn, 3.0))
    _assert_same_state(tmod, gmod)


def test_parametrized_buffer(device):
    class WithBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", gt.arange(4.0))

    class TWithBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.arange(4.0))

    gmod = P.register_parametrization(WithBuffer().to(device), "scale", _scale(nn))
    tmod = TP.register_parametrization(TWithBuffer(), "scale", _scale(torch.nn))
    assert "original" in gmod.parametrizations.scale._buffers
    assert list(gmod.parameters()) == []
    _assert_same_state(tmod, gmod)
    assert_close(gmod.scale, tmod.scale)


def test_cached():
    mod = nn.Linear(3, 3)
    P.register_parametrization(mod, "weight", _Counting())
    _Counting.calls = 0
    w_a, w_b = mod.weight, mod.weight
    assert w_a is not w_b and _Counting.calls == 2
    _Counting.calls = 0
    with P.cached():
        w1 = mod.weight
        with P.cached():
            w2 = mod.weight
        w3 = mod.weight  # still cached: only the outermost exit clears it
        assert w1 is w2 is w3
        out = mod(gt.ones(2, 3))
    assert _Counting.calls == 1
    assert mod.weight is not w1 and _Counting.calls == 2
    out.sum().backward()  # the cached tensor is part of the graph
    assert mod.parametrizations.weight.original.grad is not None


@pytest.mark.parametrize("leave_parametrized", [True, False])
def test_remove_parametrizations(device, leave_parametrized):
    tmod = torch.nn.Linear(4, 4)
    gmod = nn.Linear(4, 4)
    for mod, lib, reg in ((tmod, torch.nn, TP), (gmod, nn, P)):
        reg.register_parametrization(mod, "weight", _symmetric(lib, False))
        reg.register_parametrization(mod, "bias", _scale(lib))
    _load(tmod, gmod, device)
    original = gmod.parametrizations.weight.original
    TP.remove_parametrizations(tmod, "weight", leave_parametrized=leave_parametrized)
    P.remove_parametrizations(gmod, "weight", leave_parametrized=leave_parametrized)
    # Still parametrized on bias: the generated class and the ModuleDict stay.
    assert type(gmod).__name__ == "ParametrizedLinear" and not P.is_parametrized(gmod, "weight")
    assert gmod.weight is original and isinstance(original, nn.Parameter)
    assert list(gmod._parameters) == ["weight"]
    _assert_same_state(tmod, gmod)
    TP.remove_parametrizations(tmod, "bias", leave_parametrized=leave_parametrized)
    P.remove_parametrizations(gmod, "bias", leave_parametrized=leave_parametrized)
    assert type(gmod) is nn.Linear and "parametrizations" not in gmod._modules
    assert not hasattr(gmod, "parametrizations")
    assert [n for n, _ in gmod.named_parameters()] == ["weight", "bias"]
    _assert_same_state(tmod, gmod)
    tout, gout = _run_both(tmod, gmod, (2, 4), device)
    assert_close(gout, tout, **TOL)
    _assert_same_grads(tmod, gmod)


def test_remove_multi_tensor_parametrization(device):
    tmod = TPZ.weight_norm(torch.nn.Linear(3, 2))
    gmod = _load(tmod, PZ.weight_norm(nn.Linear(3, 2)), device)
    _same_error(lambda: TP.remove_parametrizations(tmod, "weight", leave_parametrized=False),
                lambda: P.remove_parametrizations(gmod, "weight", leave_parametrized=False))
    TP.remove_parametrizations(tmod, "weight")
    P.remove_parametrizations(gmod, "weight")
    assert type(gmod) is nn.Linear and isinstance(gmod.weight, nn.Parameter)
    assert gmod.weight.is_leaf and gmod.weight.requires_grad
    _assert_same_state(tmod, gmod)


def test_registration_errors():
    class Bad(nn.Module):
        def forward(self, X):
            return X[:1]

    class TBad(torch.nn.Module):
        def forward(self, X):
            return X[:1]

    class ToDouble(nn.Module):
        def forward(self, X):
            return X.double()

    class TToDouble(torch.nn.Module):
        def forward(self, X):
            return X.double()

    class NotTensor(nn.Module):
        def forward(self, X):
            return 1.0

    class TNotTensor(torch.nn.Module):
        def forward(self, X):
            return 1.0

    tlin, glin = torch.nn.Linear(3, 3), nn.Linear(3, 3)
    for tp, gp in ((TBad(), Bad()), (TToDouble(), ToDouble()), (TNotTensor(), NotTensor())):
        tmsg, gmsg = _same_error(lambda tp=tp: TP.register_parametrization(tlin, "weight", tp),
                                 lambda gp=gp: P.register_parametrization(glin, "weight", gp))
        assert gmsg == tmsg
    # A failed registration leaves the module untouched.
    assert type(glin) is nn.Linear and "weight" in glin._parameters
    tmsg, gmsg = _same_error(lambda: TP.register_parametrization(tlin, "nope", TBad()),
                             lambda: P.register_parametrization(glin, "nope", Bad()))
    assert gmsg.endswith("with name 'nope'") and tmsg.endswith("with name 'nope'")
    _same_error(lambda: TP.remove_parametrizations(tlin, "weight"),
                lambda: P.remove_parametrizations(glin, "weight"))
    # On an already-parametrized tensor the new parametrization is checked against its value.
    TP.register_parametrization(tlin, "weight", _scale(torch.nn))
    P.register_parametrization(glin, "weight", _scale(nn))
    tmsg, gmsg = _same_error(lambda: TP.register_parametrization(tlin, "weight", TBad()),
                             lambda: P.register_parametrization(glin, "weight", Bad()))
    assert gmsg == tmsg
    assert len(glin.parametrizations.weight) == 1
    # unsafe skips the checks.
    P.register_parametrization(glin, "weight", Bad(), unsafe=True)
    assert glin.weight.shape == (1, 3) and glin.parametrizations.weight.unsafe
    u = P.register_parametrization(nn.Linear(3, 3), "weight", Bad(), unsafe=True)
    assert u.weight.shape == (1, 3)
    # Parametrized modules pickle only through state_dict; deepcopy works.
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(glin)
    dup = copy.deepcopy(u)
    assert dup.parametrizations.weight.original is not u.parametrizations.weight.original
    assert_close(dup.weight, u.weight)


def test_transfer_parametrizations_and_params():
    src = P.register_parametrization(nn.Linear(3, 3), "weight", _symmetric(nn, True))
    dst = P.transfer_parametrizations_and_params(src, nn.Linear(3, 3))
    assert P.is_parametrized(dst, "weight")
    assert dst.parametrizations.weight.original is src.parametrizations.weight.original
    assert_close(dst.weight, src.weight)
    # A tensor the target lacks is created from the parametrized value.
    class Empty(nn.Module):
        pass

    dst2 = P.transfer_parametrizations_and_params(src, Empty(), "weight")
    assert dst2.parametrizations.weight.original is src.parametrizations.weight.original
    assert P.transfer_parametrizations_and_params(nn.Linear(2, 2), dst) is dst


# -- parametrizations.weight_norm ----------------------------------------------------------------
@pytest.mark.parametrize("layer,dim", [
    ("linear", 0), ("linear", 1), ("linear", None), ("linear", -1), ("conv", 0), ("conv", 1),
    ("conv", 3), ("conv", -2),
])
def test_weight_norm_matches_torch(device, layer, dim):
    torch.manual_seed(3)
    if layer == "linear":
        tmod, gmod, shape = torch.nn.Linear(5, 4), nn.Linear(5, 4), (3, 5)
    else:
        tmod, gmod, shape = torch.nn.Conv2d(2, 3, 3), nn.Conv2d(2, 3, 3), (2, 2, 5, 5)
    tmod = TPZ.weight_norm(tmod, dim=dim)
    gmod = _load(tmod, PZ.weight_norm(gmod, dim=dim), device)
    assert [n for n, _ in gmod.named_parameters()] == [
        "bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    _assert_same_state(tmod, gmod)
    assert_close(gmod.weight, tmod.weight, **TOL)
    tout, gout = _run_both(tmod, gmod, shape, device)
    assert_close(gout, tout, **TOL)
    _assert_same_grads(tmod, gmod)


def test_weight_norm_registration_and_legacy_state_dict(device):
    torch.manual_seed(4)
    # Registering computes g and v from the weight itself (no state copy here).
    w = torch.randn(4, 3)
    glin = nn.Linear(3, 4)
    glin.weight.data = _g(w)
    PZ.weight_norm(glin)
    assert_close(glin.parametrizations.weight.original0, w.norm(dim=1, keepdim=True), **TOL)
    assert_close(glin.parametrizations.weight.original1, w)
    assert_close(glin.weight, w, **TOL)
    # A state_dict of the hook-based weight_norm (weight_g / weight_v) loads too.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = torch.nn.utils.weight_norm(torch.nn.Linear(3, 4))
    new = _load(old, PZ.weight_norm(nn.Linear(3, 4)), device)
    assert_close(new.parametrizations.weight.original0, old.weight_g)
    assert_close(new.parametrizations.weight.original1, old.weight_v)
    assert_close(new.weight, old.weight, **TOL)


# -- parametrizations.spectral_norm ----------------------------------------------------------------
def _spectral_pair(kind):
    if kind == "linear":
        return torch.nn.Linear(3, 5), nn.Linear(3, 5), (2, 3)
    if kind == "conv":
        return torch.nn.Conv2d(2, 3, 3), nn.Conv2d(2, 3, 3), (2, 2, 5, 5)
    return torch.nn.ConvTranspose2d(2, 3, 3), nn.ConvTranspose2d(2, 3, 3), (2, 2, 4, 4)


@pytest.mark.parametrize("kind", ["linear", "conv", "conv_transpose"])
def test_spectral_norm_matches_torch(device, kind):
    torch.manual_seed(5)
    tmod, gmod, shape = _spectral_pair(kind)
    tmod = TPZ.spectral_norm(tmod, n_power_iterations=2)
    gmod = _load(tmod, PZ.spectral_norm(gmod, n_power_iterations=2), device)
    snorm = gmod.parametrizations.weight[0]
    assert snorm.dim == (1 if kind == "conv_transpose" else 0)
    assert snorm.n_power_iterations == 2 and snorm.eps == 1e-12
    assert list(gmod.state_dict()) == ["bias", "parametrizations.weight.original",
                                       "parametrizations.weight.0._u",
                                       "parametrizations.weight.0._v"]
    _assert_same_state(tmod, gmod)
    # Training-mode forwards run the power iteration: the buffers move in step with torch's.
    for step in range(3):
        tout, gout = _run_both(tmod, gmod, shape, device, seed=step)
        assert_close(gout, tout, **TOL)
        _assert_same_state(tmod, gmod)
    _assert_same_grads(tmod, gmod)
    # Eval mode reuses the vectors.
    tmod.eval()
    gmod.eval()
    u = gmod.parametrizations.weight[0]._u.clone()
    tout, gout = _run_both(tmod, gmod, shape, device, seed=7)
    assert_close(gout, tout, **TOL)
    assert_close(gmod.parametrizations.weight[0]._u, u)
    _assert_same_state(tmod, gmod)


def test_spectral_norm_vector_and_errors(device):
    tmod = TPZ.spectral_norm(torch.nn.Linear(3, 4), name="bias")
    gmod = _load(tmod, PZ.spectral_norm(nn.Linear(3, 4), name="bias"), device)
    assert list(gmod.state_dict()) == ["weight", "parametrizations.bias.original"]
    assert_close(gmod.bias, tmod.bias, **TOL)
    tout, gout = _run_both(tmod, gmod, (2, 3), device)
    assert_close(gout, tout, **TOL)
    _assert_same_grads(tmod, gmod)
    for kwargs in ({"name": "nope"}, {"n_power_iterations": 0}, {"dim": 2}):
        tmsg, gmsg = _same_error(lambda kw=kwargs: TPZ.spectral_norm(torch.nn.Linear(3, 4), **kw),
                                 lambda kw=kwargs: PZ.spectral_norm(nn.Linear(3, 4), **kw))
        if "name" not in kwargs:
            assert gmsg == tmsg
    # The spectral norm of the result is 1.
    gmod = PZ.spectral_norm(nn.Linear(6, 6))
    for _ in range(20):
        gmod(gt.ones(1, 6))
    s = np.linalg.svd(gmod.weight.detach().numpy(), compute_uv=False)
    assert abs(s[0] - 1) < 1e-3


def test_orthogonal_not_provided():
    # orthogonal needs matrix_exp / Householder products / QR, which gputensor lacks.
    assert not hasattr(PZ, "orthogonal") and "orthogonal" not in PZ.__all__


# -- hook-based weight_norm / spectral_norm -------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, None])
def test_legacy_weight_norm(device, dim):
    torch.manual_seed(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        tmod = torch.nn.utils.weight_norm(torch.nn.Linear(3, 4), dim=dim)
    with pytest.warns(FutureWarning, match="torch.nn.utils.parametrizations.weight_norm"):
        gmod = nn.utils.weight_norm(nn.Linear(3, 4), dim=dim)
    assert list(gmod.state_dict()) == ["bias", "weight_g", "weight_v"]
    _load(tmod, gmod, device)
    _assert_same_state(tmod, gmod)
    tout, gout = _run_both(tmod, gmod, (2, 3), device)
    assert_close(gout, tout, **TOL)
    assert_close(gmod.weight, tmod.weight, **TOL)
    _assert_same_grads(tmod, gmod)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        nn.utils.weight_norm(gmod, dim=dim)
    torch.nn.utils.remove_weight_norm(tmod)
    assert nn.utils.remove_weight_norm(gmod) is gmod
    assert not gmod._forward_pre_hooks
    assert isinstance(gmod.weight, nn.Parameter)
    _assert_same_state(tmod, gmod)
    _same_error(lambda: torch.nn.utils.remove_weight_norm(tmod),
                lambda: nn.utils.remove_weight_norm(gmod))


@pytest.mark.parametrize("kind", ["linear", "conv_transpose"])
def test_legacy_spectral_norm(device, kind):
    torch.manual_seed(7)
    tmod, gmod, shape = _spectral_pair(kind)
    tmod = torch.nn.utils.spectral_norm(tmod)
    gmod = nn.utils.spectral_norm(gmod)
    assert list(gmod.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert gmod.state_dict()._metadata[""]["spectral_norm"] == {"weight.version": 1}
    assert tmod.state_dict()._metadata[""]["spectral_norm"] == {"weight.version": 1}
    _load(tmod, gmod, device)
    for step in range(3):
        tout, gout = _run_both(tmod, gmod, shape, device, seed=step)
        assert_close(gout, tout, **TOL)
        _assert_same_state(tmod, gmod)
    _assert_same_grads(tmod, gmod)
    tmod.eval()
    gmod.eval()
    tout, gout = _run_both(tmod, gmod, shape, device, seed=9)
    assert_close(gout, tout, **TOL)
    _assert_same_state(tmod, gmod)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(gmod)
    torch.nn.utils.remove_spectral_norm(tmod)
    nn.utils.remove_spectral_norm(gmod)
    assert not gmod._forward_pre_hooks and not gmod._state_dict_hooks
    assert not gmod._load_state_dict_pre_hooks
    assert "spectral_norm" not in gmod.state_dict()._metadata[""]
    assert isinstance(gmod.weight, nn.Parameter)
    _assert_same_state(tmod, gmod)
    _same_error(lambda: torch.nn.utils.remove_spectral_norm(tmod),
                lambda: nn.utils.remove_spectral_norm(gmod))
    _same_error(lambda: torch.nn.utils.spectral_norm(torch.nn.Linear(2, 2),
                                                     n_power_iterations=0),
                lambda: nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0))


def test_legacy_spectral_norm_version0_checkpoint():
    # Version 0 saved the normalised weight instead of weight_v; loading rebuilds weight_v.
    torch.manual_seed(8)
    tmod = torch.nn.utils.spectral_norm(torch.nn.Linear(3, 5))
    tmod(torch.randn(2, 3))
    sd = tmod.state_dict()
    old = {k: v.clone() for k, v in sd.items() if k != "weight_v"}
    old["weight"] = tmod.weight.detach().clone()
    tnew = torch.nn.utils.spectral_norm(torch.nn.Linear(3, 5))
    tnew.load_state_dict(old)
    gnew = nn.utils.spectral_norm(nn.Linear(3, 5))
    gnew.load_state_dict({k: _g(v) for k, v in old.items()})
    assert_close(gnew.weight_v, tnew.weight_v, atol=1e-4, rtol=1e-3)
    # Incomplete old entries are reported as missing.
    partial = {k: _g(v) for k, v in old.items() if k != "weight_u"}
    with pytest.raises(RuntimeError, match='Missing key\\(s\\).*"weight_u"'):
        nn.utils.spectral_norm(nn.Linear(3, 5)).load_state_dict(partial)


# -- stateless.functional_call ---------------------------------------------------------------------
def _stateless_net(lib):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.Linear(3, 4)
            self.bn = lib.BatchNorm1d(4)
            self.head = lib.Linear(4, 2)

        def forward(self, x):
            return self.head(self.bn(self.fc(x)))

    return Net()


def test_functional_call_matches_torch(device):
    torch.manual_seed(9)
    tnet = _stateless_net(torch.nn)
    gnet = _load(tnet, _stateless_net(nn), device)
    before = dict(gnet.named_parameters())
    before_bufs = {k: v.clone() for k, v in gnet.named_buffers()}
    tnew = {"fc.weight": torch.randn(4, 3, requires_grad=True),
            "head.bias": torch.randn(2, requires_grad=True),
            "bn.running_mean": torch.randn(4)}
    gnew = {k: _g(v, device).requires_grad_(v.requires_grad) for k, v in tnew.items()}
    tx, x = _input((5, 3))
    tout = torch.func.functional_call(tnet, tnew, (tx,))
    gout = stateless.functional_call(gnet, gnew, (gt.from_numpy(x).to(device),))
    assert_close(gout, tout, **TOL)
    tout.sum().backward()
    gout.sum().backward()
    for k in ("fc.weight", "head.bias"):
        assert_close(gnew[k].grad, tnew[k].grad, **TOL)
    assert_close(gnet.fc.bias.grad, tnet.fc.bias.grad, **TOL)  # not replaced: the module's own
    assert gnet.fc.weight.grad is None and gnet.head.bias.grad is None
    # Restored: the same Parameter objects, buffers unchanged except by the forward's update
    # (training-mode BatchNorm updated the given running_mean, not the module's).
    assert dict(gnet.named_parameters()) == before
    assert_close(gnet.bn.running_mean, before_bufs["bn.running_mean"])
    assert_close(gnew["bn.running_mean"], tnew["bn.running_mean"], **TOL)
    assert_close(gnet.bn.running_var, tnet.bn.running_var, **TOL)
    # A single non-tuple argument, a kwargs dict and a list of dicts.
    gnet.eval()
    tnet.eval()
    tout = torch.func.functional_call(tnet, [{"fc.weight": tnew["fc.weight"]},
                                             {"fc.bias": torch.zeros(4)}], tx)
    gout = stateless.functional_call(gnet, [{"fc.weight": gnew["fc.weight"]},
                                            {"fc.bias": gt.zeros(4, device=device)}],
                                     gt.from_numpy(x).to(device))
    assert_close(gout, tout, **TOL)
    gout = stateless.functional_call(gnet, {}, kwargs={"x": gt.from_numpy(x).to(device)})
    assert_close(gout, tnet(tx), **TOL)


def test_functional_call_restores_on_error():
    gnet = _stateless_net(nn)
    weight = gnet.fc.weight
    with pytest.raises(RuntimeError):
        stateless.functional_call(gnet, {"fc.weight": gt.zeros(4, 3)}, (gt.ones(2, 5),))
    assert gnet.fc.weight is weight and gnet.fc._parameters["weight"] is weight
    # A bad name undoes the swaps already made.
    with pytest.raises(AttributeError):
        stateless.functional_call(gnet, {"fc.weight": gt.zeros(4, 3), "nope.w": gt.zeros(1)},
                                  (gt.ones(2, 3),))
    assert gnet.fc.weight is weight
    # A name the module lacks becomes a plain attribute for the call only.
    stateless.functional_call(gnet, {"extra": gt.zeros(1)}, (gt.ones(2, 3),))
    assert not hasattr(gnet, "extra")


def _tied(lib):
    class Tied(lib.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.Linear(3, 3)
            self.b = lib.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    return Tied()


def test_functional_call_tied_weights():
    torch.manual_seed(10)
    tnet = _tied(torch.nn)
    gnet = _tied(nn)
    gnet.load_state_dict({k: _g(v) for k, v in tnet.state_dict().items()})
    assert gnet.a.weight is gnet.b.weight
    tw = torch.randn(3, 3)
    tx, x = _input((2, 3))
    for tie in (True, False):
        tout = torch.func.functional_call(tnet, {"a.weight": tw}, (tx,), tie_weights=tie)
        gout = stateless.functional_call(gnet, {"a.weight": _g(tw)}, (gt.from_numpy(x),),
                                         tie_weights=tie)
        assert_close(gout, tout, **TOL)
    assert gnet.a.weight is gnet.b.weight
    tmsg, gmsg = _same_error(
        lambda: torch.func.functional_call(tnet, {"a.weight": tw, "b.weight": tw * 2}, (tx,)),
        lambda: stateless.functional_call(gnet, {"a.weight": _g(tw), "b.weight": _g(tw * 2)},
                                          (gt.from_numpy(x),)))
    assert gmsg == tmsg
    same = _g(tw)
    stateless.functional_call(gnet, {"a.weight": same, "b.weight": same}, (gt.from_numpy(x),))


def test_functional_call_strict_and_argument_errors():
    tnet, gnet = _stateless_net(torch.nn), _stateless_net(nn)
    full_t = dict(tnet.state_dict(keep_vars=True))
    full_g = dict(gnet.state_dict(keep_vars=True))
    tx = torch.ones(2, 3)
    gx = gt.ones(2, 3)
    torch.func.functional_call(tnet, full_t, (tx,), strict=True)
    stateless.functional_call(gnet, full_g, (gx,), strict=True)
    partial_t = {k: v for k, v in full_t.items() if k != "head.bias"}
    partial_g = {k: v for k, v in full_g.items() if k != "head.bias"}
    for tsd, gsd in ((partial_t, partial_g),
                     ({**full_t, "extra": torch.ones(1)}, {**full_g, "extra": gt.ones(1)}),
                     ({**partial_t, "extra": torch.ones(1)}, {**partial_g, "extra": gt.ones(1)})):
        tmsg, gmsg = _same_error(
            lambda tsd=tsd: torch.func.functional_call(tnet, tsd, (tx,), strict=True),
            lambda gsd=gsd: stateless.functional_call(gnet, gsd, (gx,), strict=True))
        assert gmsg == tmsg
    for targ, garg in (([{"fc.bias": torch.ones(4)}, {"fc.bias": torch.ones(4)}],
                        [{"fc.bias": gt.ones(4)}, {"fc.bias": gt.ones(4)}]),
                       ([{"fc.bias": torch.ones(4)}, 3], [{"fc.bias": gt.ones(4)}, 3]),
                       (5, 5)):
        tmsg, gmsg = _same_error(lambda a=targ: torch.func.functional_call(tnet, a, (tx,)),
                                 lambda a=garg: stateless.functional_call(gnet, a, (gx,)))
        assert gmsg == tmsg
    with pytest.raises(TypeError):
        stateless.functional_call(gnet, {"fc.bias": 3}, (gx,))


def test_functional_call_parametrized_module(device):
    # The originals of a parametrization are ordinary named parameters and can be replaced.
    torch.manual_seed(11)
    tmod = TPZ.weight_norm(torch.nn.Linear(3, 2))
    gmod = _load(tmod, PZ.weight_norm(nn.Linear(3, 2)), device)
    tv = torch.randn(2, 3)
    tx, x = _input((4, 3))
    tout = torch.func.functional_call(tmod, {"parametrizations.weight.original1": tv}, (tx,))
    gout = stateless.functional_call(gmod, {"parametrizations.weight.original1": _g(tv, device)},
                                     (gt.from_numpy(x).to(device),))
    assert_close(gout, tout, **TOL)
    assert_close(gmod.weight, tmod.weight, **TOL)

"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict against torch.nn."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def _names(module):
    return [n for n, _ in module.named_parameters()]


def _tensor(lib, *shape):
    return torch.zeros(*shape) if lib is torch.nn else gt.zeros(*shape)


# -- Sequential --------------------------------------------------------------------------------
def test_sequential_forward_matches_torch():
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 3),
                            torch.nn.LogSoftmax(dim=-1))
    g = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3), nn.LogSoftmax(dim=-1))
    g.load_state_dict({k: gt.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    assert_close(g(gt.from_numpy(x)), t(torch.from_numpy(x)).detach(), atol=1e-5, rtol=1e-5)
    assert repr(g) == repr(t)


def test_sequential_ordered_dict_and_indexing():
    def build(lib):
        return lib.Sequential(OrderedDict([("fc", lib.Linear(2, 3)), ("act", lib.ReLU()),
                                           ("out", lib.Linear(3, 1))]))

    g, t = build(nn), build(torch.nn)
    assert _names(g) == _names(t) and repr(g) == repr(t)
    assert g[0] is g.fc and g[-1] is g.out
    sliced = g[1:]
    assert isinstance(sliced, nn.Sequential) and list(sliced._modules) == ["act", "out"]
    assert sliced.out is g.out
    with pytest.raises(IndexError, match="index 3 is out of range"):
        g[3]
    g[1] = nn.Tanh()
    assert isinstance(g.act, nn.Tanh)


def test_sequential_mutation_matches_torch():
    def ops(lib):
        s = lib.Sequential(lib.ReLU(), lib.Tanh(), lib.Sigmoid())
        s.append(lib.Identity())
        s.insert(1, lib.ELU())
        s.insert(-1, lib.SiLU())
        del s[0]
        popped = s.pop(1)
        s.extend([lib.GELU()])
        added = s + lib.Sequential(lib.Mish())
        mult = lib.Sequential(lib.ReLU()) * 2
        s += lib.Sequential(lib.Softplus())
        return [repr(s), type(popped).__name__, repr(added), repr(mult), len(s),
                [type(m).__name__ for m in s], list(s._modules)]

    assert ops(nn) == ops(torch.nn)
    with pytest.raises(IndexError, match="Index out of range"):
        nn.Sequential().insert(3, nn.ReLU())
    with pytest.raises(ValueError, match="Non-positive"):
        nn.Sequential(nn.ReLU()) * 0
    with pytest.raises(ValueError, match="supports only objects of Sequential"):
        nn.Sequential() + nn.ModuleList()
    s = nn.Sequential(nn.ReLU())
    s *= 3
    assert len(s) == 3 and s[0] is s[2]
    del s[0:2]
    assert list(s._modules) == ["0"]


# -- ModuleList --------------------------------------------------------------------------------
def test_module_list_behaviour_and_repr():
    def build(lib):
        ml = lib.ModuleList([lib.Linear(2, 2), lib.Linear(2, 2), lib.ReLU(), lib.Linear(2, 2)])
        ml.append(lib.Linear(2, 3))
        ml.extend([lib.Tanh(), lib.Tanh()])
        ml.insert(0, lib.Sigmoid())
        return ml

    g, t = build(nn), build(torch.nn)
    assert repr(g) == repr(t)
    assert _names(g) == _names(t)
    assert len(g) == 8 and isinstance(g[-1], nn.Tanh) and isinstance(g[1:3], nn.ModuleList)
    del g[0]
    del t[0]
    assert list(g._modules) == list(t._modules) and repr(g) == repr(t)
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList()) == "ModuleList()"
    combined = g + nn.ModuleList([nn.ReLU()])
    assert len(combined) == 8
    assert isinstance(g.pop(0), nn.Linear) and len(g) == 6
    g[0] = nn.GELU()
    assert isinstance(g[0], nn.GELU)
    with pytest.raises(IndexError):
        g[10]
    with pytest.raises(TypeError, match="should be called with an iterable"):
        g.extend(nn.ReLU())
    assert "0" not in dir(g)


def test_module_list_same_module_twice():
    layer = nn.Linear(2, 2)
    ml = nn.ModuleList([layer, layer])
    tl = torch.nn.Linear(2, 2)
    tml = torch.nn.ModuleList([tl, tl])
    assert _names(ml) == _names(tml) == ["0.weight", "0.bias"]
    assert list(ml.state_dict()) == list(tml.state_dict())


# -- ModuleDict --------------------------------------------------------------------------------
def test_module_dict():
    def build(lib):
        md = lib.ModuleDict({"b": lib.Linear(2, 2), "a": lib.ReLU()})
        md["c"] = lib.Linear(2, 1)
        md.update([("d", lib.Tanh())])
        md.update(lib.ModuleDict({"e": lib.Sigmoid()}))
        del md["a"]
        return md

    g, t = build(nn), build(torch.nn)
    assert repr(g) == repr(t) and _names(g) == _names(t)
    assert list(g.keys()) == list(t.keys()) and "b" in g and len(g) == 4
    assert [type(m).__name__ for m in g.values()] == [type(m).__name__ for m in t.values()]
    assert list(iter(g)) == list(g.keys())
    assert isinstance(g.pop("d"), nn.Tanh) and "d" not in g
    with pytest.raises(ValueError, match="has length 3; 2 is required"):
        g.update([("x", nn.ReLU(), 1)])
    with pytest.raises(TypeError, match="iterable of key/value pairs"):
        g.update(3)
    g.clear()
    assert len(g) == 0


# -- ParameterList / ParameterDict ------------------------------------------------------------
def test_parameter_list():
    def build(lib):
        pl = lib.ParameterList([lib.Parameter(_tensor(lib, 2, 3)), _tensor(lib, 3)])
        pl.append("not a tensor")
        pl.extend([_tensor(lib, 1, 1, 2)])
        return pl

    g, t = build(nn), build(torch.nn)
    assert repr(g) == repr(t).replace("torch.", "gputensor.")
    assert _names(g) == _names(t) == ["0", "1", "3"]
    assert isinstance(g[1], nn.Parameter)  # plain tensors are converted
    assert g[2] == "not a tensor" and len(g) == 4
    assert isinstance(g[0:2], nn.ParameterList) and len(g[0:2]) == 2
    assert [type(p).__name__ for p in g] == ["Parameter", "Parameter", "str", "Parameter"]
    g[0] = gt.ones(1)
    assert isinstance(g[0], nn.Parameter) and g[0].shape == (1,)
    with pytest.raises(RuntimeError, match="should not be called"):
        g(1)
    with pytest.raises(TypeError, match="iterable"):
        g.extend(gt.ones(2))
    g.double()
    assert g[1].dtype is gt.float64


def test_parameter_dict():
    def build(lib):
        pd = lib.ParameterDict({"w": _tensor(lib, 2, 2), "b": lib.Parameter(_tensor(lib, 2)),
                                "s": "text"})
        pd["z"] = _tensor(lib, 1)
        pd.update(OrderedDict([("y", _tensor(lib, 3)), ("a", _tensor(lib, 1))]))
        return pd

    g, t = build(nn), build(torch.nn)
    assert list(g.keys()) == list(t.keys())  # a plain dict is merged in sorted order
    assert repr(g) == repr(t).replace("torch.", "gputensor.")
    assert _names(g) == _names(t)
    assert isinstance(g["w"], nn.Parameter) and "w" in g and len(g) == 6
    assert g.get("nope", 5) == 5
    assert g.setdefault("q", gt.ones(1)).shape == (1,)
    assert g.popitem()[0] == "q"
    assert isinstance(g.pop("z"), nn.Parameter) and "z" not in g
    merged = g | nn.ParameterDict({"extra": gt.ones(1)})
    assert list(merged.keys())[-1] == "extra" and "extra" not in g
    g |= nn.ParameterDict({"extra": gt.ones(1)})
    assert "extra" in g
    assert list(reversed(g))[0] == "extra"
    with pytest.raises(TypeError, match="not a string"):
        g[1] = gt.ones(1)
    with pytest.raises(RuntimeError, match="should not be called"):
        g(1)
    copy = g.copy()
    assert copy["w"] is g["w"]
    assert list(g.fromkeys(["u", "v"]).keys()) == ["u", "v"]
    g.clear()
    assert len(g) == 0 and _names(g) == []

"""Module machinery against torch.nn.Module: registration, iteration, state_dict, moves, hooks."""

from __future__ import annotations

import copy
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.nn.modules._hooks import BackwardHook
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def _net(lib):
    """The same small nested model built from torch.nn or gputensor.nn."""

    class Block(lib.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = lib.Linear(4, 3)
            self.act = lib.ReLU()
            self.register_buffer("running", lib_zeros(lib, 3))
            self.register_buffer("scratch", lib_zeros(lib, 2), persistent=False)

        def forward(self, x):
            return self.act(self.fc(x)) + self.running

    class Net(lib.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = lib.Parameter(lib_ones(lib, 3))
            self.block = Block()
            self.head = lib.Sequential(lib.Linear(3, 5), lib.Tanh(), lib.Linear(5, 2, bias=False))
            self.missing = None

        def forward(self, x):
            return self.head(self.block(x) * self.scale)

    return Net()


def lib_zeros(lib, n):
    return torch.zeros(n) if lib is torch.nn else gt.zeros(n)


def lib_ones(lib, n):
    return torch.ones(n) if lib is torch.nn else gt.ones(n)


def _pair():
    """(torch net, gputensor net) holding the same weights."""
    t, g = _net(torch.nn), _net(nn)
    g.load_state_dict({k: gt.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    return t, g


# -- Parameter ---------------------------------------------------------------------------------
def test_parameter_basics():
    data = gt.randn(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, gt.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf
    assert p.untyped_storage() is data.untyped_storage()  # shares memory, like PyTorch
    assert not nn.Parameter(data, requires_grad=False).requires_grad
    assert nn.Parameter().shape == (0,)
    # Ops on a Parameter give plain tensors.
    for out in (p * 2, p.t(), p[0], p.detach(), gt.relu(p), p.sum(), p.clone()):
        assert type(out) is gt.Tensor
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(gt.tensor([1, 2]))
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])


def test_parameter_repr_matches_torch():
    vals = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = repr(nn.Parameter(gt.from_numpy(vals.copy())))
    t = repr(torch.nn.Parameter(torch.from_numpy(vals.copy())))
    assert g == t


def test_parameter_pickle_and_deepcopy_keep_type():
    p = nn.Parameter(gt.randn(3, 2), requires_grad=False)
    for q in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert type(q) is nn.Parameter
        assert q.requires_grad is False
        assert_close(q, p.detach().numpy())
        assert q.untyped_storage() is not p.untyped_storage()
    memo_copy = copy.deepcopy([p, p])
    assert memo_copy[0] is memo_copy[1]


def test_buffer_marker():
    b = nn.Buffer(gt.ones(2), persistent=False)
    assert type(b) is gt.Tensor and isinstance(b, nn.Buffer)
    assert not isinstance(gt.ones(2), nn.Buffer)
    m = nn.Module()
    m.stat = b
    m.kept = nn.Buffer(gt.zeros(1))
    assert list(dict(m.named_buffers())) == ["stat", "kept"]
    assert list(m.state_dict()) == ["kept"]


# -- registration and attributes ---------------------------------------------------------------
def test_setattr_registers_like_torch():
    t, g = _pair()
    assert [n for n, _ in g.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in g.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in g.named_children()] == [n for n, _ in t.named_children()]
    assert [n for n, _ in g.named_modules()] == [n for n, _ in t.named_modules()]
    assert list(g.state_dict()) == list(t.state_dict())
    assert g.block.fc.weight is g._modules["block"]._modules["fc"]._parameters["weight"]
    assert g.missing is None and "missing" in g.__dict__


def test_assignment_rules():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign 'gputensor.FloatTensor' as parameter "
                                        r"'weight' \(gputensor.nn.Parameter or None expected\)"):
        m.weight = gt.zeros(2, 2)
    m.bias = None
    assert m.bias is None and "bias" in m._parameters
    seq = nn.Sequential(nn.ReLU())
    with pytest.raises(TypeError, match="as child module '0'"):
        setattr(seq, "0", 3)
    m.register_buffer("buf", gt.zeros(1))
    with pytest.raises(TypeError, match="as buffer 'buf'"):
        m.buf = 5
    m.buf = gt.ones(1)
    assert m.buf.item() == 1.0 and "buf" in m._buffers
    # Re-assigning a name as another kind moves it between the dicts.
    m.buf = nn.Parameter(gt.ones(1))
    assert "buf" in m._parameters and "buf" not in m._buffers
    m.plain = 3
    m.plain = nn.ReLU()
    assert "plain" in m._modules and "plain" not in m.__dict__


def test_register_errors_match_torch():
    def errors(lib, tensor):
        m = lib.Linear(2, 2)
        out = []
        calls = [
            lambda: m.register_buffer("a.b", tensor),
            lambda: m.register_buffer("", tensor),
            lambda: m.register_buffer("weight", tensor),
            lambda: m.register_buffer(1, tensor),
            lambda: m.register_buffer("x", 3),
            lambda: m.register_parameter("a.b", None),
            lambda: m.register_parameter("", None),
            lambda: m.register_parameter("training", None),
            lambda: m.register_parameter("x", tensor),
            lambda: m.add_module("a.b", None),
            lambda: m.add_module("", None),
            lambda: m.add_module("weight", None),
            lambda: m.add_module("x", 3),
            lambda: m.nope,
        ]
        for call in calls:
            with pytest.raises((KeyError, TypeError, AttributeError)) as info:
                call()
            out.append((info.type, str(info.value).replace("torch.", "gputensor.")
                        .replace("torch Tensor", "gputensor Tensor")))
        return out

    g = errors(nn, gt.zeros(1))
    t = errors(torch.nn, torch.zeros(1))
    for (gtype, gmsg), (ttype, tmsg) in zip(g, t, strict=True):
        assert gtype is ttype
        assert gmsg == tmsg, (gmsg, tmsg)


def test_module_before_init_and_delattr():
    class Bad(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter(gt.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()
    m = nn.Linear(2, 2)
    m.register_buffer("b", gt.zeros(1), persistent=False)
    del m.weight, m.b
    assert "weight" not in m._parameters and "b" not in m._non_persistent_buffers_set
    m.extra = 1
    del m.extra
    with pytest.raises(AttributeError):
        del m.extra
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        nn.Module(foo=1)


def test_dir_lists_members():
    m = nn.Linear(2, 3)
    keys = dir(m)
    for name in ("weight", "bias", "forward", "in_features", "training"):
        assert name in keys
    assert keys == sorted(keys)
    assert "0" not in dir(nn.Sequential(nn.ReLU()))


def test_shared_parameters_and_remove_duplicate():
    def build(lib):
        shared = lib.Linear(2, 2)
        return lib.Sequential(shared, lib.ReLU(), shared)

    g, t = build(nn), build(torch.nn)
    for kw in ({}, {"remove_duplicate": False}):
        assert [n for n, _ in g.named_parameters(**kw)] == \
            [n for n, _ in t.named_parameters(**kw)]
        assert [n for n, _ in g.named_modules(**kw)] == [n for n, _ in t.named_modules(**kw)]
    assert len(list(g.parameters())) == 2
    assert [n for n, _ in g.named_parameters(prefix="net", recurse=False)] == []
    assert [n for n, _ in g[0].named_parameters(prefix="net")] == ["net.weight", "net.bias"]
    assert list(g.state_dict()) == list(t.state_dict())


def test_get_submodule_parameter_buffer():
    _, g = _pair()
    assert g.get_submodule("head.0") is g.head[0]
    assert g.get_submodule("") is g
    assert g.get_parameter("head.2.weight") is g.head[2].weight
    assert g.get_buffer("block.running") is g.block.running
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        g.get_submodule("head.nope")
    with pytest.raises(AttributeError, match="is not an nn.Parameter"):
        g.get_parameter("block.running")
    with pytest.raises(AttributeError, match="is not a buffer"):
        g.get_buffer("head.0.weight")
    new = nn.Identity()
    g.set_submodule("head.1", new)
    assert g.head[1] is new


# -- state_dict --------------------------------------------------------------------------------
def test_state_dict_contents_and_metadata():
    t, g = _pair()
    sd = g.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == list(t.state_dict())
    assert list(sd._metadata) == list(t.state_dict()._metadata)
    assert sd._metadata["block"] == {"version": 1}
    for k, v in sd.items():
        assert type(v) is gt.Tensor and not v.requires_grad
        assert_close(v, t.state_dict()[k])
    kept = g.state_dict(keep_vars=True)
    assert kept["scale"] is g.scale
    pre = g.state_dict(prefix="model.")
    assert list(pre) == ["model." + k for k in sd]
    dest: dict = {}
    assert g.state_dict(destination=dest) is dest and list(dest) == list(sd)


def test_state_dict_shares_storage():
    g = nn.Linear(2, 2)
    sd = g.state_dict()
    sd["weight"].fill_(3.0)
    assert g.weight.sum().item() == 12.0


def test_load_state_dict_roundtrip_and_result():
    t, g = _pair()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    assert_close(g(gt.from_numpy(x)), t(torch.from_numpy(x)).detach(), atol=1e-5, rtol=1e-5)
    other = _net(nn)
    result = other.load_state_dict(g.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    for (_, a), (_, b) in zip(other.named_parameters(), g.named_parameters(), strict=True):
        assert_close(a, b.detach())


def _load_error(lib, module, state):
    with pytest.raises(RuntimeError) as info:
        module.load_state_dict(state)
    return str(info.value)


def test_load_state_dict_errors_match_torch():
    t, g = _pair()
    t_sd, g_sd = t.state_dict(), g.state_dict()
    for mutate in (
        lambda sd, z: sd.pop("head.0.bias"),
        lambda sd, z: sd.__setitem__("head.9.weight", z(1)),
        lambda sd, z: sd.__setitem__("extra", z(1)),
        lambda sd, z: sd.__setitem__("block.fc.weight", z(2, 2)),
        lambda sd, z: (sd.pop("scale"), sd.__setitem__("block.nope", z(1))),
    ):
        ts, gs = OrderedDict(t_sd), OrderedDict(g_sd)
        mutate(ts, torch.zeros)
        mutate(gs, gt.zeros)
        tmsg = _load_error(torch.nn, _net(torch.nn), ts)
        gmsg = _load_error(nn, _net(nn), gs)
        assert gmsg == tmsg.replace("torch.", "gputensor."), (gmsg, tmsg)


def test_load_state_dict_non_strict_and_bad_input():
    t, g = _pair()
    sd = g.state_dict()
    sd.pop("scale")
    sd["bogus"] = gt.zeros(1)
    res = _net(nn).load_state_dict(sd, strict=False)
    tsd = t.state_dict()
    tsd.pop("scale")
    tsd["bogus"] = torch.zeros(1)
    tres = _net(torch.nn).load_state_dict(tsd, strict=False)
    assert res.missing_keys == tres.missing_keys == ["scale"]
    assert res.unexpected_keys == tres.unexpected_keys == ["bogus"]
    assert "IncompatibleKeys" in repr(res)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        g.load_state_dict([1, 2])
    bad = g.state_dict()
    bad["scale"] = np.zeros(3)
    with pytest.raises(RuntimeError, match='While copying the parameter named "scale"'):
        g.load_state_dict(bad)
    # A shape mismatch is reported even with strict=False.
    bad = g.state_dict()
    bad["scale"] = gt.zeros(4)
    with pytest.raises(RuntimeError, match="size mismatch for scale"):
        g.load_state_dict(bad, strict=False)


def test_load_state_dict_casts_and_copies_in_place():
    g = nn.Linear(3, 2)
    weight = g.weight
    g.load_state_dict({"weight": gt.ones(2, 3, dtype=gt.float64), "bias": gt.zeros(2)})
    assert g.weight is weight and g.weight.dtype is gt.float32
    assert g.weight.sum().item() == 6.0
    g.load_state_dict({"weight": gt.full((2, 3), 2.0), "bias": gt.zeros(2)}, assign=True)
    assert g.weight is not weight and isinstance(g.weight, nn.Parameter)
    assert g.weight.requires_grad


def test_load_from_state_dict_override_and_version():
    class Versioned(nn.Module):
        _version = 2

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", gt.zeros((), dtype=gt.int64))
            self.seen: list = []

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing,
                                  unexpected, errors):
            self.seen.append(local_metadata.get("version"))
            key = prefix + "count"
            if key not in state_dict:  # an old checkpoint: fill the default in
                state_dict[key] = gt.tensor(7)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing,
                                          unexpected, errors)

    outer = nn.Sequential(Versioned())
    sd = outer.state_dict()
    assert sd._metadata["0"] == {"version": 2}
    outer.load_state_dict(sd)
    old = OrderedDict()
    old._metadata = {"0": {"version": 1}}
    outer.load_state_dict(old)
    assert outer[0].seen == [2, 1] and outer[0].count.item() == 7


def test_state_dict_hooks():
    m = nn.Linear(2, 2)
    log = []
    h1 = m.register_state_dict_pre_hook(lambda mod, prefix, keep: log.append(("pre", prefix)))

    def drop_bias(mod, sd, prefix, meta):
        del sd[prefix + "bias"]

    m.register_state_dict_post_hook(drop_bias)
    assert list(m.state_dict(prefix="p.")) == ["p.weight"]
    assert log == [("pre", "p.")]
    h1.remove()
    m.state_dict()
    assert len(log) == 1

    def drop_missing(module, keys):
        keys.missing_keys.clear()

    m2 = nn.Linear(2, 2)
    m2.register_load_state_dict_post_hook(drop_missing)
    seen = []
    m2.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *rest: seen.append(sorted(sd)))
    m2.load_state_dict({"weight": gt.zeros(2, 2)})  # missing bias, forgiven by the hook
    assert seen == [["weight"]]


def test_extra_state():
    class WithExtra(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.value = 0

        def get_extra_state(self):
            return {"value": self.value}

        def set_extra_state(self, state):
            self.value = state["value"]

    a = WithExtra()
    a.value = 5
    sd = a.state_dict()
    assert sd["_extra_state"] == {"value": 5}
    b = WithExtra()
    b.load_state_dict(sd)
    assert b.value == 5
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "_extra_state"'):
        b.load_state_dict({})
    with pytest.raises(RuntimeError, match="Unexpected key"):
        nn.Identity().load_state_dict({"_extra_state": 1})


# -- modes, gradients, apply ---------------------------------------------------------------------
def test_train_eval_requires_grad_apply():
    _, g = _pair()
    assert g.training and g.head[0].training
    assert g.eval() is g
    assert not any(m.training for m in g.modules())
    g.train()
    assert all(m.training for m in g.modules())
    with pytest.raises(ValueError, match="boolean"):
        g.train("yes")
    g.requires_grad_(False)
    assert not any(p.requires_grad for p in g.parameters())
    visited = []
    g.apply(lambda m: visited.append(type(m).__name__))
    t_visited = []
    _net(torch.nn).apply(lambda m: t_visited.append(type(m).__name__))
    assert visited == t_visited


def test_zero_grad():
    m = nn.Linear(2, 2)
    m.weight.grad = gt.ones(2, 2)
    m.bias.grad = gt.ones(2)
    m.zero_grad(set_to_none=False)
    assert m.weight.grad.sum().item() == 0.0 and m.bias.grad is not None
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


# -- device and dtype moves --------------------------------------------------------------------
def test_dtype_moves_keep_parameter_identity():
    m = nn.Sequential(nn.Linear(3, 2), nn.PReLU())
    m[0].register_buffer("steps", gt.zeros((), dtype=gt.int64))
    m[0].register_buffer("stat", gt.zeros(2))
    w = m[0].weight
    w.grad = gt.ones(2, 3)
    ref = w.detach().clone()
    for conv, dt in ((m.double, gt.float64), (m.half, gt.float16), (m.bfloat16, gt.bfloat16),
                     (m.float, gt.float32)):
        assert conv() is m
        assert m[0].weight is w and isinstance(w, nn.Parameter) and w.requires_grad
        assert w.dtype is dt and w.grad.dtype is dt and m[0].stat.dtype is dt
        assert m[0].steps.dtype is gt.int64  # integer buffers are left alone
        assert m[1].weight.dtype is dt
    assert_close(w.detach(), ref.numpy(), atol=1e-2, rtol=1e-2)
    m.to(gt.float64)
    assert w.dtype is gt.float64 and m[0].steps.dtype is gt.int64
    m.to(dtype=gt.float32)
    assert w.dtype is gt.float32
    m.to(gt.zeros(1, dtype=gt.float64))
    assert w.dtype is gt.float64
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        m.to(gt.int32)
    with pytest.raises(TypeError):
        m.to(3.5)


def test_device_moves(device):
    m = nn.Linear(3, 2)
    w = m.weight
    m.weight.grad = gt.ones(2, 3)
    m.register_buffer("stat", gt.zeros(2))
    assert m.to(device) is m
    assert w.device == gt.device(device) and w.grad.device == gt.device(device)
    assert m.stat.device == gt.device(device) and m.weight is w
    m.to(device, gt.float64)
    assert w.dtype is gt.float64 and w.device == gt.device(device)
    x = gt.randn(4, 3, dtype=gt.float64, device=device)
    assert m(x).device == gt.device(device)
    m.cpu()
    assert w.device == gt.device("cpu") and m.stat.device == gt.device("cpu")
    if gt.device(device).type == "cuda":
        m.cuda()  # the current device
        assert w.is_cuda and w.device == gt.device(f"cuda:{gt.cuda.current_device()}")


def test_module_pickle_and_deepcopy():
    g = nn.Sequential(nn.Linear(4, 3), nn.PReLU(), nn.Linear(3, 2))
    g[0].register_buffer("stat", gt.ones(3))
    g.eval()
    x = gt.randn(3, 4)
    expected = g(x)
    for clone in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert type(clone[1].weight) is nn.Parameter and clone[1].weight.requires_grad
        assert clone[0].weight is not g[0].weight
        assert not clone.training
        assert_close(clone(x), expected.detach().numpy())
        assert list(clone.state_dict()) == list(g.state_dict())
    shared = nn.Linear(2, 2)
    dup = copy.deepcopy(nn.Sequential(shared, shared))
    assert dup[0] is dup[1] and dup[0].weight is dup[1].weight


# -- hooks ------------------------------------------------------------------------------------
def _hook_trace(lib, make):
    m = lib.Linear(2, 2)
    log = []
    handles = [
        m.register_forward_pre_hook(lambda mod, args: log.append("pre1")),
        m.register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True),
        m.register_forward_pre_hook(lambda mod, args, kw: log.append(f"prekw{sorted(kw)}"),
                                    with_kwargs=True),
        m.register_forward_hook(lambda mod, args, out: log.append("post1")),
        m.register_forward_hook(lambda mod, args, out: log.append("post0"), prepend=True),
        m.register_forward_hook(lambda mod, args, kw, out: log.append("postkw"),
                                with_kwargs=True),
    ]
    m(make(3, 2))
    handles[0].remove()
    handles[3].remove()
    m(make(3, 2))
    return log


def test_forward_hook_order_matches_torch():
    assert _hook_trace(nn, gt.randn) == _hook_trace(torch.nn, torch.randn)


def test_forward_hooks_replace_args_and_output():
    m = nn.Linear(2, 2)
    x = gt.randn(3, 2)
    h1 = m.register_forward_pre_hook(lambda mod, args: args[0] * 0)
    assert_close(m(x), gt.broadcast_to(m.bias.detach(), (3, 2)).numpy())
    h1.remove()
    with m.register_forward_hook(lambda mod, args, out: out + 1):
        assert_close(m(x), (m.forward(x) + 1).detach().numpy())
    assert_close(m(x), m.forward(x).detach().numpy())  # the with block removed the hook

    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            return x * factor

    s = Scale()
    s.register_forward_pre_hook(lambda mod, args, kw: (args, {"factor": 3.0}), with_kwargs=True)
    assert_close(s(gt.ones(2)), np.full(2, 3.0, np.float32))
    s2 = Scale()
    s2.register_forward_pre_hook(lambda mod, args, kw: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
        s2(gt.ones(2))


def test_always_call_hook_runs_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append("always"), always_call=True)
    m.register_forward_hook(lambda mod, args, out: seen.append("normal"))
    with pytest.raises(ValueError, match="boom"):
        m(gt.ones(1))
    assert seen == ["always"]


def test_missing_forward_error():
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(gt.ones(1))


def test_backward_hook_registration_and_forward_unchanged():
    m = nn.Linear(2, 2)
    calls = []
    h = m.register_full_backward_hook(lambda mod, gin, gout: calls.append(1))
    hp = m.register_full_backward_pre_hook(lambda mod, gout: None)
    assert len(m._backward_hooks) == 1 and len(m._backward_pre_hooks) == 1
    x = gt.randn(3, 2)
    assert_close(m(x), m.forward(x).detach().numpy())
    h.remove()
    hp.remove()
    assert not m._backward_hooks and not m._backward_pre_hooks


def test_backward_hook_plumbing():
    """The gradient routing the autograd Function calls into (see modules/_hooks.py)."""
    mod = nn.Identity()
    g_out, g_in = gt.ones(2), gt.full((2,), 2.0)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append((module, grad_input, grad_output))
        return (grad_input[0] * 10, None)

    def pre_hook(module, grad_output):
        return (grad_output[0] + 1,)

    bw = BackwardHook(mod, [hook], [pre_hook])
    bw.n_inputs, bw.input_index = 2, [0]
    bw.n_outputs, bw.output_index = 1, [0]
    (new_out,) = bw.on_output_grads((g_out,))
    assert_close(new_out, np.full(2, 2.0, np.float32))
    (new_in,) = bw.on_input_grads((g_in,))
    assert_close(new_in, np.full(2, 20.0, np.float32))
    module, gin, gout = seen[0]
    assert module is mod and gin[1] is None and gin[0] is g_in
    assert_close(gout[0], np.full(2, 2.0, np.float32))
    # Without grad_outputs (the gradient bypassed the outputs) the hooks stay silent.
    assert bw.on_input_grads((g_in,)) == (g_in,)

    def bad(module, grad_input, grad_output):
        return (None,)

    bw = BackwardHook(mod, [bad], [])
    bw.n_inputs, bw.input_index, bw.n_outputs, bw.output_index = 2, [0], 1, [0]
    bw.on_output_grads((g_out,))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 1, but expected 2"):
        bw.on_input_grads((g_in,))
    # No input requires grad: hooks fire at the outputs with grad_input all None.
    seen.clear()

    def replacing(module, grad_input, grad_output):
        seen.append(grad_input)
        return (grad_output[0],)

    bw = BackwardHook(mod, [replacing], [])
    bw.n_inputs, bw.input_index, bw.n_outputs, bw.output_index = 1, None, 1, [0]
    with warnings.catch_warnings(record=True), pytest.raises(RuntimeError, match="None"):
        bw.on_output_grads((g_out,))
    assert seen == [(None,)]


def test_backward_hook_setup_passthrough_without_grad():
    # Nothing requires grad: setup leaves args and outputs untouched (no graph to hook into).
    bw = BackwardHook(nn.Identity(), [lambda *a: None], [])
    x = gt.ones(2)
    assert bw.setup_inputs((x, 3)) == (x, 3)
    assert bw.input_index is None and bw.n_inputs == 2
    assert bw.setup_outputs(x) is x


# -- repr -------------------------------------------------------------------------------------
def test_repr_matches_torch():
    t, g = _pair()
    assert repr(g) == repr(t)

    class Custom(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    class TCustom(torch.nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    c, tc = Custom(), TCustom()
    c.inner = nn.Linear(1, 1)
    tc.inner = torch.nn.Linear(1, 1)
    assert repr(c).replace("Custom", "X") == repr(tc).replace("TCustom", "X")
    assert repr(nn.Module()) == "Module()"

"""gt.compile's contract beyond equal values: guards and recapture, graph breaks, fullgraph,
static inputs, no allocation on replay, in-place writes, overlapping calls, the API's
arguments, Module.compile, the profiler, and errors at replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
import gputensor.nn.functional as F
from gputensor.profiler import ProfilerActivity, profile
from tests.helpers import synced


def _graphs(compiled) -> list:
    fn = compiled._compiled if isinstance(compiled, nn.Module) else compiled
    return [g for e in fn.cache.values() for g in e.graphs]


def _entries(compiled) -> list:
    return list(compiled.cache.values())


def test_same_signature_replays_one_capture(device: str) -> None:
    f = gt.compile(lambda x, y: (x * y).sin() + 2.0)
    for _ in range(3):
        x, y = gt.randn(4, 3, device=device), gt.randn(4, 3, device=device)
        expect = ((x * y).sin() + 2.0).cpu().numpy()
        np.testing.assert_array_equal(f(x, y).cpu().numpy(), expect)
    assert f.captures == 1 and len(_graphs(f)) == 1


@pytest.mark.parametrize("change", ["shape", "dtype", "requires_grad", "scalar", "grad_mode",
                                    "kwarg", "alias"])
def test_a_changed_guard_captures_again(device: str, change: str) -> None:
    def fn(x, y, k=1.0):
        return x * y + k

    f = gt.compile(fn)
    x, y = gt.randn(4, device=device), gt.randn(4, device=device)
    f(x, y)
    f(x, y)
    assert f.captures == 1
    variants = {
        "shape": lambda: f(gt.randn(5, device=device), gt.randn(5, device=device)),
        "dtype": lambda: f(x.double(), y.double()),
        "requires_grad": lambda: f(x.requires_grad_(), y),
        "scalar": lambda: f(x, y, 3.0),
        "grad_mode": lambda: gt.no_grad()(lambda: f(x, y))(),
        "kwarg": lambda: f(x, y=y),
        "alias": lambda: f(x, x),
    }
    out = variants[change]()
    assert f.captures == 2
    xx = x.detach()
    expect = {"scalar": xx * y + 3.0, "alias": xx * xx + 1.0}.get(change)
    if expect is not None:
        np.testing.assert_array_equal(out.detach().cpu().numpy(), expect.cpu().numpy())


def test_training_flag_and_new_parameter_storage_recapture(device: str) -> None:
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).to(device)
    cm = gt.compile(m)
    x = gt.randn(2, 3, device=device)
    cm(x)
    m.eval()
    np.testing.assert_array_equal(cm(x).detach().cpu().numpy(), m(x).detach().cpu().numpy())
    assert cm._compiled.captures == 2
    with gt.no_grad():
        m[0].weight.data = gt.ones(3, 3, device=device)  # new storage: the old graph is stale
    np.testing.assert_array_equal(cm(x).detach().cpu().numpy(), m(x).detach().cpu().numpy())
    with gt.no_grad():
        m[0].weight.mul_(2.0)  # same storage, new values: read live
    np.testing.assert_array_equal(cm(x).detach().cpu().numpy(), m(x).detach().cpu().numpy())


def test_host_reads_are_graph_breaks_that_run_eagerly(device: str) -> None:
    def fn(x):
        if x.sum() > 0:  # data-dependent control flow
            return x * 2
        return x - 1

    f = gt.compile(fn)
    pos, neg = gt.ones(3, device=device), -gt.ones(3, device=device)
    with pytest.warns(UserWarning, match=r"graph break .*Tensor.item\(\)"):
        f(pos)
    np.testing.assert_array_equal(f(neg).cpu().numpy(), (neg - 1).cpu().numpy())
    np.testing.assert_array_equal(f(pos).cpu().numpy(), (pos * 2).cpu().numpy())
    (entry,) = _entries(f)
    assert entry.eager and not entry.graphs


def test_fullgraph_raises_at_the_break(device: str) -> None:
    f = gt.compile(lambda x: x * x.max().item(), fullgraph=True)
    with pytest.raises(RuntimeError, match=r"fullgraph=True.*Tensor.item\(\)"):
        f(gt.ones(3, device=device))


def test_optimizer_step_inside_is_a_graph_break(device: str) -> None:
    m = nn.Linear(2, 1).to(device)
    opt = gt.optim.Adam(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()

    f = gt.compile(step)
    with pytest.warns(UserWarning, match="optimizer step"):
        f(gt.ones(3, 2, device=device))
    before = m.weight.detach().clone()
    f(gt.ones(3, 2, device=device))  # eager: the step count keeps moving
    assert opt.state[m.weight]["step"].item() == 2.0
    assert not gt.equal(before, m.weight.detach())


def test_static_inputs_and_no_allocation_on_replay(device: str) -> None:
    def fn(x):
        h = (x + 1).relu()
        return (h * h).sum(dim=0)

    f = gt.compile(fn)
    x = gt.randn(64, 8, device=device)
    f(x)
    f(x)
    (graph,) = _graphs(f)
    buffers = {id(s.args[0]._storage) for s in graph.forward.steps
               if s.args and isinstance(s.args[0], gt.Tensor)}
    x2 = gt.randn(64, 8, device=device)
    out = f(x2)
    np.testing.assert_allclose(out.cpu().numpy(), fn(x2).cpu().numpy(), rtol=1e-6)
    # Replays write into the same private buffers, and the static input holds the new input.
    assert buffers == {id(s.args[0]._storage) for s in graph.forward.steps
                       if s.args and isinstance(s.args[0], gt.Tensor)}
    np.testing.assert_array_equal(graph.statics[0].cpu().numpy(), x2.cpu().numpy())
    assert not any(id(x2._storage) == b for b in buffers)


def test_outputs_of_earlier_calls_are_not_overwritten(device: str) -> None:
    f = gt.compile(lambda x: x.exp())
    a = f(gt.zeros(3, device=device))
    b = f(gt.ones(3, device=device))
    c = f(gt.full((3,), 2.0, device=device))
    np.testing.assert_allclose(a.cpu().numpy(), [1.0] * 3)
    np.testing.assert_allclose(b.cpu().numpy(), [np.e] * 3, rtol=1e-6)
    np.testing.assert_allclose(c.cpu().numpy(), [np.e ** 2] * 3, rtol=1e-6)


def test_in_place_writes_to_inputs_reach_the_caller(device: str) -> None:
    def fn(x, y):
        x.add_(y)
        return x * 2

    f = gt.compile(fn)
    for k in range(3):
        x, y = gt.full((4,), float(k), device=device), gt.ones(4, device=device)
        v = x._version
        out = f(x, y)
        np.testing.assert_array_equal(x.cpu().numpy(), [k + 1.0] * 4)
        np.testing.assert_array_equal(out.cpu().numpy(), [2.0 * (k + 1)] * 4)
        assert x._version > v
    assert f.captures == 1


def test_buffers_updated_in_place_keep_eager_values(device: str) -> None:
    m = nn.BatchNorm1d(3).to(device)
    ref = nn.BatchNorm1d(3).to(device)
    cm = gt.compile(m)
    for k in range(3):
        x = gt.randn(5, 3, device=device) + k
        cm(x)
        ref(x)
    np.testing.assert_array_equal(m.running_mean.cpu().numpy(), ref.running_mean.cpu().numpy())
    assert m.num_batches_tracked.item() == 3


def test_overlapping_calls_use_separate_instances(device: str) -> None:
    w = gt.randn(3, 3, device=device, requires_grad=True)
    f = gt.compile(lambda x: (x @ w).tanh())
    xs = [gt.randn(2, 3, device=device) for _ in range(3)]
    f(xs[0])  # capture
    outs = [f(x) for x in xs]  # replays whose backward has not run yet
    grads = []
    for x, o in zip(xs, outs, strict=True):
        (g,) = gt.autograd.grad(o.sum(), w)
        (e,) = gt.autograd.grad((x @ w).tanh().sum(), w)
        np.testing.assert_allclose(g.cpu().numpy(), e.cpu().numpy(), rtol=1e-6)
        grads.append(g)
    assert len(_graphs(f)) >= 2


def test_input_gradients_and_retain_graph(device: str) -> None:
    f = gt.compile(lambda x: (x * x).sum())
    for _ in range(2):
        x = gt.randn(4, device=device, requires_grad=True)
        y = f(x)
        y.backward(retain_graph=True)
        y.backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), (4 * x).detach().cpu().numpy(),
                                   rtol=1e-6)


def test_double_backward_raises(device: str) -> None:
    f = gt.compile(lambda x: (x ** 3).sum())
    x = gt.randn(3, device=device, requires_grad=True)
    f(x)
    with pytest.raises(RuntimeError, match="double backward"):
        gt.autograd.grad(f(x), x, create_graph=True)


def test_bad_index_at_replay_raises_like_eager(device: str) -> None:
    emb = nn.Embedding(5, 2).to(device)
    f = gt.compile(lambda i: emb(i))
    f(gt.tensor([0, 1], device=device))
    f(gt.tensor([2, 3], device=device))
    with pytest.raises(IndexError, match="index out of range in self"):
        synced(f(gt.tensor([1, 7], device=device)))
    g = gt.compile(lambda x, i: x[i])
    g(gt.randn(4, device=device), gt.tensor([0, 1], device=device))
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 4"):
        synced(g(gt.randn(4, device=device), gt.tensor([0, 9], device=device)))


def test_profiler_sees_replayed_kernels(device: str) -> None:
    f = gt.compile(lambda x: (x * 3).exp())
    x = gt.randn(8, device=device)
    f(x)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        f(x)
    names = {e.key for e in prof.key_averages()}
    assert any("mul" in n for n in names) and any("exp" in n for n in names), names


def test_decorator_reset_disable_and_module_compile(device: str) -> None:
    @gt.compile
    def f(x):
        return x + 1

    x = gt.zeros(2, device=device)
    f(x)
    f(x)
    assert f.captures == 1
    gt.compiler.reset()
    assert f.captures == 0
    f(x)
    assert f.captures == 1
    assert gt.compile(f, disable=True) is f
    assert gt.compile(backend="eager")(len) is len

    @gt.compiler.disable
    def host_side(t):
        return t * 2

    g = gt.compile(lambda t: host_side(t) + 1)
    with pytest.warns(UserWarning, match="disable"):
        g(x)
    m = nn.Linear(2, 2).to(device)
    keys = list(m.state_dict())
    m.compile()
    assert type(m).__name__ == "Linear" and isinstance(m, nn.Linear)
    assert list(m.state_dict()) == keys
    m(gt.ones(1, 2, device=device))
    m(gt.ones(1, 2, device=device))
    assert m._compiled_call_impl.captures >= 1
    om = gt.compile(nn.Linear(2, 2))
    assert list(om.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert om.in_features == 2


def test_cache_size_limit_falls_back_to_eager(device: str, monkeypatch) -> None:
    monkeypatch.setattr(gt.compiler.config, "cache_size_limit", 2)
    f = gt.compile(lambda x: x * 2)
    f(gt.ones(1, device=device))
    f(gt.ones(2, device=device))
    with pytest.warns(UserWarning, match="cache size limit"):
        out = f(gt.ones(3, device=device))
    np.testing.assert_array_equal(out.cpu().numpy(), [2.0] * 3)
    assert f.captures == 2


def test_arguments_are_checked_like_torch_compile() -> None:
    with pytest.raises(RuntimeError, match="Either mode or options"):
        gt.compile(len, mode="default", options={})
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        gt.compile(len, mode="fastest")
    with pytest.raises(RuntimeError, match="Unexpected optimization option"):
        gt.compile(len, options={"triton.cudagraphs": True})
    with pytest.raises(NotImplementedError, match="backend="):
        gt.compile(len, backend="onnxrt")
    with pytest.raises(NotImplementedError, match="dynamic"):
        gt.compile(len, dynamic=True)
    for mode in ("default", "reduce-overhead", "max-autotune"):
        assert callable(gt.compile(len, mode=mode))


def test_is_compiling_inside_a_capture(device: str) -> None:
    seen = []

    def fn(x):
        seen.append(gt.compiler.is_compiling())
        return x + 1

    f = gt.compile(fn)
    f(gt.ones(1, device=device))
    f(gt.ones(1, device=device))
    assert seen == [True] and not gt.compiler.is_compiling()


def test_warning_free_replay_of_a_training_step(device: str) -> None:
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
    cm = gt.compile(m)
    opt = gt.optim.SGD(m.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(cm(gt.randn(6, 4, device=device)),
                            gt.randint(0, 2, (6,), device=device)).backward()
            opt.step()


@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs the CUDA emulator")
def test_reduce_overhead_replays_cuda_graphs() -> None:
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).cuda()
    cm = gt.compile(m, mode="reduce-overhead")
    for _ in range(3):
        x = gt.randn(5, 8, device="cuda")
        y, e = cm(x), m(x)
        # equal: captured products are cuBLAS's as eager ones (NumPy's on the emulator)
        np.testing.assert_array_equal(y.detach().cpu().numpy(), e.detach().cpu().numpy())
        y.sum().backward()
        got = [p.grad.cpu().numpy().copy() for p in m.parameters()]
        m.zero_grad()
        e.sum().backward()
        for a, p in zip(got, m.parameters(), strict=True):
            np.testing.assert_array_equal(a, p.grad.cpu().numpy())
        m.zero_grad()
    (graph,) = _graphs(cm)
    assert graph.forward.cuda_graph is not None and graph.backward.cuda_graph is not None
    # Embedding's index check runs on the device (no host read): it replays as a CUDA graph,
    # and a bad index raises after the replay that recorded it.
    emb = nn.Embedding(6, 3).cuda()
    f = gt.compile(lambda i: emb(i) * 2, mode="reduce-overhead")
    for k in range(3):
        i = gt.tensor([k, k + 1], device="cuda")
        np.testing.assert_array_equal(f(i).detach().cpu().numpy(),
                                      (emb(i) * 2).detach().cpu().numpy())
    (graph,) = _graphs(f)
    assert graph.forward.cuda_graph is not None
    with pytest.raises(IndexError, match="index out of range in self: index 6 with 6"):
        f(gt.tensor([0, 6], device="cuda")).cpu()
    # A program with a host-side check (index_fill's index range) keeps the step replay.
    g = gt.compile(lambda x, i: x.index_fill(0, i, 2.0) * 2, mode="reduce-overhead")
    x = gt.zeros(4, device="cuda")
    for k in range(3):
        i = gt.tensor([k], device="cuda")
        np.testing.assert_array_equal(g(x, i).cpu().numpy(),
                                      (x.index_fill(0, i, 2.0) * 2).cpu().numpy())
    (graph,) = _graphs(g)
    assert graph.forward.cuda_graph is None


def test_cpu_replay_prebinds_products_and_elementwise_kernels(monkeypatch) -> None:
    monkeypatch.setattr(gt.compiler.config, "fuse", False)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    f = gt.compile(lambda x: m(x) * 2.0)
    x = gt.randn(3, 4)
    f(x)
    (graph,) = _graphs(f)
    prebound = [fn for fn, args, _ in graph.forward._plain if args == ()]
    names = [s.name for s in graph.forward.steps]
    assert names.count("_gemm") + names.count("relu") + names.count("mul") <= len(prebound)
    for _ in range(2):
        x = gt.randn(3, 4)
        np.testing.assert_array_equal(f(x).detach().numpy(), (m(x) * 2.0).detach().numpy())

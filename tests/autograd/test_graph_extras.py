"""The rest of torch.autograd(.graph): allow_mutation_on_saved_tensors, the engine switches
(multithreading, gradient layout policy, stream settings), region_activation_memory_budget
and the legacy NestedIOFunction, against PyTorch on cpu and emulated cuda."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor.autograd import graph as gt_graph


def _np(t):
    return t.detach().cpu().numpy()


# -- allow_mutation_on_saved_tensors --------------------------------------------------------
def _mutation_case(lib, device):
    a = lib.arange(1.0, 7.0, device=device).reshape(2, 3).requires_grad_()
    b = a.clone()
    c = lib.full((2, 3), 0.5, device=device)          # saved, no grad of its own
    out = (b ** 2 * c).sum() + b.exp().sum()
    b.sin_()                                          # b saved by pow and exp
    c.mul_(10)                                        # c saved by mul
    b[0].zero_()                                      # through a view
    out.backward()
    return a.grad, b


def test_allow_mutation_backward_uses_saved_values(device):
    with gt.autograd.graph.allow_mutation_on_saved_tensors():
        grad, b = _mutation_case(gt, device)
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        tgrad, tb = _mutation_case(torch, "cpu")
    np.testing.assert_allclose(_np(grad), _np(tgrad), rtol=1e-6)
    np.testing.assert_allclose(_np(b), _np(tb), rtol=1e-6)


def test_mutation_without_context_still_errors(device):
    a = gt.ones(3, device=device, requires_grad=True)
    b = a.clone()
    out = (b ** 2).sum()
    b.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_allow_mutation_saved_output_and_double_backward(device):
    for lib, dev in ((gt, device), (torch, "cpu")):
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            a = lib.tensor([0.5, -1.0, 2.0], device=dev, dtype=lib.float64, requires_grad=True)
            y = a.exp()                               # exp saves its output
            z = (y * a).sum()
            y.mul_(0)
            (g,) = lib.autograd.grad(z, a, create_graph=True)
            (gg,) = lib.autograd.grad(g.sum(), a)
        if lib is gt:
            got = (_np(g), _np(gg))
        else:
            np.testing.assert_allclose(got[0], _np(g), rtol=1e-12)
            np.testing.assert_allclose(got[1], _np(gg), rtol=1e-12)


def test_allow_mutation_errors(device):
    for lib in (gt, torch):
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            with pytest.raises(RuntimeError, match="contexts cannot be nested"):
                with lib.autograd.graph.allow_mutation_on_saved_tensors():
                    pass
    expected = None
    for lib, dev in ((torch, "cpu"), (gt, device)):
        with lib.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
            a = lib.ones(3, device=dev, requires_grad=True)
            out = (a.clone() ** 2).sum()
        assert ctx is not None
        with pytest.raises(AssertionError) as err:
            out.backward()
        if expected is None:
            expected = str(err.value)
        else:
            assert str(err.value) == expected


def test_allow_mutation_leaves_originals_alone(device):
    # The same tensor saved twice at one version is copied once; the caller's tensor is not
    # touched by the context.
    with gt.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
        a = gt.ones(4, device=device, requires_grad=True)
        b = a * 3
        out = (b * b).sum()
        assert len(ctx.by_tensor) == 1
        b.add_(1)
        assert b.tolist() == [4.0] * 4
        out.backward()
    assert a.grad.tolist() == [18.0] * 4


# -- stream switches and region_activation_memory_budget ------------------------------------
def test_stream_switches():
    from gputensor.autograd import graph_extras as ext
    try:
        for value in (False, True):
            assert gt_graph.set_warn_on_accumulate_grad_stream_mismatch(value) is None
            assert ext.warn_on_accumulate_grad_stream_mismatch() is value
            assert gt_graph.set_override_stale_capture_stream(value) is None
            assert ext.override_stale_capture_stream() is value
        for setter, tsetter in (
                (gt_graph.set_warn_on_accumulate_grad_stream_mismatch,
                 torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch),
                (gt_graph.set_override_stale_capture_stream,
                 torch.autograd.graph.set_override_stale_capture_stream)):
            for bad in (1, "x"):
                with pytest.raises(RuntimeError) as expected:
                    tsetter(bad)
                with pytest.raises(RuntimeError) as got:
                    setter(bad)
                assert str(got.value) == str(expected.value)
    finally:
        gt_graph.set_warn_on_accumulate_grad_stream_mismatch(True)
        gt_graph.set_override_stale_capture_stream(False)


@pytest.mark.parametrize("budget", [0.5, True, 2, -0.1, "0.5"])
def test_region_budget_eager_errors(budget):
    with pytest.raises(Exception) as expected:
        torch.autograd.graph.region_activation_memory_budget(budget)
    with pytest.raises(Exception) as got:
        gt_graph.region_activation_memory_budget(budget)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_region_budget_inside_compile(device):
    from gputensor.autograd.graph_extras import current_activation_memory_budget
    seen = []

    def f(x):
        with gt_graph.region_activation_memory_budget(0.25):
            seen.append(current_activation_memory_budget())
            y = (x * 2).sin()
        seen.append(current_activation_memory_budget())
        return y

    x = gt.linspace(0, 1, 5, device=device)
    out = gt.compile(f)(x)
    np.testing.assert_allclose(_np(out), np.sin(2 * np.linspace(0, 1, 5)), rtol=1e-6)
    assert seen[:2] == [0.25, None]


# -- set_multithreading_enabled -------------------------------------------------------------
def _multithreading_trace(lib):
    a = lib.autograd
    trace = [a.is_multithreading_enabled()]
    a.set_multithreading_enabled(False)
    trace.append(a.is_multithreading_enabled())
    a.set_multithreading_enabled(True)
    with a.set_multithreading_enabled(False):
        other = []
        t = threading.Thread(target=lambda: other.append(a.is_multithreading_enabled()))
        t.start()
        t.join()
        trace += [a.is_multithreading_enabled(), other[0]]
    trace.append(a.is_multithreading_enabled())

    @a.set_multithreading_enabled(False)
    def inside():
        return a.is_multithreading_enabled()
    trace += [a.is_multithreading_enabled(), inside()]
    a.set_multithreading_enabled(True)
    with pytest.raises(TypeError) as err:
        a.set_multithreading_enabled("no")
    trace.append(str(err.value))
    return trace


def test_set_multithreading_enabled_matches_torch(device):
    assert _multithreading_trace(gt) == _multithreading_trace(torch)
    # backward runs (on this thread) either way
    x = gt.ones(3, device=device, requires_grad=True)
    with gt.autograd.set_multithreading_enabled(False):
        (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0] * 3


# -- enforce_grad_layout_policy -------------------------------------------------------------
LAYOUT_CASES = [
    # (param factory, loss): the first accumulated gradient's layout
    ("contiguous-param-transposed-grad", lambda m, d: m.zeros(2, 3, device=d),
     lambda m, p: (p.t() * p.new_ones(3, 2)).sum()),
    ("permuted-param", lambda m, d: m.zeros(4, 2, 3, device=d).permute(2, 0, 1),
     lambda m, p: (p * 2).sum()),
    ("permuted-param-contiguous-grad", lambda m, d: m.zeros(4, 2, 3, device=d).permute(2, 0, 1),
     lambda m, p: (p.contiguous() * p.new_ones(3, 4, 2)).sum()),
    ("not-dense-param", lambda m, d: m.zeros(6, device=d)[::2],
     lambda m, p: (p * p.new_ones(3)).sum()),
    ("size-one-dim", lambda m, d: m.zeros(3, 1, 2, device=d).permute(2, 1, 0),
     lambda m, p: (p * 3).sum()),
]


@pytest.mark.parametrize("name,make,loss", LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_accumulated_grad_obeys_layout_contract(device, name, make, loss):
    p = make(gt, device).requires_grad_()
    tp = make(torch, "cpu").requires_grad_()
    assert p.stride() == tp.stride()
    loss(gt, p).backward()
    loss(torch, tp).backward()
    assert p.grad.stride() == tp.grad.stride()
    np.testing.assert_allclose(_np(p.grad), _np(tp.grad))
    # create_graph: the new .grad is a copy in the contract's layout, part of the graph
    q = make(gt, device).requires_grad_()
    tq = make(torch, "cpu").requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss(gt, q * 1).backward(create_graph=True, inputs=[q])
        loss(torch, tq * 1).backward(create_graph=True, inputs=[tq])
    assert q.grad.stride() == tq.grad.stride()


def test_relaxed_policy_keeps_stealable_gradient(device):
    # A stealable gradient that breaks the contract is kept as it comes when relaxed.
    def run(lib, enforce, dev):
        p = lib.zeros(4, 2, 3, device=dev).permute(2, 0, 1).requires_grad_()
        with lib.autograd.enforce_grad_layout_policy(enforce):
            (p * 2).sum().backward()
        return p.grad.stride()
    for enforce in (True, False):
        assert run(gt, enforce, device) == run(torch, enforce, "cpu")
    assert run(gt, False, device) != run(gt, True, device)


def test_layout_warning_on_accumulation(device):
    # PyTorch warns once per process at each accumulation site when the accumulated .grad
    # breaks the contract, unless relaxed (here the in-place site).
    from gputensor.autograd import engine_modes
    expected = ("grad and param do not obey the gradient layout contract. This is not an "
                "error, but may impair performance.\ngrad.sizes() = [2, 3], strides() = [1, 2]"
                "\nparam.sizes() = [2, 3], strides() = [3, 1]")

    def run(enforce):
        p = gt.zeros(2, 3, device=device, requires_grad=True)
        p.grad = gt.zeros(3, 2, device=device).t()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with gt.autograd.enforce_grad_layout_policy(enforce):
                (p * 2).sum().backward()
        assert p.grad.stride() == (1, 2)   # accumulation keeps the existing .grad's layout
        return [str(w.message) for w in caught if "layout contract" in str(w.message)]

    engine_modes._warned.clear()
    try:
        assert run(False) == []
        assert run(True) == [expected]
        assert run(True) == []
    finally:
        engine_modes._warned.clear()


def _layout_policy_trace(lib):
    a = lib.autograd
    state = (lambda: gt.autograd.engine_modes.is_grad_layout_enforcement_enabled()) \
        if lib is gt else torch._C._is_grad_layout_enforcement_enabled
    trace = [state()]
    a.enforce_grad_layout_policy(False)
    trace.append(state())
    a.enforce_grad_layout_policy(True)

    @a.enforce_grad_layout_policy(False)
    def inside():
        return state()
    trace += [state(), inside(), state()]
    with a.enforce_grad_layout_policy(False):
        other = []
        t = threading.Thread(target=lambda: other.append(state()))
        t.start()
        t.join()
        trace += [state(), other[0]]
    trace.append(state())
    with pytest.raises(TypeError) as err:
        a.enforce_grad_layout_policy(1)
    trace.append(str(err.value))
    return trace


def test_enforce_grad_layout_policy_state_matches_torch():
    assert _layout_policy_trace(gt) == _layout_policy_trace(torch)


# -- NestedIOFunction -----------------------------------------------------------------------
class _Nested(gt.autograd.NestedIOFunction):
    """out = (2a, [y*z]), with z's gradient on a nested list and a non-differentiable mask."""

    def forward_extended(self, a, pair):
        y, z = pair
        self.save_for_backward(a, [y, (z,)])
        mask = a > 0
        self.mark_non_differentiable(mask)
        return a * 2, [y * z, mask]

    def backward_extended(self, ga, lst):
        g_prod, _ = lst
        a, (y, (z,)) = self.saved_tensors
        assert self.needs_input_grad == (True, True, True)
        return ga * 2, [g_prod * z, g_prod * y]


def test_nested_io_function(device):
    a = gt.tensor([1.0, -2.0], device=device, requires_grad=True)
    y = gt.tensor([2.0, 3.0], device=device, requires_grad=True)
    z = gt.tensor([4.0, 5.0], device=device, requires_grad=True)
    out = _Nested()(a, (y, z))
    doubled, (prod, mask) = out
    assert isinstance(out, tuple) and isinstance(out[1], list)
    assert doubled.grad_fn.name() == "_NestedBackward"
    assert not mask.requires_grad and mask.tolist() == [True, False]
    (doubled * gt.tensor([1.0, 10.0], device=device)).sum().add(prod.sum()).backward()
    assert a.grad.tolist() == [2.0, 20.0]
    assert y.grad.tolist() == [4.0, 5.0]
    assert z.grad.tolist() == [2.0, 3.0]


def test_nested_io_function_gradcheck(device):
    def f(a, y, z):
        doubled, (prod, _) = _Nested()(a, [y, z])
        return doubled, prod
    args = [gt.randn(3, dtype=gt.float64, device=device, requires_grad=True) for _ in range(3)]
    assert gt.autograd.gradcheck(f, args)


def test_nested_io_function_errors(device):
    class Bad(gt.autograd.NestedIOFunction):
        def forward_extended(self, a):
            return a * 1

        def backward_extended(self, g):
            return "nope"

    with pytest.raises(ValueError, match="Auto nesting doesn't know how to process an input "
                                         "object of type str"):
        Bad()(gt.ones(2, device=device), "text")
    out = Bad()(gt.ones(2, device=device, requires_grad=True))
    with pytest.raises(ValueError, match="Accepted types: Tensors or None"):
        out.sum().backward()
    with pytest.raises(NotImplementedError):
        gt.autograd.NestedIOFunction().forward_extended(gt.ones(1))

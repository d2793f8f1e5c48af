"""Selective activation checkpointing (create_selective_checkpoint_contexts, CheckpointPolicy)
and the aten op objects it sees (gt.ops.aten), compared with torch.utils.checkpoint."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp
from torch.utils._python_dispatch import TorchDispatchMode

import gputensor as gt
import gputensor.utils.checkpoint as gcp
from gputensor._op_hook import OP_HOOK
from gputensor.kernels.registry import BACKENDS, clear_kernel_caches
from tests.helpers import assert_close

PRODUCTS = ("mm", "bmm", "addmm")


def _save(m, names=PRODUCTS):
    """A policy (for ``m``: gt or torch) saving the listed ops, recomputing the rest."""
    ops = [getattr(m.ops.aten, n).default for n in names]

    def policy_fn(ctx, op, *args, **kwargs):
        return m.utils.checkpoint.CheckpointPolicy.MUST_SAVE if op in ops \
            else m.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE
    return policy_fn


def _context_fn(m, policy):
    return functools.partial(m.utils.checkpoint.create_selective_checkpoint_contexts, policy)


@contextlib.contextmanager
def _count_kernels(device: str, *names: str) -> Iterator[dict[str, int]]:
    """Counts the calls of backend kernels ``names`` on ``device`` (each product is one
    ``_gemm`` call)."""
    backend = BACKENDS[gt.device(device).type, "strided"]
    counts = dict.fromkeys(names, 0)
    saved = {}
    for name in names:
        k = backend.kernel(name)
        saved[name] = backend.kernels[name]

        def counted(*args, _k=k, _name=name, **kwargs):
            counts[_name] += 1
            return _k(*args, **kwargs)
        backend.kernels[name] = counted
    clear_kernel_caches()
    try:
        yield counts
    finally:
        backend.kernels.update(saved)
        clear_kernel_caches()


class _TorchCount(TorchDispatchMode):
    """Counts the aten ops of ``names`` that run under it."""

    def __init__(self, names):
        super().__init__()
        self.names = names
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func.overloadpacket.__name__ in self.names
        return func(*args, **(kwargs or {}))


# -- the models -----------------------------------------------------------------------------
def _params(m, device, shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [m.tensor(rng.standard_normal(s) / math.sqrt(s[0]), dtype=m.float32, device=device,
                     requires_grad=True) for s in shapes]


MLP_SHAPES = [(4, 6), (6, 8), (8, 5)]


def _mlp(m, x, w1, w2):
    return m.relu(m.mm(m.relu(m.mm(x, w1)), w2)).sin()


D = 8
BLOCK_SHAPES = [(2, 5, D), (D, D), (D, D), (D, D), (D, D), (D, 16), (16,), (16, D), (D,),
                (D,), (D,)]


def _block(m, x, wq, wk, wv, wo, w1, b1, w2, b2, lnw, lnb, p=0.0):
    """A transformer block: layer norm, attention (matmul/softmax), an MLP of linears."""
    F = m.nn.functional
    h = F.layer_norm(x, (D,), lnw, lnb)
    q, k, v = h @ wq, h @ wk, h @ wv
    att = m.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    x = x + (att @ v) @ wo
    y = F.linear(F.gelu(F.linear(x, w1.t(), b1)), w2.t(), b2)
    return x + F.dropout(y, p)


def _run(m, device, fn, shapes, context_fn=None, checkpointed=True, **kw):
    """Forward (checkpointed with ``context_fn`` when given) and backward of ``fn``; the
    output, the gradients and the counts of product ops in forward and in backward."""
    params = _params(m, device, shapes)
    count_fwd = _count_kernels(device, "_gemm") if m is gt else _TorchCount(PRODUCTS)
    with count_fwd as fwd:
        if not checkpointed:
            out = fn(m, *params, **kw)
        elif context_fn is None:
            out = m.utils.checkpoint.checkpoint(functools.partial(fn, m, **kw), *params,
                                                use_reentrant=False)
        else:
            out = m.utils.checkpoint.checkpoint(functools.partial(fn, m, **kw), *params,
                                                use_reentrant=False, context_fn=context_fn)
    count_bwd = _count_kernels(device, "_gemm") if m is gt else _TorchCount(PRODUCTS)
    with count_bwd as bwd:
        (out * out).sum().backward()
    n_fwd, n_bwd = (fwd["_gemm"], bwd["_gemm"]) if m is gt else (fwd.count, bwd.count)
    return out.detach(), [p.grad for p in params], n_fwd, n_bwd


@pytest.mark.parametrize("model", ["mlp", "block"])
def test_saved_products_are_not_recomputed(device, model):
    """Saving mm/bmm/addmm: the backward runs as many products as without checkpointing
    (none recomputed); plain checkpointing reruns every forward product. Gradients equal the
    uncheckpointed run and torch's, and the counts torch's."""
    fn, shapes = (_mlp, MLP_SHAPES) if model == "mlp" else (_block, BLOCK_SHAPES)
    runs = {}
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        runs[m] = {"none": _run(m, dev, fn, shapes, checkpointed=False),
                   "plain": _run(m, dev, fn, shapes),
                   "sac": _run(m, dev, fn, shapes, _context_fn(m, _save(m))),
                   "list": _run(m, dev, fn, shapes, _context_fn(m, [
                       getattr(m.ops.aten, n).default for n in PRODUCTS]))}
    for m in (gt, torch):
        base_out, base_grads, n_fwd, n_bwd = runs[m]["none"]
        assert n_fwd > 0
        for kind in ("plain", "sac", "list"):
            out, grads, fwd, bwd = runs[m][kind]
            assert fwd == n_fwd
            if kind != "plain":
                assert bwd == n_bwd, (m.__name__, kind)
            elif m is gt or model == "mlp":   # torch's early stop skips its block's last addmm
                assert bwd == n_bwd + n_fwd, (m.__name__, kind)
            assert_close(out, base_out)
            for g, e in zip(grads, base_grads, strict=True):
                assert_close(g, e)
    for kind in runs[gt]:
        out, grads, _, _ = runs[gt][kind]
        t_out, t_grads, _, _ = runs[torch][kind]
        assert_close(out, t_out, atol=1e-5, rtol=1e-4)
        for g, e in zip(grads, t_grads, strict=True):
            assert_close(g, e, atol=1e-5, rtol=1e-4)
    if model == "mlp":   # the same ops: the same counts as torch
        assert [runs[gt][k][2:] for k in runs[gt]] == [runs[torch][k][2:] for k in runs[torch]]


def _seen_ops(m, device, fn, shapes, **kw):
    """The ops a policy sees in the forward of ``fn`` (and whether it is asked again)."""
    seen = []

    def policy_fn(ctx, op, *args, **kwargs):
        seen.append((str(op), ctx.is_recompute))
        assert ctx.op_output is not None
        return m.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE
    params = _params(m, device, shapes)
    out = m.utils.checkpoint.checkpoint(functools.partial(fn, m, **kw), *params,
                                        use_reentrant=False,
                                        context_fn=_context_fn(m, policy_fn))
    n_forward = len(seen)
    out.sum().backward()
    assert len(seen) == n_forward   # the policy is only asked in the forward
    assert not any(recompute for _, recompute in seen)
    return [name for name, _ in seen]


def test_policy_sees_the_ops_torch_sees(device):
    """The ops a policy sees are torch's (the view bookkeeping around torch's decomposed
    products, which gputensor does not do, left out)."""
    views = {"aten.view.default", "aten.t.default", "aten._unsafe_view.default",
             "aten.expand.default", "aten.transpose.int", "aten.detach.default"}
    ours = _seen_ops(gt, device, _block, BLOCK_SHAPES)
    theirs = [n for n in _seen_ops(torch, "cpu", _block, BLOCK_SHAPES) if n not in views]
    assert [n for n in ours if n not in views] == theirs
    assert _seen_ops(gt, device, _mlp, MLP_SHAPES) == _seen_ops(torch, "cpu", _mlp, MLP_SHAPES)
    ours = _seen_ops(gt, device, _cnn, CNN_SHAPES)
    theirs = [n for n in _seen_ops(torch, "cpu", _cnn, CNN_SHAPES) if n not in views]
    assert [n for n in ours if n not in views] == theirs


CNN_SHAPES = [(2, 3, 6, 6), (4, 3, 3, 3), (4,), (16, 10)]


def _cnn(m, x, w, b, fc):
    F = m.nn.functional
    h = F.relu(F.conv2d(x, w, b, padding=1))
    return F.linear(F.gelu(F.avg_pool2d(h, 3).flatten(1)), fc.t())


def test_policy_output_and_bool_policy(device):
    """``ctx.op_output`` is the op's result; a policy returning True saves (False recomputes)."""
    x = gt.randn(3, 3, device=device, requires_grad=True)
    outputs = []

    def policy_fn(ctx, op, *args, **kwargs):
        outputs.append(ctx.op_output)
        return op is gt.ops.aten.mm.default

    def fn(x):
        return gt.mm(x, x).exp()
    out = gcp.checkpoint(fn, x, use_reentrant=False, context_fn=_context_fn(gt, policy_fn))
    assert outputs[-1] is out
    assert_close(outputs[0], (x @ x).detach())
    with _count_kernels(device, "_gemm") as n:
        out.sum().backward()
    assert n["_gemm"] == 2   # mm's two gradients; the forward mm is not rerun


def test_random_ops_stay_consistent(device):
    """Dropout in a region that saves the products (and in one that saves dropout's op):
    gradients equal the uncheckpointed run with the same seed."""
    results = []
    for context_fn in (None, _context_fn(gt, _save(gt)),
                       _context_fn(gt, _save(gt, ("native_dropout", "mm"))),
                       _context_fn(gt, _save(gt, ()))):
        gt.manual_seed(3)
        if device != "cpu":
            gt.cuda.manual_seed(3)
        out, grads, _, _ = _run(gt, device, _block, BLOCK_SHAPES, context_fn,
                                checkpointed=context_fn is not None, p=0.5)
        results.append((out, grads))
    for out, grads in results[1:]:
        assert_close(out, results[0][0])
        for g, e in zip(grads, results[0][1], strict=True):
            assert_close(g, e)


# -- errors, as torch -----------------------------------------------------------------------
def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


def test_list_form_errors_match_torch():
    for m in (gt, torch):
        with pytest.raises(ValueError, match="Expected op in `op_list` to be an OpOverload but "
                           "got: aten.mm of type .*OpOverloadPacket'>. Please update the "
                           "OpOverloadPacket to a specific OpOverload.For example, if you have "
                           "`torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`."):
            m.utils.checkpoint.create_selective_checkpoint_contexts([m.ops.aten.mm])
        with pytest.raises(ValueError, match=r"^Expected op in `op_list` to be an OpOverload "
                           r"but got: 3 of type <class 'int'>. $"):
            m.utils.checkpoint.create_selective_checkpoint_contexts([3])
    assert _error(lambda: gcp.create_selective_checkpoint_contexts(3)) == \
        _error(lambda: tcp.create_selective_checkpoint_contexts(3))


def test_sac_needs_the_non_reentrant_variant():
    x = [m.ones(2, requires_grad=True) for m in (gt, torch)]
    assert _error(lambda: gcp.checkpoint(gt.sin, x[0], use_reentrant=True,
                                         context_fn=_context_fn(gt, _save(gt)))) == \
        _error(lambda: tcp.checkpoint(torch.sin, x[1], use_reentrant=True,
                                      context_fn=_context_fn(torch, _save(torch))))


def _mutating(m):
    def fn(x):
        y = m.mm(x, x)
        y.mul_(2)   # changes the cached output after it was cached
        return y.sin()
    return fn


@pytest.mark.parametrize("allow", [False, True])
def test_mutated_cache_entry(device, allow):
    errors, grads = [], []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        x = m.tensor([[0.5, -1.0], [2.0, 0.25]], device=dev, requires_grad=True)
        context_fn = functools.partial(m.utils.checkpoint.create_selective_checkpoint_contexts,
                                       [m.ops.aten.mm.default], allow_cache_entry_mutation=allow)
        out = m.utils.checkpoint.checkpoint(_mutating(m), x, use_reentrant=False,
                                            context_fn=context_fn)
        if allow:   # the mutated value is cached: mm's output is doubled twice
            out.sum().backward()
            grads.append(x.grad)
        else:
            errors.append(_error(lambda out=out: out.sum().backward()))
    if allow:
        assert_close(grads[0], grads[1])
    else:
        assert errors[0] == errors[1] == (
            RuntimeError, "Tensor cached during selective activation checkpoint has been "
                          "mutated")


def test_second_backward_raises_as_torch(device):
    errors = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        x = m.tensor([[0.5, -1.0], [2.0, 0.25]], device=dev, requires_grad=True)
        out = m.utils.checkpoint.checkpoint(lambda x, m=m: m.mm(x, x).sin(), x,
                                            use_reentrant=False,
                                            context_fn=_context_fn(m, _save(m)))
        out.sum().backward(retain_graph=True)
        errors.append(_error(lambda out=out: out.sum().backward()))
    assert errors[0] == errors[1]
    assert errors[0][1].startswith("Trying to backward an extra time.")


@pytest.mark.parametrize("change", ["unseen_op", "extra_call"])
def test_recomputation_that_differs_raises_as_torch(device, change):
    """A recomputation that calls an op the forward did not (or once more) raises."""
    errors = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        state = {"recompute": False}

        def fn(x, m=m, state=state):
            if state["recompute"]:
                x = m.cos(x) if change == "unseen_op" else m.mm(x, x) * 0 + x
            return m.mm(x, x).sin()
        x = m.tensor([[0.5, -1.0], [2.0, 0.25]], device=dev, requires_grad=True)
        out = m.utils.checkpoint.checkpoint(fn, x, use_reentrant=False,
                                            context_fn=_context_fn(m, _save(m)),
                                            determinism_check="none")
        state["recompute"] = True
        errors.append(_error(lambda out=out: out.sum().backward()))
    assert errors[0] == errors[1]
    assert "not found in storage" in errors[0][1]


def test_hook_is_off_outside_the_contexts(device):
    """The op hook is active only inside the SAC contexts, also after a failing forward."""
    x = gt.ones(2, 2, device=device, requires_grad=True)
    out = gcp.checkpoint(lambda x: gt.mm(x, x), x, use_reentrant=False,
                         context_fn=_context_fn(gt, _save(gt)))
    assert OP_HOOK.active == 0
    out.sum().backward()
    assert OP_HOOK.active == 0

    def failing(x):
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        gcp.checkpoint(failing, x, use_reentrant=False, context_fn=_context_fn(gt, _save(gt)))
    assert OP_HOOK.active == 0


def test_custom_op_is_seen_and_saved(device):
    """A custom op reaches the policy as itself (its own ``.default``); saved, its
    implementation runs once, recomputed twice."""
    calls = []

    @gt.library.custom_op("sac_test::twice", mutates_args=())
    def twice(x: gt.Tensor) -> gt.Tensor:
        calls.append(1)
        return x * 2

    twice.register_autograd(lambda ctx, g: g * 2)
    try:
        for saved, expected in (([twice.default], 1), ([], 2)):
            calls.clear()
            x = gt.ones(3, device=device, requires_grad=True)
            out = gcp.checkpoint(lambda x: twice(x).sin(), x, use_reentrant=False,
                                 context_fn=_context_fn(gt, saved))
            out.sum().backward()
            assert len(calls) == expected
            assert_close(x.grad, (2 * gt.ones(3, device=device)).cos() * 2)
    finally:
        twice._destroy()


# -- gt.ops.aten ----------------------------------------------------------------------------
def test_aten_objects_are_torch_shaped():
    for m in (gt, torch):
        a = m.ops.aten
        assert a.mm.default is a.mm.default and a.mm.default in [a.mm.default]
        assert (a.mm.default.name(), a.add.Tensor.name()) == ("aten::mm", "aten::add.Tensor")
        assert (a.mm.default.__name__, a.mm.__name__) == ("mm.default", "mm")
        assert a.mm.default.overloadpacket is a.mm
        assert (str(a.mm.default), str(a.mm)) == ("aten.mm.default", "aten.mm")
        assert a.mm.default._overloadname == "default"
    assert repr(gt.ops.aten.mm.default) == repr(torch.ops.aten.mm.default)
    assert repr(gt.ops.aten.mm) == repr(torch.ops.aten.mm)
    for name in ("add", "sum", "softmax", "transpose", "pow", "where", "eq"):
        ours = getattr(gt.ops.aten, name).overloads()
        assert set(ours) <= set(getattr(torch.ops.aten, name).overloads()), name
    assert _error(lambda: gt.ops.aten.transpose.default) == \
        _error(lambda: torch.ops.aten.transpose.default)
    assert _error(lambda: gt.ops.aten.no_such_op) == _error(lambda: torch.ops.aten.no_such_op)
    assert gcp.SAC_IGNORED_OPS >= {gt.ops.aten.detach.default}


def test_aten_ops_compute_as_torch(device):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    x4, w4 = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    res = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"

        def t(v, m=m, dev=dev):
            return m.tensor(v, dtype=m.float32, device=dev)
        A = m.ops.aten
        res.append([
            A.mm.default(t(a), t(b)), A.addmm.default(t(b[0]), t(a), t(b)),
            A.add.Tensor(t(a), t(a)), A.mul.Scalar(t(a), 3), A.relu.default(t(a)),
            A.gelu.default(t(a)), A._softmax.default(t(a), 1, False),
            A._log_softmax.default(t(a), 0, False), A.sum.dim_IntList(t(a), [1]),
            *A.native_layer_norm.default(t(a), [4], t(b[:, 0]), t(b[:, 1]), 1e-5),
            A.convolution.default(t(x4), t(w4), None, [1, 1], [1, 1], [1, 1], False,
                                  [0, 0], 1),
            A.convolution.default(t(x4), t(w4).transpose(0, 1), None, [2, 2], [0, 0],
                                  [1, 1], True, [1, 1], 1),
            A.slice.Tensor(t(a), 1, 1, 3), A.index.Tensor(t(a), [None, t([0, 2]).long()]),
            A.select.int(t(a), 0, 1), A.transpose.int(t(a), 0, 1),
            A.embedding.default(t(b), t([[0, 3], [1, 1]]).long()),
            A.layer_norm.default(t(a), [4]), A.dropout.default(t(a), 0.5, False)])
    for ours, theirs in zip(res[0], res[1], strict=True):
        assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_native_dropout(device):
    x = gt.ones(200, device=device)
    out, mask = gt.ops.aten.native_dropout.default(x, 0.25, True)
    assert mask.dtype == gt.bool
    assert_close(out, mask.float() / 0.75)
    assert 0.5 < mask.float().mean().item() < 0.95
    out, mask = gt.ops.aten.native_dropout.default(x, 0.25, False)
    assert_close(out, x)
    assert bool(mask.all())


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)),
                                    ((2, 3), (3, 2)), ((4, 2, 3), (3, 2)), ((4, 2, 3), (3,)),
                                    ((4, 2, 3), (4, 3, 2)), ((2, 3), (4, 3, 2))])
def test_matmul_reports_torch_products(device, shapes):
    """matmul reports the product torch decomposes it into (operands that need grad)."""
    names = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        ops = []

        def policy_fn(ctx, op, *args, ops=ops, **kwargs):
            ops.append(str(op))
            return False
        a, b = (m.ones(s, device=dev, requires_grad=True) for s in shapes)
        m.utils.checkpoint.checkpoint(m.matmul, a, b, use_reentrant=False,
                                      context_fn=_context_fn(m, policy_fn))
        names.append([n for n in ops if n.split(".")[1] in ("dot", "mv", "mm", "bmm")])
    assert names[0] == names[1]


def test_nested_selective_checkpoints_match_torch(device):
    grads = []
    for m in (gt, torch):
        cp = m.utils.checkpoint
        dev = device if m is gt else "cpu"
        x = m.tensor([[0.5, -1.0], [2.0, 0.25]], device=dev, requires_grad=True)

        def inner(y, m=m):
            return m.mm(y, y).sin()

        def outer(x, m=m, cp=cp):
            z = cp.checkpoint(inner, m.mm(x, x).cos(), use_reentrant=False,
                              context_fn=_context_fn(m, [m.ops.aten.mm.default]))
            return m.mm(z, x)
        out = cp.checkpoint(outer, x, use_reentrant=False, context_fn=_context_fn(m, _save(m)))
        out.sum().backward()
        grads.append(x.grad)
    assert_close(grads[0], grads[1])


def test_other_threads_ops_are_not_seen(device):
    """The handlers are the thread's: ops another thread runs meanwhile reach no policy."""
    seen = []

    def policy_fn(ctx, op, *args, **kwargs):
        seen.append(str(op))
        return False

    def fn(x):
        worker = threading.Thread(target=lambda: gt.exp(x.detach()))
        worker.start()
        worker.join()
        return gt.sin(x)
    x = gt.ones(3, device=device, requires_grad=True)
    gcp.checkpoint(fn, x, use_reentrant=False, context_fn=_context_fn(gt, policy_fn))
    assert seen == ["aten.sin.default"]


@pytest.mark.parametrize("saved", [("mm",), ("mm", "relu"), ()])
def test_unsaved_ops_are_recomputed(device, saved):
    """In backward, relu's kernel runs again unless relu is saved; mm's unless mm is."""
    params = _params(gt, device, MLP_SHAPES)
    out = gcp.checkpoint(functools.partial(_mlp, gt), *params, use_reentrant=False,
                         context_fn=_context_fn(gt, _save(gt, saved)))
    with _count_kernels(device, "relu", "_gemm") as n:
        out.sum().backward()
    assert n["relu"] == (0 if "relu" in saved else 2)
    assert n["_gemm"] == 4 + (0 if "mm" in saved else 2)   # 2 gradients per mm


def test_gradcheck_reuses_the_graph_and_raises_as_torch(device):
    """gradcheck backpropagates through one forward several times: SAC refuses, as torch."""
    errors = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        rng = np.random.default_rng(0)
        x, w = (m.tensor(rng.standard_normal(s), dtype=m.float64, device=dev,
                         requires_grad=True) for s in ((3, 4), (4, 4)))

        def f(x, w, m=m):
            return m.utils.checkpoint.checkpoint(
                lambda x, w: m.mm(m.tanh(m.mm(x, w)), w).sin(), x, w, use_reentrant=False,
                context_fn=_context_fn(m, [m.ops.aten.mm.default]))
        errors.append(_error(lambda f=f, x=x, w=w, m=m: m.autograd.gradcheck(f, (x, w))))
    assert errors[0] == errors[1]
    assert errors[0][1].startswith("Trying to backward an extra time.")

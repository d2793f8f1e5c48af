"""gt.utils.checkpoint (checkpoint, checkpoint_sequential), compared with torch.utils.checkpoint."""

from __future__ import annotations

import contextlib
import re
import warnings
import weakref

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp

import gputensor as gt
import gputensor.utils.checkpoint as gcp
from tests.helpers import assert_close


def _mlp(m, device, width=6, depth=3, seed=0, dropout=0.0):
    """The same MLP in gputensor and torch (weights from one NumPy stream)."""
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(depth):
        lin = m.nn.Linear(width, width).to(device)
        with m.no_grad():
            lin.weight.copy_(m.tensor(rng.standard_normal((width, width)) / 3, device=device))
            lin.bias.copy_(m.tensor(rng.standard_normal(width) / 3, device=device))
        layers += [lin, m.nn.Tanh()] + ([m.nn.Dropout(dropout)] if dropout else [])
    return m.nn.Sequential(*layers)


def _grads(model, x):
    return [x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_matches_torch(device, use_reentrant):
    res = []
    for m, cp in ((gt, gcp), (torch, tcp)):
        dev = device if m is gt else "cpu"
        model = _mlp(m, dev)
        data = np.random.default_rng(1).standard_normal((4, 6))
        x = m.tensor(data, dtype=m.float32, device=dev, requires_grad=True)
        y = cp.checkpoint(model, x, use_reentrant=use_reentrant)
        (y * y).sum().backward()
        res.append((y.detach(), _grads(model, x)))
    assert_close(res[0][0], res[1][0])
    for g, t in zip(res[0][1], res[1][1], strict=True):
        assert_close(g, t)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_dropout_recomputed_with_the_same_random_state(device, use_reentrant):
    """Gradients equal those of the run without checkpoint (the dropout masks of the
    recomputation are the forward's: CPU and CUDA generators replayed); the surrounding
    random state is left as it was."""
    model = _mlp(gt, device, width=32, dropout=0.5)
    x = gt.randn(8, 32, device=device, requires_grad=True)
    gt.manual_seed(7)
    ref = model(x)
    ref.sum().backward()
    expected = [g.clone() for g in _grads(model, x)]
    model.zero_grad()
    x.grad = None
    gt.manual_seed(7)
    y = gcp.checkpoint(model, x, use_reentrant=use_reentrant)
    assert_close(y, ref)
    states = (gt.get_rng_state(), gt.cuda.get_rng_state(device) if device != "cpu" else None)
    y.sum().backward()
    assert gt.equal(gt.get_rng_state(), states[0])
    if device != "cpu":
        assert gt.equal(gt.cuda.get_rng_state(device), states[1])
    for g, e in zip(_grads(model, x), expected, strict=True):
        assert_close(g, e)


def test_without_preserved_rng_state_masks_differ(device):
    """preserve_rng_state=False recomputes with fresh masks: gradients differ from the
    forward's (what the default preserve_rng_state=True prevents)."""
    model = _mlp(gt, device, width=32, dropout=0.5)
    x = gt.randn(8, 32, device=device, requires_grad=True)
    gt.manual_seed(7)
    model(x).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    gt.manual_seed(7)
    gcp.checkpoint(model, x, use_reentrant=False, preserve_rng_state=False).sum().backward()
    assert not gt.allclose(x.grad, expected)


def _live_activation_storages(model, x, run):
    """How many layer outputs' storages are still alive after the forward."""
    refs = []
    handles = [mod.register_forward_hook(
        lambda mod, inp, out: refs.append(weakref.ref(out._storage))) for mod in model]
    y = run(model, x)
    for h in handles:
        h.remove()
    return y, sum(r() is not None for r in refs)


def test_peak_memory_falls_for_a_deep_mlp(device):
    """24 Linear+Tanh layers of 256x256 on a 512-row batch: checkpointing 6 segments keeps
    only the segment boundaries (and the last segment) alive, and the peak of forward +
    backward falls, measured with max_memory_allocated on the emulated CUDA device and by
    the live activations on both devices; gradients are unchanged."""
    layers = []
    for _ in range(24):
        layers += [gt.nn.Linear(256, 256), gt.nn.Tanh()]
    model = gt.nn.Sequential(*layers).to(device)
    x = gt.randn(512, 256, device=device, requires_grad=True)

    def plain(model, x):
        return model(x)

    def ckpt(model, x):
        return gcp.checkpoint_sequential(model, 6, x, use_reentrant=False)

    results = {}
    for name, run in (("plain", plain), ("ckpt", ckpt)):
        model.zero_grad()
        x.grad = None
        if device != "cpu":
            gt.cuda.synchronize(device)
            base = gt.cuda.memory_allocated(device)
            gt.cuda.reset_peak_memory_stats(device)
        y, live = _live_activation_storages(model, x, run)
        held = gt.cuda.memory_allocated(device) - base if device != "cpu" else None
        y.sum().backward()
        peak = gt.cuda.max_memory_allocated(device) - base if device != "cpu" else None
        results[name] = (live, (held, peak), [g.clone() for g in _grads(model, x)])
        del y
    # Tanh saves its output (the next Linear's saved input); Linear outputs die either way
    assert results["plain"][0] == 24
    assert results["ckpt"][0] == 9       # 5 segment boundaries + the last segment's 4 Tanh
    if device != "cpu":
        (held_plain, peak_plain), (held_ckpt, peak_ckpt) = results["plain"][1], results["ckpt"][1]
        assert held_ckpt < 0.5 * held_plain    # after the forward: 9 activations vs 24
        # forward + backward, the 6 MiB of weight gradients included: one segment is
        # recomputed at a time
        assert peak_ckpt < 0.75 * peak_plain
    for g, e in zip(results["ckpt"][2], results["plain"][2], strict=True):
        assert_close(g, e)


def test_checkpoint_sequential_matches_torch(device):
    for reentrant in (False, True):
        res = []
        for m, cp in ((gt, gcp), (torch, tcp)):
            dev = device if m is gt else "cpu"
            model = _mlp(m, dev, depth=5)
            data = np.random.default_rng(2).standard_normal((3, 6))
            x = m.tensor(data, dtype=m.float32, device=dev, requires_grad=True)
            y = cp.checkpoint_sequential(model, 3, x, use_reentrant=reentrant)
            y.pow(2).sum().backward()
            res.append((y.detach(), _grads(model, x)))
        assert_close(res[0][0], res[1][0])
        for g, t in zip(res[0][1], res[1][1], strict=True):
            assert_close(g, t)
    # a list of functions works too
    fns = [lambda t: t * 2, lambda t: t.sin(), lambda t: t + 1, lambda t: t.exp()]
    x = gt.tensor([0.1, 0.2], device=device, requires_grad=True)
    y = gcp.checkpoint_sequential(fns, 2, x, use_reentrant=False)
    assert_close(y, (x * 2).sin().add(1).exp())


def _warning_of(call):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        call()
    msgs = [str(x.message) for x in w if "use_reentrant" in str(x.message)]
    assert len(msgs) == 1
    return msgs[0], w[0].category


def test_use_reentrant_not_passed_warns_as_torch_and_is_reentrant():
    for name in ("checkpoint", "checkpoint_sequential"):
        args = {"checkpoint": lambda cp, m: cp.checkpoint(lambda t: t.sin(), m.ones(2,
                                                          requires_grad=True)),
                "checkpoint_sequential": lambda cp, m: cp.checkpoint_sequential(
                    [lambda t: t.sin(), lambda t: t.cos()], 2, m.ones(2, requires_grad=True))}
        g = _warning_of(lambda a=args[name]: a(gcp, gt))
        expected = _warning_of(lambda a=args[name]: a(tcp, torch))
        assert g == expected
    # the default is the reentrant variant: the output's node is CheckpointFunction's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = gcp.checkpoint(lambda t: t.sin(), gt.ones(2, requires_grad=True))
    assert "CheckpointFunction" in type(y.grad_fn).__name__


def test_argument_errors_match_torch():
    def f(x, *, scale=1.0):
        return x * scale

    for reentrant in (True, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for cp, m in ((gcp, gt), (tcp, torch)):
                with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
                    cp.checkpoint(f, m.ones(2, requires_grad=True), use_reentrant=reentrant,
                                  scale=2.0)
    for cp, m in ((gcp, gt), (tcp, torch)):
        with pytest.raises(ValueError, match=re.escape("Passing `context_fn` or `debug` is only "
                                                       "supported when use_reentrant=False.")):
            cp.checkpoint(f, m.ones(2), use_reentrant=True, debug=True)
        with pytest.raises(ValueError, match=re.escape(
                "determinism_check should be one of ['default', 'none'], but got bad")):
            cp.checkpoint(f, m.ones(2, requires_grad=True), use_reentrant=False,
                          determinism_check="bad")
        with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
            cp.checkpoint_sequential([f], 1, m.ones(2), use_reentrant=False, foo=1)


def test_non_reentrant_kwargs_grad_api_and_non_tensor_args(device):
    """The non-reentrant variant supports keyword arguments, gt.autograd.grad and inputs that
    need no gradient (parameters inside still get theirs), like PyTorch's."""
    res = []
    for m, cp in ((gt, gcp), (torch, tcp)):
        dev = device if m is gt else "cpu"
        lin = _mlp(m, dev, depth=1)[0]
        x = m.tensor(np.linspace(-1, 1, 12).reshape(2, 6), dtype=m.float32, device=dev)

        def f(inp, k, *, scale, lin=lin):
            return lin(inp).sin() * scale * k

        y = cp.checkpoint(f, x, 3, use_reentrant=False, scale=0.5)
        (gw,) = m.autograd.grad(y.sum(), [lin.weight])
        res.append((y.detach(), gw))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1])


def test_reentrant_without_inputs_requiring_grad_warns_as_torch():
    for m, cp in ((gt, gcp), (torch, tcp)):
        lin = m.nn.Linear(3, 3)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True. "
                                             "Gradients will be None"):
            y = cp.checkpoint(lin, m.ones(2, 3), use_reentrant=True)
        assert not y.requires_grad


def test_determinism_check_matches_torch():
    """A recomputation that saves differently-shaped tensors, or a different number of them,
    raises CheckpointError with PyTorch's message; determinism_check="none" skips the shape
    check (the wrong shape then fails later, in backward's formulas)."""
    for m, cp in ((gt, gcp), (torch, tcp)):
        calls = [0]

        def changing(x, calls=calls, m=m):
            calls[0] += 1
            return (x[: 3 - calls[0] + 1] if calls[0] > 1 else x).exp().sum()

        x = m.ones(3, requires_grad=True)
        y = cp.checkpoint(changing, x, use_reentrant=False)
        with pytest.raises(cp.CheckpointError, match=r"Recomputed values for the following "
                           r"tensors have different metadata than during the forward pass\.\n"
                           r"tensor at position 0:\nsaved metadata: \{'shape': "):
            y.backward()
        calls[0] = 0
        y = cp.checkpoint(changing, x, use_reentrant=False, determinism_check="none")
        with pytest.raises(RuntimeError) as info:   # unchecked: the bad shape meets backward
            y.backward()
        assert not isinstance(info.value, cp.CheckpointError)

        def fewer(x, calls=calls):
            calls[0] += 1
            return x.exp().sin().sum() if calls[0] == 1 else x.exp().sum()

        calls[0] = 0
        with cp.set_checkpoint_early_stop(False):
            y = cp.checkpoint(fewer, x, use_reentrant=False)
        with pytest.raises(cp.CheckpointError, match="A different number of tensors was saved "
                           "during the original forward and recomputation.\nNumber of tensors "
                           "saved during forward: 2\nNumber of tensors saved during "
                           "recomputation: 1."):
            y.backward()


def test_early_stop_matches_torch():
    """Recomputation stops after the last saved tensor, unless early stop is disabled."""
    logs = []
    for m, cp in ((gt, gcp), (torch, tcp)):
        for ctx in (contextlib.nullcontext(), cp.set_checkpoint_early_stop(False)):
            log = []

            def f(x, log=log):
                y = x.sin()
                log.append("tail")
                return y + 1

            x = m.ones(2, requires_grad=True)
            with ctx:
                y = cp.checkpoint(f, x, use_reentrant=False)
            y.sum().backward()
            logs.append(len(log))
    assert logs == [1, 2, 1, 2]


def test_nested_checkpoint_and_retain_graph(device):
    res = []
    for m, cp in ((gt, gcp), (torch, tcp)):
        dev = device if m is gt else "cpu"
        x = m.tensor([0.3, -0.7, 1.1], device=dev, dtype=m.float64, requires_grad=True)

        def inner(t):
            return t.sin() * t.exp()

        def outer(t, cp=cp):
            return cp.checkpoint(inner, t.tanh(), use_reentrant=False).cos()

        y = cp.checkpoint(outer, x, use_reentrant=False).sum()
        y.backward(retain_graph=True)
        first = x.grad.clone()
        y.backward()
        res.append((first, x.grad))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1])
    assert_close(res[0][1], 2 * res[0][0])


def test_context_fn_contexts_are_entered():
    entered = []

    @contextlib.contextmanager
    def tag(name):
        entered.append(name)
        yield

    x = gt.ones(2, requires_grad=True)
    y = gcp.checkpoint(lambda t: t.sin(), x, use_reentrant=False,
                       context_fn=lambda: (tag("forward"), tag("recompute")))
    assert entered == ["forward"]
    y.sum().backward()
    assert entered == ["forward", "recompute"]


def test_input_modified_in_place_is_caught():
    x = gt.ones(3, requires_grad=True)
    h = x * 2
    y = gcp.checkpoint(lambda t: t.sin(), h, use_reentrant=False)
    with gt.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_no_grad_runs_plainly():
    x = gt.ones(2, requires_grad=True)
    with gt.no_grad():
        y = gcp.checkpoint(lambda t: t.sin(), x, use_reentrant=False)
    assert y.grad_fn is None and not y.requires_grad


def test_inplace_ops_and_batchnorm_inside_match_torch(device):
    """In-place ReLU and BatchNorm (whose running stats the recomputation updates again, as
    in PyTorch) inside a non-reentrant checkpoint."""
    res = []
    for m, cp in ((gt, gcp), (torch, tcp)):
        dev = device if m is gt else "cpu"
        rng = np.random.default_rng(0)
        seq = m.nn.Sequential(m.nn.Linear(4, 5), m.nn.ReLU(inplace=True), m.nn.Linear(5, 3),
                              m.nn.BatchNorm1d(3)).to(dev)
        with m.no_grad():
            for p in seq.parameters():
                p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)), dtype=m.float32))
        x = m.tensor(rng.standard_normal((6, 4)), dtype=m.float32, device=dev,
                     requires_grad=True)
        y = cp.checkpoint(seq, x, use_reentrant=False)
        y.pow(2).sum().backward()
        res.append((x.grad, seq[0].weight.grad, seq[3].running_mean))
    for g, t in zip(res[0], res[1], strict=True):
        assert_close(g, t)


def test_recomputation_under_the_forward_autocast():
    """The recomputation re-enters the forward's autocast state: bfloat16 activations are
    recomputed as bfloat16 (else the determinism check would raise)."""
    x = gt.randn(4, 4, requires_grad=True)
    lin = gt.nn.Linear(4, 4)
    with gt.autocast("cpu", dtype=gt.bfloat16):
        y = gcp.checkpoint(lambda t: lin(t).relu(), x, use_reentrant=False)
        ref = lin(x).relu()
    assert y.dtype is gt.bfloat16
    y.float().sum().backward()
    (expected,) = gt.autograd.grad(ref.float().sum(), x)
    assert_close(x.grad, expected)


def test_debug_lists_the_saved_tensors():
    calls = [0]

    def changing(x):
        calls[0] += 1
        return (x[:2] if calls[0] > 1 else x).exp().sum()

    x = gt.ones(3, requires_grad=True)
    with gcp.set_checkpoint_debug_enabled(True):
        y = gcp.checkpoint(changing, x, use_reentrant=False)
    with pytest.raises(gcp.CheckpointError, match=r"(?s)different metadata.*Tensors saved "
                       r"during the original forward:\n.*Size\(\[3\]\).*Tensors saved during "
                       r"recomputation:\n.*Size\(\[2\]\)"):
        y.backward()
    with pytest.raises(ValueError, match="debug=True is incompatible with non-default "
                                         "context_fn"):
        gcp.checkpoint(changing, x, use_reentrant=False, debug=True,
                       context_fn=gcp.noop_context_fn.__call__)


def test_graph_exec_group_matches_torch():
    """Inside a GraphExecGroup two backward calls over disjoint parts of a checkpointed region
    recompute it once; overlapping calls raise; groups do not nest."""
    for m, cp in ((gt, gcp), (torch, tcp)):
        calls = [0]

        def f(x, calls=calls):
            calls[0] += 1
            return x.sin(), x.cos()

        x = m.tensor([0.1, 0.2], requires_grad=True)
        a, b = cp.checkpoint(f, x, use_reentrant=False)
        with cp.GraphExecGroup():
            a.sum().backward(retain_graph=True)
            b.sum().backward(retain_graph=True)
        assert calls[0] == 2   # the forward and one recomputation
        assert_close(x.grad, x.detach().cos() - x.detach().sin())
        a, _ = cp.checkpoint(f, x, use_reentrant=False)
        with cp.GraphExecGroup():
            a.sum().backward(retain_graph=True)
            with pytest.raises(cp.CheckpointError, match="Performing two backward calls that "
                               "overlap"):
                a.sum().backward()
        with cp.GraphExecGroup(), pytest.raises(RuntimeError, match="GraphExecGroup contexts "
                                                                   "cannot be nested"):
            with cp.GraphExecGroup():
                pass

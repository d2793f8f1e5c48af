"""gt.func.vmap against torch.func.vmap: every op family, in_dims/out_dims trees, nesting,
chunk_size, randomness modes and PyTorch's errors, on cpu and emulated cuda."""

from __future__ import annotations

import warnings

import pytest
import torch

import gputensor as gt
from gputensor.func import vmap
from gputensor.func._dispatch import _set_vmap_fallback_enabled

from .helpers import close, pair

# (id, function of (module, *tensors), sample shapes, in_dims)
CASES = [
    ("unary", lambda m, x: x.sin().exp() * 2 - 1, [(3, 4)], 0),
    ("binary-broadcast", lambda m, x, y: x * y + x / (y.abs() + 1), [(5, 3, 4), (4,)], (0, None)),
    ("binary-both", lambda m, x, y: m.maximum(x, y), [(4, 3), (3, 4)], (1, 0)),
    ("scalar-sample", lambda m, x, y: x + y, [(3,), (4, 2)], (0, None)),
    ("where", lambda m, x, y: m.where(x > 0, x, y), [(3, 4), (3, 4)], 0),
    ("clamp", lambda m, x: x.clamp(-0.5, 0.5), [(3, 4)], 1),
    ("sum-dim", lambda m, x: x.sum(1, keepdim=True), [(3, 4, 5)], 0),
    ("sum-all", lambda m, x: x.sum(), [(3, 4, 5)], 2),
    ("mean-dims", lambda m, x: x.mean((0, -1)), [(3, 4, 5)], 1),
    ("max-dim", lambda m, x: x.max(-1).values + x.argmax(0).double().sum(), [(3, 4, 5)], 0),
    ("amax-keep", lambda m, x: x.amax(keepdim=True, dim=(0, 1)), [(3, 4, 5)], 0),
    ("var", lambda m, x: x.var(0) + x.std(), [(3, 4, 5)], 0),
    ("logsumexp", lambda m, x: x.logsumexp(-1), [(3, 4)], 0),
    ("softmax", lambda m, x: x.softmax(-1) + x.log_softmax(0), [(3, 4, 5)], 2),
    ("cumsum", lambda m, x: x.cumsum(0), [(3, 4)], 1),
    ("sort", lambda m, x: x.sort(-1).values + x.topk(2).values.sum(), [(3, 4)], 0),
    ("matmul-vm", lambda m, x, w: x @ w, [(3, 4), (4, 5)], (0, None)),
    ("matmul-mv", lambda m, x, w: w @ x, [(3, 4), (5, 4)], (0, None)),
    ("matmul-both", lambda m, x, w: m.matmul(x, w), [(3, 2, 4), (3, 4, 5)], 0),
    ("mm", lambda m, x, w: m.mm(x, w), [(3, 2, 4), (4, 5)], (0, None)),
    ("bmm", lambda m, x, w: m.bmm(x, w), [(3, 2, 2, 4), (3, 2, 4, 5)], 0),
    ("dot", lambda m, x, w: m.dot(x, w), [(3, 4), (3, 4)], 0),
    ("outer", lambda m, x, w: m.outer(x, w), [(3, 4), (5,)], (0, None)),
    ("linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), [(3, 4), (5, 4), (3, 5)],
     (0, None, 0)),
    ("view", lambda m, x: x.view(2, 6).t().reshape(-1), [(3, 12)], 0),
    ("expand", lambda m, x: x.unsqueeze(0).expand(2, 4) + x.repeat(2, 1), [(3, 4)], 0),
    ("permute", lambda m, x: x.permute(2, 0, 1).transpose(0, 1).flatten(1), [(3, 4, 5, 2)], 1),
    ("squeeze", lambda m, x: x.unsqueeze(1).squeeze(), [(3, 1, 4)], 0),
    ("cat-stack", lambda m, x, y: m.cat([x, y], -1) + m.stack([x, y]).sum(0).repeat(1, 2),
     [(3, 2, 4), (2, 4)], (0, None)),
    ("split", lambda m, x: x.split(2, -1)[1] * x.chunk(2, -1)[0], [(3, 4, 4)], 0),
    ("select-narrow", lambda m, x: x.select(1, 2) + x.narrow(1, 0, 1).squeeze(1), [(3, 4, 5)],
     0),
    ("getitem", lambda m, x: x[1:, None, ..., ::2] * 2, [(3, 4, 6)], 0),
    ("getitem-tensor", lambda m, x: x[:, [0, 2]], [(3, 4, 6)], 0),
    ("gather", lambda m, x: x.gather(1, m.tensor([[0, 1], [2, 0], [1, 1], [0, 0]]).to(x.device)),
     [(3, 4, 3)], 0),
    ("index_select", lambda m, x: x.index_select(0, m.tensor([2, 0]).to(x.device)), [(3, 4, 3)], 2),
    ("diagonal-trace", lambda m, x: x.diagonal() + m.trace(x), [(3, 4, 4)], 0),
    ("tril-matrix_exp", lambda m, x: x.tril() + m.matrix_exp(x), [(3, 4, 4)], 0),
    ("conv2d-input", lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1),
     [(3, 2, 2, 5, 5), (4, 2, 3, 3)], (0, None)),
    ("conv2d-weight", lambda m, x, w: m.nn.functional.conv2d(x, w, stride=2),
     [(2, 2, 5, 5), (3, 4, 2, 3, 3)], (None, 0)),
    ("conv1d-sample", lambda m, x, w, b: m.nn.functional.conv1d(x, w, b, groups=2),
     [(3, 4, 7), (3, 6, 2, 3), (3, 6)], 0),
    ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x, (4,)), [(3, 2, 4)], 0),
    ("cross_entropy", lambda m, x, t: m.nn.functional.cross_entropy(x, t),
     [(3, 5, 4), None], 0),
]


def _inputs(shapes: list, device: str) -> tuple[list, list]:
    ours, theirs = [], []
    for i, shape in enumerate(shapes):
        if shape is None:   # class targets for cross_entropy
            t = torch.tensor([[0, 3, 1, 2, 3], [1, 1, 0, 2, 3], [3, 2, 1, 0, 0]])
            ours.append(gt.tensor(t.numpy(), device=device))
            theirs.append(t)
            continue
        a, b = pair(shape, device, seed=i)
        ours.append(a)
        theirs.append(b)
    return ours, theirs


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_families_match_torch(case, device):
    _, fn, shapes, in_dims = case
    ours, theirs = _inputs(shapes, device)
    expected = torch.func.vmap(lambda *xs: fn(torch, *xs), in_dims=in_dims)(*theirs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # every family has a rule: no per-sample fallback
        actual = vmap(lambda *xs: fn(gt, *xs), in_dims=in_dims)(*ours)
    close(actual, expected)


def test_in_place_on_batched_and_unbatched(device):
    (x, y), (tx, ty) = _inputs([(3, 4), (4,)], device)

    def f(m, a, b):
        a = a.clone()
        a.mul_(b).add_(1)
        return a
    close(vmap(lambda a, b: f(gt, a, b), in_dims=(0, None))(x, y),
          torch.func.vmap(lambda a, b: f(torch, a, b), in_dims=(0, None))(tx, ty))
    with pytest.raises(RuntimeError, match=r"vmap: add_\(self, \*extra_args\) is not possible"):
        vmap(lambda a, b: b.clone().add_(a), in_dims=(0, None))(x, y)


def test_in_out_dims_trees_and_none(device):
    (x, y), (tx, ty) = _inputs([(3, 4), (4, 3)], device)

    def f(m, d, s):
        return {"sum": d["a"] + d["b"].t(), "scaled": (d["a"] * s, s)}
    in_dims = ({"a": 0, "b": 1}, None)
    out_dims = {"sum": 1, "scaled": (0, None)}
    actual = vmap(lambda d, s: f(gt, d, s), in_dims=in_dims, out_dims=out_dims)(
        {"a": x, "b": y}, gt.tensor(2.0, dtype=gt.float64, device=device))
    expected = torch.func.vmap(lambda d, s: f(torch, d, s), in_dims=in_dims, out_dims=out_dims)(
        {"a": tx, "b": ty}, torch.tensor(2.0, dtype=torch.float64))
    close(actual, expected)


def test_nested_vmap(device):
    (x, y), (tx, ty) = _inputs([(3, 4, 5), (5, 2)], device)

    def f(m, a, w):
        return (a @ w).tanh().sum(0)
    actual = vmap(vmap(lambda a, w: f(gt, a, w), in_dims=(0, None)), in_dims=(0, None))(x, y)
    expected = torch.func.vmap(torch.func.vmap(lambda a, w: f(torch, a, w), in_dims=(0, None)),
                               in_dims=(0, None))(tx, ty)
    close(actual, expected)
    inner = vmap(lambda a, b: a * b.sum(), in_dims=(None, 0))
    close(vmap(inner)(x, x), torch.func.vmap(torch.func.vmap(
        lambda a, b: a * b.sum(), in_dims=(None, 0)))(tx, tx))


def test_chunk_size_gives_the_same_result(device):
    (x,), (tx,) = _inputs([(7, 3)], device)
    expected = torch.func.vmap(lambda a: a.softmax(0) * a.sum())(tx)
    for chunk in (1, 3, 7, 100):
        close(vmap(lambda a: a.softmax(0) * a.sum(), chunk_size=chunk)(x), expected)
    with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
        vmap(lambda a: a, chunk_size=0)


def test_randomness_modes(device):
    x = gt.zeros(4, 3, device=device)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: a + gt.rand(3))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: gt.rand_like(a))(x)
    same = vmap(lambda a: a + gt.rand(3, device=device), randomness="same")(x)
    assert bool((same == same[0]).all())
    diff = vmap(lambda a: a + gt.randn(3, device=device), randomness="different")(x)
    assert not bool((diff == diff[0]).all())
    like = vmap(lambda a: gt.rand_like(a), randomness="different")(x)
    assert like.shape == (4, 3) and not bool((like == like[0]).all())
    drop = vmap(lambda a: gt.nn.functional.dropout(a + 1, 0.5), randomness="same")(x)
    assert bool((drop == drop[0]).all())
    with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
        vmap(lambda a: gt.bernoulli(a.sigmoid()), randomness="same")(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(lambda a: a, randomness="foo")


def test_python_control_flow_and_item_raise(device):
    x = gt.randn(3, 4, device=device)
    with pytest.raises(RuntimeError, match=r"vmap: It looks like you're calling \.item\(\)"):
        vmap(lambda a: a.sum().item())(x)
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: a if a.sum() > 0 else -a)(x)


def test_bad_in_dims_and_outputs_raise_torch_errors(device):
    x = gt.randn(3, 4, device=device)
    tx = torch.randn(3, 4)
    calls = [
        (lambda v: v(lambda a: a, in_dims=2), (ValueError, "Got in_dim=2 for some input")),
        (lambda v: v(lambda a: a, in_dims=(0, 0)), (ValueError, "in_dims is not compatible")),
        (lambda v: v(lambda a: a, in_dims="a"), (ValueError, "expected `in_dims` to be int")),
        (lambda v: v(lambda a: 3), (ValueError, "must only return Tensors")),
        (lambda v: v(lambda a: a, in_dims=(None,)), (ValueError, "at least one Tensor")),
        (lambda v: v(lambda a: a, out_dims=3), (IndexError, "Dimension out of range")),
        (lambda v: v(lambda a: a * 2, out_dims=None),
         (ValueError, "can not return a BatchedTensor when out_dim is None")),
    ]
    for call, (exc, msg) in calls:
        with pytest.raises(exc, match=msg):
            call(torch.func.vmap)(tx)
        with pytest.raises(exc, match=msg):
            call(vmap)(x)
    with pytest.raises(ValueError, match=r"same size in the mapped dimension, got sizes \[3, 5\]"):
        vmap(lambda a, b: a + b)(x, gt.randn(5, 4, device=device))
    with pytest.raises(ValueError, match="cannot vmap over non-Tensor arguments"):
        vmap(lambda a: a)(5)


def test_missing_rule_falls_back_with_warning_or_raises(device):
    x = gt.randn(3, 5, device=device)
    tx = torch.tensor(x.cpu().numpy())
    with pytest.warns(UserWarning, match="There is a performance drop because we have not yet "
                                         "implemented the batching rule for kron"):
        actual = vmap(lambda a: gt.kron(a, a[:2]))(x)
    close(actual, torch.func.vmap(lambda a: torch.kron(a, a[:2]))(tx))
    _set_vmap_fallback_enabled(False)
    try:
        with pytest.raises(RuntimeError, match="Batching rule not implemented for kron"):
            vmap(lambda a: gt.kron(a, a))(x)
    finally:
        _set_vmap_fallback_enabled(True)
    with pytest.raises(RuntimeError, match="dynamic shape. Attempted to vmap over nonzero"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vmap(lambda a: a.nonzero())(gt.tensor([[1.0, 0.0], [1.0, 1.0]], device=device))


def test_gt_vmap_alias():
    assert gt.vmap is vmap

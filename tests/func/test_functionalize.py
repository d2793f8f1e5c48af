"""gt.func.functionalize, debug_unwrap and rearrange against torch.func, on cpu and emulated
cuda, composed with vmap and grad."""

from __future__ import annotations

import warnings

import pytest
import torch

import gputensor as gt
from gputensor.func import debug_unwrap, functionalize, grad, rearrange, vmap

from .helpers import close, pair

# -- functionalize --------------------------------------------------------------------------
FUNCS = [
    ("identity", lambda x: x),
    ("view", lambda x: x.view(-1)),
    ("transpose", lambda x: x.t()),
    ("diagonal", lambda x: x.diagonal()),
    ("expand", lambda x: x[0].expand(2, 3)),
    ("pure", lambda x: x * 2 + 1),
    ("pure-view", lambda x: (x + 1).t()),
    ("mutate", lambda x: x.add_(1)),
    ("mutate-view", lambda x: x.add_(1).t()),
    ("mutate-through-view", lambda x: (x.view(-1)[1:].mul_(3), x.sum())[1]),
    ("mutate-returns-other", lambda x: (x.sin_(), x * 0 + 5)[1]),
]


def _layout(out, x):
    return (tuple(out.shape), tuple(out.stride()), out.is_contiguous(),
            out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), out is x)


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
@pytest.mark.parametrize("name,f", FUNCS, ids=[n for n, _ in FUNCS])
def test_functionalize_matches_torch(device, remove, name, f):
    x, tx = pair((2, 3), device)
    out = functionalize(f, remove=remove)(x)
    tout = torch.func.functionalize(f, remove=remove)(tx)
    close(out, tout)
    close(x, tx)   # the caller's input carries the function's mutations
    assert _layout(out, x) == _layout(tout, tx)


def test_functionalize_inputs_are_separate_inside(device):
    # PyTorch functionalizes each input on its own: a mutation of one is not seen through
    # another input aliasing it, but is copied back to the caller.
    def f(a, b):
        a.add_(1)
        return b + 0
    x, tx = pair((2, 3), device)
    out = functionalize(f)(x, x[0])
    tout = torch.func.functionalize(f)(tx, tx[0])
    close(out, tout)
    close(x, tx)


def test_functionalize_pytree_and_kwargs(device):
    def f(d, scale=1.0, *, extra=None):
        d["a"].mul_(scale)
        return {"sum": d["a"] + d["b"][0], "n": 3}, extra.add_(1)
    (a, ta), (b, tb), (e, te) = pair((3,), device), pair((3,), device, seed=1), \
        pair((2,), device, seed=2)
    out = functionalize(f)({"a": a, "b": [b]}, 2.0, extra=e)
    tout = torch.func.functionalize(f)({"a": ta, "b": [tb]}, 2.0, extra=te)
    close(out[0]["sum"], tout[0]["sum"])
    assert out[0]["n"] == 3
    close(out[1], tout[1])
    close([a, b, e], [ta, tb, te])


def test_functionalize_autograd_through_mutation(device):
    a = gt.ones(3, device=device, requires_grad=True)
    ta = torch.ones(3, requires_grad=True)
    b, tb = a * 1, ta * 1
    out = functionalize(lambda t: t.mul_(3))(b)
    tout = torch.func.functionalize(lambda t: t.mul_(3))(tb)
    close(b.detach(), tb)
    assert b.grad_fn is not None and out.grad_fn is not None
    (out * gt.arange(3.0, device=device)).sum().backward()
    (tout * torch.arange(3.0)).sum().backward()
    close(a.grad, ta.grad)


def test_functionalize_leaf_mutation_errors(device):
    a = gt.ones(3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        functionalize(lambda t: t.mul_(2))(a)


def test_functionalize_bad_remove():
    with pytest.raises(RuntimeError, match="received invalid argument for remove=bad"):
        functionalize(lambda x: x, remove="bad")
    with pytest.raises(RuntimeError) as expected:
        torch.func.functionalize(lambda x: x, remove="bad")
    with pytest.raises(RuntimeError) as got:
        functionalize(lambda x: x, remove="bad")
    assert str(got.value) == str(expected.value)


def test_vmap_of_functionalize(device):
    def f(r):
        r.add_(1)
        return r * 2
    x, tx = pair((4, 3), device)
    out = vmap(functionalize(f))(x)
    tout = torch.func.vmap(torch.func.functionalize(f))(tx)
    close(out, tout)
    close(x, tx)
    # functionalize outside vmap too
    y, ty = pair((4, 3), device, seed=3)
    close(functionalize(vmap(f))(y), torch.func.functionalize(torch.func.vmap(f))(ty))
    close(y, ty)


def test_grad_of_functionalize(device):
    def f(x):
        y = x * x
        y.mul_(2)
        y.view(-1)[0].add_(x[0, 0])
        return (y * x.sin()).sum()
    x, tx = pair((2, 3), device)
    close(grad(functionalize(f))(x), torch.func.grad(torch.func.functionalize(f))(tx))
    close(vmap(grad(functionalize(f)))(x.unsqueeze(0).expand(2, 2, 3)),
          torch.func.vmap(torch.func.grad(torch.func.functionalize(f)))(
              tx.unsqueeze(0).expand(2, 2, 3)))


def test_gradcheck_through_functionalize(device):
    def f(x):
        y = x.clone()
        y[0].mul_(x[1])
        return functionalize(lambda t: t.exp_())(y)
    x = gt.randn(2, 3, dtype=gt.float64, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(f, (x,))


# -- debug_unwrap ---------------------------------------------------------------------------
def test_debug_unwrap(device):
    x, _ = pair((2, 3, 4), device)
    seen = {}

    def inner(row):
        seen["one"] = debug_unwrap(row, recurse=False)
        seen["all"] = debug_unwrap(row)
        return row

    vmap(vmap(inner))(x)
    assert tuple(seen["one"].shape) == (3, 4)   # the inner level's batch dim in front
    assert type(seen["one"]).__name__ == "BatchedTensor"
    assert type(seen["all"]) is gt.Tensor
    close(seen["all"], torch.tensor(x.cpu().numpy()))
    assert debug_unwrap(x) is x
    assert debug_unwrap(x, recurse=False) is x


# -- rearrange ------------------------------------------------------------------------------
PATTERNS = [
    ((2, 3, 4), "a b c -> c (a b)", {}),
    ((2, 3, 4), "a b c -> a b c 1", {}),
    ((2, 3, 4), "a b c -> 1 a 1 b c", {}),
    ((2, 3, 4), "a b c -> (a b c)", {}),
    ((2, 3, 4), "a b c -> a () b c", {}),
    ((2, 3, 4), "a b c -> a (1) b c", {}),
    ((2, 6, 4), "a (b1 b2) c -> a b1 b2 c", {"b1": 3}),
    ((2, 6, 4), "a (b1 b2) c -> (b2 a) c b1", {"b2": 3}),
    ((2, 6, 4), "a (b1 b2) (c1 c2) -> a b1 b2 c1 c2", {"b1": 2, "c2": 2}),
    ((2, 3, 4), "a b c -> a b c", {"a": 2, "b": -1}),
    ((2, 3, 4), "... c -> c ...", {}),
    ((2, 3, 4), "a ... -> (...) a", {}),
    ((2, 3, 4), "a ... c -> a (... c)", {}),
    ((2, 3, 4), "a b ... c -> c b ... a", {}),
    ((2, 3, 4, 5), "b ... c -> b c ...", {}),
    ((1, 3), "1 b -> b", {}),
    ((2, 3), "1 b -> b", {}),    # PyTorch sums a left-hand anonymous axis of any size
    ((2, 3, 4), "a (b 1) c -> a b c", {}),
    ((2, 3, 4), "a () c -> a c", {}),
    ((4, 6, 2), "(h h1) (w w1) c -> h w (c h1 w1)", {"h1": 2, "w1": 2}),
    ((0, 3, 4), "(a1 a2) b c -> a1 a2 b c", {"a1": 2}),
    ((), " -> ", {}),
    ((), " -> 1 1", {}),
]


@pytest.mark.parametrize("shape,pattern,lengths", PATTERNS, ids=[p for _, p, _ in PATTERNS])
def test_rearrange_matches_torch(device, shape, pattern, lengths):
    x, tx = pair(shape, device)
    out = rearrange(x, pattern, **lengths)
    tout = torch.func.rearrange(tx, pattern, **lengths)
    close(out, tout)
    assert (out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == \
        (tout.untyped_storage().data_ptr() == tx.untyped_storage().data_ptr())


def test_rearrange_sequence_input(device):
    (a, ta), (b, tb) = pair((2, 3), device), pair((2, 3), device, seed=1)
    close(rearrange([a, b], "n h w -> h (n w)"), torch.func.rearrange([ta, tb], "n h w -> h (n w)"))


ERRORS = [
    ("a b c -> a b", {}),
    ("a b c -> a b c d", {}),
    ("a b c > a b c", {}),
    ("a b c -> c b a -> a", {}),
    ("a b c -> a b 2 c", {}),
    ("a (b c -> a b c", {}),
    ("a b) c -> a b c", {}),
    ("a b a -> a b", {}),
    ("_a b c -> _a b c", {}),
    ("a b c -> a_ b c", {}),
    ("1c b c -> 1c b c", {}),
    ("a b c -> (a (b c))", {}),
    ("a b c -> a b c ...", {}),
    ("(a ...) b c -> a b c", {}),
    ("a.b c -> a b c", {}),
    ("... a ... -> a", {}),
    ("a b $ -> a b $", {}),
    ("a b c -> a b c", {"\u2026": 2}),
    ("a b c -> a b c", {"d": 2}),
    ("a b c -> a b c", {"a": 2.0}),
    ("a b c -> a b c", {"a": True}),
    ("a b -> a b", {}),
    ("a b c d ... -> a b c d ...", {}),
    ("a (b1 b2) c -> a b1 b2 c", {}),
    ("a (b1 b2) c -> a b1 b2 c", {"b1": 2}),
    ("a (b1 b2) c -> a b1 b2 c", {"b1": 2, "b2": 2}),
    ("a b c -> a b c", {"a": 3}),
    ("a (b1 b2) (c1 c2) -> a b1 b2 c1 c2", {"b1": 1, "c2": 3}),
    ("(a b) b2 c -> a b b2 c", {}),
    ("a b c -> (a a", {}),
]


@pytest.mark.parametrize("pattern,lengths", ERRORS, ids=[p for p, _ in ERRORS])
def test_rearrange_errors_match_torch(pattern, lengths):
    x = gt.zeros(2, 3, 4)
    with pytest.raises(Exception) as expected:
        torch.func.rearrange(torch.zeros(2, 3, 4), pattern, **lengths)
    with pytest.raises(Exception) as got:
        rearrange(x, pattern, **lengths)
    assert type(got.value).__name__ == type(expected.value).__name__
    text = str(expected.value)
    if "{" in text:   # a set: its order is arbitrary
        assert str(got.value).split("{")[0] == text.split("{")[0]
    else:
        assert str(got.value) == text


def test_rearrange_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = rearrange(gt.zeros(2, 3), "axis lambda -> lambda axis")
    kinds = {type(w.message) for w in caught}
    assert kinds == {RuntimeWarning, FutureWarning}
    assert tuple(out.shape) == (3, 2)


def test_rearrange_grad_and_vmap(device):
    def make(rearr):
        return lambda x: (rearr(x, "(h h1) w -> h (w h1)", h1=2) ** 2).sin().sum()
    f, tf = make(rearrange), make(torch.func.rearrange)
    x, tx = pair((4, 3), device)
    close(grad(f)(x), torch.func.grad(tf)(tx))
    xb, txb = pair((5, 4, 3), device)
    close(vmap(lambda t: rearrange(t, "(h h1) w -> w h h1", h1=2))(xb),
          torch.func.vmap(lambda t: torch.func.rearrange(t, "(h h1) w -> w h h1", h1=2))(txb))
    close(vmap(grad(f))(xb), torch.func.vmap(torch.func.grad(tf))(txb))
    xd = gt.randn(4, 3, dtype=gt.float64, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(lambda t: rearrange(t, "(h h1) w -> 1 w h h1", h1=2), (xd,))
    assert gt.autograd.gradcheck(lambda t: rearrange(t, "1 a b -> b a"),
                                 (gt.randn(2, 3, 4, dtype=gt.float64, device=device,
                                           requires_grad=True),))

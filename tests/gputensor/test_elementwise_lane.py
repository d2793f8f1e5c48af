"""The CPU lane of add/sub/mul/true_divide (kernels/cpu/elementwise.py ``make_lane`` and
``inplace_lane``): the commonest calls checked and run in one pass. Whatever it serves must be
exactly what the frontend's plan gives (values, dtype, layout, autograd, versions), and whatever
it declines must reach the plan, which raises or computes as PyTorch does."""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops.elementwise import LANE_OPS
from gputensor.kernels.cpu import elementwise as cpu_elementwise
from gputensor.kernels.registry import BACKENDS
from tests.helpers import requires_torch, torch

OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
       "true_divide": operator.truediv}


def _lane(name: str):
    recorded = []
    lane = BACKENDS["cpu", "strided"].kernel(name).make_lane(
        lambda result, a, b: recorded.append((result, a, b)))
    return lane, recorded


def test_lane_ops_are_the_cpu_ufunc_ops() -> None:
    assert LANE_OPS == set(cpu_elementwise._UFUNCS)


@pytest.mark.parametrize("name", sorted(OPS))
def test_lane_serves_plain_float_operands_and_declines_the_rest(name: str) -> None:
    lane, recorded = _lane(name)
    a = gt.randn(3, 5)
    for b in (gt.randn(3, 5), 2.5, -3, gt.randn(3, 5, dtype=gt.float64).float()):
        out = lane(a, b)
        assert out is not None and out.dtype is gt.float32 and out.is_contiguous()
        assert out._storage is not a._storage and out._storage._version == 0
    assert recorded == []
    assert lane(gt.randn(4, dtype=gt.float64), 1.0).dtype is gt.float64
    declined = [
        (a, True), (a, np.float32(2)), (a, 1 + 2j), (a, gt.randn(5)),        # broadcast
        (a, gt.randn(3, 5, dtype=gt.float64)), (a.t(), gt.randn(5, 3)),      # promotion, layout
        (gt.randn(()), 1.0), (gt.randn(0, 3), 1.0), (gt.randn(1 << 17), 1.0),  # 0-d, empty, big
        (gt.ones(4, dtype=gt.int64), 1), (gt.ones(4, dtype=gt.float16), 1.0),
        (gt.nn.Parameter(gt.randn(4)), 1.0), (2.0, gt.randn(4)),
        (a, 1 << 64), (a, -(1 << 63) - 1),
    ]
    if gt.cuda.is_available():
        declined.append((gt.randn(4, device="cuda"), 1.0))
    for x, y in declined:
        assert lane(x, y) is None, (x, y)


@requires_torch
@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lane_results_are_pytorchs_bits(name: str, dtype: str) -> None:
    rng = np.random.default_rng(3)
    an = rng.standard_normal(17).astype(dtype)
    bn = rng.standard_normal(17).astype(dtype)
    an[:4] = [0.0, -0.0, np.inf, np.nan]
    bn[:4] = [-0.0, 0.0, np.inf, 1e-40]
    fn = OPS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # PyTorch warns about nothing here, nor do we
        for other in (bn, 1e300, -0.0, float("nan"), 7, (1 << 64) - 1, -(1 << 63)):
            ta, ga = torch.tensor(an), gt.tensor(an)
            tb, gb = (torch.tensor(other), gt.tensor(other)) if isinstance(other, np.ndarray) \
                else (other, other)
            for got, want in ((fn(ga, gb), fn(ta, tb)),
                              (getattr(gt, name)(ga, gb), getattr(torch, name)(ta, tb)),
                              (getattr(ga, name)(gb), getattr(ta, name)(tb))):
                assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
                np.testing.assert_array_equal(got.numpy(), want.numpy())


@requires_torch
@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("grads", ["a", "b", "ab", "a_number"])
def test_lane_records_pytorchs_graph(name: str, grads: str) -> None:
    rng = np.random.default_rng(4)
    an, bn = rng.standard_normal((2, 16)) + 2.0
    ta = torch.tensor(an, requires_grad="a" in grads)
    tb = 1.5 if grads == "a_number" else torch.tensor(bn, requires_grad="b" in grads)
    ga = gt.tensor(an, requires_grad="a" in grads)
    gb = 1.5 if grads == "a_number" else gt.tensor(bn, requires_grad="b" in grads)
    fn = OPS[name]
    got, want = fn(ga, gb), fn(ta, tb)
    assert got.requires_grad and got.grad_fn.name() == want.grad_fn.name()
    (got * got).sum().backward()
    (want * want).sum().backward()
    for g, w in ((ga, ta), (gb, tb)):
        if isinstance(g, gt.Tensor) and g.requires_grad:
            np.testing.assert_allclose(g.grad.numpy(), w.grad.numpy(), rtol=1e-12)
    with gt.no_grad():
        assert fn(ga, gb).grad_fn is None


def test_lane_saves_versions_and_grads_of_non_leaves() -> None:
    a = gt.randn(8, requires_grad=True)
    b = gt.randn(8)
    y = a * b
    b.add_(1)   # the in-place lane: b's version moves, the saved b is stale
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    h = a * 2.0
    z = h * h   # a non-leaf operand twice: two edges to h's node
    z.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 8 * a.detach().numpy(), rtol=1e-6)


def test_inplace_lane_writes_bumps_the_version_and_leaves_overlap_to_the_plan() -> None:
    c = gt.arange(8.0)
    b = gt.ones(8)
    before = c._version
    assert c.add_(b) is c and c._version == before + 1
    c += 2
    c.mul_(0.5).sub_(b).true_divide_(2.0)
    np.testing.assert_array_equal(c.numpy(), ((np.arange(8.0) + 3) * 0.5 - 1) / 2)
    assert cpu_elementwise.PARALLEL_THRESHOLD > 8
    lane = BACKENDS["cpu", "strided"].kernel("add").inplace_lane
    assert lane(c, c) is None and lane(c[:4], c[4:]) is None   # same storage: the plan
    c.add_(c)                                                    # full overlap is allowed
    x = gt.arange(8.0)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x[1:].add_(x[:-1])                                       # partial overlap is not
    leaf = gt.ones(4, requires_grad=True)
    assert lane(leaf, 1.0) is None
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.add_(1.0)
    with gt.no_grad():
        leaf.add_(1.0)
    np.testing.assert_array_equal(leaf.detach().numpy(), [2.0] * 4)


@pytest.mark.parametrize("value, message", [(1 << 64, "int too big to convert"),
                                            (-(1 << 63) - 1, "negative int to unsigned")])
def test_python_ints_past_64_bits_raise_like_pytorch(device: str, value: int,
                                                     message: str) -> None:
    for dtype in (gt.float32, gt.float64, gt.int64, gt.float16):
        t = gt.ones(3, dtype=dtype, device=device)
        for call in (lambda t: t + value, lambda t: t.mul(value), lambda t: t < value,
                     lambda t: t.pow(value), lambda t: t.clone().add_(value),
                     lambda t: t[::2] - value, lambda t: gt.fmod(t, value)):
            with pytest.raises(OverflowError, match=message):
                call(t)
    assert (gt.ones(2, device=device) * ((1 << 64) - 1)).tolist() == [2.0 ** 64] * 2


def test_from_numpy_tensors_take_the_lane() -> None:
    """A C-contiguous array's tensor holds the cached contiguous strides (the fast paths
    compare layouts by identity); NumPy's strides are kept where they differ (size-1 dims)."""
    lane, _ = _lane("add")
    a = gt.from_numpy(np.ones(16, np.float32))
    assert a._stride is gt.empty(16)._stride and lane(a, a) is not None
    odd = np.ones((3, 1), np.float32)[:, ::2]   # C-contiguous, NumPy stride 8 on the 1-dim
    assert gt.from_numpy(odd).stride() == tuple(s // 4 for s in odd.strides)


@pytest.mark.parametrize("name", ["exp", "log", "sigmoid", "tanh", "relu", "neg", "sqrt",
                                  "erf", "abs", "sin", "reciprocal", "silu"])
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_unary_lane_gives_the_kernels_bits(name: str, dtype: gt.dtype) -> None:
    """The unary lane (parameterless unary ops, float32/float64, contiguous) runs the kernel
    the frontend's fast path runs: the same bits as the planned call on a strided view of the
    same values. Without a recorder it declines a tensor that requires grad."""
    fn = getattr(gt, name)
    lane = BACKENDS["cpu", "strided"].kernel(name).make_unary_lane(None)
    rng = np.random.default_rng(7)
    x = gt.tensor(rng.uniform(0.1, 3.0, 37), dtype=dtype)
    strided = gt.zeros(74, dtype=dtype)[::2]
    strided.copy_(x)
    got = lane(x)
    assert got is not None and got.dtype is dtype and got._storage is not x._storage
    np.testing.assert_array_equal(got.numpy(), fn(strided).numpy())
    np.testing.assert_array_equal(fn(x).numpy(), got.numpy())
    assert lane(strided) is None and lane(x.requires_grad_()) is None
    y = fn(x)
    assert y.grad_fn is not None
    with gt.no_grad():
        assert fn(x).grad_fn is None


@pytest.mark.parametrize("name", ["exp", "log", "sigmoid", "tanh", "relu", "sqrt", "erf", "abs",
                                  "sin", "reciprocal", "silu", "neg"])
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_unary_lane_records_as_the_frontend(name: str, dtype: gt.dtype) -> None:
    """A tensor that requires grad takes the lane with its recorder: the node is the class the
    planned call records, and backward gives the planned call's gradient, for a leaf, a
    non-leaf and a view operand."""
    fn = getattr(gt, name)
    lane = BACKENDS["cpu", "strided"].kernel(name).make_unary_lane(
        gt.kernels.registry.OPS[name].derivative.lane_recorder(()).unary)
    assert lane(gt.zeros(74, dtype=dtype, requires_grad=True)[::2]) is None
    rng = np.random.default_rng(3)
    values = rng.uniform(0.1, 3.0, (4, 6))
    for make in (lambda t: t, lambda t: t * 1.0, lambda t: t[1:3]):
        leaf = gt.tensor(values, dtype=dtype, requires_grad=True)
        x = make(leaf)
        got = lane(x)
        assert got is not None and got.requires_grad
        leaf_ref = gt.tensor(values, dtype=dtype, requires_grad=True)
        x_ref = make(leaf_ref)
        strided = gt.zeros(x_ref.shape[:-1] + (2 * x_ref.shape[-1],), dtype=dtype)[..., ::2]
        strided.copy_(x_ref)   # the same values and history, in a layout the lane declines
        want = fn(strided)
        assert type(got.grad_fn) is type(want.grad_fn)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        weights = gt.tensor(rng.standard_normal(tuple(got.shape)), dtype=dtype)
        (got * weights).sum().backward()
        (want * weights).sum().backward()
        np.testing.assert_allclose(leaf.grad.numpy(), leaf_ref.grad.numpy(), rtol=1e-6)
    with gt.no_grad():
        assert lane(gt.tensor(values, dtype=dtype, requires_grad=True)).grad_fn is None

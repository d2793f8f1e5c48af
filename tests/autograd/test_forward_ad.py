"""Forward-mode AD: the dual-tensor API against PyTorch's, and the JVP rule of every op.

Every op with a derivative has a JVP rule (``test_every_derivative_has_a_jvp``). Each op's rule
runs on the gradcheck sample of tests/autograd/test_every_derivative.py and is compared with
central finite differences along the same tangent (forward-over-reverse for the private
backward ops, which only run as another op's gradient); a curated set of public ops is also
compared with ``torch.autograd.forward_ad`` on the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import gputensor as gt
import gputensor.autograd.forward_ad as fw
import gputensor.nn.functional as F
from gputensor.autograd import derivatives, jvp
from gputensor.kernels.registry import OPS

from .test_every_derivative import SAMPLES


def _flat(x: Any) -> list[Any]:
    if isinstance(x, list | tuple):
        return [t for item in x for t in _flat(item)]
    return [x]


def _floats(x: Any) -> list[gt.Tensor]:
    return [t for t in _flat(x) if isinstance(t, gt.Tensor) and
            (t.dtype.is_floating_point or t.dtype.is_complex)]


def _tangents(inputs: tuple, seed: int = 3) -> list[gt.Tensor | None]:
    rng = np.random.default_rng(seed)
    return [gt.tensor(rng.standard_normal(tuple(x.shape)), dtype=x.dtype, device=x.device)
            if isinstance(x, gt.Tensor) and x.dtype.is_floating_point else None for x in inputs]


def _jvp(fn: Callable, inputs: tuple, tangents: list) -> tuple[list, list]:
    with fw.dual_level():
        duals = [fw.make_dual(x.detach().requires_grad_(), t) if t is not None else x
                 for x, t in zip(inputs, tangents, strict=True)]
        outs = _floats(fn(*duals))
        unpacked = [fw.unpack_dual(o) for o in outs]
    return [u.primal for u in unpacked], [u.tangent for u in unpacked]


def _finite_difference(fn: Callable, inputs: tuple, tangents: list, eps: float = 1e-6) -> list:
    def at(sign: float) -> list:
        with gt.no_grad():
            shifted = [x.detach() + sign * eps * t if t is not None else x
                       for x, t in zip(inputs, tangents, strict=True)]
        return _floats(fn(*shifted))
    return [(p - m) / (2 * eps) for p, m in zip(at(1.0), at(-1.0), strict=True)]


def _forward_over_reverse(fn: Callable, inputs: tuple) -> Callable:
    """The gradient of ``fn`` (summed against fixed cotangents) as a function of its inputs:
    the private backward ops run in it."""
    def grads(*xs: Any) -> tuple:
        # the duals are made from leaves that require grad (see _jvp), so they keep their tangents
        xs = [x.detach().requires_grad_() if isinstance(x, gt.Tensor) and x.dtype.is_floating_point
              and not x.requires_grad else x for x in xs]
        outs = _floats(fn(*xs))
        rng = np.random.default_rng(7)
        # o * o: the cotangents reaching the backward ops depend on the inputs (have tangents)
        total = sum(((o * o * gt.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype,
                                        device=o.device)).sum() for o in outs), gt.zeros(()))
        leaves = [x for x in xs if isinstance(x, gt.Tensor) and x.requires_grad]
        return gt.autograd.grad(total, leaves, create_graph=True, allow_unused=True,
                                materialize_grads=True)
    return grads


def test_every_derivative_has_a_jvp() -> None:
    missing = sorted(op.name for op in OPS.values()
                     if isinstance(op.derivative, derivatives.Derivative)
                     and op.derivative.jvp is None)
    assert not missing, f"ops with a backward formula but no jvp rule: {missing}"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_jvp_matches_finite_differences(device: str, name: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fn, inputs, check = SAMPLES[name](device)
    if check == "gradgrad":
        fn = _forward_over_reverse(fn, inputs)
    ran: set[str] = set()
    attach = jvp._attach

    def recording_attach(derivative: Any, *args: Any) -> None:
        ran.add(derivative.op_name)
        attach(derivative, *args)

    monkeypatch.setattr(jvp, "_attach", recording_attach)
    tangents = _tangents(inputs)
    primals, got = _jvp(fn, inputs, tangents)
    assert name in ran, f"the sample never ran the jvp rule of {name} (ran {sorted(ran)})"
    monkeypatch.setattr(jvp, "_attach", attach)
    expected = _finite_difference(fn, inputs, tangents)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g is not None
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g.detach().cpu().numpy(), e.detach().cpu().numpy(),
                                   rtol=1e-4, atol=1e-5)


# -- against torch.autograd.forward_ad ----------------------------------------------------------
def _pair(device: str, *shape: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, shape), rng.standard_normal(shape)


def _eye(m: Any, a: Any) -> Any:
    return m.eye(a.shape[-1], dtype=a.dtype, device=a.device)


def _projector(V: Any) -> Any:
    return (V * V.new_tensor([0.5, -1.0, 2.0])) @ V.mT


def _svd_rebuilt(usv: Any) -> Any:
    return usv.U[..., :2] @ usv.Vh[..., :2, :]


def _with_zeros(x: Any) -> Any:
    """``x`` with its entries above 0.3 set to 0 but their tangents kept."""
    return x - (x > 0.3) * x.detach()


# name -> (function of (module, inputs...), input shapes); module is gputensor or torch
TORCH_CASES: dict[str, tuple[Callable, tuple[tuple[int, ...], ...]]] = {
    "mlp": (lambda m, x, w1, w2: m.tanh(x @ w1).relu() @ w2 + x.sum(), ((3, 4), (4, 5), (5, 2))),
    "elementwise": (lambda m, a, b: (a.sin() * b.exp() / (1.5 + a.cos())).sigmoid()
                    + m.atan2(a, b) + m.maximum(a, b) + (a ** 2).sqrt(), ((3, 4), (3, 4))),
    "broadcast": (lambda m, a, b: a * b - a / (b.abs() + 1), ((3, 1), (4,))),
    "softmax": (lambda m, x: (m.softmax(x, 1), m.log_softmax(x, 0),
                              m.logsumexp(x, 1)), ((3, 4),)),
    "reductions": (lambda m, x: (x.sum(0), x.mean(1), x.prod(1), x.amax(0), x.norm(),
                                 x.var(1), x.std(0), x.cumsum(1), x.cumprod(0),
                                 x.max(1).values, x.sort(1).values), ((3, 4),)),
    "views": (lambda m, x: (x.t(), x.reshape(6, 2)[1:, ::2], x.unsqueeze(0).expand(2, 3, 4),
                            x.permute(1, 0).flip(0), x[[0, 2]], x.narrow(1, 1, 2),
                            m.cat([x, x * 2]), m.stack([x, x]), x.diagonal()), ((3, 4),)),
    "matmul": (lambda m, a, b, c: (m.addmm(c, a, b, beta=0.5, alpha=2.0), m.mm(a, b),
                                   m.bmm(a.unsqueeze(0), b.unsqueeze(0))), ((2, 3), (3, 4), (4,))),
    "conv": (lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, padding=1),
             ((1, 2, 5, 5), (3, 2, 3, 3), (3,))),
    "norms": (lambda m, x, w, b: (m.nn.functional.layer_norm(x, (4,), w, b),
                                  m.nn.functional.group_norm(x.reshape(2, 4, 3), 2)),
              ((2, 3, 4), (4,), (4,))),
    "losses": (lambda m, x, y: (m.nn.functional.mse_loss(x, y),
                                m.nn.functional.cross_entropy(x, y.softmax(1))), ((3, 4), (3, 4))),
    "linalg": (lambda m, a: (m.linalg.inv(a @ a.mT + _eye(m, a)), m.linalg.det(a),
                             m.linalg.cholesky(a @ a.mT + _eye(m, a))), ((3, 3),)),
    # gauge-invariant functions of the spectral decompositions (eigenvectors are defined up
    # to sign/phase, which the two libraries' solvers may pick differently)
    "decompositions": (lambda m, a, b: (
        m.linalg.eigh(a + a.mT).eigenvalues, _projector(m.linalg.eigh(a + a.mT).eigenvectors),
        m.linalg.eigvalsh(a + a.mT), m.linalg.svd(b, full_matrices=False).S,
        m.linalg.svdvals(b.mT), _svd_rebuilt(m.linalg.svd(b, full_matrices=False)),
        m.linalg.eigvals(a + 3 * _eye(m, a)).real.sort().values), ((3, 3), (4, 3))),
    "extrema": (lambda m, x, y: (x.amax(1), x.amin(), x.max(), x.min(0).values,
                                 m.max(x, y), m.minimum(x, y), m.aminmax(x, dim=1).max,
                                 x.kthvalue(2, 1, keepdim=True).values), ((3, 4), (3, 4))),
    "moments": (lambda m, x: (m.var_mean(x, 1), m.std_mean(x, (0, 1), correction=0),
                              x.var(0, keepdim=True), x.std(), x.norm(1), x.norm(float("inf"), 1),
                              x.norm(3, 0), x.norm(0.5)), ((3, 4),)),
    # _with_zeros: zeros whose tangents are not zero (the products' zero branches)
    "products": (lambda m, x: (_with_zeros(x).prod(1), _with_zeros(x).prod(),
                               _with_zeros(x).cumprod(1), x.cumprod(0),
                               m.logcumsumexp(x * 3, 1)), ((3, 4),)),
    "nn": (lambda m, x, w, b: (
        m.nn.functional.batch_norm(x, None, None, w, b, training=True),
        m.nn.functional.group_norm(x, 2, w, b), m.nn.functional.layer_norm(x, (4, 5)),
        m.nn.functional.max_pool2d(x, 2), m.nn.functional.adaptive_max_pool2d(x, 3),
        m.nn.functional.nll_loss(x.flatten(1).log_softmax(1), m.tensor([3, 0], device=x.device))),
        ((2, 4, 4, 5), (4,), (4,))),
    "fft": (lambda m, x: (m.fft.fft(x).real, m.fft.rfft(x).imag, m.fft.irfft(x)), ((8,),)),
}


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_jvp_matches_torch(device: str, case: str) -> None:
    fn, shapes = TORCH_CASES[case]
    data = [_pair(device, *s, seed=i) for i, s in enumerate(shapes)]
    with tfw.dual_level():
        touts = fn(torch, *[tfw.make_dual(torch.tensor(x), torch.tensor(t)) for x, t in data])
        expected = [tfw.unpack_dual(o) for o in _flat(touts)]
    with fw.dual_level():
        outs = fn(gt, *[fw.make_dual(gt.tensor(x, device=device), gt.tensor(t, device=device))
                        for x, t in data])
        got = [fw.unpack_dual(o) for o in _flat(outs)]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.primal.cpu().numpy(), e.primal.numpy(), rtol=1e-6,
                                   atol=1e-8)
        np.testing.assert_allclose(g.tangent.cpu().numpy(), e.tangent.numpy(), rtol=1e-6,
                                   atol=1e-8)


def test_complex_jvp_matches_torch(device: str) -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal(5) + 1j * rng.standard_normal(5)
    t = rng.standard_normal(5) + 1j * rng.standard_normal(5)

    def fn(m: Any, x: Any) -> tuple:
        return (x * x.conj() + x.exp(), x.abs(), x.sgn(), (x * 2).real, x.reciprocal())
    with tfw.dual_level():
        expected = [tfw.unpack_dual(o).tangent for o in fn(torch, tfw.make_dual(
            torch.tensor(z), torch.tensor(t)))]
    with fw.dual_level():
        got = [fw.unpack_dual(o).tangent for o in fn(gt, fw.make_dual(
            gt.tensor(z, device=device), gt.tensor(t, device=device)))]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.cpu().numpy(), e.numpy(), rtol=1e-6, atol=1e-8)


# -- the dual API -------------------------------------------------------------------------------
def _raises_like(gt_call: Callable, torch_call: Callable) -> None:
    with pytest.raises(Exception) as theirs:
        torch_call()
    with pytest.raises(type(theirs.value)) as ours:
        gt_call()
    assert str(ours.value) == str(theirs.value).replace("torch.", "gputensor.")


def test_levels_and_errors(device: str) -> None:
    x = gt.ones(2, device=device)
    _raises_like(lambda: fw.make_dual(x, x), lambda: tfw.make_dual(torch.ones(2), torch.ones(2)))
    with fw.dual_level() as level, tfw.dual_level() as tlevel:
        assert level == tlevel == 0
        _raises_like(lambda: fw.make_dual(x, gt.ones(3, device=device)),
                     lambda: tfw.make_dual(torch.ones(2), torch.ones(3)))
        _raises_like(lambda: fw.make_dual(x.long(), x.long()),
                     lambda: tfw.make_dual(torch.ones(2).long(), torch.ones(2).long()))
        _raises_like(lambda: fw.make_dual(x, x.long()),
                     lambda: tfw.make_dual(torch.ones(2), torch.ones(2).long()))
        d, td = fw.make_dual(x, x), tfw.make_dual(torch.ones(2), torch.ones(2))
        _raises_like(lambda: fw.make_dual(d, x), lambda: tfw.make_dual(td, torch.ones(2)))
        _raises_like(lambda: fw.enter_dual_level(), lambda: tfw.enter_dual_level())
        _raises_like(lambda: fw.unpack_dual(d, level=3), lambda: tfw.unpack_dual(td, level=3))
        assert fw.unpack_dual(x).tangent is None
        assert isinstance(fw.unpack_dual(d), fw.UnpackedDualTensor)
    assert fw.unpack_dual(d).tangent is None   # exiting deletes the level's tangents
    _raises_like(lambda: fw.exit_dual_level(), lambda: tfw.exit_dual_level())
    assert fw.enter_dual_level() == 0
    fw.exit_dual_level(level=0)


def test_make_dual_aliases_and_backward(device: str) -> None:
    x = gt.tensor([1.0, 2.0], device=device, requires_grad=True)
    with fw.dual_level():
        d = fw.make_dual(x, gt.tensor([3.0, 4.0], device=device))
        primal, tangent = fw.unpack_dual(d * d)
        assert tangent.tolist() == [6.0, 16.0]
        primal.sum().backward()   # make_dual and unpack_dual are backward differentiable
    assert x.grad.tolist() == [2.0, 4.0]


def test_views_share_the_tangent_and_inplace_updates_it(device: str) -> None:
    with fw.dual_level():
        d = fw.make_dual(gt.zeros(2, 3, device=device), gt.ones(2, 3, device=device))
        row = d[1]
        assert fw.unpack_dual(row).tangent.tolist() == [1.0, 1.0, 1.0]
        row.mul_(gt.tensor([1.0, 2.0, 3.0], device=device))
        assert fw.unpack_dual(d).tangent.tolist() == [[1.0] * 3, [1.0, 2.0, 3.0]]
        # a plain tensor written through a view from a dual gets a tangent with zeros elsewhere
        base = gt.zeros(2, 3, device=device)
        base[0].copy_(d[1] * 2)
        assert fw.unpack_dual(base).tangent.tolist() == [[2.0, 4.0, 6.0], [0.0] * 3]
        with tfw.dual_level():
            tb = torch.zeros(2, 3)
            td = tfw.make_dual(torch.zeros(2, 3), torch.ones(2, 3))
            tb[0].copy_(td[1] * 2)
            assert tfw.unpack_dual(tb).tangent.tolist() == [[2.0] * 3, [0.0] * 3]


def test_overwriting_inplace_ops_replace_the_tangent(device: str) -> None:
    def run(m: Any, ad: Any, device: str) -> list:
        with ad.dual_level():
            d = ad.make_dual(m.zeros(3, 3, dtype=m.float64, device=device),
                             m.ones(3, 3, dtype=m.float64, device=device))
            d[0].zero_()
            d[1, :2].fill_(2.0)
            d[2, 1:].fill_(ad.make_dual(m.tensor(1.5, dtype=m.float64, device=device),
                                        m.tensor(-4.0, dtype=m.float64, device=device)))
            s = ad.make_dual(m.zeros(2, device=device), m.ones(2, device=device)).normal_()
            return [ad.unpack_dual(d).tangent.tolist(), ad.unpack_dual(s).tangent.tolist()]
    assert run(gt, fw, device) == run(torch, tfw, "cpu")


def test_levels_are_per_thread() -> None:
    import threading
    seen: dict[str, Any] = {}

    def worker() -> None:
        seen["active"] = fw._state.active
        with fw.dual_level() as level:
            seen["level"] = level
            seen["tangent"] = fw.unpack_dual(fw.make_dual(gt.ones(2), gt.ones(2)) * 3).tangent
    with fw.dual_level():
        d = fw.make_dual(gt.ones(2), gt.ones(2))
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert fw.unpack_dual(d * 2).tangent.tolist() == [2.0, 2.0]
    assert seen["active"] is False and seen["level"] == 0
    assert seen["tangent"].tolist() == [3.0, 3.0]


def test_double_differentiation_through_tangent(device: str) -> None:
    x = gt.tensor([0.5, -1.0], device=device, requires_grad=True)
    t = gt.tensor([1.0, 2.0], device=device, requires_grad=True)
    with fw.dual_level():
        _, jt = fw.unpack_dual(fw.make_dual(x, t).sin() * 3)
    gx, gtan = gt.autograd.grad(jt.sum(), (x, t))
    np.testing.assert_allclose(gx.cpu().numpy(), (-3 * x.sin() * t).detach().cpu().numpy())
    np.testing.assert_allclose(gtan.cpu().numpy(), (3 * x.cos()).detach().cpu().numpy())


def test_custom_function_jvp(device: str) -> None:
    class Cube(gt.autograd.Function):
        @staticmethod
        def forward(x: gt.Tensor) -> gt.Tensor:
            return x ** 3

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx: Any, g: gt.Tensor) -> gt.Tensor:
            raise AssertionError("not reached")

        @staticmethod
        def jvp(ctx: Any, t: gt.Tensor) -> gt.Tensor:
            (x,) = ctx.saved_tensors
            return 3 * x * x * t

    class NoJvp(gt.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: gt.Tensor) -> gt.Tensor:
            return x * 2

    with fw.dual_level():
        d = fw.make_dual(gt.tensor([1.0, 2.0], device=device), gt.ones(2, device=device))
        assert fw.unpack_dual(Cube.apply(d)).tangent.tolist() == [3.0, 12.0]
        with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
            NoJvp.apply(d)


def test_no_level_costs_one_check() -> None:
    # the op wrapper and the elementwise frontend read this one flag
    assert fw._state.active is False
    x = gt.ones(3)
    assert fw.unpack_dual(F.relu(x)).tangent is None

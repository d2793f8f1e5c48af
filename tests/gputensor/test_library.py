"""gt.library (torch.library's custom ops): schemas, device dispatch, autograd, fakes through
opcheck, mutation and aliasing rules, gt.ops, and the profiler's view of a user op. On cpu and on
(emulated) cuda; the user CUDA kernels behind custom ops are tests/cuda/test_user_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor import Tensor
from gputensor.kernels import registry
from gputensor.library import OpCheckError

try:
    import torch
except ImportError:  # pragma: no cover - torch is an optional oracle
    torch = None


@pytest.fixture
def fresh():
    """Define ops for one test; they are destroyed afterwards, so names can repeat."""
    made = []

    def define(name, fn=None, /, **kw):
        kw.setdefault("mutates_args", ())

        def wrap(f):
            op = gt.library.custom_op(name, f, **kw)
            made.append(op)
            return op

        return wrap if fn is None else wrap(fn)

    yield define
    for op in made:
        op._destroy()


def _mul_sin_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mul_sin_backward(ctx, g):
    x, y = ctx.saved_tensors
    gx = g * gt.cos(x) * y if ctx.needs_input_grad[0] else None
    gy = g * gt.sin(x) if ctx.needs_input_grad[1] else None
    return gx, gy


@gt.library.custom_op("gtlib::mul_sin", mutates_args=())
def mul_sin(x: Tensor, y: Tensor) -> Tensor:
    """sin(x) * y."""
    return gt.sin(x) * y


mul_sin.register_autograd(_mul_sin_backward, setup_context=_mul_sin_setup)
mul_sin.register_fake(lambda x, y: gt.empty(gt.broadcast_shapes(x.shape, y.shape),
                                            dtype=x.dtype, device=x.device))


# -- defining and calling --------------------------------------------------------------------------
def test_op_is_callable_directly_and_through_gt_ops(device):
    x, y = gt.randn(4, device=device), gt.randn(4, device=device)
    want = np.sin(x.cpu().numpy()) * y.cpu().numpy()
    for fn in (mul_sin, gt.ops.gtlib.mul_sin, gt.ops.gtlib.mul_sin.default):
        out = fn(x, y)
        assert out.device == gt.device(device)
        np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(mul_sin(y=y, x=x).cpu().numpy(), want, rtol=1e-6)
    assert mul_sin.schema == "gtlib::mul_sin(Tensor x, Tensor y) -> Tensor"
    assert mul_sin.__name__ == "mul_sin" and mul_sin.__doc__ == "sin(x) * y."
    assert "mul_sin" in dir(gt.ops.gtlib) and "gtlib" in dir(gt.ops)
    with pytest.raises(AttributeError, match="'gtlib' object has no attribute 'nope'"):
        gt.ops.gtlib.nope  # noqa: B018
    with pytest.raises(TypeError, match=r"gtlib::mul_sin\(Tensor x, Tensor y\)"):
        mul_sin(x)


def test_device_specific_implementations(fresh, device):
    ran = []

    @fresh("gtlib::which")
    def which(x: Tensor) -> Tensor:
        ran.append("default")
        return x + 1

    @which.register_kernel("cpu")
    def _(x):
        ran.append("cpu")
        return x + 2

    x = gt.zeros(3, device=device)
    out = which(x)
    expect = "cpu" if device == "cpu" else "default"
    assert ran == [expect]
    assert out.cpu().tolist() == [2.0 if device == "cpu" else 1.0] * 3
    # the implementation is the backend's kernel under the op's qualified name
    backend = registry.BACKENDS[gt.device(device).type, "strided"]
    assert "gtlib::which" in backend.kernels


def test_device_types_restrict_the_default(fresh):
    @fresh("gtlib::cpu_only", device_types="cpu")
    def cpu_only(x: Tensor) -> Tensor:
        return x.clone()

    assert cpu_only(gt.ones(2)).tolist() == [1.0, 1.0]
    if gt.cuda.is_available():
        with pytest.raises(NotImplementedError,
                           match=r"no implementation for device type 'cuda' \(registered: cpu\)"):
            cpu_only(gt.ones(2, device="cuda"))
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        cpu_only.register_kernel("tpu", lambda x: x)


def test_cuda_wins_dispatch_and_ops_without_tensors_use_their_device(fresh, device):
    seen = []

    @fresh("gtlib::fill")
    def fill(n: int, value: float, device: gt.device) -> Tensor:
        seen.append(gt.device(device).type)
        return gt.full((n,), value, device=device)

    assert fill(3, 2.0, gt.device(device)).device.type == gt.device(device).type
    assert seen == [gt.device(device).type]

    @fresh("gtlib::add2")
    def add2(a: Tensor, b: Tensor) -> Tensor:
        return a + b

    scalar = gt.tensor(1.0)  # a 0-dim CPU tensor joins a tensor on any device
    assert add2(scalar, gt.ones(2, device=device)).device == gt.device(device)


def test_keyword_only_arguments_and_defaults(fresh, device):
    got = []

    @fresh("gtlib::scale")
    def scale(x: Tensor, a: float = 2.0, *, bias: Tensor | None = None) -> Tensor:
        return x * a + (bias if bias is not None else 0)

    def setup(ctx, inputs, keyword_only_inputs, output):
        got.append((len(inputs), sorted(keyword_only_inputs)))
        ctx.a = inputs[1]

    scale.register_autograd(lambda ctx, g: (g * ctx.a, None), setup_context=setup)
    assert scale.schema == ("gtlib::scale(Tensor x, float a=2.0, *, Tensor? bias=None) -> "
                            "Tensor")
    x = gt.ones(3, device=device, requires_grad=True)
    out = scale(x, bias=gt.ones(3, device=device))
    assert out.detach().cpu().tolist() == [3.0] * 3
    out.sum().backward()
    assert x.grad.cpu().tolist() == [2.0] * 3
    assert got == [(2, ["bias"])]


# -- autograd --------------------------------------------------------------------------------------
def test_gradcheck_through_register_autograd(device):
    x = gt.randn(3, 4, dtype=gt.float64, device=device, requires_grad=True)
    y = gt.randn(4, dtype=gt.float64, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(mul_sin, (x, y))
    out = mul_sin(x, y)
    assert type(out.grad_fn).__name__ == "GeneratedBackwardFor_gtlib_mul_sinBackward"
    only_x = gt.randn(3, dtype=gt.float64, device=device, requires_grad=True)
    mul_sin(only_x, gt.ones(3, dtype=gt.float64, device=device)).sum().backward()
    np.testing.assert_allclose(only_x.grad.cpu().numpy(), np.cos(only_x.detach().cpu().numpy()))


@pytest.mark.skipif(torch is None, reason="torch is the oracle")
def test_matches_torch_custom_op_gradients(device):
    xn, yn = np.random.default_rng(0).standard_normal((2, 5))

    @torch.library.custom_op("gtlib_oracle::mul_sin", mutates_args=())
    def tmul_sin(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * y

    tmul_sin.register_autograd(_torch_backward, setup_context=_mul_sin_setup)
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (xn, yn))
    (tmul_sin(tx, ty) * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    gx, gy = (gt.tensor(v, device=device, requires_grad=True) for v in (xn, yn))
    (mul_sin(gx, gy) * gt.arange(5.0, dtype=gt.float64, device=device)).sum().backward()
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy.grad.cpu().numpy(), ty.grad.numpy(), rtol=1e-12)


def _torch_backward(ctx, g):
    x, y = ctx.saved_tensors
    return g * torch.cos(x) * y, g * torch.sin(x)


def test_two_outputs_and_wrong_gradient_counts(fresh, device):
    @fresh("gtlib::sum_diff")
    def sum_diff(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return x + y, x - y

    sum_diff.register_autograd(lambda ctx, g1, g2: (g1 + g2, g1 - g2))
    a = gt.ones(2, device=device, requires_grad=True)
    b = gt.ones(2, device=device, requires_grad=True)
    s, d = sum_diff(a, b)
    (s.sum() + 2 * d.sum()).backward()
    assert a.grad.cpu().tolist() == [3.0, 3.0] and b.grad.cpu().tolist() == [-1.0, -1.0]
    x = gt.randn(3, dtype=gt.float64, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(lambda t: sum_diff(t, t * 2), (x,))

    sum_diff.register_autograd(lambda ctx, g1, g2: (g1,))
    s, _ = sum_diff(a, b)
    with pytest.raises(RuntimeError, match="backward returned 1 gradient.*expected 2"):
        s.sum().backward()


def test_without_autograd_backward_raises_naming_the_op(fresh, device):
    @fresh("gtlib::opaque")
    def opaque(x: Tensor) -> Tensor:
        return x * 2

    x = gt.ones(3, device=device, requires_grad=True)
    y = opaque(x)
    assert y.requires_grad and y.grad_fn is not None
    with pytest.raises(RuntimeError, match="backward through gtlib::opaque but no autograd "
                                           "formula was registered"):
        y.sum().backward()
    with gt.no_grad():
        assert opaque(x).grad_fn is None
    assert opaque(x.detach()).grad_fn is None


# -- mutation and aliasing -------------------------------------------------------------------------
def test_mutated_arguments_bump_the_version_autograd_checks(fresh):
    @fresh("gtlib::add_host", mutates_args={"x"}, device_types="cpu")
    def add_host(x: Tensor, v: float) -> None:
        x.numpy()[...] += v  # writes behind gputensor's back, as a CUDA kernel would

    assert add_host.schema == "gtlib::add_host(Tensor(a0!) x, float v) -> ()"
    w = gt.ones(3, requires_grad=True)
    t = gt.ones(3)
    out = w * t  # saves t for w's gradient
    v0 = t._version
    assert add_host(t, 1.0) is None
    assert t.tolist() == [2.0] * 3 and t._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    with pytest.raises(RuntimeError, match="Cannot register autograd formula for non-functional"):
        add_host.register_autograd(lambda ctx, g: g)
    with pytest.raises(RuntimeError, match="mutates 'x', which requires grad"):
        add_host(gt.ones(2, requires_grad=True), 1.0)


def test_outputs_must_be_new_tensors(fresh, device):
    @fresh("gtlib::same")
    def same(x: Tensor) -> Tensor:
        return x

    @fresh("gtlib::view")
    def view(x: Tensor) -> Tensor:
        return x[1:]

    x = gt.ones(3, device=device)
    with pytest.raises(RuntimeError, match="output 0 is the input 'x'.*clone"):
        same(x)
    with pytest.raises(RuntimeError, match="output 0 aliases the input 'x'"):
        view(x)


def test_return_values_are_checked_against_the_schema(fresh, device):
    @fresh("gtlib::bad")
    def bad(x: Tensor) -> Tensor:
        return 3

    @fresh("gtlib::bad_tuple")
    def bad_tuple(x: Tensor) -> tuple[Tensor, Tensor]:
        return (x + 1,)

    x = gt.ones(2, device=device)
    with pytest.raises(RuntimeError, match="the schema returns a Tensor.*returned a int"):
        bad(x)
    with pytest.raises(RuntimeError, match="the schema returns 2 values"):
        bad_tuple(x)


def test_list_of_tensors_in_and_out(fresh, device):
    @fresh("gtlib::split_scale")
    def split_scale(xs: list[Tensor], a: float) -> list[Tensor]:
        return [x * a for x in xs]

    assert split_scale.schema == "gtlib::split_scale(Tensor[] xs, float a) -> Tensor[]"
    out = split_scale([gt.ones(2, device=device), gt.zeros(1, device=device)], 3.0)
    assert isinstance(out, list) and [o.cpu().tolist() for o in out] == [[3.0, 3.0], [0.0]]
    split_scale.register_autograd(lambda ctx, g: (None, None))
    with pytest.raises(NotImplementedError, match="list argument 'xs'"):
        split_scale([gt.ones(2, device=device, requires_grad=True)], 2.0)


# -- schemas and names -----------------------------------------------------------------------------
def test_infer_schema_matches_torch_spelling():
    def f(x: Tensor, w: Tensor | None, xs: list[Tensor], n: int, a: float = 1.0, *,
          flag: bool = False, mode: str = "sum") -> tuple[Tensor, Tensor]: ...

    def g(x: Tensor, d: gt.dtype, dev: gt.device, s: int | float | bool, ns: list[int],
          o: int | None = None) -> list[Tensor]: ...

    # the strings torch.library.infer_schema gives for the same functions with torch types
    assert gt.library.infer_schema(f, mutates_args=()) == (
        '(Tensor x, Tensor? w, Tensor[] xs, SymInt n, float a=1.0, *, bool flag=False, '
        'str mode="sum") -> (Tensor, Tensor)')
    assert gt.library.infer_schema(f, mutates_args={"x", "xs"}).startswith(
        "(Tensor(a0!) x, Tensor? w, Tensor(a2!)[] xs, SymInt n")
    assert gt.library.infer_schema(f, mutates_args="unknown").startswith(
        "(Tensor(a0!) x, Tensor(a1!)? w, Tensor(a2!)[] xs, SymInt n")
    assert gt.library.infer_schema(g, mutates_args=(), op_name="ns::g") == (
        "ns::g(Tensor x, ScalarType d, Device dev, Scalar s, SymInt[] ns, SymInt? o=None) -> "
        "Tensor[]")


@pytest.mark.skipif(torch is None, reason="torch is the oracle")
def test_infer_schema_agrees_with_torch():
    def ours(x: Tensor, w: Tensor | None, n: int, a: float = 0.5) -> tuple[Tensor, Tensor]:
        ...

    def theirs(x: torch.Tensor, w: torch.Tensor | None, n: int,
               a: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]: ...

    for mutates in ((), ("x",), "unknown"):
        assert gt.library.infer_schema(ours, mutates_args=mutates) == \
            torch.library.infer_schema(theirs, mutates_args=mutates)


def test_definition_errors(fresh):
    with pytest.raises(ValueError, match="Expected there to be a namespace"):
        gt.library.custom_op("noname", mutates_args=())(lambda x: x)
    with pytest.raises(ValueError, match="Parameter x must have a type annotation"):
        fresh("gtlib::e1", lambda x: x)

    def star(*xs: Tensor) -> Tensor: ...

    def unsupported(x: dict) -> Tensor: ...

    def no_return(x: Tensor): ...

    def mut_int(x: Tensor, n: int) -> None: ...

    with pytest.raises(ValueError, match=r"\*args or \*\*kwargs"):
        fresh("gtlib::e2", star)
    with pytest.raises(ValueError, match="Parameter x has unsupported type"):
        fresh("gtlib::e3", unsupported)
    with pytest.raises(ValueError, match="return type must be annotated"):
        fresh("gtlib::e4", no_return)
    with pytest.raises(ValueError, match="'n', which is a SymInt"):
        fresh("gtlib::e5", mut_int, mutates_args={"n"})
    with pytest.raises(ValueError, match=r"mutates_args names \['z'\]"):
        fresh("gtlib::e6", mut_int, mutates_args={"z"})
    with pytest.raises(ValueError, match="not the string 'x'|got the string 'x'"):
        fresh("gtlib::e7", mut_int, mutates_args="x")
    with pytest.raises(RuntimeError, match="gtlib::mul_sin already exists"):
        gt.library.custom_op("gtlib::mul_sin", mutates_args=())(lambda x: x)
    with pytest.raises(ValueError, match="is not a custom op made by gt.library.custom_op"):
        gt.library.register_fake("aten::add", lambda x: x)


def test_explicit_schema(fresh, device):
    def impl(x, out):
        out.copy_(x * 2)

    op = fresh("gtlib::twice_out", impl, schema="(Tensor x, Tensor(a1!) out) -> ()",
               mutates_args={"out"})
    assert op.schema == "gtlib::twice_out(Tensor x, Tensor(a1!) out) -> ()"
    out = gt.zeros(2, device=device)
    op(gt.ones(2, device=device), out)
    assert out.cpu().tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="names the arguments"):
        fresh("gtlib::bad_schema", impl, schema="(Tensor y, Tensor out) -> ()")
    with pytest.raises(ValueError, match="mutates_args says"):
        fresh("gtlib::bad_schema2", impl, schema="(Tensor x, Tensor(a1!) out) -> ()",
              mutates_args=())


def test_module_level_registrations_by_name(fresh, device):
    op = fresh("gtlib::neg", lambda x: -x, schema="(Tensor x) -> Tensor")
    gt.library.register_kernel("gtlib::neg", "cpu", lambda x: x * -1)
    gt.library.register_autograd("gtlib::neg", lambda ctx, g: -g)
    gt.library.register_fake("gtlib::neg")(lambda x: gt.empty_like(x))
    gt.library.register_cost("gtlib::neg", lambda inputs, out: (8, 1))
    x = gt.randn(3, dtype=gt.float64, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(op, (x,))
    assert gt.library.opcheck(op, (x,)) == {"test_schema": "SUCCESS",
                                            "test_autograd_registration": "SUCCESS",
                                            "test_faketensor": "SUCCESS"}


# -- register_fake through opcheck -----------------------------------------------------------------
def test_opcheck_passes_a_correct_op(device):
    x = gt.randn(3, 4, device=device)
    y = gt.randn(4, device=device)
    result = gt.library.opcheck(mul_sin, (x, y))
    assert result == {"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
                      "test_faketensor": "SUCCESS"}
    assert x.grad is None and not x.requires_grad  # opcheck works on copies


def test_opcheck_catches_a_wrong_fake_and_a_missing_one(fresh, device):
    @fresh("gtlib::outer")
    def outer(a: Tensor, b: Tensor) -> Tensor:
        return a[:, None] * b[None, :]

    a, b = gt.ones(3, device=device), gt.ones(2, device=device)
    with pytest.raises(OpCheckError, match="no fake impl registered"):
        gt.library.opcheck(outer, (a, b), test_utils="test_faketensor")
    outer.register_fake(lambda a, b: gt.empty(a.shape[0], dtype=a.dtype, device=a.device))
    with pytest.raises(OpCheckError, match=r"fake has \(shape, dtype, device, strides\) \(\(3,\)"):
        gt.library.opcheck(outer, (a, b), test_utils="test_faketensor")
    outer.register_fake(lambda a, b: a.new_empty((a.shape[0], b.shape[0])))
    assert gt.library.opcheck(outer, (a, b), test_utils="test_faketensor") == \
        {"test_faketensor": "SUCCESS"}
    # without register_autograd, backward raises instead of giving wrong gradients: that passes
    results = gt.library.opcheck(outer, (a, b), raise_exception=False)
    assert results["test_autograd_registration"] == "SUCCESS"
    with pytest.raises(ValueError, match="unknown test_utils"):
        gt.library.opcheck(outer, (a, b), test_utils="test_everything")


def test_opcheck_catches_an_undeclared_mutation(fresh, device):
    @fresh("gtlib::sneaky")
    def sneaky(x: Tensor) -> Tensor:
        x.mul_(2)
        return x.clone()

    x = gt.ones(2, device=device)
    results = gt.library.opcheck(sneaky, (x,), test_utils=("test_schema",),
                                 raise_exception=False)
    assert isinstance(results["test_schema"], OpCheckError)
    assert "wrote to the argument 'x', which is not in mutates_args" in str(
        results["test_schema"])
    assert x.cpu().tolist() == [1.0, 1.0]


# -- the profiler ----------------------------------------------------------------------------------
def test_profiler_shows_the_op_with_its_declared_cost(fresh, device):
    @fresh("gtlib::axpy", cost=lambda inputs, out: (3 * out.numel() * out.element_size(),
                                                     2 * out.numel()))
    def axpy(a: float, x: Tensor, y: Tensor) -> Tensor:
        return a * x + y

    x, y = gt.randn(1000, device=device), gt.randn(1000, device=device)
    axpy(2.0, x, y)  # compile outside the profile
    with gt.profiler.profile(record_shapes=True) as prof:
        out = axpy(2.0, x, y)
    np.testing.assert_allclose(out.cpu().numpy(), 2 * x.cpu().numpy() + y.cpu().numpy(),
                               rtol=1e-6)
    (ev,) = [e for e in prof.events() if e.name == "gtlib::axpy"]
    assert ev.kind == "kernel" and ev.device == device
    assert ev.backend == ("CPU" if device == "cpu" else "CUDA")
    assert (ev.bytes, ev.flops) == (12000, 2000)
    assert ev.input_shapes[1] == [1000] and ev.input_shapes[0] == []
    assert {c.name for c in ev.children} >= {"mul", "add"}  # what the implementation ran
    table = prof.key_averages().table(sort_by="device_time_total")
    row = next(line for line in table.splitlines() if line.startswith("gtlib::axpy"))
    assert row.split()[-3] != "-"  # a GB/s figure from the declared bytes

    # a cost model can be replaced later, and a gputensor memory_cost model fits the contract
    axpy.register_cost(gt.library.memory_cost(flops_per_element=2))
    with gt.profiler.profile() as prof:
        axpy(2.0, x, y)
    (ev,) = [e for e in prof.events() if e.name == "gtlib::axpy"]
    assert (ev.bytes, ev.flops) == (12000, 2000)


def test_profiler_without_a_cost_counts_the_tensors(fresh, device):
    @fresh("gtlib::copy")
    def copy(x: Tensor) -> Tensor:
        return x.clone()

    x = gt.ones(100, device=device)
    with gt.profiler.profile() as prof:
        copy(x)
    (ev,) = [e for e in prof.events() if e.name == "gtlib::copy"]
    assert (ev.bytes, ev.flops) == (800, 0)


def test_op_registered_while_profiling_is_recorded_and_hooks_leave_nothing(fresh, device):
    x = gt.ones(4, device=device)
    with gt.profiler.profile() as prof:
        @fresh("gtlib::late")
        def late(x: Tensor) -> Tensor:
            return x + 1

        late(x)
    (ev,) = [e for e in prof.events() if e.name == "gtlib::late"]
    assert ev.kind == "kernel" and [c.name for c in ev.children] == ["add"]
    kern = registry.BACKENDS[gt.device(device).type, "strided"].kernels["gtlib::late"]
    assert not hasattr(kern, "_gt_profiler_raw")

"""The op and backend registries, the generated CPU kernels and their disk cache."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cpu import codegen
from gputensor.kernels.registry import BACKENDS, CPU, OPS, Backend, OpDef, declare
from tests.helpers import numpy_test_op


def test_four_backends_keyed_by_device_and_layout() -> None:
    names = {(dev, lay): b.name for (dev, lay), b in BACKENDS.items()}
    assert names == {("cpu", "strided"): "CPU", ("cuda", "strided"): "CUDA",
                     ("cpu", "sparse_coo"): "SparseCPU", ("cuda", "sparse_coo"): "SparseCUDA"}
    assert CPU.elementwise_factory is not None


def test_missing_kernel_is_a_clear_error() -> None:
    backend = Backend("Test", "cpu", "strided")
    with pytest.raises(RuntimeError, match="op 'add' has no kernel for the Test backend"):
        backend.kernel("add")


def test_elementwise_kernels_are_generated_from_the_declaration() -> None:
    op = OPS["hardtanh"]
    assert op.expr and op.params == ("min_val", "max_val") and op.inplace
    kernel = CPU.kernel("hardtanh")
    assert CPU.kernel("hardtanh") is kernel  # generated once, then cached in the table
    x = gt.ones(10)
    assert op.cost([x], x) == (2 * 10 * 4, 10)


def test_every_op_has_a_cost_model() -> None:
    x = gt.ones(4, 3)
    assert all(callable(op.cost) for op in OPS.values())
    assert OPS["sum"].cost([x], gt.tensor(1.0)) == ((12 + 1) * 4, 12)
    assert OPS["softmax"].cost([x, 1], x)[0] == 2 * 12 * 4
    assert OPS["cat"].cost([[x, x]], gt.ones(8, 3)) == ((24 + 24) * 4, 0)


def test_declaring_twice_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="declared twice"):
        declare(OpDef(name="add", frontend=lambda: None))


def test_every_public_op_is_exported_once() -> None:
    for name, op in OPS.items():
        if not name.startswith("_") and op.function:
            assert getattr(gt, name) is op.frontend, name
        elif not name.startswith("_"):  # method-only ops (view, expand) are Tensor methods
            assert getattr(gt.Tensor, name) is op.frontend and not hasattr(gt, name), name


def test_generated_sources_are_content_addressed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path))
    mod = codegen.load_module("probe", "VALUE = 41 + 1\n")
    assert mod.VALUE == 42
    files = list((tmp_path / "numba_kernels").glob("_gputensor_gen_probe_*.py"))
    assert len(files) == 1
    assert codegen.load_module("probe", "VALUE = 41 + 1\n") is mod


@pytest.mark.parametrize("name,np_fn", [("exp", np.exp), ("tanh", np.tanh), ("sqrt", np.sqrt),
                                        ("floor", np.floor), ("abs", np.abs)])
def test_unary_kernels_match_numpy(device: str, name: str, np_fn) -> None:
    numpy_test_op([(3, 5)], np_fn, getattr(gt, name), device=device, low=0.1, high=3.0,
                  dtype=gt.float64, check_dtype=True)


def test_broadcast_strided_kernels_match_numpy(device: str) -> None:
    numpy_test_op([(4, 1, 3), (5, 1)], lambda a, b: np.swapaxes(np.maximum(a, b), -1, -2),
                  lambda a, b: gt.maximum(a, b).mT, device=device, dtype=gt.float32)
    numpy_test_op([(6, 4)], lambda a: a[::2, 1:] * 3 - 1,
                  lambda a: a[::2, 1:] * 3 - 1, device=device, dtype=gt.float64)


def test_tensor_methods_come_from_the_registry_or_the_tensor_class():
    """Every Tensor method is defined in _tensor.py, is an op's (name, alias or in-place
    form), a declared ``tensor_method``, or a Python operator installed from an op: nothing
    else assigns Tensor attributes."""
    from gputensor.kernels.registry import TENSOR_METHODS

    op_names = set()
    for op in OPS.values():
        for n in (op.name, *op.aliases):
            op_names |= {n, n + "_"}
    stray = []
    for name, attr in vars(gt.Tensor).items():
        fn = attr.fget if isinstance(attr, property) else attr
        if not callable(fn) or getattr(fn, "__module__", None) == "gputensor._tensor":
            continue
        if name in TENSOR_METHODS:
            assert TENSOR_METHODS[name] is attr, name
        elif name not in op_names and not (name.startswith("__") and name.endswith("__")):
            stray.append(name)
    assert not stray, f"Tensor attributes set outside the registry: {stray}"
    assert {"T", "mT", "H", "mH", "__getitem__", "div_", "divide_", "new_zeros"} <= \
        set(TENSOR_METHODS)


def test_cpu_and_cuda_backends_name_the_same_kernels():
    """The CUDA backend supplies every CPU kernel under the same name, and no other (dense and
    sparse): a frontend dispatches by device alone."""
    import gputensor.kernels.cuda.ops  # noqa: F401  (registers the CUDA kernels)

    for layout in ("strided", "sparse_coo"):
        cpu, cuda = BACKENDS["cpu", layout].kernels, BACKENDS["cuda", layout].kernels
        # (not custom ops, nor elementwise kernels, which each backend generates on first use,
        # nor the samplers of PyTorch's CPU random stream, which other devices draw on the host)
        builtin = {n for n in (*cpu, *cuda)
                   if "::" not in n and not (n in OPS and OPS[n].expr is not None)
                   and not n.startswith("mt19937.")}
        assert sorted(builtin - set(cuda)) == [], f"{layout}: kernels missing on CUDA"
        assert sorted(builtin - set(cpu)) == [], f"{layout}: CUDA-only kernels"


def test_cpu_and_cuda_kernels_take_the_same_parameters():
    """A backend-kernel contract is one signature: both backends' kernels of a name take the
    same parameters, in the same order, with the same defaults, and none hides behind
    *args/**kwargs (the frontend calls both the same way)."""
    import inspect

    import gputensor.kernels.cuda.ops  # noqa: F401  (registers the CUDA kernels)

    def params(fn):
        ps = list(inspect.signature(fn).parameters.values())
        assert all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in ps), fn
        return [(p.name, p.default) for p in ps]

    for layout in ("strided", "sparse_coo"):
        cpu, cuda = BACKENDS["cpu", layout].kernels, BACKENDS["cuda", layout].kernels
        shared = [n for n in cpu if n in cuda and "::" not in n
                  and not (n in OPS and OPS[n].expr is not None)]
        assert shared
        differ = [n for n in shared if params(cpu[n]) != params(cuda[n])]
        assert differ == [], f"{layout}: CPU and CUDA kernels disagree on parameters: {differ}"


def _derivatives():
    from gputensor.autograd.derivatives import Derivative

    return [op for op in OPS.values() if isinstance(op.derivative, Derivative)]


@pytest.mark.parametrize("name", [op.name for op in _derivatives()])
def test_every_derivative_formula_compiles_and_resolves_its_names(name):
    """Expression formulas compile and every name they read is bound or in the formula
    namespace; function formulas read only bound names, and every global their code uses
    exists (a misspelt helper fails here, not at somebody's first backward)."""
    import builtins

    d = OPS[name].derivative
    for arg, formula in d.formulas.items():
        if formula is None:
            continue
        fn, params = d.compiled(arg)
        assert callable(fn) and set(params) <= d._bound_names(), (name, arg)
        if callable(formula):
            code = formula.__code__
            missing = [n for n in code.co_names
                       if n not in formula.__globals__ and not hasattr(builtins, n)
                       and not _is_attribute(code, n)]
            assert missing == [], f"{name}: derivative for {arg!r} uses undefined {missing}"


def _is_attribute(code, name: str) -> bool:
    """Whether ``name`` appears in ``code`` only as an attribute (``x.name``), not a global."""
    import dis

    return all(ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR")
               for ins in dis.get_instructions(code) if ins.argval == name)


def test_no_derivative_formula_names_a_helper_in_a_string():
    """Helpers are referenced as code (a function formula), never by a dotted path in a
    string, which tools cannot see."""
    dotted = [(op.name, arg) for op in _derivatives() for arg, f in op.derivative.formulas.items()
              if isinstance(f, str) and any(f"{pkg}." in f for pkg in ("_ops", "sparse"))]
    assert dotted == []


def test_every_public_op_is_named_by_a_test():
    """Each public op (by its name or an alias) appears in some test module other than this
    one, the parity suites that compare it with PyTorch or NumPy: a new op without a test
    fails here."""
    import re
    from pathlib import Path

    here = Path(__file__).resolve()
    words: set[str] = set()
    for path in here.parents[1].rglob("test_*.py"):
        if path != here:
            words |= set(re.findall(r"[A-Za-z_]\w*", path.read_text()))
    untested = [op.name for op in OPS.values()
                if not op.name.startswith("_") and not ({op.name, *op.aliases} & words)]
    assert untested == []

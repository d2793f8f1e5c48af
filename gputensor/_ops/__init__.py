"""The op namespace: imports every op declaration, then installs Tensor methods and operators.

Each module declares its ops into the registry (gputensor.kernels.registry.OPS) and the few
Tensor methods that are not ops (``tensor_method``: hand-written in-place forms, properties,
indexing) into ``TENSOR_METHODS``; this is the one place that sets them on Tensor. Nothing here
names individual ops except the Python operator protocol, which maps dunder methods to ops.
"""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode as _autocast
from gputensor.kernels.registry import OPS, TENSOR_METHODS

from . import (  # noqa: F401  (imported for their declarations)
    arrangement,
    complex_views,
    composite,
    conv,
    copying,
    creation,
    creation_extras,
    cumulative,
    decompositions,
    elementwise,
    hash_tensor,
    histogram,
    householder,
    indexing,
    ldl,
    linalg,
    lobpcg,
    math_extras,
    mode,
    nn,
    random,
    reduce,
    removed,
    rnn,
    sampling,
    scatter,
    shape,
    shape_extras,
    sort,
    special,
    spectral,
    statistics,
    tensor_apply,
    tensor_extras,
    tensor_misc,
    tensor_set,
    views,
    volumetric,
)

# PyTorch's other names for ops declared in this package (functions, methods and in-place
# methods alike), as torch/_refs and native_functions.yaml list them.
ALIASES = {
    "abs": ("absolute",), "acos": ("arccos",), "asin": ("arcsin",), "atan": ("arctan",),
    "atan2": ("arctan2",), "acosh": ("arccosh",), "asinh": ("arcsinh",),
    "atanh": ("arctanh",), "mul": ("multiply",), "sub": ("subtract",), "neg": ("negative",),
    "gt": ("greater",), "ge": ("greater_equal",), "lt": ("less",), "le": ("less_equal",),
    "ne": ("not_equal",), "trunc": ("fix",), "movedim": ("moveaxis",),
}


def _declare_aliases() -> None:
    for name, aliases in ALIASES.items():
        op = OPS[name]
        op.aliases = (*op.aliases, *(a for a in aliases if a not in op.aliases))


def _install_methods() -> None:
    # Methods that are not ops first: an op's method does not replace one of them (nor one
    # that _tensor.py defines).
    for name, method in TENSOR_METHODS.items():
        setattr(Tensor, name, method)
    for op in OPS.values():
        if op.name.startswith("_"):
            continue
        names = (op.name, *op.aliases)
        if op.method:
            for n in names:
                if n not in Tensor.__dict__:
                    setattr(Tensor, n, op.frontend)
        inplace = op.inplace_fn
        if op.inplace and inplace is not None:
            for n in names:
                if n + "_" not in Tensor.__dict__:
                    setattr(Tensor, n + "_", inplace)


def _binary(name: str, reflected: bool = False) -> Any:
    fn = OPS[name].frontend
    if not reflected:  # the frontend's first positional argument is self
        return getattr(fn, "operator", fn)   # (its (self, other) form where it has one)
    if name == "mul":   # PyTorch's __rmul__ is mul(self, other): the number second
        return fn
    if name == "true_divide":
        reciprocal, mul = OPS["reciprocal"].frontend, OPS["mul"].frontend

        def rdiv(self: Tensor, other: Any) -> Tensor:
            return mul(reciprocal(self), other)   # PyTorch's __rtruediv__, rounding included
        return rdiv

    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)
    return method


def _comparison(name: str) -> Any:
    fn = OPS[name].frontend

    def method(self: Tensor, other: Any) -> Any:
        if other is None or not isinstance(other, Tensor | int | float | complex):
            return NotImplemented  # lets Python fall back (x == None is False, like PyTorch)
        return fn(self, other)
    return method


def _inplace(name: str) -> Any:
    op = OPS.get(name)
    fn = op.inplace_fn if op is not None and op.inplace_fn is not None \
        else getattr(Tensor, name + "_")

    def method(self: Tensor, other: Any) -> Tensor:
        return fn(self, other)
    return method


_OPERATORS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _install_operators() -> None:
    for dunder, name in _OPERATORS.items():
        setattr(Tensor, f"__{dunder}__", _binary(name))
        setattr(Tensor, f"__r{dunder}__", _binary(name, reflected=True))
        setattr(Tensor, f"__i{dunder}__", _inplace(name))
    for dunder, name in _COMPARISONS.items():
        setattr(Tensor, f"__{dunder}__", _comparison(name))
    Tensor.__neg__ = OPS["neg"].frontend
    Tensor.__pos__ = lambda self: self
    Tensor.__abs__ = OPS["abs"].frontend
    Tensor.__invert__ = OPS["bitwise_not"].frontend
    if "matmul" in OPS:
        Tensor.__matmul__ = _binary("matmul")
        Tensor.__rmatmul__ = _binary("matmul", reflected=True)
    Tensor.__hash__ = lambda self: id(self)


_declare_aliases()
_autocast.wrap_ops(OPS)  # before the methods and operators take the frontends
_install_methods()
_install_operators()


def public_ops() -> dict[str, Any]:
    """Every public op and alias by name, for the gputensor namespace and __all__."""
    out = {}
    for op in OPS.values():
        if not op.name.startswith("_") and op.function:
            for n in (op.name, *op.aliases):
                out[n] = op.frontend
    return out

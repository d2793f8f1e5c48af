"""Elementwise ops: each declared once as a scalar expression plus a dtype rule.

The generic frontend here does what PyTorch's TensorIterator does before a kernel runs:
promotion, device checks, broadcasting, ``out=``/in-place checks and allocation. Backends
compile the expression (Numba on the CPU, CUDA C on the GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor import _dtype as D
from gputensor._device import CPU
from gputensor._tensor import Tensor
from gputensor.autograd.grad_mode import is_grad_enabled
from gputensor.kernels.registry import BACKENDS, OpDef, declare, memory_cost

from . import _core
from ._core import broadcast_shapes, check_out, empty, empty_cpu, result_type

# dtype rules: how the compute dtype and the output dtype follow from the promoted type.
_FLOAT_RESULT = ("float", "float_compare")
_BOOL_OUT = ("compare", "predicate", "float_compare")


def _rule_dtypes(op: OpDef, promoted: D.dtype) -> tuple[D.dtype, D.dtype]:
    rule = op.dtype_rule
    name = op.name
    if promoted is D.bool and op.extra.get("no_bool"):
        raise RuntimeError(op.extra["no_bool"] if isinstance(op.extra["no_bool"], str) else
                           f"{name}: not supported for bool tensors")
    if promoted.is_complex and op.extra.get("no_complex"):
        raise RuntimeError(f"{name}: not implemented for '{promoted.legacy_name}' (complex) "
                           f"tensors")
    if op.extra.get("float_only") and promoted.category <= D.INTEGRAL:
        raise RuntimeError(f"{name}: not implemented for '{promoted.legacy_name}' tensors")
    if rule == "int_only" and promoted.category > D.INTEGRAL:
        raise RuntimeError(f"{name}: only integer and bool tensors are supported, got "
                           f"{promoted}")
    if rule in _FLOAT_RESULT and promoted.category <= D.INTEGRAL:
        # isclose on integers compares in float64 so large values stay exact.
        promoted = D.float64 if rule == "float_compare" else D.get_default_dtype()
    if rule in _BOOL_OUT:
        return promoted, D.bool
    if rule == "abs":
        return promoted, promoted.to_real()
    return promoted, promoted


def _check_int_divisor(op: OpDef, compute: D.dtype, inputs: list) -> None:
    """Integer division by zero raises (as in PyTorch) instead of returning garbage."""
    if not op.extra.get("int_div") or compute.category > D.INTEGRAL:
        return
    b = inputs[1]
    zero = (b == 0).any().item() if isinstance(b, Tensor) else b == 0
    if zero and all(t.numel() for t in inputs if isinstance(t, Tensor)):
        raise RuntimeError(f"ZeroDivisionError: integer division by zero in {op.name}")


def _check_pow_exponent(op: OpDef, compute: D.dtype, inputs: list) -> None:
    # Like PyTorch, only a Python scalar exponent is rejected; tensor exponents wrap in ipow.
    if op.name != "pow" or compute.category > D.INTEGRAL or isinstance(inputs[1], Tensor):
        return
    if inputs[1] < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


def _check_bool_operands(op: OpDef, compute: D.dtype, inputs: list) -> None:
    """sub rejects a bool operand even when promotion would make the result an integer."""
    if not op.extra.get("reject_bool_operands"):
        return
    for x in inputs:
        if isinstance(x, bool) or (isinstance(x, Tensor) and x._dtype is D.bool):
            raise RuntimeError(op.extra["no_bool"])


def make_frontend(op: OpDef) -> tuple[Callable, Callable]:
    arity = op.arity
    param_names = op.params
    defaults = op.extra.get("defaults", {})
    checks = (_check_int_divisor, _check_pow_exponent, _check_bool_operands)
    param_map = op.extra.get("param_map")
    needs_checks = bool(op.extra.get("int_div") or op.extra.get("reject_bool_operands")) \
        or op.name == "pow"
    int_identity = bool(op.extra.get("int_identity"))
    rule_cache: dict[tuple[D.dtype, D.dtype], tuple[D.dtype, D.dtype]] = {}
    kernels: dict[str, Callable] = {}
    resolve_params = op.extra.get("resolve_params")

    default_params = tuple(defaults.get(k) for k in param_names)

    def prepare(args: tuple, kwargs: dict) -> tuple[list, tuple]:
        if not kwargs and len(args) == arity:
            return args, default_params
        if len(args) != arity:
            # Positional params after the inputs, e.g. leaky_relu(x, 0.2).
            if len(args) > arity and len(args) - arity <= len(param_names):
                for k, v in zip(param_names, args[arity:], strict=False):
                    kwargs.setdefault(k, v)
                args = args[:arity]
            else:
                raise TypeError(f"{op.name}() takes {arity} tensor argument(s), got {len(args)}")
        unknown = set(kwargs) - set(param_names)
        if unknown:
            raise TypeError(f"{op.name}() got unexpected keyword argument(s) {sorted(unknown)}")
        params = tuple(kwargs.get(k, defaults.get(k)) for k in param_names)
        if param_map:
            params = tuple(param_map[k][v] if k in param_map and v in param_map[k] else v
                           for k, v in zip(param_names, params, strict=True))
        return args, params

    def compute_and_run(inputs: list, params: tuple, out: Tensor | None,
                        inplace: Tensor | None) -> Tensor:
        t0 = None
        for x in inputs:
            if isinstance(x, Tensor):
                t0 = x
                break
        if t0 is None:
            raise TypeError(f"{op.name}(): expected at least one Tensor argument, got "
                            f"{[type(x).__name__ for x in inputs]}")
        # Fast path: all operands tensors of one dtype, device and shape.
        dt = t0._dtype
        shape = t0._shape
        dev = t0._storage.device
        same = True
        for x in inputs:
            if type(x) is not Tensor or x._dtype is not dt or x._shape != shape \
                    or x._storage.device is not dev:
                same = False
                break
        if not same:
            dt = result_type(*inputs)
            dev = _core.common_device(*inputs, op_name=op.name)
            shape = broadcast_shapes(*(x._shape for x in inputs if isinstance(x, Tensor)))
        rd = rule_cache.get((dt, D._default_dtype))
        if rd is None:
            rd = rule_cache[dt, D._default_dtype] = _rule_dtypes(op, dt)
        compute, out_dt = rd
        if needs_checks:
            for check in checks:
                check(op, compute, inputs)
        if resolve_params is not None:
            params = resolve_params(params, compute)
        if inplace is not None:
            if tuple(shape) != inplace._shape:
                raise RuntimeError(f"output with shape {list(inplace._shape)} doesn't match the "
                                   f"broadcast shape {list(shape)} (in {op.name}_)")
            if not D.can_cast(out_dt, inplace._dtype):
                raise RuntimeError(f"result type {out_dt.legacy_name} can't be cast to the "
                                   f"desired output type {inplace._dtype.legacy_name}")
            result = inplace
        elif out is not None:
            check_out(out, shape, out_dt, dev, op.name)
            result = out
        else:
            result = empty(shape, out_dt, dev)
        if int_identity and compute.category <= D.INTEGRAL:
            # floor/ceil/... of an integer is the integer itself
            BACKENDS[dev.type, "strided"].kernel("_copy")(result, inputs[:1], params, compute)
        else:
            k = kernels.get(dev.type)
            if k is None:
                k = kernels[dev.type] = BACKENDS[dev.type, "strided"].kernel(op.name)
            k(result, inputs, params, compute)
        if result is not inplace and out is None:
            return result
        result._storage._version += 1
        return result

    # dtype -> (compute, out) for operands that need no checks and whose rule doesn't depend on
    # the default dtype: the fast path below skips promotion, broadcasting and checks for them.
    fast_rules: dict[D.dtype, tuple[D.dtype, D.dtype]] = {}
    if resolve_params is None and not int_identity:
        for dt in D.DTYPES:
            if (dt.category <= D.INTEGRAL and (needs_checks or op.dtype_rule in _FLOAT_RESULT)):
                continue
            try:
                fast_rules[dt] = _rule_dtypes(op, dt)
            except RuntimeError:
                continue

    def frontend(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if kwargs or len(args) != arity:
            args, params = prepare(args, kwargs)
        else:
            params = default_params
        t0 = args[0]
        if out is None and type(t0) is Tensor:
            # Fast path: tensors of one dtype, shape and device.
            dt, shape, dev = t0._dtype, t0._shape, t0._storage.device
            for x in args:
                if type(x) is not Tensor or x._dtype is not dt or x._shape != shape or \
                        x._storage.device is not dev:
                    break
            else:
                rule = fast_rules.get(dt)
                if rule is not None:
                    result = empty_cpu(shape, rule[1]) if dev is CPU else empty(shape, rule[1], dev)
                    k = kernels.get(dev.type)
                    if k is None:
                        k = kernels[dev.type] = BACKENDS[dev.type, "strided"].kernel(op.name)
                    k(result, args, params, rule[0])
                    if op.derivative is not None and is_grad_enabled():
                        op.derivative.record(result, args, params)
                    return result
        result = compute_and_run(args, params, out, None)
        if op.derivative is not None and is_grad_enabled():
            op.derivative.record(result, args, params)
        return result

    def inplace_fn(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        inputs, params = prepare((self, *args), kwargs)
        return compute_and_run(inputs, params, None, self)

    frontend.__name__ = op.name
    inplace_fn.__name__ = op.name + "_"
    return frontend, inplace_fn


def elementwise(name: str, expr: str, arity: int = 1, dtype_rule: str = "promote",
                params: tuple[str, ...] = (), method: bool = True, inplace: bool = True,
                flops: int = 1, **extra: Any) -> OpDef:
    op = OpDef(name=name, frontend=None, expr=expr, arity=arity, params=params,
               dtype_rule=dtype_rule, method=method, inplace=inplace, cost=memory_cost(flops),
               extra=extra)
    op.frontend, op.extra["inplace_fn"] = make_frontend(op)
    return declare(op)


U, B, T = 1, 2, 3
_NO_BOOL_NEG = ("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
_NO_BOOL_SUB = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead.")

# -- arithmetic --------------------------------------------------------------------------------
elementwise("add", "a + alpha * b", B, params=("alpha",), defaults={"alpha": 1})
elementwise("sub", "a - alpha * b", B, params=("alpha",), defaults={"alpha": 1},
            no_bool=_NO_BOOL_SUB, reject_bool_operands=True)
elementwise("mul", "a * b", B)
elementwise("true_divide", "truediv(a, b)", B, "float")
elementwise("_div_trunc", "tdiv(a, b)", B, method=False, inplace=False, int_div=True,
            no_bool=True, no_complex=True)
elementwise("floor_divide", "floordiv(a, b)", B, int_div=True, no_complex=True, no_bool=True)
elementwise("remainder", "mod(a, b)", B, int_div=True, no_complex=True, no_bool=True)
elementwise("fmod", "fmod(a, b)", B, int_div=True, no_complex=True, no_bool=True)
elementwise("pow", "ipow(a, b)", B, flops=10, no_bool=True)
elementwise("atan2", "atan2(a, b)", B, "float", flops=20, no_complex=True)
elementwise("maximum", "maximum(a, b)", B, no_complex=True)
elementwise("minimum", "minimum(a, b)", B, no_complex=True)
# lerp's and square's frontends (composite.py) add PyTorch's dtype checks around these.
elementwise("_lerp", "a + c * (b - a) if abs(c) < 0.5 else b - (b - a) * (1 - c)", T, "float",
            method=False, inplace=False, flops=4)
elementwise("neg", "-a", no_bool=_NO_BOOL_NEG)
elementwise("abs", "abs(a)", dtype_rule="abs", no_bool=True)
elementwise("sign", "sign(a)", no_complex=True)
elementwise("sgn", "sign(a)")
elementwise("_square", "a * a", method=False, inplace=False)
elementwise("_conj", "np.conj(a)", method=False, inplace=False)
elementwise("reciprocal", "truediv(1, a)", dtype_rule="float")
elementwise("_clamp", "minimum(maximum(a, b), c)", T, method=False, inplace=False,
            no_complex=True, no_bool=True)
elementwise("_where", "b if a else c", T, method=False, inplace=False)
elementwise("_copy", "a", method=False, inplace=False, flops=0)


def _nan_to_num_defaults(params: tuple, compute: D.dtype) -> tuple:
    nan, posinf, neginf = params
    if compute.category >= D.FLOATING:
        info = D.finfo(compute)
        posinf = info.max if posinf is None else posinf
        neginf = info.min if neginf is None else neginf
    return (nan, 0 if posinf is None else posinf, 0 if neginf is None else neginf)


elementwise("nan_to_num", "nan_to_num(a, nan, posinf, neginf)", params=("nan", "posinf",
            "neginf"), defaults={"nan": 0.0}, resolve_params=_nan_to_num_defaults)

# -- transcendental (integers compute in the default float dtype) -------------------------------
for _name, _expr, _flops in [
    ("exp", "exp(a)", 20), ("exp2", "exp2(a)", 20), ("expm1", "expm1(a)", 20),
    ("log", "log(a)", 20), ("log2", "log2(a)", 20), ("log10", "log10(a)", 20),
    ("log1p", "log1p(a)", 20), ("sqrt", "sqrt(a)", 4), ("rsqrt", "rsqrt(a)", 5),
    ("sin", "sin(a)", 20), ("cos", "cos(a)", 20), ("tan", "tan(a)", 20),
    ("asin", "asin(a)", 20), ("acos", "acos(a)", 20), ("atan", "atan(a)", 20),
    ("sinh", "sinh(a)", 20), ("cosh", "cosh(a)", 20), ("tanh", "tanh(a)", 20),
    ("sigmoid", "sigmoid(a)", 22),
]:
    elementwise(_name, _expr, U, "float", flops=_flops)
elementwise("erf", "erf(a)", U, "float", flops=20, no_complex=True)

# -- activations -----------------------------------------------------------------------------
elementwise("relu", "relu(a)", no_complex=True, no_bool="relu: not supported for bool tensors")
elementwise("gelu", "gelu_tanh(a) if approximate else gelu_erf(a)", U, "float",
            params=("approximate",), defaults={"approximate": 0}, flops=25, no_complex=True,
            param_map={"approximate": {"none": 0, "tanh": 1}}, float_only=True)
elementwise("silu", "a * sigmoid(a)", U, "float", flops=23, float_only=True)
elementwise("softplus", "softplus(a, beta, threshold)", U, "float", params=("beta", "threshold"),
            defaults={"beta": 1.0, "threshold": 20.0}, flops=25, no_complex=True,
            float_only=True)
elementwise("leaky_relu", "a if a > 0 else a * negative_slope", U, "float",
            params=("negative_slope",), defaults={"negative_slope": 0.01}, no_complex=True,
            float_only=True)
elementwise("elu", "a * scale if a > 0 else (exp(a * input_scale) - 1) * alpha * scale", U,
            "float", params=("alpha", "scale", "input_scale"),
            defaults={"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}, flops=22, no_complex=True,
            float_only=True)


def _hardtanh_limits(params: tuple, compute: D.dtype) -> tuple:
    if compute is D.uint8 and min(params) < 0:
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return params


elementwise("hardtanh", "min_val if a < min_val else (max_val if a > max_val else a)", U,
            params=("min_val", "max_val"), defaults={"min_val": -1.0, "max_val": 1.0},
            no_complex=True, no_bool="hardtanh: not supported for bool tensors",
            resolve_params=_hardtanh_limits)

# -- rounding (identities on integers, as in PyTorch) ------------------------------------------
for _name in ("floor", "ceil", "trunc"):
    elementwise(_name, f"{_name}(a)", no_complex=True, no_bool=True, int_identity=True)
# Not int_identity (that path runs the param-less _copy kernel): round_decimals keeps ints.
elementwise("round", "round_decimals(a, decimals)", params=("decimals",),
            defaults={"decimals": 0}, no_complex=True, no_bool=True)
elementwise("frac", "a - trunc(a)", no_complex=True, float_only=True)

# -- predicates and comparisons ----------------------------------------------------------------
elementwise("isnan", "isnan(a)", dtype_rule="predicate", inplace=False)
elementwise("isinf", "isinf(a)", dtype_rule="predicate", inplace=False)
elementwise("isfinite", "isfinite(a)", dtype_rule="predicate", inplace=False)
elementwise("signbit", "np.signbit(a)", dtype_rule="predicate", inplace=False, no_complex=True)
for _name, _sym in [("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                    ("ge", ">=")]:
    elementwise(_name, f"a {_sym} b", B, "compare",
                no_complex=_name not in ("eq", "ne"))
elementwise("_isclose", "(a == b) or (equal_nan and isnan(a) and isnan(b)) or (isfinite(a) and "
            "isfinite(b) and abs(a - b) <= real(atol) + real(rtol) * abs(b))", B, "float_compare",
            params=("rtol", "atol", "equal_nan"), method=False, inplace=False, flops=6)
elementwise("logical_and", "(a != 0) and (b != 0)", B, "compare")
elementwise("logical_or", "(a != 0) or (b != 0)", B, "compare")
elementwise("logical_xor", "(a != 0) != (b != 0)", B, "compare")
elementwise("logical_not", "not (a != 0)", U, "compare")

# -- bitwise -----------------------------------------------------------------------------------
elementwise("bitwise_and", "a & b", B, "int_only")
elementwise("bitwise_or", "a | b", B, "int_only")
elementwise("bitwise_xor", "a ^ b", B, "int_only")
elementwise("bitwise_not", "bitnot(a)", U, "int_only")
elementwise("bitwise_left_shift", "lshift(a, b)", B, "int_only", no_bool=True)
elementwise("bitwise_right_shift", "rshift(a, b)", B, "int_only", no_bool=True)


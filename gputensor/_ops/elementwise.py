"""Elementwise ops: each declared once as a scalar expression plus a dtype rule.

The generic frontend here does what PyTorch's TensorIterator does before a kernel runs:
promotion, device checks, broadcasting, ``out=``/in-place checks and allocation. Backends
compile the expression (Numba on the CPU, CUDA C on the GPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor import _limited
from gputensor._device import CPU
from gputensor._op_hook import OP_HOOK
from gputensor._tensor import _STRIDES_CACHE, Tensor, contiguous_strides
from gputensor.autograd.derivatives import Derivative, NoDerivative
from gputensor.autograd.formulas import cj, masked
from gputensor.autograd.forward_ad import _state as _fw_state
from gputensor.autograd.grad_mode import is_grad_enabled
from gputensor.autograd.inplace import apply_inplace, needs_graph
from gputensor.autograd.jvp import AUTO_ELEMENT_WISE, elementwise_jvp
from gputensor.func._state import VMAP
from gputensor.kernels.allocation import empty_with_strides
from gputensor.kernels.layout import broadcast_strides, dense_strides, is_dense, iteration_order
from gputensor.kernels.registry import BACKENDS, OPS, OpDef, declare, kernel_cache, memory_cost

from . import _core
from ._core import broadcast_shapes, check_out, empty, empty_cpu, result_type
from ._overlap import check_overlap
from ._scalar_range import check_python_int, checked_fill_value

# dtype rules: how the compute dtype and the output dtype follow from the promoted type.
_FLOAT_RESULT = ("float", "float_compare", "real_float")  # real_float: complex gives real
_BOOL_OUT = ("compare", "predicate", "float_compare")


def _rule_dtypes(op: OpDef, promoted: D.dtype) -> tuple[D.dtype, D.dtype]:
    rule = op.dtype_rule
    name = op.name
    if promoted is D.bool and op.no_bool:
        raise RuntimeError(op.no_bool if isinstance(op.no_bool, str) else
                           f"{name}: not supported for bool tensors")
    if promoted.is_complex and op.no_complex:
        raise RuntimeError(f"{name}: not implemented for '{promoted.legacy_name}' (complex) "
                           f"tensors")
    if op.float_only and promoted.category <= D.INTEGRAL:
        raise RuntimeError(f"{name}: not implemented for '{promoted.legacy_name}' tensors")
    if rule == "int_only" and promoted.category > D.INTEGRAL:
        raise RuntimeError(f"{name}: only integer and bool tensors are supported, got "
                           f"{promoted}")
    if rule in _FLOAT_RESULT and promoted.category <= D.INTEGRAL:
        # isclose on integers compares in float64 so large values stay exact.
        promoted = D.float64 if rule == "float_compare" else D.get_default_dtype()
    if rule in _BOOL_OUT:
        return promoted, D.bool
    if rule in ("abs", "real_float"):
        return promoted, promoted.to_real()
    if rule == "int32":
        return promoted, D.int32
    return promoted, promoted


def _check_int_divisor(op: OpDef, compute: D.dtype, inputs: list) -> None:
    """Integer division by zero raises (as in PyTorch) instead of returning garbage."""
    if not op.int_div or compute.category > D.INTEGRAL:
        return
    b = inputs[1]
    zero = (b == 0).any().item() if isinstance(b, Tensor) else b == 0
    if zero and all(t.numel() for t in inputs if isinstance(t, Tensor)):
        raise RuntimeError(f"ZeroDivisionError: integer division by zero in {op.name}")


def _check_pow_exponent(op: OpDef, compute: D.dtype, inputs: list) -> None:
    # Like PyTorch, only a Python scalar exponent is rejected; tensor exponents wrap in ipow.
    if not op.int_pow or compute.category > D.INTEGRAL:
        return
    if compute is D.bool and type(inputs[1]) is not bool:
        # PyTorch computes bool ** (Python bool) in bool; any other all-bool pow has no kernel
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    if isinstance(inputs[1], Tensor):
        return
    if inputs[1] < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    # converted to int64, then to the base's dtype: uint8 ** 300 raises
    checked_fill_value(checked_fill_value(inputs[1], D.int64), compute)


def _check_bool_operands(op: OpDef, compute: D.dtype, inputs: list) -> None:
    """sub rejects a bool operand even when promotion would make the result an integer."""
    if not op.reject_bool_operands:
        return
    for x in inputs:
        if isinstance(x, bool) or (isinstance(x, Tensor) and x._dtype is D.bool):
            raise RuntimeError(op.no_bool if isinstance(op.no_bool, str) else
                               f"{op.name}: bool operands are not supported")


def _check_int_quotient(op: OpDef, compute: D.dtype, inputs: list) -> None:
    """addcdiv refuses to divide an integer tensor by another (PyTorch's rule)."""
    b, c = inputs[1], inputs[2]
    if all(isinstance(x, Tensor) and x._dtype.category <= D.INTEGRAL for x in (b, c)):
        raise RuntimeError(op.int_quotient)


def _bind_params(op: OpDef, args: tuple, kwargs: dict) -> tuple[tuple, tuple]:
    """(inputs, params) of a call: params from keywords, positions after the inputs (e.g.
    ``leaky_relu(x, 0.2)``) or defaults, mapped to the kernel's values (``param_map``)."""
    arity, names, defaults = op.arity, op.params, op.defaults
    if len(args) != arity:
        if len(args) > arity and len(args) - arity <= len(names):
            for k, v in zip(names, args[arity:], strict=False):
                kwargs.setdefault(k, v)
            args = args[:arity]
        else:
            raise TypeError(f"{op.name}() takes {arity} tensor argument(s), got {len(args)}")
    unknown = set(kwargs) - set(names)
    if unknown:
        raise TypeError(f"{op.name}() got unexpected keyword argument(s) {sorted(unknown)}")
    params = tuple(kwargs.get(k, defaults.get(k)) for k in names)
    if op.param_map:
        params = tuple(op.param_map[k][v] if k in op.param_map and v in op.param_map[k] else v
                       for k, v in zip(names, params, strict=True))
    return args, params


def _broadcast(op: OpDef, inputs: list) -> tuple[list, D.dtype, Any, tuple[int, ...]] | None:
    """(inputs, promoted dtype, device, broadcast shape) of an elementwise call off the fast
    path; None when a sparse operand routes it to the sparse elementwise path. Promotion and
    device checks happen here, before any kernel."""
    # Plain loops, not generators: this runs on every call off the fast path.
    t0 = None
    for x in inputs:
        if isinstance(x, Tensor):
            t0 = x
            break
    if t0 is None:
        raise TypeError(f"{op.name}(): expected at least one Tensor argument, got "
                        f"{[type(x).__name__ for x in inputs]}")
    dt, dev, shape = t0._dtype, t0._storage.device, t0._shape
    same = True        # every operand an exact Tensor of t0's dtype and device...
    same_shape = True  # ...and of its shape
    for x in inputs:
        if type(x) is not Tensor or x._dtype is not dt or x._storage.device is not dev:
            same = False
            break
        if x._shape != shape:
            same_shape = False
    if same:  # no promotion or device moves; broadcasting only when the shapes differ
        if not same_shape:
            shapes = []
            for x in inputs:
                shapes.append(x._shape)
            shape = broadcast_shapes(*shapes)
        return inputs, dt, dev, shape
    for x in inputs:
        if type(x) is int:
            check_python_int(x)
    if any(getattr(x, "_sparse", False) for x in inputs):  # never meets a dense kernel
        return None
    dt = result_type(*inputs)
    dev = _core.common_device(*inputs, op_name=op.name)
    if dev.type != "cpu":  # 0-dim CPU tensors join a device op as scalars, moved over
        inputs = [x.to(dev) if isinstance(x, Tensor) and x._storage.device is not dev else x
                  for x in inputs]
    return inputs, dt, dev, broadcast_shapes(*(x._shape for x in inputs if isinstance(x, Tensor)))


def _output_strides(shape: tuple[int, ...], inputs: list) -> tuple[int, ...] | None:
    """The strides of a new output, as PyTorch's TensorIterator lays it out: None (row-major)
    unless the tensor operands order the dims otherwise (``x.t() * 2`` keeps x.t()'s layout)."""
    if len(shape) < 2:
        return None
    contiguous = contiguous_strides(shape)
    operand_strides = []
    for x in inputs:
        if isinstance(x, Tensor) and x._shape:
            st = x._stride if x._shape == shape else \
                broadcast_strides(shape, x._shape, x._stride)
            if st == contiguous and not operand_strides:
                return None   # the first operand orders every pair of dims, row-major
            operand_strides.append(st)
    if not operand_strides:
        return None
    strides = dense_strides(shape, iteration_order(shape, operand_strides))
    return None if strides == contiguous else strides


def _result(op: OpDef, shape: tuple[int, ...], out_dt: D.dtype, dev: Any, out: Any,
            inplace: Tensor | None) -> Tensor:
    """The tensor the kernel writes: the in-place target or ``out=``, checked against the
    broadcast shape and result dtype."""
    if inplace is not None:
        if tuple(shape) != inplace._shape:
            raise RuntimeError(f"output with shape {list(inplace._shape)} doesn't match the "
                               f"broadcast shape {list(shape)} (in {op.name}_)")
        if not D.can_cast(out_dt, inplace._dtype):
            raise RuntimeError(f"result type {out_dt.legacy_name} can't be cast to the "
                               f"desired output type {inplace._dtype.legacy_name}")
        return inplace
    check_out(out, shape, out_dt, dev, op.name)
    return out


def _fast_rules(op: OpDef) -> dict[D.dtype, tuple[D.dtype, D.dtype]]:
    """dtype -> (compute, out) for operands that need no checks and whose rule doesn't depend
    on the default dtype: the fast paths skip promotion, broadcasting and checks for them."""
    rules: dict[D.dtype, tuple[D.dtype, D.dtype]] = {}
    if op.resolve_params is not None or op.int_identity:
        return rules
    needs_checks = op.int_div or op.reject_bool_operands or op.int_pow or op.int_quotient
    for dt in D.DTYPES:
        if dt.category <= D.INTEGRAL and (needs_checks or op.dtype_rule in _FLOAT_RESULT):
            continue
        try:
            rules[dt] = _rule_dtypes(op, dt)
        except RuntimeError:
            continue
    return rules


def make_frontend(op: OpDef) -> tuple[Callable, Callable]:
    """The op's frontend and in-place form: a fast path for operands of one dtype, shape and
    device (and dtype-keeping Python numbers), else the plan (promotion, checks, broadcast,
    output), then the backend kernel, looked up once per device type."""
    arity = op.arity
    checks = [c for c, on in ((_check_int_divisor, op.int_div), (_check_pow_exponent, op.int_pow),
                              (_check_bool_operands, op.reject_bool_operands),
                              (_check_int_quotient, op.int_quotient)) if on]
    rule_cache: dict[tuple[D.dtype, D.dtype], tuple[D.dtype, D.dtype]] = {}
    fast_rules = _fast_rules(op)
    default_params = tuple(op.defaults.get(k) for k in op.params)
    kernels = kernel_cache()  # device type -> kernel; emptied when the profiler swaps tables
    vmap = VMAP
    hook = OP_HOOK   # below autograd: the kernel call may go to an op hook handler
    cached_kernel = kernels.get
    resolve_params, int_identity = op.resolve_params, op.int_identity
    checks_alpha = op.name in ("add", "sub")
    refuses_complex_inplace = op.name == "abs"  # a real result cannot replace complex values
    integral_noop_inplace = op.inplace_integral_noop
    tensor_operands = op.tensor_operands
    has_lane = op.name in LANE_OPS
    unary_lane = arity == 1 and not op.params and not op.name.startswith("_") and \
        all(fast_rules.get(dt) == (dt, dt) for dt in (D.float32, D.float64))

    def load_kernel(device_type: str) -> Callable:
        k = kernels[device_type] = BACKENDS[device_type, "strided"].kernel(op.name)
        # the kernel's allocating form and binary lane (CPU ufunc ops); never a profiler's or
        # a capture's wrapper's copy of them, which would bypass the recording
        raw = hasattr(k, "_gt_profiler_raw")
        kernels[device_type, "allocating"] = None if raw else getattr(k, "allocating", None)
        make_lane = None if raw else getattr(k, "make_lane", None)
        kernels[device_type + ".lane"] = None if make_lane is None else \
            make_lane(op.derivative.lane_recorder(default_params))
        kernels[device_type + ".ilane"] = None if raw else getattr(k, "inplace_lane", None)
        make_unary_lane = None if raw else getattr(k, "make_unary_lane", None)
        kernels[device_type + ".ulane"] = None if make_unary_lane is None else \
            make_unary_lane(op.derivative.lane_recorder(default_params).unary
                            if isinstance(op.derivative, Derivative) else None)
        return k

    def load_lane(which: str = "cpu.lane") -> Callable | None:
        load_kernel("cpu")
        return cached_kernel(which)

    def compute_and_run(inputs: list, params: tuple, out: Tensor | None,
                        inplace: Tensor | None) -> Tensor:
        if inplace is not None:
            check_overlap(inplace, inputs)
        elif isinstance(out, Tensor):  # anything else is refused by check_out below
            check_overlap(out, inputs)
        if _limited.limited_operand(inputs) is not None:  # uint16, float8, ... (_limited.py)
            return _limited.elementwise_entry(op.name, inputs, params, out, inplace)
        planned = _broadcast(op, inputs)
        if planned is None:
            from gputensor.sparse._elementwise import route
            return route(op.name, inputs, params, out, inplace)
        inputs, dt, dev, shape = planned
        rd = rule_cache.get((dt, D._default_dtype))
        if rd is None:
            rd = rule_cache[dt, D._default_dtype] = _rule_dtypes(op, dt)
        compute, out_dt = rd
        if checks_alpha and params is not default_params:
            _check_alpha(params[0], out_dt)
        for check in checks:
            check(op, compute, inputs)
        if resolve_params is not None:
            params = resolve_params(params, compute)
        run_op = None
        if compute in _REDUCED_FLOATS:
            name, inputs = _reduced_float_numbers(op.name, inputs, compute)
            if name != op.name:
                run_op = BACKENDS[dev.type, "strided"].kernel(name)
        if out is None and inplace is None:
            strides = _output_strides(shape, inputs)
            result = empty(shape, out_dt, dev) if strides is None else \
                empty_with_strides(shape, strides, out_dt, dev)
        else:
            result = _result(op, shape, out_dt, dev, out, inplace)
        # An out= of another dtype takes the result rounded (or wrapped) to the result dtype
        # first, as in PyTorch: compute into a temporary, then cast it over.
        target = result if result._dtype is out_dt else empty(shape, out_dt, dev)
        if int_identity and compute.category <= D.INTEGRAL:
            # floor/ceil/... of an integer is the integer itself
            BACKENDS[dev.type, "strided"].kernel("_copy")(target, inputs[:1], params, compute)
        elif run_op is not None:
            run_op(target, inputs, (), compute)
        else:
            (cached_kernel(dev.type) or load_kernel(dev.type))(target, inputs, params, compute)
        if target is not result:
            BACKENDS[dev.type, "strided"].kernel("_copy")(result, [target], (), out_dt)
        if result is not inplace and out is None:
            return result
        result._storage._version += 1
        return result

    def frontend(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if vmap.depth:   # gt.func.vmap: batched operands go to the elementwise batching rule
            result = vmap.dispatch(op.name, frontend, args, kwargs if out is None else
                                   {**kwargs, "out": out})
            if result is not NotImplemented:
                return result
        if kwargs or len(args) != arity:
            args, params = _bind_params(op, args, kwargs)
        else:
            params = default_params
        if tensor_operands:
            _check_tensor_operands(op.name, args)
        t0 = args[0]
        if out is None and not hook.active and isinstance(t0, Tensor):
            # Fast path: tensors (or Parameters) of one dtype, shape and device, and Python
            # numbers that don't change the dtype.
            dt, shape, dev = t0._dtype, t0._shape, t0._storage.device
            if (kind := _same_kind(args, dt, shape, dev)) and (
                    len(shape) < 2 or (st := t0._stride) is _STRIDES_CACHE.get(shape)
                    or st == contiguous_strides(shape)
                    or (is_dense(shape, st) and _same_strides(args, st))):
                rule = fast_rules.get(dt)
                if rule is not None:
                    if checks_alpha and params is not default_params:
                        _check_alpha(params[0], dt)
                    if dev is CPU and rule[0] is rule[1]:
                        alloc = cached_kernel(("cpu", "allocating"), _UNLOADED)
                        if alloc is _UNLOADED:
                            load_kernel("cpu")
                            alloc = cached_kernel(("cpu", "allocating"))
                        result = alloc(args, params, rule[0]) if alloc is not None else None
                        if result is not None:
                            if kind == 2 and is_grad_enabled():
                                op.derivative.record(result, args, params)
                            if _fw_state.active:
                                elementwise_jvp(op, result, args, params)
                            return result
                    if len(shape) > 1 and t0._stride != contiguous_strides(shape):
                        # PyTorch's fast set-up: operands of one dense layout keep it
                        result = empty_with_strides(shape, t0._stride, rule[1], dev)
                    else:
                        result = empty_cpu(shape, rule[1]) if dev is CPU else \
                            empty(shape, rule[1], dev)
                    (cached_kernel(dev.type) or load_kernel(dev.type))(result, args, params,
                                                                       rule[0])
                    if kind == 2 and is_grad_enabled():
                        op.derivative.record(result, args, params)
                    if _fw_state.active:
                        elementwise_jvp(op, result, args, params)
                    return result
        result = compute_and_run(args, params, out, None) if not hook.active else hook.call(
            op.name, (*args, *params), {}, lambda: compute_and_run(args, params, out, None))
        if is_grad_enabled():
            if out is not None and needs_graph(out, args, {}):
                raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support "
                                   f"automatic differentiation, but one of the arguments "
                                   f"requires grad.")
            op.derivative.record(result, args, params)
        if _fw_state.active:
            elementwise_jvp(op, result, args, params)
        return result

    def inplace_fn(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if has_lane and len(args) == 1 and not kwargs and \
                not (vmap.depth or hook.active or _fw_state.active):
            ilane = cached_kernel("cpu.ilane", _UNLOADED)
            if ilane is _UNLOADED:
                ilane = load_lane("cpu.ilane")
            if ilane is not None and ilane(self, args[0]) is not None:
                return self
        if vmap.depth:
            result = vmap.dispatch(op.name + "_", inplace_fn, (self, *args), kwargs)
            if result is not NotImplemented:
                return result
        if refuses_complex_inplace and self._dtype.is_complex:
            raise RuntimeError(f"In-place {op.name} is not supported for complex tensors.")
        if integral_noop_inplace and self._dtype.category <= D.INTEGRAL:
            return self
        if needs_graph(self, args, kwargs):
            if self._sparse:   # a sparse tensor takes the new entries and the history
                from gputensor.sparse._autograd_inplace import apply_sparse_inplace
                return apply_sparse_inplace(self, lambda src: frontend(src, *args, **kwargs))
            # A formula that reads ``a`` needs self's value from before the write: save a copy
            # (PyTorch's original_self). Formulas of ``out`` (exp_, sigmoid_) need none.
            src = self.clone() if _reads_self(op, self, args, kwargs) else self
            return apply_inplace(self, lambda: frontend(src, *args, **kwargs))
        if not kwargs and len(args) == arity - 1:
            # Fast path (optimizer updates: p.mul_(0.9), p.add_(g)): the result keeps self's
            # dtype and shape, so no promotion, broadcasting or cast checks are needed.
            inputs = (self, *args)
            dt = self._dtype
            rule = fast_rules.get(dt)
            dev = self._storage.device
            if rule is not None and rule[1] is dt and _same_kind(inputs, dt, self._shape, dev):
                check_overlap(self, inputs)
                (cached_kernel(dev.type) or load_kernel(dev.type))(self, inputs, default_params,
                                                                   rule[0])
                self._storage._version += 1
                return self
        if kwargs or len(args) != arity - 1:
            inputs, params = _bind_params(op, (self, *args), kwargs)
        else:
            inputs, params = (self, *args), default_params
        if tensor_operands:
            _check_tensor_operands(op.name, inputs)
        return compute_and_run(inputs, params, None, self)

    # Binary ops with a CPU lane (kernels/cpu/elementwise.py): the commonest call (float
    # tensors of one shape and layout, or a tensor and a number) is checked and run in one
    # pass by the lane, which returns None for anything else; then the frontend's plan runs.
    # The operator form (Tensor.__add__...) takes exactly (self, other).
    def lane_frontend(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if out is None and len(args) == 2 and not kwargs and \
                not (vmap.depth or hook.active or _fw_state.active):
            lane = cached_kernel("cpu.lane", _UNLOADED)
            if lane is _UNLOADED:
                lane = load_lane()
            if lane is not None and (result := lane(*args)) is not None:
                return result
        return frontend(*args, out=out, **kwargs)

    def operator(self: Tensor, other: Any) -> Tensor:
        if not (vmap.depth or hook.active or _fw_state.active):
            lane = cached_kernel("cpu.lane", _UNLOADED)
            if lane is _UNLOADED:
                lane = load_lane()
            if lane is not None and (result := lane(self, other)) is not None:
                return result
        return frontend(self, other)

    # Parameterless unary ops whose float32/float64 result keeps the dtype: the CPU kernel's
    # unary lane (the same checks for one operand, no grad) before the frontend.
    def unary_frontend(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if out is None and len(args) == 1 and not kwargs and \
                not (vmap.depth or hook.active or _fw_state.active):
            lane = cached_kernel("cpu.ulane", _UNLOADED)
            if lane is _UNLOADED:
                lane = load_lane("cpu.ulane")
            if lane is not None and (result := lane(args[0])) is not None:
                return result
        return frontend(*args, out=out, **kwargs)

    frontend.__name__ = op.name
    inplace_fn.__name__ = op.name + "_"
    if unary_lane:
        unary_frontend.__name__ = op.name
        return unary_frontend, inplace_fn
    if not has_lane:
        return frontend, inplace_fn
    lane_frontend.__name__ = operator.__name__ = op.name
    lane_frontend.operator = operator  # type: ignore[attr-defined]
    return lane_frontend, inplace_fn


def _check_alpha(alpha: Any, dtype: D.dtype) -> None:
    """add/sub's ``alpha`` must suit the result dtype (PyTorch's alpha_check)."""
    if isinstance(alpha, bool | np.bool_) and dtype is not D.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float | np.floating) and dtype.category <= D.INTEGRAL:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    if isinstance(alpha, complex | np.complexfloating) and not dtype.is_complex:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex "
                           "number.")
    if dtype.is_floating_point and isinstance(alpha, float | int | np.floating | np.integer) \
            and not isinstance(alpha, bool | np.bool_):
        checked_fill_value(alpha, dtype)   # float16 alpha=70000: PyTorch's overflow error


def _check_tensor_operands(name: str, args: Sequence[Any]) -> None:
    """PyTorch's TypeError for a Python number where its signature takes only Tensors."""
    for i, (x, arg) in enumerate(zip(args, ("input", "other", "third"), strict=False)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {i + 1}) must be Tensor, not "
                            f"{type(x).__name__}")


_UNLOADED = object()  # a kernel cache slot not filled yet
# The ops whose CPU kernels have a binary lane (make_lane: NumPy's one-operation ufuncs).
LANE_OPS = frozenset(("add", "sub", "mul", "true_divide"))


def _same_strides(args: tuple, stride: tuple[int, ...]) -> bool:
    """Whether every tensor operand has these strides (numbers pass)."""
    for x in args:
        if isinstance(x, Tensor) and x._stride != stride:
            return False
    return True


_REDUCED_FLOATS = (D.float16, D.bfloat16)
# Operands that PyTorch's CPU kernels read at float precision when they are Python numbers
# (``iter.original_scalar_value<opmath_t>(2)`` in mul and the divisions; lerp's scalar
# weight), instead of narrowing them to the tensor's 16-bit dtype.
_FLOAT_NUMBER_OPERANDS = {"mul": 1, "true_divide": 1, "floor_divide": 1, "_div_floor": 1,
                          "_div_trunc": 1, "_lerp": 2}
_NUMBERS = (float, int, bool)


def _narrowed(value: Any, dt: D.dtype) -> float:
    """A Python number as TensorIterator casts it into float16/bfloat16 (through float, as
    c10's conversions do): 65519 is 65504 in float16, 70000 is inf."""
    with np.errstate(over="ignore"):
        try:
            single = np.float32(value)
        except OverflowError:   # an int past every float's range
            single = np.float32(math.copysign(math.inf, value))
        return float(dt.np_dtype.type(single))


def _reduced_float_numbers(op_name: str, inputs: list, dt: D.dtype) -> tuple[str, list]:
    """(the op to run, its operands) for float16/bfloat16 math with Python number operands,
    as PyTorch's CPU kernels take them: narrowed to the 16-bit dtype (x + 65519 adds 65504),
    except the operands in _FLOAT_NUMBER_OPERANDS, read in float; a true division by a
    number multiplies by its float reciprocal (x / 0.3 is x * float(1 / 0.3f))."""
    kept = _FLOAT_NUMBER_OPERANDS.get(op_name)
    if kept is not None and op_name == "true_divide" and type(inputs[1]) in _NUMBERS:
        with np.errstate(divide="ignore", over="ignore"):
            inputs = [inputs[0], float(np.float32(1) / np.float32(inputs[1]))]
        op_name = "mul"
    return op_name, [x if i == kept or type(x) not in _NUMBERS else _narrowed(x, dt)
                     for i, x in enumerate(inputs)]


def _same_kind(args: tuple, dt: D.dtype, shape: tuple, dev: Any) -> int:
    """Whether every operand is a tensor of dtype ``dt``, ``shape`` and device ``dev``, or a
    Python number that keeps ``dt`` (a float with a float tensor, an int with a non-bool one):
    0 if not, else 2 when a tensor operand requires grad and 1 when none does."""
    kind = 1
    for x in args:
        tx = type(x)
        if tx is float:
            if not dt.is_floating_point or dt in _REDUCED_FLOATS:
                return 0   # (16-bit math takes its numbers through _reduced_float_numbers)
        elif tx is int:
            if dt is D.bool or dt in _REDUCED_FLOATS or \
                    not D.SCALAR_INT_MIN <= x < D.SCALAR_INT_END:
                return 0
        elif (type(x) is not Tensor and (not isinstance(x, Tensor) or x._sparse)) or \
                x._dtype is not dt or x._shape != shape or x._storage.device is not dev:
            return 0   # (exact Tensors skip the isinstance/_sparse checks: the hot path)
        elif x._requires_grad:
            kind = 2
    return kind


# op name -> the inputs whose derivative formula reads input a (computed on first use)
_READS_A: dict[str, frozenset[str]] = {}


def _reads_self(op: OpDef, self: Tensor, args: tuple, kwargs: dict) -> bool:
    """Whether the formula of an input that needs a gradient reads input ``a`` (self)."""
    readers = _READS_A.get(op.name)
    if readers is None:
        names = getattr(op.derivative, "_names", {})
        readers = _READS_A[op.name] = frozenset(k for k, v in names.items() if "a" in v)
    if not readers:
        return False
    inputs = dict(zip(("a", "b", "c"), (self, *args), strict=False))
    if any(isinstance(v, Tensor) and v._requires_grad for v in kwargs.values()):
        return True
    return any(isinstance(inputs.get(k), Tensor) and inputs[k]._requires_grad for k in readers)


def _route_scalar_pow(pow_op: OpDef, scalar_op: OpDef, scalar_base_op: OpDef) -> None:
    """pow(complex tensor, Python number) runs ``scalar_op`` (ipow_scalar: PyTorch's special
    exponents 0, 1, 2, 3, -2, 0.5, -0.5, -1 of its Tensor-Scalar pow), pow(Python number,
    complex tensor) ``scalar_base_op`` (base 1 gives ones); their graph nodes are pow's.
    Any other call keeps pow's own frontend."""
    frontend, inplace_fn = pow_op.frontend, pow_op.inplace_fn
    scalar_frontend, scalar_inplace = scalar_op.frontend, scalar_op.inplace_fn
    scalar_op.derivative = scalar_base_op.derivative = pow_op.derivative

    def routed(a: Any, b: Any) -> bool:
        return isinstance(a, Tensor) and isinstance(b, int | float | complex) and \
            (a._dtype.is_complex or isinstance(b, complex))

    def positional(args: tuple, kwargs: dict, names: tuple[str, ...]) -> tuple[tuple, dict]:
        """PyTorch's keywords (input= or self=, exponent=) as positions, where they fill
        them."""
        if "self" in kwargs and "input" not in kwargs:
            kwargs = {("input" if k == "self" else k): v for k, v in kwargs.items()}
        rest = names[len(args):]
        if kwargs and set(kwargs) == set(rest):
            return (*args, *(kwargs[n] for n in rest)), {}
        return args, kwargs

    def pow(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        args, kwargs = positional(args, kwargs, ("input", "exponent"))
        if len(args) == 2 and not kwargs:
            if routed(*args):
                return scalar_frontend(*args, out=out)
            if routed(args[1], args[0]) and not isinstance(args[0], bool):  # True isn't 1
                return scalar_base_op.frontend(*args, out=out)
        return frontend(*args, out=out, **kwargs)

    def pow_(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        args, kwargs = positional(args, kwargs, ("exponent",))
        if len(args) == 1 and not kwargs and routed(self, args[0]):
            return scalar_inplace(self, *args)
        return inplace_fn(self, *args, **kwargs)

    pow_op.frontend, pow_op.inplace_fn = pow, pow_


def elementwise(name: str, expr: str, arity: int = 1, dtype_rule: str = "promote",
                params: tuple[str, ...] = (), method: bool = True, inplace: bool = True,
                flops: int = 1, grad: tuple[str | None, ...] | None = None,
                jvp: Any = AUTO_ELEMENT_WISE, **rules: Any) -> OpDef:
    """Declare an elementwise op: its expression over inputs a, b, c and params, its dtype
    rule, ``grad``, one derivative formula per input (None: not differentiable there), ``jvp``,
    its forward rule (gputensor.autograd.jvp; pointwise ops whose formulas are linear in ``g``
    keep the default, the backward formulas reused with the tangent as ``g``), and ``rules``,
    OpDef's typed elementwise fields (``no_bool``, ``defaults``, ...)."""
    op = OpDef(name=name, frontend=None, expr=expr, arity=arity, params=params,
               dtype_rule=dtype_rule, method=method, inplace=inplace, cost=memory_cost(flops),
               **rules)
    names = ("a", "b", "c")[:arity]
    if grad is not None:
        op.derivative = Derivative(name, dict(zip(names, grad, strict=True)), names + params,
                                   defaults=op.defaults or None, jvp=jvp)
        op.derivative.check_functions()
    else:
        op.derivative = NoDerivative(name)
    op.frontend, op.inplace_fn = make_frontend(op)
    return declare(op)


U, B, T = 1, 2, 3
_NO_BOOL_NEG = ("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
_NO_BOOL_SUB = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead.")

# -- arithmetic --------------------------------------------------------------------------------
elementwise("add", "a + alpha * b", B, params=("alpha",), defaults={"alpha": 1},
            grad=("g", "scale(g, cj(alpha))"))
elementwise("sub", "a - alpha * b", B, params=("alpha",), defaults={"alpha": 1},
            no_bool=_NO_BOOL_SUB, reject_bool_operands=True,
            grad=("g", "scale(g, -cj(alpha))"))
elementwise("mul", "a * b", B,
            grad=("g * cj(b)", "g * cj(a)"))
elementwise("true_divide", "truediv(a, b)", B, "float",
            grad=("g / cj(b)", "-g * cj(a / b / b)"))
elementwise("_div_trunc", "tdiv(a, b)", B, method=False, inplace=False, int_div=True,
            no_bool=True, no_complex=True,
            grad=("g * 0", "g * 0"))
# PyTorch gives floor_divide (the // operator) no derivative, but div(rounding_mode='floor') a
# zero one: the latter runs this private twin of the same kernel.
elementwise("floor_divide", "floordiv(a, b)", B, int_div=True, no_complex=True, no_bool=True)
elementwise("_div_floor", "floordiv(a, b)", B, method=False, inplace=False, int_div=True,
            no_bool=True, no_complex=True,
            grad=("g * 0", "g * 0"))
elementwise("remainder", "mod(a, b)", B, int_div=True, no_complex=True, no_bool=True,
            grad=("g", "-g * _div_floor(a, b)"))
elementwise("fmod", "fmod(a, b)", B, int_div=True, no_complex=True, no_bool=True,
            grad=("g", "-g * div(a, b, rounding_mode='trunc')"))
_POW_GRAD = (lambda g, a, b: _pow_grad_base(g, a, b),
             lambda g, a, b, out: _pow_grad_exponent(g, a, b, out))
_route_scalar_pow(
    elementwise("pow", "ipow(a, b)", B, flops=10, int_pow=True,  # bool: _check_pow_exponent
                grad=_POW_GRAD),
    elementwise("_pow_scalar", "ipow_scalar(a, b)", B, method=False, inplace=False, flops=10,
                grad=_POW_GRAD),
    elementwise("_pow_scalar_base", "ipow_scalar_base(a, b)", B, method=False, inplace=False,
                flops=10, grad=_POW_GRAD))
elementwise("atan2", "atan2(a, b)", B, "float", flops=20, no_complex=True,
            grad=("g * b / (a * a + b * b)", "g * -a / (a * a + b * b)"))
# Ties split the gradient evenly between the operands, like PyTorch.
elementwise("maximum", "maximum(a, b)", B, no_complex=True,
            grad=("masked(g, a > b) + masked(g * 0.5, a == b)",
                  "masked(g, b > a) + masked(g * 0.5, a == b)"))
elementwise("minimum", "minimum(a, b)", B, no_complex=True,
            grad=("masked(g, a < b) + masked(g * 0.5, a == b)",
                  "masked(g, b < a) + masked(g * 0.5, a == b)"))
# lerp's and square's frontends (composite.py) add PyTorch's dtype checks around these.
elementwise("_lerp", "a + c * (b - a) if abs(c) < 0.5 else b - (b - a) * (1 - c)", T, "float",
            method=False, inplace=False, flops=4,
            grad=("g * cj(1 - c)", "g * cj(c)", "g * cj(b - a)"))
elementwise("neg", "-a", no_bool=_NO_BOOL_NEG,
            grad=("-g",))
elementwise("abs", "abs(a)", dtype_rule="abs", no_bool=True,
            grad=("g * a.sgn()",))
elementwise("sign", "sign(a)", no_complex=True,
            grad=("g * 0",))
# sgn(z) = z / |z| is constant along rays only: for complex z the gradient is the component of
# g orthogonal to sgn(z), over |z| (Re(conj(g) * sgn) written as a complex-dtype average).
elementwise("sgn", "sign(a)",
            grad=("masked((g - out * (cj(g) * out + g * cj(out)) * 0.5) / a.abs(), a != 0) "
                  "if a.is_complex() else g * 0",),
            # the backward formula reads conj(g): not complex-linear, so no auto_element_wise
            jvp="masked((a_t - out * (cj(out) * a_t).real) / a.abs(), a != 0) "
                "if a.is_complex() else a_t * 0")
elementwise("_square", "a * a", method=False, inplace=False,
            grad=("g * cj(a) * 2",))
elementwise("_conj", "np.conj(a)", method=False, inplace=False,
            grad=("cj(g)",))
elementwise("reciprocal", "truediv(1, a)", dtype_rule="float",
            grad=("-g * cj(out * out)",))
elementwise("_clamp", "minimum(maximum(a, b), c)", T, method=False, inplace=False,
            no_complex=True,
            grad=("masked(g, (a >= b) & (a <= c))", "masked(g, (a < b) & (b <= c))",
                  "masked(g, (a > c) | (b > c))"))
_PI = 3.141592653589793
# fmax/fmin: the other operand where one is NaN (the elementwise maximum/minimum otherwise).
elementwise("fmax", "b if b > a or a != a else a", B, no_complex=True,
            grad=("masked(g, (a >= b) | b.isnan())", "masked(g, ~((a >= b) | b.isnan()))"))
elementwise("fmin", "b if b < a or a != a else a", B, no_complex=True,
            grad=("masked(g, (a <= b) | b.isnan())", "masked(g, ~((a <= b) | b.isnan()))"))
elementwise("hypot", "hypot(a, b)", B, "float", flops=10, no_complex=True,
            grad=("g * a / out", "g * b / out"))
elementwise("copysign", "copysign(a, b)", B, "float", no_complex=True,
            grad=("masked(g * out / a, a != 0)", "g * 0"))
# ldexp's integer-exponent path (b: int32-wrapped, clamped exponents carried in a's dtype).
elementwise("_ldexp_int", "ldexp_int(a, b)", B, method=False, no_complex=True, float_only=True,
            grad=("g.ldexp(b)", None))
# log(exp(a) + exp(b)) without overflow (the scalar function has PyTorch's complex form).
elementwise("logaddexp", "logaddexp(a, b)", B, "float", flops=25, float_only=True,
            tensor_operands=True, inplace=False,
            grad=("g * cj((a - b).sigmoid())", "g * cj((b - a).sigmoid())"))
elementwise("xlogy", "0.0 if a == 0 and b == b else a * log(b)", B, "float", flops=20,
            no_complex=True, grad=("masked(g * b.log(), (a != 0) | (b > 0))", "g * a / b"))
elementwise("heaviside", "b if a == 0 else (a > 0)", B, no_complex=True)
elementwise("sinc", f"1.0 if a == 0 else sin(a * {_PI}) / (a * {_PI})", U, "float", flops=25,
            grad=(f"masked(g * ((a * {_PI}).cos() * a * {_PI} - (a * {_PI}).sin()) / "
                  f"(a * a * {_PI}), a != 0)",))
elementwise("deg2rad", f"a * {_PI / 180!r}", U, "float", no_complex=True,
            grad=(f"g * {_PI / 180!r}",))
elementwise("rad2deg", f"a * {180 / _PI!r}", U, "float", no_complex=True,
            grad=(f"g * {180 / _PI!r}",))
_ADDCDIV_INTS = ("Integer division with addcdiv is no longer supported, and in a future  "
                 "release addcdiv will perform a true division of tensor1 and tensor2. The "
                 "historic addcdiv behavior can be implemented as (input + value * "
                 "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                 "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
                 "behavior is just the latter implementation: (input + value * tensor1 / "
                 "tensor2), for all dtypes.")
# value * b first, as PyTorch's kernels multiply (it decides which overflows and infinities win)
elementwise("addcmul", "a + value * b * c", T, params=("value",), defaults={"value": 1},
            flops=3, grad=("g", "g * cj(c * value)", "g * cj(b * value)"))
elementwise("addcdiv", "a + truediv(value * b, c)", T, params=("value",), defaults={"value": 1},
            flops=3, int_quotient=_ADDCDIV_INTS,
            grad=("g", "g * cj(value / c)", "-g * cj(value * b / (c * c))"))
elementwise("_where", "b if a else c", T, method=False, inplace=False,
            grad=(None, "masked(g, a)", "masked(g, ~a)"))
elementwise("_copy", "a", method=False, inplace=False, flops=0,
            grad=("g",))
# angle: atan2(imag, real); reals give pi for negatives, else 0, keeping NaN (PyTorch's rule).
elementwise("angle", "angle(a)", U, "real_float", inplace=False, flops=20,
            grad=("masked(g * a / (a.abs() * a.abs()) * 1j, a != 0) if a.is_complex() "
                  "else g * 0",),
            jvp="masked((a_t * cj(a)).imag / (a.abs() * a.abs()), a != 0) if a.is_complex() "
                "else a_t * 0")
# Backends of _ops/math_extras.py's frontends (which check operands and carry derivatives):
# gcd/lcm in the operands' own width (``bits``: _int_width), C's nextafter and frexp.
elementwise("_gcd", "gcd(a, b, bits)", B, "int_only", method=False, params=("bits",),
            defaults={"bits": 0}, resolve_params=lambda p, dt: (_int_width(dt),))
elementwise("_lcm", "lcm(a, b, bits)", B, "int_only", method=False, params=("bits",),
            defaults={"bits": 0}, resolve_params=lambda p, dt: (_int_width(dt),))
elementwise("_nextafter", "nextafter(a, b)", B, method=False, float_only=True, no_complex=True)
elementwise("_frexp_mantissa", "frexp_mantissa(a)", method=False, inplace=False,
            float_only=True, no_complex=True)
elementwise("_frexp_exponent", "frexp_exponent(a)", U, "int32", method=False, inplace=False,
            float_only=True, no_complex=True)


def _int_width(dt: D.dtype) -> int:
    """The width gcd/lcm compute in: a signed type's bits, 0 for uint8 (the vocabulary's
    code for the one unsigned integer dtype; params travel in the compute dtype)."""
    return 0 if dt in (D.uint8, D.bool) else dt.itemsize * 8


def _nan_to_num_defaults(params: tuple, compute: D.dtype) -> tuple:
    nan, posinf, neginf = params
    if compute.category >= D.FLOATING:
        info = D.finfo(compute)
        posinf = info.max if posinf is None else posinf
        neginf = info.min if neginf is None else neginf
    # nan=None means the default 0.0, as in PyTorch
    return (0.0 if nan is None else nan, 0 if posinf is None else posinf,
            0 if neginf is None else neginf)


elementwise("nan_to_num", "nan_to_num(a, nan, posinf, neginf)", params=("nan", "posinf",
            "neginf"), defaults={"nan": 0.0}, resolve_params=_nan_to_num_defaults,
            inplace_integral_noop=True,  # PyTorch's nan_to_num_ returns such tensors first
            grad=("masked(g, a.isfinite())",))

# -- transcendental (integers compute in the default float dtype) -------------------------------
_LN2, _LN10 = 0.6931471805599453, 2.302585092994046
for _name, _expr, _flops, _grad in [
    ("exp", "exp(a)", 20, "g * cj(out)"),
    ("exp2", "exp2(a)", 20, f"g * cj(out) * {_LN2}"),
    ("expm1", "expm1(a)", 20, "g * cj(out + 1)"),
    ("log", "log(a)", 20, "g / cj(a)"),
    ("log2", "log2(a)", 20, f"g / cj(a * {_LN2})"),
    ("log10", "log10(a)", 20, f"g / cj(a * {_LN10})"),
    ("log1p", "log1p(a)", 20, "g / cj(a + 1)"),
    ("sqrt", "sqrt(a)", 4, "g / cj(out * 2)"),
    ("rsqrt", "rsqrt(a)", 5, "g * cj(out * out * out) * -0.5"),
    ("sin", "sin(a)", 20, "g * cj(a.cos())"),
    ("cos", "cos(a)", 20, "g * -cj(a.sin())"),
    ("tan", "tan(a)", 20, "g * cj(out * out + 1)"),
    ("asin", "asin(a)", 20, "g / cj((1 - a * a).sqrt())"),
    ("acos", "acos(a)", 20, "-g / cj((1 - a * a).sqrt())"),
    ("atan", "atan(a)", 20, "g / cj(a * a + 1)"),
    ("sinh", "sinh(a)", 20, "g * cj(a.cosh())"),
    ("cosh", "cosh(a)", 20, "g * cj(a.sinh())"),
    ("asinh", "asinh(a)", 20, "g / cj((a * a + 1).sqrt())"),
    ("acosh", "acosh(a)", 20, "g / cj((a * a - 1).sqrt())"),
    ("atanh", "atanh(a)", 20, "g / cj(1 - a * a)"),
    # The fused backward ops take conj(out) so complex inputs get grad * conj(derivative).
    ("tanh", "tanh(a)", 20, "_tanh_backward(g, cj(out))"),
    ("sigmoid", "sigmoid(a)", 22, "_sigmoid_backward(g, cj(out))"),
]:
    elementwise(_name, _expr, U, "float", flops=_flops, grad=(_grad,))
elementwise("erf", "erf(a)", U, "float", flops=20, no_complex=True,
            grad=("g * (-a * a).exp() * 1.1283791670955126",))

# -- activations -----------------------------------------------------------------------------
elementwise("relu", "relu(a)", no_complex=True, no_bool="relu: not supported for bool tensors",
            grad=("_relu_backward(g, out)",))
elementwise("gelu", "gelu_tanh(a) if approximate else gelu_erf(a)", U, "float",
            params=("approximate",), defaults={"approximate": 0}, flops=25, no_complex=True,
            param_map={"approximate": {"none": 0, "tanh": 1}}, float_only=True,
            specialize=("approximate",), grad=("_gelu_backward(g, a, approximate)",))
elementwise("silu", "a * sigmoid(a)", U, "float", flops=23, float_only=True,
            grad=("_silu_backward(g, cj(a))",))
elementwise("softplus", "softplus(a, beta, threshold)", U, "float", params=("beta", "threshold"),
            defaults={"beta": 1.0, "threshold": 20.0}, flops=25, no_complex=True,
            float_only=True,
            grad=("_softplus_backward(g, a, beta, threshold)",))
elementwise("leaky_relu", "a if a > 0 else a * negative_slope", U, "float",
            params=("negative_slope",), defaults={"negative_slope": 0.01}, no_complex=True,
            float_only=True,
            grad=("_leaky_relu_backward(g, a, negative_slope)",))
elementwise("elu", "a * scale if a > 0 else expm1(a * input_scale) * alpha * scale", U,
            "float", params=("alpha", "scale", "input_scale"),
            defaults={"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}, flops=22, no_complex=True,
            float_only=True,
            grad=("_elu_backward(g, a, alpha, scale, input_scale)",))


def _hardtanh_limits(params: tuple, compute: D.dtype) -> tuple:
    if compute is D.uint8 and min(params) < 0:
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return params


elementwise("hardtanh", "min_val if a < min_val else (max_val if a > max_val else a)", U,
            params=("min_val", "max_val"), defaults={"min_val": -1.0, "max_val": 1.0},
            no_complex=True, no_bool="hardtanh: not supported for bool tensors",
            resolve_params=_hardtanh_limits,
            grad=("_hardtanh_backward(g, a, min_val, max_val)",))

# -- rounding (identities on integers, as in PyTorch) ------------------------------------------
for _name in ("floor", "ceil", "trunc"):
    elementwise(_name, f"{_name}(a)", no_complex=True, no_bool=True, int_identity=True,
                grad=("g * 0",))
# Not int_identity (that path runs the param-less _copy kernel): round_decimals keeps ints.
elementwise("round", "round_decimals(a, decimals)", params=("decimals",),
            defaults={"decimals": 0}, no_complex=True, no_bool=True,
            grad=("g * 0",))
elementwise("frac", "a - trunc(a)", no_complex=True, float_only=True,
            grad=("g",))

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


# -- fused backward ops of the activations (one kernel each; their own derivatives allow
# double backward where it is cheap to state) ---------------------------------------------
elementwise("_relu_backward", "a if b > 0 else 0 * a", B, method=False, inplace=False,
            grad=("_relu_backward(g, b)", "g * 0"))
elementwise("_sigmoid_backward", "a * b * (1 - b)", B, method=False, inplace=False, flops=3,
            grad=("_sigmoid_backward(g, cj(b))", "g * cj(a * (1 - b * 2))"))
elementwise("_tanh_backward", "a * (1 - b * b)", B, method=False, inplace=False, flops=3,
            grad=("_tanh_backward(g, cj(b))", "g * cj(a * b) * -2"))
elementwise("_leaky_relu_backward", "a if b > 0 else a * negative_slope", B, method=False,
            inplace=False, params=("negative_slope",),
            grad=("_leaky_relu_backward(g, b, negative_slope)", "g * 0"))
elementwise("_hardtanh_backward", "a if (b > min_val and b < max_val) else 0 * a", B,
            method=False, inplace=False, params=("min_val", "max_val"),
            grad=("_hardtanh_backward(g, b, min_val, max_val)", "g * 0"))
elementwise("_gelu_backward", "a * (gelu_tanh_grad(b) if approximate else gelu_erf_grad(b))", B,
            method=False, inplace=False, params=("approximate",), flops=30,
            specialize=("approximate",), grad=("_gelu_backward(g, b, approximate)",
                  lambda g, a, b, approximate: g * a * _gelu_grad2(b, approximate)))
elementwise("_silu_backward", "a * sigmoid(b) * (1 + b * (1 - sigmoid(b)))", B, method=False,
            inplace=False, flops=30,
            grad=("_silu_backward(g, cj(b))", lambda g, a, b: g * cj(a * _silu_grad2(b))))
elementwise("_softplus_backward", "a * softplus_grad(b, beta, threshold)", B, method=False,
            inplace=False, params=("beta", "threshold"), flops=25,
            grad=("_softplus_backward(g, b, beta, threshold)",
                  lambda g, a, b, beta, threshold:
                      masked(g * a * _sigmoid_grad(b * beta) * beta, b * beta <= threshold)))
elementwise("_elu_backward", "a * scale if b > 0 else a * input_scale * alpha * scale * "
            "exp(b * input_scale)", B, method=False, inplace=False,
            params=("alpha", "scale", "input_scale"), flops=22,
            grad=("_elu_backward(g, b, alpha, scale, input_scale)",
                  "masked(g * a * (b * input_scale).exp() * (input_scale * input_scale * alpha "
                  "* scale), b <= 0)"))


# -- pow's derivatives (complex-aware: grad * conj(derivative)) ---------------------------------
def _pow_grad_base(g: Tensor, a: Any, b: Any) -> Tensor:
    """d a^b / d a = b a^(b-1); zero where b == 0 (even at a == 0, like PyTorch)."""
    if not isinstance(b, Tensor):
        if b == 0:
            return g * 0
        return g if b == 1 else g * cj(a ** (b - 1) * b)
    return masked(g * cj(b * a ** (b - 1)), b != 0)


def _pow_grad_exponent(g: Tensor, a: Any, b: Tensor, out: Tensor) -> Tensor:
    """d a^b / d b = a^b log(a); zero where a == 0 and b >= 0 (b real and non-negative, for a
    complex b: |b + 1| >= |b - 1| is Re(b) >= 0, |b - conj(b)| == 0 is Im(b) == 0)."""
    if not isinstance(a, Tensor):
        a = OPS["full"].frontend((), a, dtype=out.dtype, device=out.device)
    if b.is_complex():
        nonneg = ((b + 1).abs() >= (b - 1).abs()) & ((b - cj(b)).abs() == 0)
    else:
        nonneg = b >= 0
    return masked(g * cj(out * a.log()), ~((a == 0) & nonneg))


# -- second derivatives of the activations, for double backward through the fused ops above
# (written with differentiable ops, so higher orders work too) ------------------------------
def _sigmoid_grad(x: Tensor) -> Tensor:
    s = x.sigmoid()
    return s * (1 - s)


def _silu_grad2(x: Tensor) -> Tensor:
    # silu = x s(x): silu'' = s (1 - s) (2 + x (1 - 2 s)).
    s = x.sigmoid()
    return s * (1 - s) * (x * (1 - s * 2) + 2)


def _gelu_grad2(x: Tensor, approximate: int) -> Tensor:
    if not approximate:
        # x Phi(x): 2 phi(x) + x phi'(x) = phi(x) (2 - x^2).
        return (x * x * -0.5).exp() * 0.3989422804014327 * (2 - x * x)
    # 0.5 x (1 + tanh(u)), u = k (x + c x^3): (1 - t^2) (u' - x t u'^2 + x u'' / 2).
    k, c = 0.7978845608028654, 0.044715
    t = ((x + x * x * x * c) * k).tanh()
    du = (x * x * (3 * c) + 1) * k
    return (1 - t * t) * (du - x * t * du * du + x * x * (3 * k * c))

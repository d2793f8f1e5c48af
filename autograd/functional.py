"""``gt.autograd.functional``: Jacobians, Hessians and vector products of whole functions
(PyTorch's API, signatures, result structure and strict-mode errors).

vjp/vhp and reverse-mode Jacobians use ``autograd.grad``; jvp, forward-mode Jacobians and hvp
use forward AD (``autograd.forward_ad``; hvp is forward-over-reverse). ``vectorize=True``
gives the same results as ``vectorize=False``: both build a Jacobian one basis vector at a
time (one backward per output element, or one forward per input element), since there is no
batched (vmap) evaluation of the rows here; it is accepted for PyTorch's API and keeps
PyTorch's rules (``strict=True`` is refused with it, forward mode requires it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gputensor._tensor import Tensor

from . import forward_ad, grad_mode
from .engine import grad as _grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]

Inputs = Tensor | tuple[Tensor, ...]


def _as_tuple(x: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(x, tuple)
    items = x if is_tuple else (x,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but the {where} has type {type(el)}.")
    return is_tuple, items


def _unpack(res: tuple, is_tuple: bool | tuple[bool, bool]) -> Any:
    """Results in the user's structure: a tuple where the inputs/outputs were one."""
    if isinstance(is_tuple, tuple):
        if not is_tuple[1]:
            res = tuple(el[0] for el in res)
        return res if is_tuple[0] else res[0]
    return res if is_tuple else res[0]


def _prepare(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """New tensor objects for the inputs (a graph-keeping alias when the user wants gradients
    to flow back to them), so tensors the function captures are told apart."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(need_graph) for x in inputs)


def _finish(res: tuple, create_graph: bool) -> tuple:
    return res if create_graph else tuple(r.detach() if isinstance(r, Tensor) else r
                                          for r in res)


def _outputs(outputs: Any, fn_name: str, strict: bool) -> tuple[bool, tuple]:
    """(whether ``func`` returned a tuple, its outputs as one), checked as PyTorch does."""
    is_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_outputs_require_grad(outputs, strict)
    return is_tuple, outputs


def _check_outputs_require_grad(outputs: tuple, strict: bool) -> None:
    if not strict:
        return
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               f"gradients. The outputs must be computed in a differentiable "
                               f"manner from the input when running in strict mode.")


def _check_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(v) != len(other):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other, strict=True)):
        if a.shape != b.shape:
            prefix = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {b.size()} but got "
                               f"{a.size()}.")


def _vector(v: Any, other: tuple, is_other_tuple: bool, fn_name: str, what: str) -> tuple:
    """The user's ``v`` checked against ``other`` (None only for a single-element one)."""
    if v is None:
        if len(other) != 1 or other[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if {what} a single Tensor with "
                               f"a single element.")
        return (_ones_like(other[0]),)
    _, v = _as_tuple(v, "v", fn_name)
    _check_v(v, other, is_other_tuple)
    return tuple(x.detach() for x in v)


def _ones_like(x: Tensor) -> Tensor:
    import gputensor as gt
    return gt.ones_like(x)


def _zeros_like(x: Tensor) -> Tensor:
    import gputensor as gt
    return gt.zeros_like(x)


def _grads(outputs: tuple, inputs: tuple, cotangents: tuple | None, create_graph: bool,
           strict: bool, independent_msg: Callable[[int], str]) -> tuple:
    """Gradients of ``outputs`` (those that require grad) for ``inputs``; zeros where an input
    does not reach them (an error in strict mode)."""
    pairs = [(o, c) for o, c in zip(outputs, cotangents or (None,) * len(outputs), strict=True)
             if o.requires_grad]
    if pairs:
        got = _grad([o for o, _ in pairs], inputs, [c for _, c in pairs],
                    create_graph=create_graph, allow_unused=True)
    else:
        got = (None,) * len(inputs)
    return _fill_missing(got, inputs, strict, create_graph, independent_msg)


def _fill_missing(got: Sequence[Tensor | None], inputs: tuple, strict: bool, create_graph: bool,
                  independent_msg: Callable[[int], str], graph_index: int | None = None) -> tuple:
    """``got`` with zeros for the inputs the outputs do not reach; strict mode raises there,
    and (with create_graph) where a gradient does not require grad. ``graph_index``: the
    index that last message names (PyTorch's jacobian names the output's)."""
    res = []
    for j, (g, x) in enumerate(zip(got, inputs, strict=True)):
        if g is None:
            if strict:
                raise RuntimeError(independent_msg(j))
            g = _zeros_like(x)
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(f"The jacobian of the user-provided function is independent of "
                               f"input {j if graph_index is None else graph_index}. This is "
                               f"not allowed in strict mode when create_graph=True.")
        res.append(g)
    return tuple(res)


def _independent(i: int) -> str:
    return (f"The output of the user-provided function is independent of input {i}. This is "
            f"not allowed in strict mode.")


def vjp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    with grad_mode.enable_grad():
        is_in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_out_tuple, outputs = _outputs(outputs, "vjp", strict)
        v = _vector(v, outputs, is_out_tuple, "vjp",
                    "the user-provided function returns")
        res = _grads(outputs, inputs, v, create_graph, strict, _independent)
    return (_unpack(_finish(outputs, create_graph), is_out_tuple),
            _unpack(_finish(res, create_graph), is_in_tuple))


def jvp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), J v)``: the Jacobian-vector product at ``inputs``, by forward AD."""
    with grad_mode.enable_grad():
        is_in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        v = _vector(v, inputs, is_in_tuple, "jvp",
                    "the input to the user-provided function is")
        outputs, tangents, is_out_tuple = _forward(func, inputs, v, "jvp", strict)
    return (_unpack(_finish(outputs, create_graph), is_out_tuple),
            _unpack(_finish(tangents, create_graph), is_out_tuple))


def _forward(func: Callable[..., Any], inputs: tuple, v: tuple, fn_name: str, strict: bool
             ) -> tuple[tuple, tuple, bool]:
    """``func``'s outputs and their tangents along ``v`` (zeros where an output does not
    depend on the inputs; an error in strict mode)."""
    with forward_ad.dual_level():
        duals = tuple(forward_ad.make_dual(x, t) for x, t in zip(inputs, v, strict=True))
        outputs = func(*duals)
        is_out_tuple, outputs = _outputs(outputs, fn_name, strict)
        unpacked = [forward_ad.unpack_dual(o) for o in outputs]
    primals, tangents = [], []
    for i, (p, t) in enumerate(unpacked):
        if t is None:
            if strict:
                raise RuntimeError(f"The jacobian of the user-provided function is "
                                   f"independent of input {i}. This is not allowed in "
                                   f"strict mode.")
            t = _zeros_like(p)
        primals.append(p)
        tangents.append(t)
    return tuple(primals), tuple(tangents), is_out_tuple


def _basis(x: Tensor, k: int) -> Tensor:
    e = _zeros_like(x)
    e.view(-1)[k] = 1
    return e


def jacobian(func: Callable[..., Any], inputs: Inputs, create_graph: bool = False,
             strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs``: ``J[i][j]`` has shape
    ``outputs[i].shape + inputs[j].shape`` (tuples only where the user passed/returned them)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, '
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "gputensor.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.')
        return _jacobian_forward(func, inputs, strict, vectorize)
    with grad_mode.enable_grad():
        is_in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_out_tuple, outputs = _outputs(outputs, "jacobian", strict)
        if vectorize and strict:
            raise RuntimeError("gputensor.autograd.functional.jacobian: `strict=True` and "
                               "`vectorized=True` are not supported together. Please either set "
                               "`strict=False` or `vectorize=False`.")
        jac = []
        for i, out in enumerate(outputs):
            rows: list[list[Tensor]] = [[] for _ in inputs]
            for k in range(out.numel()):
                grads = _row(out, inputs, k, create_graph, strict, i) if out.requires_grad \
                    else _zero_row(inputs, strict, i)
                for j, g in enumerate(grads):
                    rows[j].append(g)
            jac.append(tuple(_stack(r, out.shape, x) for r, x in zip(rows, inputs, strict=True)))
    jac = tuple(_finish(j, create_graph) for j in jac)
    return _unpack(jac, (is_out_tuple, is_in_tuple))


def _row(out: Tensor, inputs: tuple, k: int, create_graph: bool, strict: bool,
         i: int) -> tuple:
    def independent(j: int) -> str:
        return (f"Output {i} of the user-provided function is independent of input {j}. This "
                f"is not allowed in strict mode.")
    got = _grad([out], inputs, [_basis(out, k)], retain_graph=True, create_graph=create_graph,
                allow_unused=True)
    return _fill_missing(got, inputs, strict, create_graph, independent, graph_index=i)


def _zero_row(inputs: tuple, strict: bool, i: int) -> tuple:
    if strict:
        raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                           f"0. This is not allowed in strict mode.")
    return tuple(_zeros_like(x) for x in inputs)


def _stack(rows: list[Tensor], out_shape: tuple, x: Tensor) -> Tensor:
    import gputensor as gt
    if not rows:
        return gt.zeros((*out_shape, *x.shape), dtype=x.dtype, device=x.device)
    return gt.stack(rows).reshape((*out_shape, *x.shape))


def _jacobian_forward(func: Callable[..., Any], inputs: Inputs, strict: bool,
                      vectorize: bool) -> Any:
    if strict:
        raise RuntimeError("gputensor.autograd.functional.jacobian: `strict=True` and "
                           '`strategy="forward-mode"` are not supported together (yet). Please '
                           'either set `strict=False` or `strategy="reverse-mode"`.')
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian isonly implemented for `vectorize=True`.")
    import gputensor as gt
    is_in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = tuple(x.detach() for x in inputs)
    columns: list[list[list[Tensor]]] = []   # [input j][element k] -> tangents of each output
    outputs: tuple = ()
    is_out_tuple = False
    for j, x in enumerate(inputs):
        cols = []
        for k in range(x.numel()):
            v = tuple(_basis(x, k) if jj == j else _zeros_like(y) for jj, y in enumerate(inputs))
            outputs, tangents, is_out_tuple = _forward(func, inputs, v, "jacobian", False)
            cols.append(list(tangents))
        columns.append(cols)
    if not columns or not columns[0]:
        outputs, _, is_out_tuple = _forward(func, inputs, tuple(_zeros_like(x) for x in inputs),
                                            "jacobian", False)
    jac = []
    for i, out in enumerate(outputs):
        per_input = []
        for j, x in enumerate(inputs):
            cols = [c[i] for c in columns[j]]
            per_input.append(gt.stack(cols, dim=-1).reshape((*out.shape, *x.shape)) if cols
                             else gt.zeros((*out.shape, *x.shape), dtype=out.dtype,
                                           device=out.device))
        jac.append([t.detach() for t in per_input])
    # PyTorch's forward-mode Jacobian of tuple inputs comes in lists (tuples otherwise)
    container = list if is_in_tuple else tuple
    return _unpack(container(container(j) for j in jac), (is_out_tuple, is_in_tuple))


def _single_output(func: Callable[..., Any], fn_name: str, strict: bool) -> Callable[..., Any]:
    def wrapped(*inp: Any) -> Tensor:
        out = func(*inp)
        is_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", fn_name)
        _check_outputs_require_grad(t_out, strict)
        if is_tuple or not isinstance(out, Tensor):
            raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                               f"contain a single element")
        return out.squeeze()
    return wrapped


def hessian(func: Callable[..., Any], inputs: Inputs, create_graph: bool = False,
            strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of the scalar ``func`` at ``inputs``: the Jacobian (reverse mode, or forward
    mode over reverse with ``outer_jacobian_strategy``) of its reverse-mode gradient."""
    is_in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    scalar = _single_output(func, "hessian", strict)

    def jac_func(*inp: Any) -> Any:
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(x.requires_grad_(True) if x.grad_fn is None else x for x in inp)
        jac = jacobian(scalar, inp, create_graph=True)
        jac_t = jac if isinstance(jac, tuple) else (jac,)
        if strict:
            for i, j in enumerate(jac_t):
                if not j.requires_grad:
                    raise RuntimeError(
                        f"While computing the hessian, found that the jacobian of the "
                        f"user-provided function with respect to input {i} is independent of "
                        f"the input. This is not allowed in strict mode. You should ensure that "
                        f"your function is twice differentiable and that the jacobian depends on "
                        f"the inputs (this would be violated by a linear function for example).")
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _unpack(res, (is_in_tuple, is_in_tuple))


def vhp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), v^T H)`` for a scalar ``func``, by double backward."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), H v)`` for a scalar ``func``, by forward AD over the gradient."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func: Callable[..., Any], inputs: Inputs, v: Any, create_graph: bool,
                     strict: bool, fn_name: str) -> tuple[Any, Any]:
    with grad_mode.enable_grad():
        is_in_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
        inputs = _prepare(inputs, create_graph, need_graph=True)
        v = _vector(v, inputs, is_in_tuple, fn_name,
                    "the input to the user-provided function is")
        if fn_name == "hvp":
            with forward_ad.dual_level():
                duals = tuple(forward_ad.make_dual(x, t) for x, t in zip(inputs, v, strict=True))
                output, jac = _scalar_and_grad(func, duals, strict, fn_name)
                res = tuple(_hvp_tangent(g, x, i, strict)
                            for i, (g, x) in enumerate(zip(jac, inputs, strict=True)))
                output = forward_ad.unpack_dual(output).primal
        else:
            output, jac = _scalar_and_grad(func, inputs, strict, fn_name)
            res = _grads(jac, inputs, v, create_graph, strict, lambda i: (
                f"The hessian of the user-provided function with respect to input {i} is "
                f"independent of the input. This is not allowed in strict mode."))
    return (_finish((output,), create_graph)[0], _unpack(_finish(res, create_graph),
                                                         is_in_tuple))


def _scalar_and_grad(func: Callable[..., Any], inputs: tuple, strict: bool,
                     fn_name: str) -> tuple[Tensor, tuple]:
    output = _single_output(func, fn_name, strict)(*inputs)
    got = _grad([output], inputs, create_graph=True, allow_unused=True)
    jac = []
    for i, (g, x) in enumerate(zip(got, inputs, strict=True)):
        if g is None:
            if strict:
                raise RuntimeError(_independent(i))
            g = _zeros_like(x)
        jac.append(g)
    return output, tuple(jac)


def _hvp_tangent(g: Tensor, x: Tensor, i: int, strict: bool) -> Tensor:
    t = forward_ad.unpack_dual(g).tangent
    if t is None:
        if strict:
            raise RuntimeError(f"The hessian of the user-provided function with respect to "
                               f"input {i} is independent of the input. This is not allowed in "
                               f"strict mode.")
        return _zeros_like(x)
    return t

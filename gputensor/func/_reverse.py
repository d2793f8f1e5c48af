"""Reverse-mode transforms: ``grad``, ``grad_and_value``, ``vjp`` and ``jacrev``.

They run the function on fresh differentiable aliases of the inputs and call
``gputensor.autograd.grad``. Inside vmap an input is first materialised over every active
level (``[B_1, ..., B_k, *sample]``, expanded where it is not batched), so the real graph holds
independent samples: the gradient of the summed per-sample outputs is each sample's gradient,
which makes ``vmap(grad(f))`` one batched forward and one backward. When an enclosing transform
differentiates the result (``grad(grad(f))``, ``jacrev(jacrev(f))``), the inner one builds
its gradient graph (``create_graph``). A ``vjp_fn`` called with cotangents batched by a vmap
opened after the ``vjp`` (``jacrev``'s vmap over basis vectors) runs one backward on the still
batched cotangents: the formulas are ops, so they batch through the rules. Inputs carrying an
enclosing ``jvp``'s tangent keep it on their fresh leaf, so gradients get tangents too
(forward over reverse: ``jacfwd(jacrev(f))``, ``hessian``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gputensor
from gputensor._tensor import Tensor
from gputensor.autograd import forward_ad, grad_mode

from ._batched import level_of, materialize, wrap
from ._pytree import tree_flatten, tree_unflatten
from ._state import VMAP, VmapLevel

_DEPTH = [0]   # how many reverse transforms are running: inner ones build graphs for outer ones


def full(x: Tensor, levels: list[VmapLevel]) -> Tensor:
    """``x`` as a real tensor batched over every level in ``levels`` (outermost first)."""
    for lv in reversed(levels):
        x = materialize(x, lv.level, lv.size)
    return x


def rewrap(real: Tensor, levels: list[VmapLevel]) -> Tensor:
    for lv in levels:
        real = wrap(real, lv.level)
    return real


def _argnums_inputs(name: str, args: tuple, argnums: Any) -> Any:
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    if not isinstance(argnums, int | tuple) or not nums or any(
            not isinstance(n, int) for n in nums):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for n in nums:
        if not -len(args) <= n < len(args):
            raise RuntimeError(f"Got argnum={n}, but only {len(args)} positional inputs")
    return [n % len(args) for n in nums]


class _Tape:
    """The differentiable aliases of a call's inputs (a tree of tensors) and the vmap levels
    they were materialised over."""

    def __init__(self, name: str, tree: Any) -> None:
        self.levels = list(VMAP.levels)
        leaves, self.spec = tree_flatten(tree)
        self.reals = []
        self.create_graph = _DEPTH[0] > 1
        wrapped = []
        for x in leaves:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{name}: Expected f to be a function that has Tensor inputs "
                                   f"to differentiate, got {type(x).__name__}")
            real = full(x, self.levels)
            if real.requires_grad:
                self.create_graph = True
                real = alias = real.view_as(real)
            else:
                # A fresh leaf, still carrying the tangent of an enclosing jvp/jacfwd: the
                # backward formulas are ops on saved dual tensors, so the gradient gets its
                # tangent too (forward-over-reverse).
                tangent = forward_ad.tangent_of(real)
                real = alias = real.detach().requires_grad_()
                if tangent is not None:
                    alias = forward_ad.make_dual(real, tangent)
            self.reals.append(real)
            wrapped.append(rewrap(alias, self.levels))
        self.inputs = tree_unflatten(wrapped, self.spec)

    def backward(self, outputs: list[Tensor], cotangents: list[Tensor],
                 later: list[VmapLevel] | None = None) -> Any:
        """The inputs' gradients (a tree like the inputs) for real ``outputs``. ``later`` are
        vmap levels opened after the tape (``jacrev``'s vmap over basis vectors) that batch the
        cotangents: the backward formulas are ops, so one backward over batched cotangents
        gives every sample's gradient through the batching rules."""
        needed = [(o, c) for o, c in zip(outputs, cotangents, strict=False) if o.requires_grad]
        if needed:
            grads = gputensor.autograd.grad([o for o, _ in needed], self.reals,
                                            [c for _, c in needed], retain_graph=True,
                                            create_graph=self.create_graph, allow_unused=True)
        else:
            grads = [None] * len(self.reals)
        grads = [gputensor.zeros_like(r) if g is None else g
                 for g, r in zip(grads, self.reals, strict=False)]
        levels = self.levels
        if later:
            # [B_later..., B_tape..., *in] -> [B_tape..., B_later..., *in], all levels real.
            k, m = len(self.levels), len(later)
            grads = [full(g, later).movedim(tuple(range(m)), tuple(range(k, k + m)))
                     for g in grads]
            levels = self.levels + later
        if not self.create_graph:
            grads = [detach_keeping_tangent(g) for g in grads]
        return tree_unflatten([rewrap(g, levels) for g in grads], self.spec)

    def batched_cotangent(self, c: Tensor, later: list[VmapLevel]) -> Tensor:
        """Cotangent ``c`` as a real tensor over the tape's levels, batched by ``later``."""
        k, m = len(self.levels), len(later)
        real = full(c, self.levels + later)         # [B_tape..., B_later..., *out]
        return rewrap(real.movedim(tuple(range(k, k + m)), tuple(range(m))), later)

    def result(self, x: Any) -> Any:
        """A function output handed back: detached unless an outer transform differentiates."""
        if isinstance(x, Tensor) and not self.create_graph:
            return rewrap(detach_keeping_tangent(full(x, self.levels)), self.levels)
        return x


def detach_keeping_tangent(x: Tensor) -> Tensor:
    """``x`` cut from the backward graph; an enclosing forward transform's tangent stays
    (cut from the graph too: it was computed from the tape's leaves)."""
    tangent = forward_ad.tangent_of(x)
    x = x.detach()
    return x if tangent is None else forward_ad.make_dual(x, tangent.detach())


def _call(fn: Callable, args: tuple) -> Any:
    _DEPTH[0] += 1
    try:
        with grad_mode.enable_grad():
            return fn(*args)
    finally:
        _DEPTH[0] -= 1


def _substituted(args: tuple, argnums: list[int], tape: _Tape) -> tuple:
    inputs = tape.inputs if len(argnums) > 1 else (tape.inputs,)
    new_args = list(args)
    for n, x in zip(argnums, inputs, strict=False):
        new_args[n] = x
    return tuple(new_args)


def grad_and_value(func: Callable, argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False) -> Callable:
    """``func``'s gradient with respect to the inputs at ``argnums``, and its value."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums_inputs("grad_and_value", args, argnums)
        diff = tuple(args[n] for n in nums) if isinstance(argnums, tuple) else args[nums[0]]
        tape = _Tape("grad_and_value", diff)
        out = _call(functools.partial(func, **kwargs), _substituted(args, nums, tape))
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be a "
                                   "tuple: (output, aux) if has_aux is True")
            out, aux = out
        if not isinstance(out, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, "
                               f"got {type(out)}")
        if out.dim() != 0:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar "
                               f"Tensor, got tensor with {out.dim()} dims. Maybe you wanted to use "
                               f"the vjp or jacrev APIs instead?")
        real = full(out, tape.levels)
        grads = tape.backward([real], [gputensor.ones_like(real)])
        value = tape.result(out)
        if has_aux:
            from ._pytree import tree_map
            return grads, (value, tree_map(tape.result, aux))
        return grads, value
    return wrapper


def grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """``func``'s gradient with respect to the inputs at ``argnums`` (torch.func.grad)."""
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        grads, value = both(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return wrapper


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``func(*primals)`` and a function mapping cotangents of its outputs to cotangents of the
    primals (torch.func.vjp)."""
    tape = _Tape("vjp", primals)
    out = _call(func, tape.inputs)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: "
                               "(output, aux) if has_aux is True")
        out, aux = out
    leaves, out_spec = tree_flatten(out)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"vjp(f, *primals): Expected f(*primals) to return only tensors, "
                               f"got unsupported type {type(x)}")
    reals = [full(x, tape.levels) for x in leaves]

    def vjp_fn(*cotangents: Any) -> tuple:
        ct = cotangents[0] if len(cotangents) == 1 else cotangents
        ct_leaves, ct_spec = tree_flatten(ct)
        if ct_spec != out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree "
                               f"structure of outputs to the function. cotangents: {ct_spec}, "
                               f"primal output: {out_spec}")
        for c, o in zip(ct_leaves, leaves, strict=False):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of "
                                   f"torch.Size({list(c.shape)}) and output[0] has a shape of "
                                   f"torch.Size({list(o.shape)}).")
        later = VMAP.levels[len(tape.levels):]
        if later and any(level_of(c) > len(tape.levels) for c in ct_leaves):
            grads = tape.backward(reals, [tape.batched_cotangent(c, later) for c in ct_leaves],
                                  later)
        else:
            grads = tape.backward(reals, [full(c, tape.levels) for c in ct_leaves])
        return tuple(grads) if len(primals) != 1 else (grads[0],)

    value = tree_unflatten([tape.result(x) for x in leaves], out_spec)
    if has_aux:
        from ._pytree import tree_map
        return value, vjp_fn, tree_map(tape.result, aux)
    return value, vjp_fn


def jacrev(func: Callable, argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None, _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of ``func`` with respect to the inputs at ``argnums``, by reverse mode: one
    vector-Jacobian product per output element, through vmap (torch.func.jacrev)."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    from ._vmap import vmap

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums_inputs("jacrev", args, argnums)
        primals = tuple(args[n] for n in nums)

        def partial(*diff: Any) -> Any:
            full_args = list(args)
            for n, x in zip(nums, diff, strict=False):
                full_args[n] = x
            return func(*full_args, **kwargs)
        result = vjp(partial, *primals, has_aux=has_aux)
        out, vjp_fn = result[0], result[1]
        out_leaves, out_spec = tree_flatten(out)
        total = sum(o.numel() for o in out_leaves)
        ref = out_leaves[0]
        basis = gputensor.eye(total, dtype=ref.dtype, device=ref.device)
        cts, start = [], 0
        for o in out_leaves:
            cts.append(basis[:, start:start + o.numel()].reshape(total, *o.shape))
            start += o.numel()
        rows = vmap(vjp_fn, chunk_size=chunk_size)(tree_unflatten(cts, out_spec))
        per_output = []
        start = 0
        for o in out_leaves:
            n = o.numel()
            jac = tuple(r.narrow(0, start, n).reshape(*o.shape, *p.shape)
                        for r, p in zip(rows, primals, strict=False))
            per_output.append(jac if isinstance(argnums, tuple) else jac[0])
            start += n
        jacobian = tree_unflatten(per_output, out_spec)
        return (jacobian, result[2]) if has_aux else jacobian
    return wrapper

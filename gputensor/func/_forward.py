"""Forward-mode transforms on gt.autograd.forward_ad: ``jvp``, ``jacfwd``, ``linearize``, and
``hessian``.

``jvp`` pairs each primal with its tangent as a dual tensor at a fresh dual level; inside vmap
both are first materialised over every active level (like the reverse transforms), so a
tangent batched by a vmap (``jacfwd``'s basis vectors) gives one batched forward pass.
``linearize`` returns a ``jvp_fn`` that reruns that forward pass for each tangent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gputensor
from gputensor._tensor import Tensor
from gputensor.autograd import forward_ad

from ._pytree import tree_flatten, tree_map, tree_unflatten
from ._reverse import _argnums_inputs, full, jacrev, rewrap
from ._state import VMAP


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple:
    """``func(*primals)`` and its Jacobian-vector product with ``tangents`` (torch.func.jvp)."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it "
                           "should be valid to call f(*primals).")
    if not isinstance(tangents, tuple) or len(tangents) != len(primals):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the "
                           "same python structure. For example, if primals is a tuple of 3 "
                           "tensors, tangents also must be. Got primals with structure "
                           f"{tree_flatten(primals)[1]} and tangents with structure "
                           f"{tree_flatten(tangents)[1]}")
    p_leaves, spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if t_spec != spec:
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the "
                           f"same python structure. Got primals with structure {spec} and "
                           f"tangents with structure {t_spec}")
    for p, t in zip(p_leaves, t_leaves, strict=False):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                               "Tensors")
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to "
                               f"have the same shape, got {list(p.shape)} and {list(t.shape)}")
    levels = list(VMAP.levels)
    with forward_ad.dual_level():
        duals = [rewrap(forward_ad.make_dual(full(p, levels), full(t, levels)), levels)
                 for p, t in zip(p_leaves, t_leaves, strict=False)]
        out = func(*tree_unflatten(duals, spec))
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a "
                                   "tuple: (output, aux) if has_aux is True")
            out, aux = out
        o_leaves, o_spec = tree_flatten(out)
        values, jvps = [], []
        for o in o_leaves:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"jvp(f, primals, tangents): Expected f(*primals) to return "
                                   f"only tensors, got unsupported type {type(o)}")
            real = full(o, levels)
            primal, tangent = forward_ad.unpack_dual(real)
            values.append(rewrap(primal, levels))
            jvps.append(rewrap(gputensor.zeros_like(primal) if tangent is None else tangent,
                               levels))
        if has_aux:
            aux = tree_map(lambda a: rewrap(forward_ad.unpack_dual(full(a, levels))[0], levels)
                           if isinstance(a, Tensor) else a, aux)
    result = (tree_unflatten(values, o_spec), tree_unflatten(jvps, o_spec))
    return (*result, aux) if has_aux else result


def jacfwd(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """The Jacobian of ``func`` with respect to the inputs at ``argnums``, by forward mode: one
    Jacobian-vector product per input element, through vmap (torch.func.jacfwd)."""
    from ._vmap import vmap

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums_inputs("jacfwd", args, argnums)
        primals = tuple(args[n] for n in nums)
        sizes = [p.numel() for p in primals]
        total = sum(sizes)
        basis = gputensor.eye(total, dtype=primals[0].dtype, device=primals[0].device)
        tangents, start = [], 0
        for p, n in zip(primals, sizes, strict=False):
            tangents.append(basis[:, start:start + n].reshape(total, *p.shape))
            start += n

        def partial(*diff: Any) -> Any:
            full_args = list(args)
            for n, x in zip(nums, diff, strict=False):
                full_args[n] = x
            return func(*full_args, **kwargs)

        def push(*ts: Any) -> Any:
            result = jvp(partial, primals, ts, has_aux=has_aux)
            return (result[1], result[2]) if has_aux else result[1]
        pushed = vmap(push, randomness=randomness)(*tangents)
        columns, aux = pushed if has_aux else (pushed, None)
        value = jvp(partial, primals, tuple(gputensor.zeros_like(p) for p in primals),
                    has_aux=has_aux)
        out_leaves, out_spec = tree_flatten(value[0])
        col_leaves = tree_flatten(columns)[0]
        per_output = []
        for o, col in zip(out_leaves, col_leaves, strict=False):
            col = col.movedim(0, -1)            # (*out, total)
            parts, start = [], 0
            for p, n in zip(primals, sizes, strict=False):
                parts.append(col.narrow(-1, start, n).reshape(*o.shape, *p.shape))
                start += n
            per_output.append(tuple(parts) if isinstance(argnums, tuple) else parts[0])
        jacobian = tree_unflatten(per_output, out_spec)
        return (jacobian, value[2]) if has_aux else jacobian
    return wrapper


def hessian(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """The Hessian of scalar ``func`` (torch.func.hessian): ``jacfwd(jacrev(func))``, forward
    mode over reverse mode, as PyTorch composes it."""
    return jacfwd(jacrev(func, argnums), argnums)


def linearize(func: Callable, *primals: Any) -> tuple:
    """``func(*primals)`` and ``jvp_fn(*tangents)``, the Jacobian-vector product at
    ``primals`` (each call reruns the forward pass with the tangents)."""
    out = func(*primals)

    def jvp_fn(*tangents: Any) -> Any:
        p_spec, t_spec = tree_flatten(primals)[1], tree_flatten(tangents)[1]
        if p_spec != t_spec:
            raise RuntimeError(f"Expected the tangents {t_spec} to have the same argument "
                               f"structure as the primals {p_spec}")
        return jvp(func, primals, tangents)[1]
    return tree_map(lambda x: x.detach() if isinstance(x, Tensor) else x, out), jvp_fn

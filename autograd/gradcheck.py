"""gradcheck / gradgradcheck: analytical Jacobians from autograd against central finite
differences (use float64/complex128 inputs; single-precision differences are too coarse).

Complex numbers follow PyTorch's Wirtinger convention: a function with complex outputs is
checked as two real functions (the imaginary parts of its complex outputs, then the real
parts), and the Jacobian column of a complex input z = x + iy is ds/dx + i ds/dy (the
conjugate Wirtinger derivative times two), which is what backward returns for a real output s.
``fast_mode`` compares the scalars v^T J u for random unit vectors u, v instead of whole
Jacobians (https://github.com/pytorch/pytorch/issues/53876)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .engine import grad as autograd_grad


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical Jacobians differ."""


_FAST_FAIL_SLOW_OK = (
    "Fast gradcheck failed but element-wise differences are small. This means that the\n"
    "test might've passed in slow_mode!\n\nIf the test manually invokes "
    "gradcheck/gradgradcheck, then call gradcheck/gradgradcheck\nwith `fast_mode=False` "
    "as a keyword argument.")


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "_storage") and hasattr(x, "grad_fn")


def _is_float_or_complex(x: Any) -> bool:
    return _is_tensor(x) and (x.dtype.is_floating_point or x.dtype.is_complex)


def _as_tuple(x: Any) -> tuple:
    return (x,) if _is_tensor(x) else tuple(x)


def _outputs(func: Callable, inputs: Sequence[Any]) -> tuple:
    """The floating/complex outputs of ``func`` (integer outputs such as indices have no
    gradient)."""
    return tuple(o for o in _as_tuple(func(*inputs)) if _is_float_or_complex(o))


def _part_of_outputs(func: Callable, part: str) -> Callable:
    """``func`` with gt.real or gt.imag applied to its complex outputs."""
    import gputensor as gt
    take = gt.real if part == "real" else gt.imag

    def wrapped(*inputs: Any) -> tuple:
        return tuple(take(o) if _is_tensor(o) and o.dtype.is_complex else o
                     for o in _as_tuple(func(*inputs)))
    return wrapped


def _np(t: Any) -> np.ndarray:
    """A flat float64/complex128 NumPy copy of tensor ``t`` (sparse gradients densified, as
    PyTorch compares them as dense Jacobian columns)."""
    if t.is_sparse:
        t = t.to_dense()
    arr = t.detach().cpu().resolve_conj().numpy().reshape(-1)
    return arr.astype(np.complex128 if t.dtype.is_complex else np.float64)


def _values(func: Callable, inputs: Sequence[Any]) -> list[np.ndarray]:
    return [_np(o) for o in _outputs(func, inputs)]


def _jac_dtype(x: Any) -> type:
    return np.complex128 if x.dtype.is_complex else np.float64


def _central_difference(func: Callable, inputs: Sequence[Any], x: Any, set_value: Callable,
                        delta: Any, eps: float) -> list[np.ndarray]:
    """(f(x + delta) - f(x - delta)) / (2 eps) for every output; ``set_value(v)`` writes x."""
    set_value(-delta)
    minus = _values(func, inputs)
    set_value(delta)
    plus = _values(func, inputs)
    set_value(None)
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus, strict=True)]


def _directions(x: Any, eps: float) -> tuple:
    """Perturbations of one element: real inputs move along 1, complex ones along 1 and 1j."""
    return ((eps, 1.0), (eps * 1j, 1j)) if x.dtype.is_complex else ((eps, 1.0),)


def _numerical(func: Callable, inputs: Sequence[Any], x: Any, eps: float) -> list[np.ndarray]:
    """Per output, d(output)/d(x) by central differences: shape (x.numel(), output numel)."""
    sizes = [v.size for v in _values(func, inputs)]
    jac = [np.zeros((x.numel(), m), dtype=_jac_dtype(x)) for m in sizes]
    values = x.detach()  # an alias of x: writing it changes x without touching its graph
    for row, idx in enumerate(np.ndindex(*x.shape)):
        orig = values[idx].item()

        def set_value(d: Any, idx: tuple = idx, orig: Any = orig) -> None:
            values[idx] = orig if d is None else orig + d
        for delta, unit in _directions(x, eps):
            for k, col in enumerate(_central_difference(func, inputs, x, set_value, delta, eps)):
                jac[k][row] += unit * col
    return jac


def _vjp(output: Any, diff_inputs: list, grad_output: Any, check_grad_dtypes: bool) -> list:
    """Gradients of ``output`` (weighted by ``grad_output``) for each input, None if unused."""
    grads = autograd_grad(output, diff_inputs, grad_output, retain_graph=True, allow_unused=True)
    for x, gx in zip(diff_inputs, grads, strict=True):
        if gx is None:
            continue
        if tuple(gx.shape) != tuple(x.shape):
            raise GradcheckError("Analytical gradient has incorrect size: expected "
                                 f"{tuple(x.shape)}, got {tuple(gx.shape)}")
        if check_grad_dtypes and gx.dtype != x.dtype:
            raise GradcheckError("Gradient has dtype mismatch")
    return list(grads)


def _analytical(output: Any, diff_inputs: list, check_grad_dtypes: bool) -> list[np.ndarray]:
    """Each input's Jacobian for one output, built from vector-Jacobian products with one-hot
    vectors: shape (x.numel(), output numel)."""
    import gputensor as gt
    jac = [np.zeros((x.numel(), output.numel()), dtype=_jac_dtype(x)) for x in diff_inputs]
    for k in range(output.numel()):
        onehot = gt.zeros(output.shape, dtype=output.dtype, device=output.device)
        onehot.view(-1)[k] = 1
        for xi, gx in enumerate(_vjp(output, diff_inputs, onehot, check_grad_dtypes)):
            if gx is not None:
                jac[xi][:, k] = _np(gx)
    return jac


def _mismatch_msg(a: Any, n: Any, out_idx: int, in_idx: int, part: str | None) -> str:
    prefix = "" if part is None else f"While considering the {part} part of complex outputs only, "
    return (f"{prefix}Jacobian mismatch for output {out_idx:d} with respect to input "
            f"{in_idx:d},\nnumerical:{n}\nanalytical:{a}\n")


def _slow_check(func: Callable, inputs: tuple, diff: list, eps: float, rtol: float,
                atol: float, check_grad_dtypes: bool, part: str | None) -> None:
    outputs = _outputs(func, inputs)
    wanted = [o.requires_grad for o in outputs]
    # analytical first: the finite differences write the inputs in place (new versions)
    analytical = [_analytical(o, diff, check_grad_dtypes) for o in outputs if o.requires_grad]
    numerical = [[j for j, w in zip(_numerical(func, inputs, x, eps), wanted, strict=True) if w or
                  not any(wanted)] for x in diff]
    if not any(wanted):
        if any(np.any(j != 0) for per_x in numerical for j in per_x):
            raise GradcheckError("Numerical gradient for function expected to be zero")
        return
    for oi, per_x in enumerate(analytical):
        for xi, a in enumerate(per_x):
            n = numerical[xi][oi]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(_mismatch_msg(a, n, oi, xi, part))


def _unit_vector(numel: int, gen: Any) -> np.ndarray:
    """Random non-negative unit vector (PyTorch's fast-mode u and v)."""
    import gputensor as gt
    vec = _np(gt.rand(numel, dtype=gt.float64, generator=gen))
    norm = np.linalg.norm(vec)
    return vec / norm if norm > 0 else vec


def _fast_check(func: Callable, inputs: tuple, diff: list, eps: float, rtol: float,
                atol: float, check_grad_dtypes: bool, part: str | None) -> None:
    import gputensor as gt
    gen = gt.Generator()
    outputs = _outputs(func, inputs)
    wanted = [o.requires_grad for o in outputs]
    diff_outputs = [o for o in outputs if o.requires_grad]
    # u: one real vector per input, (u_re, u_im) for complex ones; v: one per output.
    all_u = [tuple(_unit_vector(x.numel(), gen) for _ in range(2 if x.dtype.is_complex else 1))
             for x in diff]
    all_v = [_unit_vector(o.numel(), gen) for o in diff_outputs]
    # analytical v^T J first: the finite differences write the inputs in place (new versions)
    all_vj = [_vjp(o, diff, gt.tensor(v.reshape(tuple(o.shape)), dtype=o.dtype,
                                      device=o.device), check_grad_dtypes)
              for o, v in zip(diff_outputs, all_v, strict=True)]
    all_vj = [[np.zeros(x.numel(), dtype=_jac_dtype(x)) if g is None else _np(g)
               for x, g in zip(diff, per_o, strict=True)] for per_o in all_vj]
    for xi, (x, u) in enumerate(zip(diff, all_u, strict=True)):
        values = x.detach()
        orig = values.clone()

        def set_value(d: Any, values: Any = values, orig: Any = orig) -> None:
            values.copy_(orig if d is None else orig + d)
        ju = None
        for ucomp, (_, unit) in zip(u, _directions(x, eps), strict=True):
            step = gt.tensor(ucomp.reshape(tuple(x.shape)) * eps * unit, dtype=x.dtype,
                             device=x.device)
            cols = _central_difference(func, inputs, x, set_value, step, eps)
            scaled = [unit * c for c in cols]
            ju = scaled if ju is None else [j + c for j, c in zip(ju, scaled, strict=True)]
        if not any(wanted):
            if any(np.any(j != 0) for j in ju):
                raise GradcheckError("Numerical gradient for function expected to be zero")
            continue
        ju = [j for j, w in zip(ju, wanted, strict=True) if w]
        for oi, v in enumerate(all_v):
            n = complex(np.dot(v, ju[oi])) if x.dtype.is_complex else float(np.dot(v, ju[oi]))
            vj = all_vj[oi][xi]
            a = (np.dot(vj.real, u[0]) + 1j * np.dot(vj.imag, u[1]) if x.dtype.is_complex
                 else float(np.dot(vj, u[0])))
            # atol scaled by v^T M u for the all-ones M: sum(u) * sum(v) (u_re, u_im summed).
            tol = atol * sum(float(c.sum()) for c in u) * float(v.sum())
            if not np.allclose(a, n, rtol=rtol, atol=tol):
                raise GradcheckError(_mismatch_msg(a, n, oi, xi, part)
                                     + _slow_details(func, inputs, diff, xi, oi, eps, rtol,
                                                     atol))


def _slow_details(func: Callable, inputs: tuple, diff: list, xi: int, oi: int, eps: float,
                  rtol: float, atol: float) -> str:
    """PyTorch's fast-mode failure appendix: the full Jacobians of the failing pair."""
    outputs = _outputs(func, inputs)  # a fresh graph: the inputs were written in place
    a = _analytical([o for o in outputs if o.requires_grad][oi], diff, False)[xi]
    n = [j for j, o in zip(_numerical(func, inputs, diff[xi], eps), outputs, strict=True)
         if o.requires_grad][oi]
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are "
           "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for "
           "more background \nabout fast mode. Below, we recompute numerical and analytical "
           f"jacobians in slow mode:\n\nNumerical:\n {n}\nAnalytical:\n{a}\n\n"
           f"The max per-element difference (slow mode) is: {np.abs(n - a).max(initial=0)}.\n")
    return msg + (_FAST_FAIL_SLOW_OK if np.allclose(a, n, rtol=rtol, atol=atol) else "")


def _check_inputs(inputs: tuple) -> list:
    """PyTorch's input checks; returns the inputs that require grad."""
    diff = []
    for idx, x in enumerate(inputs):
        if not (_is_tensor(x) and x.requires_grad):
            continue
        if str(x.dtype).rsplit(".", 1)[-1] not in ("float64", "complex128"):
            warnings.warn(f"Input #{idx} requires gradient and is not a double precision "
                          "floating point or complex. This check will likely fail if all the "
                          "inputs are not of double precision floating point or complex. ",
                          UserWarning, stacklevel=3)
        if not x.is_sparse and not all(st > 0 or sz <= 1
                                       for st, sz in zip(x.stride(), x.shape, strict=True)):
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                "inputs that are non-overlapping to be able to compute the numerical "
                "gradients correctly. You should call .contiguous on the input before "
                "passing it to gradcheck.")
        diff.append(x)
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    return diff


def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, check_grad_dtypes: bool =
              False, check_backward_ad: bool = True, fast_mode: bool = False,
              **unused: Any) -> bool:
    """Check ``func``'s gradients against finite differences for each floating or complex
    input that requires grad. Returns True, or raises GradcheckError naming the output/input
    pair that differs (returns False instead when ``raise_exception`` is False).

    Not implemented (accepted for signature compatibility and skipped): PyTorch's extra
    checks nondet_tol, check_undefined_grad, check_batched_grad, check_batched_forward_grad,
    check_forward_ad, masked."""
    inputs = _as_tuple(inputs)
    diff = _check_inputs(inputs)
    if not check_backward_ad:
        return True
    check = _fast_check if fast_mode else _slow_check
    try:
        if any(o.dtype.is_complex for o in _outputs(func, inputs)):
            # PyTorch checks the imaginary parts first, then the real parts.
            for part in ("imag", "real"):
                check(_part_of_outputs(func, part), inputs, diff, eps, rtol, atol,
                      check_grad_dtypes, "imaginary" if part == "imag" else "real")
        else:
            check(func, inputs, diff, eps, rtol, atol, check_grad_dtypes, None)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Any = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool =
                  False, raise_exception: bool = True, check_grad_dtypes: bool = False,
                  fast_mode: bool = False, **unused: Any) -> bool:
    """gradcheck of the gradients themselves (second derivatives through create_graph)."""
    import gputensor as gt
    inputs = _as_tuple(inputs)
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        gen = gt.Generator().manual_seed(0)
        grad_outputs = tuple(gt.randn(o.shape, dtype=o.dtype, generator=gen).to(o.device)
                             .requires_grad_() for o in outputs if o.requires_grad)
        if gen_non_contig_grad_outputs:  # same values, non-contiguous layout (as PyTorch)
            grad_outputs = tuple(gt.stack([g.detach(), g.detach()], -1).select(-1, 0)
                                 .requires_grad_() if g.dim() else g for g in grad_outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first_grads(*args: Any) -> tuple:
        ins, gos = args[:n], args[n:]
        outs = [o for o in _outputs(func, ins) if o.requires_grad]
        d = [x for x in ins if _is_tensor(x) and x.requires_grad]
        gs = autograd_grad(outs, d, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, check_grad_dtypes=check_grad_dtypes,
                     fast_mode=fast_mode)

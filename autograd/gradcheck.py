"""gradcheck / gradgradcheck: analytical Jacobians from autograd against central finite
differences (use float64 inputs; float32 differences are too coarse to compare)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .engine import grad as autograd_grad


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical Jacobians differ."""


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "_storage") and hasattr(x, "grad_fn")


def _as_tuple(x: Any) -> tuple:
    return (x,) if _is_tensor(x) else tuple(x)


def _outputs(func: Callable, inputs: tuple) -> tuple:
    """The floating outputs of ``func`` (integer outputs such as indices have no gradient)."""
    out = func(*inputs)
    return tuple(o for o in _as_tuple(out) if _is_tensor(o) and o.dtype.is_floating_point)


def _flat_values(outputs: Sequence[Any]) -> np.ndarray:
    parts = [o.detach().cpu().numpy().astype(np.float64).reshape(-1) for o in outputs]
    return np.concatenate(parts) if parts else np.zeros(0)


def _numerical(func: Callable, inputs: tuple, x: Any, eps: float) -> np.ndarray:
    """d(all outputs)/d(x) by central differences: shape (x.numel(), total output numel)."""
    if x.numel() == 0:
        return np.zeros((0, _flat_values(_outputs(func, inputs)).size))
    rows = []
    values = x.detach()
    for idx in np.ndindex(*x.shape):
        # ``values`` is a detached alias of x: writing it changes x without touching its graph.
        orig = values[idx].item()
        values[idx] = orig + eps
        plus = _flat_values(_outputs(func, inputs))
        values[idx] = orig - eps
        minus = _flat_values(_outputs(func, inputs))
        values[idx] = orig
        rows.append((plus - minus) / (2 * eps))
    return np.array(rows).reshape(x.numel(), -1)


def _analytical(outputs: tuple, diff_inputs: list) -> list[np.ndarray]:
    """Rows of each input's Jacobian from vector-Jacobian products with one-hot vectors."""
    import gputensor as gt
    sizes = [o.numel() for o in outputs]
    jac = [np.zeros((x.numel(), sum(sizes))) for x in diff_inputs]
    col = 0
    for oi, o in enumerate(outputs):
        if not o.requires_grad:
            col += sizes[oi]
            continue
        for k in range(o.numel()):
            onehot = gt.zeros(o.shape, dtype=o.dtype, device=o.device)
            onehot.view(-1)[k] = 1
            grads = autograd_grad(o, diff_inputs, onehot, retain_graph=True, allow_unused=True)
            for xi, gx in enumerate(grads):
                if gx is not None:
                    if gx.is_sparse:  # compared as a dense Jacobian column, as PyTorch does
                        gx = gx.to_dense()
                    if tuple(gx.shape) != tuple(diff_inputs[xi].shape):
                        raise GradcheckError(f"gradient for input {xi} has shape "
                                             f"{tuple(gx.shape)}, expected "
                                             f"{tuple(diff_inputs[xi].shape)}")
                    jac[xi][:, col + k] = gx.detach().cpu().numpy().astype(np.float64).ravel()
        col += sizes[oi]
    return jac


def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, **unused: Any) -> bool:
    """Check ``func``'s gradients against finite differences for each input that requires
    grad. Returns True, or raises GradcheckError naming the output/input pair that differs."""
    inputs = _as_tuple(inputs)
    diff = [x for x in inputs if _is_tensor(x) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for x in diff:
        if x.dtype.is_complex:
            raise ValueError("gradcheck compares real Jacobians; pass real floating inputs")
        if x.dtype.itemsize < 8:
            warnings.warn(f"input of dtype {x.dtype} is not double precision: gradcheck is "
                          f"likely to fail", UserWarning, stacklevel=2)
    outputs = _outputs(func, inputs)
    analytical = _analytical(outputs, diff)
    for xi, x in enumerate(diff):
        numerical = _numerical(func, inputs, x, eps)
        a = analytical[xi]
        if numerical.shape != a.shape or not np.allclose(a, numerical, rtol=rtol, atol=atol):
            if not raise_exception:
                return False
            raise GradcheckError(f"Jacobian mismatch for output(s) with respect to input {xi} "
                                 f"(shape {tuple(x.shape)}),\nnumerical:\n{numerical}\n"
                                 f"analytical:\n{a}")
    return True


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Any = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool =
                  False, raise_exception: bool = True, **unused: Any) -> bool:
    """gradcheck of the gradients themselves (second derivatives through create_graph)."""
    import gputensor as gt
    inputs = _as_tuple(inputs)
    diff = [x for x in inputs if _is_tensor(x) and x.requires_grad]
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        gen = gt.Generator().manual_seed(0)
        grad_outputs = tuple(gt.randn(o.shape, dtype=o.dtype, generator=gen).to(o.device)
                             .requires_grad_() for o in outputs if o.requires_grad)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first_grads(*args: Any) -> tuple:
        ins, gos = args[:n], args[n:]
        outs = [o for o in _outputs(func, ins) if o.requires_grad]
        d = [x for x in ins if _is_tensor(x) and x.requires_grad]
        gs = autograd_grad(outs, d, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    del diff
    return gradcheck(first_grads, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)

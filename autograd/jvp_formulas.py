"""Helpers the forward (JVP) formulas use, written with differentiable ops (so a tangent that
requires grad can be differentiated again). Formulas see these beside ``autograd.formulas``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _softmax_dim(out: Any, dim: int | None) -> int:
    """The dim softmax ran over (PyTorch's legacy choice when ``dim`` is None)."""
    if dim is not None:
        return dim
    return 0 if out.dim() in (0, 1, 3) else 1


def softmax_jvp(t: Any, out: Any, dim: int | None) -> Any:
    """d softmax = out * (t - sum(out * t)) along ``dim``."""
    dim = _softmax_dim(out, dim)
    t = t.to(out.dtype)
    return out * (t - (out * t).sum(dim, keepdim=True))


def log_softmax_jvp(t: Any, out: Any, dim: int | None) -> Any:
    """d log_softmax = t - sum(softmax * t) along ``dim``."""
    dim = _softmax_dim(out, dim)
    t = t.to(out.dtype)
    return t - (out.exp() * t).sum(dim, keepdim=True)


def product_rule(fn: Callable[[list[Any]], Any], xs: Sequence[Any], ts: Sequence[Any]) -> Any:
    """The JVP of ``fn(xs)``, multilinear in the tensors ``xs``: one term per input with its
    tangent in its place."""
    total = None
    for i, t in enumerate(ts):
        term = fn([*xs[:i], t, *xs[i + 1:]])
        total = term if total is None else total + term
    return total


def pad_jvp(t: Any, pad: Sequence[int], mode: str) -> Any:
    """The tangent of ``pad``: the tangent padded the same way, with zeros as the constant."""
    from gputensor.kernels.registry import OPS
    return OPS["pad"].frontend(t, pad, mode)   # (the argument ``pad`` hides the op's name)

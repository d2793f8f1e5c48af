"""Forward-mode AD (``gt.autograd.forward_ad``): dual levels, dual tensors and their tangents.

A dual tensor is an ordinary tensor with a tangent attached for the current level, as
PyTorch stores a forward gradient in a tensor's autograd metadata. Ops propagate tangents with
the JVP rule declared beside their backward formulas (``autograd/jvp.py``). Like PyTorch, one
level exists at a time (nested levels raise); ``gt.func.jvp`` composes transforms on top.

The op wrapper and the elementwise frontend read ``_state.active`` (thread-local) once per
call: the whole cost of forward AD when no level is entered.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, NamedTuple

from gputensor._tensor import Tensor

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "make_dual", "unpack_dual"]


class _ForwardState(threading.local):
    """The current level and whether ops propagate tangents (off inside a rule's own ops),
    per thread, as grad mode is: a level entered in one thread (and a rule suspending
    propagation there) leaves the ops of other threads alone. Each thread sees its own
    attributes; ``__init__`` runs once in every thread that reads them."""

    def __init__(self) -> None:
        self.level = -1
        self.token: object | None = None   # identifies the level a stored tangent belongs to
        self.active = False                # a level is entered and propagation is on
        self.duals: weakref.WeakSet[Tensor] = weakref.WeakSet()  # tensors with a tangent


_state = _ForwardState()


def enter_dual_level() -> int:
    """Enter a new forward grad level; the other functions of this API use it by default."""
    if _state.token is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _state.level += 1
    _state.token = object()
    _state.active = True
    return _state.level


def exit_dual_level(*, level: int | None = None) -> None:
    """Exit the current level, deleting every tangent attached at it."""
    if level is None:
        level = _state.level
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != _state.level or _state.token is None:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was "
                           "created. This is not supported.")
    for t in list(_state.duals):
        t.__dict__.pop("_fw_grad", None)
    _state.duals = weakref.WeakSet()
    _state.token = None
    _state.active = False
    _state.level = level - 1


class dual_level:
    """Context manager (and decorator) entering a forward AD level for its body."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper


class UnpackedDualTensor(NamedTuple):
    """``unpack_dual``'s result: the primal (a view without the tangent) and the tangent."""

    primal: Tensor
    tangent: Tensor | None


def _check_level(level: int | None, what: str) -> None:
    if level is None or level == _state.level:
        return
    raise RuntimeError(f"Invalid level given to {what}")


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A new alias of ``tensor`` carrying ``tangent`` at ``level`` (backward differentiable
    in ``tensor``). The tangent is kept as is when it has ``tensor``'s strides, else copied."""
    if _state.token is None or (level is not None and level < 0):
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    _check_level(level, "make_dual")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tangent._shape != tensor._shape:
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor._shape)} while the given forward gradient is of "
                           f"size {list(tangent._shape)}.")
    if tangent.device != tensor.device:
        raise RuntimeError(f"Trying to set a forward gradient that has a different device than "
                           f"that of the original Tensor, this is not supported. Tensor is on "
                           f"{tensor.device} while the given forward gradient is on "
                           f"{tangent.device}.")
    if tangent._dtype is not tensor._dtype:
        raise RuntimeError(f"Trying to set a forward gradient that has a different dtype than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"type {tensor.dtype} while the given forward gradient is of type "
                           f"{tangent.dtype}.")
    if tangent_of(tensor) is not None:
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {_state.level} is not supported.")
    with suspended():
        dual = tensor.view_as(tensor)
    set_tangent(dual, _like_layout(tangent, tensor))
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` at ``level``: the primal is a view of ``tensor``
    without the tangent (backward differentiable), the tangent is the stored one (or None)."""
    if _state.token is None or (level is not None and level < 0):
        return UnpackedDualTensor(tensor, None)
    _check_level(level, "_fw_primal")
    tangent = tangent_of(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    with suspended():
        primal = tensor.view_as(tensor)
    return UnpackedDualTensor(primal, tangent)


# -- tangent storage (used by the JVP rules, in-place ops and gt.func) --------------------------
def tangent_of(x: Any) -> Tensor | None:
    """``x``'s tangent at the current level, or None. A view made before its base got a
    tangent (``base.copy_(dual)``) sees the matching view of the base's tangent."""
    token = _state.token
    if token is None or not isinstance(x, Tensor):
        return None
    fg = x.__dict__.get("_fw_grad")
    if fg is not None and fg[0] is token:
        return fg[1]
    base = x._base
    if base is not None:
        fb = base.__dict__.get("_fw_grad")
        if fb is not None and fb[0] is token:
            view = _view_of_base_tangent(x, base, fb[1])
            set_tangent(x, view)
            return view
    return None


def set_tangent(x: Tensor, tangent: Tensor | None) -> None:
    """Attach ``tangent`` to ``x`` at the current level (None detaches it)."""
    if tangent is None:
        x.__dict__.pop("_fw_grad", None)
        return
    x._fw_grad = (_state.token, tangent)
    _state.duals.add(x)


def has_tangent(x: Any) -> bool:
    return tangent_of(x) is not None


def _view_of_base_tangent(view: Tensor, base: Tensor, base_tangent: Tensor) -> Tensor:
    """The view's region of its base's tangent (the tangent shares the base's strides)."""
    with suspended():
        return base_tangent.as_strided(view._shape, view._stride,
                                       base_tangent._offset + view._offset - base._offset)


def _like_layout(tangent: Tensor, primal: Tensor) -> Tensor:
    """``tangent`` with ``primal``'s strides (copied only when they differ), so the tangents
    of views of the primal line up with views of the tangent."""
    if tangent._stride == primal._stride or primal.numel() <= 1:
        return tangent
    import gputensor as gt
    from gputensor._ops._overlap import _dense
    with suspended():
        if _dense(primal):
            out = gt.empty_strided(primal._shape, primal._stride, dtype=tangent.dtype,
                                   device=tangent.device)
        else:
            out = gt.empty(primal._shape, dtype=tangent.dtype, device=tangent.device)
        out.copy_(tangent)
    return out


class suspended:
    """Ops inside run without propagating tangents (a JVP rule's own ops, the primal call of
    an op that has a rule), as PyTorch computes formulas on the primals of its level."""

    __slots__ = ("_prev",)

    def __enter__(self) -> None:
        self._prev = _state.active
        _state.active = False

    def __exit__(self, *exc: Any) -> None:
        _state.active = self._prev

"""In-place ops under autograd: compute out of place (recording the node), write the values
into the tensor, and move its history onto the new node.

When the tensor is a view of a base that takes part in autograd, the base's history is
rewritten too: the base becomes ``as_strided_scatter(old base, new view values)`` and the view
an ``as_strided`` of the new base (PyTorch's CopySlices, expressed with two differentiable ops).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import grad_mode
from .forward_ad import _state as _fw_state
from .forward_ad import has_tangent


def _requires_grad(x: Any) -> bool:
    return type(x) is not float and type(x) is not int and \
        bool(getattr(x, "_requires_grad", False))


def needs_graph(self: Any, args: tuple, kwargs: dict) -> bool:
    """Whether an in-place op on ``self`` with these arguments must record a node, or carry
    tangents (forward AD). Plain loops: this runs on every in-place call."""
    if _fw_state.active and (has_tangent(self) or any(has_tangent(a) for a in args) or
                             any(has_tangent(v) for v in kwargs.values())):
        return True
    if not grad_mode._state.enabled:
        return False
    if self._requires_grad or (self._base is not None and self._base._requires_grad):
        return True
    for a in args:
        if _requires_grad(a):
            return True
    if kwargs:
        for v in kwargs.values():
            if _requires_grad(v):
                return True
    return False


def check_leaf(self: Any) -> None:
    if self.grad_fn is None and self._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    base = self._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")


def apply_inplace(self: Any, compute: Callable[[], Any]) -> Any:
    """Run an in-place op on ``self`` whose out-of-place result ``compute()`` records."""
    check_leaf(self)
    result = compute()
    from gputensor._ops.copying import strided_copy
    with grad_mode.no_grad():
        strided_copy(self, result)
    self._storage._version += 1
    if _fw_state.active:
        from .jvp import take_tangent
        take_tangent(self, result)
    base = self._base
    if base is None or not (base._requires_grad or result._requires_grad):
        _take_history(self, result)
        return self
    _rebase_view(self, base, result)
    return self


def _take_history(self: Any, result: Any) -> None:
    if result._requires_grad:
        self.grad_fn = result.grad_fn
        self._output_nr = result._output_nr
        self._requires_grad = True


def _rebase_view(view: Any, base: Any, result: Any) -> None:
    from gputensor.kernels.registry import OPS
    if not base.is_contiguous() or base._offset != 0:
        raise RuntimeError(f"in-place op on a view of a tensor with strides {base.stride()} and "
                           f"offset {base._offset}: autograd needs the base to be contiguous; "
                           f"call .contiguous() on the base first")
    geometry = (tuple(view._shape), tuple(view._stride), view._offset)
    # The base's new history: its old value with the view's region replaced by the result.
    OPS["as_strided_scatter"].derivative.record_call(base, (base, result, *geometry), {})
    # The view's new history: a view of the new base.
    view.grad_fn = None
    view._requires_grad = False
    OPS["as_strided"].derivative.record_call(view, (base, *geometry), {})

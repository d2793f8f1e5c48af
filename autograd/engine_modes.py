"""Thread-local switches of the backward engine: multithreaded backward and the gradient
layout policy (``set_multithreading_enabled``, ``enforce_grad_layout_policy``), and the
gradient layout contract that ``AccumulateGrad`` keeps.

**Multithreading.** PyTorch's engine runs the backward of accelerator tensors on one worker
thread per device; ``set_multithreading_enabled(False)`` makes it run on the calling thread.
This engine (``engine.py``) always runs backward on the calling thread and CUDA work is
ordered by the streams the ops launch on, so the switch selects nothing here: it is PyTorch's
thread-local state, readable with ``is_multithreading_enabled()``, kept so that code setting
it behaves (and reads back) as under PyTorch.

**Gradient layout contract.** A gradient a leaf accumulates for the first time takes the
strides of the leaf when the leaf is non-overlapping and dense, else row-major; an incoming
gradient that already obeys this is kept ("stolen") without a copy. With
``enforce_grad_layout_policy(False)`` a stealable gradient is kept whatever its layout, and
the warning that an accumulated ``.grad`` breaks the contract is not given; a gradient that
must be copied is still copied in the contract's layout (PyTorch's relaxation).
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any


class _EngineState(threading.local):
    multithreading = True      # per-thread switches; class attributes are the defaults
    layout_enforced = True


_state = _EngineState()


def is_multithreading_enabled() -> bool:
    """Whether multithreaded backward is enabled in this thread (True unless switched off)."""
    return _state.multithreading


def is_grad_layout_enforcement_enabled() -> bool:
    """Whether ``AccumulateGrad`` enforces the gradient layout contract in this thread."""
    return _state.layout_enforced


class _Switch:
    """A thread-local switch set when constructed (so it also works as a plain call) and
    restored on exit; as a decorator it sets the mode around each call."""

    _attr = ""
    _default = True
    _c_name = ""   # the name PyTorch's argument error gives the setter

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"{self._c_name}(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        self.mode = mode
        self.prev = getattr(_state, self._attr, self._default)
        setattr(_state, self._attr, self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        setattr(_state, self._attr, self.prev)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self) -> _Switch:
        """A copy of this switch (which sets the mode again)."""
        return self.__class__(self.mode)


class set_multithreading_enabled(_Switch):  # noqa: N801 (PyTorch's name)
    """Context manager or function: enable (``mode=True``, the default state) or disable
    multithreaded backward in this thread. See the module docstring: this engine always runs
    backward on the calling thread, so the state is recorded and read back only."""

    _attr = "multithreading"
    _c_name = "set_multithreading_enabled"
    # As in PyTorch, using it as a decorator leaves the mode set by the construction in the
    # decorator expression in place (only enforce_grad_layout_policy restores it there).


class enforce_grad_layout_policy(_Switch):  # noqa: N801 (PyTorch's name)
    """Context manager or function: enforce (``enable=True``, the default) or relax the
    gradient layout contract of accumulated gradients in this thread."""

    _attr = "layout_enforced"
    _c_name = "set_grad_layout_enforcement_enabled"

    def __init__(self, enable: bool = True) -> None:
        super().__init__(enable)

    def __call__(self, fn: Callable) -> Callable:
        setattr(_state, self._attr, self.prev)   # decorating does not switch the mode
        return super().__call__(fn)


# -- the gradient layout contract (PyTorch's autograd/utils/grad_layout_contract.h) ----------
def _non_overlapping_and_dense(t: Any) -> bool:
    from gputensor._ops._overlap import _dense  # (autograd loads before the ops)
    return _dense(t)


def obeys_layout_contract(grad: Any, param: Any) -> bool:
    """Whether ``grad`` is laid out as ``param``'s accumulated gradient should be: ``param``'s
    strides (ignoring size-1 dims, which must not be broadcast) for a dense ``param``, else
    row-major."""
    if param._sparse or grad._sparse:   # COO or compressed: no strides
        return False
    # the common case (a gradient laid out as its parameter) without sorting strides
    if grad._shape == param._shape and grad._stride == param._stride and 0 not in grad._stride:
        return True
    if _non_overlapping_and_dense(param):
        for n, gs, ps in zip(grad.shape, grad.stride(), param.stride(), strict=True):
            if n != 1 and gs != ps:
                return False
            if n == 1 and gs == 0:
                return False
        return True
    return grad.is_contiguous()


def clone_obey_contract(grad: Any, param: Any) -> Any:
    """A copy of ``grad`` laid out by the contract (recorded by autograd when grad mode is
    on, as a ``create_graph`` backward needs)."""
    import gputensor as gt
    if _non_overlapping_and_dense(param):
        out = gt.empty_strided(tuple(param.shape), param.stride(), dtype=grad.dtype,
                               device=grad.device)
        return out.copy_(grad)
    return grad.clone(memory_format=gt.contiguous_format)


_warned: set[str] = set()   # PyTorch warns once per process at each of its two call sites


def warn_if_breaks_contract(grad: Any, param: Any, site: str) -> None:
    """PyTorch's warning after an accumulation (``site``: "in-place" or "out-of-place")
    whose result breaks the contract, once per site."""
    if site in _warned or grad._sparse or param._sparse:   # COO or compressed
        return
    # This runs per parameter per step: the common case, a gradient with its parameter's
    # strides (which obeys the contract), costs two tuple compares.
    if grad._stride == param._stride and grad._shape == param._shape or \
            not is_grad_layout_enforcement_enabled():
        return
    if not obeys_layout_contract(grad, param):
        _warned.add(site)
        warnings.warn(
            f"grad and param do not obey the gradient layout contract. This is not an error, "
            f"but may impair performance.\ngrad.sizes() = {list(grad.shape)}, strides() = "
            f"{list(grad.stride())}\nparam.sizes() = {list(param.shape)}, strides() = "
            f"{list(param.stride())}", UserWarning, stacklevel=2)

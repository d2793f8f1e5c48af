"""The Optimizer base class and the helpers every update rule shares.

An optimizer holds ``param_groups`` (dicts of hyper-parameters, each with a ``params`` list)
and ``state`` (a per-parameter dict of buffers). ``state_dict`` uses PyTorch's format: params
are referred to by their position across all groups, so a state dict saved from one optimizer
loads into another built over the same parameters in the same order.

Update rules run under ``no_grad`` and write parameters in place. They follow PyTorch's
single-tensor reference rules op for op; ops gputensor lacks (``addcmul_``, ``addcdiv_``) are
written with ``mul``/``div``/``add_`` in the same order, so each result is rounded the same way.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any

import gputensor._dtype as D
from gputensor._compile import state as _capture
from gputensor._ops._core import kernel as _backend_kernel
from gputensor._ops.creation import tensor as _tensor
from gputensor._tensor import _STRIDES_CACHE, Tensor
from gputensor.autograd.grad_mode import enable_grad, no_grad

# Registers the fused CPU kernels (_fused_adam, _fused_sgd, _fused_adagrad) with the CPU
# backend (kernels/cpu/__init__.py does not import that module yet).
from gputensor.kernels.cpu import optim as _cpu_optim_kernels  # noqa: F401

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]


class _RequiredParameter:
    """Marks a hyper-parameter every param group must give (e.g. a default-less lr)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


class RemovableHandle:
    """Returned by the hook registrations; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: OrderedDict) -> None:
        self._hooks = hooks
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _with_step_hooks(step: Callable) -> Callable:
    """Wrap a ``step`` so the registered pre/post hooks run around it (once, even when a
    subclass's step calls ``super().step``)."""
    @functools.wraps(step)
    def wrapper(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_in_step"):
            return step(self, *args, **kwargs)
        pre, post = self.__dict__.get("_step_pre_hooks"), self.__dict__.get("_step_post_hooks")
        if not pre and not post:
            return step(self, *args, **kwargs)
        for hook in tuple(pre.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"optimizer step pre-hook must return None or a tuple "
                                       f"of (new_args, new_kwargs), but got {result!r}")
                args, kwargs = result
        self._in_step = True
        try:
            out = step(self, *args, **kwargs)
        finally:
            self._in_step = False
        for hook in tuple(post.values()):
            hook(self, args, kwargs)
        return out
    wrapper._with_step_hooks = True  # type: ignore[attr-defined]
    return wrapper


class Optimizer:
    """Base class of all optimizers (``gt.optim.Optimizer``, as ``torch.optim.Optimizer``).

    Subclasses give their update rule as ``_update_group(group)``, called for every param
    group under ``no_grad`` by :meth:`step`, or override ``step`` itself (as LBFGS does).
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._step_pre_hooks: OrderedDict = OrderedDict()
        self._step_post_hooks: OrderedDict = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError(f"params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        self.state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_with_step_hooks", False):
            cls.step = _with_step_hooks(step)

    # -- pickling and printing -------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_step_post_hooks", OrderedDict())

    def __repr__(self) -> str:
        # PyTorch's layout: one block per group, blocks separated by a blank line.
        blocks = []
        for i, group in enumerate(self.param_groups):
            keys = "".join(f"    {k}: {group[k]}\n" for k in sorted(group) if k != "params")
            blocks.append(f"Parameter Group {i}\n{keys}")
        return f"{type(self).__name__} (\n" + "\n".join(blocks) + ")"

    # -- param groups ----------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyper-parameters (missing ones default)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("param_group must have a 'params' entry (the tensors to optimize)")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            param_group["param_names"] = names
        param_group["params"] = params
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but parameter {i} of the "
                                f"group is a {type(p).__name__}")
            if not (p.is_leaf or getattr(p, "retains_grad", False)):
                raise ValueError(f"can't optimize a non-leaf Tensor (parameter {i} of the "
                                 f"group, shape {list(p.shape)}, has a grad_fn)")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        seen: set[int] = set()
        for i, p in enumerate(params):
            if id(p) in seen:
                raise ValueError(f"optimizer got a parameter group with duplicate parameters "
                                 f"(parameter {i}, shape {list(p.shape)}, is listed twice)")
            seen.add(id(p))
        for g in self.param_groups:
            if any(id(p) in seen for p in g["params"]):
                raise ValueError("some parameters appear in more than one parameter group")
            if ("param_names" in g) != ("param_names" in param_group):
                have = "with names" if "param_names" in param_group else "without names"
                raise ValueError(f"all optimizer param groups should be with/without names. "
                                 f"cannot add param group {have} to the optimizer")
        self.param_groups.append(param_group)

    # -- gradients and steps ---------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One optimization step over every param group; returns the closure's loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        raise TypeError(f"{type(self).__name__} defines no update rule: subclasses of "
                        f"Optimizer override step() or _update_group(group)")

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before each step; it may return new
        ``(args, kwargs)``."""
        handle = RemovableHandle(self._step_pre_hooks)
        self._step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after each step."""
        handle = RemovableHandle(self._step_post_hooks)
        self._step_post_hooks[handle.id] = hook
        return handle

    # -- state dicts -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: per-param state}, "param_groups": [...]}``, params referred to
        by their index across all groups (the state's tensors are not copied)."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a :meth:`state_dict`. Floating-point state tensors move to their parameter's
        device and dtype (other tensors to its device); ``step`` counters are kept as saved."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups "
                             f"({len(saved_groups)}) than the optimizer ({len(groups)})")
        for i, (g, s) in enumerate(zip(groups, saved_groups, strict=True)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(f"loaded state dict contains a parameter group that doesn't "
                                 f"match the size of optimizer's group: group {i} has "
                                 f"{len(s['params'])} params, the optimizer's has "
                                 f"{len(g['params'])}")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups), strict=True))
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = _cast_state(param, v)
            else:
                state[k] = v
        for g, s in zip(groups, saved_groups, strict=True):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})


def _cast_state(param: Tensor, value: Any, key: Any = None) -> Any:
    """A loaded state value placed like ``param`` (PyTorch's rule; ``step`` stays as saved)."""
    if isinstance(value, Tensor):
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cast_state(param, v) for v in value)
    return value


# -- helpers shared by the update rules ----------------------------------------------------------
def to_scalar(x: Any) -> Any:
    """A hyper-parameter as a Python number (a 1-element tensor lr gives its value)."""
    return x.item() if isinstance(x, Tensor) else x


def check_nonnegative(name: str, value: Any, label: str | None = None) -> None:
    if not 0.0 <= to_scalar(value):
        raise ValueError(f"Invalid {label or name}: {value}")


def check_lr(lr: Any) -> None:
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError(f"Tensor lr must be 1-element, got shape {list(lr.shape)}")
    check_nonnegative("lr", lr, "learning rate")


def check_betas(betas: Any) -> tuple[float, float]:
    if not isinstance(betas, list | tuple) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        if not 0.0 <= to_scalar(b) < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b} (must be in [0, 1))")
    return tuple(to_scalar(b) for b in betas)  # type: ignore[return-value]


def check_fused_foreach(fused: bool | None, foreach: bool | None) -> None:
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def check_unsupported(**flags: bool) -> None:
    """capturable/differentiable exist for PyTorch signature parity; gputensor's optimizers
    step eagerly and outside autograd, so only False is accepted."""
    for name, value in flags.items():
        if value:
            raise ValueError(f"{name}=True is not supported by gputensor's optimizers")


def step_dtype() -> D.dtype:
    """The dtype of ``state['step']`` counters: float32, or float64 when that is the default."""
    return D.float64 if D.get_default_dtype() is D.float64 else D.float32


def new_step() -> Tensor:
    """A fresh 0-dim ``step`` counter on the CPU (PyTorch keeps non-fused steps on the CPU)."""
    return _tensor(0.0, dtype=step_dtype())


def increment_step(step: Tensor) -> float:
    """``step += 1`` in the counter's own dtype; returns the new count as a Python float."""
    _capture.host_effect("an optimizer step (its step count lives on the host)")
    if step._storage.device.type == "cpu":
        # Through the 0-dim host view instead of a tensor op. The exact sum, stored back,
        # rounds to the counter's dtype just as an add in that dtype would.
        h = step._host
        value = h.item() + 1.0
        h[()] = value
        step._storage._version += 1
        return float(h.item())
    step.add_(1)
    return float(step.item())


def as_real(t: Tensor) -> Tensor:
    """A real view of a complex tensor (trailing dim of 2), like ``torch.view_as_real``;
    real tensors are returned as they are."""
    if not t._dtype.is_complex:
        return t
    out = Tensor._make(t._storage, t._dtype.to_real(), t._shape + (2,),
                       tuple(2 * s for s in t._stride) + (1,), 2 * t._offset)
    out._base = t if t._base is None else t._base
    return out


def addcmul_(t: Tensor, a: Tensor, b: Tensor, value: float = 1) -> Tensor:
    """``t += value * a * b`` rounded as PyTorch's addcmul_: ((value * a) * b), then the add."""
    return t.add_(a.mul(value).mul_(b))


def addcdiv_(t: Tensor, a: Tensor, b: Tensor, value: float = 1) -> Tensor:
    """``t += value * a / b`` rounded as PyTorch's addcdiv_: ((value * a) / b), then the add."""
    return t.add_(a.mul(value).div_(b))


def params_with_grad(optimizer: Optimizer, group: dict[str, Any], name: str,
                     with_state: bool = True, allow_sparse: bool = False,
                     ) -> list[tuple[Tensor, Tensor, dict[str, Any]]]:
    """(param, grad, state) for every param of ``group`` that has a gradient (state is None
    when ``with_state`` is False, so no empty state entry is created)."""
    out = []
    state = optimizer.state
    for p in group["params"]:
        g = p.grad
        if g is None:
            continue
        if g.is_sparse and not allow_sparse:
            raise RuntimeError(f"{name} does not support sparse gradients")
        out.append((p, g, state[p] if with_state else None))
    return out


def fused_kernel(group: dict[str, Any], name: str, optimizer_name: str,
                 items: list[tuple[Tensor, ...]]) -> tuple[Callable | None, list[int], list[int]]:
    """Split ``items`` (tuples whose first entry is the param, the rest its grad and state
    tensors) into the indices of those a backend kernel ``name`` can update and the rest.

    A fused kernel takes contiguous real floating tensors of the param's dtype on one device.
    ``fused=None`` uses it where it applies; ``fused=True`` requires it for every param;
    ``fused=False`` or ``foreach=True`` never uses it.
    """
    fused = group.get("fused")
    everything = list(range(len(items)))
    if fused is False or group.get("foreach") or not items:
        return None, [], everything
    fast, slow = [], []
    dev = items[0][0]._storage.device
    for i, item in enumerate(items):
        p = item[0]
        dt = p._dtype
        ok = (dt is D.float32 or dt is D.float64) and p._storage.device is dev
        if ok:
            for t in item:
                # Tensors made contiguous share the cached stride tuple: identity is the
                # quick test, is_contiguous() the exact one.
                if (t._dtype is not dt or t._storage.device is not dev
                        or (t._stride is not _STRIDES_CACHE.get(t._shape)
                            and not t.is_contiguous())):
                    ok = False
                    break
        (fast if ok else slow).append(i)
    fn = None
    if fast:
        try:
            fn = _backend_kernel(items[fast[0]][0], name)
        except RuntimeError:
            if fused:
                raise RuntimeError(f"{optimizer_name}(fused=True): the {dev.type} backend has no "
                                   f"{name} kernel") from None
            fast, slow = [], everything
    if fused and slow:
        p = items[slow[0]][0]
        raise RuntimeError(f"{optimizer_name}(fused=True) requires contiguous float32/float64 "
                           f"params, grads and state of one dtype on one device; got a param "
                           f"of dtype {p.dtype} on {p.device} (shape {list(p.shape)}) that "
                           f"does not qualify")
    return fn, fast, slow


def columns(items: list[tuple[Tensor, ...]], indices: list[int]) -> list[tuple[Tensor, ...]]:
    """The selected items transposed: (params, grads, state_1, ...) for a fused kernel."""
    return list(zip(*(items[i] for i in indices), strict=True))

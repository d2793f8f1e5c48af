"""``gt.compile`` and ``OptimizedModule``: torch.compile's entry points over CompiledFunction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor.nn.modules.module import Module

from .compiled import CompiledFunction

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BACKENDS = ("inductor", "eager")


def _check_arguments(backend: Any, mode: Any, options: Any, dynamic: Any) -> None:
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: "
                           + ", ".join(str(m) for m in _MODES[1:]))
    if callable(backend) or backend not in _BACKENDS:
        raise NotImplementedError(
            f"gt.compile: backend={backend!r} is not available; gputensor compiles with its "
            "own capture and replay (backend='inductor', the default) or runs eagerly "
            "(backend='eager')")
    if options:
        raise RuntimeError("Unexpected optimization option " + ", ".join(map(str, options))
                           + " (gputensor's compiler takes no options)")
    if dynamic:
        raise NotImplementedError("gt.compile(dynamic=True): gputensor captures one graph per "
                                  "input shape (dynamic=None or False)")


def _modules_of(fn: Any) -> list[Any]:
    owner = fn if isinstance(fn, Module) else getattr(fn, "__self__", None)
    return list(owner.modules()) if isinstance(owner, Module) else []


def compile(model: Callable[..., Any] | None = None, *, fullgraph: bool = False,
            dynamic: bool | None = None, backend: Any = "inductor", mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False) -> Any:
    """torch.compile: calls with the same argument shapes, dtypes, devices, grad mode and
    module training flags replay the kernels captured on the first such call, forward and
    backward, without running the op frontends again; returns an ``OptimizedModule`` for a
    module, a compiled callable for a function, or a decorator when ``model`` is omitted."""
    _check_arguments(backend, mode, options, dynamic)

    def wrap(fn: Callable[..., Any]) -> Any:
        if disable or backend == "eager":
            return fn
        if isinstance(fn, Module):
            return OptimizedModule(fn, fullgraph=fullgraph, mode=mode)
        if not callable(fn):
            raise RuntimeError(f"gt.compile expects a callable or a Module, got "
                               f"{type(fn).__name__}")
        return CompiledFunction(fn, fullgraph=fullgraph, modules=_modules_of(fn), mode=mode)

    return wrap if model is None else wrap(model)


class OptimizedModule(Module):
    """A compiled module (torch._dynamo's OptimizedModule): its ``_orig_mod`` is the module,
    so state_dict keys carry the ``_orig_mod.`` prefix as PyTorch's do; other attributes are
    the original module's."""

    def __init__(self, mod: Module, *, fullgraph: bool = False, mode: str | None = None) -> None:
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled"] = CompiledFunction(
            mod.__call__, fullgraph=fullgraph, modules=list(mod.modules()), mode=mode)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_compiled"](*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

"""gputensor.func: composable function transforms (torch.func's API).

``vmap`` maps a function over a batch dimension through per-family batching rules; ``grad``,
``vjp``, ``jacrev``, ``jacfwd``, ``hessian``, ``jvp`` and ``linearize`` differentiate functions;
``functional_call`` and ``stack_module_state`` run modules with substituted state;
``functionalize`` removes a function's mutations, ``rearrange`` reorders axes einops-style and
``debug_unwrap`` shows the tensor under a vmap wrapper. The public
names load on first use: the op frontends import ``gputensor.func._state`` while the package
itself is still initialising.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "vmap": "_vmap",
    "grad": "_reverse", "grad_and_value": "_reverse", "vjp": "_reverse", "jacrev": "_reverse",
    "hessian": "_forward", "jvp": "_forward", "jacfwd": "_forward", "linearize": "_forward",
    "functional_call": "_module", "stack_module_state": "_module",
    "replace_all_batch_norm_modules_": "_module",
    "functionalize": "_functionalize", "debug_unwrap": "_functionalize",
    "rearrange": "_rearrange",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'gputensor.func' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"gputensor.func.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))

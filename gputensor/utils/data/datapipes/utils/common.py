"""Checks shared by the DataPipes that take a function: does it fit ``input_col``, and will
it pickle (worker processes receive the pipeline pickled)."""

from __future__ import annotations

import functools
import inspect
import random
import warnings
from collections.abc import Callable
from typing import Any


def _fn_name(fn: Callable) -> str:
    if isinstance(fn, functools.partial):
        return getattr(fn.func, "__name__", repr(fn.func))
    return getattr(fn, "__name__", repr(fn))


def validate_input_col(fn: Callable, input_col: int | tuple | list | None) -> None:
    """``fn`` must take exactly as many positional arguments as ``input_col`` names columns
    (one when it names one or none)."""
    try:
        sig = inspect.signature(fn)
    except ValueError:  # a builtin without a signature: nothing to check
        return
    wanted = len(input_col) if isinstance(input_col, (list, tuple)) else 1
    kinds = inspect.Parameter
    pos = [p for p in sig.parameters.values()
           if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind is kinds.VAR_POSITIONAL for p in sig.parameters.values())
    kw_required = [p for p in sig.parameters.values()
                   if p.kind is kinds.KEYWORD_ONLY and p.default is p.empty]
    name = _fn_name(fn)
    if kw_required:
        raise ValueError(f"The function {name} takes {len(kw_required)} non-default "
                         f"keyword-only parameters, which is not allowed.")
    if len(sig.parameters) < wanted:
        if not var_positional:
            raise ValueError(f"The function {name} takes {len(sig.parameters)} parameters, but "
                             f"{wanted} are required.")
    elif len(pos) > wanted and any(p.default is p.empty for p in pos[wanted:]) or \
            len(pos) < wanted and not var_positional:
        raise ValueError(f"The function {name} takes {len(pos)} positional parameters, but "
                         f"{wanted} are required.")


def _is_local(fn: Any) -> bool:
    if hasattr(fn, "__code__"):
        return bool(fn.__code__.co_flags & inspect.CO_NESTED)
    qualname = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", "")
    return "<locals>" in qualname


def check_unpickable_fn(fn: Any) -> None:
    """Raise for a non-callable; warn for a lambda or local function, which cannot be
    pickled to worker processes (PyTorch warns likewise when dill is absent)."""
    if not callable(fn):
        raise TypeError(f"A callable function is expected, but {type(fn)} is provided.")
    if isinstance(fn, functools.partial):
        fn = fn.func
    if _is_local(fn):
        warnings.warn("Local function is not supported by pickle, please use regular python "
                      "function or functools.partial instead.", stacklevel=3)
    elif getattr(fn, "__name__", None) == "<lambda>":
        warnings.warn("Lambda function is not supported by pickle, please use regular python "
                      "function or functools.partial instead.", stacklevel=3)


def sized_len(datapipe: Any, source: Any) -> int:
    """``len(source)``; a source without ``__len__`` raises PyTorch's TypeError naming
    ``datapipe`` (a source whose ``__len__`` raises reports itself)."""
    if not hasattr(type(source), "__len__"):
        raise TypeError(f"{type(datapipe).__name__} instance doesn't have valid length")
    return len(source)


class SeededShuffle:
    """What the DataLoader calls on a shuffling DataPipe (``set_shuffle``, ``set_seed``), the
    per-iteration reseeding of its ``random.Random`` and the pickling of that generator."""

    _enabled: bool
    _seed: int | None
    _rng: random.Random

    def _init_shuffle(self) -> None:
        self._enabled = True
        self._seed = None
        self._rng = random.Random()

    def set_shuffle(self, shuffle: bool = True) -> Any:
        self._enabled = shuffle
        return self

    def set_seed(self, seed: int) -> Any:
        self._seed = seed
        return self

    def _reseed(self) -> None:
        """At each new iteration: the seed set (used once), else one drawn from gt's default
        generator; a disabled shuffle without a seed seeds from the system."""
        if self._enabled and self._seed is None:
            import gputensor as gt

            self._seed = int(gt.empty((), dtype=gt.int64).random_().item())
        self._rng.seed(self._seed)
        self._seed = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_rng"] = self._rng.getstate()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        rng = random.Random()
        rng.setstate(state.pop("_rng"))
        self.__dict__.update(state, _rng=rng)


def init_batcher(dp: Any, datapipe: Any, batch_size: int, drop_last: bool,
                 wrapper_class: type) -> None:
    """The shared constructor of the iter and map Batchers."""
    if batch_size <= 0:
        raise AssertionError("Batch size is required to be larger than 0!")
    dp.datapipe = datapipe
    dp.batch_size = batch_size
    dp.drop_last = drop_last
    dp.wrapper_class = wrapper_class


def batch_count(dp: Any) -> int:
    """How many batches a Batcher makes of its source."""
    n = sized_len(dp, dp.datapipe)
    return n // dp.batch_size if dp.drop_last else -(-n // dp.batch_size)

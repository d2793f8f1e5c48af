"""Decorators for DataPipe classes: ``functional_datapipe`` (register ``dp.name(...)``),
``non_deterministic`` with ``guaranteed_datapipes_determinism``, and the type checks
``argument_validation``, ``runtime_validation`` and ``runtime_validation_disabled``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, get_args, get_type_hints

from ._typing import _DataPipeType
from .datapipe import IterDataPipe, MapDataPipe


class functional_datapipe:
    """``@functional_datapipe("map")`` on a DataPipe class makes ``dp.map(*args)`` build
    ``cls(dp, *args)`` on every DataPipe of the same kind (iter or map)."""

    name: str

    def __init__(self, name: str, enable_df_api_tracing: bool = False) -> None:
        if enable_df_api_tracing:
            raise NotImplementedError("functional_datapipe: DataFrame API tracing "
                                      "(enable_df_api_tracing=True) is not supported")
        self.name = name
        self.enable_df_api_tracing = enable_df_api_tracing

    def __call__(self, cls: Any) -> Any:
        wrapper = cls if isinstance(cls, non_deterministic) else getattr(cls, "__self__", None)
        if isinstance(wrapper, non_deterministic):  # builds the class after its check
            IterDataPipe.register_datapipe_as_function(self.name, cls)
        elif isinstance(cls, type) and issubclass(cls, IterDataPipe):
            IterDataPipe.register_datapipe_as_function(self.name, cls)
        elif isinstance(cls, type) and issubclass(cls, MapDataPipe):
            MapDataPipe.register_datapipe_as_function(self.name, cls)
        else:
            raise TypeError("`functional_datapipe` can only decorate IterDataPipe or "
                            "MapDataPipe classes")
        return cls


_determinism = [False]
_runtime_validation = [True]


class _FlagSetter:
    """Sets a module flag from construction (PyTorch's behaviour) until ``__exit__``."""

    _flag: list[bool]
    _value: bool
    prev: bool

    def __init__(self) -> None:
        self.prev = self._flag[0]
        self._flag[0] = self._value

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        self._flag[0] = self.prev


class guaranteed_datapipes_determinism(_FlagSetter):
    """While active, building a DataPipe marked ``non_deterministic`` raises TypeError."""

    _flag, _value = _determinism, True


class non_deterministic:
    """Marks an IterDataPipe class as non-deterministic: ``@non_deterministic`` always, or
    ``@non_deterministic(fn)`` when ``fn(*constructor args)`` returns True."""

    cls: type[IterDataPipe] | None = None
    deterministic_fn: Callable[..., bool]

    def __init__(self, arg: type[IterDataPipe] | Callable[..., bool]) -> None:
        if isinstance(arg, type):
            if not issubclass(arg, IterDataPipe):
                raise TypeError(f"Only `IterDataPipe` can be decorated with `non_deterministic`"
                                f", but {arg.__name__} is found")
            self.cls = arg
        elif callable(arg):
            self.deterministic_fn = arg
        else:
            raise TypeError(f"{arg} can not be decorated by non_deterministic")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.cls is not None:
            if _determinism[0]:
                raise TypeError(f"{self.cls.__name__} is non-deterministic, but you set "
                                f"'guaranteed_datapipes_determinism'. You can turn off "
                                f"determinism for this DataPipe if that is acceptable for your "
                                f"application")
            return self.cls(*args, **kwargs)
        if not (isinstance(args[0], type) and issubclass(args[0], IterDataPipe)):
            raise TypeError(f"Only `IterDataPipe` can be decorated, but {args[0].__name__} is "
                            f"found")
        self.cls = args[0]
        return self.deterministic_wrapper_fn

    def deterministic_wrapper_fn(self, *args: Any, **kwargs: Any) -> IterDataPipe:
        res = self.deterministic_fn(*args, **kwargs)
        if not isinstance(res, bool):
            raise TypeError(f"deterministic_fn of `non_deterministic` decorator is required to "
                            f"return a boolean value, but {type(res)} is found")
        if _determinism[0] and res:
            raise TypeError(f"{self.cls.__name__} is non-deterministic with the inputs, but "
                            f"you set 'guaranteed_datapipes_determinism'. You can turn off "
                            f"determinism for this DataPipe if that is acceptable for your "
                            f"application")
        return self.cls(*args, **kwargs)  # type: ignore[misc]


def argument_validation(f: Callable) -> Callable:
    """Check, on each call, that arguments annotated with a DataPipe type (``IterDataPipe`` or
    ``IterDataPipe[int]``) are IterDataPipes whose element type fits the annotation."""
    signature = inspect.signature(f)
    hints = get_type_hints(f)

    @wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            hint_cls = getattr(hint, "__origin__", hint)
            if not (isinstance(hint_cls, type) and issubclass(hint_cls, IterDataPipe)):
                continue
            if not isinstance(value, IterDataPipe):
                raise TypeError(f"Expected argument '{name}' as a IterDataPipe, but found "
                                f"{type(value)}")
            params = get_args(hint)
            wanted = _DataPipeType(params[0]) if params else hint_cls.type
            if not value.type.issubtype(wanted):
                raise TypeError(f"Expected type of argument '{name}' as a subtype of hint "
                                f"{wanted}, but found {value.type}")
        return f(*args, **kwargs)

    return wrapper


class runtime_validation_disabled(_FlagSetter):
    """While active, ``runtime_validation`` lets every element through unchecked."""

    _flag, _value = _runtime_validation, False


def runtime_validation(f: Callable) -> Callable:
    """Decorate an ``__iter__``: each element it yields must be of the DataPipe's type."""
    if f.__name__ != "__iter__":
        raise TypeError(f"Can not decorate function {f.__name__} with 'runtime_validation'")

    @wraps(f)
    def wrapper(self: Any) -> Iterator:
        if not _runtime_validation[0]:
            yield from f(self)
            return
        for d in f(self):
            if not self.type.issubtype_of_instance(d):
                raise RuntimeError(f"Expected an instance as subtype of {self.type}, but found "
                                   f"{d}({type(d)})")
            yield d

    return wrapper

"""What every ``IterDataPipe.__iter__`` does around the subclass's own code (PyTorch's
hook_iterator): creating an iterator calls ``reset()`` and invalidates the DataPipe's
previous iterator (one valid iterator per DataPipe), samples are counted, and an exception
raised inside ``__iter__`` is annotated with the DataPipe that raised it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

_FEEDBACK = ("\nFor feedback regarding this single iterator per IterDataPipe constraint, feel "
             "free to comment on this issue: https://github.com/pytorch/data/issues/45.")
_RAISED_BY = "thrown by __iter__ of"
_SINGLE_ITERATOR = "single iterator per IterDataPipe constraint"


def _short(obj: Any) -> str:
    return obj.__name__ if inspect.isfunction(obj) else repr(obj)


def input_args_string(datapipe: Any) -> str:
    """``name=value`` for the constructor arguments the DataPipe keeps as attributes."""
    names = set(inspect.signature(type(datapipe)).parameters)
    return ", ".join(f"{n}={_short(v)}" for n, v in sorted(vars(datapipe).items())
                     if n in names)


def datapipe_msg(datapipe: Any) -> str:
    return f"{type(datapipe).__name__}({input_args_string(datapipe)})"


def _invalidated(datapipe: Any) -> str:
    return ("This iterator has been invalidated because another iterator has been created "
            f"from the same IterDataPipe: {datapipe_msg(datapipe)}\n"
            "This may be caused by multiple references to the same IterDataPipe. We recommend "
            "using `.fork()` if that is necessary.")


def check_iterator_valid(datapipe: Any, iterator_id: int) -> None:
    if getattr(datapipe, "_is_child_datapipe", False):
        if not datapipe._check_valid_iterator_id(iterator_id):
            raise RuntimeError("This iterator has been invalidated, because a new iterator has "
                               "been created from one of the ChildDataPipes of "
                               f"{datapipe_msg(datapipe.main_datapipe)}." + _FEEDBACK)
    elif datapipe._valid_iterator_id != iterator_id:
        raise RuntimeError(_invalidated(datapipe) + _FEEDBACK)


def new_iterator_id(datapipe: Any) -> int:
    """Make a new iterator the valid one (resetting the DataPipe) and return its id."""
    if getattr(datapipe, "_is_child_datapipe", False):
        return datapipe._set_main_datapipe_valid_iterator_id()
    datapipe._valid_iterator_id = 0 if datapipe._valid_iterator_id is None else \
        datapipe._valid_iterator_id + 1
    datapipe.reset()
    return datapipe._valid_iterator_id


def _annotate(e: Exception, datapipe: Any) -> None:
    where = f"{_RAISED_BY} {datapipe_msg(datapipe)}"
    if not e.args or not isinstance(e.args[0], str):
        e.args = (f"\nThis exception is {where}",)
    elif _RAISED_BY not in e.args[0] and _SINGLE_ITERATOR not in e.args[0]:
        e.args = (e.args[0] + f"\nThis exception is {where}", *e.args[1:])


class _CheckedIterator:
    """Wraps what a non-generator ``__iter__`` returned, checking validity on each next."""

    def __init__(self, iterator: Iterator, datapipe: Any, iterator_id: int,
                 counts_itself: bool) -> None:
        self.iterator = iterator
        self.datapipe = datapipe
        self.iterator_id = iterator_id
        self._count = not (iterator is datapipe and counts_itself)

    def __iter__(self) -> _CheckedIterator:
        return self

    def __next__(self) -> Any:
        check_iterator_valid(self.datapipe, self.iterator_id)
        result = next(self.iterator)
        if self._count:
            self.datapipe._number_of_samples_yielded += 1
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.iterator, name)


def hook_iter(namespace: dict[str, Any]) -> None:
    """Wrap the ``__iter__`` (and ``__next__``) defined in a DataPipe class body."""
    func: Callable = namespace["__iter__"]
    if getattr(func, "_dp_hooked", False):
        return
    if inspect.isgeneratorfunction(func):
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Iterator:
            gen = func(*args, **kwargs)
            datapipe = args[0]
            iterator_id = new_iterator_id(datapipe)
            try:
                response = gen.send(None)
                while True:
                    datapipe._number_of_samples_yielded += 1
                    request = yield response
                    check_iterator_valid(datapipe, iterator_id)
                    response = gen.send(request)
            except StopIteration:
                return
            except Exception as e:
                _annotate(e, datapipe)
                raise
    else:
        has_next = "__next__" in namespace
        if has_next:
            next_func = namespace["__next__"]

            @functools.wraps(next_func)
            def counted_next(self: Any) -> Any:
                result = next_func(self)
                self._number_of_samples_yielded += 1
                return result
            namespace["__next__"] = counted_next

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Iterator:
            it = func(*args, **kwargs)
            datapipe = args[0]
            return _CheckedIterator(it, datapipe, new_iterator_id(datapipe), has_next)
    wrapped._dp_hooked = True  # type: ignore[attr-defined]
    namespace["__iter__"] = wrapped


def hook_reset(namespace: dict[str, Any]) -> None:
    """A class's ``reset`` also clears the sample count."""
    func: Callable = namespace["reset"]
    if getattr(func, "_dp_hooked", False):
        return

    @functools.wraps(func)
    def reset(self: Any, *args: Any, **kwargs: Any) -> None:
        self._number_of_samples_yielded = 0
        func(self, *args, **kwargs)
    reset._dp_hooked = True  # type: ignore[attr-defined]
    namespace["reset"] = reset

"""``gt.futures`` (torch.futures): ``Future``, a value that is set once and waited on, with
``collect_all``/``wait_all``.

A Future built with CUDA ``devices`` records an event on each device's current stream when its
result is set; ``wait()``/``value()`` make the waiter's current streams wait on those events,
so kernels queued after the wait see the value as PyTorch guarantees.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")
_UNSET = object()


def _devices(devices: Iterable[Any] | None) -> list[Any]:
    import gputensor as gt

    out = []
    for d in devices or ():
        dev = gt.device(d)
        if dev.index is None:
            raise ValueError(f"Expected devices to have indices, got {dev}")
        if dev.type != "cuda":
            raise ValueError(f"Expected CUDA devices, got {dev}")
        if not gt.cuda.is_available():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        out.append(dev)
    return out


class Future(Generic[T]):
    """``Future(*, devices=None)``: unset until ``set_result``/``set_exception``."""

    def __init__(self, *, devices: list[Any] | None = None) -> None:
        self._devices = _devices(devices)
        self._cond = threading.Condition()
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] = []
        self._events: list[Any] = []

    def done(self) -> bool:
        with self._cond:
            return self._value is not _UNSET or self._error is not None

    def _finish(self, value: Any, error: BaseException | None) -> None:
        with self._cond:
            if self._value is not _UNSET or self._error is not None:
                raise RuntimeError("Attempting to mark a completed Future as complete again. "
                                   "Note that a Future can only be marked completed once.")
            if error is None:
                self._events = self._record_events()
            self._value, self._error = value, error
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def _record_events(self) -> list[Any]:
        if not self._devices:
            return []
        from gputensor import cuda

        events = []
        for dev in self._devices:
            with cuda.device(dev.index):
                ev = cuda.Event()
                ev.record(cuda.current_stream(dev.index))
                events.append(ev)
        return events

    def set_result(self, result: T) -> None:
        """Mark the future done with ``result``; waiters wake and callbacks run."""
        self._finish(result, None)

    def set_exception(self, result: BaseException) -> None:
        """Mark the future failed: ``wait()`` and ``value()`` raise ``result``."""
        if not isinstance(result, BaseException):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._finish(None, result)

    def wait(self) -> T:
        """Block until done; the value, or raise the exception it was given."""
        with self._cond:
            self._cond.wait_for(lambda: self._value is not _UNSET or self._error is not None)
        return self.value()

    def value(self) -> T:
        """The value of a done future (raises its exception; RuntimeError when not done)."""
        with self._cond:
            if self._error is not None:
                raise self._error
            if self._value is _UNSET:
                raise RuntimeError("Future.value() called on a Future that is not completed "
                                   "yet; use wait() to block until it is")
            value, events = self._value, self._events
        if events:
            from gputensor import cuda

            for ev in events:
                cuda.current_stream(ev.device_index).wait_event(ev)
        return value

    def add_done_callback(self, callback: Callable[[Future[T]], None]) -> None:
        """Run ``callback(self)`` when done (at once if done already)."""
        with self._cond:
            if self._value is _UNSET and self._error is None:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback: Callable[[Future[T]], S]) -> Future[S]:
        """A new future holding ``callback(self)`` once this one is done; an error in the
        callback becomes the new future's error."""
        child: Future[S] = Future(devices=list(self._devices))

        def run(fut: Future[T]) -> None:
            try:
                result = callback(fut)
            except Exception as e:  # noqa: BLE001 - delivered through the child future
                child.set_exception(RuntimeError(
                    f"Got the following error when running the callback: "
                    f"{type(e).__name__}: {e}"))
                return
            child.set_result(result)

        self.add_done_callback(run)
        return child

    def __repr__(self) -> str:
        return f"<gputensor.futures.Future {'done' if self.done() else 'pending'}>"


def collect_all(futures: list[Future]) -> Future[list[Future]]:
    """A future done when every one of ``futures`` is; its value is the list itself."""
    futures = list(futures)
    out: Future[list[Future]] = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one(_: Future) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            out.set_result(futures)

    if not futures:
        out.set_result(futures)
    for f in futures:
        f.add_done_callback(one)
    return out


def wait_all(futures: list[Future]) -> list[Any]:
    """Wait for every future; their values in order (the first error raises)."""
    return [f.wait() for f in collect_all(futures).wait()]


def fork(func: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """``torch.jit.fork``/``torch.fork`` run eagerly: PyTorch only runs forks in parallel
    inside TorchScript, so ``func`` runs now and the returned future is already done (an
    exception from ``func`` propagates from ``fork`` itself, as in PyTorch)."""
    fut: Future[T] = Future()
    fut.set_result(func(*args, **kwargs))
    return fut


def wait(future: Future[T]) -> T:
    """``torch.jit.wait``/``torch.wait``: the value of a forked future."""
    if not isinstance(future, Future):
        raise TypeError(f"wait(): incompatible function arguments: expected a Future, got "
                        f"{type(future).__name__}")
    return future.wait()


__all__ = ["Future", "collect_all", "wait_all"]

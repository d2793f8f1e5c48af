"""The DataLoader worker process: its loop, its seeding, and how errors travel back.

A worker receives ``(epoch, task index, indices)`` on its index queue, fetches and collates the
batch, and sends ``(epoch, task index, batch)`` back on its own result pipe. ``None`` on the
queue tells it to exit. Batches are pickled here, in the worker's own thread, so a batch that
cannot be pickled becomes a reported error instead of a message lost in a queue's feeder thread.
"""

from __future__ import annotations

import multiprocessing
import queue
import random
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

import gputensor as gt

from .fetch import ITERABLE, make_fetcher

POLL_S = 0.25  # how often an idle worker checks for shutdown and for a dead main process


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker process."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's id, worker count, seed and dataset copy; None in the main process."""
    return _worker_info


class _PlainRepr(str):
    """KeyError shows ``repr`` of its message; this keeps a multi-line traceback readable."""

    def __repr__(self) -> str:
        return str(self)


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process with its traceback text."""

    def __init__(self, where: str) -> None:
        exc_type, exc, tb = sys.exc_info()
        self.exc_type = exc_type
        self.where = where
        self.traceback = "".join(traceback.format_exception(exc_type, exc, tb))

    def reraise(self) -> None:
        name = getattr(self.exc_type, "__name__", "exception")
        msg = f"Caught {name} {self.where}.\nOriginal {self.traceback}"
        if self.exc_type is KeyError:
            msg = _PlainRepr(msg)
        try:
            err = self.exc_type(msg)  # type: ignore[misc]
        except Exception:
            raise RuntimeError(msg) from None  # exception types that need other arguments
        try:
            raise err
        finally:
            del err  # no frame <-> traceback cycle keeping the loader's iterator alive


@dataclass(frozen=True)
class WorkerDone:
    """Sent instead of a batch when a worker's copy of an iterable dataset is exhausted."""

    worker_id: int


def _seed_worker(seed: int, base_seed: int, worker_id: int) -> None:
    """Seed every RNG a dataset may use, differently in every worker."""
    random.seed(seed)
    gt.manual_seed(seed)
    # NumPy's legacy global RNG is seeded from a hash of (base_seed, worker_id), so workers
    # never share augmentation streams (the classic duplicated-randomness bug).
    base = base_seed % (1 << 64)
    words = np.random.SeedSequence([worker_id, base & 0xFFFFFFFF, base >> 32])
    np.random.seed(words.generate_state(4))


def _send(conn: Connection, epoch: int, idx: int, data: Any, worker_id: int) -> None:
    try:
        payload = ForkingPickler.dumps((epoch, idx, data))
    except Exception:
        err = ExceptionWrapper(f"in DataLoader worker process {worker_id} while pickling the "
                               f"batch to send it to the main process")
        payload = ForkingPickler.dumps((epoch, idx, err))
    conn.send_bytes(payload)


def worker_loop(kind: str, dataset: Any, index_queue: Any, result_conn: Connection,
                done_event: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool,
                base_seed: int, init_fn: Callable[[int], None] | None, worker_id: int,
                num_workers: int) -> None:
    """Entry point of a worker process (see the module docstring for the protocol)."""
    global _worker_info
    seed = base_seed + worker_id
    where = f"in DataLoader worker process {worker_id}"
    try:
        _seed_worker(seed, base_seed, worker_id)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
        except Exception:
            init_error = ExceptionWrapper(where)
        parent = multiprocessing.parent_process()
        fetcher, epoch, ended = None, None, False
        while True:
            try:
                task = index_queue.get(timeout=POLL_S)
            except queue.Empty:
                # The done event, not only the None task, ends an idle worker: a loader
                # iterator freed by the garbage collector can no longer send that None.
                if done_event.is_set():
                    return
                if parent is not None and not parent.is_alive():
                    return  # the main process is gone: nobody will read our batches
                continue
            if task is None:
                return
            if done_event.is_set():
                continue  # shutting down: drain until the None arrives
            task_epoch, idx, indices = task
            if task_epoch != epoch:  # a new epoch restarts an iterable dataset's stream
                fetcher, epoch, ended = None, task_epoch, False
            if ended:
                continue  # the main process has been told this stream is exhausted
            if init_error is not None:
                data: Any = init_error
            else:
                try:
                    if fetcher is None:
                        fetcher = make_fetcher(kind, dataset, auto_collation, collate_fn,
                                               drop_last)
                    data = fetcher.fetch(indices)
                except StopIteration:
                    if kind != ITERABLE:
                        data = ExceptionWrapper(where)
                    else:
                        data, ended = WorkerDone(worker_id), True
                except Exception:
                    data = ExceptionWrapper(where)
            _send(result_conn, task_epoch, idx, data, worker_id)
            del data
    except (KeyboardInterrupt, BrokenPipeError, ConnectionError):
        pass  # Ctrl-C is the main process's to handle; a closed pipe means it stopped reading
    finally:
        result_conn.close()


__all__ = ["ExceptionWrapper", "WorkerDone", "WorkerInfo", "get_worker_info", "worker_loop"]

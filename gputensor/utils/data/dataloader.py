"""DataLoader: batches from a dataset, in the main process or in worker processes.

``num_workers=0`` fetches in the main process. ``num_workers > 0`` starts real worker
processes (``worker.py``). The main process sends index batches round-robin, keeping
``prefetch_factor`` tasks per worker in flight, and yields the results in sampler order.

Start method. The default is ``forkserver`` where the platform has it (Linux, macOS), else
``spawn``. Plain ``fork`` is unsafe here: once Numba's OpenMP threading layer has run a parallel
kernel in the main process, a forked child that runs one is terminated by libgomp ("fork()
called from a process already using GNU OpenMP"), and a CUDA context does not survive a fork
either. The fork server is a fresh interpreter that has imported gputensor but never run a
kernel or touched a GPU. Workers fork from it in milliseconds, without re-importing gputensor
the way ``spawn`` workers would. As with ``spawn``, the dataset, collate_fn and worker_init_fn
must be picklable, and scripts need an ``if __name__ == "__main__":`` guard. Pass
``multiprocessing_context="fork"`` to opt into fork when you know the main process has not
started Numba's thread pool or a GPU.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import pickle
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import forkserver
from multiprocessing.connection import wait
from typing import Any

import gputensor as gt

from . import graph_settings
from .collate import default_collate, default_convert
from .datapipes.datapipe import IterDataPipe, MapDataPipe
from .dataset import Dataset, IterableDataset
from .fetch import ITERABLE, MAP, make_fetcher
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _draw_seed
from .worker import ExceptionWrapper, WorkerDone, worker_loop

_SHUTDOWN_WAIT_S = 5.0  # how long workers get to exit on their own before being terminated
_PRELOAD = "gputensor.utils.data"
_FIXED_AFTER_INIT = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                     "persistent_workers")


class _InfiniteConstantSampler(Sampler):
    """The index sampler of an iterable dataset: the fetcher ignores the indices."""

    def __iter__(self) -> Iterator[None]:
        return itertools.repeat(None)


def _resolve_context(ctx: Any) -> Any:
    if ctx is None:
        ctx = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    if isinstance(ctx, str):
        methods = multiprocessing.get_all_start_methods()
        if ctx not in methods:
            raise ValueError(f"multiprocessing_context={ctx!r}: this platform supports the "
                             f"start methods {methods}")
        ctx = multiprocessing.get_context(ctx)
    if not hasattr(ctx, "Process"):
        raise TypeError(f"multiprocessing_context should be a start method name or a "
                        f"multiprocessing context, got {type(ctx).__name__}")
    if ctx.get_start_method() == "forkserver":
        # Preload gputensor in the fork server so workers fork with it imported. Extend,
        # never replace, the preload list a user may have set (it has no public getter).
        current = list(getattr(forkserver._forkserver, "_preload_modules", []))
        if _PRELOAD not in current:
            ctx.set_forkserver_preload(current + [_PRELOAD])
    return ctx


def _pin(data: Any) -> Any:
    if isinstance(data, gt.Tensor):
        return data.pin_memory()
    if isinstance(data, dict):
        return {k: _pin(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_pin(v) for v in data))
    if isinstance(data, list | tuple):
        return type(data)(_pin(v) for v in data)
    return data


def _worker_init_fn(dataset: Any, init_fn: Callable[[int], None] | None) -> Any:
    """A DataPipe's workers first shard their copy of the graph (picklable partial)."""
    if isinstance(dataset, (IterDataPipe, MapDataPipe)):
        return functools.partial(graph_settings.sharding_worker_init_fn, init_fn,
                                 *graph_settings.world())
    return init_fn


class DataLoader:
    """Iterate over ``dataset`` in batches, like ``torch.utils.data.DataLoader``.

    Map-style datasets are visited in ``sampler`` order (sequential, or random with
    ``shuffle=True``) and grouped into ``batch_size`` batches that ``collate_fn`` (default:
    ``default_collate``) turns into tensors. ``batch_size=None`` yields single samples.
    ``num_workers > 0`` fetches in worker processes (see the module docstring for the start
    method). Batches still come out in sampler order unless ``in_order=False``. A worker's
    exception is re-raised here with the worker id and the original traceback.

    Shuffling draws from ``generator``; without one it seeds from gt's default generator, so
    ``gt.manual_seed(s)`` makes the order reproducible. Batches of a ``TensorDataset`` (or a
    ``Subset`` of one) with the default collate are gathered with one indexing call per tensor.
    """

    def __init__(self, dataset: Dataset | Any, batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler | Iterable[list] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: gt.Generator | None = None,
                 *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers option should be a non-negative integer, got "
                             f"{num_workers!r}; use num_workers=0 to disable multiprocessing")
        if timeout < 0:
            raise ValueError(f"timeout option should be non-negative, got {timeout}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing: let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 1:
            raise ValueError(f"prefetch_factor option should be a positive integer, got "
                             f"{prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        if isinstance(dataset, IterableDataset):
            kind = ITERABLE
            if isinstance(dataset, IterDataPipe):  # shuffle switches its shufflers
                if shuffle is not None:
                    dataset = graph_settings.apply_shuffle_settings(dataset, shuffle=shuffle)
            elif shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            kind = MAP
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None:
            if kind == ITERABLE:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._kind = kind
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self._iterator: _MultiProcessIter | None = None
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FIXED_AFTER_INIT and self.__dict__.get("_initialized"):
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Iterable:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _mp_context(self) -> Any:
        return _resolve_context(self.multiprocessing_context)

    def __iter__(self) -> _BaseIter:
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator._shutdown:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator

    def __len__(self) -> int:
        if self._kind == ITERABLE:
            n = len(self.dataset)  # raises TypeError when the stream has no length
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)  # type: ignore[arg-type]


class _BaseIter:
    """State shared by both iterators; holds no reference back to the loader."""

    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._kind = loader._kind
        self._auto_collation = loader._auto_collation
        self._collate_fn = loader.collate_fn
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._timeout = loader.timeout
        self._pin = loader.pin_memory
        if self._pin and not gt.cuda.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
            self._pin = False
        try:
            self._len: int | None = len(loader)
        except (TypeError, NotImplementedError):  # a stream or sampler without a length
            self._len = None
        if isinstance(self._dataset, IterDataPipe):  # its random DataPipes: seeds per epoch
            rng = gt.Generator().manual_seed(_draw_seed(loader.generator))
            self._dataset = graph_settings.apply_random_seed(self._dataset, rng)
        # Drawn for every iterator, with or without workers, so that the sampler's seed (drawn
        # next, from the same generator) does not depend on num_workers.
        self._base_seed = _draw_seed(loader.generator)
        self._sampler_iter = iter(self._index_sampler)

    def __iter__(self) -> _BaseIter:
        return self

    def __len__(self) -> int:
        if self._len is None:
            raise TypeError(f"{type(self._dataset).__name__} has no len(), so neither has "
                            f"this DataLoader iterator")
        return self._len

    def _finish(self, data: Any) -> Any:
        return _pin(data) if self._pin else data


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if isinstance(self._dataset, (IterDataPipe, MapDataPipe)):
            graph_settings.apply_sharding(self._dataset, *graph_settings.world())
        self._fetcher = make_fetcher(self._kind, self._dataset, self._auto_collation,
                                     self._collate_fn, self._drop_last)

    def __next__(self) -> Any:
        index = next(self._sampler_iter)  # StopIteration ends the epoch
        return self._finish(self._fetcher.fetch(index))


class _MultiProcessIter(_BaseIter):
    """Drives the worker processes for one epoch (or many, with persistent workers)."""

    _shutdown = True  # until the workers start there is nothing to shut down

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        ctx = loader._mp_context()
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor or 2
        self._persistent = loader.persistent_workers
        self._in_order = loader.in_order
        self._done_event = ctx.Event()
        self._index_queues: list[Any] = []
        self._readers: list[Any] = []
        self._workers: list[Any] = []
        self._shutdown = False
        try:
            for wid in range(self._num_workers):
                self._start_worker(ctx, loader, wid)
        except BaseException:
            self._shutdown_workers()
            raise
        self._epoch = 0
        self._reset(loader, first=True)

    def _start_worker(self, ctx: Any, loader: DataLoader, wid: int) -> None:
        index_queue = ctx.Queue()
        index_queue.cancel_join_thread()  # never block interpreter exit on unsent indices
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=worker_loop, daemon=True, name=f"DataLoaderWorker-{wid}",
            args=(self._kind, self._dataset, index_queue, writer, self._done_event,
                  self._auto_collation, self._collate_fn, self._drop_last, self._base_seed,
                  _worker_init_fn(self._dataset, loader.worker_init_fn), wid,
                  self._num_workers))
        self._index_queues.append(index_queue)
        self._readers.append(reader)
        try:
            proc.start()
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise TypeError(f"DataLoader could not start worker {wid} with the "
                            f"{ctx.get_start_method()!r} start method: the dataset, collate_fn "
                            f"and worker_init_fn must be picklable ({err})") from err
        finally:
            writer.close()  # the worker holds its own copy; EOF here then means it died
        self._workers.append(proc)

    # -- epochs ------------------------------------------------------------------------------
    def _reset(self, loader: DataLoader, first: bool = False) -> None:
        if not first:  # a persistent iterator starting a new epoch
            self._index_sampler = loader._index_sampler
            self._sampler_iter = iter(self._index_sampler)
        self._epoch += 1  # results still in flight from an earlier epoch are dropped
        self._send_idx = self._rcvd_idx = 0
        self._pending: dict[int, int] = {}  # task index -> worker id, until yielded
        self._buffer: dict[int, Any] = {}   # results that arrived ahead of their turn
        self._active = [True] * self._num_workers
        self._next_worker = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _try_put_index(self) -> None:
        if len(self._pending) >= self._prefetch * self._num_workers:
            return
        if not any(self._active):
            return
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        wid = next(self._next_worker)
        while not self._active[wid]:
            wid = next(self._next_worker)
        self._index_queues[wid].put((self._epoch, self._send_idx, index))
        self._pending[self._send_idx] = wid
        self._send_idx += 1

    def __next__(self) -> Any:
        if self._shutdown:
            raise StopIteration
        while True:
            while self._rcvd_idx < self._send_idx and self._rcvd_idx not in self._pending:
                self._rcvd_idx += 1  # tasks dropped because their worker's stream ended
            if not self._pending:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if self._in_order:
                if self._rcvd_idx in self._buffer:
                    return self._deliver(self._rcvd_idx)
            elif self._buffer:
                return self._deliver(next(iter(self._buffer)))
            self._receive()

    def _deliver(self, idx: int) -> Any:
        data = self._buffer.pop(idx)
        del self._pending[idx]
        self._try_put_index()  # before a possible re-raise, so iteration can go on after it
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return self._finish(data)

    def _mark_done(self, wid: int) -> None:
        """Worker ``wid``'s stream ended: its other tasks will never produce a batch."""
        self._active[wid] = False
        for idx, owner in list(self._pending.items()):
            if owner == wid and idx not in self._buffer:
                del self._pending[idx]
        self._try_put_index()

    def _receive(self) -> None:
        """Block until at least one result (or end-of-stream note) from a worker arrives."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        sentinels = {p.sentinel: wid for wid, p in enumerate(self._workers)}
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait(self._readers + list(sentinels), timeout=left)
            if not ready:
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds "
                                   f"waiting for a batch from its workers")
            got, dead = False, []
            for obj in ready:
                if obj in sentinels:
                    dead.append(sentinels[obj])
                    continue
                wid = self._readers.index(obj)
                try:
                    epoch, idx, data = pickle.loads(obj.recv_bytes())
                except EOFError:  # the worker died (a dead worker's data is read first)
                    dead.append(wid)
                    continue
                except (OSError, RuntimeError):
                    # A batch's shared memory is fetched from its worker while unpickling
                    # (a descriptor from its resource sharer, or a segment it owns): a
                    # worker that died after sending takes them with it.
                    self._workers[wid].join(timeout=1.0)
                    if self._workers[wid].is_alive():
                        raise
                    dead.append(wid)
                    continue
                if epoch != self._epoch:
                    continue
                if isinstance(data, WorkerDone):
                    self._mark_done(data.worker_id)
                elif idx in self._pending:
                    self._buffer[idx] = data
                got = True
            if got:
                return
            if dead:
                self._died(dead[0])

    def _died(self, wid: int) -> None:
        proc = self._workers[wid]
        proc.join(timeout=1.0)
        self._shutdown_workers()
        raise RuntimeError(f"DataLoader worker {wid} (pid {proc.pid}) exited unexpectedly "
                           f"with exit code {proc.exitcode}")

    # -- shutdown ----------------------------------------------------------------------------
    def _shutdown_workers(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except (ValueError, OSError):
                    pass  # already closed by its own finalizer (gc teardown); the event suffices
            for reader in self._readers:
                reader.close()  # a worker blocked sending a batch gets EPIPE and exits
            deadline = time.monotonic() + _SHUTDOWN_WAIT_S
            for proc in self._workers:
                proc.join(timeout=max(0.0, deadline - time.monotonic()))
            for proc in self._workers:
                if proc.is_alive():
                    proc.terminate()
                    proc.join(timeout=_SHUTDOWN_WAIT_S)
        finally:
            for q in self._index_queues:
                q.close()

    def __del__(self) -> None:
        try:
            self._shutdown_workers()
        except Exception:  # interpreter teardown may already have freed what we need
            pass


__all__ = ["DataLoader"]

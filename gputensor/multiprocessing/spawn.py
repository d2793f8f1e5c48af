"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes and wait for
them, turning the first failure into an exception in the parent (torch.multiprocessing's)."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_TERMINATE_GRACE_S = 30.0


class ProcessException(Exception):
    """A spawned process failed: ``error_index`` is its index, ``error_pid`` its pid."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int) -> None:
        super().__init__(msg)
        self.msg, self.error_index, self.error_pid = msg, error_index, error_pid

    def __reduce__(self) -> tuple:
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """The process's function raised; the message carries its traceback."""


class ProcessExitedException(ProcessException):
    """The process exited with a non-zero code or was killed by a signal."""

    __slots__ = ["exit_code", "signal_name"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self) -> tuple:
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code,
                            self.signal_name)


def _run(fn: Callable[..., Any], index: int, args: tuple, error_file: str) -> None:
    """The child's entry point: a raised exception's traceback goes to ``error_file``."""
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass  # the parent interrupted us while stopping the others
    except Exception:
        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes(join=False)`` started; ``join`` waits for them."""

    def __init__(self, processes: list[Any], error_files: list[str]) -> None:
        self.processes, self.error_files = processes, error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.processes]

    def _join_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait (up to ``timeout``) for a process to finish. True once all have exited
        cleanly, False while some still run; on the first failure, stop the others
        (SIGTERM, then after the grace period SIGKILL) and raise ProcessRaisedException
        (with the child's traceback) or ProcessExitedException."""
        if not self.sentinels:
            return True
        failed = None
        for sentinel in multiprocessing.connection.wait(list(self.sentinels), timeout=timeout):
            index = self.sentinels.pop(sentinel)
            self.processes[index].join()
            if self.processes[index].exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        self._stop_others(grace_period)
        raise self._failure(failed)

    def _stop_others(self, grace_period: float | None) -> None:
        if grace_period is not None:
            self._join_all(grace_period)
        for p in self.processes:
            if p.is_alive():
                log.warning("Terminating process %s via signal SIGTERM", p.pid)
                p.terminate()
        self._join_all(_TERMINATE_GRACE_S if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                log.warning("Unable to shutdown process %s via SIGTERM , forcefully exiting "
                            "via SIGKILL", p.pid)
                p.kill()
            p.join()

    def _failure(self, index: int) -> ProcessException:
        proc, path = self.processes[index], self.error_files[index]
        if os.access(path, os.R_OK):
            with open(path, "rb") as fh:
                trace = pickle.load(fh)
            msg = f"\n\n-- Process {index:d} terminated with the following error:\n{trace}"
            return ProcessRaisedException(msg, index, proc.pid)
        code = proc.exitcode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"<Unknown signal {-code}>"
            return ProcessExitedException(f"process {index:d} terminated with signal {name}",
                                          index, proc.pid, code, name)
        return ProcessExitedException(f"process {index:d} terminated with exit code {code:d}",
                                      index, proc.pid, code)


class SpawnContext(ProcessContext):
    """The pre-1.4 name of ProcessContext."""

    def __init__(self, processes: list[Any], error_files: list[str]) -> None:
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.",
                      stacklevel=2)
        super().__init__(processes, error_files)


def _error_file() -> str:
    """A path no other process uses, which does not exist until the child writes it."""
    fd, path = tempfile.mkstemp(prefix="gputensor-errorfile-", suffix=".pickle")
    os.close(fd)
    os.unlink(path)
    return path


def start_processes(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1,
                    join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:
    """Start ``nprocs`` processes of ``start_method`` running ``fn(i, *args)``; with
    ``join`` wait for all of them (None), else return their ProcessContext."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        path = _error_file()
        proc = ctx.Process(target=_run, args=(fn, i, args, path), daemon=daemon)
        proc.start()
        processes.append(proc)
        error_files.append(path)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """``start_processes`` with the spawn start method (the only one this accepts; others
    warn and use spawn, as PyTorch)."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      f"To use a different start_method use:\n\t\t "
                      f"gputensor.multiprocessing.start_processes(...)", FutureWarning,
                      stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")


__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException", "SpawnContext", "spawn", "start_processes"]

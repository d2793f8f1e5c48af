"""One thread budget for the CPU (torch.set_num_threads): Numba's parallel loops and the BLAS
library behind NumPy/SciPy's matmul (OpenBLAS, limited through threadpoolctl) use the same
count, so a parallel kernel and a product never ask for more threads than were granted.

``set_num_interop_threads`` keeps PyTorch's contract (at most once); gputensor
runs ops one after another on the calling thread (as PyTorch's eager mode does), so the value
sizes no pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numba

# Numba's parallel loops run on GNU OpenMP, whose idle workers spin GOMP_SPINCOUNT times
# (300,000 by default: ~17 ms of PAUSE instructions on Skylake-class cores) before sleeping.
# NumPy's OpenBLAS has its own workers: a product started while ours spin, or a loop started
# while BLAS's spin, shares the cores with spinners. 3,000 spins (~0.2 ms) still bridge the
# gap between back-to-back kernels (exp of 128K float32 on 2 threads unchanged) but a conv +
# batch norm + ReLU training step on 2 cores took 69 ms instead of 92. libgomp reads the
# variable when it loads, which is the first parallel kernel (after this import); a value the
# user set is kept.
SPIN_COUNT = "3000"
os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)

_interop: list[int] = []
_granted: list[int] = []  # the count set_num_threads gave, for init_num_threads in new threads


def set_num_threads(num: int) -> None:
    """The threads CPU kernels and BLAS use; at most the number Numba started with
    (``NUMBA_NUM_THREADS``, the core count by default)."""
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {num!r}")
    n = min(num, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(n)
    _granted[:] = [n]
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n, user_api="blas")  # every BLAS library loaded so far


def init_num_threads() -> None:
    """Numba keeps the thread count per thread: give the calling thread the process's count
    (torch.init_num_threads, called in threads created after set_num_threads)."""
    numba.set_num_threads(_granted[0] if _granted else numba.config.NUMBA_NUM_THREADS)


def get_num_threads() -> int:
    return numba.get_num_threads()


def _thread_count_reader() -> Callable[[], int]:
    """The calling thread's Numba thread count, read without ``numba.get_num_threads``'s
    two locks (0.6 us, paid by every large elementwise op): the threading layer's own getter,
    once the pool has started; ``numba.get_num_threads`` itself where that is not there."""
    numba.get_num_threads()   # starts the pool (the threading layer) once
    from numba.np.ufunc import parallel

    getter = getattr(parallel, "_get_num_threads", None)
    return getter if callable(getter) and getter() == numba.get_num_threads() \
        else numba.get_num_threads


_count: list[Callable[[], int]] = []


def granted_threads() -> int:
    """``numba.get_num_threads()`` for hot paths (the same value, cheaper)."""
    if not _count:
        _count.append(_thread_count_reader())
    return _count[0]()


def set_num_interop_threads(num: int) -> None:
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _interop:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work "
                           "has started or set_num_interop_threads called")
    _interop.append(num)


def get_num_interop_threads() -> int:
    return _interop[0] if _interop else os.cpu_count() or 1  # PyTorch's default: the cores

"""CUDA kernels of gt.linalg: the array-level kernels of kernels/cpu/lapack.py run on the
runtime's array library over zero-copy views of the tensors (``library_arrays``): CuPy's
cuSOLVER/cuBLAS routines (``cupy.linalg``, ``cupyx.scipy.linalg``) on a GPU, NumPy/SciPy's
LAPACK on the emulator's memory. Results land in the outputs with one device copy; ``info``
codes are computed on the device from the results (no host round trip). Cholesky, solve and
inverse of small matrices on a GPU take lapack_batched.py's few calls instead.
"""

from __future__ import annotations

from collections.abc import Callable

from gputensor._tensor import Tensor
from gputensor.kernels.cpu.lapack import KERNELS
from gputensor.kernels.registry import CUDA

from .lapack_batched import FAST
from .library import library_arrays


def _register_cuda(name: str, fn: Callable) -> None:
    fast = FAST.get(name)  # stacks of small matrices on a GPU: lapack_batched.py

    @CUDA.register(name)
    def run(outs: tuple, ins: tuple, params: tuple) -> None:
        if fast is not None and fast(outs, ins, *params):
            return
        tensors: list[Tensor] = [t for t in (*outs, *ins) if t is not None]
        with library_arrays(*tensors) as (lib, arrays):
            it = iter(arrays)
            out_arrays = [None if t is None else next(it) for t in outs]
            in_arrays = [None if t is None else next(it) for t in ins]
            fn(lib, out_arrays, in_arrays, *params)


for _name, _fn in KERNELS.items():
    _register_cuda(_name, _fn)

"""Run CUDA kernels on the CPU: the same ``.cu`` source, compiled with g++ against a shim.

Every CUDA thread is a user-space fiber (a hand-written x86-64 context switch, ucontext
elsewhere); a block's fibers run on one OS thread and blocks run one after another, so results
are deterministic. ``__syncthreads`` and the warp intrinsics are fiber barriers; a barrier that
can never complete (divergence, deadlock) is reported, as are failed ``assert``s and fiber stack
overflows, by raising :class:`KernelError` naming the block and thread. Shared memory is
poisoned with 0xFF bytes before every block, and ``reverse_threads=True`` runs threads in
reverse order to expose missing barriers.

    mod = compile_source(src, "vec_add")
    mod.launch("add", grid=64, block=256, args=[x, y, out, n])

Limits: template kernels are not launchable (wrap them in a non-template ``__global__``);
``__constant__`` memory is ordinary const data (no cudaMemcpyToSymbol); pointer arguments are
NumPy arrays or None.
"""

from .build import CompileError, Param, cache_dir, parse_kernels
from .launch import (
    DEFAULT_STACK_SIZE,
    KernelError,
    Module,
    clear_memory_cache,
    compile_source,
)

__all__ = [
    "DEFAULT_STACK_SIZE",
    "CompileError",
    "KernelError",
    "Module",
    "Param",
    "cache_dir",
    "clear_memory_cache",
    "compile_source",
    "parse_kernels",
]

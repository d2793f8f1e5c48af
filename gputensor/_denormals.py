"""``gt.set_flush_denormal``: x86's MXCSR flush-to-zero (FTZ, bit 15) and denormals-are-zero
(DAZ, bit 6) bits, as PyTorch sets them.

MXCSR is per thread and governs every SSE/AVX float instruction the thread runs: the Numba
CPU kernels and NumPy's loops alike. Python cannot reach the register, so two tiny Numba
functions use LLVM's ``stmxcsr``/``ldmxcsr`` intrinsics. Like PyTorch, only the calling
thread changes: worker threads of a parallel kernel keep their own MXCSR. On other CPUs the
call changes nothing and returns False (PyTorch's answer where the CPU lacks DAZ).
"""

from __future__ import annotations

import platform
from collections.abc import Callable

_FTZ = 1 << 15
_DAZ = 1 << 6
_SUPPORTED = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
_fns: list[tuple[Callable[[], int], Callable[[int], None]]] = []


def _mxcsr_fns() -> tuple[Callable[[], int], Callable[[int], None]]:
    """Compiled on first use (the intrinsics exist only on x86)."""
    if _fns:
        return _fns[0]
    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    i32, i8p = ir.IntType(32), ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [i8p])

    @intrinsic
    def _stmxcsr(typingctx):  # noqa: ANN001, ANN202 - Numba's intrinsic protocol
        def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202
            slot = cgutils.alloca_once(builder, i32)
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.stmxcsr")
            builder.call(fn, [builder.bitcast(slot, i8p)])
            return builder.load(slot)
        return types.uint32(), codegen

    @intrinsic
    def _ldmxcsr(typingctx, value):  # noqa: ANN001, ANN202
        def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202
            slot = cgutils.alloca_once(builder, i32)
            builder.store(args[0], slot)
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.ldmxcsr")
            builder.call(fn, [builder.bitcast(slot, i8p)])
            return context.get_dummy_value()
        return types.none(types.uint32), codegen

    @njit(types.uint32())
    def get() -> int:
        return _stmxcsr()

    @njit(types.none(types.uint32))
    def put(value: int) -> None:
        _ldmxcsr(value)

    _fns.append((get, put))
    return _fns[0]


def set_flush_denormal(mode: bool) -> bool:
    if not _SUPPORTED:
        return False
    get, put = _mxcsr_fns()
    csr = get()
    put((csr | _FTZ | _DAZ) if mode else (csr & ~(_FTZ | _DAZ) & 0xFFFFFFFF))
    return True


def is_flush_denormal() -> bool:
    """Whether this thread flushes denormals (for tests and diagnostics)."""
    return _SUPPORTED and bool(_mxcsr_fns()[0]() & (_FTZ | _DAZ) == (_FTZ | _DAZ))

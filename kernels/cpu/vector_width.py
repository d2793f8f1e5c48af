"""512-bit vectors for the kernels that compute transcendentals, on AVX-512 CPUs.

LLVM tunes Intel's AVX-512 cores (Skylake-X and later) to prefer 256-bit vectors, so Numba's
loops use ymm registers on CPUs with 512-bit units. That suits memory-bound and short loops,
but the float32/float64 transcendentals of ``fast_math`` are bound by the vector ports: on a
Sapphire Rapids Xeon, exp/log/erf of 1M float32 ran 1.35-1.45x faster in zmm registers, while
clearing the preference for every kernel (``NUMBA_CPU_FEATURES=...,-prefer-256-bit``) made
small models' eager training steps ~5% slower. So the preference is set per function: each
public fast-math function calls ``prefer_wide_vectors()``, which marks the LLVM function it is
inlined into (the kernel's loop) with LLVM's ``"prefer-vector-width"="512"`` attribute.

PyTorch's ``ATEN_CPU_CAPABILITY=avx2`` keeps 256-bit vectors everywhere, as it keeps
PyTorch's kernels off AVX-512 (``default`` does the same here: Numba's loops keep the host's
AVX2, so ``get_cpu_capability()`` still says AVX2). Generated kernels are re-keyed by the
choice (it is part of ``codegen.vocabulary_hash``); a module's own ``cache=True`` kernels keep
the width they were first compiled with until their source changes.
"""

from __future__ import annotations

import functools
import os

from numba import types
from numba.extending import intrinsic

# ATen's AVX512 capability asks for these four; LLVM needs avx512f for 512-bit float vectors.
_AVX512 = ("+avx512f", "+avx512bw", "+avx512dq", "+avx512vl")
# A string attribute: llvmlite's attribute set admits only enum attributes by name, so it is
# added to the underlying set, whose items are written into the function's definition as-is.
_ATTRIBUTE = '"prefer-vector-width"="512"'


@functools.cache
def host_features() -> frozenset[str]:
    """The features Numba compiles for: ``NUMBA_CPU_FEATURES`` if set, else the host's."""
    import llvmlite.binding as llvm
    import numba

    if numba.config.CPU_FEATURES is not None:
        return frozenset(numba.config.CPU_FEATURES.split(","))
    llvm.initialize_native_target()
    return frozenset(llvm.get_host_cpu_features().flatten().split(","))


@functools.cache
def wide() -> bool:
    """Whether fast-math kernels use 512-bit vectors in this process."""
    if os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower() in ("avx2", "default"):
        return False
    return all(flag in host_features() for flag in _AVX512)


def has_scalef() -> bool:
    """Whether LLVM turns ``llvm.ldexp`` into AVX-512's VSCALEFPS/PD (in 256 or 512 bits)."""
    return "+avx512f" in host_features()


def capability() -> str:
    """PyTorch's name for the widest vectors the CPU kernels use: AVX512, AVX2 or DEFAULT."""
    if wide():
        return "AVX512"
    return "AVX2" if "+avx2" in host_features() else "DEFAULT"


@intrinsic
def prefer_wide_vectors(typingctx):  # noqa: ANN001, ANN201 - Numba's intrinsic protocol
    """Ask LLVM to vectorise the enclosing function with 512-bit vectors (where ``wide()``)."""
    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        if wide():
            set.add(builder.function.attributes, _ATTRIBUTE)
        return context.get_dummy_value()
    return types.none(), codegen

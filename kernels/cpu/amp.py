"""CPU kernels of GradScaler's fused ops (PyTorch's AmpGradScalerKernels.cpp semantics):

- ``_amp_foreach_non_finite_check_and_unscale_``: one Numba call unscales every gradient of
  a dtype group in place. The tensors arrive as the backends' shared address table
  (kernels/foreach.py), so one compiled loop serves any number of tensors of any layout; it
  runs in parallel over the tensors once the group is large.
- ``_amp_update_scale_``: PyTorch's scale/growth-tracker rule on the two one-element tensors.

Elements compute in float32 (float64 for float64 grads). Numba has no float16/bfloat16, so
those grads are read through a 65536-entry decode table (exact) and rounded back to nearest
even from the float32 bits, as c10's Half/BFloat16 conversions do.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
from llvmlite import ir as llvm_ir
from numba import carray, njit, prange, types
from numba.extending import intrinsic

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.foreach import write_table
from gputensor.kernels.registry import CPU

from .fast_math import float_from_bits

# Above this many elements the tensors are unscaled on all cores.
PARALLEL_THRESHOLD = 1 << 17

_BITS = np.arange(1 << 16, dtype=np.uint16)
# kind: 0 float32, 1 float64, 2 float16, 3 bfloat16 (stored as uint16 bits)
_KIND = {D.float32: 0, D.float64: 1, D.float16: 2, D.bfloat16: 3}
_STORAGE = {D.float32: np.float32, D.float64: np.float64, D.float16: np.uint16,
            D.bfloat16: np.uint16}
_DECODE = {D.float16: _BITS.view(np.float16).astype(np.float32),
           D.bfloat16: _BITS.view(ml_dtypes.bfloat16).astype(np.float32)}
_NO_DECODE = np.zeros(1, np.float32)


@intrinsic
def _pointer(typingctx, address, like):
    """``address`` (an integer) as a pointer to ``like``'s element type."""
    if not isinstance(address, types.Integer) or not isinstance(like, types.Array):
        return None
    ptr_t = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr_t))
    return ptr_t(address, like), codegen


@intrinsic
def _bits_of(typingctx, x):
    """The int32 bits of a float32."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(32))
    return types.int32(x), codegen


@njit(inline="always", error_model="numpy")
def _to_half_bits(x):
    """float32 -> IEEE half bits, round to nearest even (subnormals, inf, quiet NaN)."""
    u = np.int64(_bits_of(x)) & 0xFFFFFFFF
    sign = u & 0x80000000
    u ^= sign
    if u >= 0x47800000:                      # |x| >= 65536, inf or NaN
        o = 0x7E00 if u > 0x7F800000 else 0x7C00
    elif u < 0x38800000:                     # a half subnormal or zero: align by adding 0.5
        f = float_from_bits(u, np.float32(0)) + np.float32(0.5)
        o = (np.int64(_bits_of(f)) & 0xFFFFFFFF) - 0x3F000000
    else:
        o = (u - 0x38000000 + 0xFFF + ((u >> 13) & 1)) >> 13  # rebias, round half to even
    return np.uint16(o | (sign >> 16))


@njit(inline="always", error_model="numpy")
def _to_bfloat16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN -> 0x7FC0, as c10's)."""
    if x != x:
        return np.uint16(0x7FC0)
    u = np.int64(_bits_of(x)) & 0xFFFFFFFF
    return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


@njit(inline="always", error_model="numpy")
def _unscale_one(table, k, dims_max, proto, kind, decode, inv32, inv64, identity):
    """Unscale record ``k`` of the table in place; True if it held an inf/NaN."""
    nd = table[k, 2]
    numel = np.int64(1)
    span = np.int64(1)
    for d in range(nd):
        numel *= table[k, 3 + d]
        span += (table[k, 3 + d] - 1) * table[k, 3 + dims_max + d]
    a = carray(_pointer(table[k, 0], proto), (span,))
    bad = False
    for i in range(numel):
        rem = i
        off = np.int64(0)
        for d in range(nd - 1, -1, -1):
            n = table[k, 3 + d]
            off += (rem % n) * table[k, 3 + dims_max + d]
            rem //= n
        if kind == 1:                        # float64: double arithmetic
            v = np.float64(a[off])
            if not np.isfinite(v):
                bad = True
            if not identity:
                a[off] = v * inv64
        elif kind == 0:
            f = np.float32(a[off])
            if not np.isfinite(f):
                bad = True
            if not identity:
                a[off] = f * inv32
        else:                                # 16-bit: decode, compute in float32, round back
            f = decode[np.int64(a[off])]
            if not np.isfinite(f):
                bad = True
            if not identity:
                r = f * inv32
                a[off] = _to_half_bits(r) if kind == 2 else _to_bfloat16_bits(r)
    return bad


@njit(cache=True, error_model="numpy")
def _unscale_serial(table, dims_max, proto, kind, decode, found_inf, inv_scale):
    inv32 = inv_scale[0]
    inv64 = np.float64(inv32)
    identity = inv32 == np.float32(1.0)
    for k in range(table.shape[0]):
        if _unscale_one(table, k, dims_max, proto, kind, decode, inv32, inv64, identity):
            found_inf[0] = np.float32(1.0)


@njit(cache=True, parallel=True, error_model="numpy")
def _unscale_parallel(table, dims_max, proto, kind, decode, found_inf, inv_scale):
    inv32 = inv_scale[0]
    inv64 = np.float64(inv32)
    identity = inv32 == np.float32(1.0)
    bad = np.zeros(table.shape[0], np.bool_)
    for k in prange(table.shape[0]):
        bad[k] = _unscale_one(table, k, dims_max, proto, kind, decode, inv32, inv64, identity)
    if bad.any():
        found_inf[0] = np.float32(1.0)


def _address(t: Tensor) -> int:
    return t._host.__array_interface__["data"][0]


@CPU.register("_amp_foreach_non_finite_check_and_unscale_")
def foreach_non_finite_check_and_unscale(grads: Sequence[Tensor], found_inf: Tensor,
                                         inv_scale: Tensor) -> None:
    """Unscale ``grads`` (one float dtype, on the CPU) in place with one Numba call; found_inf
    := 1 when any element is inf/NaN (the frontend has checked dtypes and devices)."""
    dt = grads[0]._dtype
    table, count, width, total = write_table(grads, lambda ts: [_address(t) for t in ts])
    if not count:
        return
    run = _unscale_parallel if total >= PARALLEL_THRESHOLD and count > 1 else _unscale_serial
    # The arrays stay alive through ``grads``; the table only holds their addresses.
    run(table, (width - 3) // 2, np.zeros(1, _STORAGE[dt]), _KIND[dt],
        _DECODE.get(dt, _NO_DECODE), found_inf._host.reshape(-1), inv_scale._host.reshape(-1))


@njit(cache=True)
def _update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                  growth_interval):
    if found_inf[0] != 0:                    # NaN counts as found, as C's truth test does
        scale[0] = np.float32(np.float64(scale[0]) * backoff_factor)
        growth_tracker[0] = 0
    else:
        successful = np.int32(growth_tracker[0] + 1)
        if np.int64(successful) == growth_interval:
            grown = np.float32(np.float64(scale[0]) * growth_factor)
            if np.isfinite(grown):           # never grow past float32's range
                scale[0] = grown
            growth_tracker[0] = 0
        else:
            growth_tracker[0] = successful


@CPU.register("_amp_update_scale_")
def update_scale(scale: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                 growth_factor: float, backoff_factor: float, growth_interval: int) -> None:
    _update_scale(scale._host.reshape(-1), growth_tracker._host.reshape(-1),
                  found_inf._host.reshape(-1), float(growth_factor), float(backoff_factor),
                  int(growth_interval))

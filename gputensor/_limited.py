"""PyTorch's limited-support dtypes at work: uint16/32/64, the float8 formats and the shells
(float4_e2m1fn_x2, int1..7, uint1..7, bits*), which sit outside ``DTYPES`` (gputensor/_dtype.py).

No kernel is instantiated for them. A limited tensor computes through its *carrier*: the
standard dtype of the same itemsize, whose bits it shares (``reinterpret`` swaps the dtype of
the same storage view). Data movement (clone, cat, device moves) runs on the carrier bits; value
ops run where PyTorch 2.13 runs them: unsigned ints cast through the memory drivers' casts,
float8 values decode to float32 through a 256-entry table and encode with PyTorch's
(c10's) rounding rules, written as integer tensor ops so they run on every device. Every other
op raises PyTorch's ``NotImplementedError: "<kernel>" not implemented for '<Type>'``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import device as Device
from gputensor._tensor import Tensor

_CARRIERS = {1: D.uint8, 2: D.int16, 4: D.int32, 8: D.int64}


def is_limited(dt: Any) -> bool:
    return type(dt) is D._LimitedDtype


def carrier(dt: D.dtype) -> D.dtype:
    """The standard dtype whose bits a limited dtype's elements share."""
    return _CARRIERS[dt.itemsize] if is_limited(dt) else dt


def reinterpret(t: Tensor, dt: D.dtype) -> Tensor:
    """The same elements (same storage, shape, strides) read as ``dt`` (same itemsize)."""
    return Tensor._make(t._storage, dt, t._shape, t._stride, t._offset)


def not_implemented(kernel_name: str, dt: D.dtype) -> NotImplementedError:
    return NotImplementedError(f'"{kernel_name}" not implemented for \'{dt.legacy_name}\'')


def limited_operand(args: Any) -> D.dtype | None:
    """The limited dtype among the tensor operands (lists included), if any."""
    for a in args:
        if isinstance(a, Tensor):
            if is_limited(a._dtype):
                return a._dtype
        elif isinstance(a, list | tuple):
            found = limited_operand(a)
            if found is not None:
                return found
    return None


# -- float8 <-> float32 bit patterns (PyTorch's c10 conversions) ------------------------------
def _decode_table(dt: D.dtype) -> np.ndarray:
    """float32 bits of each of the 256 codes, NaN payloads as c10 produces them."""
    codes = np.arange(256, dtype=np.uint8)
    with np.errstate(all="ignore"):
        bits = codes.view(dt.np_dtype).astype(np.float32).view(np.uint32).copy()
    if dt is D.float8_e5m2:  # c10 widens the code to float16 bits: NaNs keep their payload,
        # quietened
        bits = (codes.astype(np.uint16) << 8).view(np.float16).astype(np.float32).view(np.uint32)
        nan = (codes & 0x7F) > 0x7C
        bits[nan] |= 0x00400000
    elif dt is D.float8_e4m3fn:  # c10's renormalising decode sets all exponent bits for NaN
        nan = (codes & 0x7F) == 0x7F
        bits[nan] = (codes[nan].astype(np.uint32) << 24 & 0x80000000) | 0x7FF00000
    elif dt in (D.float8_e4m3fnuz, D.float8_e5m2fnuz):
        bits[0x80] = 0x7F800001
    elif dt is D.float8_e8m0fnu:
        bits[0], bits[255] = 0x00400000, 0x7F800001
    return bits.view(np.int32)


_TABLES: dict[tuple[D.dtype, Device], Tensor] = {}


def decode_float8(t: Tensor) -> Tensor:
    """float32 values of a float8 tensor (any layout), through the code table on its device."""
    from gputensor._ops.creation import tensor as make_tensor
    dev = t._storage.device
    table = _TABLES.get((t._dtype, dev))
    if table is None:
        table = _TABLES[t._dtype, dev] = make_tensor(_decode_table(t._dtype), device=dev)
    codes = reinterpret(t, D.uint8).to(D.int64)
    return table[codes].view(D.float32)


def _round_bits(bits: Tensor, *, denorm_below: int, denorm_exp: int, bias: int,
                mant: int) -> Tensor:
    """c10's in-range float32 -> float8 rounding (sign dropped): denormals by a float add of
    ``2 ** (denorm_exp - 127)``, normals by round-to-nearest-even on the bits; low byte kept."""
    from gputensor._ops.creation import full
    shift = 23 - mant
    small = bits < (denorm_below << 23)
    sub = (bits.view(D.float32) + full((), np.float32(2.0 ** (denorm_exp - 127)),
                                       device=bits.device)).view(D.int32) - (denorm_exp << 23)
    odd = (bits >> shift) & 1
    norm = (bits + (((bias - 127) << 23) + (1 << (shift - 1)) - 1) + odd) >> shift
    return norm.where(~small, sub) & 0xFF


def _const(value: int, like: Tensor) -> Tensor:
    from gputensor._ops.creation import full
    return full((), value, dtype=D.int32, device=like.device)


def _encode_ieee(bits: Tensor, sign: Tensor, *, max_bits: int, nan_code: int, sat_code: int,
                 **fmt: int) -> Tensor:
    """c10's float32 -> float8 for the formats with a sign and NaN codes (e4m3fn, e5m2):
    ``max_bits`` and above saturate to ``sat_code`` (NaN to ``nan_code``)."""
    code = _round_bits(bits, **fmt)
    big = bits >= max_bits
    code = code.where(~big, _const(sat_code, bits))
    code = code.where(~(big & (bits > 0x7F800000)), _const(nan_code, bits))
    return code | sign


def _encode_fnuz(bits: Tensor, sign: Tensor, *, max_bits: int, **fmt: int) -> Tensor:
    """c10's float32 -> float8 fnuz: out of range (and NaN) is the one NaN code 0x80, and a
    result of zero drops its sign (there is no -0)."""
    code = _round_bits(bits, **fmt)
    code = code | sign.where(code != 0, _const(0, bits))
    return code.where(bits < max_bits, _const(0x80, bits))


def _encode_e8m0(bits: Tensor) -> Tensor:
    """c10's float32 -> e8m0fnu: the exponent, rounded to nearest even on the guard, round
    and sticky bits (the implied bit is the LSB); NaN and infinities give 0xFF."""
    exponent = (bits >> 23) & 0xFF
    g = (bits & 0x400000) != 0
    rs = (bits & 0x3FFFFF) != 0
    up = g & (rs | (exponent > 0))
    return exponent + (up & (exponent != 0xFF)).to(D.int32)


def encode_float8(x: Tensor, dt: D.dtype) -> Tensor:
    """A float32 tensor as float8 ``dt`` codes (a new contiguous tensor of dtype ``dt``)."""
    raw = x.contiguous().view(D.int32)
    if dt is D.float8_e8m0fnu:
        code = _encode_e8m0(raw)
    else:
        sign = (raw >> 24) & 0x80
        bits = raw & 0x7FFFFFFF
        if dt is D.float8_e4m3fn:
            code = _encode_ieee(bits, sign, max_bits=1087 << 20, nan_code=0x7F, sat_code=0x7E,
                                denorm_below=121, denorm_exp=141, bias=7, mant=3)
            code = code.where((code & 0x7F) != 0x7F, code - 1).where(bits <= 0x7F800000, code)
        elif dt is D.float8_e5m2:
            code = _encode_ieee(bits, sign, max_bits=143 << 23, nan_code=0x7F, sat_code=0x7C,
                                denorm_below=113, denorm_exp=134, bias=15, mant=2)
        elif dt is D.float8_e4m3fnuz:
            code = _encode_fnuz(bits, sign, max_bits=0x87 << 23, denorm_below=0x78,
                                denorm_exp=0x8C, bias=8, mant=3)
        else:
            code = _encode_fnuz(bits, sign, max_bits=0x8F << 23, denorm_below=0x70,
                                denorm_exp=0x85, bias=16, mant=2)
    return reinterpret(code.to(D.uint8), dt)


# -- conversions --------------------------------------------------------------------------------
_CAN_CAST = (*D.WIDE_UNSIGNED, *D.FLOAT8_DTYPES)


def _copy_kernel_error(src: D.dtype, dst: D.dtype) -> NotImplementedError:
    # PyTorch names its copy kernel differently by which side is the shell.
    bad = src if src not in _CAN_CAST and is_limited(src) else dst
    name = "copy_kernel" if bad is D.float4_e2m1fn_x2 and bad is src else "copy_"
    return not_implemented(name, bad)


def _driver_cast(t: Tensor, dt: D.dtype) -> Tensor:
    """A same-device cast between a uint16/32/64 and a standard (non-float8) dtype, by the
    memory driver's cast (NumPy on the CPU, cast.cu on CUDA)."""
    from gputensor.kernels.allocation import empty
    from gputensor.storage.allocator import driver_for
    src = contiguous(t)
    dev = src._storage.device
    out = empty(src._shape, dt, dev)
    n = src.numel()
    if n:
        driver_for(dev.type).cast(out._storage._buf, 0, dt.np_dtype, src._storage._buf,
                                  src._offset * src._dtype.itemsize, src._dtype.np_dtype, n)
    return out


def convert(t: Tensor, dt: D.dtype, dev: Device) -> Tensor:
    """``t.to(dt, dev)`` where ``t`` or ``dt`` is a limited dtype, with PyTorch's rules."""
    src_dt = t._dtype
    if src_dt is dt:  # a device move (or a copy) of the bits
        return reinterpret(reinterpret(t, carrier(dt)).to(dev, copy=True), dt)
    if (src_dt not in _CAN_CAST and is_limited(src_dt)) or (dt not in _CAN_CAST and
                                                            is_limited(dt)):
        raise _copy_kernel_error(src_dt, dt)
    t = convert(t, src_dt, dev) if t._storage.device != dev else t
    if src_dt in D.FLOAT8_DTYPES:  # c10 converts a float8 through float
        return decode_float8(t).to(dt)
    if dt in D.FLOAT8_DTYPES:
        return encode_float8(t.to(D.float32), dt)
    if is_limited(src_dt) and is_limited(dt):  # uint <-> uint: through int64's bits
        return _driver_cast(_driver_cast(t, D.int64), dt)
    if src_dt.is_complex:  # PyTorch casts complex to a real dtype by its real part
        t = t.real
    return _driver_cast(t, dt)


def contiguous(t: Tensor) -> Tensor:
    return t if t.is_contiguous() else reinterpret(reinterpret(t, carrier(t._dtype)).clone(),
                                                   t._dtype)


_BIT_SHELLS = tuple(d for d in D.SHELL_DTYPES if d.name[:3] in ("int", "uin"))


def copy_into(dst: Tensor, src: Tensor) -> None:
    """``dst.copy_(src)`` (same shape after broadcasting) when either side is limited."""
    for dt in (src._dtype, dst._dtype):
        if dt in _BIT_SHELLS:  # PyTorch copies no int1..7/uint1..7 element, not even its own
            raise not_implemented("copy_kernel", dt)
    if src._dtype is not dst._dtype or src._storage.device != dst._storage.device:
        src = convert(src, dst._dtype, dst._storage.device)
    reinterpret(dst, carrier(dst._dtype)).copy_(reinterpret(src, carrier(dst._dtype)))


# -- fill ----------------------------------------------------------------------------------------
_C_NAMES = {D.uint16: "uint16_t", D.uint32: "uint32_t", D.uint64: "uint64_t"}


def fill(t: Tensor, value: Any, zero: bool = False) -> Tensor:
    """``t.fill_(value)`` for a limited dtype: the value's bit pattern, filled into the carrier.
    Like PyTorch, a value out of the dtype's range raises when the tensor has more than one
    element (one element takes the converted value unchecked)."""
    dt = t._dtype
    if zero:  # zero_ (and zeros) writes zero bits for every dtype, the shells included
        reinterpret(t, carrier(dt)).fill_(0)
        return t
    if isinstance(value, Tensor):
        value = value.item()
    if dt not in _CAN_CAST:
        raise not_implemented("fill_cpu" if t.is_cpu else "fill_cuda", dt)
    reinterpret(t, carrier(dt)).fill_(fill_scalar(value, dt, t.numel() > 1))
    return t


def fill_scalar(value: Any, dt: D.dtype, checked: bool = False) -> int:
    """The carrier integer whose bits are ``value`` written as ``dt``; ``checked``: PyTorch's
    overflow check (which it applies when a fill covers more than one element)."""
    if dt not in _CAN_CAST:
        raise not_implemented("fill_cpu", dt)
    if isinstance(value, complex):
        raise RuntimeError("value cannot be converted to type without overflow")
    if dt in D.WIDE_UNSIGNED:
        if isinstance(value, float) and value == value and abs(value) != float("inf"):
            value = int(value)  # C's conversion truncates toward zero
        hi = (1 << (dt.itemsize * 8)) - 1
        if isinstance(value, bool | int | np.integer):
            value = int(value)
            if checked and value > hi:
                raise RuntimeError(f"value cannot be converted to type {_c_name(dt)} without "
                                   f"overflow")
            bits = value & hi
        else:  # NaN / infinity: C leaves it undefined; the host's conversion decides
            with np.errstate(all="ignore"):
                bits = int(np.array(value, np.float64).astype(dt.np_dtype))
        bits -= (bits >> (dt.itemsize * 8 - 1)) << (dt.itemsize * 8)  # as the signed carrier
    else:
        v = float(value)
        info = D.finfo(dt)
        lowest = info.min if dt is D.float8_e8m0fnu else -info.max
        has_inf = dt is D.float8_e5m2
        if checked and v != 0 and ((not has_inf and abs(v) == float("inf"))
                                   or (abs(v) != float("inf") and not lowest <= v <= info.max)):
            raise RuntimeError(f"value cannot be converted to type {_c_name(dt)} without "
                               f"overflow")
        bits = int(reinterpret(encode_float8(_host_scalar(v), dt), D.uint8).item())
    return bits


def _host_scalar(v: float) -> Tensor:
    from gputensor._ops.creation import tensor as make_tensor
    return make_tensor([v], dtype=D.float32)


def _c_name(dt: D.dtype) -> str:
    return _C_NAMES.get(dt) or f"c10::{dt.legacy_name}"


# -- elementwise ops -----------------------------------------------------------------------------
# Ops PyTorch 2.13 runs for the unsigned dtypes, and for float8 (comparisons for equality).
_UNSIGNED_OPS = frozenset({"eq", "ne", "mul", "div", "true_divide", "bitwise_and", "bitwise_or",
                           "bitwise_xor", "_copy"})
_FLOAT8_OPS = frozenset({"eq", "ne"})
# PyTorch's kernel names in its "not implemented" messages where they are not "<op>_cpu".
_KERNEL_NAMES = {"add": "add_stub", "sub": "add_stub", "max": "max_all", "min": "min_all",
                 "amax": "max_all", "amin": "min_all", "true_divide": "div_cpu",
                 "prod": "prod_out_cpu", "_scan": "cumsum_out_cpu", "scan": "cumsum_out_cpu",
                 "nonzero": "nonzero_count_cpu", "_gemm": "addmm_impl_cpu_",
                 "gemm": "addmm_impl_cpu_", "exp": "exp_vml_cpu", "unique": "unique",
                 "bitwise_left_shift": "lshift_cpu", "bitwise_right_shift": "rshift_cpu",
                 "mean": "sum_cpu",
                 "masked_fill": "masked_fill", "index_select": "index_select",
                 "hash_tensor": "xor_sum_cpu", "sort": "sorting_kernel_method_name"}


def kernel_name(op_name: str, dev: Device) -> str:
    name = _KERNEL_NAMES.get(op_name)
    if name is not None:
        return name
    return f"{op_name.lstrip('_')}_{'cpu' if dev.type == 'cpu' else 'cuda'}"


def call_op(op_name: str, args: list, params: tuple = ()) -> Any:
    from gputensor.kernels.registry import OPS
    return OPS[op_name].frontend(*args, *params)


def elementwise_entry(op_name: str, inputs: list, params: tuple, out: Tensor | None,
                      inplace: Tensor | None) -> Tensor:
    """The elementwise frontends' route for operands of a limited dtype (promotion by
    PyTorch's rules, then ``elementwise``; ``out=`` and in-place forms copy the result in)."""
    from gputensor._ops._core import common_device, result_type
    dev = common_device(*inputs, op_name=op_name)
    if op_name == "_where":  # the condition takes no part in promotion; bits are selected
        dt = result_type(*inputs[1:])
        if not is_limited(dt):
            inputs = [inputs[0], *(convert(x, dt, dev) if isinstance(x, Tensor) else x
                                   for x in inputs[1:])]
            return call_op(op_name, inputs, params)
        result = reinterpret(call_op(op_name, [inputs[0], *(
            reinterpret(x, carrier(dt)) if isinstance(x, Tensor) else fill_scalar(x, dt)
            for x in inputs[1:])], params), dt)
    else:
        result = elementwise(op_name, inputs, params, result_type(*inputs), dev)
    target = inplace if inplace is not None else out
    if target is None:
        return result
    if target._dtype is not result._dtype and not is_limited(target._dtype):
        result = convert(result, target._dtype, dev)
    if tuple(target._shape) != tuple(result._shape):
        target.resize_(result._shape)
    copy_into(target, result)
    return target


def elementwise(op_name: str, inputs: list, params: tuple, dt: D.dtype, dev: Device) -> Tensor:
    """An elementwise op whose promoted dtype ``dt`` is limited, or with a limited operand.

    uint16/32/64 compute in the carrier where bits decide (equality, bitwise, the low bits of
    a product) and in float where PyTorch divides; float8 compares decoded values."""
    limited = dt if is_limited(dt) else limited_operand(inputs)
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    if not is_limited(dt):  # e.g. uint16 * 2.5 -> float32: the operands cast first
        if limited not in D.WIDE_UNSIGNED:
            raise not_implemented(kernel_name(op_name, dev), limited)
        return call_op(op_name, [convert(x, dt, dev) if isinstance(x, Tensor) else x
                                 for x in inputs], params)
    if limited is D.float4_e2m1fn_x2 and op_name in _FLOAT8_OPS and all(
            x._dtype is limited for x in tensors) and len(tensors) == len(inputs):
        return call_op(op_name, [reinterpret(x, D.uint8) for x in inputs])  # packed bytes
    float_op = op_name == "mul" or (op_name == "abs" and limited is not D.float8_e8m0fnu)
    if limited in D.FLOAT8_DTYPES and float_op and len(tensors) == len(inputs) and all(
            x._dtype is limited for x in tensors):
        # c10's float8 arithmetic: in float, rounded back (tensor operands only, as PyTorch)
        return encode_float8(call_op(op_name, [decode_float8(x) for x in inputs], params),
                             limited)
    if limited in D.FLOAT8_DTYPES and op_name in _FLOAT8_OPS and all(
            x._dtype is limited for x in tensors):
        return call_op(op_name, [decode_float8(x) if isinstance(x, Tensor) else x
                                 for x in inputs])
    if limited not in D.WIDE_UNSIGNED or op_name not in _UNSIGNED_OPS:
        name = kernel_name(op_name, dev)
        if limited in D.FLOAT8_DTYPES and op_name == "mul":
            name = "mul_cpu_reduced_float" if dev.type == "cpu" else "mul_cuda_reduced_float"
        raise not_implemented(name, limited)
    if op_name in ("div", "true_divide"):
        return call_op(op_name, [convert(x, D.float32, dev) if isinstance(x, Tensor) else x
                                 for x in inputs], params)
    # Equality, the bitwise ops and the (wrapping) product's low bits are the same for the
    # signed carrier: compute there, a Python number written as the dtype's bits.
    args = [reinterpret(x, carrier(limited)) if isinstance(x, Tensor) else
            fill_scalar(x, limited) for x in inputs]
    out = call_op(op_name, args, params)
    return out if out._dtype is D.bool else reinterpret(out, limited)


def translate(op_name: str, operands: tuple, exc: Exception) -> Exception:
    """The error an op raises when it fails: ``exc`` itself, unless a limited-dtype operand
    made it fail inside gputensor (a table or a kernel without that dtype), where PyTorch
    reports its kernel as not implemented for the dtype."""
    dt = limited_operand(operands) or next((x for x in operands if is_limited(x)), None)
    if dt is None:  # (a limited dtype= argument counts: factories such as rand)
        return exc
    internal = isinstance(exc, KeyError | AttributeError) or \
        type(exc).__module__.startswith("numba") or \
        (isinstance(exc, TypeError) and dt.name in str(exc))  # a dtype table without it
    if not internal:  # PyTorch's own checks (shapes, promotion, ranges) keep their error
        return exc
    dev = next((x._storage.device for x in operands if isinstance(x, Tensor)), None)
    return not_implemented(kernel_name(op_name, dev) if dev is not None else f"{op_name}_cpu",
                           dt)


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value``: the value as ``t``'s dtype, then stored through the carrier."""
    dt = t._dtype
    if dt not in _CAN_CAST:
        raise not_implemented("fill_out", dt)
    parts = index if isinstance(index, tuple) else (index,)
    if isinstance(index, Tensor) and index._dtype is D.bool and not isinstance(value, Tensor):
        raise not_implemented("masked_fill", dt)  # PyTorch's x[mask] = number
    if (dt in D.WIDE_UNSIGNED or dt is D.float8_e8m0fnu) and any(
            isinstance(p, Tensor | list) for p in parts):
        raise not_implemented("index_put", dt)
    if not isinstance(value, Tensor):
        from gputensor.kernels.allocation import empty
        value = fill(empty((), dt, t._storage.device), value)
    elif value._dtype is not dt:
        value = convert(value, dt, t._storage.device)
    reinterpret(t, carrier(dt))[index] = reinterpret(value, carrier(dt))


# Kernels that take a limited tensor as it is: NumPy (the CPU backend) handles uint16/32/64
# natively, and PyTorch runs these reductions, the sort and gathers for them.
_NATIVE_KERNELS = {D.uint16: {"sort"}, D.uint32: {"sort"}, D.uint64: {"sort"}}


def check_kernel(t: Tensor, op_name: str) -> None:
    """A backend kernel looked up for a limited tensor: PyTorch's error unless it runs it."""
    dt = t._dtype
    dev = t._storage.device
    if dev.type == "cpu" and op_name in _NATIVE_KERNELS.get(dt, ()):
        return
    raise not_implemented(kernel_name(op_name, dev), dt)


def gather(base: Tensor, adv: list) -> Tensor:
    """``x[index_tensors]`` (indices already resolved and checked) through the carrier, for the
    dtypes PyTorch indexes (unsigned and float8; the shells raise its "index" error)."""
    from gputensor.kernels.allocation import kernel
    dt = base._dtype
    if dt not in _CAN_CAST:
        raise not_implemented("index_cpu" if base.is_cpu else "index_cuda", dt)
    c = reinterpret(base, carrier(dt))
    return reinterpret(kernel(c, "_index")(c, adv), dt)

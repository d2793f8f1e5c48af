"""CUDA C elementwise kernels rendered from each op's one expression.

An op's expression (Python syntax over ``a, b, c``, its params and the vocabulary of
``scalar_fns``) is rendered with ``ast`` to a CUDA C expression over the device functions of
``scalar_fns.cuh``. One ``__global__`` kernel is generated per :class:`KernelSpec`: the op, the
output's and each array operand's dtype, the compute dtype, and which inputs are arrays and which
are scalars (passed as kernel parameters in the compute type). Every kernel is a grid-stride loop
over the flat output index with two modes chosen at launch: contiguous operands (``meta`` null)
index flat; otherwise ``meta`` holds the shape and each operand's element offset and strides
(0 where it broadcasts), up to ``MAX_DIMS`` dims after merging. The contiguous mode is
vectorised: when every operand's address is a multiple of its 16-byte chunk (V elements of the
widest operand: 4 float32, 2 float64, 8 float16), each thread loads and stores whole chunks
(one 128-bit access per operand on a GPU) and a scalar loop finishes the tail.

float16/bfloat16 compute in float (like the CPU backend); float literals take the compute type
(double for integer compute, where Numba would also compute in float64). Integer operands are
cast to an integer compute dtype first (uint8 255 is -1 in int8 compute), then widened to 64
bits (unsigned for uint8), as Numba types integer arithmetic, so overflowing intermediates
that reach a comparison or a float agree with the CPU; stores truncate. Complex dtypes compute
in ``gt::complex`` (complex.cuh); complex scalars and params travel as two real kernel
parameters. kernels/cuda/ops/elementwise.py compiles and launches them on device tensors.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor.kernels.registry import OpDef

from .dtypes import CTYPES, REAL_DTYPES, SHORT

MAX_DIMS = 25  # PyTorch's CUDA limit (OffsetCalculator); the kernel loops over meta[0] dims
INPUT_NAMES = ("a", "b", "c")
BLOCK = 128

_COMPLEX_PART = {D.complex64: "float", D.complex128: "double"}
_HALF = (D.float16, D.bfloat16)

# Vocabulary names (kernels/cpu/scalar_fns.py) and their device functions in scalar_fns.cuh.
VOCABULARY = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan",
    "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "floor", "ceil", "trunc", "rint", "hypot", "copysign",
    "erf", "isnan", "isinf", "isfinite", "bitnot", "sign", "ipow", "fmod", "mod", "floordiv",
    "tdiv", "truediv", "lshift", "rshift", "real", "round_decimals", "nan_to_num", "maximum",
    "minimum", "relu", "rsqrt", "sigmoid", "softplus", "gelu_erf", "gelu_tanh",
    "gelu_erf_grad", "gelu_tanh_grad", "softplus_grad", "fast_exp", "abs2",
    "ldexp_int", "logaddexp", "ipow_scalar", "ipow_scalar_base",
    "gcd", "lcm", "nextafter", "angle", "frexp_mantissa", "frexp_exponent",
    # torch.special (special_fns.cuh)
    "lgamma", "digamma", "trigamma", "polygamma", "zeta", "mvlgamma", "erfc", "erfinv",
    "erfcx", "igamma", "igammac", "bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e",
    "bessel_k0", "bessel_k0e", "bessel_k1", "bessel_k1e",
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "ndtr", "ndtri", "log_ndtr", "entr",
    "xlog1py", "spherical_j0", "airy_ai", "cheb_t", "cheb_u", "cheb_v", "cheb_w", "hermite_h",
    "hermite_he", "laguerre_l", "legendre_p",
})
_BUILTINS = {"abs": "gt::pyabs", "min": "gt::pymin", "max": "gt::pymax"}
_NUMPY = {"conj": "gt::conj", "conjugate": "gt::conj", "signbit": "gt::signbit",
          "exp": "gt::exp", "log": "gt::log", "sqrt": "gt::sqrt", "abs": "gt::pyabs",
          "absolute": "gt::pyabs", "isnan": "gt::isnan", "isinf": "gt::isinf",
          "isfinite": "gt::isfinite", "floor": "gt::floor", "ceil": "gt::ceil",
          "trunc": "gt::trunc", "rint": "gt::rint", "fmod": "gt::fmod",
          "maximum": "gt::maximum", "minimum": "gt::minimum", "tanh": "gt::tanh",
          "sign": "gt::sign"}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^"}
_BINFNS = {ast.Div: "gt::truediv", ast.FloorDiv: "gt::floordiv", ast.Mod: "gt::pymod",
           ast.LShift: "gt::lshift", ast.RShift: "gt::rshift"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}


class RenderError(ValueError):
    """An op's expression uses syntax or names the CUDA renderer does not support."""


# ---- expression rendering -------------------------------------------------------------------
def render_expr(expr: str, params: Sequence[str], arity: int = 3, op_name: str = "?",
                inputs: Sequence[str] | None = None) -> str:
    """The CUDA C expression for a Python-syntax op expression.

    Inputs keep their names (``a``, ``b``, ``c``, or ``inputs`` when given), params become
    ``p_<name>`` and vocabulary names ``gt::<name>``; float literals are cast to ``gt_float_t``
    (the compute type, or double for integer compute), which the kernel typedefs.
    """
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise RenderError(f"op '{op_name}': cannot parse expression {expr!r}: {exc}") from exc
    names = INPUT_NAMES[:arity] if inputs is None else inputs
    return _Renderer(frozenset(names), frozenset(params), op_name, expr)(tree.body)


@dataclass(frozen=True)
class _Renderer:
    inputs: frozenset[str]
    params: frozenset[str]
    op_name: str
    expr: str

    def fail(self, node: ast.AST, why: str) -> RenderError:
        return RenderError(f"op '{self.op_name}': {why} in {self.expr!r} "
                           f"(at {ast.unparse(node)!r})")

    def __call__(self, node: ast.AST) -> str:
        r = self
        if isinstance(node, ast.Name):
            if node.id in r.inputs:
                return node.id
            if node.id in r.params:
                return f"p_{node.id}"
            raise r.fail(node, f"unknown name '{node.id}'")
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, int):
                if not -(2 ** 63) <= v < 2 ** 63:
                    raise r.fail(node, "integer literal out of the int64 range")
                return f"{v}LL" if not -(2 ** 31) <= v < 2 ** 31 else str(v)
            if isinstance(v, float):
                if not math.isfinite(v):
                    raise r.fail(node, "non-finite float literal")
                return f"((gt_float_t){v!r})"
            raise r.fail(node, f"unsupported constant {v!r}")
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                raise r.fail(node, "'**' is not allowed (use ipow)")
            left, right = r(node.left), r(node.right)
            sym = _BINOPS.get(type(node.op))
            if sym is not None:
                return f"({left} {sym} {right})"
            fn = _BINFNS.get(type(node.op))
            if fn is not None:
                return f"{fn}({left}, {right})"
            raise r.fail(node, f"unsupported operator {type(node.op).__name__}")
        if isinstance(node, ast.UnaryOp):
            operand = r(node.operand)
            if isinstance(node.op, ast.USub):
                return f"(-{operand})"
            if isinstance(node.op, ast.UAdd):
                return f"(+{operand})"
            if isinstance(node.op, ast.Not):
                return f"(!{operand})"
            if isinstance(node.op, ast.Invert):
                return f"(~{operand})"
        if isinstance(node, ast.BoolOp):
            sym = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + sym.join(r(v) for v in node.values) + ")"
        if isinstance(node, ast.Compare):
            parts = []
            left = node.left
            for cmp, right in zip(node.ops, node.comparators, strict=True):
                sym = _CMPOPS.get(type(cmp))
                if sym is None:
                    raise r.fail(node, f"unsupported comparison {type(cmp).__name__}")
                parts.append(f"({r(left)} {sym} {r(right)})")
                left = right
            return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"
        if isinstance(node, ast.IfExp):
            return f"({r(node.test)} ? {r(node.body)} : {r(node.orelse)})"
        if isinstance(node, ast.Call):
            if node.keywords:
                raise r.fail(node, "keyword arguments are not supported")
            fn = r.function(node.func)
            return f"{fn}({', '.join(r(a) for a in node.args)})"
        raise r.fail(node, f"unsupported syntax {type(node).__name__}")

    def function(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            if node.id in VOCABULARY:
                return f"gt::{node.id}"
            if node.id in _BUILTINS:
                return _BUILTINS[node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("np", "numpy") and node.attr in _NUMPY:
            return _NUMPY[node.attr]
        raise self.fail(node, "unknown function")


# ---- kernel specs and sources -----------------------------------------------------------------
@dataclass(frozen=True)
class KernelSpec:
    """What one generated kernel is specialised on."""

    op_name: str
    expr: str
    params: tuple[str, ...]
    out: D.dtype
    compute: D.dtype
    inputs: tuple[D.dtype | None, ...]  # an array operand's dtype, or None for a scalar

    @property
    def kernel_name(self) -> str:
        tag = "_".join(SHORT[d] if d is not None else "s" for d in self.inputs)
        digest = hashlib.sha1(repr((self.expr, self.params)).encode()).hexdigest()[:8]
        base = "".join(ch if ch.isalnum() else "_" for ch in self.op_name).strip("_")
        return f"ew_{base}_{SHORT[self.out]}_{SHORT[self.compute]}_{tag}_{digest}"


def compute_ctype(compute: D.dtype) -> str:
    """The C type a kernel computes in (and takes real scalars and params in)."""
    return "float" if compute in _HALF else CTYPES[compute]


def compute_types(compute: D.dtype) -> tuple[str, str, str]:
    """(scalar parameter type, float literal type ``gt_float_t``, operand type ``scalar_t``)
    of a kernel computing in ``compute``. Numba computes integer arithmetic in 64 bits
    (uint64 for unsigned types): operands widen the same way, so intermediates that reach a
    float or a comparison agree; stores truncate."""
    ct = compute_ctype(compute)
    ft = _COMPLEX_PART.get(compute) or (ct if compute.is_floating_point else "double")
    wide = {D.bool: "bool", D.uint8: "unsigned long long"}.get(
        compute, ct if compute.is_floating_point or compute.is_complex else "long long")
    return ct, ft, wide


def _scalar_args(name: str, compute: D.dtype) -> tuple[list[str], str]:
    """Kernel parameters carrying one scalar, and the C expression rebuilding it: complex
    scalars travel as two real parameters (kernels take no struct arguments)."""
    part = _COMPLEX_PART.get(compute)
    if part is None:
        return [f"{compute_ctype(compute)} {name}"], name
    return ([f"{part} {name}_re", f"{part} {name}_im"],
            f"{CTYPES[compute]}({name}_re, {name}_im)")


def check_dtype(d: D.dtype, what: str, op_name: str) -> None:
    if d not in CTYPES:
        raise TypeError(f"CUDA elementwise kernel for '{op_name}': {what} dtype {d} is not "
                        f"supported")


def _load(value: str, d: D.dtype, spec: KernelSpec) -> str:
    """An operand element as the kernel's scalar_t. An integer operand of another dtype than
    an integer compute dtype is first cast to it (255 in uint8 is -1 in int8 compute), as the
    CPU backend and PyTorch convert operands before computing; then it widens. An operand of
    another dtype than a float16/bfloat16 compute dtype is rounded to it (through float, as
    PyTorch converts), so int32 70000 is inf in float16 arithmetic."""
    if d is not spec.compute and spec.compute.category == D.INTEGRAL:
        value = f"static_cast<{CTYPES[spec.compute]}>({value})"
    elif d is not spec.compute and spec.compute in _HALF:
        to_half = "__float2half_rn" if spec.compute is D.float16 else "__float2bfloat16_rn"
        value = f"{to_half}(gt::load<float>({value}))"
    return f"gt::load<scalar_t>({value})"


def kernel_source(spec: KernelSpec) -> str:
    """The ``__global__`` kernel for ``spec`` (needs ``common.cuh`` and ``scalar_fns.cuh``)."""
    check_dtype(spec.out, "output", spec.op_name)
    check_dtype(spec.compute, "compute", spec.op_name)
    for d in spec.inputs:
        if d is not None:
            check_dtype(d, "input", spec.op_name)
    body = render_expr(spec.expr, spec.params, len(spec.inputs), spec.op_name)
    _, ft, wide = compute_types(spec.compute)
    args = [f"{CTYPES[spec.out]}* __restrict__ out"]
    scalar_decls = ""
    for name, d in zip(INPUT_NAMES, spec.inputs, strict=False):
        if d is not None:
            args.append(f"const {CTYPES[d]}* __restrict__ {name.upper()}")
        else:
            params, value = _scalar_args(f"{name}_in", spec.compute)
            args += params
            scalar_decls += f"    const scalar_t {name} = {value};\n"
    for p in spec.params:
        params, value = _scalar_args(f"p_{p}", spec.compute)
        args += params
        if value != f"p_{p}":  # complex: rebuilt from its two parts
            scalar_decls += f"    const scalar_t p_{p} = {value};\n"
    args += ["long long n", "const long long* __restrict__ meta"]
    arrays = [(n, d) for n, d in zip(INPUT_NAMES, spec.inputs, strict=False) if d is not None]
    flat_loads = "".join(f"            const scalar_t {n} = {_load(f'{n.upper()}[i]', d, spec)};\n"
                         for n, d in arrays)
    nops = 1 + len(arrays)
    offs = ", ".join(f"o{k} = meta[1 + nd + {k} * (nd + 1)]" for k in range(nops))
    steps = "".join(f"                o{k} += idx * meta[2 + nd + {k} * (nd + 1) + d];\n"
                    for k in range(nops))
    strided_loads = "".join(
        f"            const scalar_t {n} = {_load(f'{n.upper()}[o{k + 1}]', d, spec)};\n"
        for k, (n, d) in enumerate(arrays))
    out_t = CTYPES[spec.out]
    return (
        f"// {spec.op_name}: {spec.expr}\n"
        f'extern "C" __global__ void {spec.kernel_name}({", ".join(args)}) {{\n'
        f"    typedef {wide} scalar_t;\n"
        f"{scalar_decls}"
        f"    typedef {ft} gt_float_t;\n"
        f"    if (meta == nullptr) {{\n"
        f"{_vector_loop(spec, arrays, body, out_t)}"
        f"        for (long long i = gt_start + (long long)blockIdx.x * blockDim.x + threadIdx.x;"
        f" i < n;\n"
        f"             i += (long long)blockDim.x * gridDim.x) {{\n"
        f"{flat_loads}"
        f"            out[i] = gt::store<{out_t}>({body});\n"
        f"        }}\n"
        f"    }} else {{\n"
        f"        const int nd = (int)meta[0];\n"
        f"        for (GT_GRID_STRIDE(i, n)) {{\n"
        f"            long long rem = i, {offs};\n"
        f"            for (int d = nd - 1; d >= 0; --d) {{\n"
        f"                const long long size = meta[1 + d];\n"
        f"                const long long idx = rem % size;\n"
        f"                rem /= size;\n"
        f"{steps}"
        f"            }}\n"
        f"{strided_loads}"
        f"            out[o0] = gt::store<{out_t}>({body});\n"
        f"        }}\n"
        f"    }}\n"
        f"}}\n"
    )


# ---- the vectorised contiguous path ------------------------------------------------------------
VECTOR_BYTES = 16      # one 128-bit load / store per operand per step (LDG.128 on a GPU)
VECTOR_MIN_CHUNKS = 2  # below this the scalar loop alone is as good

# The chunk type, gt::ew_vec<T, V> (an aligned array of V elements), is in common.cuh.


def vector_width(spec: KernelSpec) -> int:
    """Elements per step of the vectorised contiguous path: 16 bytes of the widest operand
    (4 for float32, 2 for float64, 8 for float16, 16 for bool / int8); 1 means the kernel has
    no vectorised path (complex operands, whose 8- or 16-byte values gain nothing)."""
    dts = [spec.out, *(d for d in spec.inputs if d is not None)]
    if any(d.is_complex for d in dts):
        return 1
    return max(1, VECTOR_BYTES // max(d.itemsize for d in dts))


def _vector_loop(spec: KernelSpec, arrays: list[tuple[str, D.dtype]], body: str,
                 out_t: str) -> str:
    """C for the contiguous path's vectorised part: when every operand's address is a multiple
    of its chunk (V elements) and n holds a few chunks, each thread of the grid-stride loop
    loads a chunk of every operand, computes V elements and stores one chunk; ``gt_start`` is
    where the scalar loop (the tail, or everything when unaligned) begins."""
    v = vector_width(spec)
    if v == 1:
        return "        const long long gt_start = 0;\n"
    operands = [("out", spec.out), *((n.upper(), d) for n, d in arrays)]
    aligned = " && ".join(f"reinterpret_cast<unsigned long long>({name}) % {v * d.itemsize} == 0"
                          for name, d in operands)
    loads = "".join(
        f"                const gt::ew_vec<{CTYPES[d]}, {v}> gt_v{n} = "
        f"reinterpret_cast<const gt::ew_vec<{CTYPES[d]}, {v}>*>({n.upper()})[j];\n"
        for n, d in arrays)
    elems = "".join(f"                    const scalar_t {n} = {_load(f'gt_v{n}.v[e]', d, spec)};\n"
                    for n, d in arrays)
    return (
        f"        const bool gt_vec = n >= {VECTOR_MIN_CHUNKS * v} && {aligned};\n"
        f"        const long long gt_start = gt_vec ? n / {v} * {v} : 0;\n"
        f"        if (gt_vec) {{\n"
        f"            for (GT_GRID_STRIDE(j, n / {v})) {{\n"
        f"{loads}"
        f"                gt::ew_vec<{out_t}, {v}> gt_vout;\n"
        f"#pragma unroll\n"
        f"                for (int e = 0; e < {v}; ++e) {{\n"
        f"{elems}"
        f"                    gt_vout.v[e] = gt::store<{out_t}>({body});\n"
        f"                }}\n"
        f"                reinterpret_cast<gt::ew_vec<{out_t}, {v}>*>(out)[j] = gt_vout;\n"
        f"            }}\n"
        f"        }}\n"
    )


@functools.cache
def _header_hash() -> str:
    here = Path(__file__).parent
    text = b"".join((here / f).read_bytes() for f in ("scalar_fns.cuh", "special_fns.cuh",
                                                      "temme_gamma.cuh"))
    return hashlib.sha1(text).hexdigest()[:16]


def module_source(specs: Iterable[KernelSpec]) -> str:
    """One translation unit holding the kernels of ``specs`` (deduplicated, in order)."""
    seen: dict[str, KernelSpec] = {}
    for s in specs:
        seen.setdefault(s.kernel_name, s)
    # The header's hash keys the emulator's disk cache, which hashes only the source text.
    parts = ['#include "common.cuh"\n#include "scalar_fns.cuh"\n'
             f"// scalar_fns.cuh {_header_hash()}\n"]
    parts += [kernel_source(s) for s in seen.values()]
    return "\n".join(parts)


# ---- launch arguments ------------------------------------------------------------------------
def effective_expr(op: OpDef, compute: D.dtype) -> str:
    # Like the frontend: floor/ceil/trunc of an integer is the integer itself.
    if op.int_identity and compute.category <= D.INTEGRAL:
        return "a"
    return op.expr


def scalar_args(value: Any, compute: D.dtype) -> list[Any]:
    """A scalar's kernel arguments: one number, or (real, imag) for complex compute."""
    if compute in _COMPLEX_PART:
        if isinstance(value, np.ndarray):
            value = value.reshape(-1)[0]
        z = np.array(value).astype(compute.np_dtype)[()]
        return [float(z.real), float(z.imag)]
    return [_scalar_param(value, compute)]


# Per compute dtype: (kind, lo, hi) for which a Python number passes through _scalar_param
# unchanged (the launcher converts it to the parameter type with the same rounding); anything
# else (out of range, NumPy scalars, bool compute) takes the general conversion below.
_FAST_PARAM: dict[D.dtype, tuple[str, float, float]] = {
    d: ("f", -float(np.finfo(np.float32 if d in _HALF else d.np_dtype).max),
        float(np.finfo(np.float32 if d in _HALF else d.np_dtype).max))
    if d.is_floating_point else ("i", int(np.iinfo(d.np_dtype).min), int(np.iinfo(d.np_dtype).max))
    for d in REAL_DTYPES if d != D.bool}


def _scalar_param(value: Any, compute: D.dtype) -> Any:
    """A scalar in the compute type, as a Python number the emulator's launcher accepts
    (out-of-range ints wrap like PyTorch's casts; float16/bfloat16 compute in float)."""
    fast = _FAST_PARAM.get(compute)
    if fast is not None:
        t = type(value)
        if fast[0] == "f":
            if (t is float and fast[1] <= value <= fast[2]) or \
                    (t is int and -(2**53) <= value <= 2**53):  # exact as a double
                return float(value)
        elif t is int and fast[1] <= value <= fast[2]:
            return value
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0]
    cdt = np.dtype(np.float32) if compute in _HALF else compute.np_dtype
    if isinstance(value, (complex, np.complexfloating)):
        value = value.real  # PyTorch casts a complex scalar to a real type by its real part
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.array(value).astype(cdt)[()]
    if cdt.kind == "b":
        return int(bool(v))
    return int(v) if cdt.kind in "iu" else float(v)

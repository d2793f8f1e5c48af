"""CUDA C op structs rendered from the reductions declared in ``kernels/reduce.py``.

``reduce.cu``'s block reduction is a template over an op struct: ``Acc`` (the accumulator
type), ``init()``, ``step(acc, x, k, p)`` (one element), ``comb(a, b)``, ``shfl(acc, lane_xor)``
and ``store(acc, K, p, flag, out1, out2, o)``. For a fold (a :class:`Reduction`) and an input
dtype, :func:`fold_struct` writes that struct with the fold's expressions rendered by the
elementwise renderer: ``step`` loads the element as ``scalar_t`` (the input in the accumulator's
precision: float for float16/bfloat16, 64-bit integers, complex kept complex), applies ``map``
and then ``combine``; ``store`` applies ``finalize`` and converts to the output dtype.
"""

from __future__ import annotations

import functools

from gputensor import _dtype as D
from gputensor.kernels.reduce import Reduction

from .dtypes import ACC_CTYPES, CTYPES, SHORT
from .elementwise_codegen import render_expr

_REAL64 = {False: "double", True: "gt::complex<double>"}


def accumulator_ctype(fold: Reduction, d: D.dtype) -> str:
    """The C type the fold accumulates an input of dtype ``d`` in (kernels/reduce.py's rule)."""
    if fold.acc in ("sum", "same"):
        return ACC_CTYPES[d]
    if fold.acc in ("bool", "int"):
        return "long long"  # a word: warp shuffles take no bools
    if fold.acc == "real":
        return ACC_CTYPES[d.to_real()]
    return "double"  # real64


def element_ctype(fold: Reduction, d: D.dtype) -> str:
    """The C type ``map`` sees an element as: the input in the accumulator's precision."""
    if d.category <= D.INTEGRAL:
        return "long long"  # widened like the elementwise kernels' integer compute
    if fold.acc == "real64":
        return _REAL64[d.is_complex]
    return ACC_CTYPES[d]


def _identity(fold: Reduction) -> str:
    if fold.identity == "lowest":
        return "lowest<Acc>()"
    if fold.identity == "highest":
        return "inf_of<Acc>()"
    if isinstance(fold.identity, str):
        raise ValueError(f"reduction '{fold.name}': unknown identity {fold.identity!r}")
    return f"Acc({int(fold.identity) if isinstance(fold.identity, bool) else fold.identity!r})"


@functools.cache
def _rendered(fold: Reduction) -> tuple[str, str, str]:
    """(map, combine, finalize) as C expressions."""
    return (render_expr(fold.map, ("p",), op_name=fold.name, inputs=("x", "identity")),
            render_expr(fold.combine, (), op_name=fold.name, inputs=("a", "b")),
            render_expr(fold.finalize, ("p",), op_name=fold.name, inputs=("a", "n")))


def fold_struct_name(name: str, ctype: str) -> str:
    """The struct of fold ``name`` for the input C type ``ctype`` (see :func:`fold_struct`)."""
    return f"Fold_{name}_{SHORT[_DTYPE_OF_CTYPE[ctype]]}"


_DTYPE_OF_CTYPE = {c: d for d, c in CTYPES.items()}


def fold_struct(fold: Reduction, d: D.dtype) -> str:
    """The op struct (in namespace ``gtr``) that reduces ``d`` inputs with ``fold``. A complex
    product is wrapped in reduce.cu's ``Tracked``: its identity is not exact, so partials that
    saw no element must stay out of the result."""
    name = fold_struct_name(fold.name, CTYPES[d])
    if fold.combine == "a * b" and d.is_complex:
        return (_plain_fold_struct(fold, d, f"{name}_untracked") +
                f"namespace gtr {{ struct {name} : Tracked<{name}_untracked> {{}}; }}\n")
    return _plain_fold_struct(fold, d, name)


def _plain_fold_struct(fold: Reduction, d: D.dtype, name: str) -> str:
    map_, comb, fin = _rendered(fold)
    return (
        f"// {fold.name}: map {fold.map!r}, combine {fold.combine!r}, finalize {fold.finalize!r}\n"
        f"namespace gtr {{\n"
        f"struct {name} {{\n"
        f"    typedef {accumulator_ctype(fold, d)} Acc;\n"
        f"    typedef {CTYPES[fold.out(d)]} O1;\n"
        f"    typedef long long O2;\n"
        f"    typedef {element_ctype(fold, d)} scalar_t;\n"
        f"    typedef double gt_float_t;\n"
        f"    static __device__ __forceinline__ Acc init() {{ return {_identity(fold)}; }}\n"
        f"    static __device__ __forceinline__ Acc comb(Acc a, Acc b) {{\n"
        f"        return (Acc)({comb});\n"
        f"    }}\n"
        f"    static __device__ __forceinline__ Acc step(Acc a, {CTYPES[d]} x_in, long long, "
        f"double p_p) {{\n"
        f"        const scalar_t x = gt::load<scalar_t>(x_in);\n"
        f"        const Acc identity = init();\n"
        f"        (void)identity;\n"
        f"        (void)p_p;\n"
        f"        return comb(a, (Acc)({map_}));\n"
        f"    }}\n"
        f"    static __device__ __forceinline__ Acc shfl(Acc a, int m) {{ return shfl_x(a, m); }}\n"
        f"    static __device__ __forceinline__ void store(Acc a, long long n, double p_p, "
        f"long long, O1* out, O2*, long long o) {{\n"
        f"        (void)n;\n"
        f"        (void)p_p;\n"
        f"        out[o] = gt::store<O1>({fin});\n"
        f"    }}\n"
        f"}};\n"
        f"}}  // namespace gtr\n")

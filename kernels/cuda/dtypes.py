"""The CUDA backend's one dtype table: each dtype's C type, kernel-name suffix and the type a
kernel accumulates it in, for every kernel family.

Complex64/complex128 are ``gt::complex<float>`` / ``gt::complex<double>`` (complex.cuh), the
value type of the generated elementwise kernels and of the reduction and scatter kernels.
Families without complex kernels name ``REAL_DTYPES`` where they instantiate and check, so a
complex tensor gets an error naming the dtypes the family does cover.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputensor import _dtype as D

REAL_DTYPES = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16,
               D.float32, D.float64)
COMPLEX_DTYPES = (D.complex64, D.complex128)
ALL_DTYPES = (*REAL_DTYPES, *COMPLEX_DTYPES)
FLOAT_DTYPES = (D.float16, D.bfloat16, D.float32, D.float64)
# The dtypes floating reductions accept (mean, var, norm): real floats and complex.
INEXACT_DTYPES = (*FLOAT_DTYPES, *COMPLEX_DTYPES)

CTYPES: dict[D.dtype, str] = {
    D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short",
    D.int32: "int", D.int64: "long long", D.float16: "__half", D.bfloat16: "__nv_bfloat16",
    D.float32: "float", D.float64: "double",
    D.complex64: "gt::complex<float>", D.complex128: "gt::complex<double>",
}
SHORT: dict[D.dtype, str] = {
    D.bool: "b", D.uint8: "u8", D.int8: "i8", D.int16: "i16", D.int32: "i32", D.int64: "i64",
    D.float16: "f16", D.bfloat16: "bf16", D.float32: "f32", D.float64: "f64",
    D.complex64: "c64", D.complex128: "c128"}
# The type a kernel accumulates a dtype in: float for 16-bit floats, 64 bits for integers;
# complex sums accumulate in their own precision, like float32/float64 do.
ACC_CTYPES: dict[D.dtype, str] = {
    D.bool: "long long", D.uint8: "long long", D.int8: "long long", D.int16: "long long",
    D.int32: "long long", D.int64: "long long", D.float16: "float", D.bfloat16: "float",
    D.float32: "float", D.float64: "double",
    D.complex64: "gt::complex<float>", D.complex128: "gt::complex<double>"}


def variants(dtypes: Iterable[D.dtype]) -> list[dict[str, str]]:
    """Placeholder maps for ``CudaSource.instantiate``: ``{s}`` short name, ``{T}`` C type,
    ``{A}`` accumulator C type, ``{R}`` the C type of the dtype's real part."""
    return [{"s": SHORT[d], "T": CTYPES[d], "A": ACC_CTYPES[d], "R": CTYPES[d.to_real()]}
            for d in dtypes]


def short_name(dt: D.dtype, op_name: str, dtypes: Iterable[D.dtype] = ALL_DTYPES) -> str:
    """The kernel-name suffix of ``dt``; a clear error when ``dt`` is not one of ``dtypes``
    (the kernel family's)."""
    dtypes = tuple(dtypes)
    if dt not in dtypes:
        raise TypeError(f"'{op_name}' on CUDA does not support dtype {dt} (the CUDA kernels "
                        f"cover {', '.join(str(d) for d in dtypes)})")
    return SHORT[dt]

"""CPU kernels for matrix products (BLAS through NumPy's matmul) and einsum (NumPy's einsum).

Both receive validated operands from the frontend in gputensor/_ops/linalg.py. Matrix products
go through ``np.matmul`` writing straight into the output's host view, so float32/float64/
complex operands reach OpenBLAS's gemm with no copy when their layouts are BLAS-compatible (row-
or column-major in the two matrix dims); only operands NumPy would otherwise send to its slow
non-BLAS loop are copied first. float16/bfloat16 compute in float32 and are cast back.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import CPU as _CPU
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import wrap_cpu
from gputensor.kernels.registry import CPU

# NumPy/BLAS cannot compute in these; products run in float32 and the result is cast back.
_UPCAST = {D.float16: np.dtype(np.float32), D.bfloat16: np.dtype(np.float32)}
# NumPy's matmul hands a matrix to BLAS only when its (unit) stride fits in a BLAS int.
_BLAS_MAXSIZE = np.iinfo(np.int32).max


def _blasable2d(major: int, minor: int, n_minor: int, itemsize: int) -> bool:
    """NumPy's test for a matrix BLAS can read as row-major with leading dim major/itemsize."""
    if minor != itemsize or major % itemsize:
        return False
    ld = major // itemsize
    return n_minor <= ld <= _BLAS_MAXSIZE


def _blas_ready(arr: np.ndarray, allow_transposed: bool = True) -> bool:
    """Whether NumPy's matmul would call BLAS for this matrix operand (else it loops in C)."""
    rows, cols = arr.shape[-2:]
    s_row, s_col = arr.strides[-2:]
    isz = arr.itemsize
    if _blasable2d(s_row, s_col, cols, isz):
        return True
    return allow_transposed and _blasable2d(s_col, s_row, rows, isz)


def _operand(t: Tensor, compute: np.dtype) -> np.ndarray:
    arr = t._host
    if arr.dtype != compute:
        return arr.astype(compute)  # a fresh C-contiguous copy
    if arr.flags.c_contiguous or compute.kind not in "fc" or not arr.size or _blas_ready(arr):
        return arr
    return np.ascontiguousarray(arr)  # the copy is cheaper than NumPy's non-BLAS loop


def _typed_scalar(x: Any, dt: np.dtype) -> Any:
    """An integer alpha/beta as a NumPy scalar of ``dt`` (wrapping like C, e.g. -1 -> 255 for
    uint8) so NumPy never refuses it; float and complex scalars stay Python numbers."""
    return np.asarray(x).astype(dt)[()] if dt.kind in "biu" else x


def _fill_scaled(o: np.ndarray, c: Tensor | None, beta: Any) -> None:
    """o = beta * c, or zeros when there is no c (BLAS semantics: beta == 0 ignores c)."""
    if c is None or beta == 0:
        o[...] = 0
    elif beta == 1:
        o[...] = c._host
    else:
        o[...] = c._host * beta


@CPU.register("_gemm")
def gemm(out: Tensor, a: Tensor, b: Tensor, c: Tensor | None, beta: Any, alpha: Any) -> None:
    """out = beta * c + alpha * (a @ b), batched; see gputensor/_ops/linalg.py for the contract.

    a: (*Ba, M, K), b: (*Bb, K, N), out: (*B, M, N), all of one ndim and dtype, Ba and Bb
    broadcastable to B; c is None or broadcastable to out. beta == 0 ignores c and alpha == 0
    ignores a @ b (no NaN propagation), as BLAS does. out may share memory with c.
    """
    o = out._host
    if o.size == 0:
        return
    if alpha == 0 or a._shape[-1] == 0:
        _fill_scaled(o, c, _typed_scalar(beta, o.dtype))
        return
    compute = _UPCAST.get(out._dtype, o.dtype)
    alpha, beta = _typed_scalar(alpha, compute), _typed_scalar(beta, compute)
    a_arr, b_arr = _operand(a, compute), _operand(b, compute)
    accumulate = c is not None and beta != 0
    direct = (compute == o.dtype and (o.flags.c_contiguous or _blas_ready(o, False))
              and not (accumulate and np.may_share_memory(o, c._host)))
    if direct:
        prod = np.matmul(a_arr, b_arr, out=o)
    else:
        prod = np.matmul(a_arr, b_arr)
    if alpha != 1:
        np.multiply(prod, alpha, out=prod)
    if accumulate:
        c_arr = c._host
        if c_arr.dtype != compute:
            c_arr = c_arr.astype(compute)
        np.add(prod, c_arr if beta == 1 else c_arr * beta, out=prod)
    if not direct:
        with np.errstate(over="ignore"):  # float32 -> float16 overflow is inf, as in PyTorch
            o[...] = prod


_F32, _F64 = D.float32, D.float64


def _gemm_lane(a: Any, b: Any) -> Tensor | None:
    """``a @ b`` for the commonest eager product (a Linear's or an attention head's 2-d
    matmul/mm): CPU float32/float64 matrices of one dtype and matching inner size, non-empty,
    that BLAS reads as they are. np.matmul into a fresh array, the very call ``gemm`` makes;
    None for anything else (the frontend's checks and plan run)."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        return None
    dt = a._dtype
    sa, sb = a._shape, b._shape
    if dt is not b._dtype or (dt is not _F32 and dt is not _F64) or len(sa) != 2 or \
            len(sb) != 2 or sa[1] != sb[0] or not (sa[0] and sa[1] and sb[1]) or \
            a._storage.device is not _CPU or b._storage.device is not _CPU:
        return None
    x, y = a._host, b._host
    if not (x.flags.c_contiguous or _blas_ready(x)) or \
            not (y.flags.c_contiguous or _blas_ready(y)):
        return None
    return wrap_cpu(np.matmul(x, y), dt, (sa[0], sb[1]))


gemm.lane = _gemm_lane  # type: ignore[attr-defined]


def _bind_gemm(out: Tensor, a: Tensor, b: Tensor, c: Tensor | None, beta: Any,
               alpha: Any) -> Any:
    """``gemm`` resolved once for tensors whose buffers stay put (gt.compile's replay): the
    product into ``out`` bound to np.matmul, plus ``c`` when beta is 1 (a Linear's bias);
    None for anything that scales or would copy an operand."""
    o = out._host
    if o.size == 0 or alpha != 1 or a._shape[-1] == 0:
        return None
    compute = _UPCAST.get(out._dtype, o.dtype)
    a_arr, b_arr = a._host, b._host
    if compute != o.dtype or _operand(a, compute) is not a_arr or \
            _operand(b, compute) is not b_arr or \
            not (o.flags.c_contiguous or _blas_ready(o, False)):
        return None
    product = functools.partial(np.matmul, a_arr, b_arr, out=o)
    if c is None or beta == 0:
        return product
    c_arr = c._host
    if beta != 1 or c_arr.dtype != compute or np.may_share_memory(o, c_arr):
        return None

    def product_plus_c() -> None:
        product()
        np.add(o, c_arr, out=o)
    return product_plus_c


gemm.bind = _bind_gemm  # type: ignore[attr-defined]


@CPU.register("einsum")
def einsum(out: Tensor, operands: list[Tensor], equation: str, compute: D.dtype) -> None:
    """out = einsum(equation, *operands) computed in ``compute`` (NumPy picks the contraction
    order and hands pairwise contractions to BLAS). ``equation`` is explicit ('...->...'),
    letters only, and every operand already has the broadcast size of each of its labels."""
    o = out._host
    cdt = _UPCAST.get(compute, compute.np_dtype)
    arrays = [x._host if x._host.dtype == cdt else x._host.astype(cdt) for x in operands]
    if o.size == 0:
        return
    if any(a.size == 0 for a in arrays):
        o[...] = 0  # a sum over an empty label
        return
    # No out=: with it NumPy runs the last contraction in its own loops instead of BLAS.
    res = np.einsum(equation, *arrays, optimize=True)
    with np.errstate(over="ignore"):
        o[...] = res

"""grouped_mm (torch.nn.functional's): matrix products of groups that share a weight shape but
have jagged sizes, as in Mixture-of-Experts layers.

Each group's product is an ordinary matmul of slices, so autograd and both devices follow; the
int32 ``offs`` (group ends) are read to the host once to cut the slices (a sync of G integers,
where PyTorch's CUDA kernel reads them on the device). Rows or columns past ``offs[-1]``, which
PyTorch leaves unwritten, are zeros here. PyTorch's layout rule is kept: each operand's leading
stride must be a multiple of 16 bytes. The float8 variants (scaled_mm, scaled_grouped_mm) are
not provided: gputensor has no float8 dtypes.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

__all__ = ["grouped_mm"]

_C_NAMES = {gt.float32: "float", gt.float64: "double", gt.float16: "c10::Half",
            gt.bfloat16: "c10::BFloat16"}


def _check_layout(mat: Tensor) -> None:
    """PyTorch's grouped-GEMM layout rule for the last two dims: row- or column-major with
    the leading stride a multiple of 16 bytes."""
    (rows, cols), (s_rows, s_cols) = mat.shape[-2:], mat.stride()[-2:]
    alignment = 16 // mat.element_size()
    if s_rows == 1 and s_cols >= max(1, rows):
        leading = s_cols
    elif s_cols == 1 and s_rows >= max(1, cols):
        leading = s_rows
    else:
        raise RuntimeError(f"Invalid strides/sizes, got {list(mat.stride())} for strides and "
                           f"{list(mat.shape)} for sizes")
    if leading % alignment:
        raise RuntimeError("strides should be multiple of 16 bytes")


def _check(mat_a: Tensor, mat_b: Tensor, offs: Tensor | None, bias: Tensor | None,
           out_dtype: Any) -> None:
    if mat_a.dtype not in (gt.float32, gt.bfloat16, gt.float16):
        raise RuntimeError(f"Expected mat_a to be Float32, BFloat16 or Float16 matrix, got "
                           f"{mat_a.dtype.legacy_name}")
    if mat_b.dtype != mat_a.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_C_NAMES.get(mat_a.dtype, mat_a.dtype)} != "
                           f"{_C_NAMES.get(mat_b.dtype, mat_b.dtype)}")
    if mat_a.dim() not in (2, 3):
        raise RuntimeError("mat_a has to be 2 or 3d")
    if mat_b.dim() not in (2, 3):
        raise RuntimeError("mat_b has to be 2 or 3d")
    if (offs is not None) != (mat_a.dim() == 2 or mat_b.dim() == 2):
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if "
                           "both matrices are 3d")
    if offs is not None:
        if offs.dim() != 1:
            raise RuntimeError("offs has to be 1D")
        if offs.dtype != gt.int32:
            raise RuntimeError("Offsets have to be int32")
    if out_dtype is not None and out_dtype != mat_a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if mat_a.size(-1) != mat_b.size(-2):
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    if mat_a.dim() == 3 and mat_b.dim() == 3 and mat_a.size(0) != mat_b.size(0):
        raise RuntimeError("batched dimension has to match")
    groups = offs.size(0) if offs is not None else None
    if ((mat_a.dim() == 2 and mat_b.dim() == 3 and mat_b.size(0) != groups)
            or (mat_a.dim() == 3 and mat_b.dim() == 2 and mat_a.size(0) != groups)):
        raise RuntimeError("matrix batch sizes have to match")
    _check_layout(mat_a)
    _check_layout(mat_b)


def _spans(offs: Tensor) -> list[tuple[int, int]]:
    ends = [int(e) for e in offs.tolist()]
    return list(zip([0, *ends[:-1]], ends, strict=True))


def grouped_mm(mat_a: Tensor, mat_b: Tensor, *, offs: Tensor | None = None,
               bias: Tensor | None = None, out_dtype: Any = None) -> Tensor:
    """Grouped products: (G, M, K) @ (G, K, N) batched; (M, K) rows cut by ``offs`` @
    (G, K, N) -> (M, N); (M, K) @ (K, N) with K cut by ``offs`` -> (G, M, N); (G, M, K) @
    (K, N) with N cut by ``offs`` -> (M, N). ``offs`` (int32) holds each group's end."""
    _check(mat_a, mat_b, offs, bias, out_dtype)
    if offs is None:
        return gt.matmul(mat_a, mat_b)
    spans = _spans(offs)
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        # the contraction dim is jagged: one (M, N) product per group
        zero = mat_a.new_zeros(mat_a.size(0), mat_b.size(1))
        parts = [mat_a[:, s:e] @ mat_b[s:e] if e > s else zero for s, e in spans]
        return gt.stack(parts)
    if mat_a.dim() == 2:
        # rows are jagged: group g's rows use mat_b[g]
        parts = [mat_a[s:e] @ mat_b[g] for g, (s, e) in enumerate(spans) if e > s]
        tail = mat_a.size(0) - max([0] + [e for _, e in spans])
        parts.append(mat_a.new_zeros(max(tail, 0), mat_b.size(2)))
        return gt.cat(parts, dim=0)
    # columns are jagged: group g's columns use mat_a[g]
    parts = [mat_a[g] @ mat_b[:, s:e] for g, (s, e) in enumerate(spans) if e > s]
    tail = mat_b.size(1) - max([0] + [e for _, e in spans])
    parts.append(mat_a.new_zeros(mat_a.size(1), max(tail, 0)))
    return gt.cat(parts, dim=1)

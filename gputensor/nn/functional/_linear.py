"""linear and bilinear: affine maps over the last dim, as single BLAS products where possible."""

from __future__ import annotations

import math

import gputensor as gt
from gputensor._tensor import Tensor

__all__ = ["linear", "bilinear"]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` over the last dim of ``input`` (the ``gt.linear`` op: one
    gemm with the bias add fused, one autograd node)."""
    return gt.linear(input, weight, bias)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and "
                           f"{input2.dim()}")
    for d in range(input1.dim() - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: "
                               f"got {input1.shape[d]} and {input2.shape[d]}")
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out, in1, in2), got "
                           f"{weight.dim()}-D")
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {in1}")
    if input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {in2}")
    if bias is not None and bias.shape[-1] != out_f:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[-1]} but expected {out_f}")
    lead = input1.shape[:-1]
    n = math.prod(lead)
    # (n, in1) @ (in1, out*in2) -> (n, out, in2), then contract in2 against input2.
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    t = gt.mm(input1.reshape(n, in1), w).view(n, out_f, in2)
    out = gt.matmul(t, input2.reshape(n, in2, 1)).view(n, out_f)
    if bias is not None:
        out = out + bias
    return out.view(*lead, out_f)

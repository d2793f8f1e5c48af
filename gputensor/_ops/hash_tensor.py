"""hash_tensor: PyTorch's xor-reduction hash (mode 0) of a tensor's elements, as uint64.

Each element is widened to its 64-bit equivalent (float64 for floating dtypes, int64 for
integers and bool), its bits are read as uint64, and the words are xor-reduced over ``dim``.
The reduction is a halving tree of elementwise ``bitwise_xor``s, so it runs on every device.
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor import _limited
from gputensor._tensor import Tensor

from ._core import as_index_list, op


def _words(input: Tensor) -> Tensor:
    """The elements as int64 words holding their 64-bit equivalents' bits."""
    dt = input._dtype
    if dt.is_complex or _limited.is_limited(dt):
        raise _limited.not_implemented("xor_sum_cpu" if input.is_cpu else "xor_sum_cuda", dt)
    if dt.is_floating_point:
        return input.to(D.float64).view(D.int64)
    return input.to(D.int64)


def _xor_last(x: Tensor) -> Tensor:
    """Xor-reduce the last dim (non-empty) by halving: pairs of halves, an odd tail kept."""
    while x.shape[-1] > 1:
        n = x.shape[-1]
        half = n // 2
        folded = x[..., :half] ^ x[..., half:2 * half]
        x = folded if n % 2 == 0 else _cat_last(folded, x[..., 2 * half:])
    return x[..., 0]


def _cat_last(a: Tensor, b: Tensor) -> Tensor:
    from .shape import cat
    return cat([a, b], -1)


@op(method=True, differentiable=False)
def hash_tensor(input: Tensor, dim: Any = None, *, keepdim: bool = False,
                mode: int = 0) -> Tensor:
    """The xor of the elements' 64-bit patterns over ``dim`` (all dims by default)."""
    if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        if input.numel() == 0:
            raise RuntimeError("hash_tensor: Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' "
                               "argument.")
        dims = list(range(input.dim()))
    else:
        if input.numel() == 0 and input.dim():   # each dim's size before repeats, as PyTorch
            for d in (dim,) if isinstance(dim, int) else dim:
                if input.shape[as_index_list(d, input.dim())[0]] == 0:
                    raise IndexError(f"hash_tensor: Expected reduction dim "
                                     f"{as_index_list(d, input.dim())[0]} to have non-zero "
                                     f"size.")
        dims = as_index_list(dim, max(input.dim(), 1))
        for d in dims:
            if input.dim() and input.shape[d] == 0:
                raise IndexError(f"hash_tensor: Expected reduction dim {d} to have non-zero "
                                 f"size.")
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    shape = [1 if d in dims else n for d, n in enumerate(input.shape)] if keepdim else \
        [n for d, n in enumerate(input.shape) if d not in dims]
    if 0 in shape:   # no kernel runs, so no dtype check either (as in PyTorch)
        from .creation import zeros
        return _limited.reinterpret(zeros(shape, dtype=D.int64, device=input.device), D.uint64)
    words = _words(input)   # its dtype check after the dims', as in PyTorch
    if input.dim() == 0:
        return _limited.reinterpret(words.contiguous(), D.uint64)
    keep = [d for d in range(input.dim()) if d not in dims]
    moved = words.permute(*keep, *dims)
    flat = moved.reshape(*[input.shape[d] for d in keep], -1)
    out = _xor_last(flat)
    if keepdim:
        out = out.reshape([1 if d in dims else input.shape[d] for d in range(input.dim())])
    return _limited.reinterpret(out.contiguous(), D.uint64)

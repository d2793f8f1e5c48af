"""Helpers the derivative formulas use, written with differentiable ops so they compose for
higher-order gradients. Formulas see these names beside the public gputensor functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def zeros_grad(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    import gputensor as gt
    return gt.zeros(shape, dtype=dtype, device=device)


def sum_to(g: Any, shape: Sequence[int]) -> Any:
    """Sum a broadcast gradient back to ``shape`` (leading dims and dims of size 1)."""
    shape = tuple(shape)
    if g._shape == shape:
        return g
    lead = g.dim() - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g._shape[lead:], strict=True)):
        raise RuntimeError(f"a gradient of shape {list(g._shape)} can't be summed to the "
                           f"input's shape {list(shape)}")
    ones = [lead + i for i, n in enumerate(shape) if n == 1 and g._shape[lead + i] != 1]
    if not ones:  # only leading dims (a bias gradient): one sum, no reshape
        return g.sum(list(range(lead)))
    g = g.sum(list(range(lead)) + ones, keepdim=True)
    return g.reshape(shape) if g._shape != shape else g


def fit_grad(g: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """The gradient in the input's own shape and dtype (the node does this for every op)."""
    if g is None:
        return None
    if g._shape != shape:
        g = sum_to(g, shape)
    if g._dtype is not dtype:
        g = g.to(dtype)  # complex to real keeps the real part, like PyTorch's grad for .to()
    return g


def expand_reduced(g: Any, shape: Sequence[int], dim: Any, keepdim: bool) -> Any:
    """The gradient of a reduction over ``dim`` broadcast back to the input ``shape``."""
    ndim = len(shape)
    if not keepdim and ndim:
        if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
            g = g.reshape((1,) * ndim)
        else:
            dims = sorted(d % ndim for d in ((dim,) if isinstance(dim, int) else dim))
            for d in dims:
                g = g.unsqueeze(d)
    return g.expand(tuple(shape))


def reduced_count(shape: Sequence[int], dim: Any) -> int:
    """How many elements each output of a reduction over ``dim`` combines."""
    import math
    if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        return math.prod(shape)
    ndim = len(shape)
    dims = (dim,) if isinstance(dim, int) else dim
    return math.prod(shape[d % ndim] for d in dims) if ndim else 1


def unsqueeze_like(x: Any, shape: Sequence[int], dim: Any, keepdim: bool) -> Any:
    """A reduction's output (values) made broadcastable against its input again."""
    if keepdim or not len(shape):
        return x
    if dim is None:
        return x.reshape((1,) * len(shape))
    for d in sorted(d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim)):
        x = x.unsqueeze(d)
    return x


def cj(x: Any) -> Any:
    """The complex conjugate of a complex tensor; real tensors and Python numbers as they are."""
    if hasattr(x, "_dtype"):
        return x.conj() if x._dtype.is_complex else x
    return x.conjugate() if isinstance(x, complex) else x


def scale(g: Any, s: Any) -> Any:
    """``g * s`` without an op when ``s`` is 1."""
    return g if (not hasattr(s, "_dtype") and s == 1) else g * s


def _column_major(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    return strides[0] == 1 and strides[1] == sizes[0]


def mm_mat1_grad(g: Any, mat2: Any, mat1_sizes: Sequence[int],
                 mat1_strides: Sequence[int]) -> Any:
    """``g @ mat2^H``, the gradient of mm's first factor, laid out column-major when that
    factor was (PyTorch's mm_mat1_backward): the gradient of ``x @ w.t()``'s ``w`` then has
    ``w``'s own layout, which AccumulateGrad keeps without a copy."""
    if _column_major(mat1_sizes, mat1_strides):
        return cj(mat2).mm(g.t()).t()
    return g.mm(cj(mat2).t())


def mm_mat2_grad(g: Any, mat1: Any, mat2_sizes: Sequence[int],
                 mat2_strides: Sequence[int]) -> Any:
    """``mat1^H @ g``, the gradient of mm's second factor, column-major when that factor was
    (PyTorch's mm_mat2_backward)."""
    if _column_major(mat2_sizes, mat2_strides):
        return g.t().mm(cj(mat1)).t()
    return cj(mat1).t().mm(g)


def masked(g: Any, mask: Any) -> Any:
    """``g`` where ``mask`` holds, else zero."""
    import gputensor as gt
    return gt.where(mask, g, gt.zeros((), dtype=g.dtype, device=g.device))


def not_implemented(what: str) -> Any:
    raise RuntimeError(f"the derivative for '{what}' is not implemented")


def invert_permutation(dims: Any, ndim: int) -> list[int]:
    """The permutation undoing ``permute(dims)`` (dims as varargs or one sequence)."""
    if len(dims) == 1 and isinstance(dims[0], list | tuple):
        dims = dims[0]
    inverse = [0] * ndim
    for i, d in enumerate(dims):
        inverse[d % ndim] = i
    return inverse


def into_zeros(g: Any, shape: Sequence[int], region: Any) -> Any:
    """Zeros of ``shape`` with ``region(zeros)`` (a view) set to ``g``: the gradient of a view
    op. Differentiable in ``g`` through the in-place-on-view rules."""
    import gputensor as gt
    z = gt.zeros(tuple(shape), dtype=g.dtype, device=g.device)
    region(z).copy_(g)
    return z


def own_storage(g: Any) -> Any:
    """``g`` laid out contiguously from the start of its own storage, so that an ``as_strided``
    offset (absolute, as PyTorch's) addresses its elements: a contiguous view into a larger
    buffer (a row of a gradient, say) is copied."""
    return g if g._offset == 0 and g.is_contiguous() else g.clone(
        memory_format=_contiguous())


def _contiguous() -> Any:
    import gputensor as gt
    return gt.contiguous_format


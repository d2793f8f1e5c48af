"""In-place resizes of a sparse COO tensor: ``sparse_resize_``, ``sparse_resize_and_clear_`` and
``resize_as_sparse_`` (PyTorch's SparseTensorImpl rules and messages).

A tensor with entries keeps its numbers of sparse and dense dims and may only grow; an empty
one takes any size and split. Like every in-place op, a leaf that requires grad refuses under
autograd, and a tensor in a graph gets a node whose backward raises (PyTorch has no
derivative for these either).
"""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor, parse_size
from gputensor.autograd import grad_mode
from gputensor.autograd.inplace import check_leaf

from ._tensor import SparseTensor

_OPTIONS = (
    "You could try the following options:\n"
    "1. If you need an empty sparse tensor of this size, call `x = torch.sparse_coo_tensor("
    "size)`.\n"
    "2. If you need to resize this tensor, you have the following options:\n"
    "    1. For both sparse and dense dimensions, keep the number of them constant and the size "
    "of them non-shrinking, and then try the same call again.\n"
    "    2. Or, create a new sparse tensor with the correct indices and values from this sparse "
    "tensor.")


def _check_split(size: tuple[int, ...], sparse_dim: int, dense_dim: int) -> None:
    if len(size) != sparse_dim + dense_dim:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                           f"{len(size)}, sparse_dim = {sparse_dim}, dense_dim = {dense_dim}")


def _check_keeps_entries(self: SparseTensor, size: tuple[int, ...], sparse_dim: int,
                         dense_dim: int) -> None:
    old_sd, old_dd = self._sparse_dim, len(self._shape) - self._sparse_dim
    for what, old, new in (("sparse", old_sd, sparse_dim), ("dense", old_dd, dense_dim)):
        if old != new:
            raise RuntimeError(f"changing the number of {what} dimensions (from {old} to {new}) "
                               f"on a non-empty sparse tensor is not supported.\n{_OPTIONS}")
    for what, old, new in (("sparse", self._shape[:sparse_dim], size[:sparse_dim]),
                           ("dense", self._shape[sparse_dim:], size[sparse_dim:])):
        if any(n < o for n, o in zip(new, old, strict=True)):
            raise RuntimeError(f"shrinking the size of {what} dimensions (from {list(old)} to "
                               f"{list(new)}) on a non-empty sparse tensor is not supported.\n"
                               f"{_OPTIONS}")


def _in_place(self: SparseTensor, op_name: str) -> bool:
    """PyTorch's in-place rules under autograd; whether the result joins the graph."""
    graph = grad_mode.is_grad_enabled() and self._requires_grad
    if graph:
        check_leaf(self)
    return graph


def _finish(self: SparseTensor, op_name: str, graph: bool, edges: list) -> SparseTensor:
    if graph and edges:
        from gputensor.autograd.derivatives import NotImplementedNode, attach_raising_node
        attach_raising_node(NotImplementedNode, op_name, [self], edges)
    return self


def _edges(self: SparseTensor, graph: bool) -> list:
    if not graph:
        return []
    from gputensor.autograd.graph import edge_of
    return [edge_of(self)]


def _parse(size: Any, sparse_dim: int, dense_dim: int) -> tuple[int, ...]:
    shape = parse_size((size,))
    _check_split(shape, int(sparse_dim), int(dense_dim))
    return shape


def _empty_parts(self: SparseTensor, size: tuple[int, ...],
                 sparse_dim: int) -> tuple[Tensor, Tensor]:
    if any(n < 0 for n in size):
        raise RuntimeError("numel: integer multiplication overflow")
    idx = self._indices_t.new_zeros((sparse_dim, 0))
    vals = self._values_t.new_zeros((0, *size[sparse_dim:]))
    return idx, vals


def sparse_resize_(self: SparseTensor, size: Any, sparse_dim: int,
                   dense_dim: int) -> SparseTensor:
    """Resize to ``size`` with ``sparse_dim`` sparse and ``dense_dim`` dense dims, keeping the
    entries (which needs the same split and no shrinking dim when there are any). New dense
    elements of existing entries are uninitialised, as PyTorch's."""
    shape = _parse(size, sparse_dim, dense_dim)
    graph = _in_place(self, "sparse_resize_")
    edges = _edges(self, graph)
    if self._nnz() == 0:
        idx, vals = _empty_parts(self, shape, sparse_dim)
        self._set(idx, vals, shape, self._is_coalesced)
        return _finish(self, "sparse_resize_", graph, edges)
    _check_keeps_entries(self, shape, sparse_dim, dense_dim)
    vals = self._values_t
    dense = shape[sparse_dim:]
    if tuple(vals._shape[1:]) != dense:
        # PyTorch resizes the values in place: the flat elements stay, the rest is new memory.
        vals = vals.detach().clone().resize_(self._nnz(), *dense)
    self._set(self._indices_t, vals, shape, self._is_coalesced)
    return _finish(self, "sparse_resize_", graph, edges)


def sparse_resize_and_clear_(self: SparseTensor, size: Any, sparse_dim: int,
                             dense_dim: int) -> SparseTensor:
    """Remove every entry, then take ``size`` with the given sparse/dense split."""
    shape = _parse(size, sparse_dim, dense_dim)
    graph = _in_place(self, "sparse_resize_and_clear_")
    edges = _edges(self, graph)
    idx, vals = _empty_parts(self, shape, sparse_dim)
    self._set(idx, vals, shape, True)
    return _finish(self, "sparse_resize_and_clear_", graph, edges)


def resize_as_sparse_(self: SparseTensor, the_template: Tensor) -> SparseTensor:
    """``sparse_resize_`` to ``the_template``'s size and split (a dense template counts as
    all dense dims, as PyTorch's)."""
    sd = the_template.sparse_dim()
    return sparse_resize_(self, the_template._shape, sd, len(the_template._shape) - sd)


def resize_as_(self: SparseTensor, the_template: Tensor, *,
               memory_format: Any = None) -> SparseTensor:
    """A sparse tensor resized like a sparse template (a dense one has no sparse kernel)."""
    if not isinstance(the_template, SparseTensor):
        from ._tensor import not_supported
        raise not_supported("resize_as_ with a strided template", self.device.type)
    return resize_as_sparse_(self, the_template)


def to_sparse_coo(self: SparseTensor) -> SparseTensor:
    """Already a sparse COO tensor: itself."""
    return self


METHODS = {
    "sparse_resize_": sparse_resize_, "sparse_resize_and_clear_": sparse_resize_and_clear_,
    "resize_as_sparse_": resize_as_sparse_, "resize_as_": resize_as_,
    "to_sparse_coo": to_sparse_coo,
}

"""In-place arithmetic on a sparse tensor that takes part in autograd (``s.mul_(2)`` where
``s`` requires grad): computed out of place on a clone (the formulas may read the old value),
then the tensor takes the result's entries and its history, as dense in-place ops do."""

from __future__ import annotations

from collections.abc import Callable

import gputensor as gt
from gputensor.autograd.inplace import check_leaf

from ._tensor import SparseTensor


def apply_sparse_inplace(self: SparseTensor,
                         compute: Callable[[SparseTensor], SparseTensor]) -> SparseTensor:
    check_leaf(self)
    result = compute(self.clone())
    if result.layout is not self.layout:
        raise RuntimeError(f"in-place op on a {self.layout.name} tensor produced a "
                           f"{result.layout.name} result; use the out-of-place form")
    if not gt.can_cast(result._dtype, self._dtype):
        raise RuntimeError(f"result type {result._dtype.legacy_name} can't be cast to the "
                           f"desired output type {self._dtype.legacy_name}")
    vals = result._values_t.to(self._dtype)
    if isinstance(self, SparseTensor):
        self._set(result._indices_t, vals, self._shape, result._is_coalesced)
    else:      # a compressed tensor (gputensor/sparse/compressed.py)
        self._set_parts(result._cidx, result._pidx, vals)
    if result._requires_grad:
        self.grad_fn = result.grad_fn
        self._output_nr = result._output_nr
        self._requires_grad = True
    return self

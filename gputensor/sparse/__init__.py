"""gputensor.sparse: sparse COO tensors (``layout == gt.sparse_coo``), PyTorch's ``torch.sparse``.

- ``gt.sparse_coo_tensor(indices, values, size)``, ``dense.to_sparse()``, ``x.to_dense()``,
  ``x.coalesce()``, ``x.indices()``/``x.values()``, hybrid tensors (dense trailing dims).
- ``gt.sparse.mm``/``addmm`` (and ``gt.mm``/``gt.matmul``/``gt.addmm`` with a sparse first
  operand), ``gt.sparse.sum``, ``gt.sparse.softmax``/``log_softmax``, sparse + sparse,
  sparse * scalar/dense/sparse, ``t``/``transpose``, ``index_select``; autograd through all.
- The legacy types ``gt.sparse.FloatTensor`` ... (and ``gt.cuda.sparse.*``).
- The compressed layouts CSR/CSC/BSR/BSC (``compressed.py``): ``gt.sparse_csr_tensor`` ...,
  ``x.to_sparse_csr()`` ..., products with a dense operand, scalar ``*``, CSR ``+``, ``sum``.

Kernels live in the SparseCPU/SparseCUDA backends (kernels/cpu/sparse.py and the CUDA
sources); everything else is a composite of them and dense ops on indices/values.
"""

from gputensor._legacy import types_in
from gputensor._tensor import Tensor

# Every submodule is imported for its op declarations and backend registrations; derivative
# formulas reach the gradient helpers as ``sparse._grads`` / ``sparse._reduce`` / ...
from . import (  # noqa: F401
    _compressed_construct,  # noqa: F401,E402  (the compressed constructors)
    _construct,
    _elementwise,
    _grads,
    _helpers,
    _methods,
    _nn,
    _ops,
    _reduce,
    _shape,
)
from ._construct import sparse_coo_tensor, to_sparse
from ._matmul import addmm, mm
from ._ops import sparse_mask as _sparse_mask_op
from ._reduce import log_softmax, softmax
from ._reduce import sparse_sum as sum  # noqa: A001  (torch.sparse.sum)
from ._tensor import SparseTensor, _block_dense_methods
from .compressed import CompressedTensor

globals().update(types_in("gputensor.sparse"))


def sparse_mask(input: Tensor, mask: SparseTensor) -> SparseTensor:
    """``input.sparse_mask(mask)``: dense ``input`` at ``mask``'s entries, same size."""
    if not isinstance(mask, SparseTensor):
        raise TypeError(f"sparse_mask: mask must be a sparse_coo tensor, got layout "
                        f"{getattr(mask, 'layout', type(mask).__name__)}")
    if isinstance(input, SparseTensor):
        raise RuntimeError("sparse_mask: input must be a dense (strided) tensor")
    if tuple(input.shape) != tuple(mask.shape) or input.device != mask.device:
        raise RuntimeError(f"sparse_mask: input ({list(input.shape)} on {input.device}) and "
                           f"mask ({list(mask.shape)} on {mask.device}) must have the same size "
                           f"and device")
    return _sparse_mask_op(input, mask)


_methods.install()
_block_dense_methods()
_block_dense_methods(CompressedTensor, {
    "add", "mul", "neg", "__add__", "__radd__", "__mul__", "__rmul__", "__neg__", "__pos__",
    "add_", "mul_", "neg_", "__iadd__", "__imul__"})

__all__ = ["SparseTensor", "addmm", "log_softmax", "mm", "softmax", "sparse_coo_tensor",
           "sparse_mask", "sum", "to_sparse", *types_in("gputensor.sparse")]


"""``gt.cuda.sparse``: the SparseCUDA legacy tensor types (PyTorch's ``torch.cuda.sparse``):
``gt.cuda.sparse.FloatTensor(indices, values, size)`` and ``isinstance`` checks."""

from gputensor._legacy import types_in

globals().update(types_in("gputensor.cuda.sparse"))
__all__ = sorted(types_in("gputensor.cuda.sparse"))

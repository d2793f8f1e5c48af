"""BatchedTensor: a per-sample view of a tensor that carries one vmap level's batch dimension.

A BatchedTensor holds ``_value``, the real tensor with the batch dimension of its level in
front, and presents the per-sample (logical) dtype and shape. Under nested vmaps the value is
itself a BatchedTensor of a lower level, so the real tensor is laid out as
``[B_1, ..., B_k, *sample]`` (level 1 outermost). Ops called on it reach a batching rule
(gputensor.func._dispatch), which unwraps one level, calls the op on the values and wraps the
result. Reading the memory directly (``.item()``, ``bool()``, ``.numpy()``) is refused with
PyTorch's vmap errors: a sample's value is not a Python number.
"""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor

ITEM_ERROR = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap "
              "over calling .item() on a Tensor, please try to rewrite what you're doing with "
              "other operations. If error is occurring somewhere inside PyTorch internals, "
              "please file a bug report.")
CONTROL_FLOW_ERROR = ("vmap: It looks like you're attempting to use a Tensor in some "
                      "data-dependent control flow. We don't support that yet, please file an "
                      "issue at https://github.com/pytorch/pytorch/issues .")


class _NoStorage:
    """A batched tensor's stand-in storage: its device (which checks read), and a clear error
    for anything else, since code that reaches for memory has no batching rule."""

    __slots__ = ("device",)

    def __init__(self, device: Any) -> None:
        self.device = device

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("vmap: this operation reads a tensor's memory directly and has no "
                           "batching rule; call it outside vmap or use other operations")


class BatchedTensor(Tensor):
    """The logical (per-sample) tensor of one vmap level; see the module docstring."""

    def __new__(cls, *args: Any, **kwargs: Any) -> BatchedTensor:
        raise TypeError("BatchedTensor is created by gputensor.func.vmap only")

    @property
    def _storage(self) -> Any:
        return _NoStorage(self._value.device)

    @property
    def _host(self) -> Any:
        raise RuntimeError(ITEM_ERROR)

    @property
    def device(self) -> Any:
        return self._value.device

    @property
    def is_cuda(self) -> bool:
        return self._value.is_cuda

    @property
    def is_cpu(self) -> bool:
        return self._value.is_cpu

    def get_device(self) -> int:
        return self._value.get_device()

    @property
    def requires_grad(self) -> bool:
        return self._value.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._value.requires_grad = value

    @property
    def grad_fn(self) -> Any:
        return self._value.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._value.is_leaf

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return self._value.is_contiguous()

    def data_ptr(self) -> int:
        raise RuntimeError("vmap: data_ptr of a batched tensor is not defined")

    def detach(self) -> Tensor:
        return wrap(self._value.detach(), self._level)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        value = self._value.to(*args, **kwargs)
        return self if value is self._value else wrap(value, self._level)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        return wrap(self._value.cuda(device, non_blocking), self._level)

    def item(self) -> Any:
        raise RuntimeError(ITEM_ERROR)

    def tolist(self) -> Any:
        raise RuntimeError(ITEM_ERROR)

    def numpy(self, *, force: bool = False) -> Any:
        raise RuntimeError(ITEM_ERROR)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise RuntimeError(ITEM_ERROR)

    def __bool__(self) -> bool:
        raise RuntimeError(CONTROL_FLOW_ERROR)

    def _scalar_value(self) -> Any:
        raise RuntimeError(ITEM_ERROR)

    def __index__(self) -> int:
        raise RuntimeError(ITEM_ERROR)

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return f"BatchedTensor(lvl={self._level}, bdim=0, value=\n{self._value!r}\n)"

    def __deepcopy__(self, memo: dict) -> Tensor:
        raise RuntimeError("vmap: deepcopy of a batched tensor is not supported")


def wrap(value: Tensor, level: int) -> BatchedTensor:
    """The BatchedTensor of ``level`` whose samples are ``value``'s slices along dim 0."""
    self = object.__new__(BatchedTensor)
    self._value = value
    self._level = level
    self._dtype = value._dtype
    self._shape = tuple(value._shape[1:])
    self._stride = tuple(value._stride[1:])
    self._offset = 0
    self._np = None
    self._np_buf = None
    return self


def level_of(x: Any) -> int:
    """The vmap level that batches ``x`` (0: not batched)."""
    return x._level if type(x) is BatchedTensor else 0


def unwrap(x: Any, level: int) -> tuple[Any, bool]:
    """``x``'s value with the batch dim of ``level`` in front, and whether ``x`` had one."""
    if type(x) is BatchedTensor and x._level == level:
        return x._value, True
    return x, False


def materialize(x: Tensor, level: int, size: int) -> Tensor:
    """``x`` with a batch dim of ``level`` in front: its value, or ``x`` expanded to ``size``."""
    if type(x) is BatchedTensor and x._level == level:
        return x._value
    return x.unsqueeze(0).expand(size, *x.shape)


def move_bdim(value: Tensor, dim: int) -> Tensor:
    """``value`` (batch in front) with the batch dim moved to ``dim`` of the result."""
    return value if dim == 0 else value.movedim(0, dim)


def is_batched(x: Any) -> bool:
    return type(x) is BatchedTensor


def physical(x: Any) -> Any:
    """The real tensor under every vmap level of ``x`` (batch dims in front, outermost first);
    checks that read a whole batch at once (linalg's ``info``) use it."""
    while type(x) is BatchedTensor:
        x = x._value
    return x

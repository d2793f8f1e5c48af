"""The strided Tensor: metadata (shape, strides, offset, dtype) over a storage.

Views share the storage; every in-place write bumps the storage's version counter. Ops are not
defined here: the op registry installs ``Tensor.<op>`` methods and operators at import.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._compile import state as _capture
from gputensor._device import CPU, device, to_device
from gputensor._layout import strided
from gputensor._size import Size, size_of
from gputensor.storage.allocator import host_bytes
from gputensor.storage.typed import TypedStorage
from gputensor.storage.untyped import UntypedStorage

_STRIDES_CACHE: dict[tuple[int, ...], tuple[int, ...]] = {}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    cached = _STRIDES_CACHE.get(shape)
    if cached is not None:
        return cached
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    out = tuple(reversed(strides))
    if len(_STRIDES_CACHE) < 4096:
        _STRIDES_CACHE[shape] = out
    return out


def normalize_dim(dim: int, ndim: int, what: str = "dim") -> int:
    n = max(ndim, 1)
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"{what} must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return int(dim) % n


def parse_size(args: tuple) -> tuple[int, ...]:
    """Accept f(2, 3), f((2, 3)), f([2, 3]) or f(gt.Size([2, 3]))."""
    if len(args) == 1 and isinstance(args[0], tuple | list | Size):
        args = tuple(args[0])
    if all(type(a) is int for a in args):  # the common case: plain ints (bool is not int)
        return tuple(args)
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = a.item()
        if not isinstance(a, int | np.integer) or isinstance(a, bool):
            raise TypeError(f"size must be a sequence of ints, got {type(a).__name__} in {args}")
        out.append(int(a))
    return tuple(out)


def new_shape(args: tuple) -> tuple[int, ...]:
    """The shape of a tensor to create (``parse_size``'s forms); a negative size is PyTorch's
    RuntimeError, not NumPy's."""
    shape = parse_size(args)
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: "
                           f"{list(shape)}")
    return shape


class Tensor:
    """A strided tensor (``gt.Tensor``). Constructed by ops; ``gt.Tensor(2, 3)`` works too."""

    __slots__ = ("_storage", "_dtype", "_shape", "_stride", "_offset", "_np", "_np_buf",
                 "__weakref__", "__dict__")
    # Rarely-set fields live in the instance __dict__ once set; these class-level defaults keep
    # constructing a tensor (on every op's hot path) to the seven slots above.
    _requires_grad = False
    grad = None
    grad_fn = None
    _output_nr = 0
    _base = None
    # True on gputensor.sparse.SparseTensor: frontends test this class attribute (only off
    # their fast paths) to route sparse operands away from dense kernels.
    _sparse = False

    # -- construction ------------------------------------------------------------------------
    def __new__(cls, *args: Any, device: Any = None) -> Tensor:
        # Legacy constructor: gt.Tensor(2, 3) (uninitialised) or gt.Tensor([1, 2]) (data).
        from gputensor._ops.creation import legacy_construct
        return legacy_construct(D.get_default_dtype(), device, args)

    @classmethod
    def _make(cls, storage: UntypedStorage, dtype: D.dtype, shape: tuple[int, ...],
              stride: tuple[int, ...], offset: int = 0) -> Tensor:
        self = object.__new__(cls)
        self._storage = storage
        self._dtype = dtype
        self._shape = shape
        self._stride = stride
        self._offset = offset
        self._np_buf = None
        self._np = None
        return self

    @classmethod
    def _from_np(cls, arr: np.ndarray) -> Tensor:
        """Adopt a fresh C-contiguous host array as a CPU tensor (no copy)."""
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        dt = D.from_numpy_dtype(arr.dtype)
        self = cls._make(UntypedStorage._wrap(arr, CPU), dt, arr.shape,
                         contiguous_strides(arr.shape), 0)
        self._np = arr
        self._np_buf = arr
        return self

    def _view(self, shape: tuple[int, ...], stride: tuple[int, ...], offset: int) -> Tensor:
        out = Tensor._make(self._storage, self._dtype, tuple(shape), tuple(stride), offset)
        out._base = self if self._base is None else self._base
        return out

    # -- host access (CPU) ------------------------------------------------------------------
    @property
    def _host(self) -> np.ndarray:
        """A NumPy view of this CPU tensor's elements (cached; re-made if the buffer moved)."""
        if self._np_buf is self._storage._buf:
            return self._np
        buf = self._storage._buf
        if self._storage.device.type != "cpu":
            raise RuntimeError(f"tensor on {self.device} has no host view; call .cpu() first")
        isz = self._dtype.itemsize
        if 0 in self._shape:
            arr = np.empty(self._shape, self._dtype.np_dtype)
        elif type(buf) is np.ndarray and buf.dtype == self._dtype.np_dtype and \
                not self._offset and buf.size == math.prod(self._shape) and \
                buf.flags.c_contiguous and self._stride == contiguous_strides(self._shape):
            arr = buf.reshape(self._shape)   # a whole-buffer view (x.view(4, 4)): ~4x cheaper
        else:
            arr = np.ndarray(self._shape, self._dtype.np_dtype,
                             buf if type(buf) is np.ndarray and buf.flags.c_contiguous
                             else host_bytes(buf),
                             self._offset * isz, tuple(s * isz for s in self._stride))
        self._np, self._np_buf = arr, buf
        return arr

    # -- metadata --------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return size_of(self._shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return size_of(self._shape)
        return self._shape[normalize_dim(dim, len(self._shape))]

    def stride(self, dim: int | None = None) -> Any:
        if dim is None:
            return self._stride
        return self._stride[normalize_dim(dim, len(self._shape))]

    def storage_offset(self) -> int:
        return self._offset

    @property
    def dtype(self) -> D.dtype:
        return self._dtype

    @property
    def device(self) -> device:
        return self._storage.device

    @property
    def layout(self) -> Any:
        return strided

    @property
    def is_cuda(self) -> bool:
        return self._storage.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._storage.device.type == "cpu"

    @property
    def is_sparse(self) -> bool:
        return False

    # Devices this runtime has no backend for: a tensor is never on one (PyTorch's properties).
    @property
    def is_xpu(self) -> bool:
        return False

    @property
    def is_mps(self) -> bool:
        return False

    def to_sparse(self, sparse_dim: int | None = None, *, layout: Any = None,
                  blocksize: Any = None, dense_dim: int | None = None) -> Any:
        """A sparse copy (gputensor.sparse; COO unless ``layout`` names a compressed one):
        entries where this tensor is non-zero."""
        from gputensor.sparse import to_sparse
        return to_sparse(self, sparse_dim, layout=layout, blocksize=blocksize,
                         dense_dim=dense_dim)

    def to_sparse_csr(self, dense_dim: int | None = None) -> Any:
        """A sparse CSR copy (gputensor.sparse.compressed)."""
        from gputensor.sparse.compressed import sparse_csr, to_layout
        return to_layout(self, sparse_csr, None, dense_dim)

    def to_sparse_csc(self, dense_dim: int | None = None) -> Any:
        from gputensor.sparse.compressed import sparse_csc, to_layout
        return to_layout(self, sparse_csc, None, dense_dim)

    def to_sparse_bsr(self, blocksize: Any, dense_dim: int | None = None) -> Any:
        from gputensor.sparse.compressed import sparse_bsr, to_layout
        return to_layout(self, sparse_bsr, blocksize, dense_dim)

    def to_sparse_bsc(self, blocksize: Any, dense_dim: int | None = None) -> Any:
        from gputensor.sparse.compressed import sparse_bsc, to_layout
        return to_layout(self, sparse_bsc, blocksize, dense_dim)

    def sparse_mask(self, mask: Any) -> Any:
        """This tensor's values at the entries of sparse ``mask`` (a sparse_coo result)."""
        from gputensor.sparse import sparse_mask
        return sparse_mask(self, mask)

    def to_dense(self, dtype: Any = None, *, masked_grad: bool = True) -> Tensor:
        """A dense tensor is its own dense form (cast to ``dtype`` when given)."""
        return self if dtype is None else self.to(dtype)

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def is_meta(self) -> bool:
        return False

    def get_device(self) -> int:
        return -1 if self.is_cpu else self.device.index

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self._dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    def is_signed(self) -> bool:
        return self._dtype.is_signed

    def untyped_storage(self) -> UntypedStorage:
        return self._storage

    def storage(self) -> TypedStorage:
        return TypedStorage._wrap(self._storage, self._dtype)

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._offset * self._dtype.itemsize

    @property
    def _version(self) -> int:
        return self._storage._version

    def _bump_version(self) -> None:
        self._storage._version += 1

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """Row-major (the default), or laid out in ``memory_format`` (e.g. channels_last)."""
        if memory_format is not None:
            from gputensor import _memory_format as MF
            fmt = MF.check(memory_format, "is_contiguous")
            if fmt is MF.preserve_format:
                raise RuntimeError("is_contiguous: preserve_format is not a layout to check")
            if fmt is not MF.contiguous_format:
                return MF.is_in_format(self._shape, self._stride, fmt)
        expected = 1
        for size, st in zip(reversed(self._shape), reversed(self._stride), strict=True):
            if size == 1:
                continue
            if st != expected:
                return size == 0 or 0 in self._shape
            expected *= size
        return True

    def is_set_to(self, other: Tensor) -> bool:
        return (self._storage is other._storage and self._offset == other._offset
                and self._shape == other._shape and self._stride == other._stride)

    def _is_view(self) -> bool:
        return self._base is not None

    # -- autograd -----------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError(f"only Tensors of floating point and complex dtype can require "
                               f"gradients, got {self._dtype}")
        if value and getattr(self._storage, "_inference", False):
            from gputensor.autograd.grad_mode import is_inference_mode_enabled
            if not is_inference_mode_enabled():
                raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                                   "InferenceMode is not allowed.")
        if self.grad_fn is not None and not value:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If "
                               "you want to use a computed variable in a subgraph that doesn't "
                               "require differentiation use var_no_grad = var.detach().")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def backward(self, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Accumulate the gradient of this tensor into the leaves' ``.grad``."""
        from gputensor.autograd.engine import backward
        backward(self, gradient, retain_graph, create_graph, inputs)

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        """``hook(tensor)`` runs after this leaf's ``.grad`` has been accumulated."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        from gputensor.autograd.graph import RemovableHandle
        hooks = self.__dict__.setdefault("_post_accumulate_hooks", {})
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_hook(self, hook: Any) -> Any:
        """``hook(grad)`` runs when this tensor's gradient is computed; it may return a
        replacement. Returns a handle whose ``remove()`` unregisters it."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._register_tensor_hook(self._output_nr, hook)
        from gputensor.autograd.graph import RemovableHandle
        hooks = self.__dict__.setdefault("_leaf_hooks", {})
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self.__dict__.get("retains_grad"):
            return
        import weakref
        ref = weakref.ref(self)

        def keep(g: Tensor) -> None:
            t = ref()
            if t is not None:
                t.grad = g.detach().clone() if t.grad is None else t.grad + g.detach()
        self.grad_fn._register_tensor_hook(self._output_nr, keep)
        self.retains_grad = True

    retains_grad = False

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        self._storage, self._dtype = value._storage, value._dtype
        self._shape, self._stride, self._offset = value._shape, value._stride, value._offset
        self._np_buf = None

    def detach(self) -> Tensor:
        return Tensor._make(self._storage, self._dtype, self._shape, self._stride, self._offset)

    def detach_(self) -> Tensor:
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self._requires_grad = False
        self._output_nr = 0
        return self

    # -- Python protocol -------------------------------------------------------------------
    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} values is "
                               f"ambiguous")
        return bool(self.item())

    def __int__(self) -> int:
        return int(self._scalar_value())

    def __float__(self) -> float:
        return float(self._scalar_value())

    def __complex__(self) -> complex:
        return complex(self._scalar_value())

    def __index__(self) -> int:
        if self._dtype.category > D.INTEGRAL or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def _scalar_value(self) -> Any:
        if self.numel() != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars, "
                             f"got shape {tuple(self._shape)}")
        return self.item()

    def item(self) -> Any:
        if _capture.TRACE is not None:
            _capture.host_read("Tensor.item()")
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               f"Scalar")
        value = self.cpu()._host.reshape(()).item() if self.is_cuda else \
            self._host.reshape(-1)[0].item()
        if self._dtype in (D.float16, D.bfloat16):
            value = float(value)
        return value

    def tolist(self) -> Any:
        if _capture.TRACE is not None:
            _capture.host_read("Tensor.tolist()")
        host = self.cpu()._host
        if self._dtype in (D.float16, D.bfloat16):
            host = host.astype(np.float32)
        return host.tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        if _capture.TRACE is not None:
            _capture.host_read("Tensor.numpy()")
        if self.is_cuda:
            if not force:
                raise TypeError(f"can't convert {self.device} device type tensor to numpy. "
                                f"Use Tensor.cpu() to copy the tensor to host memory first.")
            return self.cpu()._host
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return self._host

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy(force=True)
        return arr if dtype is None else arr.astype(dtype)

    # -- zero-copy exchange with other array libraries (gputensor/_interop.py) ----------------
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """NumPy's array interface of a CPU tensor (no copy). Absent (AttributeError) on
        CUDA, for tensors that require grad and for bfloat16, where NumPy then falls back to
        ``__array__``."""
        if self.is_cuda or self._requires_grad or self._dtype is D.bfloat16:
            raise AttributeError("__array_interface__: only CPU tensors that do not require "
                                 "grad and have a NumPy dtype expose their memory")
        from gputensor._interop import array_interface
        return array_interface(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        from gputensor._interop import cuda_array_interface
        return cuda_array_interface(self)

    def __dlpack__(self, *, stream: Any = -1, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        """A DLPack capsule sharing this tensor's memory (see ``gputensor/_dlpack.py``)."""
        from gputensor._interop import to_capsule
        return to_capsule(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[Any, int]:
        from gputensor._interop import dlpack_device
        return dlpack_device(self)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        from gputensor._tensor_str import format_tensor
        values = self.detach().cpu()._host
        grad_fn = type(self.grad_fn).__name__ if self.grad_fn is not None else None
        default = D.get_default_dtype()
        return format_tensor(values, dtype_name=self._dtype.name,
                             is_default_dtype=self._dtype is default,
                             default_dtype_name=default.name, device=str(self.device),
                             requires_grad=self._requires_grad, grad_fn_name=grad_fn)

    def __format__(self, spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol: int) -> tuple:
        from gputensor._ops.creation import _rebuild_tensor
        return (_rebuild_tensor, (self.storage(), self._offset, self._shape, self._stride,
                                  self._requires_grad))

    def __deepcopy__(self, memo: dict) -> Tensor:
        if id(self) in memo:
            return memo[id(self)]
        out = self.clone()
        out._requires_grad = self._requires_grad
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out

    # -- device and dtype conversion ---------------------------------------------------------
    def to(self, *args: Any, dtype: Any = None, device: Any = None, non_blocking: bool = False,
           copy: bool = False, memory_format: Any = None) -> Tensor:
        """to(dtype), to(device[, dtype]), to(other): conversions go through the copy table."""
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, D.dtype):
                dtype = a
            elif isinstance(a, str | device_type | int) and not isinstance(a, bool):
                device = a
            elif isinstance(a, bool):
                pass  # non_blocking: copies through the copy table are synchronous
            else:
                raise TypeError(f"to() received an invalid argument {a!r}")
        dev = self.device if device is None else to_device(device)
        dt = self._dtype if dtype is None else D.to_dtype(dtype)
        if memory_format is not None:
            from gputensor._ops.copying import convert_with_format
            return convert_with_format(self, dt, dev, copy, memory_format)
        if dev == self.device and dt is self._dtype and not copy:
            return self
        from gputensor._ops.copying import convert
        return convert(self, dt, dev)

    def cpu(self) -> Tensor:
        return self if self.is_cpu else self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        dev = to_device("cuda" if device is None else device)
        if dev.type != "cuda":
            raise RuntimeError(f"cuda() needs a CUDA device, got {dev}")
        return self.to(dev)

    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        from gputensor._legacy import tensor_type_name, to_legacy_type
        if dtype is None:
            return tensor_type_name(self)
        return to_legacy_type(self, dtype)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype, other.device)

    def double(self) -> Tensor:
        return self.to(D.float64)

    def float(self) -> Tensor:
        return self.to(D.float32)

    def half(self) -> Tensor:
        return self.to(D.float16)

    def bfloat16(self) -> Tensor:
        return self.to(D.bfloat16)

    def long(self) -> Tensor:
        return self.to(D.int64)

    def int(self) -> Tensor:
        return self.to(D.int32)

    def short(self) -> Tensor:
        return self.to(D.int16)

    def char(self) -> Tensor:
        return self.to(D.int8)

    def byte(self) -> Tensor:
        return self.to(D.uint8)

    def bool(self) -> Tensor:
        return self.to(D.bool)

    def cfloat(self) -> Tensor:
        return self.to(D.complex64)

    def cdouble(self) -> Tensor:
        return self.to(D.complex128)

    def pin_memory(self, device: Any = None) -> Tensor:
        """A copy in page-locked host memory (the CUDA runtime's pinned pool), which makes
        ``.cuda(non_blocking=True)`` asynchronous; a pinned tensor returns itself."""
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.type()}': only dense CPU tensors can be "
                               f"pinned")
        if self.is_pinned():
            return self
        src = self.contiguous()
        return Tensor._make(src._storage.pin_memory(), src._dtype, src._shape, src._stride,
                            src._offset)

    def is_pinned(self) -> bool:
        return self._storage.is_pinned()

    def record_stream(self, stream: Any) -> None:
        """Mark this CUDA tensor's memory as in use by ``stream``: when the tensor is freed,
        its block is not reused until the work queued on ``stream`` by then has completed
        (for tensors made on one stream and used on another), as PyTorch's."""
        from gputensor.cuda.streams import Stream

        if self.device.type != "cuda":
            raise RuntimeError(f"record_stream expects a CUDA tensor, got one on {self.device}")
        if not isinstance(stream, Stream):
            raise TypeError(f"record_stream(): argument 'stream' must be a "
                            f"gputensor.cuda.Stream, not {type(stream).__name__}")
        self._storage._buf.record_stream(stream.raw)

    def share_memory_(self) -> Tensor:
        self._storage.share_memory_()
        return self

    def is_shared(self) -> bool:
        return self._storage.is_shared()


device_type = device  # the class, for isinstance checks inside Tensor.to

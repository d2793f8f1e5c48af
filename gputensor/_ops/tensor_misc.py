"""Small Tensor methods and properties PyTorch has that are not ops of their own:

- predicates for devices and layouts gputensor has no backend for (``is_xla``, ``is_mkldnn``,
  ``is_nested``...; always False, as on PyTorch's CPU build) and ``is_inference()``;
- conversions to absent backends (``xpu``, ``ipu``, ``mtia``, ``to_mkldnn``), which raise;
- metadata (``output_nr``, ``name``, ``dim_order``, ``const_data_ptr``, the removed
  ``volatile``/``reinforce``), ``as_subclass`` and ``module_load``;
- ``grad_dtype`` (the engine casts a leaf's gradient to it) and ``smm``/``sspaddmm``;
- the deprecated out-of-place ``resize``/``resize_as`` and ``resize_as_`` with its
  ``memory_format``;
- the sparse-layout methods on a dense tensor, answering as PyTorch's strided backend does.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

from gputensor import _dtype as D
from gputensor import _memory_format as MF
from gputensor._tensor import Tensor
from gputensor.autograd import grad_mode
from gputensor.kernels.registry import TENSOR_METHODS

from ._core import tensor_method


# -- devices and layouts this runtime has no backend for ----------------------------------------
def _never(name: str) -> None:
    def get(self: Tensor) -> bool:
        return False

    get.__name__ = name
    get.__doc__ = f"``{name}``: always False (gputensor has no such device or layout)."
    tensor_method(name, prop=True)(get)


# (is_sparse_csr is True only on a sparse_csr tensor, whose class overrides it:
# gputensor/sparse/compressed.py)
for _name in ("is_xla", "is_ipu", "is_maia", "is_mtia", "is_vulkan", "is_mkldnn", "is_nested",
              "is_sparse_csr"):
    _never(_name)


@tensor_method()
def is_inference(self: Tensor) -> bool:
    """Whether this tensor was made under ``gt.inference_mode()`` (its storage was allocated
    there, so its views are inference tensors too, and a normal tensor's views are not)."""
    if self._sparse:
        return is_inference(self._values_t)
    return getattr(self._storage, "_inference", False)


@tensor_method()
def is_distributed(self: Tensor) -> bool:
    """Always False: PyTorch's legacy flag for THD tensors, which no longer exist."""
    return False


@tensor_method()
def xpu(self: Tensor, device: Any = None, non_blocking: bool = False,
        memory_format: Any = MF.preserve_format) -> Tensor:
    """Raises: gputensor has no XPU backend (PyTorch's build without one answers the same)."""
    if device is not None:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    raise AssertionError("Torch not compiled with XPU enabled")


@tensor_method()
def ipu(self: Tensor, device: Any = None, non_blocking: bool = False,
        memory_format: Any = MF.preserve_format) -> Tensor:
    """Raises: gputensor has no IPU backend."""
    raise RuntimeError("PyTorch is not linked with support for ipu devices")


@tensor_method()
def mtia(self: Tensor, device: Any = None, non_blocking: bool = False,
         memory_format: Any = MF.preserve_format) -> Tensor:
    """Raises: gputensor has no MTIA backend."""
    raise AssertionError("Torch not compiled with MTIA enabled")


_MKLDNN_DTYPES = (D.float32, D.bfloat16, D.float16, D.uint8, D.int8)


@tensor_method()
def to_mkldnn(self: Tensor, dtype: Any = None) -> Tensor:
    """Raises: gputensor has no mkldnn (oneDNN) layout to convert to. PyTorch's CPU build has
    one; its dtype check runs first here too, so a wrong dtype reports the same error."""
    if self._dtype not in _MKLDNN_DTYPES:
        raise RuntimeError("dense_to_mkldnn expects float, bfloat16, half, uint8, int8 tensor "
                           "input")
    raise RuntimeError(f"to_mkldnn: gputensor has no mkldnn (oneDNN) layout; a "
                       f"{self._dtype} tensor on {self.device} stays strided (use it as it is, "
                       f"or PyTorch itself for mkldnn tensors)")


# -- metadata -------------------------------------------------------------------------------------
def _volatile_get(self: Tensor) -> bool:
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


def _volatile_set(self: Tensor, value: Any) -> None:
    warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                  "instead.", UserWarning, stacklevel=2)


def _settable(name: str, get: Callable[[Tensor], Any], set: Callable[[Tensor, Any], None]) -> None:
    """Declare ``Tensor.<name>`` as a property with a setter."""
    tensor_method(name, prop=True)(get)
    TENSOR_METHODS[name] = TENSOR_METHODS[name].setter(set)


# PyTorch keeps the removed flag as a property that warns on read and on write.
_settable("volatile", _volatile_get, _volatile_set)


def _grad_dtype_get(self: Tensor) -> D.dtype | None:
    """The dtype the engine casts this leaf's incoming gradients to (default: its dtype;
    None: any dtype, no cast)."""
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be accessed on leaf tensors.")
    return self.__dict__.get("_grad_dtype", self._dtype)


def _grad_dtype_set(self: Tensor, value: D.dtype | None) -> None:
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be set on leaf tensors.")
    if value is not None and not isinstance(value, D.dtype):
        raise RuntimeError(f"grad_dtype must be a torch.dtype or None, but got "
                           f"{type(value).__name__}")
    g = self.grad
    if g is not None and value is not None and g._dtype is not value:
        from .tensor_set import C_NAMES
        raise RuntimeError(f"Cannot set grad_dtype to '{value.legacy_name}' because there is "
                           f"already a gradient with dtype '{C_NAMES[g._dtype]}'. Please clear "
                           f"the gradient (.grad = None) before changing grad_dtype, or ensure "
                           f"the new grad_dtype matches the existing gradient's dtype.")
    self.__dict__["_grad_dtype"] = value   # autograd/engine.py casts a leaf's gradient to it


_settable("grad_dtype", _grad_dtype_get, _grad_dtype_set)


@tensor_method(prop=True)
def output_nr(self: Tensor) -> int:
    """Which output of its ``grad_fn`` this tensor is (0 for a leaf)."""
    return self._output_nr


@tensor_method(prop=True)
def name(self: Tensor) -> None:
    """None: the name a traced graph gives a value; eager tensors have none."""
    return None


@tensor_method()
def const_data_ptr(self: Tensor) -> int:
    """The address of the first element (``data_ptr()``, for read-only use)."""
    return self.data_ptr()


@tensor_method()
def reinforce(self: Tensor, reward: Any) -> None:
    """Removed from PyTorch: raises, pointing to ``torch.distributions``."""
    raise RuntimeError(
        "reinforce() was removed.\nUse torch.distributions instead.\n"
        "See https://pytorch.org/docs/main/distributions.html\n\nInstead of:\n\n"
        "probs = policy_network(state)\naction = probs.multinomial()\n"
        "next_state, reward = env.step(action)\naction.reinforce(reward)\naction.backward()\n\n"
        "Use:\n\nprobs = policy_network(state)\n"
        "# NOTE: categorical is equivalent to what used to be called multinomial\n"
        "m = torch.distributions.Categorical(probs)\naction = m.sample()\n"
        "next_state, reward = env.step(action)\nloss = -m.log_prob(action) * reward\n"
        "loss.backward()\n")


def _dim_order_compare(shape: tuple[int, ...], strides: tuple[int, ...], a: int, b: int) -> int:
    # PyTorch's should_swap (torch._prims_common): 1 when dim a is laid out inside dim b.
    def ge(x: int, y: int) -> bool:
        if y == 0:
            return True
        if x == 0:
            return False
        return x >= y or x % y == 0

    sa, sb = strides[a], strides[b]
    if sa == 0 or sb == 0:
        return 0
    if sa == sb:
        return 0 if ge(shape[b], shape[a]) else 1
    if ge(sb, sa):
        return -1
    return 1 if ge(sa, sb) else 0


def _logical_to_physical(self: Tensor, check: bool) -> tuple[list[int], bool]:
    shape, strides, nd = self._shape, self._stride, len(self._shape)
    if nd <= 1:
        return list(range(nd)), False
    contig = self.is_contiguous()
    cl = self.is_contiguous(MF.channels_last) if nd == 4 else False
    if contig and not cl:
        return list(range(nd)), False
    if cl and not contig:
        return [0, *range(2, nd), 1], False
    perm = list(reversed(range(nd)))
    for i in range(1, nd):   # insertion sort, innermost first, that tolerates ties
        d1 = i
        for d0 in reversed(range(i)):
            c = _dim_order_compare(shape, strides, perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    ambiguous = check and any(_dim_order_compare(shape, strides, perm[i], perm[i + 1]) != -1
                              for i in range(nd - 1))
    return list(reversed(perm)), ambiguous


_AMBIGUOUS = ("The tensor does not have unique dim order, or cannot map to exact one of the "
              "given memory formats.")


@tensor_method()
def dim_order(self: Tensor, *, ambiguity_check: bool | list = False) -> tuple[int, ...]:
    """The dims from outermost to innermost in memory. ``ambiguity_check=True`` raises when
    several orders fit (a size-1 dim, equal strides); a list of memory formats accepts an
    ambiguous tensor that is in exactly one of them."""
    if self._sparse:
        raise AttributeError(f"Can't get dim order on sparse type: {self.type()} Use "
                             f"Tensor.to_dense() to convert to a dense tensor first.")
    if not isinstance(ambiguity_check, bool) and not (
            isinstance(ambiguity_check, list)
            and all(isinstance(f, MF.memory_format) for f in ambiguity_check)):
        raise TypeError("The ambiguity_check argument must be a bool or a list of memory "
                        "formats.")
    formats = ambiguity_check if isinstance(ambiguity_check, list) else []
    check = ambiguity_check if isinstance(ambiguity_check, bool) else True
    if check:
        strides = self._stride
        multiple = any(a == b for a, b in itertools.pairwise(strides)) or 1 in self._shape
        if multiple and sum(self.is_contiguous(f) for f in formats) != 1:
            raise RuntimeError(_AMBIGUOUS)
    perm, ambiguous = _logical_to_physical(self, bool(ambiguity_check))
    if ambiguous:
        raise RuntimeError("The tensor does not have unique dim order.")
    return tuple(perm)


@tensor_method()
def as_subclass(self: Tensor, cls: type) -> Tensor:
    """This tensor's data as an instance of ``cls`` (a ``gt.Tensor`` subclass), sharing its
    storage and attached to its graph (an alias, as PyTorch's)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from "
                        "Tensor is not possible. Make sure your class inherits from Tensor.")
    if self._sparse:
        from gputensor.sparse._tensor import not_supported
        raise not_supported("as_subclass", self.device.type)
    out = self.view_as(self) if self._requires_grad and grad_mode.is_grad_enabled() \
        else self.detach()
    sub = cls._make(out._storage, out._dtype, out._shape, out._stride, out._offset)
    sub._base = self if self._base is None else self._base
    if out._requires_grad:
        sub.grad_fn, sub._output_nr, sub._requires_grad = out.grad_fn, out._output_nr, True
    elif self._requires_grad:   # under no_grad PyTorch's alias is a leaf that requires grad
        sub._requires_grad = True
    return sub


@tensor_method()
def module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """How ``nn.Module.load_state_dict`` turns the state-dict value ``other`` into the new
    value of this parameter or buffer: ``other.detach()`` when assigning, else this tensor
    with ``other`` copied in, detached."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


# -- resize forms ---------------------------------------------------------------------------------
def _resize_out_of_place(self: Tensor, sizes: tuple) -> Tensor:
    # torch.autograd._functions.Resize: a reshape that must keep the element count; the
    # result shares this tensor's memory when it is contiguous.
    numel = 1
    for s in sizes:
        numel = numel * s
    if numel != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, sizes))} ({numel} elements in total), but "
            f"the given tensor has a size of {'x'.join(map(str, self._shape))} "
            f"({self.numel()} elements). autograd's resize can only change the shape of a given "
            f"tensor, while preserving the number of elements. ")
    return self.contiguous().view(*sizes)


@tensor_method()
def resize(self: Tensor, *sizes: int) -> Tensor:
    """Deprecated: a reshape to ``sizes`` with the same number of elements (warns)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resize_out_of_place(self, sizes)


@tensor_method()
def resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Deprecated: ``resize(*tensor.size())`` (warns)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resize_out_of_place(self, tuple(tensor.size()))


@tensor_method()
def resize_as_(self: Tensor, the_template: Tensor, *, memory_format: Any = None) -> Tensor:
    """Resize in place to ``the_template``'s size: row-major strides by default, or
    ``memory_format``'s (preserve_format takes the template's suggested format)."""
    # (A sparse self has its own, gputensor/sparse/_resize.py.)
    self.resize_(*the_template._shape)
    if memory_format is None:
        return self
    fmt = MF.check(memory_format, "resize_as_")
    if fmt is MF.preserve_format:
        fmt = MF.contiguous_format if the_template._sparse else \
            MF.suggested_format(the_template._shape, the_template._stride)
    self._stride = MF.format_strides(self._shape, fmt)
    return self


@tensor_method()
def resize_as_sparse_(self: Tensor, the_template: Tensor) -> Tensor:
    """Sparse only (``gputensor.sparse``): a dense tensor has no such kernel."""
    if the_template._sparse:
        raise RuntimeError("resize_as_sparse_: self must be a sparse_coo tensor, got a strided "
                           "one")
    raise no_kernel("resize_as_sparse_", self, "[SparseCPU, SparseCUDA]")


# -- sparse products (gputensor/sparse/_products.py; a dense self raises there) --------------------
@tensor_method()
def smm(self: Tensor, mat2: Tensor) -> Tensor:
    """``gt.smm(self, mat2)``: sparse ``self`` @ dense ``mat2`` as a sparse tensor."""
    from gputensor.sparse._products import smm as _smm
    return _smm(self, mat2)


@tensor_method()
def sspaddmm(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1,
             alpha: Any = 1) -> Tensor:
    """``gt.sspaddmm(self, mat1, mat2)``: ``beta * self + alpha * mat1 @ mat2``, sparse."""
    from gputensor.sparse._products import sspaddmm as _sspaddmm
    return _sspaddmm(self, mat1, mat2, beta=beta, alpha=alpha)


# -- sparse-layout methods on a dense tensor -------------------------------------------------------
def no_kernel(op_name: str, self: Tensor, backends: str) -> NotImplementedError:
    """PyTorch's dispatcher error for an op with no kernel for ``self``'s backend."""
    backend = "CUDA" if self.device.type == "cuda" else "CPU"
    return NotImplementedError(
        f"Could not run 'aten::{op_name}' with arguments from the '{backend}' backend. This "
        f"could be because the operator doesn't exist for this backend. 'aten::{op_name}' is "
        f"only available for these backends: {backends}.")


def _layout_error(name: str, what: str) -> Callable[[Tensor], Any]:
    def method(self: Tensor) -> Any:
        raise RuntimeError(f"{name} expected {what} layout but got Strided")

    method.__name__ = name
    method.__doc__ = "Sparse only: a dense tensor raises (PyTorch's message)."
    return method


tensor_method("values")(_layout_error("values", "sparse tensor"))
tensor_method("indices")(_layout_error("indices", "sparse coordinate tensor"))
tensor_method("coalesce")(_layout_error("coalesce", "sparse coordinate tensor"))
tensor_method("is_coalesced")(_layout_error("is_coalesced", "sparse coordinate tensor"))


@tensor_method()
def sparse_dim(self: Tensor) -> int:
    """0: a strided tensor has no sparse dims."""
    return 0


@tensor_method()
def dense_dim(self: Tensor) -> int:
    """All of a strided tensor's dims are dense."""
    return self.dim()


@tensor_method()
def to_sparse_coo(self: Tensor) -> Tensor:
    """``to_sparse()``: a sparse COO copy (a sparse tensor is returned as it is)."""
    return self.to_sparse()


@tensor_method()
def sparse_resize_(self: Tensor, size: Any, sparse_dim: int, dense_dim: int) -> Tensor:
    """Sparse only (``gputensor.sparse``): a dense tensor has no such kernel."""
    raise no_kernel("sparse_resize_", self, "[SparseCPU, SparseCUDA]")


@tensor_method()
def sparse_resize_and_clear_(self: Tensor, size: Any, sparse_dim: int,
                             dense_dim: int) -> Tensor:
    """Sparse only (``gputensor.sparse``): a dense tensor has no such kernel."""
    raise no_kernel("sparse_resize_and_clear_", self, "[SparseCPU, SparseCUDA]")


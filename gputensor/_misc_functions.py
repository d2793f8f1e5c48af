"""``torch.*`` functions with no op of their own: the predicates over a tensor
(``is_inference``, ``is_distributed``, ``is_vulkan_available``), ``resize_as_``, the memory
wrappers (``frombuffer``, ``from_file``), the deprecated ``set_default_tensor_type`` and the
sparse-result products with their legacy aliases (``smm``, ``sspaddmm``/``saddmm``,
``hspmm``/``hsmm``; ``spmm``/``dsmm`` are ``mm``) and ``indices_copy``/``values_copy``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from gputensor import _device
from gputensor import _dtype as D
from gputensor import _memory_format as MF
from gputensor._buffers import from_file, frombuffer
from gputensor._tensor import Tensor


def _check_tensor(name: str, input: Any) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")


def is_inference(input: Tensor) -> bool:
    """``input.is_inference()``: whether it was made under ``gt.inference_mode()``."""
    _check_tensor("is_inference", input)
    return input.is_inference()


def is_distributed(input: Tensor) -> bool:
    """``input.is_distributed()``: always False."""
    _check_tensor("is_distributed", input)
    return input.is_distributed()


def is_vulkan_available() -> bool:
    """False: gputensor has no Vulkan backend."""
    return False


def resize_as_(input: Tensor, the_template: Tensor, *, memory_format: Any = None) -> Tensor:
    """``input.resize_as_(the_template)``."""
    _check_tensor("resize_as_", input)
    return input.resize_as_(the_template, memory_format=memory_format)


def _parts_copy(name: str) -> Callable[..., Tensor]:
    def fn(input: Tensor, *, out: Tensor | None = None) -> Tensor:
        _check_tensor(f"{name}_copy", input)
        part = getattr(input, name)()   # a strided input raises PyTorch's layout error here
        copied = part.clone(memory_format=MF.contiguous_format)
        if out is None:
            return copied
        return out.resize_(copied.shape).copy_(copied)

    fn.__name__ = fn.__qualname__ = f"{name}_copy"
    fn.__doc__ = (f"``input.{name}()`` of a sparse tensor in new memory. (PyTorch 2.13's build "
                  f"has no sparse kernel for it and raises; this follows its documentation.)")
    return fn


# -- set_default_tensor_type ----------------------------------------------------------------------
_warned_tensor_type = False
_device_from_tensor_type = False   # whether a CUDA tensor type set the default device


def _resolve_type(t: Any) -> Any:
    import importlib
    parts = t.split(".")
    if parts[0] == "torch":   # programs name PyTorch's module; gputensor stands in for it
        parts[0] = "gputensor"
    obj: Any = importlib.import_module(parts[0])
    for i, name in enumerate(parts[1:], 1):
        if not hasattr(obj, name):
            try:
                importlib.import_module(".".join(parts[:i + 1]))
            except ImportError:
                raise AttributeError(f"module '{'.'.join(parts[:i])}' has no attribute "
                                     f"'{name}'") from None
        obj = getattr(obj, name)
    return obj


def set_default_tensor_type(t: type | str, /) -> None:
    """Deprecated: make ``t`` (a floating legacy type such as ``gt.DoubleTensor``, or its name)
    the default: its dtype becomes the default dtype, and a CUDA type makes CUDA the default
    device (a CPU type after one returns it to the CPU)."""
    global _warned_tensor_type, _device_from_tensor_type
    from gputensor._legacy import _LegacyTensorType
    if isinstance(t, str):
        t = _resolve_type(t)
    if not _warned_tensor_type:
        _warned_tensor_type = True
        warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please "
                      "use torch.set_default_dtype() and torch.set_default_device() as "
                      "alternatives.", UserWarning, stacklevel=2)
    if not isinstance(t, _LegacyTensorType):
        raise TypeError("invalid type object: only floating-point types are supported as the "
                        "default type")
    cuda = t.backend.device_type == "cuda"
    if cuda:
        import gputensor.cuda as gcuda
        if not gcuda.is_available():
            raise TypeError(f"type torch.cuda.{t.__name__} not available. Torch not compiled "
                            f"with CUDA enabled.")
    if t.backend.layout_name != "strided":
        raise TypeError("only dense types are supported as the default type")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(t.dtype)
    if cuda:
        _device.set_default_device("cuda")
        _device_from_tensor_type = True
    elif _device_from_tensor_type:
        _device.set_default_device("cpu")
        _device_from_tensor_type = False


# -- sparse-result products -----------------------------------------------------------------------
def _mm(name: str) -> Callable[..., Tensor]:
    def fn(input: Tensor, mat2: Tensor) -> Tensor:
        """``torch.mm`` under its legacy sparse name."""
        from gputensor import mm
        return mm(input, mat2)

    fn.__name__ = fn.__qualname__ = name
    return fn


def functions() -> dict[str, Callable[..., Any]]:
    """name -> function, for the gputensor namespace."""
    from gputensor.sparse import _products
    out: dict[str, Callable[..., Any]] = {
        "is_inference": is_inference, "is_distributed": is_distributed,
        "is_vulkan_available": is_vulkan_available, "resize_as_": resize_as_,
        "frombuffer": frombuffer, "from_file": from_file,
        "set_default_tensor_type": set_default_tensor_type,
        "smm": _products.smm, "sspaddmm": _products.sspaddmm, "saddmm": _products.sspaddmm,
        "hspmm": _products.hspmm, "hsmm": _products.hspmm,
    }
    out.update({n: _mm(n) for n in ("spmm", "dsmm")})
    out.update({f"{n}_copy": _parts_copy(n) for n in ("indices", "values")})
    return out

"""Lazy layers: the input size is read from the first input (torch.nn's LazyLinear,
LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d, LazyInstanceNorm1d/2d/3d).

Until then the layer holds ``UninitializedParameter``/``UninitializedBuffer`` placeholders. A
forward pre-hook materialises them in place (the same Parameter objects, so an optimizer made
before the first call keeps working), runs the layer's ``reset_parameters`` and turns the
module into its ordinary class (``cls_to_become``), as PyTorch's ``LazyModuleMixin`` does.
Loading a state_dict into a lazy layer materialises each placeholder with the saved shape.
"""

from __future__ import annotations

import warnings
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn.parameter import Parameter

from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]


def _adopt(t: Tensor, shape: tuple[int, ...], device: Any, dtype: Any) -> None:
    """Give ``t`` fresh (uninitialised) storage of ``shape``, in place."""
    fresh = gt.empty(shape, device=device if device is not None else t.device,
                     dtype=dtype if dtype is not None else t.dtype)
    t._storage, t._shape, t._stride, t._offset = (fresh._storage, fresh._shape, fresh._stride,
                                                 fresh._offset)
    t._np = t._np_buf = None


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet; ``materialize(shape)`` makes it a Parameter
    (the same object)."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device: Any = None,
                dtype: Any = None) -> UninitializedParameter:
        return super().__new__(cls, gt.empty(0, device=device, dtype=dtype), requires_grad)

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        _adopt(self, tuple(shape), device, dtype)
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return "<UninitializedParameter>"


class UninitializedBuffer(Tensor):
    """A buffer whose shape is not known yet; ``materialize(shape)`` makes it a plain tensor
    (the same object)."""

    __slots__ = ()

    def __new__(cls, requires_grad: bool = False, device: Any = None,
                dtype: Any = None) -> UninitializedBuffer:
        data = gt.empty(0, device=device, dtype=dtype)
        return cls._make(data._storage, data._dtype, data._shape, data._stride, data._offset)

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        _adopt(self, tuple(shape), device, dtype)
        self.__class__ = Tensor

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"


def _is_lazy(t: Any) -> bool:
    return isinstance(t, UninitializedParameter | UninitializedBuffer)


class LazyModuleMixin:
    """Infers parameter shapes from the first input, then becomes ``cls_to_become``."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._lazy_hook = self.register_forward_pre_hook(_infer_parameters)  # type: ignore
        warnings.warn("Lazy modules are a new feature under heavy development so changes to "
                      "the API or functionality can happen at any moment.", stacklevel=3)

    def has_uninitialized_params(self) -> bool:
        tensors = [*self._parameters.values(), *self._buffers.values()]  # type: ignore
        return any(_is_lazy(t) for t in tensors)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        for store in (self._parameters, self._buffers):  # type: ignore[attr-defined]
            for name, t in store.items():
                key = prefix + name
                if _is_lazy(t) and key in state_dict:
                    with gt.no_grad():
                        t.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata,  # type: ignore
                                      strict, missing_keys, unexpected_keys, error_msgs)
        if not self.has_uninitialized_params():
            self._become()

    def _sizes_from_params(self) -> None:
        """Set the size attributes from the materialised tensors (after a state_dict load)."""

    def _become(self) -> None:
        self._sizes_from_params()
        hook = getattr(self, "_lazy_hook", None)
        if hook is not None:
            hook.remove()
            self._lazy_hook = None
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params():
            super().reset_parameters()  # type: ignore[misc]

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        """A move or cast before the first input moves the placeholders (they stay lazy and
        materialise on the new device, in the new dtype)."""
        lazy = {name: (store, t) for store in (self._parameters, self._buffers)  # type: ignore
                for name, t in store.items() if _is_lazy(t)}
        out = super()._apply(fn, recurse)  # type: ignore[misc]
        for name, (store, t) in lazy.items():
            probe = fn(gt.empty(0, device=t.device, dtype=t.dtype))  # where fn sends it
            if isinstance(t, UninitializedParameter):
                store[name] = t  # the same object: optimizers may hold it already
                _adopt(t, (0,), probe.device, probe.dtype)
                t.__class__ = UninitializedParameter
            else:
                store[name] = UninitializedBuffer(device=probe.device, dtype=probe.dtype)
        return out


def _infer_parameters(module: Any, args: tuple) -> None:
    with gt.no_grad():
        module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._become()


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose ``in_features`` is the first input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, 0, False, device=device, dtype=dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _sizes_from_params(self) -> None:
        self.in_features = self.weight.shape[1]

    def initialize_parameters(self, input: Tensor) -> None:
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """The conv layers: ``in_channels`` from the input's channel dim (dim 0 unbatched)."""

    _dims = 2

    def _lazy_init(self, out_channels: int, bias: bool, device: Any, dtype: Any) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _sizes_from_params(self) -> None:
        w = self.weight.shape
        self.in_channels = w[0] if self.transposed else w[1] * self.groups

    def initialize_parameters(self, input: Tensor, *args: Any) -> None:
        if not self.has_uninitialized_params():
            return
        unbatched = input.dim() == self._dims + 1
        self.in_channels = input.shape[0 if unbatched else 1]
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        shape = (self.in_channels, self.out_channels // self.groups) if self.transposed else \
            (self.out_channels, self.in_channels // self.groups)
        self.weight.materialize((*shape, *self.kernel_size))
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


class _LazyConv(_LazyConvMixin):
    """The LazyConv constructors: the conv's, without in_channels."""

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    """The LazyConvTranspose constructors: the transposed conv's, without in_channels."""

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    cls_to_become = Conv1d
    _dims = 1


class LazyConv2d(_LazyConv, Conv2d):
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    cls_to_become = Conv3d
    _dims = 3


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    cls_to_become = ConvTranspose1d
    _dims = 1


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    cls_to_become = ConvTranspose3d
    _dims = 3


class _LazyNormMixin(LazyModuleMixin):
    """The norms: ``num_features`` from the input's channel dim."""

    _channel_dim_unbatched: int | None = None

    def _lazy_init(self, affine: bool, track_running_stats: bool, device: Any,
                   dtype: Any) -> None:
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = gt.tensor(0, dtype=gt.int64, device=device)

    def _sizes_from_params(self) -> None:
        for name in ("weight", "running_mean"):
            t = getattr(self, name, None)
            if t is not None:
                self.num_features = t.shape[0]
                return

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        unbatched = self._channel_dim_unbatched is not None and \
            input.dim() == self._unbatched_ndim
        self.num_features = input.shape[0 if unbatched else 1]
        for name in ("weight", "bias", "running_mean", "running_var"):
            t = getattr(self, name, None)
            if _is_lazy(t):
                t.materialize((self.num_features,))
        self.reset_parameters()


class _LazyBatchNorm(_LazyNormMixin):
    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        self._lazy_init(affine, track_running_stats, device, dtype)


class LazyBatchNorm1d(_LazyBatchNorm, BatchNorm1d):
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm, BatchNorm2d):
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm, BatchNorm3d):
    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNormMixin):
    _channel_dim_unbatched = 0

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        self._lazy_init(affine, track_running_stats, device, dtype)

    @property
    def _unbatched_ndim(self) -> int:
        return self._batched_dims - 1


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    cls_to_become = InstanceNorm3d

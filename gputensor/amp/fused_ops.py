"""GradScaler's fused ops, as ``torch._amp_foreach_non_finite_check_and_unscale_`` and
``torch._amp_update_scale_``: argument checks with PyTorch's messages, then the backend kernels
(kernels/cpu/amp.py, kernels/cuda/ops/amp.py). The unscale runs one kernel per dtype of the
list: one launch per (device, dtype) group when GradScaler groups by device.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputensor import _dtype as D
from gputensor._ops._core import kernel
from gputensor._tensor import Tensor

_FLOATS = (D.float16, D.bfloat16, D.float32, D.float64)


def _kind(t: Tensor) -> str:
    return "CUDA" if t._storage.device.type == "cuda" else "CPU"


def _check_scalars(kind: str, *named: tuple[Tensor, str]) -> None:
    """PyTorch's checks of the one-element float32 operands, in its order."""
    for t, name in named:
        if _kind(t) != kind:
            raise RuntimeError(f"{name} must be a {kind} tensor.")
    for t, name in named:
        if t.numel() != 1:
            raise RuntimeError(f"{name} must be a 1-element tensor.")
    for t, name in named:
        if t._dtype is not D.float32:
            raise RuntimeError(f"{name} must be a float tensor.")


def _amp_foreach_non_finite_check_and_unscale_(self: Sequence[Tensor], found_inf: Tensor,
                                               inv_scale: Tensor) -> None:
    """Multiply every tensor of ``self`` by ``inv_scale`` in place (unless it is exactly 1)
    and set the one-element float32 ``found_inf`` to 1.0 if any element was inf/NaN;
    pre-zeroing found_inf is the caller's job."""
    grads = list(self)
    if not grads:
        return
    kind = "CUDA" if any(_kind(t) == "CUDA" for t in (*grads, found_inf, inv_scale)) else "CPU"
    _check_scalars(kind, (inv_scale, "inv_scale"), (found_inf, "found_inf"))
    dev = found_inf._storage.device
    groups: dict[D.dtype, list[Tensor]] = {}
    for t in grads:
        if not isinstance(t, Tensor):
            raise TypeError(f"_amp_foreach_non_finite_check_and_unscale_(): argument 'self' "
                            f"must be tuple of Tensors, not {type(t).__name__}")
        if _kind(t) != kind:
            raise RuntimeError(f"one of scaled_grads was not a {kind} tensor.")
        if t.is_sparse or t.layout.name != "strided":
            raise RuntimeError("one of scaled_grads was not a strided tensor.")
        if t._storage.device != dev or inv_scale._storage.device != dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {dev} and {t.device}!")
        if t._dtype not in _FLOATS:
            op = f"_amp_foreach_non_finite_check_and_unscale_{kind.lower()}"
            raise NotImplementedError(f'"{op}" not implemented for '
                                      f"'{t._dtype.legacy_name}'")
        groups.setdefault(t._dtype, []).append(t)
    fn = kernel(found_inf, "_amp_foreach_non_finite_check_and_unscale_")
    for group in groups.values():
        fn(group, found_inf, inv_scale)
    for t in grads:  # written in place
        t._storage._version += 1
    found_inf._storage._version += 1


def _amp_update_scale_(self: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                       scale_growth_factor: float, scale_backoff_factor: float,
                       growth_interval: int) -> Tensor:
    """PyTorch's dynamic loss-scale step on the device, in place: after an overflow
    (found_inf != 0) scale *= backoff and the tracker resets; otherwise the tracker counts the
    clean step and every ``growth_interval`` of them scale *= growth (unless that overflows
    float32). Returns ``self`` (the scale)."""
    kind = "CUDA" if any(_kind(t) == "CUDA" for t in (self, growth_tracker, found_inf)) \
        else "CPU"
    if _kind(growth_tracker) != kind:
        raise RuntimeError(f"growth_tracker must be a {kind} tensor.")
    if _kind(self) != kind:
        raise RuntimeError(f"current_scale must be a {kind} tensor.")
    if _kind(found_inf) != kind:
        raise RuntimeError(f"found_inf must be a {kind} tensor.")
    for t, name in ((growth_tracker, "growth_tracker"), (self, "current_scale"),
                    (found_inf, "found_inf")):
        if t.numel() != 1:
            raise RuntimeError(f"{name} must be a 1-element tensor.")
    for t, name, dt, word in ((growth_tracker, "growth_tracker", D.int32, "an int"),
                              (self, "current_scale", D.float32, "a float"),
                              (found_inf, "found_inf", D.float32, "a float")):
        if t._dtype is not dt:
            raise RuntimeError(f"{name} must be {word} tensor.")
    dev = self._storage.device
    for t in (growth_tracker, found_inf):
        if t._storage.device != dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {dev} and {t.device}!")
    kernel(self, "_amp_update_scale_")(self, growth_tracker, found_inf,
                                       float(scale_growth_factor), float(scale_backoff_factor),
                                       int(growth_interval))
    self._storage._version += 1
    growth_tracker._storage._version += 1
    return self

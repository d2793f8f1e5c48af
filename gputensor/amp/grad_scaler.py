"""GradScaler: dynamic loss scaling for float16 training (PyTorch's ``torch.amp.GradScaler``).

Small float16 gradients underflow to zero; multiplying the loss by a large scale keeps them
representable. ``scale(loss)`` multiplies, ``unscale_(optimizer)`` divides the gradients back
and records whether any is inf/NaN, ``step(optimizer)`` skips the update when one was, and
``update()`` halves the scale after an overflow and doubles it after ``growth_interval`` clean
steps. The scale, the growth tracker and the found-inf flags stay on the device: only
``step`` reads one flag per device back, as PyTorch does.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable
from enum import Enum
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """``GradScaler(device='cuda', init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = str(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device.startswith("cuda"):
            from gputensor import cuda

            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not "
                              "available.  Disabling.", stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._scale: Tensor | None = None  # created lazily on the first scaled tensor's device
        self._growth_tracker: Tensor | None = None
        self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(
            _refresh_per_optimizer_state)

    # -- scaling ------------------------------------------------------------------------------
    def _lazy_init(self, dev: Any) -> None:
        self._scale = gt.full((), self._init_scale, dtype=D.float32, device=dev)
        self._growth_tracker = gt.full((), self._init_growth_tracker, dtype=D.int32,
                                       device=dev)

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or nested lists/tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(outputs.device, non_blocking=True)
        if isinstance(outputs, list | tuple):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, tuple) else scaled
        if isinstance(outputs, Iterable):
            return map(self.scale, outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _unscale_grads_(self, optimizer: Any, inv_scale: Tensor, found_inf: Tensor,
                        allow_fp16: bool) -> dict[Any, Tensor]:
        per_device: dict[Any, Tensor] = {}
        per_device_inv: dict[Any, Tensor] = {}
        dense: dict[Any, list[Tensor]] = defaultdict(list)

        def replicas(dev: Any) -> tuple[Tensor, Tensor]:
            flag = per_device.get(dev)
            if flag is None:
                flag = per_device[dev] = found_inf.to(dev).clone()
                per_device_inv[dev] = inv_scale.to(dev)
            return flag, per_device_inv[dev]

        with gt.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype is D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    replicas(g.device)
                    if not g.is_sparse:
                        dense[g.device].append(g)
                        continue
                    if g.dtype is D.float16:
                        g = p.grad = g.coalesce()
                    vals = g._values()
                    flag, inv = replicas(g.device)
                    # Sparse values: one reduction each sets the device's flag.
                    flag.copy_(gt.maximum(flag, (~gt.isfinite(vals)).any().to(D.float32)))
                    vals.mul_(inv.to(vals.dtype if vals.is_floating_point()
                                     or vals.is_complex() else D.float32))
            # Dense gradients: one fused kernel per (device, dtype), as PyTorch's.
            for dev, grads in dense.items():
                flag, inv = replicas(dev)
                gt._amp_foreach_non_finite_check_and_unscale_(grads, flag, inv)
        return per_device

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale (once per step), recording inf/NaN."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = gt.zeros((), dtype=D.float32, device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf,
                                                             False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)`` after unscaling, unless a gradient was inf/NaN
        (then the step is skipped and None returned)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(float(v.item()) for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adjust the scale for the next iteration (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale.fill_(new_scale)
            elif isinstance(new_scale, Tensor) and new_scale.numel() == 1 and \
                    new_scale.dtype is D.float32 and not new_scale.requires_grad:
                self._scale.copy_(new_scale)
            else:
                raise ValueError("new_scale should be a float or a 1-element "
                                 "torch.cuda.FloatTensor or torch.FloatTensor with "
                                 "requires_grad=False.")
        else:
            flags = [f.to(self._scale.device) for state in self._per_optimizer_states.values()
                     for f in state["found_inf_per_device"].values()]
            if not flags:
                raise AssertionError("No inf checks were recorded prior to update.")
            found = flags[0]
            for f in flags[1:]:
                found = found + f
            self._update_scale(found)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _update_scale(self, found_inf: Tensor) -> None:
        """PyTorch's ``_amp_update_scale_`` on the device (one kernel, no host read)."""
        gt._amp_update_scale_(self._scale, self._growth_tracker, found_inf,
                              self._growth_factor, self._backoff_factor, self._growth_interval)

    def _check_scale_growth_tracker(self, funcname: str) -> None:
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  This may indicate "
                                 f"your script did not use scaler.scale(loss or outputs) "
                                 f"earlier in the iteration.")

    # -- accessors and state ------------------------------------------------------------------
    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else \
            int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(self._init_growth_tracker)


class CudaGradScaler(GradScaler):
    """``gt.cuda.amp.GradScaler(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)`` (deprecated in PyTorch, still widely used)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)

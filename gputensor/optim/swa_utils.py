"""Stochastic Weight Averaging and EMA (``gt.optim.swa_utils``, as ``torch.optim.swa_utils``).

:class:`AveragedModel` keeps a copy of a model whose parameters (and, with ``use_buffers``,
buffers) are a running average of the model's; :func:`update_bn` recomputes BatchNorm
statistics for averaged weights; :class:`SWALR` anneals the lr to a constant SWA lr.
Results follow PyTorch's: on the CPU the default SWA average is PyTorch's per-tensor formula,
on CUDA its foreach ``lerp`` for float tensors (whose weight ``1 / (n + 1)`` is rounded to the
default dtype), and the per-tensor formula for integer buffers (which PyTorch's CUDA path
refuses).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any, Literal

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn import Module
from gputensor.nn.modules.batchnorm import _BatchNorm

from .lr_scheduler import LRScheduler, _check_optimizer, _per_group
from .optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]

ParamList = Sequence[Tensor]
MultiAvgFn = Callable[[ParamList, ParamList, "Tensor | int"], None]
AvgFn = Callable[[Tensor, Tensor, "Tensor | int"], Tensor]


def _is_float_or_complex(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAvgFn:
    """An in-place EMA over lists of tensors: ``ema = decay * ema + (1 - decay) * current``
    (a ``lerp`` for float/complex tensors, as PyTorch's foreach lerp)."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")

    def ema_update(ema_params: ParamList, current_params: ParamList, _: Tensor | int) -> None:
        with gt.no_grad():
            if _is_float_or_complex(ema_params[0]):
                for p_ema, p_model in zip(ema_params, current_params, strict=True):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_params, current_params, strict=True):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> MultiAvgFn:
    """An in-place equal-weight average over lists of tensors: ``avg += (cur - avg) / (n + 1)``
    as a ``lerp`` with weight ``1 / (n + 1)`` (float/complex tensors). Integer tensors are refused,
    as PyTorch's foreach ops refuse them."""

    def swa_update(averaged_params: ParamList, current_params: ParamList,
                   num_averaged: Tensor | int) -> None:
        with gt.no_grad():
            if _is_float_or_complex(averaged_params[0]):
                weight = 1 / (num_averaged + 1)
                # A tensor weight is passed to PyTorch's foreach lerp as a Scalar: its value,
                # already rounded to the default dtype.
                weight = weight.item() if isinstance(weight, Tensor) else weight
                for p_avg, p_model in zip(averaged_params, current_params, strict=True):
                    p_avg.lerp_(p_model, weight)
                return
            # PyTorch's foreach ops refuse integer tensors here: addcdiv for a tensor count
            # (AveragedModel's, so integer buffers with use_buffers=True end here), add with a
            # float alpha for an int count.
            if isinstance(num_averaged, Tensor):
                raise RuntimeError("Integer division with addcdiv is no longer supported: "
                                   "get_swa_multi_avg_fn cannot average integer tensors with "
                                   "a tensor count")
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number (get_swa_multi_avg_fn cannot average "
                               "integer tensors)")

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> AvgFn:
    """An EMA of one tensor, returned (not in place): ``decay * ema + (1 - decay) * current``."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Tensor | int,
                   ) -> Tensor:
        with gt.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> AvgFn:
    """An equal-weight average of one tensor, returned: ``avg + (cur - avg) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor,
                   num_averaged: Tensor | int) -> Tensor:
        with gt.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (moved to ``device`` if given) holding a running average of its
    parameters, updated by :meth:`update_parameters`.

    The first update copies the model; later ones apply ``avg_fn`` (per tensor, returning the
    new value) or ``multi_avg_fn`` (in place, over the tensors of one device and dtype), or by
    default the equal-weight SWA average. ``n_averaged`` (an int64 buffer) counts the updates.
    With ``use_buffers`` the buffers are averaged too; otherwise they are copied from the model
    on every update. ``forward`` calls the copy.
    """

    n_averaged: Tensor

    def __init__(self, model: Module, device: Any = None, avg_fn: AvgFn | None = None,
                 multi_avg_fn: MultiAvgFn | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", gt.tensor(0, dtype=gt.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters (and buffers, with ``use_buffers``) into the
        average."""
        if self.use_buffers:
            self_params = itertools.chain(self.module.parameters(), self.module.buffers())
            model_params = itertools.chain(model.parameters(), model.buffers())
        else:
            self_params, model_params = self.parameters(), model.parameters()
        averaged: list[Tensor] = []
        current: list[Tensor] = []
        n = self.n_averaged
        copy_param = bool(n.item() == 0)
        with gt.no_grad():
            # zip stops at the shorter list, as PyTorch's (strict=False) does.
            for p_avg, p_model in zip(self_params, model_params, strict=False):
                p_model_ = p_model.detach().to(p_avg.device)
                averaged.append(p_avg.detach())
                current.append(p_model_)
                if copy_param:
                    p_avg.detach().copy_(p_model_)
            if not copy_param:
                self._average(averaged, current)
            if not self.use_buffers:
                # Buffers that are not averaged follow the source model.
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.add_(1)

    def _average(self, averaged: list[Tensor], current: list[Tensor]) -> None:
        if self.avg_fn is not None and self.multi_avg_fn is None:
            for p_avg, p_model in zip(averaged, current, strict=True):
                n = self.n_averaged.to(p_avg.device)
                p_avg.copy_(self.avg_fn(p_avg, p_model, n))
            return
        groups: dict[tuple[Any, Any], tuple[list[Tensor], list[Tensor]]] = {}
        for p_avg, p_model in zip(averaged, current, strict=True):
            avg_list, cur_list = groups.setdefault((p_avg.device, p_avg.dtype), ([], []))
            avg_list.append(p_avg)
            cur_list.append(p_model)
        for (device, _), (avg_list, cur_list) in groups.items():
            n = self.n_averaged.to(device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(avg_list, cur_list, n)
            elif device.type == "cuda" and _is_float_or_complex(avg_list[0]):
                # PyTorch's default on devices with foreach kernels (whose integer branch
                # would refuse integer buffers: those take the per-tensor formula below).
                get_swa_multi_avg_fn()(avg_list, cur_list, n)
            else:
                avg_fn = get_swa_avg_fn()
                for p_avg, p_model in zip(avg_list, cur_list, strict=True):
                    p_avg.copy_(avg_fn(p_avg, p_model, n))


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the BatchNorm running statistics of ``model`` with one pass over ``loader``
    (batches are tensors, or lists/tuples whose first entry is the input), as a cumulative
    average: weights averaged by SWA never produced the statistics the layers hold."""
    momenta: dict[Module, float | None] = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):  # InstanceNorm is a _NormBase, not a _BatchNorm
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with gt.no_grad():
        for batch in loader:
            if isinstance(batch, list | tuple):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to ``swa_lr`` (one value, or one per group) over
    ``anneal_epochs`` epochs, by cosine (``"cos"``) or linear (``"linear"``) interpolation,
    then keeps it there. Chainable as PyTorch's: each step starts from the current lr, so it
    can take over from another scheduler."""

    def __init__(self, optimizer: Optimizer, swa_lr: float | list[float],
                 anneal_epochs: int = 10,
                 anneal_strategy: Literal["cos", "linear"] = "cos",
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: Any, swa_lr: Any, alpha: float) -> Any:
        """The lr the annealing started from, recovered from the current lr (so the schedule
        stays chainable)."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" \
            else self._linear_anneal

    def get_lr(self) -> list[Any]:
        self._warn_get_lr_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(groups, prev_lrs, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer and the anneal function (rebuilt on load)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)

"""SparseAdam: Adam for dense parameters whose gradients are sparse_coo tensors
(``nn.Embedding(sparse=True)``), updating only the rows (entries) the gradient has.

PyTorch's rule (torch/optim/_functional.py ``sparse_adam``) op for op: the gradient is
coalesced, the moments are read at its entries (``sparse_mask``), moved towards the gradient
there, and the parameter takes the bias-corrected step at those entries only. The reads are
gathers and the writes accumulating ``index_put_`` at the (unique) coalesced indices, so the
work is proportional to the gradient's entries, not to the parameter's size.
"""

from __future__ import annotations

import math
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import Optimizer, ParamsT, check_betas, check_lr, to_scalar


class SparseAdam(Optimizer):
    """Masked Adam for sparse gradients (PyTorch's ``torch.optim.SparseAdam``)."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False) -> None:
        check_lr(lr)
        if not 0.0 < to_scalar(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_betas(betas)
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize})
        sparse, complex_ = [], []
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([gi, pi])
                if p.is_complex():
                    complex_.append([gi, pi])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             f"parameter tensors")
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not "
                             f"support complex parameters")

    def _update_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        lr, eps = to_scalar(group["lr"]), group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad
            if not grad.is_sparse:
                raise RuntimeError("SparseAdam does not support dense gradients, please "
                                   "consider Adam instead")
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = gt.zeros_like(p)
                state["exp_avg_sq"] = gt.zeros_like(p)
            state["step"] += 1
            _update(p, grad, state["exp_avg"], state["exp_avg_sq"], state["step"], lr=lr,
                    beta1=beta1, beta2=beta2, eps=eps, maximize=group.get("maximize", False))


def _update(param: Tensor, grad: Any, exp_avg: Tensor, exp_avg_sq: Tensor, step: int, *,
            lr: float, beta1: float, beta2: float, eps: float, maximize: bool) -> None:
    grad = (-grad if maximize else grad).coalesce()
    values = grad._values()
    if values.numel() == 0:
        return
    rows = tuple(grad._indices()[d] for d in range(grad.sparse_dim()))
    old_avg = exp_avg[rows]
    avg_update = (values - old_avg).mul_(1 - beta1)
    exp_avg.index_put_(rows, avg_update, accumulate=True)
    old_sq = exp_avg_sq[rows]
    sq_update = values.pow(2).sub_(old_sq).mul_(1 - beta2)
    exp_avg_sq.index_put_(rows, sq_update, accumulate=True)
    numer = avg_update.add_(old_avg)
    sq_update.add_(old_sq)
    denom = sq_update.sqrt_().add_(eps)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr * math.sqrt(bias_correction2) / bias_correction1
    param.index_put_(rows, -step_size * numer.div_(denom), accumulate=True)

"""Loss layers (torch.nn's): Modules holding a loss function's options."""

from __future__ import annotations

from gputensor._tensor import Tensor
from gputensor.nn.functional import _loss as L

from .module import Module

__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "CrossEntropyLoss", "NLLLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "CosineEmbeddingLoss",
           "MarginRankingLoss", "SoftMarginLoss", "HingeEmbeddingLoss", "GaussianNLLLoss",
           "PoissonNLLLoss", "TripletMarginLoss", "MultiLabelSoftMarginLoss"]


class _Loss(Module):
    """A loss with a ``reduction`` ('none', 'mean' or 'sum'; the deprecated
    ``size_average``/``reduce`` flags still pick one, with a warning)."""

    reduction: str

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = L.legacy_get_string(size_average, reduce)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    """A loss with a per-class ``weight`` buffer (moves with the module, saved in its
    state_dict)."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Squared error below ``beta``, absolute error above it."""

    __constants__ = ["reduction"]

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Squared error below ``delta``, ``delta``-scaled absolute error above it."""

    __constants__ = ["reduction", "delta"]

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits against class indices or class probabilities."""

    __constants__ = ["ignore_index", "reduction", "label_smoothing"]

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class indices under log-probabilities."""

    __constants__ = ["ignore_index", "reduction"]

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of logits (numerically stable), with optional ``pos_weight``."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities from a target distribution."""

    __constants__ = ["reduction"]

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos`` for similar pairs (target 1), ``max(0, cos - margin)`` for dissimilar."""

    __constants__ = ["margin", "reduction"]

    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return L.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -target * (x1 - x2) + margin)``."""

    __constants__ = ["margin", "reduction"]

    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return L.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """Two-class logistic loss ``log(1 + exp(-y * x))``."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.soft_margin_loss(input, target, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` where y is 1, ``max(0, margin - x)`` where y is -1."""

    __constants__ = ["margin", "reduction"]

    def __init__(self, margin: float = 1.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log likelihood of ``target`` given means and variances."""

    __constants__ = ["full", "eps", "reduction"]

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return L.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """Poisson negative log likelihood of ``target`` given (log-)rates."""

    __constants__ = ["log_input", "full", "eps", "reduction"]

    def __init__(self, log_input: bool = True, full: bool = False,
                 size_average: bool | None = None, eps: float = 1e-8,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return L.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(0, margin + d(a, p) - d(a, n))`` with the pairwise p-norm distance ``d``."""

    __constants__ = ["margin", "p", "eps", "swap", "reduction"]

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return L.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class logistic loss of multi-label logits, averaged over the classes."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return L.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)

"""MultiMarginLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss and the deprecated
NLLLoss2d (torch.nn's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor._tensor import Tensor
from gputensor.nn.functional._margin import (
    multi_margin_loss,
    multilabel_margin_loss,
    triplet_margin_with_distance_loss,
)

from .distance import PairwiseDistance
from .loss import NLLLoss, _Loss, _WeightedLoss

__all__ = ["MultiMarginLoss", "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss",
           "NLLLoss2d"]


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (``p`` 1 or 2, optional per-class ``weight``)."""

    __constants__ = ["p", "margin", "reduction"]

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                 weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss over the class indices listed in each target row."""

    __constants__ = ["reduction"]

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet loss with any distance function (pairwise L2 by default)."""

    __constants__ = ["margin", "swap", "reduction"]

    def __init__(self, *, distance_function: Callable[..., Tensor] | None = None,
                 margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        # PyTorch's default is a PairwiseDistance module (a child: it shows in the repr)
        self.distance_function = distance_function if distance_function is not None else \
            PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """Deprecated name of NLLLoss (which takes (N, C, H, W) inputs too)."""

"""CTCLoss: connectionist temporal classification (torch.nn's)."""

from __future__ import annotations

from gputensor._tensor import Tensor
from gputensor.nn.functional._ctc import Lengths, ctc_loss

from .loss import _Loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """The CTC loss of unsegmented sequences: ``log_probs`` (T, N, C) against unaligned
    targets, summing over every alignment (see ``F.ctc_loss``)."""

    __constants__ = ["blank", "reduction"]
    blank: int
    zero_infinity: bool

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Lengths,
                target_lengths: Lengths) -> Tensor:
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)

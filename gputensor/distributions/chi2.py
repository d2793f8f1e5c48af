"""Chi-squared distribution: Gamma(df / 2, 1 / 2)."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    """Chi-squared distribution with ``df`` degrees of freedom."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args: bool | None = None) -> None:
        df = df if isinstance(df, gt.Tensor) else gt.tensor(float(df))
        super().__init__(0.5 * df, gt.full_like(df, 0.5), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2

"""LocScaleMixin: the location-scale parametrisation shared by Normal, Laplace and Cauchy."""
from __future__ import annotations

from gputensor.distributions import constraints
from gputensor.distributions.utils import broadcast_all


class LocScaleMixin:
    """A real-valued, reparameterisable distribution given by ``loc`` and a positive
    ``scale``, broadcast together; its batch shape is theirs."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        # The distribution class itself (not a subclass), so that a subclass with its own
        # __init__ is told to define expand, as for every distribution.
        cls = next(c for c in type(self).__mro__ if LocScaleMixin in c.__bases__)
        return self._expand_params(cls, batch_shape, ("loc", "scale"), _instance=_instance)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

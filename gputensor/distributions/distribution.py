"""Distribution: the base class of every probability distribution."""
from __future__ import annotations

import warnings

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.distributions import constraints
from gputensor.distributions.utils import lazy_property

__all__ = ["Distribution"]


def _not_implemented(self, what: str):
    return NotImplementedError(f"{type(self).__name__} does not implement {what}")


class Distribution:
    """Abstract base class for probability distributions.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of a single sample (without batching).
        validate_args: whether to check parameters and values; ``None`` keeps the default
            (on, unless Python runs with ``-O``; see :meth:`set_default_validate_args`).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution built afterwards."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(),
                 validate_args: bool | None = None) -> None:
        self._batch_shape = gt.Size(batch_shape)
        self._event_shape = gt.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()
        super().__init__()

    def _check_parameters(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                          "`arg_constraints = {}` or initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=3)
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue  # cannot be checked coordinate-wise
            if param not in self.__dict__ and isinstance(getattr(type(self), param),
                                                         lazy_property):
                continue  # derived lazily from another parameter that is checked
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A new instance (or ``_instance``) with batch dimensions expanded to ``batch_shape``.

        The parameters are expanded views; arguments are not checked again.
        """
        raise _not_implemented(self, "expand")

    def _expand_params(self, cls, batch_shape, params=(), copied=(), _instance=None):
        """The common ``expand``: a new ``cls`` instance whose tensor ``params`` (those set)
        are views expanded to ``batch_shape`` (keeping their trailing event dims), with the
        plain attributes ``copied`` shared, and validation as on ``self``."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = gt.Size(batch_shape)
        batch_ndim = len(self._batch_shape)
        for name in params:
            if name in self.__dict__:
                value = self.__dict__[name]
                new.__dict__[name] = value.expand(batch_shape + value.shape[batch_ndim:])
        for name in copied:
            new.__dict__[name] = self.__dict__[name]
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def batch_shape(self) -> gt.Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> gt.Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """Maps each tensor argument's name to the constraint it must satisfy."""
        raise _not_implemented(self, "arg_constraints")

    @property
    def support(self) -> constraints.Constraint | None:
        """The constraint describing where this distribution puts its mass."""
        raise _not_implemented(self, "support")

    @property
    def mean(self) -> Tensor:
        raise _not_implemented(self, "mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise _not_implemented(self, "variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=()) -> Tensor:
        """A sample (or batch of samples, shape ``sample_shape``), with no gradient."""
        with gt.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """A reparameterised sample: differentiable with respect to the parameters."""
        raise _not_implemented(self, "rsample")

    def sample_n(self, n: int) -> Tensor:
        """Deprecated: ``n`` samples; use ``sample((n,))``."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample(gt.Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density/mass at ``value``."""
        raise _not_implemented(self, "log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise _not_implemented(self, "cdf")

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at ``value``."""
        raise _not_implemented(self, "icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution, along dim 0 (then the batch dims)."""
        raise _not_implemented(self, "enumerate_support")

    def entropy(self) -> Tensor:
        """The entropy, batched over ``batch_shape``."""
        raise _not_implemented(self, "entropy")

    def perplexity(self) -> Tensor:
        """``exp(entropy)``, batched over ``batch_shape``."""
        return gt.exp(self.entropy())

    def _extended_shape(self, sample_shape=()) -> gt.Size:
        """The shape of a sample: ``sample_shape + batch_shape + event_shape``."""
        return gt.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Tensor) -> None:
        """Check that ``value`` broadcasts with the batch and event shapes and lies in the
        support; raise ``ValueError`` otherwise."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if value.size()[event_dim_start:] != self._event_shape:
            raise ValueError("The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        actual_shape = value.size()
        expected_shape = gt.Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape), strict=False):
            if i != 1 and j != 1 and i != j:
                raise ValueError("Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual_shape} vs {expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=2)
            return
        if support is None:
            raise AssertionError("support is unexpectedly None")
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        """A blank instance of ``type(self)`` for ``expand``; a subclass with its own
        ``__init__`` must override ``expand``."""
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        shown = []
        for name in names:
            param = self.__dict__[name]
            shown.append(f"{name}: {param if param.numel() == 1 else param.size()}")
        return f"{type(self).__name__}({', '.join(shown)})"

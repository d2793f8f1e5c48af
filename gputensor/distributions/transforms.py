"""Invertible transforms with log-abs-det-Jacobians, for TransformedDistribution and biject_to.

A transform implements ``_call`` (x -> y) and, when invertible, ``_inverse`` and
``log_abs_det_jacobian``; ``t.inv`` is the inverse transform (``t.inv.inv is t``). With
``cache_size=1`` the last (x, y) pair is memoised, so ``t.inv(t(x))`` returns ``x`` itself.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.distributions import constraints
from gputensor.distributions.utils import (
    _sum_rightmost,
    broadcast_all,
    lazy_property,
    tril_matrix_to_vec,
    vec_to_tril_matrix,
)
from gputensor.nn.functional import logsigmoid, pad, softplus

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
    "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
    "Transform", "identity_transform",
]


class Transform:
    """Base class of invertible transformations with a computable log det Jacobian.

    Args:
        cache_size: 0 (no caching) or 1 (memoise the latest (x, y) pair).

    Attributes: ``domain`` and ``codomain`` (constraints on inputs and outputs), ``bijective``,
    ``sign`` (+1/-1 for monotone univariate bijections).
    """

    bijective = False
    domain: constraints.Constraint
    codomain: constraints.Constraint

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv: Transform | None = None
        if cache_size == 1:
            self._cached_x_y = None, None
        super().__init__()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None  # the inverse is rebuilt lazily; pickling it would recurse
        return state

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        """The inverse transform; ``t.inv.inv is t``."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self) -> int:
        """The sign of the Jacobian determinant (bijective univariate transforms only)."""
        raise NotImplementedError(f"{type(self).__name__} does not define sign")

    def with_cache(self, cache_size: int = 1) -> Transform:
        """This transform with the given cache size."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        """y = t(x)."""
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement the forward map")

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement the inverse")

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """log |dy/dx| given the input and the output."""
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  "log_abs_det_jacobian")

    def __repr__(self) -> str:
        return type(self).__name__ + "()"

    def forward_shape(self, shape):
        """The output shape for an input of shape ``shape``."""
        return shape

    def inverse_shape(self, shape):
        """The input shape for an output of shape ``shape``."""
        return shape


class _InverseTransform(Transform):
    """The inverse of a transform; reached through ``Transform.inv``."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self._inv.bijective

    @property
    def sign(self) -> int:
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """The chain ``parts[-1](...parts[0](x))``; the parts do their own caching."""

    def __init__(self, parts: list[Transform], cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        # The input event dim is the largest any part needs, traced back from the output.
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @lazy_property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self) -> int:  # type: ignore[override]
        sign = 1
        for part in self.parts:
            sign = sign * part.sign
        return sign

    @property
    def inv(self) -> Transform:
        if self._inv is None:
            inverse = ComposeTransform([p.inv for p in reversed(self.parts)])
            inverse._inv = self
            self._inv = inverse
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return gt.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        total = None
        event_dim = self.domain.event_dim
        for part, x_in, y_out in zip(self.parts, xs[:-1], xs[1:], strict=True):
            term = _sum_rightmost(part.log_abs_det_jacobian(x_in, y_out),
                                  event_dim - part.domain.event_dim)
            total = term if total is None else total + term
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self) -> str:
        return type(self).__name__ + "(\n    " + ",\n    ".join(map(repr, self.parts)) + "\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """Treats ``reinterpreted_batch_ndims`` extra rightmost dims of ``base_transform`` as
    event dims: only ``log_abs_det_jacobian`` changes (it sums them out)."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int,
                 cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self.base_transform.bijective

    @property
    def sign(self) -> int:
        return self.base_transform.sign

    def _call(self, x: Tensor) -> Tensor:
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y: Tensor) -> Tensor:
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                              self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.base_transform!r}, "
                f"{self.reinterpreted_batch_ndims})")

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` of a tensor to ``out_shape`` (unit Jacobian)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0) -> None:
        self.in_shape = gt.Size(in_shape)
        self.out_shape = gt.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x: Tensor) -> Tensor:
        batch_shape = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return x.reshape(batch_shape + tuple(self.out_shape))

    def _inverse(self, y: Tensor) -> Tensor:
        batch_shape = tuple(y.shape[: y.dim() - len(self.out_shape)])
        return y.reshape(batch_shape + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x.new_zeros(tuple(x.shape[: x.dim() - len(self.in_shape)]))

    @staticmethod
    def _swap_event(shape, old, new):
        if len(shape) < len(old):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(old)
        if tuple(shape[cut:]) != tuple(old):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
        return gt.Size(tuple(shape[:cut]) + tuple(new))

    def forward_shape(self, shape):
        return self._swap_event(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap_event(shape, self.out_shape, self.in_shape)


class _ParameterFree(Transform):
    """A transform without parameters: all its instances are equal."""

    def __eq__(self, other) -> bool:
        return isinstance(other, type(self))

    __hash__ = object.__hash__


class _IncreasingBijection(_ParameterFree):
    """An increasing elementwise bijection from the real line onto ``codomain``."""

    domain = constraints.real
    bijective = True
    sign = +1


class ExpTransform(_IncreasingBijection):
    """y = exp(x)."""

    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent on the positive reals."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self):  # type: ignore[override]
        return self.exponent.sign()

    def __eq__(self, other) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all().item())

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return gt.broadcast_shapes(shape, tuple(self.exponent.shape))

    def inverse_shape(self, shape):
        return gt.broadcast_shapes(shape, tuple(self.exponent.shape))


def _clipped_sigmoid(x: Tensor) -> Tensor:
    # Keep the output strictly inside (0, 1) so its logit stays finite.
    finfo = gt.finfo(x.dtype)
    return gt.clamp(gt.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)


class SigmoidTransform(_IncreasingBijection):
    """y = 1 / (1 + exp(-x)), x = logit(y)."""

    codomain = constraints.unit_interval

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        finfo = gt.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class SoftplusTransform(_IncreasingBijection):
    """y = log(1 + exp(x))."""

    codomain = constraints.positive

    def _call(self, x):
        return softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x)


class TanhTransform(_IncreasingBijection):
    """y = tanh(x); use ``cache_size=1`` where outputs may saturate to +-1."""

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return gt.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) written stably: 2 (log 2 - x - softplus(-2x)).
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AbsTransform(_ParameterFree):
    """y = |x| (not injective: the inverse picks the nonnegative root)."""

    domain = constraints.real
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number)


def _params_equal(a, b) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b
    return bool((a == b).all().item())


class AffineTransform(Transform):
    """y = loc + scale * x, with ``event_dim`` rightmost dims forming one event."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other) -> bool:
        return (isinstance(other, AffineTransform) and _params_equal(self.loc, other.loc)
                and _params_equal(self.scale, other.scale))

    __hash__ = object.__hash__

    @property
    def sign(self):
        if _is_number(self.scale):
            scale = float(self.scale)
            return 1 if scale > 0 else -1 if scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if _is_number(self.scale):
            result = gt.full_like(x, math.log(abs(self.scale)))
        else:
            result = gt.abs(self.scale).log()
        if self.event_dim:
            result = result.reshape(tuple(result.shape[: -self.event_dim]) + (-1,)).sum(-1)
            shape = shape[: -self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return gt.broadcast_shapes(shape, tuple(getattr(self.loc, "shape", ())),
                                   tuple(getattr(self.scale, "shape", ())))

    inverse_shape = forward_shape


class CorrCholeskyTransform(Transform):
    """Maps a real vector of length D(D-1)/2 to the Cholesky factor of a D x D correlation
    matrix: tanh to (-1, 1), then a stick-breaking construction row by row so each row has
    unit norm."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        x = gt.tanh(x)
        eps = gt.finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        # Row i keeps what is left of its unit norm after the entries before it.
        remaining = (1 - r ** 2).sqrt().cumprod(-1)
        r = r + gt.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * pad(remaining[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        remaining = 1 - gt.cumsum(y * y, dim=-1)
        remaining_before = pad(remaining[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(remaining_before, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        remaining = 1 - (y * y).cumsum(dim=-1)
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(remaining, diag=-2).log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return gt.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return gt.Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))


def _check_vector_shape(shape):
    if len(shape) < 1:
        raise ValueError("Too few dimensions on input")


class SoftmaxTransform(_ParameterFree):
    """Real vectors to the simplex by exp and normalisation (not bijective: the inverse is
    log, one of many preimages)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _check_vector_shape(shape)
        return shape

    def inverse_shape(self, shape):
        _check_vector_shape(shape)
        return shape


def _stick_offset(x: Tensor, length: int) -> Tensor:
    """log of (length, length - 1, ..., 1): centres the sticks so x = 0 maps to uniform."""
    return (length - x.new_ones(x.shape[-1]).cumsum(-1) + 1).log()


class StickBreakingTransform(_ParameterFree):
    """Real vectors of length K-1 to the K-simplex by stick breaking (bijective)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def _call(self, x):
        z = _clipped_sigmoid(x - _stick_offset(x, x.shape[-1]))
        left = (1 - z).cumprod(-1)
        return pad(z, [0, 1], value=1) * pad(left, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        left = gt.clamp(1 - y_crop.cumsum(-1), min=gt.finfo(y.dtype).tiny)
        return y_crop.log() - left.log() + _stick_offset(y_crop, y_crop.shape[-1])

    def log_abs_det_jacobian(self, x, y):
        x = x - _stick_offset(x, x.shape[-1])
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _check_vector_shape(shape)
        return gt.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        _check_vector_shape(shape)
        return gt.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(_ParameterFree):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal
    (exp of the diagonal, the strict lower triangle kept)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(_ParameterFree):
    """Unconstrained square matrices to positive-definite ones: L L^T of the lower
    Cholesky transform."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(gt.linalg.cholesky(y))


def _check_slices(name: str, value: Tensor, dim: int, size: int, what: str) -> None:
    if not -value.dim() <= dim < value.dim():
        raise AssertionError(f"dim {dim} out of range for {name} with {value.dim()} dimensions")
    if value.size(dim) != size:
        raise AssertionError(f"{name}.size({dim}) = {value.size(dim)} must equal {what} {size}")


class CatTransform(Transform):
    """Applies ``tseq[i]`` to consecutive slices of ``dim`` of lengths ``lengths[i]``."""

    def __init__(self, tseq: Sequence[Transform], dim: int = 0,
                 lengths: Sequence[int] | None = None, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms "
                                 f"({len(self.transforms)})")
        self.dim = dim

    @lazy_property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _map_slices(self, value: Tensor, name: str, fn) -> list[Tensor]:
        _check_slices(name, value, self.dim, self.length, "length")
        out, start = [], 0
        for transform, length in zip(self.transforms, self.lengths, strict=True):
            out.append(fn(transform, value.narrow(self.dim, start, length)))
            start += length
        return out

    def _call(self, x):
        return gt.cat(self._map_slices(x, "x", lambda t, v: t(v)), dim=self.dim)

    def _inverse(self, y):
        return gt.cat(self._map_slices(y, "y", lambda t, v: t.inv(v)), dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_slices("y", y, self.dim, self.length, "length")
        y_slices = iter(self._map_slices(y, "y", lambda t, v: v))
        event_dim = self.event_dim

        def slice_logdet(transform, x_slice):
            logdet = transform.log_abs_det_jacobian(x_slice, next(y_slices))
            return _sum_rightmost(logdet, event_dim - transform.event_dim)

        logdets = self._map_slices(x, "x", slice_logdet)
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim += event_dim
        # A slice along a batch dim keeps its logdets apart; along an event dim they add up.
        return gt.cat(logdets, dim=dim) if dim < 0 else sum(logdets)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Applies ``tseq[i]`` to slice ``i`` of ``dim``, like stack."""

    def __init__(self, tseq: Sequence[Transform], dim: int = 0, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, value: Tensor, name: str) -> list[Tensor]:
        _check_slices(name, value, self.dim, len(self.transforms), "len(transforms)")
        return [value.select(self.dim, i) for i in range(value.size(self.dim))]

    def _call(self, x):
        return gt.stack([t(v) for v, t in zip(self._slices(x, "x"), self.transforms, strict=True)],
                        dim=self.dim)

    def _inverse(self, y):
        slices = self._slices(y, "y")
        return gt.stack([t.inv(v) for v, t in zip(slices, self.transforms, strict=True)],
                        dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        pairs = zip(self._slices(x, "x"), self._slices(y, "y"), self.transforms, strict=True)
        return gt.stack([t.log_abs_det_jacobian(xs, ys) for xs, ys, t in pairs], dim=self.dim)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), onto the unit interval (a copula-style transform)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):  # type: ignore[override]
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

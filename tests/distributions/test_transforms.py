"""Transforms, constraints and biject_to/transform_to against torch.distributions."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor.distributions import biject_to, transform_to
from gputensor.distributions import constraints as C
from gputensor.distributions import transforms as GT
from tests.distributions._common import to_gt
from tests.helpers import assert_close

TT = torch.distributions.transforms
TC = torch.distributions.constraints


def pair(make):
    """The same transform built from gputensor's and torch's modules."""
    return make(GT, gt), make(TT, torch)


# (builder taking (transforms module, tensor library), input shape)
TRANSFORMS = {
    "exp": (lambda m, lib: m.ExpTransform(), (3, 2)),
    "abs": (lambda m, lib: m.AbsTransform(), (3, 2)),
    "affine": (lambda m, lib: m.AffineTransform(lib.tensor([1.0, -2.0]), lib.tensor([2.0, -0.5])),
               (3, 2)),
    "affine_number_event": (lambda m, lib: m.AffineTransform(1.0, -3.0, event_dim=1), (3, 2)),
    "power": (lambda m, lib: m.PowerTransform(lib.tensor([2.0, 0.5])), (3, 2)),
    "sigmoid": (lambda m, lib: m.SigmoidTransform(), (3, 2)),
    "softplus": (lambda m, lib: m.SoftplusTransform(), (3, 2)),
    "tanh": (lambda m, lib: m.TanhTransform(), (3, 2)),
    "softmax": (lambda m, lib: m.SoftmaxTransform(), (3, 4)),
    "stick_breaking": (lambda m, lib: m.StickBreakingTransform(), (3, 4)),
    "lower_cholesky": (lambda m, lib: m.LowerCholeskyTransform(), (2, 3, 3)),
    "positive_definite": (lambda m, lib: m.PositiveDefiniteTransform(), (2, 3, 3)),
    "corr_cholesky": (lambda m, lib: m.CorrCholeskyTransform(), (2, 6)),
    "reshape": (lambda m, lib: m.ReshapeTransform((2, 3), (6,)), (4, 2, 3)),
    "independent": (lambda m, lib: m.IndependentTransform(m.ExpTransform(), 1), (3, 2)),
    "compose": (lambda m, lib: m.ComposeTransform(
        [m.AffineTransform(0.5, 2.0), m.SigmoidTransform(), m.PowerTransform(lib.tensor(3.0))]),
        (3, 2)),
    "compose_event": (lambda m, lib: m.ComposeTransform(
        [m.ExpTransform(), m.StickBreakingTransform()]), (3, 2)),
    "cat": (lambda m, lib: m.CatTransform([m.ExpTransform(), m.AffineTransform(1.0, 2.0)],
                                         dim=1, lengths=[1, 2]), (2, 3)),
    "cat_event": (lambda m, lib: m.CatTransform(
        [m.IndependentTransform(m.ExpTransform(), 1), m.AffineTransform(0.0, 2.0, event_dim=1)],
        dim=-1, lengths=[2, 3]), (2, 5)),
    "stack": (lambda m, lib: m.StackTransform([m.ExpTransform(), m.TanhTransform()], dim=1),
              (3, 2)),
    "inverse_sigmoid": (lambda m, lib: m.SigmoidTransform().inv, (3, 2)),
    "identity": (lambda m, lib: m.identity_transform, (3, 2)),
}
# Inputs of the transforms whose domain is not the reals.
POSITIVE_DOMAIN = {"power"}


def _inputs(name, shape):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape) * 0.8
    if name in POSITIVE_DOMAIN:
        x = np.abs(x) + 0.2
    if name == "inverse_sigmoid":
        x = 1 / (1 + np.exp(-x))
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transform_matches_torch(name, device):
    build, shape = TRANSFORMS[name]
    g_t, t_t = build(GT, gt), build(TT, torch)
    g_t = _to_device(g_t, device)
    x = _inputs(name, shape)
    y = t_t(x)
    g_x = to_gt(x, device)
    g_y = g_t(g_x)
    assert g_y.device == gt.device(device)
    assert_close(g_y, y, atol=1e-6, rtol=1e-6)
    assert g_t.bijective == t_t.bijective
    assert g_t.domain.event_dim == t_t.domain.event_dim
    assert g_t.codomain.event_dim == t_t.codomain.event_dim
    assert repr(g_t.codomain) == repr(t_t.codomain) or name in ("cat", "cat_event", "stack")
    assert tuple(g_t.forward_shape(shape)) == tuple(t_t.forward_shape(torch.Size(shape)))
    assert tuple(g_t.inverse_shape(tuple(y.shape))) == tuple(t_t.inverse_shape(y.shape))
    assert_close(g_t.inv(to_gt(y, device)), t_t.inv(y), atol=1e-6, rtol=1e-6)
    try:
        expected = t_t.log_abs_det_jacobian(x, y)
    except NotImplementedError:  # e.g. not bijective: neither library has a Jacobian
        with pytest.raises(NotImplementedError):
            g_t.log_abs_det_jacobian(g_x, g_y)
        return
    assert_close(g_t.log_abs_det_jacobian(g_x, g_y), expected, atol=1e-6, rtol=1e-6)


def _to_device(transform, device):
    """Move the tensor parameters of a (possibly nested) transform to ``device``."""
    for attr in ("loc", "scale", "exponent"):
        value = getattr(transform, attr, None)
        if isinstance(value, gt.Tensor):
            setattr(transform, attr, value.to(device))
    for attr in ("parts", "transforms"):
        for part in getattr(transform, attr, ()):
            _to_device(part, device)
    return transform


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "affine", "stick_breaking",
                                  "corr_cholesky", "softplus", "power"])
def test_log_abs_det_jacobian_gradcheck(name, device):
    build, shape = TRANSFORMS[name]
    t = _to_device(build(GT, gt), device)
    x = to_gt(_inputs(name, shape), device).requires_grad_()
    assert gt.autograd.gradcheck(lambda v: t.log_abs_det_jacobian(v, t(v)), [x])
    assert gt.autograd.gradcheck(lambda v: t(v), [x])


def test_inverse_is_involutive_and_cached():
    t = GT.ExpTransform()
    assert t.inv.inv is t
    cached = GT.ExpTransform(cache_size=1)
    x = gt.randn(3)
    y = cached(x)
    assert cached.inv(y) is x  # the inverse returns the cached input itself
    assert cached(x) is y
    assert GT.ExpTransform()(x) is not y
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        GT.ExpTransform(cache_size=2)
    assert t.with_cache(1)._cache_size == 1 and t.with_cache(0) is t
    compose = GT.ComposeTransform([GT.ExpTransform(), GT.AffineTransform(1.0, 2.0)])
    assert compose.inv.inv is compose
    assert compose.with_cache(1).parts[1]._cache_size == 1


def test_transform_equality_and_sign():
    assert GT.ExpTransform() == GT.ExpTransform()
    assert GT.AffineTransform(1.0, 2.0) == GT.AffineTransform(1.0, 2.0)
    assert GT.AffineTransform(1.0, 2.0) != GT.AffineTransform(1.0, 3.0)
    assert GT.SigmoidTransform().inv == GT.SigmoidTransform().inv
    assert GT.AffineTransform(0.0, -2.0).sign == -1
    assert GT.ComposeTransform([GT.ExpTransform(), GT.AffineTransform(0.0, -1.0)]).sign == -1
    assert_close(GT.PowerTransform(gt.tensor([2.0, -1.0])).sign, torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="event_dim"):
        GT.CorrCholeskyTransform().inv.event_dim  # noqa: B018  domain event_dim differs
    assert GT.StickBreakingTransform().event_dim == 1


def test_cumulative_distribution_transform(device):
    g_normal = gt.distributions.Normal(gt.tensor(0.5, device=device), gt.tensor(2.0, device=device))
    t_normal = torch.distributions.Normal(torch.tensor(0.5), torch.tensor(2.0))
    g_t = GT.CumulativeDistributionTransform(g_normal)
    t_t = TT.CumulativeDistributionTransform(t_normal)
    x = torch.tensor([-1.0, 0.3, 2.0])
    assert_close(g_t(to_gt(x, device)), t_t(x))
    assert_close(g_t.log_abs_det_jacobian(to_gt(x, device), None),
                 t_t.log_abs_det_jacobian(x, None))
    assert_close(g_t.inv(to_gt(t_t(x), device)), x, atol=1e-5)
    assert repr(g_t.domain) == repr(t_t.domain)


CONSTRAINT_CASES = [
    ("real", lambda c: c.real, [[0.0, float("nan")], [1.0, -2.0]]),
    ("positive", lambda c: c.positive, [[0.0, 1.0], [-1.0, 2.0]]),
    ("nonnegative", lambda c: c.nonnegative, [[0.0, 1.0], [-1.0, 2.0]]),
    ("greater_than", lambda c: c.greater_than(1.0), [[0.0, 1.0], [1.5, 2.0]]),
    ("greater_than_eq", lambda c: c.greater_than_eq(1.0), [[0.0, 1.0], [1.5, 2.0]]),
    ("less_than", lambda c: c.less_than(1.0), [[0.0, 1.0], [1.5, 2.0]]),
    ("interval", lambda c: c.interval(0.0, 1.0), [[0.0, 1.0], [1.5, 0.5]]),
    ("half_open_interval", lambda c: c.half_open_interval(0.0, 1.0), [[0.0, 1.0], [1.5, 0.5]]),
    ("unit_interval", lambda c: c.unit_interval, [[0.0, 1.0], [1.5, 0.5]]),
    ("boolean", lambda c: c.boolean, [[0.0, 1.0], [0.5, 1.0]]),
    ("nonnegative_integer", lambda c: c.nonnegative_integer, [[0.0, 1.0], [-1.0, 1.5]]),
    ("positive_integer", lambda c: c.positive_integer, [[0.0, 1.0], [3.0, 1.5]]),
    ("integer_interval", lambda c: c.integer_interval(0, 2), [[0.0, 1.0], [3.0, 1.5]]),
    ("simplex", lambda c: c.simplex, [[0.25, 0.75], [0.5, 0.6]]),
    ("one_hot", lambda c: c.one_hot, [[0.0, 1.0], [1.0, 1.0]]),
    ("multinomial", lambda c: c.multinomial(3), [[1.0, 2.0], [3.0, 2.0]]),
    ("real_vector", lambda c: c.real_vector, [[0.0, float("nan")], [1.0, -2.0]]),
    ("independent", lambda c: c.independent(c.positive, 1), [[0.5, 1.0], [-1.0, 2.0]]),
    ("lower_triangular", lambda c: c.lower_triangular, [[[1.0, 0.0], [2.0, 3.0]],
                                                        [[1.0, 1.0], [2.0, 3.0]]]),
    ("lower_cholesky", lambda c: c.lower_cholesky, [[[1.0, 0.0], [2.0, 3.0]],
                                                    [[-1.0, 0.0], [2.0, 3.0]]]),
    ("corr_cholesky", lambda c: c.corr_cholesky, [[[1.0, 0.0], [0.6, 0.8]],
                                                  [[1.0, 0.0], [0.6, 0.9]]]),
    ("square", lambda c: c.square, [[[1.0, 0.0], [2.0, 3.0]]]),
    ("symmetric", lambda c: c.symmetric, [[[1.0, 2.0], [2.0, 3.0]], [[1.0, 0.0], [2.0, 3.0]]]),
    ("positive_definite", lambda c: c.positive_definite, [[[2.0, 1.0], [1.0, 2.0]],
                                                          [[1.0, 2.0], [2.0, 1.0]]]),
    ("positive_semidefinite", lambda c: c.positive_semidefinite, [[[1.0, 1.0], [1.0, 1.0]],
                                                                  [[1.0, 2.0], [2.0, 1.0]]]),
    ("cat", lambda c: c.cat([c.positive, c.real], 1, [1, 1]), [[1.0, -1.0], [-1.0, 1.0]]),
    ("stack", lambda c: c.stack([c.positive, c.unit_interval], 1), [[1.0, 0.5], [1.0, 2.0]]),
]


@pytest.mark.parametrize(("name", "make", "value"), CONSTRAINT_CASES,
                         ids=[c[0] for c in CONSTRAINT_CASES])
def test_constraint_matches_torch(name, make, value, device):
    g_c, t_c = make(C), make(TC)
    x = torch.tensor(value)
    got = g_c.check(to_gt(x, device))
    assert got.device == gt.device(device)
    assert_close(got, t_c.check(x))
    assert repr(g_c) == repr(t_c)
    assert g_c.event_dim == t_c.event_dim
    assert g_c.is_discrete == t_c.is_discrete


def test_dependent_constraints():
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    with pytest.raises(ValueError, match="Cannot determine validity"):
        C.dependent.check(gt.zeros(1))
    with pytest.raises(NotImplementedError, match="is_discrete"):
        C.dependent.is_discrete  # noqa: B018
    assert C.dependent(is_discrete=True, event_dim=1).event_dim == 1
    support = gt.distributions.Uniform.support
    assert C.is_dependent(support) and support.event_dim == 0
    low_high = gt.distributions.Uniform(gt.tensor(0.0), gt.tensor(2.0)).support
    assert repr(low_high).startswith("Interval(")


BIJECT_CASES = [
    ("real", lambda c: c.real, (3,)),
    ("positive", lambda c: c.positive, (3,)),
    ("greater_than", lambda c: c.greater_than(1.5), (3,)),
    ("less_than", lambda c: c.less_than(-1.0), (3,)),
    ("interval", lambda c: c.interval(-1.0, 3.0), (3,)),
    ("unit_interval", lambda c: c.unit_interval, (3,)),
    ("simplex", lambda c: c.simplex, (2, 3)),
    ("real_vector", lambda c: c.real_vector, (2, 3)),
    ("corr_cholesky", lambda c: c.corr_cholesky, (2, 3)),
    ("lower_cholesky", lambda c: c.lower_cholesky, (2, 2, 2)),
    ("positive_definite", lambda c: c.positive_definite, (2, 2, 2)),
    ("cat", lambda c: c.cat([c.positive, c.unit_interval], 1, [1, 2]), (2, 3)),
    ("stack", lambda c: c.stack([c.positive, c.real], 1), (2, 2)),
]


@pytest.mark.parametrize(("name", "make", "shape"), BIJECT_CASES, ids=[c[0] for c in BIJECT_CASES])
@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_biject_to_and_transform_to(name, make, shape, registry, device):
    g_reg = {"biject_to": biject_to, "transform_to": transform_to}[registry]
    t_reg = getattr(torch.distributions, registry)
    g_c, t_c = make(C), make(TC)
    try:
        t_t = t_reg(t_c)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            g_reg(g_c)
        return
    g_t = g_reg(g_c)
    assert type(g_t).__name__ == type(t_t).__name__
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = g_t(to_gt(x, device))
    assert_close(y, t_t(x), atol=1e-6, rtol=1e-6)
    assert bool(g_c.check(y).all())


def test_registry_errors_and_extension():
    with pytest.raises(TypeError, match="Expected constraint"):
        biject_to.register(3, lambda c: None)
    registry = type(biject_to)()
    with pytest.raises(NotImplementedError, match="Cannot transform _Real constraints"):
        registry(C.real)
    registry.register(C.real)(lambda c: GT.ExpTransform())
    assert isinstance(registry(C.real), GT.ExpTransform)

"""The Distribution base class and distributions.utils against PyTorch's."""
from __future__ import annotations

import pytest
import torch

import gputensor as gt
from gputensor import distributions as D
from gputensor.distributions import utils as U
from tests.distributions._common import to_gt
from tests.helpers import assert_close

TU = torch.distributions.utils


class _Bare(D.Distribution):
    """A distribution that defines nothing but its shapes."""

    def __init__(self, validate_args=None):
        super().__init__((2,), validate_args=validate_args)


def test_base_class_defaults_and_missing_methods():
    d = _Bare(validate_args=False)
    assert isinstance(d.batch_shape, gt.Size) and isinstance(d.event_shape, gt.Size)
    assert tuple(d._extended_shape((3,))) == (3, 2)
    for name in ("mean", "variance", "support", "arg_constraints"):
        with pytest.raises(NotImplementedError):
            getattr(d, name)
    with pytest.raises(NotImplementedError, match="does not implement mode"):
        d.mode  # noqa: B018
    for call in (d.rsample, d.sample, d.entropy, d.enumerate_support,
                 lambda: d.log_prob(gt.zeros(2)), lambda: d.cdf(gt.zeros(2)),
                 lambda: d.icdf(gt.zeros(2)), lambda: d.expand((3, 2))):
        with pytest.raises(NotImplementedError):
            call()
    assert not d.has_rsample and not d.has_enumerate_support


def test_missing_constraints_warn_like_torch():
    with pytest.warns(UserWarning, match="does not define `arg_constraints`"):
        d = _Bare()
    with pytest.warns(UserWarning, match="does not define `support`"):
        d._validate_sample(gt.zeros(2))
    with pytest.raises(ValueError, match="must be a Tensor"):
        d._validate_sample([0.0, 1.0])


def test_lazy_property_keeps_the_graph_under_no_grad():
    logits = gt.tensor([0.5, -1.0], requires_grad=True)
    d = D.Bernoulli(logits=logits)
    assert "probs" not in d.__dict__
    with gt.no_grad():
        probs = d.probs
    assert probs.requires_grad and "probs" in d.__dict__
    assert isinstance(D.Bernoulli.probs, U.lazy_property) and isinstance(D.Bernoulli.probs,
                                                                         property)


def test_broadcast_all(device):
    x = gt.ones(2, 1, dtype=gt.float64, device=device)
    a, b, c = U.broadcast_all(x, 2.0, gt.zeros(3, dtype=gt.float64, device=device))
    assert tuple(a.shape) == tuple(b.shape) == (2, 3)
    assert b.dtype == gt.float64 and b.device == gt.device(device)
    (n,) = U.broadcast_all(1.5)
    assert n.dtype == gt.get_default_dtype() and tuple(n.shape) == ()
    with pytest.raises(ValueError, match="Input arguments must all be instances of Number"):
        U.broadcast_all(x, "2")


def test_probability_helpers_match_torch(device):
    probs = torch.tensor([[0.0, 0.25, 0.75], [1.0, 0.5, 0.5]], dtype=torch.float64)
    logits = torch.tensor([[0.3, -2.0, 1.0]], dtype=torch.float64)
    for binary in (True, False):
        assert_close(U.probs_to_logits(to_gt(probs, device), binary),
                     TU.probs_to_logits(probs, binary))
        assert_close(U.logits_to_probs(to_gt(logits, device), binary),
                     TU.logits_to_probs(logits, binary))
    assert_close(U.clamp_probs(to_gt(probs.float(), device)), TU.clamp_probs(probs.float()))


@pytest.mark.parametrize("diag", [-1, 0, 1])
def test_tril_vector_round_trip_matches_torch(diag, device):
    mat = torch.arange(2 * 16, dtype=torch.float64).reshape(2, 4, 4)
    vec = TU.tril_matrix_to_vec(mat, diag)
    g_vec = U.tril_matrix_to_vec(to_gt(mat, device), diag)
    assert_close(g_vec, vec)
    assert_close(U.vec_to_tril_matrix(g_vec, diag), TU.vec_to_tril_matrix(vec, diag))


def test_tril_vector_errors_match_torch():
    with pytest.raises(ValueError) as want:
        TU.tril_matrix_to_vec(torch.zeros(3, 3), 3)
    with pytest.raises(ValueError) as got:
        U.tril_matrix_to_vec(gt.zeros(3, 3), 3)
    assert str(got.value) == str(want.value)
    with pytest.raises(ValueError) as want:
        TU.vec_to_tril_matrix(torch.zeros(5))
    with pytest.raises(ValueError) as got:
        U.vec_to_tril_matrix(gt.zeros(5))
    assert str(got.value) == str(want.value)

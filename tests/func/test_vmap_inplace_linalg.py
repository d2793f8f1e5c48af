"""gt.func.vmap over in-place methods (the inplace_fn ops and hand-written Tensor methods) and
over the gt.linalg frontends that check ``info``, against torch.func.vmap on cpu and emulated
cuda."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor.func import vmap

from .helpers import close, pair


def _set_basic(a, b):
    a[1:] = b[1:] * 2
    a[0] = 5.0
    return a


def _set_advanced(m, a, b):
    a[m.tensor([0, 2]).to(a.device)] = b[:2]
    return a


# (id, function of (module, a, b) on samples of shape (3,), has a rule: no per-sample fallback)
INPLACE = [
    ("copy_", lambda m, a, b: a.clone().copy_(b), True),
    ("copy_-scalar-broadcast", lambda m, a, b: a.clone().copy_(b.sum()), True),
    ("zero_", lambda m, a, b: a.clone().zero_() + b, True),
    ("fill_", lambda m, a, b: a.clone().fill_(2.0), True),
    ("fill_-batched-value", lambda m, a, b: a.clone().fill_(b.sum()), True),
    ("clamp_", lambda m, a, b: a.clone().clamp_(-0.1, 0.1), True),
    ("clamp_-tensor", lambda m, a, b: a.clone().clamp_(min=b), True),
    ("masked_fill_", lambda m, a, b: a.clone().masked_fill_(b > 0, 0.0), True),
    ("masked_fill_-batched-value", lambda m, a, b: a.clone().masked_fill_(b > 0, b.sum()), True),
    ("index_add_", lambda m, a, b: a.clone().index_add_(0, m.tensor([0, 2, 0]).to(a.device), b),
     True),
    ("index_copy_", lambda m, a, b: a.clone().index_copy_(0, m.tensor([2, 0, 1]).to(a.device),
                                                          b), True),
    ("scatter_", lambda m, a, b: a.clone().scatter_(0, m.tensor([2, 0, 1]).to(a.device), b),
     True),
    ("lerp_", lambda m, a, b: a.clone().lerp_(b, 0.3), True),
    ("setitem-basic", lambda m, a, b: _set_basic(a.clone(), b), True),
    ("t_-unsqueeze_", lambda m, a, b: a.clone().unsqueeze_(0).t_() * b.unsqueeze(-1), True),
    ("setitem-advanced", lambda m, a, b: _set_advanced(m, a.clone(), b), False),
]


@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_in_place_methods_match_torch(case, device):
    _, fn, ruled = case
    (x, tx), (y, ty) = pair((4, 3), device, seed=1), pair((4, 3), device, seed=2)
    expected = torch.func.vmap(lambda a, b: fn(torch, a, b))(tx, ty)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = vmap(lambda a, b: fn(gt, a, b))(x, y)
    fell_back = any("performance drop" in str(w.message) for w in caught)
    assert fell_back != ruled
    close(actual, expected)


def test_in_place_keeps_identity_and_autograd(device):
    x, tx = pair((4, 3), device, seed=3)

    def f(m, a):
        b = a * 1
        same = b.masked_fill_(a > 0, 0.5) is b
        return b.sum() if same else None
    close(vmap(gt.func.grad(lambda a: f(gt, a)))(x),
          torch.func.vmap(torch.func.grad(lambda a: f(torch, a)))(tx))


def test_in_place_errors(device):
    x, _ = pair((4, 3), device)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        vmap(lambda a: a.long().copy_(a).clamp_(min=a))(x)
    with pytest.raises(RuntimeError, match="vmap: resize_"):
        vmap(lambda a: a.clone().resize_(6))(x)
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        vmap(lambda a: a.clone().fill_(a))(x)


def _spd(m, a):
    return a @ a.mT + 3 * m.eye(a.shape[-1], dtype=a.dtype, device=a.device)


# (id, function of (module, A, b) on samples A (3, 3) and b (3,))
LINALG = [
    ("inv", lambda m, A, b: m.linalg.inv(A)),
    ("solve", lambda m, A, b: m.linalg.solve(A, b)),
    ("cholesky", lambda m, A, b: m.linalg.cholesky(_spd(m, A))),
    ("lu_factor", lambda m, A, b: m.linalg.lu_factor(A)),
    ("lu", lambda m, A, b: m.linalg.lu(A)),
    ("lu_solve", lambda m, A, b: m.linalg.lu_solve(*m.linalg.lu_factor(A), b.unsqueeze(-1))),
    ("lstsq", lambda m, A, b: m.linalg.lstsq(A, b.unsqueeze(-1)).solution),
    ("inverse-det", lambda m, A, b: m.inverse(A) * m.linalg.det(A)),
]


@pytest.mark.parametrize("case", LINALG, ids=[c[0] for c in LINALG])
def test_linalg_frontends_under_vmap(case, device):
    _, fn = case
    (A, tA), (b, tb) = pair((4, 3, 3), device, seed=4), pair((4, 3), device, seed=5)
    close(vmap(lambda a, c: fn(gt, a, c))(A, b),
          torch.func.vmap(lambda a, c: fn(torch, a, c))(tA, tb), atol=1e-8)


def test_linalg_info_is_checked_once_for_the_batch(device):
    eye = np.tile(np.eye(3), (4, 1, 1))
    eye[2, 1, 1] = 0
    A, tA = gt.tensor(eye, device=device), torch.tensor(eye)
    for name in ("inv", "cholesky"):
        with pytest.raises(Exception) as theirs:
            torch.func.vmap(getattr(torch.linalg, name))(tA)
        with pytest.raises(gt.linalg.LinAlgError) as ours:
            vmap(getattr(gt.linalg, name))(A)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(gt.linalg.LinAlgError, match=r"\(Batch element 2\): The solver failed"):
        vmap(gt.linalg.solve)(A, gt.ones(4, 3, dtype=A.dtype, device=device))

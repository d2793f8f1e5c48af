"""torch.exp_(x)-style in-place functions and the *_copy variants of the views, against
PyTorch on cpu and emulated cuda: values, that in-place ones return their input, that copies
own their storage, gradients and errors."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor._function_forms import COPY_VARIANTS, INPLACE_FUNCTIONS

torch = pytest.importorskip("torch")

_ARGS = {"clamp_": (0.2, 0.6), "clamp_max_": (0.5,), "clamp_min_": (0.5,), "clip_": (0.2, 0.6),
         "fill_": (3.0,), "xlogy_": (2.0,), "nan_to_num_": (0.0,)}
_SKIP_GENERIC = {"addmv_", "index_put_", "detach_",
                 # integer-only or tensor-argument forms: tests/gputensor/test_more_math.py
                 "as_strided_", "gcd_", "lcm_", "ldexp_"}


@pytest.mark.parametrize("name", [n for n in INPLACE_FUNCTIONS if n not in _SKIP_GENERIC])
def test_inplace_functions_match_torch(device, name) -> None:
    data = np.random.default_rng(0).uniform(0.1, 0.9, (2, 3))
    t = torch.tensor(data)
    g = gt.tensor(data, device=device)
    want = getattr(torch, name)(t, *_ARGS.get(name, ()))
    got = getattr(gt, name)(g, *_ARGS.get(name, ()))
    assert got is g and want is t
    np.testing.assert_allclose(g.cpu().numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def test_inplace_functions_with_tensor_arguments(device) -> None:
    v, m, x = np.ones(2), np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    tv, gv = torch.tensor(v), gt.tensor(v, device=device)
    torch.addmv_(tv, torch.tensor(m), torch.tensor(x), alpha=2)
    gt.addmv_(gv, gt.tensor(m, device=device), gt.tensor(x, device=device), alpha=2)
    np.testing.assert_allclose(gv.cpu().numpy(), tv.numpy())
    gi = gt.zeros(4, device=device)
    gt.index_put_(gi, (gt.tensor([1, 3], device=device),), gt.tensor(5.0, device=device))
    assert gi.tolist() == [0.0, 5.0, 0.0, 5.0]
    leaf = gt.ones(2, device=device, requires_grad=True) * 2
    assert gt.detach_(leaf) is leaf and leaf.grad_fn is None
    with pytest.raises(TypeError, match=r"exp_\(\): argument 'input' \(position 1\) must be "
                                        r"Tensor, not float"):
        gt.exp_(1.0)


_COPY_CASES = {
    "alias": (), "as_strided": ((2, 2), (1, 2), 1), "detach": (), "diagonal": (0, 0, 1),
    "expand": ((2, 2, 3),), "narrow": (1, 1, 2), "permute": ((1, 0),), "select": (1, 2),
    "slice": (1, 0, 3, 2), "split": (1,), "split_with_sizes": ([1, 1],), "squeeze": (),
    "t": (), "transpose": (0, 1), "unbind": (1,), "unfold": (1, 2, 1), "unsqueeze": (0,),
    "view": ((3, 2),)}


@pytest.mark.parametrize("view", COPY_VARIANTS)
def test_copy_variants_match_torch_and_own_their_storage(device, view) -> None:
    data = np.arange(6.0).reshape(2, 3)
    args = _COPY_CASES[view]
    want = getattr(torch, f"{view}_copy")(torch.tensor(data), *args)
    x = gt.tensor(data, device=device)
    got = getattr(gt, f"{view}_copy")(x, *args)
    wants = want if isinstance(want, tuple | list) else (want,)
    gots = got if isinstance(got, tuple | list) else (got,)
    assert len(gots) == len(wants)
    for g, w in zip(gots, wants, strict=True):
        assert tuple(g.shape) == tuple(w.shape) and g.is_contiguous()
        assert g.untyped_storage() is not x.untyped_storage()
        np.testing.assert_array_equal(g.cpu().numpy(), w.numpy())


def test_copy_variants_carry_gradients_and_fill_out(device) -> None:
    x = gt.arange(6.0, device=device).reshape(2, 3).requires_grad_()
    y = gt.transpose_copy(x, 0, 1)
    (y * gt.arange(6.0, device=device).reshape(3, 2)).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
    out = gt.empty(0, device=device)
    assert gt.t_copy(x.detach(), out=out) is out and out.tolist() == [[0.0, 3.0], [1.0, 4.0],
                                                                       [2.0, 5.0]]

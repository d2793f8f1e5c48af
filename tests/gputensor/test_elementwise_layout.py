"""The layout of a new elementwise result follows PyTorch's TensorIterator: operands of one
dense layout keep it (``x.t() * 2`` is transposed too), mixed layouts take the dim order the
operands give in turn, and broadcasting or slicing falls back to row-major where PyTorch does.
Values are unchanged by the layout; the CPU kernels then loop over memory order."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

CASES = {
    "transpose_scalar": lambda lib, a, b: a.t() * 2,
    "transpose_both": lambda lib, a, b: a.t() + b.t(),
    "transposed_then_contiguous": lambda lib, a, b: a.t() + b.t().contiguous(),
    "contiguous_then_transposed": lambda lib, a, b: a.t().contiguous() + b.t(),
    "unary": lambda lib, a, b: a.t().sigmoid(),
    "permuted_3d": lambda lib, a, b: a.reshape(4, 2, 8).permute(2, 0, 1) * 3,
    "permuted_broadcast": lambda lib, a, b: a.reshape(4, 2, 8).permute(2, 0, 1)
    + b.reshape(4, 2, 8)[0, 0, :, None, None],
    "expanded_transposed": lambda lib, a, b: a[:, None, :].expand(8, 3, 8).transpose(0, 2) + 1,
    "sliced": lambda lib, a, b: a[:, ::2] * b[:, ::2],
    "where": lambda lib, a, b: lib.where(a.t() > 0, a.t(), b.t()),
    "comparison": lambda lib, a, b: a.t() > b.t(),
    "promotion": lambda lib, a, b: a.t() + (b.t() * 10).to(lib.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_layout_matches_torch(name: str, device: str) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 8, 8)).astype(np.float32)
    fn = CASES[name]
    expect = fn(torch, torch.from_numpy(x), torch.from_numpy(y))
    got = fn(gt, gt.tensor(x, device=device), gt.tensor(y, device=device))
    assert got.stride() == expect.stride(), (got.stride(), expect.stride())
    assert got.is_contiguous() == expect.is_contiguous()
    np.testing.assert_allclose(got.cpu().numpy(), expect.numpy(), rtol=1e-6, atol=1e-7)


def test_view_after_transposed_op_raises_like_torch(device: str) -> None:
    x = gt.randn(4, 6, device=device)
    y = x.t() * 2
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        y.view(24)
    assert y.reshape(24).shape == (24,)


def test_in_place_and_out_keep_their_own_layout(device: str) -> None:
    x = gt.randn(4, 6, device=device)
    out = gt.empty(6, 4, device=device)
    gt.mul(x.t(), 2, out=out)
    assert out.stride() == (4, 1)
    np.testing.assert_allclose(out.cpu().numpy(), x.t().cpu().numpy() * 2, rtol=1e-6)
    z = gt.zeros(6, 4, device=device)
    z.add_(x.t())
    assert z.stride() == (4, 1)
    np.testing.assert_allclose(z.cpu().numpy(), x.t().cpu().numpy(), rtol=1e-6)


def test_gradients_through_permuted_results(device: str) -> None:
    a = gt.randn(3, 5, dtype=gt.float64, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(lambda a: (a.t().exp() * a.t()).sum(0), (a,))


def test_empty_views_past_their_storage(device: str) -> None:
    # zeros(3, 1, 0)[2] starts past its 0-byte storage; copying it (select_scatter's _copy)
    # takes the dense fast path, which must not build an array over the missing bytes.
    src = gt.zeros(3, 1, 0, dtype=gt.bool, device=device)[2]
    x = gt.zeros(1, 0, 1, dtype=gt.bool, device=device)
    got = gt.select_scatter(x, src, -1, 0)
    expect = torch.select_scatter(torch.zeros(1, 0, 1, dtype=torch.bool),
                                  torch.zeros(3, 1, 0, dtype=torch.bool)[2], -1, 0)
    assert tuple(got.shape) == tuple(expect.shape)
    assert (src.clone() * 2).shape == (1, 0)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_float_exceptions_are_silent_and_broadcasts_match_torch(device: str, dtype: gt.dtype
                                                                 ) -> None:
    """1/0, 0/0, inf - inf and overflow give PyTorch's values without NumPy's RuntimeWarnings
    (the CPU runs small add/sub/mul/div through NumPy's ufuncs), same-shape, broadcast, strided
    and with Python scalars."""
    import warnings

    import torch
    big = 3e38 if dtype is gt.float32 else 1.7e308
    x = np.array([[0.0, 1.0, -1.0, np.inf], [big, -big, np.nan, 2.0]])
    y = np.array([0.0, np.inf, big, -np.inf])
    cases = {
        "div": lambda m, a, b: a / b, "add": lambda m, a, b: a + b,
        "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
        "div_t": lambda m, a, b: a.t() / a.t(), "mul_scalar": lambda m, a, b: a * big,
        "sub_alpha": lambda m, a, b: m.sub(a, b, alpha=1),
        "inplace": lambda m, a, b: a.clone().div_(b),
    }
    tdt = getattr(torch, str(dtype).split(".")[-1])
    for name, fn in cases.items():
        want = fn(torch, torch.tensor(x, dtype=tdt), torch.tensor(y, dtype=tdt))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = fn(gt, gt.tensor(x, dtype=dtype, device=device),
                     gt.tensor(y, dtype=dtype, device=device))
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy(), err_msg=name)

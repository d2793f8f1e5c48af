"""Gradients of reductions and scans: gradcheck/gradgradcheck in float64, the special cases
(zeros in prod/cumprod, ties in the extrema, zero norms and deviations), and PyTorch's values."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from gputensor.kernels.registry import OPS
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def leaf(values: np.ndarray | list, device: str) -> gt.Tensor:
    return gt.tensor(np.asarray(values, dtype=np.float64), device=device).requires_grad_()


def values(shape: tuple[int, ...], seed: int = 0, lo: float = -2.0, hi: float = 2.0
           ) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, size=shape)


CASES: dict[str, Callable] = {
    "sum": lambda a: a.sum(),
    "sum_dims": lambda a: a.sum((0, 1), keepdim=True),
    "mean_dim": lambda a: a.mean(-1),
    "nansum": lambda a: a.nansum(),
    "nansum_dim": lambda a: gt.nansum(a, 1, keepdim=True),
    "prod": lambda a: a.prod(),
    "prod_dim": lambda a: a.prod(1),
    "prod_dim_keepdim": lambda a: a.prod(0, keepdim=True),
    "prod_dtype": lambda a: a.float().prod(1, dtype=gt.float64),
    "amax": lambda a: a.amax(),
    "amax_dim": lambda a: a.amax(0),
    "amin_dims_keepdim": lambda a: a.amin((0, 1), keepdim=True),
    "max": lambda a: a.max(),
    "min": lambda a: gt.min(a),
    "max_dim": lambda a: a.max(1)[0],
    "max_dim_keepdim": lambda a: gt.max(a, 0, keepdim=True).values,
    "min_dim": lambda a: a.min(-1).values,
    "aminmax": lambda a: gt.aminmax(a),
    "aminmax_dim": lambda a: tuple(gt.aminmax(a, dim=1, keepdim=True)),
    "var": lambda a: a.var(),
    "var_dim": lambda a: a.var(1),
    "var_keepdim": lambda a: a.var(0, keepdim=True),
    "var_correction": lambda a: gt.var(a, 1, correction=0),
    "var_unbiased_false": lambda a: a.var(0, unbiased=False),
    "var_legacy_bool": lambda a: gt.var(a, False),
    "std": lambda a: a.std(),
    "std_dim": lambda a: a.std(-1, keepdim=True),
    "std_correction": lambda a: gt.std(a, (0, 1), correction=2),
    "var_mean": lambda a: gt.var_mean(a, 1),
    "var_mean_all": lambda a: gt.var_mean(a),
    "std_mean": lambda a: gt.std_mean(a, 0, unbiased=False, keepdim=True),
    "std_mean_only_mean": lambda a: gt.std_mean(a, 1)[1],
    "var_mean_only_var": lambda a: gt.var_mean(a, 1)[0],
    "norm": lambda a: a.norm(),
    "norm_fro_dim": lambda a: gt.norm(a, "fro", dim=(0, 1)),
    "norm2_dim": lambda a: a.norm(2, dim=1, keepdim=True),
    "norm1": lambda a: a.norm(1),
    "norm1_dim": lambda a: a.norm(1, dim=0),
    "norm_inf": lambda a: a.norm(float("inf"), dim=1),
    "norm_ninf": lambda a: a.norm(float("-inf")),
    "norm3": lambda a: a.norm(3, dim=1),
    "norm_half": lambda a: a.norm(0.5, dim=0),
    "norm_1_5": lambda a: a.norm(1.5),
    "norm0": lambda a: a.norm(0) * a.sum(),
    "norm_dtype": lambda a: a.float().norm(dtype=gt.float64),
    "logsumexp": lambda a: a.logsumexp(1),
    "logsumexp_dims": lambda a: gt.logsumexp(a, (0, 1), keepdim=True),
    "cumsum": lambda a: a.cumsum(1),
    "cumsum0": lambda a: a.cumsum(0),
    "cumsum_neg": lambda a: gt.cumsum(a, -1),
    "cumprod": lambda a: a.cumprod(1),
    "cumprod0": lambda a: a.cumprod(0),
    "softmax": lambda a: a.softmax(1),
    "softmax0": lambda a: gt.softmax(a, 0),
    "softmax_implicit": lambda a: gt.softmax(a),
    "log_softmax": lambda a: a.log_softmax(-1),
    "log_softmax0": lambda a: gt.log_softmax(a, 0),
    "softmax_dtype": lambda a: a.float().softmax(1, dtype=gt.float64),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name: str, device: str) -> None:
    x = leaf(values((3, 4)), device)
    fn = CASES[name]
    if name.endswith("_dtype"):  # the float32 round trip is fine for gradcheck only at float32
        x = leaf(values((3, 4)).astype(np.float32).astype(np.float64), device)
        gx = gt.autograd.grad(fn(x).sum(), (x,))[0]
        assert gx.dtype is gt.float64
        return
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_3d_middle_dims(device: str) -> None:
    """Reductions and scans over a middle dim walk columns in the kernels."""
    x = leaf(values((2, 3, 2), seed=1), device)
    for fn in (lambda a: a.softmax(1), lambda a: a.log_softmax(1), lambda a: a.cumsum(1),
               lambda a: a.cumprod(1), lambda a: a.prod(1), lambda a: a.max(1)[0],
               lambda a: a.var((0, 2)), lambda a: a.norm(dim=(0, 2)),
               lambda a: a.logsumexp((0, 2))):
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


def test_zero_dim_inputs(device: str) -> None:
    x = leaf(1.5, device)
    for fn in (lambda a: a.sum(), lambda a: a.prod(), lambda a: a.amax(), lambda a: a.max(),
               lambda a: a.max(0)[0], lambda a: a.cumsum(0), lambda a: a.cumprod(0),
               lambda a: a.softmax(0), lambda a: a.log_softmax(0), lambda a: a.logsumexp(0),
               lambda a: a.norm()):
        assert gradcheck(fn, (x,))


# -- special cases ------------------------------------------------------------------------------
def _torch_grads(fn_gt: Callable, fn_torch: Callable, data: np.ndarray, device: str,
                 weight: np.ndarray | None = None) -> tuple[gt.Tensor, torch.Tensor]:
    x = leaf(data, device)
    t = torch.tensor(data, requires_grad=True)
    out, tout = fn_gt(x), fn_torch(t)
    w = np.random.default_rng(3).uniform(0.5, 1.5, tuple(tout.shape)) if weight is None \
        else weight
    (gx,) = gt.autograd.grad(out, (x,), gt.tensor(w, device=device))
    (tx,) = torch.autograd.grad(tout, (t,), torch.tensor(w))
    return gx, tx


ZEROS = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [0.5, -2.0, 1.5, 3.0]])

SPECIAL: dict[str, tuple[Callable, Callable, np.ndarray]] = {
    "prod_zeros_all": (lambda a: a.prod(), lambda a: a.prod(), ZEROS[[0, 2]]),
    "prod_zeros_two": (lambda a: a.prod(), lambda a: a.prod(), ZEROS),
    "prod_zeros_dim": (lambda a: a.prod(1), lambda a: a.prod(1), ZEROS),
    "prod_zeros_dim0": (lambda a: a.prod(0, keepdim=True), lambda a: a.prod(0, keepdim=True),
                        ZEROS),
    "cumprod_zeros": (lambda a: a.cumprod(1), lambda a: a.cumprod(1), ZEROS),
    "cumprod_zeros_dim0": (lambda a: a.cumprod(0), lambda a: a.cumprod(0), ZEROS.T),
    "amax_ties": (lambda a: a.amax(1), lambda a: a.amax(1),
                  np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])),
    "max_ties": (lambda a: a.max(), lambda a: a.max(), np.array([[1.0, 3.0], [3.0, 3.0]])),
    "min_dim_ties": (lambda a: a.min(1)[0], lambda a: a.min(1)[0],
                     np.array([[1.0, 1.0, 2.0], [0.0, 5.0, 0.0]])),
    "max_nan": (lambda a: a.max(), lambda a: a.max(),
                np.array([[1.0, np.nan, 3.0], [0.0, 5.0, np.nan]])),
    "norm_zero_row": (lambda a: a.norm(dim=1), lambda a: a.norm(dim=1),
                      np.array([[0.0, 0.0], [3.0, 4.0]])),
    "norm3_zero_row": (lambda a: a.norm(3, dim=1), lambda a: a.norm(3, dim=1),
                       np.array([[0.0, 0.0], [3.0, -4.0]])),
    "norm_half_zero": (lambda a: a.norm(0.5, dim=1), lambda a: a.norm(0.5, dim=1),
                       np.array([[0.0, 2.0], [3.0, -4.0]])),
    "norm_inf_ties": (lambda a: a.norm(float("inf"), dim=1),
                      lambda a: a.norm(float("inf"), dim=1),
                      np.array([[-2.0, 2.0, 1.0], [3.0, 0.0, -1.0]])),
    "std_constant": (lambda a: a.std(1), lambda a: a.std(1),
                     np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])),
    "nansum_nan": (lambda a: a.nansum(1), lambda a: a.nansum(1),
                   np.array([[1.0, np.nan, 3.0], [0.5, 5.0, 2.0]])),
    "logsumexp_neg_inf": (lambda a: a.logsumexp(1), lambda a: a.logsumexp(1),
                          np.array([[1.0, -np.inf, 3.0], [0.5, 5.0, 2.0]])),
    "softmax_large": (lambda a: a.softmax(1), lambda a: a.softmax(1),
                      np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])),
    "log_softmax_large": (lambda a: a.log_softmax(0), lambda a: a.log_softmax(0),
                          np.array([[1000.0, 0.0], [-1000.0, 2.0]])),
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_cases_match_torch(name: str, device: str) -> None:
    fn_gt, fn_torch, data = SPECIAL[name]
    gx, tx = _torch_grads(fn_gt, fn_torch, data, device)
    assert not np.isnan(gx.cpu().numpy()).any() or np.isnan(data).any()
    assert_close(gx, tx, rtol=1e-10, atol=1e-10)


def test_nan_maximum_gets_the_gradient(device: str) -> None:
    """A slice whose maximum is NaN sends its gradient to the NaN (PyTorch does so for max();
    its amax(dim) gives the whole slice NaN gradients instead)."""
    x = leaf([[1.0, np.nan, 3.0], [0.0, 5.0, 2.0]], device)
    (g,) = gt.autograd.grad(x.amax(1).sum(), (x,))
    assert g.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]


@pytest.mark.parametrize("data", [ZEROS, np.array([[0.0, 2.0, 0.0, 0.0, 1.5, -1.0],
                                                   [1.0, 0.0, 3.0, 0.5, 0.0, 2.0]])])
def test_prod_and_cumprod_with_zeros_pass_gradgradcheck(data: np.ndarray, device: str) -> None:
    """One, two and three zeros in a slice: first and second derivatives stay exact."""
    x = leaf(data, device)
    for fn in (lambda a: a.prod(), lambda a: a.prod(1), lambda a: a.prod(0, keepdim=True),
               lambda a: a.cumprod(1), lambda a: a.cumprod(0)):
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


def test_max_with_dim_indices_get_no_gradient(device: str) -> None:
    x = leaf(values((3, 4)), device)
    values_, indices = x.max(1)
    assert values_.requires_grad and not indices.requires_grad
    (g,) = gt.autograd.grad(values_.sum(), (x,))
    assert g.sum().item() == 3 and g.max().item() == 1


def test_max_min_elementwise_form_differentiates_both_operands(device: str) -> None:
    x, y = leaf(values((3, 4), seed=4), device), leaf(values((4,), seed=5), device)
    assert gradcheck(lambda a, b: gt.max(a, b) * gt.min(a, b), (x, y))
    assert gradgradcheck(lambda a, b: gt.max(a, b) + gt.min(b, a), (x, y))


def test_reverse_cumsum_is_cumsum_flipped(device: str) -> None:
    x = gt.tensor(values((3, 4, 2), seed=6), device=device)
    for d in range(3):
        expected = np.flip(np.flip(x.cpu().numpy(), d).cumsum(d), d)
        assert_close(OPS["_reverse_cumsum"].frontend(x, d), expected, rtol=1e-12, atol=1e-12)


# -- the fused softmax backward ops ----------------------------------------------------------
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1), ((4,), 0)])
def test_fused_softmax_backward_matches_torch(log: bool, shape: tuple, dim: int,
                                               device: str) -> None:
    data = values(shape, seed=7).astype(np.float32)
    w = values(shape, seed=8).astype(np.float32)
    x = gt.tensor(data, device=device).requires_grad_()
    t = torch.tensor(data, requires_grad=True)
    out = gt.log_softmax(x, dim) if log else gt.softmax(x, dim)
    tout = torch.log_softmax(t, dim) if log else torch.softmax(t, dim)
    assert out.grad_fn.name() == ("LogSoftmaxBackward0" if log else "SoftmaxBackward0")
    (gx,) = gt.autograd.grad(out, (x,), gt.tensor(w, device=device))
    (tx,) = torch.autograd.grad(tout, (t,), torch.tensor(w))
    assert_close(gx, tx, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["_softmax_backward", "_log_softmax_backward"])
def test_fused_softmax_backward_ops_have_their_own_derivatives(name: str, device: str) -> None:
    y = leaf(values((3, 4), seed=9), device)
    g = leaf(values((3, 4), seed=10), device)
    op = OPS[name].frontend
    out = y.detach().softmax(1) if name == "_softmax_backward" else y.detach().log_softmax(1)
    out.requires_grad_()
    assert gradcheck(lambda a, b: op(a, b, 1), (g, out))
    assert gradgradcheck(lambda a, b: op(a, b, 0), (g, out))


def test_fused_softmax_backward_checks_its_operands(device: str) -> None:
    a = gt.zeros(3, 4, device=device)
    with pytest.raises(RuntimeError, match=r"must match output"):
        OPS["_softmax_backward"].frontend(a, gt.zeros(4, 3, device=device), 1)


def test_cross_entropy_like_training_step(device: str) -> None:
    """log_softmax + gather-free NLL through a one-hot mask, compared with PyTorch."""
    logits = values((4, 5), seed=11).astype(np.float32)
    onehot = np.eye(5, dtype=np.float32)[[0, 3, 1, 4]]
    x = gt.tensor(logits, device=device).requires_grad_()
    loss = -(gt.log_softmax(x, 1) * gt.tensor(onehot, device=device)).sum(1).mean()
    loss.backward()
    t = torch.tensor(logits, requires_grad=True)
    tl = -(torch.log_softmax(t, 1) * torch.tensor(onehot)).sum(1).mean()
    tl.backward()
    assert_close(loss.detach(), tl.detach(), rtol=1e-6, atol=1e-6)
    assert_close(x.grad, t.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["var", "std", "norm", "logsumexp", "softmax", "cumsum",
                                  "amax", "prod"])
def test_float32_gradients_match_torch(name: str, device: str) -> None:
    fns = {"var": lambda m, a: m.var(a, 1), "std": lambda m, a: m.std(a, 0),
           "norm": lambda m, a: m.norm(a, dim=1), "logsumexp": lambda m, a: m.logsumexp(a, 1),
           "softmax": lambda m, a: m.softmax(a, 0), "cumsum": lambda m, a: m.cumsum(a, 1),
           "amax": lambda m, a: m.amax(a, 1), "prod": lambda m, a: m.prod(a, 1)}
    data = values((3, 4), seed=12).astype(np.float32)
    x = gt.tensor(data, device=device).requires_grad_()
    t = torch.tensor(data, requires_grad=True)
    out, tout = fns[name](gt, x), fns[name](torch, t)
    w = values(tuple(tout.shape), seed=13).astype(np.float32)
    (gx,) = gt.autograd.grad(out, (x,), gt.tensor(w, device=device))
    (tx,) = torch.autograd.grad(tout, (t,), torch.tensor(w))
    assert gx.dtype is gt.float32
    assert_close(gx, tx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", [((700, 800), 1), ((700, 800), 0), ((3, 5, 4), 1),
                                       ((64, 10), 1)])
def test_softmax_forward_matches_torch(log: bool, shape: tuple, dim: int, device: str) -> None:
    """The fused forward kernel (row and column layouts, the threaded variant above 2^19
    elements) with NaN, -inf and +inf in some slices."""
    data = (np.random.default_rng(14).standard_normal(shape) * 5).astype(np.float32)
    data[0, :2] = np.nan
    data[1, :] = -np.inf
    data[2, 1] = -np.inf
    data[-1, 0] = np.inf
    fn = "log_softmax" if log else "softmax"
    out = getattr(gt, fn)(gt.tensor(data, device=device), dim)
    assert_close(out, getattr(torch, fn)(torch.tensor(data), dim), rtol=2e-5, atol=1e-5)


# op, applied to the (values, indices) it returns: PyTorch saves only the indices
VALUE_INDEX_OPS = {
    "sort": lambda m, x: m.sort(x, 1),
    "topk": lambda m, x: m.topk(x, 2, 1),
    "kthvalue": lambda m, x: m.kthvalue(x, 2, 1),
    "max_dim": lambda m, x: m.max(x, 1),
    "min_dim_keepdim": lambda m, x: m.min(x, 0, keepdim=True),
}


@pytest.mark.parametrize("name", VALUE_INDEX_OPS)
def test_in_place_op_on_the_values_keeps_backward_valid(device: str, name: str) -> None:
    """The values these ops return may be modified in place (x.sort()[0].relu_()) before
    backward, as in PyTorch: their derivatives read the indices, never the values."""
    data = values((3, 4), seed=7)
    x = leaf(data, device)
    tx = torch.tensor(data, requires_grad=True)
    weights = values((3, 4), seed=8)
    for lib, inp in ((gt, x), (torch, tx)):
        vals = VALUE_INDEX_OPS[name](lib, inp)[0].relu_()
        w = weights.reshape(-1)[:vals.numel()].reshape(tuple(vals.shape))
        (vals * (gt.tensor(w, device=device) if lib is gt else torch.tensor(w))).sum().backward()
    assert_close(x.grad, tx.grad)

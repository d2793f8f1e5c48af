"""Regressions for the differences from PyTorch that the registry fuzz guard found (issue 15):
each test runs the fuzz case (or its smallest form) on gputensor and on PyTorch, on cpu and
emulated cuda, and compares results, dtypes or the error raised."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, assert_same_error, synced, torch

pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch (CPU) oracle not installed")

INF, NAN = float("inf"), float("nan")
Build = Callable[[Any, str], Any]


def same_result(build: Build, device: str, **tol: float) -> None:
    """``build(lib, device)`` gives the same values, dtype and shape in both libraries."""
    assert_close(build(gt, device), build(torch, "cpu"), **tol)


def same_error(build: Build, device: str) -> None:
    assert_same_error(lambda: build(gt, device), lambda: build(torch, "cpu"))


def t(lib: Any, device: str, data: Any, dtype: str | None = None) -> Any:
    return lib.tensor(data, device=device, dtype=None if dtype is None else getattr(lib, dtype))


# -- leaked internal errors ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_of_0d_raises_index_error(device: str, name: str) -> None:
    same_error(lambda L, d: getattr(L, name)(t(L, d, 1.0)), device)
    same_error(lambda L, d: getattr(L, name)(t(L, d, 1.0), x=t(L, d, 1.0)), device)


@pytest.mark.parametrize("nan", [None, 2.5])
def test_nan_to_num_nan_none_is_zero(device: str, nan: Any) -> None:
    same_result(lambda L, d: L.nan_to_num(t(L, d, [1.0, NAN, INF]), nan=nan), device)
    same_result(lambda L, d: L.nan_to_num(t(L, d, [1, 2]), nan=nan), device)


def test_unique_consecutive_0d_with_dim(device: str) -> None:
    same_error(lambda L, d: L.unique_consecutive(t(L, d, 1.0), dim=0), device)
    with pytest.raises(RuntimeError, match="not implemented for 'ComplexFloat'"):  # dtype first
        gt.unique(gt.tensor(1j, device=device), dim=0)


def test_rand_like_float16_0d(device: str) -> None:
    r = gt.rand_like(gt.tensor(1.0, dtype=gt.float16, device=device))
    assert r.shape == () and r.dtype is gt.float16 and 0 <= r.item() < 1


@pytest.mark.parametrize("k", [0, 1])
def test_topk_of_0d(device: str, k: int) -> None:
    same_result(lambda L, d: tuple(L.topk(t(L, d, 1.5), k)), device)
    same_error(lambda L, d: L.topk(t(L, d, 1.5), 2), device)


def test_setitem_drops_leading_unit_dims_of_value(device: str) -> None:
    def tensor_index(L: Any, d: str) -> Any:
        x = L.zeros(1, device=d)
        x[t(L, d, 0)] = t(L, d, [3.0])
        return x

    def int_index(L: Any, d: str) -> Any:
        x = L.zeros(2, device=d)
        x[0] = t(L, d, [[3.0]])
        return x

    same_result(tensor_index, device)
    same_result(int_index, device)


def test_setitem_value_shape_mismatch_is_runtime_error(device: str) -> None:
    def put(L: Any, d: str) -> None:
        x = L.zeros(3, device=d)
        x[t(L, d, [0, 1])] = t(L, d, [1.0, 2.0, 3.0])
    same_error(put, device)


def test_setitem_value_checked_before_index(device: str) -> None:
    def put(L: Any, d: str) -> None:
        x = L.zeros((), dtype=L.uint8, device=d)
        x[0] = -2.25
    same_error(put, device)


def test_setitem_leading_unit_dims_keep_gradient(device: str) -> None:
    def grad(L: Any, d: str) -> Any:
        x = L.zeros(3, device=d, requires_grad=True).clone()
        v = L.ones(1, 1, device=d, requires_grad=True)
        x[1] = v
        (x * 2).sum().backward()
        return v.grad
    same_result(grad, device)


# -- garbage results -----------------------------------------------------------------------------
@pytest.mark.parametrize("index", ["True,True", "False,False", "True,False", "True,...,True",
                                   "0,True,True", "None,True,None,False", "True,i,True"])
def test_getitem_several_bools_add_one_dim(device: str, index: str) -> None:
    def get(L: Any, d: str) -> Any:
        x, i = L.arange(6, device=d).reshape(2, 3), t(L, d, [0, 1])  # noqa: F841 (eval)
        return x[eval(index)]
    same_result(get, device)


def test_getitem_bool_is_a_copy(device: str) -> None:
    x = gt.zeros(2, device=device)
    x[True][0, 0] = 5
    assert x.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("case", [
    ("add", "uint8", "int16", {"alpha": -3}, [255], [1]),
    ("add", "int8", "int64", {}, [100], [100]),
    ("mul", "uint8", "int32", {}, [200], [2]),
    ("atan2", "bool", "float32", {}, [True], [0.3]),
])
def test_elementwise_out_of_wider_dtype_rounds_to_result_dtype(device: str, case: tuple) -> None:
    name, dt, out_dt, kw, a, b = case
    other = "float16" if name == "atan2" else dt

    def run(L: Any, d: str) -> Any:
        out = L.empty(1, dtype=getattr(L, out_dt), device=d)
        getattr(L, name)(t(L, d, a, dt), t(L, d, b, other), out=out, **kw)
        return out
    same_result(run, device, atol=0, rtol=0)


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_var_mean_of_complex_with_inf_keeps_finite_imaginary_mean(device: str,
                                                                    name: str) -> None:
    def run(L: Any, d: str) -> Any:
        return getattr(L, name)(t(L, d, [1 + 1j, 3 - 2j, complex(-INF, 2.0)]), correction=0)
    var, mean = run(gt, device)
    tvar, tmean = run(torch, "cpu")
    assert_close(var, tvar)
    assert mean.imag.item() == pytest.approx(tmean.imag.item())
    same_result(lambda L, d: getattr(L, name)(t(L, d, [[1 + 2j, 3 - 1j], [0.5j, 2]]), 1,
                                              keepdim=True), device)
    same_result(lambda L, d: getattr(L, name)(L.ones(2, 0, dtype=L.complex64, device=d), 1),
                device)


def test_var_mean_of_complex_gradient(device: str) -> None:
    def grad(L: Any, d: str) -> Any:
        x = t(L, d, [[1 + 2j, 3 - 1j], [0.5j, 2]], "complex128").requires_grad_(True)
        s, m = L.std_mean(x, 1)
        (s.sum() + m.abs().sum()).backward()
        return x.grad
    same_result(grad, device)


def test_diff_n0_returns_the_input(device: str) -> None:
    same_result(lambda L, d: L.diff(t(L, d, [1.0, 2.0]), n=0, prepend=t(L, d, [5.0])), device)
    same_error(lambda L, d: L.diff(L.ones(2, 2, device=d), n=0, dim=0,
                                   append=L.ones(3, 3, device=d)), device)
    same_error(lambda L, d: L.diff(L.ones(2, 2, device=d), n=1, dim=0,
                                   append=L.ones(3, device=d)), device)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_tanh_at_large_and_special_values(device: str, dtype: str) -> None:
    values = [complex(400, 1), complex(-30, 2), complex(20, 1e30), complex(0.5, 0.3),
              complex(INF, 2), complex(-INF, INF), complex(NAN, 0), complex(NAN, 1),
              complex(1, INF), complex(0, INF), complex(-700, -3), 0j]
    same_result(lambda L, d: L.tanh(t(L, d, values, dtype)), device)


@pytest.mark.parametrize("args", [(0, 2.5, 2, 2, "uint8"), (-1, 3.3, 5, 3, "int64"),
                                  (0, INF, 3, 2, "float32"), (-5, INF, 1, 10, "int64"),
                                  (1, 2, 0, 10, "int32"), (0, 1, 4, 10, "float16")])
def test_logspace_steps_like_pytorch(device: str, args: tuple) -> None:
    start, end, steps, base, dtype = args
    same_result(lambda L, d: L.logspace(start, end, steps, base=base,
                                        dtype=getattr(L, dtype), device=d), device)


@pytest.mark.parametrize("args", [(0, INF, 2, "float16"), (0, INF, 3, "float32"),
                                  (-INF, 1, 3, "float32"), (1, INF, 1, "float32"),
                                  (-1, 3.3, 5, "uint8"), (2, -7, 5, "uint8"),
                                  (1 + 2j, 3, 5, None)])
def test_linspace_steps_like_pytorch(device: str, args: tuple) -> None:
    start, end, steps, dtype = args
    same_result(lambda L, d: L.linspace(start, end, steps, device=d,
                                        dtype=None if dtype is None else getattr(L, dtype)),
                device)


def test_range_factories_refuse_complex_ends_for_real_dtypes(device: str) -> None:
    same_error(lambda L, d: L.linspace(1 + 2j, 3, 5, dtype=L.float32, device=d), device)
    same_error(lambda L, d: L.linspace(-1.5, 3, 5, dtype=L.uint8, device=d), device)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "int64", "bool", "float16"])
@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_empty_tensor(device: str, dtype: str, name: str) -> None:
    same_result(lambda L, d: getattr(L, name)(L.ones(0, dtype=getattr(L, dtype), device=d)),
                device)


def test_clamp_bool_by_one_tensor_bound(device: str) -> None:
    b = [True, False]
    same_result(lambda L, d: L.clamp(t(L, d, b), min=t(L, d, True)), device)
    same_result(lambda L, d: L.clamp_max(t(L, d, b), t(L, d, [False, True])), device)
    same_result(lambda L, d: t(L, d, b).clamp_(min=t(L, d, [False, True])), device)
    same_result(lambda L, d: L.clamp(t(L, d, b), 0, 0), device)
    for bounds in ({"min": True}, {"min": True, "max": False},
                   {"min": t(torch, "cpu", b), "max": t(torch, "cpu", False)}):
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            gt.clamp(gt.tensor(b, device=device),
                     **{k: gt.tensor(v.tolist(), device=device) if hasattr(v, "tolist") else v
                        for k, v in bounds.items()})


def test_logit_of_bool(device: str) -> None:
    same_result(lambda L, d: L.logit(t(L, d, [True, False])), device)
    same_result(lambda L, d: L.logit(t(L, d, [True, False]), eps=0.1), device)


def test_where_takes_a_uint8_condition(device: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_result(lambda L, d: L.where(t(L, d, [1, 0, 2], "uint8"), L.ones(3, device=d),
                                         L.zeros(3, device=d)), device)
    with pytest.warns(UserWarning, match="uint8 condition"):
        gt.where(gt.tensor([1, 0], dtype=gt.uint8, device=device), 1.0, 0.0)


def test_put_into_0d_with_repeated_index(device: str) -> None:
    same_result(lambda L, d: t(L, d, 1.0).put(t(L, d, [0, -1]), t(L, d, [5.0, 7.0]), True),
                device)

    def grad(L: Any, d: str) -> Any:
        x = t(L, d, 1.0).requires_grad_(True)
        s = t(L, d, [5.0, 7.0]).requires_grad_(True)
        y = x.clone() * 2
        y.put_(t(L, d, [0, -1]), s, True)
        (y * 3).backward()
        return x.grad, s.grad
    same_result(grad, device)


def test_logsumexp_of_complex(device: str) -> None:
    data = [[1 + 1j, 2 - 1j], [complex(INF, 0), 1j]]
    same_result(lambda L, d: L.logsumexp(t(L, d, data), 1), device)
    same_result(lambda L, d: L.logsumexp(t(L, d, data), 0, keepdim=True), device)
    same_result(lambda L, d: L.logsumexp(L.ones(0, 2, dtype=L.complex64, device=d), 0), device)

    def grad(L: Any, d: str) -> Any:
        x = t(L, d, [[1 + 1j, 2 - 1j], [3 + 0j, 1j]], "complex128").requires_grad_(True)
        L.logsumexp(x, 1).abs().sum().backward()
        return x.grad
    same_result(grad, device)


# -- result dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64"])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_trapezoid_dtypes(device: str, dtype: str, n: int) -> None:
    for name in ("trapezoid", "cumulative_trapezoid"):
        def run(L: Any, d: str, name: str = name) -> Any:
            return getattr(L, name)(L.ones(2, n, dtype=getattr(L, dtype), device=d))
        if dtype == "bool" and (n or name == "cumulative_trapezoid"):
            same_error(run, device)
        else:
            same_result(run, device)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "int32", "float16"])
def test_nansum_of_integers_is_int64(device: str, dtype: str) -> None:
    same_result(lambda L, d: L.nansum(L.ones(2, 3, dtype=getattr(L, dtype), device=d)), device)
    same_result(lambda L, d: L.nansum(L.ones(2, 3, dtype=getattr(L, dtype), device=d), 1),
                device)


@pytest.mark.parametrize("wdtype", ["float32", "float16", "int32", "bool"])
def test_bincount_of_empty_input_is_int64(device: str, wdtype: str) -> None:
    same_result(lambda L, d: L.bincount(L.ones(0, dtype=L.int64, device=d),
                                        weights=L.ones(0, dtype=getattr(L, wdtype), device=d),
                                        minlength=2), device)


def test_addr_result_dtype_follows_the_tensors(device: str) -> None:
    def run(beta: Any, alpha: Any, dtype: str = "bool") -> Build:
        vals = ([[1, 0], [0, 0]], [1, 0], [1, 1])
        return lambda L, d: L.addr(*(t(L, d, v, dtype) for v in vals), beta=beta, alpha=alpha)
    same_result(run(0, 2), device)
    same_result(run(True, True), device)
    same_result(run(1, 1), device)
    same_result(run(2, 3, "int32"), device)
    same_result(run(0.5, 2, "float32"), device)
    same_error(run(True, False, "int64"), device)
    same_error(run(0.5, 2, "int64"), device)


def test_block_diag_promotes_0d_tensors_as_0d(device: str) -> None:
    same_result(lambda L, d: L.block_diag(t(L, d, True), t(L, d, 1.5, "float16"),
                                          L.ones(0, dtype=L.bfloat16, device=d)), device)
    same_result(lambda L, d: L.block_diag(t(L, d, 1), t(L, d, [1], "uint8")), device)


# -- exception types and the order of checks -----------------------------------------------------
ERROR_CASES: dict[str, Build] = {
    "narrow_past_end": lambda L, d: L.arange(5, device=d).narrow(0, 3, 4),
    "narrow_start": lambda L, d: L.arange(5, device=d).narrow(0, 6, 0),
    "narrow_length": lambda L, d: L.arange(5, device=d).narrow(0, 6, -1),
    "kthvalue_empty_dim": lambda L, d: L.kthvalue(L.ones(2, 0, device=d), 5),
    "kthvalue_bool": lambda L, d: L.kthvalue(t(L, d, [True, False]), 1),
    "topk_k_before_dtype": lambda L, d: L.topk(L.ones(2, dtype=L.complex64, device=d), 3),
    "adjoint_1d": lambda L, d: L.ones(3, device=d).adjoint(),
    "aminmax_empty_dim": lambda L, d: L.aminmax(L.ones(2, 0, device=d), dim=1),
    "gather_out_of_range": lambda L, d: L.gather(L.ones(3, device=d), 0, t(L, d, [5])),
    "scatter_out_of_range": lambda L, d: L.scatter(L.ones(3, device=d), 0, t(L, d, [-1]),
                                                   L.ones(1, device=d)),
    "scatter_add_dim_first": lambda L, d: L.scatter_add(L.ones(3, device=d), 3, t(L, d, [0.0]),
                                                        L.ones(1, device=d)),
    "argmax_empty": lambda L, d: L.argmax(L.ones(0, device=d)),
    "argmin_empty": lambda L, d: L.argmin(L.ones(2, 0, device=d)),
    "max_empty_complex": lambda L, d: L.max(L.ones(0, dtype=L.complex64, device=d)),
    "min_empty_dim_complex": lambda L, d: L.min(L.ones(2, 0, dtype=L.complex64, device=d), 1),
    "logcumsumexp_dim_first": lambda L, d: L.logcumsumexp(L.ones(3, dtype=L.int64, device=d), 4),
    "softmax_dim_first": lambda L, d: L.softmax(L.ones(3, dtype=L.int64, device=d), 4),
    "log_softmax_dim_first": lambda L, d: L.log_softmax(L.ones(3, dtype=L.int64, device=d), 4),
    "movedim_range_first": lambda L, d: L.movedim(L.ones(2, 3, device=d), (0, 0), (5, 1)),
    "movedim_repeat_0d": lambda L, d: L.movedim(t(L, d, 1.0), (0, 0), (0, 0)),
    "flip_repeat_first": lambda L, d: L.flip(L.ones(2, 3, device=d), (0, 0, 5)),
    "renorm_1d": lambda L, d: L.renorm(L.ones(3, device=d), 2, 3, 1.0),
    "renorm_0d": lambda L, d: L.renorm(t(L, d, 1.0), 2, 0, 1.0),
    "repeat_no_sizes": lambda L, d: L.ones(3, device=d).repeat(),
    "index_add_0d_source": lambda L, d: L.index_add(t(L, d, True), 0, t(L, d, [], "int64"),
                                                    t(L, d, False)),
    "index_add_source_rank": lambda L, d: L.index_add(t(L, d, 1.0), 0, t(L, d, [0]),
                                                      t(L, d, [2.0])),
    "index_copy_scalar_source": lambda L, d: L.index_copy(t(L, d, True), 0, t(L, d, [], "int64"),
                                                          t(L, d, 2, "uint8")),
    "index_reduce_0d": lambda L, d: L.index_reduce(t(L, d, False), 0, t(L, d, [], "int64"),
                                                   t(L, d, False), "prod"),
    "index_reduce_dim": lambda L, d: L.index_reduce(L.ones(0, 0, dtype=L.bool, device=d), 1,
                                                    t(L, d, [], "int64"), t(L, d, False), "prod"),
    "index_reduce_bool": lambda L, d: L.index_reduce(L.ones(3, dtype=L.bool, device=d), 0,
                                                     t(L, d, [5]), L.ones(1, dtype=L.bool,
                                                                          device=d), "prod"),
    "index_select_0d_count": lambda L, d: L.index_select(t(L, d, True), 0, t(L, d, [], "int64")),
    "index_select_empty_dim": lambda L, d: L.index_select(L.ones(0, 0, device=d), 0,
                                                          t(L, d, [1])),
    "index_select_empty_1d": lambda L, d: L.index_select(L.ones(0, device=d), 0, t(L, d, [1])),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_error_type_and_order_match_pytorch(device: str, case: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # index_reduce's beta warning
        build = ERROR_CASES[case]
        with pytest.raises(Exception) as want:
            build(torch, "cpu")
        with pytest.raises(Exception) as got:
            synced(build(gt, device))
    # the builtin family (NotImplementedError is a RuntimeError, as PyTorch's)
    assert isinstance(got.value, type(want.value)) or isinstance(want.value, type(got.value)), \
        f"{type(got.value).__name__}: {got.value} | torch {type(want.value).__name__}: " \
        f"{want.value}"


@pytest.mark.parametrize("k", [1, 2])
def test_kthvalue_of_0d_any_dtype(device: str, k: int) -> None:
    for value in (True, 1j, 2.5):
        def run(L: Any, d: str, value: Any = value) -> Any:
            return tuple(L.kthvalue(t(L, d, value), k))
        if k == 1:
            same_result(run, device)
        else:
            same_error(run, device)


@pytest.mark.parametrize("a,b", [("float16", "uint8"), ("int64", "int64"), ("float16", "float32"),
                                 ("bfloat16", "int32"), ("int32", "float16")])
def test_ldexp_result_dtype_follows_torch(device: str, a: str, b: str) -> None:
    for sa, sb in (((2,), (2,)), ((2,), ()), ((), (2,))):
        want = torch.ldexp(torch.ones(sa, dtype=getattr(torch, a)),
                           torch.full(sb, 3, dtype=getattr(torch, b)))
        got = gt.ldexp(gt.ones(sa, dtype=getattr(gt, a), device=device),
                       gt.full(sb, 3, dtype=getattr(gt, b), device=device))
        assert got.dtype.name == str(want.dtype).split(".")[1] and got.tolist() == want.tolist()


@pytest.mark.parametrize("a", ["float16", "bfloat16", "float32", "float64"])
def test_ldexp_with_integer_exponents_is_exact_as_cs_ldexp(device: str, a: str) -> None:
    # PyTorch's std::ldexp path: no overflow of 2**other on the way (1e-30 * 2**140 is finite
    # in float32), subnormal results rounded once, int64 exponents wrapped to 32 bits.
    x = [1e-30, -3.5, 0.0, -0.0, 1.5, 6e-5, 7.0, 1.0, INF, NAN]
    e = [140, -20, 3000, -3000, 2**40, -2**40 + 5, -149, 1100, -5, 3]
    same_result(lambda L, d: L.ldexp(t(L, d, x, a), t(L, d, e, "int64")), device, atol=0, rtol=0)
    same_result(lambda L, d: t(L, d, x, a).ldexp_(t(L, d, e, "int64")), device, atol=0, rtol=0)
    same_error(lambda L, d: L.ldexp(t(L, d, x, a), t(L, d, [True] * 10)), device)


def test_ldexp_rounds_a_floating_exponent_in_its_own_dtype(device: str) -> None:
    # 2 ** 0.3 in float16 is 1.2314453125, not float64's 1.2311...
    same_result(lambda L, d: L.ldexp(t(L, d, [1.0, 3.0], "float64"),
                                     t(L, d, [0.3, -7.7], "float16")), device, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_logaddexp_of_complex_follows_torch(device: str, dtype: str) -> None:
    a = [1 + 2j, -3 + 0.5j, complex(-INF, 1), complex(INF, 1), complex(NAN, 0), 2 + 0j,
         complex(-INF, 0), complex(1, NAN), 1e30 + 1j]
    b = [0.5 - 1j, 2 + 0j, complex(-INF, 2), complex(INF, -1), 1 + 0j, 2 + 0j, 3 + 1j, 0j,
         -1e30 + 0j]
    same_result(lambda L, d: L.logaddexp(t(L, d, a, dtype), t(L, d, b, dtype)), device,
                rtol=1e-6, atol=0)
    x, y = [1 + 2j, -3 + 0.5j, 0.2 - 1j], [0.5 - 1j, 2 + 0j, 1 + 1j]
    grads = []
    for L, d in ((gt, device), (torch, "cpu")):
        xs, ys = (t(L, d, v, "complex128").requires_grad_() for v in (x, y))
        L.logaddexp(xs, ys).abs().sum().backward()
        grads.append((xs.grad, ys.grad))
    assert_close(grads[0][0], grads[1][0])
    assert_close(grads[0][1], grads[1][1])


def test_pow_of_a_positive_real_base_with_infinite_exponents(device: str) -> None:
    # exp(b log a) with C99's product and exp: 2 ** (-inf - 0.87j) is 0, not NaN.
    b = [complex(-INF, -0.87), complex(INF, 0), complex(3, 0.5), complex(-INF, INF)]
    for base in (2.0, 0.5):
        same_result(lambda L, d, base=base: L.pow(t(L, d, base, "complex128"),
                                                  t(L, d, b, "complex128")), device)
    same_result(lambda L, d: L.ldexp(t(L, d, [True]), t(L, d, [complex(-INF, -0.87)],
                                                         "complex64")), device)


@pytest.mark.parametrize("name", ["floor_divide", "gt", "add", "remainder", "bitwise_xor"])
def test_an_integer_operand_is_cast_to_the_compute_dtype_first(device: str, name: str) -> None:
    # int8 with a 0-dim uint8 255 computes in int8, where 255 is -1 (the CUDA kernels read it
    # at its own width before)
    same_result(lambda L, d: getattr(L, name)(t(L, d, [35, -5, 7], "int8"),
                                              t(L, d, 255, "uint8")), device)
    same_result(lambda L, d: getattr(L, name)(t(L, d, [300, -1000, 7], "int16"),
                                              t(L, d, 200, "uint8")), device)


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_histogramdd_int_bins_of_0d_raises_index_error(device: str, dtype: str) -> None:
    # PyTorch's int-bins overload reads input.size(-1) before checking dims or dtype
    same_error(lambda L, d: L.histogramdd(t(L, d, 1, dtype), 2), device)
    same_error(lambda L, d: L.histogramdd(t(L, d, 1.0), [2]), device)


def test_mode_checks_the_reduced_dim_before_the_dtype(device: str) -> None:
    # an empty reduced dim is an IndexError for every dtype; complex with nothing to reduce
    # gives empty results, and complex with work to do is not implemented
    same_error(lambda L, d: L.mode(L.ones(0, dtype=L.complex64, device=d), 0), device)
    same_result(lambda L, d: L.mode(L.ones(0, 3, dtype=L.complex64, device=d), 1), device)
    if device == "cpu":    # (on cuda the message names mode_cuda, as PyTorch's CUDA build)
        same_error(lambda L, d: L.mode(L.ones(2, dtype=L.complex64, device=d), 0), device)
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        gt.mode(gt.ones(2, dtype=gt.complex64, device=device), 0)


# -- var/std moments, bool pow and complex pow special values (issue 15, helper) ------------------
MOMENT_ROWS = [[1.0, INF, 2.0], [INF, 1.0, 2.0], [3.0, 4.0, INF], [-INF, INF, 1.0],
               [INF, NAN, 1.0], [3e38, 3e38, -1.0]]


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize("dim", [1, 0, None])
def test_var_mean_follows_welfords_update(device: str, name: str, dim: Any) -> None:
    # the running mean is NaN once any element follows an infinite one; float32 input is
    # averaged in float64, so 3e38 entries do not overflow the mean
    for view in (lambda x: x, lambda x: x.T, lambda x: x[:, ::2]):
        same_result(lambda L, d, view=view: getattr(L, name)(
            view(t(L, d, MOMENT_ROWS, "float32")), dim, correction=0), device)
    parts = [[complex(a, b) for a, b in zip(r, reversed(r), strict=True)] for r in MOMENT_ROWS]
    same_result(lambda L, d: getattr(L, name)(t(L, d, parts, "complex64"), dim), device)


def test_var_of_rows_with_huge_entries_does_not_overflow(device: str) -> None:
    rows = [[3e38, 3e38], [1.0, 2.0]]
    same_result(lambda L, d: L.var(t(L, d, rows, "float32"), 1), device)
    same_result(lambda L, d: L.std(t(L, d, rows, "float32"), 1, correction=0), device)


@pytest.mark.parametrize("exponent", [False, True, 0, 2, 2.5])
def test_pow_of_bool_tensor_with_python_scalar(device: str, exponent: Any) -> None:
    # a Python bool exponent keeps bool; an int one promotes to int64, a float one to float32
    same_result(lambda L, d: L.pow(t(L, d, [True, False]), exponent), device)
    same_result(lambda L, d: t(L, d, [True, False]).pow(exponent), device)


def test_pow_of_bool_tensors_is_not_implemented(device: str) -> None:
    b = [True, False]
    same_error(lambda L, d: L.pow(t(L, d, b), t(L, d, b)), device)
    same_error(lambda L, d: L.pow(True, t(L, d, b)), device)
    same_error(lambda L, d: L.pow(t(L, d, b)[:0], t(L, d, b)[:0]), device)
    same_error(lambda L, d: t(L, d, b).pow_(2), device)  # int64 result into a bool tensor
    same_result(lambda L, d: t(L, d, b).pow_(True), device)
    same_result(lambda L, d: L.pow(2, t(L, d, b)), device)


def test_complex_pow_with_tensor_exponents_at_special_values(device: str) -> None:
    # exp(b log a) where the base is infinite: (-inf) ** 0 is NaN with a tensor exponent
    same_result(lambda L, d: L.float_power(t(L, d, [complex(-INF, 0), 2 + 1j], "complex64"),
                                           t(L, d, False)), device)
    # 2 ** 255 overflows to inf + 0j (squaring inf + 0j would make inf + nanj)
    same_result(lambda L, d: L.pow(t(L, d, 2 + 0j, "complex64"),
                                   t(L, d, [255, 3, 0], "uint8")), device)
    same_result(lambda L, d: L.pow(t(L, d, [complex(INF, 0), complex(-INF, 1), 1j], "complex128"),
                                   t(L, d, [2 + 0j, 1 + 0j, 1 + 0j], "complex128")), device,
                rtol=1e-6, atol=1e-15)


def test_ldexp_of_complex_with_infinite_parts(device: str) -> None:
    x = [complex(-INF, 2), complex(INF, -3.86), complex(1, INF), complex(-INF, INF),
         complex(0, INF)]
    same_result(lambda L, d: L.ldexp(t(L, d, x, "complex64"),
                                     t(L, d, [2, 0, 3, 1, 255], "uint8")), device)


@pytest.mark.parametrize("bins", ["one_elem_ints", "int_then_tensor", "int_then_float",
                                  "tensor_then_int", "bool_first", "bool_tensor_first"])
def test_histogramdd_bins_parsed_like_pytorchs_argument_parser(device: str, bins: str) -> None:
    # a list whose first item is int-like (an int or a one-element integral tensor) is an int
    # list, checked item by item before the input's dtype; any other list is a tensor list
    def make(L: Any, d: str) -> list:
        return {"one_elem_ints": [t(L, d, [1]), t(L, d, 2)],
                "int_then_tensor": [2, t(L, d, [0.0, 1.0])], "int_then_float": [2, 2.5],
                "tensor_then_int": [t(L, d, [0.0, 1.0]), 2], "bool_first": [True, 2],
                "bool_tensor_first": [t(L, d, [True]), t(L, d, [-3.0, -1.0])]}[bins]
    x = [[0.25, 0.5], [0.75, 0.1], [0.5, 0.9]]
    for dtype in ("float32", "bool"):
        build = lambda L, d, dtype=dtype: L.histogramdd(t(L, d, x, dtype), make(L, d))  # noqa: E731
        if bins == "one_elem_ints" and dtype == "float32":
            same_result(lambda L, d: L.histogramdd(t(L, d, x), make(L, d)).hist, device)
        else:
            same_error(build, device)


@pytest.mark.parametrize("dtype", ["complex64", "float32", "int64", "bool"])
def test_mode_of_0d_is_the_value_for_every_dtype(device: str, dtype: str) -> None:
    for keepdim in (False, True):
        same_result(lambda L, d, k=keepdim: tuple(L.mode(t(L, d, 1, dtype), 0, keepdim=k)),
                    device)
        same_result(lambda L, d, k=keepdim: tuple(L.mode(t(L, d, 1, dtype), -1, keepdim=k)),
                    device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_histogram_of_16bit_floats_needs_only_the_range(device: str, dtype: str) -> None:
    # PyTorch's histogram kernels take 16-bit floats; only reading the data's min/max (int bins
    # without a range, on a non-empty input) is not implemented for them
    x = [0.1, 0.3, 0.5, 0.9, 1.0, -0.2]
    same_result(lambda L, d: tuple(L.histogram(t(L, d, x, dtype), 3, range=(0.0, 1.0))), device)
    same_result(lambda L, d: tuple(L.histogram(t(L, d, x, dtype), t(L, d, [0.0, 0.5, 1.0],
                                                                        dtype))), device)
    same_result(lambda L, d: L.histogramdd(t(L, d, [x, x], dtype).mT, [2, 3],
                                           range=[0.0, 1.0, -1.0, 1.0], density=True).hist,
                device)
    same_result(lambda L, d: tuple(L.histogram(L.ones(0, dtype=getattr(L, dtype), device=d),
                                               3)), device)
    if device == "cpu":    # (on cuda PyTorch would name its CUDA kernel)
        same_error(lambda L, d: L.histogram(t(L, d, x, dtype), 3), device)


# -- found by deeper and reseeded fuzz runs --------------------------------------------------------
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_operands_round_to_a_16bit_compute_dtype_first(device: str, half: str) -> None:
    # int32 70000 is inf in float16 (PyTorch converts operands before computing in float)
    same_result(lambda L, d: t(L, d, [1e-3, 0.5], half) * t(L, d, [70000, 3], "int32"), device)
    same_result(lambda L, d: t(L, d, [1.0, 3.0], half) * t(L, d, [16842753, 3]), device)
    same_result(lambda L, d: L.addcmul(t(L, d, 2147483647, "int32"), t(L, d, [-2**31], "int32"),
                                       t(L, d, 65504.0, "float16")), device)


def test_addcdiv_addcmul_multiply_value_first(device: str) -> None:
    # value * t1 / t2 left to right: (2.8+2.8j) / 0 is inf+infj, not nan
    same_result(lambda L, d: L.addcdiv(t(L, d, [0j]), t(L, d, [2.8 + 2.78j]), t(L, d, [0j])),
                device)
    same_result(lambda L, d: L.addcmul(t(L, d, [0.0]), t(L, d, [1e30]), t(L, d, [1e-30]),
                                       value=1e10), device)


def test_index_add_complex_multiplies_by_alpha_one(device: str) -> None:
    same_result(lambda L, d: t(L, d, [1 + 1j, 1]).index_add(0, t(L, d, [0]),
                                                              t(L, d, [complex(-INF, -0.5)])),
                device)


def test_index_fill_checks_indices_only_for_nonempty_slices(device: str) -> None:
    same_result(lambda L, d: L.zeros(0, 0, device=d).index_fill(0, t(L, d, [1]), 1), device)
    same_result(lambda L, d: L.zeros(2, 0, device=d).index_fill(0, t(L, d, [3]), 1), device)
    same_error(lambda L, d: L.zeros(2, 2, device=d).index_fill(0, t(L, d, [3]), 1), device)


@pytest.mark.parametrize("case", ["index_put", "setitem", "setitem_view", "setitem_int_after"])
def test_one_element_value_through_a_mask_is_converted(device: str, case: str) -> None:
    # PyTorch writes it by masked_fill_: converted (and overflow-checked), not dtype-matched
    def put(L: Any, d: str, value: Any) -> Any:
        x, m = L.zeros(3, 2, dtype=L.int8, device=d), t(L, d, [True, False, True])
        if case == "index_put":
            return x.index_put((m,), value)
        if case == "setitem":
            x[m] = value
        elif case == "setitem_view":
            x[:, t(L, d, [True, False])] = value
        else:
            x[m, 0] = value
        return x
    same_result(lambda L, d: put(L, d, t(L, d, 5.7)), device)
    same_result(lambda L, d: put(L, d, t(L, d, [5])), device)
    same_error(lambda L, d: put(L, d, t(L, d, 1000)), device)
    same_error(lambda L, d: put(L, d, t(L, d, 1 + 2j)), device)
    same_error(lambda L, d: put(L, d, t(L, d, [5.0, 6.0])), device)   # not one element


def test_mask_index_errors_match(device: str) -> None:
    def put(L: Any, d: str, index: Any, accumulate: bool = False) -> Any:
        return L.zeros(3, 2, dtype=L.int8, device=d).index_put(index(L, d), t(L, d, 5.0),
                                                             accumulate=accumulate)
    same_error(lambda L, d: put(L, d, lambda L, d: (t(L, d, [True, False]),)), device)
    same_error(lambda L, d: put(L, d, lambda L, d: (t(L, d, [True, False, True]),) * 2), device)
    same_error(lambda L, d: put(L, d, lambda L, d: (t(L, d, [True, False, True]),), True),
               device)

    def setitem(L: Any, d: str) -> None:
        x = L.zeros(3, 2, dtype=L.int8, device=d)
        x[t(L, d, [True, False, True]), True] = t(L, d, 5.0)   # a bool is a long index
    same_error(setitem, device)
    same_error(lambda L, d: L.zeros(3, 2, 4, device=d)[:, t(L, d, [[True, False, True]])],
               device)


def test_isin_casts_to_the_result_type(device: str) -> None:
    x = [44, 255, 3]
    same_result(lambda L, d: L.isin(t(L, d, x, "uint8"), 300), device)
    same_result(lambda L, d: L.isin(t(L, d, x, "uint8"), 2**63 - 1, invert=True), device)
    same_result(lambda L, d: L.isin(t(L, d, x, "uint8"), t(L, d, 300)), device)
    same_result(lambda L, d: L.isin(t(L, d, x, "uint8"), t(L, d, [300])), device)
    same_result(lambda L, d: L.isin(300, t(L, d, [44], "uint8")), device)
    same_result(lambda L, d: L.isin(t(L, d, 44, "uint8"), t(L, d, [300] * 20)), device)


def test_complex_linspace_steps_each_part(device: str) -> None:
    same_result(lambda L, d: L.linspace(0, INF, 3, dtype=L.complex64, device=d), device)
    same_result(lambda L, d: L.linspace(1 + 2j, complex(3, INF), 5, device=d), device)
    same_result(lambda L, d: L.linspace(1 + 2j, 3 - 1j, 5, dtype=L.complex128, device=d),
                device)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_checks_in_pytorch_order(device: str, name: str) -> None:
    same_result(lambda L, d: getattr(L, name)(L.zeros(0, 1, dtype=L.complex64, device=d), 1),
                device)
    if device == "cpu":   # (PyTorch names its kernel per device)
        same_error(lambda L, d: getattr(L, name)(t(L, d, [[1j]]), 1), device)
    same_error(lambda L, d: getattr(L, name)(L.zeros(0, 0, device=d), (1, 1)), device)
    same_error(lambda L, d: getattr(L, name)(L.zeros(0, 2, device=d), (1, 1)), device)


def test_dim_checked_before_dtype_and_shapes(device: str) -> None:
    same_error(lambda L, d: L.cummax(t(L, d, [1j]), 1), device)
    same_error(lambda L, d: L.hash_tensor(t(L, d, 1j), dim=1), device)
    same_error(lambda L, d: L.index_copy(L.zeros(0, dtype=L.bool, device=d), 1,
                                         L.zeros(0, dtype=L.int64, device=d),
                                         L.zeros(0, dtype=L.uint8, device=d)), device)
    same_error(lambda L, d: L.stack([t(L, d, False), L.zeros(0, dtype=L.bool, device=d)], 1),
               device)
    same_error(lambda L, d: L.unflatten(t(L, d, True), 1, (1,)), device)


def test_hash_tensor_checks_dims_then_mode_then_dtype(device: str) -> None:
    same_error(lambda L, d: L.hash_tensor(t(L, d, True), dim=1, mode=1), device)
    same_error(lambda L, d: L.hash_tensor(L.zeros(0, 2, device=d), dim=0, mode=1), device)
    same_error(lambda L, d: L.hash_tensor(L.zeros(1, 0, device=d), dim=0, mode=1), device)
    for keepdim in (False, True):   # an empty result runs no kernel, so no dtype check
        same_result(lambda L, d, k=keepdim: L.hash_tensor(
            L.zeros(1, 0, dtype=L.complex64, device=d), dim=0, keepdim=k), device)
        same_result(lambda L, d, k=keepdim: L.hash_tensor(L.zeros(1, 0, device=d), dim=0,
                                                          keepdim=k), device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("value", [1e6, 1e39, -1e39, 1 + 2j, 5])
def test_one_element_16bit_fill_rounds_through_double(device: str, dtype: str,
                                                      value: Any) -> None:
    # PyTorch fills one element through a double (1e39 is inf), more elements with the check
    def fill(L: Any, d: str, shape: tuple) -> Any:
        return L.zeros(shape, dtype=getattr(L, dtype), device=d).fill_(value)
    for shape in ((), (1, 1), (2,)):
        if isinstance(value, complex) or (shape == (2,) and abs(value) > 1e5 and
                                          (dtype == "float16" or abs(value) > 1e38)):
            same_error(lambda L, d, s=shape: fill(L, d, s), device)
        else:
            same_result(lambda L, d, s=shape: fill(L, d, s), device)
    if not isinstance(value, complex):
        same_result(lambda L, d: L.full((1,), value, dtype=getattr(L, dtype), device=d), device)


@pytest.mark.parametrize("shape", [(2**62,), (2**31, 2**31, 4)])
def test_allocation_whose_byte_count_overflows(device: str, shape: tuple) -> None:
    same_error(lambda L, d: L.empty(shape, device=d), device)
    same_error(lambda L, d: L.zeros(shape, device=d), device)


@pytest.mark.parametrize("length,kernel,kw", [(0, 1, {}), (3, 5, {}),
                                              (3, 5, {"dilation": 2, "padding": 1})])
def test_conv1d_geometry_error_in_1d_terms(device: str, length: int, kernel: int,
                                           kw: dict) -> None:
    same_error(lambda L, d: L.nn.functional.conv1d(L.zeros(1, 1, length, device=d),
                                                   L.ones(1, 1, kernel, device=d), **kw), device)


def test_complex64_division_rounds_in_float(device: str) -> None:
    # Smith's algorithm in float, as PyTorch: in double 1 / z rounds to another float
    z = [3.5718798637390137 + 0.951651394367218j, 1 + 1j, 1e-30 + 1e30j]
    for dtype in ("complex64", "complex128"):
        same_result(lambda L, d, dt=dtype: L.reciprocal(t(L, d, z, dt)).to(L.complex128),
                    device, atol=0, rtol=0)
        same_result(lambda L, d, dt=dtype: (t(L, d, z, dt) / t(L, d, z[::-1], dt)).to(
            L.complex128), device, atol=0, rtol=0)


def test_cov_mean_is_the_rounded_sum_over_n(device: str) -> None:
    # PyTorch divides the dtype's sum (float16 inf here) by the count
    same_result(lambda L, d: L.cov(t(L, d, [[65504.0, 65504.0], [1.0, 3.0]], "float16"),
                                   correction=0), device)


def test_cov_of_integers_sums_them_as_integers(device: str) -> None:
    """PyTorch's mean of an integer input is its int64 sum (wrapping past int64's range, exact
    below it) over the count, not the sum of the float32 values (seed 10909)."""
    same_result(lambda L, d: L.cov(t(L, d, [4, -3, 9223372036854775807]), correction=0), device)
    same_result(lambda L, d: L.cov(t(L, d, [[16777217, 0, 5], [1, 2, 3]])), device)
    same_result(lambda L, d: L.cov(t(L, d, [[1, 2, 3], [4, 5, 9]]),
                                   fweights=t(L, d, [1, 2, 3])), device)
    same_result(lambda L, d: L.cov(t(L, d, [[1, 2, 3], [4, 5, 9]]), fweights=t(L, d, [1, 2, 3]),
                                   aweights=t(L, d, [0.5, 1.0, 2.0])), device)


def test_cov_checks_in_pytorchs_order(device: str) -> None:
    same_error(lambda L, d: L.cov(t(L, d, [True, False])), device)
    x = [[1.0, 2.0], [3.0, 4.0]]
    same_error(lambda L, d: L.cov(t(L, d, x), fweights=t(L, d, [1.0, 2.0, 3.0])), device)
    same_error(lambda L, d: L.cov(t(L, d, x), fweights=t(L, d, [True, False])), device)
    same_error(lambda L, d: L.cov(t(L, d, x), aweights=t(L, d, [1, 2, 3])), device)


@pytest.mark.parametrize("write", [
    lambda L, d, x: x.index_copy_(0, t(L, d, [], "int64"), t(L, d, True)),   # seed 11811
    lambda L, d, x: x.index_add_(0, t(L, d, [0]), t(L, d, [False])),
    lambda L, d, x: x.scatter_(0, t(L, d, [0]), t(L, d, [False])),
    lambda L, d, x: x.scatter_(0, t(L, d, [0]), True),
    lambda L, d, x: x.scatter_add_(0, t(L, d, [0]), t(L, d, [False])),
    lambda L, d, x: x.scatter_reduce_(0, t(L, d, [0]), t(L, d, [False]), "amax"),
    lambda L, d, x: x.masked_scatter_(t(L, d, [True, False]), t(L, d, [False, True])),
])
def test_index_writes_refuse_an_expanded_self(device: str, write: Any) -> None:
    """PyTorch's index_copy_/index_add_/scatter*_/masked_scatter_ refuse to write into an
    expanded tensor (we wrote through the shared element)."""
    same_error(lambda L, d: write(L, d, t(L, d, [True]).expand(2)), device)


@pytest.mark.parametrize("name", ["index_copy_", "index_add_", "scatter_add_"])
def test_index_writes_refuse_a_source_sharing_self(device: str, name: str) -> None:
    """Their source may not overlap self at all, not even as the very same tensor."""
    def write(L: Any, d: str, src: Any) -> Any:
        y = L.zeros(4, device=d)
        return getattr(y[:3], name)(0, t(L, d, [0, 1, 2]), src(y))
    same_error(lambda L, d: write(L, d, lambda y: y[1:]), device)
    same_error(lambda L, d: write(L, d, lambda y: y[:3]), device)
    assert write(gt, device, lambda y: y[1:].clone()).shape == (3,)


@pytest.mark.parametrize("include_self", [False, True])
def test_complex_scatter_mean_divides_every_element(device: str, include_self: bool) -> None:
    """PyTorch divides all of self by the counts (1 where nothing arrived) as complex numbers:
    nan - 0.36j and inf + 3j become nan + nanj and inf + nanj even where untouched (the CUDA
    kernel skipped those; seed 10606)."""
    inp = [[complex(NAN, -0.36)], [-2.5j], [complex(INF, 3)]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # and quietly: no NumPy RuntimeWarning on the CPU
        same_result(lambda L, d: t(L, d, inp, "complex64").scatter_reduce(
            0, t(L, d, [[1]]), t(L, d, [[complex(-1, 1e30)]], "complex64"), "mean",
            include_self=include_self), device)


@pytest.mark.parametrize("index", [(False, 2), (True, 2), (None, 2), (False, "t2"),
                                   (None, "t2"), (None, 0, 5), (Ellipsis, 5), ("t0", 5)])
def test_index_errors_name_the_position_in_the_index(device: str, index: tuple) -> None:
    """PyTorch names an int (or 0-d integer tensor) index's dimension by its position in the
    index, None and bools counted (seed 10808: a leaked NumPy 'axis 1' message)."""
    def build(L: Any, d: str, shape: tuple) -> Any:
        x = L.zeros(shape, device=d)
        items = tuple(t(L, d, int(i[1:])) if isinstance(i, str) else i for i in index)
        x[items] = 1
        return x[items]
    for shape in ((0,), (2, 3)):
        same_error(lambda L, d, shape=shape: build(L, d, shape), device)


def test_a_0d_integer_tensor_index_selects_a_view(device: str) -> None:
    x = gt.zeros(3, 4, device=device)
    row = x[gt.tensor(1, device=device)]
    assert row._base is x and row.shape == (4,)
    row[2] = 5
    assert x[1, 2].item() == 5
    assert x[gt.tensor(True, device=device)].shape == (1, 3, 4)   # a 0-d bool stays a mask


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_0d_with_keepdim_is_0d(device: str, name: str) -> None:
    same_result(lambda L, d: tuple(getattr(L, name)(t(L, d, 3, "uint8"), 0, keepdim=True)),
                device)
    same_result(lambda L, d: tuple(getattr(L, name)(t(L, d, 3.0), -1, keepdim=True)), device)


def test_repeat_interleave_dim_of_0d_raises(device: str) -> None:
    same_error(lambda L, d: L.repeat_interleave(t(L, d, True), t(L, d, [-1]), dim=0), device)
    same_error(lambda L, d: L.repeat_interleave(t(L, d, True), 2, dim=1), device)
    same_result(lambda L, d: L.repeat_interleave(t(L, d, True), 2), device)


def test_view_as_complex_ignores_strides_of_size_one_dims(device: str) -> None:
    same_result(lambda L, d: L.view_as_complex(t(L, d, [[0.5], [-2.0]]).transpose(0, 1)),
                device)
    assert gt.view_as_complex(gt.empty_strided((1, 2), (3, 1), device=device)).stride() == (1,)
    same_error(lambda L, d: L.view_as_complex(L.empty_strided((2, 2), (3, 1), device=d)),
               device)


def test_index_put_into_a_size_0_dim_checked_before_dtype(device: str) -> None:
    def setitem(L: Any, d: str) -> None:
        x = L.zeros(0, dtype=L.bool, device=d)
        x[[0]] = t(L, d, 0, "uint8")
    same_error(setitem, device)
    same_error(lambda L, d: L.zeros(0, dtype=L.bool, device=d).index_put_(
        (t(L, d, [0]),), t(L, d, 1, "uint8"), True), device)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_special_values_of_exp_log_and_division(device: str, dtype: str) -> None:
    z = [0j, complex(-0.0, 0.0), complex(1e30, 0), complex(1e30, -0.0), complex(INF, 65504),
         complex(NAN, -INF), complex(INF, 0), 1j, complex(2.5, NAN)]
    for name in ("rsqrt", "reciprocal", "exp", "exp2", "log", "log2", "log10", "sqrt"):
        same_result(lambda L, d, f=name: L.view_as_real(getattr(L, f)(t(L, d, z, dtype))),
                    device)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "acosh", "atanh", "sin",
                                  "cos", "tan", "sinh", "cosh", "tanh"])
def test_complex_trig_and_inverse_on_cuts_and_special_values(device: str, dtype: str,
                                                              name: str) -> None:
    # branch cuts keep the sign of zero (asin(3 + 0i) vs asin(3 - 0i)); infinite and NaN parts
    # take C99's values; |z| = 1e30 does not overflow, nor does sinh(1e30 + 0i) make inf * 0
    parts = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e30, INF, -INF, NAN]
    z = [complex(a, b) for a in parts for b in parts]
    same_result(lambda L, d: L.view_as_real(getattr(L, name)(t(L, d, z, dtype))), device,
                atol=1e-5 if dtype == "complex64" else 1e-10)


def test_sort_checks_the_dim_before_the_dtype(device: str) -> None:
    same_error(lambda L, d: L.sort(t(L, d, 1j), dim=1), device)


def test_unsafe_split_takes_one_int(device: str) -> None:
    same_error(lambda L, d: L.unsafe_split(L.zeros(2, device=d), [1, 1]), device)
    same_result(lambda L, d: L.unsafe_split(L.zeros(3, device=d), 2), device)


def test_scan_of_0d_is_a_copy(device: str) -> None:
    z = complex(NAN, -INF)
    same_result(lambda L, d: L.view_as_real(L.cumprod(t(L, d, z), 0)), device)
    same_result(lambda L, d: L.view_as_real(L.cumsum(t(L, d, complex(-0.0, -0.0)), 0)),
                device)
    same_result(lambda L, d: L.cumsum(t(L, d, True), 0), device)


def test_complex_norm_with_an_infinite_part_is_inf(device: str) -> None:
    same_result(lambda L, d: L.norm(t(L, d, [0.9 + 2.1j, complex(NAN, -INF)])), device)
    same_result(lambda L, d: L.linalg.vector_norm(t(L, d, [1 + 2j, complex(INF, NAN)])),
                device)


def test_trapezoid_constant_spacing_is_sum_less_end_halves(device: str) -> None:
    same_result(lambda L, d: L.trapezoid(t(L, d, [INF], "float16"), dim=0, dx=0.5), device)
    same_result(lambda L, d: L.trapezoid(t(L, d, [[1.0, 2.0, 4.0], [3.0, 5.0, 6.0]]), dx=0.5),
                device)


def test_nansum_of_complex_checks_the_dim_first(device: str) -> None:
    same_error(lambda L, d: L.nansum(t(L, d, 1j), dim=1), device)


def test_index_put_that_writes_nothing_checks_no_index_value(device: str) -> None:
    for accumulate in (False, True):
        same_result(lambda L, d, a=accumulate: L.zeros(1, 0, dtype=L.bool, device=d).index_put(
            (t(L, d, [-1, 3]),), t(L, d, False), a), device)

    def setitem(L: Any, d: str, value: Any) -> Any:
        x = L.zeros(1, 0, device=d)
        x[t(L, d, [3]), :] = value(L, d)
        return x
    same_result(lambda L, d: setitem(L, d, lambda L, d: L.ones(1, 0, device=d)), device)
    same_error(lambda L, d: setitem(L, d, lambda L, d: L.ones(1, 5, device=d)), device)


@pytest.mark.parametrize("alpha", [-2.25, 300, 1 + 2j, 2.5])
def test_index_add_alpha_is_overflow_checked_first(device: str, alpha: Any) -> None:
    def add(L: Any, d: str, n: int, dtype: str) -> Any:
        return L.zeros(n, dtype=getattr(L, dtype), device=d).index_add(
            0, t(L, d, [1]), t(L, d, [1], dtype), alpha=alpha)
    for dtype in ("uint8", "float32"):
        if dtype == "float32" and not isinstance(alpha, complex) or alpha == 2.5:
            same_result(lambda L, d, dt=dtype: add(L, d, 2, dt), device)
        else:   # (with no element to add to, the index is out of range too: alpha first)
            same_error(lambda L, d, dt=dtype: add(L, d, 2, dt), device)
            same_error(lambda L, d, dt=dtype: add(L, d, 0, dt), device)


def test_setitem_writing_nothing_still_broadcasts_its_indices(device: str) -> None:
    def setitem(L: Any, d: str) -> None:
        x = L.zeros(1, 0, dtype=L.bool, device=d)
        x[t(L, d, [0, 0]), False] = t(L, d, False)
    same_error(setitem, device)


def test_index_add_alpha_check_follows_pytorch_early_returns(device: str) -> None:
    def add(L: Any, d: str, shape: tuple, n: int) -> Any:
        src = (n,) + shape[1:]
        return L.zeros(shape, dtype=L.uint8, device=d).index_add(
            0, L.zeros(n, dtype=L.int64, device=d), L.zeros(src, dtype=L.uint8, device=d),
            alpha=-2.25)
    same_result(lambda L, d: add(L, d, (0, 0), 0), device)   # more dims, nothing: no check
    same_result(lambda L, d: add(L, d, (2, 2), 0), device)
    same_error(lambda L, d: add(L, d, (2,), 0), device)      # 1-d: alpha converted first


@pytest.mark.parametrize("args,dtype", [((2.5,), "int64"), ((-2.5, 2.5, 1.5), "int64"),
                                        ((10.5, 0, -3.5), "int64"), ((0, 2.5, 0.5), "int32"),
                                        ((0.5, 3.7, 1.5), "int32"), ((2.5,), "uint8")])
def test_integer_arange_reads_its_ends_as_int64(device: str, args: tuple, dtype: str) -> None:
    same_result(lambda L, d: L.arange(*args, dtype=getattr(L, dtype), device=d), device)


def test_integer_arange_with_a_truncated_zero_step(device: str) -> None:
    same_error(lambda L, d: L.arange(0, 2.5, 0.5, dtype=L.int64, device=d), device)


def test_empty_quantile_raises_first(device: str) -> None:
    same_error(lambda L, d: L.quantile(L.zeros(0, 0, device=d), 0.5, dim=2), device)
    same_error(lambda L, d: L.nanquantile(L.zeros(0, 3, device=d), 0.5, dim=1), device)
    same_error(lambda L, d: L.quantile(L.zeros(0, dtype=L.int64, device=d), 0.5), device)


def test_hash_tensor_checks_dim_sizes_before_repeats(device: str) -> None:
    same_error(lambda L, d: L.hash_tensor(L.zeros(0, 0, dtype=L.bool, device=d), dim=(0, 0)),
               device)


def test_index_copy_checks_slices_before_the_index_count(device: str) -> None:
    with pytest.raises(RuntimeError, match="same slice shapes"):
        gt.index_copy(gt.tensor(True, device=device), 0, gt.zeros(0, dtype=gt.int64,
                                                                    device=device),
                      gt.zeros(1, 0, dtype=gt.bool, device=device))


@pytest.mark.parametrize("data", [[300, 1 + 2j], [NAN, 1 + 2j], [3, 1 + 2j], [1 + 2j, 300],
                                  [[300], [1j]]])
def test_complex_data_for_an_integer_dtype_fails_at_the_first_bad_element(
        device: str, data: list) -> None:
    for dtype in ("uint8", "int8"):
        same_error(lambda L, d, dt=dtype: L.tensor(data, dtype=getattr(L, dt), device=d), device)
        same_error(lambda L, d, dt=dtype: L.as_tensor(data, dtype=getattr(L, dt), device=d),
                   device)


# -- complex special values (fuzz seeds of the second round) ----------------------------------
def same_parts(build: Build, device: str, **tol: float) -> None:
    """same_result, comparing a complex result's real and imaginary parts apart (where one is
    NaN, assert_close would take inf + NaN i for NaN + NaN i)."""
    def parts(L: Any, d: str) -> Any:
        r = build(L, d)
        return L.view_as_real(r) if r.is_complex() else r
    same_result(parts, device, **tol)


ODD = [complex(INF, 0), complex(-INF, 1), complex(0, INF), complex(NAN, 0), complex(INF, NAN),
       0j, complex(-0.0, 0), 1 + 1j, -2 + 0.5j]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_pow_of_zero_and_nonfinite_bases(device: str, dtype: str) -> None:
    def x(L: Any, d: str) -> Any:
        return t(L, d, ODD, dtype)
    # a tensor exponent is exp(b log a): 0 ** 0 is NaN, 0 ** -1 inf + NaN i
    for e in ([0.0], [1.0], [-1.0], [2.0], [1j], [0j]):
        same_parts(lambda L, d, e=e: x(L, d) ** t(L, d, e * len(ODD), dtype), device)
        same_parts(lambda L, d, e=e: L.pow(0j, t(L, d, e, dtype)), device)
    same_parts(lambda L, d: t(L, d, 0j, dtype) ** t(L, d, 0j, dtype), device)
    # a Python exponent: 0 gives ones, 1 a copy, 2, 3, -2 products, 0.5, -0.5, -1 sqrt,
    # rsqrt, reciprocal, others exp(b log a); a Python base 1 gives ones
    for e in (0, 0j, False, 1, True, 2, 3, -2, 0.5, -0.5, -1, 2.5, 1j, -3):
        same_parts(lambda L, d, e=e: x(L, d) ** e, device)
        same_parts(lambda L, d, e=e: x(L, d).pow_(e), device)
    for base in (1, 1.0, True, 0j, 2):
        same_parts(lambda L, d, b=base: L.pow(b, x(L, d)), device)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("ends", [(0, INF), (0, -INF), (INF, 0), (0, NAN), (-INF, INF),
                                  (0, complex(0, INF)), (0, -3e38), (0, 3e38), (0, 2), (0, 2j),
                                  (1 + 1j, 100)])
@pytest.mark.parametrize("base", [10.0, 2.0, -2.0, 0.0, 0.5, INF])
def test_complex_logspace_with_nonfinite_ends(device: str, dtype: str, ends: tuple,
                                              base: float) -> None:
    for steps in (1, 2, 3, 6):
        same_parts(lambda L, d, n=steps: L.logspace(*ends, n, base=base,
                                                    dtype=getattr(L, dtype), device=d), device)


def test_complex_logspace_end_overflowing_complex64(device: str) -> None:
    same_error(lambda L, d: L.logspace(0, 1e39, 3, dtype=L.complex64, device=d), device)
    same_error(lambda L, d: L.logspace(100, 0, 1, dtype=L.complex64, device=d), device)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_log1p_of_nonfinite_parts(device: str, dtype: str) -> None:
    parts = [INF, -INF, NAN, 0.0, 1.5, -2.0]
    data = [complex(a, b) for a in parts for b in parts]
    same_parts(lambda L, d: L.log1p(t(L, d, data, dtype)), device)
    same_parts(lambda L, d: L.log1p(t(L, d, complex(INF, NAN), dtype)), device)


@pytest.mark.parametrize("dx", [None, 1, 0.5, -1, INF, 1e30])
def test_cumulative_trapezoid_of_complex_inf_with_scalar_dx(device: str, dx: Any) -> None:
    kw = {} if dx is None else {"dx": dx}
    for data in ([complex(0, INF), 1, 2], [1 + 1j, complex(INF, 0), 2j], [complex(-INF, 0), 3]):
        same_parts(lambda L, d, y=data: L.cumulative_trapezoid(t(L, d, y, "complex64"), **kw),
                   device)
        same_parts(lambda L, d, y=data: L.trapezoid(t(L, d, y, "complex128"), **kw), device)
        same_parts(lambda L, d, y=data: L.cumulative_trapezoid(
            t(L, d, y, "complex64"), x=t(L, d, [0.0, 1.0, 3.0][:len(y)])), device)


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_complex_dx_raises(device: str, name: str) -> None:
    same_error(lambda L, d: getattr(L, name)(t(L, d, [1.0, 2.0]), dx=1j), device)
    same_error(lambda L, d: getattr(L, name)(t(L, d, [1.0, 2.0]), dx=1j, dim=5), device)


@pytest.mark.parametrize("value,dtype", [
    *((v, dt) for v in (1e30, -1e30, 3e38, 16777217.0, 1e8) for dt in ("float32", "float64")),
    (1e300, "float64")])
def test_histogram_of_one_huge_value(device: str, value: float, dtype: str) -> None:
    for n in (1, 2, 3, 5, 10):
        for k in (1, 2):   # one element, or the value twice
            same_result(lambda L, d, b=n, c=k: L.histc(t(L, d, [value] * c, dtype), bins=b),
                        device)
            same_result(lambda L, d, b=n, c=k: tuple(L.histogram(t(L, d, [value] * c, dtype),
                                                                 bins=b)), device)


def test_histc_of_one_value_lost_in_16_bit_rounding(device: str) -> None:
    for dtype in ("float16", "bfloat16"):
        same_result(lambda L, d, dt=dtype: L.histc(t(L, d, [10000.0, 10000.0], dt).float()
                                                   .to(getattr(L, dt)), bins=4).float(), device)
    same_error(lambda L, d: L.histc(t(L, d, [1e30], "bfloat16"), bins=4), device)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0, 1), (1, 0), (0, 0), (2, 3), (0j, 1),
                                        (1j, 1j), (0.5, 2j)])
def test_addr_of_complex_nonfinite_values(device: str, beta: Any, alpha: Any) -> None:
    vals = [1 + 1j, complex(INF, 0), complex(0, INF), complex(NAN, 0), complex(-INF, 1)]
    for i, a in enumerate(vals):
        b = vals[(i + 2) % len(vals)]
        same_parts(lambda L, d, a=a, b=b: L.addr(t(L, d, [[a, b], [b, a]], "complex64"),
                                                 t(L, d, [b, a], "complex64"),
                                                 t(L, d, [a, 1 + 1j], "complex64"),
                                                 beta=beta, alpha=alpha), device)


def test_addr_converts_beta_and_alpha_to_the_result_dtype(device: str) -> None:
    def addr(L: Any, d: str, dt: str, **kw: Any) -> Any:
        o = L.ones(2, dtype=getattr(L, dt), device=d)
        return L.addr(L.ones(2, 2, dtype=getattr(L, dt), device=d), o, o, **kw)
    same_error(lambda L, d: addr(L, d, "int8", beta=300), device)
    same_error(lambda L, d: addr(L, d, "uint8", alpha=300), device)
    same_error(lambda L, d: addr(L, d, "float32", alpha=1e50), device)
    same_result(lambda L, d: addr(L, d, "uint8", beta=-1), device)
    same_result(lambda L, d: addr(L, d, "float32", beta=1e-50), device)   # 0 in float: ignored


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "bool"])
def test_logit_of_integers_computes_in_float(device: str, dtype: str) -> None:
    data = [True, False] if dtype == "bool" else [0, 1, 200] if dtype == "uint8" else \
        [-128, 0, 1, 5]
    same_result(lambda L, d: L.logit(t(L, d, data, dtype)), device)   # int8 1 - x wrapped
    same_result(lambda L, d: L.logit(t(L, d, data, dtype), eps=0.1), device)


def test_logit_of_complex_raises(device: str) -> None:
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        gt.logit(gt.tensor([1 + 1j], device=device))


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("dtypes", [("bool", "bool"), ("int8", "int8"), ("uint8", "int64"),
                                    ("uint8", "float32"), ("complex64", "float32")])
def test_logaddexp_of_integers_raises(device: str, name: str, dtypes: tuple) -> None:
    def run(L: Any, d: str) -> Any:
        return getattr(L, name)(L.ones(2, dtype=getattr(L, dtypes[0]), device=d),
                                L.ones(2, dtype=getattr(L, dtypes[1]), device=d))
    if dtypes[0] == "uint8" and dtypes[1] == "float32" or \
            name == "logaddexp" and dtypes[0] == "complex64":
        same_result(run, device)
    else:
        with pytest.raises(RuntimeError, match="not implemented for"):   # PyTorch's too
            run(gt, device)
        with pytest.raises(RuntimeError, match="not implemented for"):
            run(torch, "cpu")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_histc_of_16_bit_floats_rounds_each_step(device: str, dtype: str) -> None:
    # c10's Half/BFloat16 round (x - min), its product by bins and the quotient to 16 bits;
    # a product past float16's range is inf, which PyTorch's kernel counts in bin 0
    rng = np.random.default_rng(303)
    for _ in range(20):
        data = (rng.standard_normal(int(rng.integers(1, 60))) * 100).round(1).tolist()
        for bins, lo, hi in ((2, 0, 0), (7, -2.0, 3.0), (257, 0, 0)):
            same_result(lambda L, d, v=data, b=bins, m=lo, x=hi: L.histc(
                t(L, d, v, dtype), bins=b, min=m, max=x).float(), device, atol=0, rtol=0)


@pytest.mark.parametrize("exponent", [2147483648, 300, 2 ** 63, -1])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32"])
def test_integer_pow_exponent_converted_to_the_base_dtype(device: str, exponent: int,
                                                          dtype: str) -> None:
    check = same_result if (dtype, exponent) == ("int32", 300) else same_error
    check(lambda L, d: L.ones(2, dtype=getattr(L, dtype), device=d) ** exponent, device)
    check(lambda L, d: L.ones(2, dtype=getattr(L, dtype), device=d).pow_(exponent), device)


def test_histc_16_bit_range_past_the_dtype_raises(device: str) -> None:
    same_error(lambda L, d: L.histc(t(L, d, 65504.0, "float16"), bins=4), device)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_logit_in_place_on_integers_raises(device: str, dtype: str) -> None:
    same_error(lambda L, d: L.ones(2, dtype=getattr(L, dtype), device=d).logit_(), device)


def test_pow_takes_pytorchs_keywords(device: str) -> None:
    def x(L: Any, d: str) -> Any:
        return t(L, d, [0j, 2 + 0j])
    same_parts(lambda L, d: L.pow(x(L, d), exponent=0), device)
    same_parts(lambda L, d: L.pow(input=x(L, d), exponent=2), device)
    same_parts(lambda L, d: x(L, d).pow(exponent=0), device)
    same_parts(lambda L, d: x(L, d).pow_(exponent=0), device)
    same_result(lambda L, d: L.pow(self=2, exponent=t(L, d, [1.0, 2.0])), device)
    with pytest.raises(TypeError):   # (PyTorch's message lists its overloads)
        gt.pow(x(gt, device), foo=2)


# -- leniencies: what PyTorch's signatures refuse ----------------------------------------------
def same_error_type(build: Build, device: str) -> None:
    """Both raise, the same exception type (the message names the call form: PyTorch's method
    and function bindings number the arguments differently)."""
    with pytest.raises(Exception) as want:
        build(torch, "cpu")
    with pytest.raises(type(want.value)):
        synced(build(gt, device))


@pytest.mark.parametrize("shape", [(3,), ()])
def test_expand_without_a_size_raises(device: str, shape: tuple) -> None:
    same_error(lambda L, d: L.ones(shape, device=d).expand(), device)
    same_result(lambda L, d: L.ones((), device=d).expand(()), device)
    same_error_type(lambda L, d: L.ones(3, device=d).expand(()), device)


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_refuses_python_numbers_and_has_no_inplace_form(device: str,
                                                                   name: str) -> None:
    same_error(lambda L, d: getattr(L, name)(L.ones(2, device=d), 2.0), device)
    same_error_type(lambda L, d: getattr(L, name)(2.0, L.ones(2, device=d)), device)
    same_error_type(lambda L, d: getattr(L.ones(2, device=d), name)(2.0), device)
    same_result(lambda L, d: getattr(L, name)(L.ones(2, device=d), L.zeros(2, device=d)), device)
    assert hasattr(gt.Tensor, name + "_") == hasattr(torch.Tensor, name + "_")


# -- gaps ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape, dim", [((7,), 0), ((3, 5), 1), ((4, 3), 0), ((), 0), ((0, 3), 1)])
def test_complex_logcumsumexp(device: str, dtype: str, shape: tuple, dim: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 3 + 1j * rng.standard_normal(shape) * 2
    if x.size > 3:
        x.flat[2], x.flat[3] = complex(-INF, 0), complex(INF, 1.0)
    same_result(lambda L, d: L.logcumsumexp(t(L, d, x, dtype), dim), device, rtol=1e-5, atol=1e-5)


def test_complex_logcumsumexp_gradients(device: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))

    def grad(L: Any, d: str) -> Any:
        xt = t(L, d, x).requires_grad_()
        L.logcumsumexp(xt, 1).backward(t(L, d, g))
        return xt.grad.resolve_conj()
    same_result(grad, device, rtol=1e-9, atol=1e-9)
    assert gt.autograd.gradcheck(lambda v: gt.logcumsumexp(v, 1),
                                 (gt.tensor(x, device=device, requires_grad=True),),
                                 check_forward_ad=True)


# -- seed 404 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_log_softmax_keeps_the_log_sum_next_to_a_large_max(device: str, dtype: str) -> None:
    for data in ([-1e30, -1e30], [-1e10, -1e10], [[-1e10], [-1e10]]):
        for dim in (0, -1):
            same_result(lambda L, d, x=data, k=dim: L.log_softmax(t(L, d, x, dtype), k),
                        device)
    same_result(lambda L, d: L.log_softmax(t(L, d, [-1e30], dtype).expand(2), 0), device)


def test_diff_of_order_zero_ignores_dim(device: str) -> None:
    same_result(lambda L, d: L.diff(t(L, d, [True]), n=0, dim=1), device)
    same_result(lambda L, d: L.diff(L.ones(2, 3, device=d), n=0, dim=7), device)
    same_error_type(lambda L, d: L.diff(L.ones(2, 3, device=d), n=0, dim=7,
                                         prepend=L.ones(2, 3, device=d)), device)


def test_index_reduce_into_an_empty_dim_checks_the_index_first(device: str) -> None:
    same_error_type(lambda L, d: L.index_reduce(
        L.zeros((0, 0), dtype=L.bool, device=d), 0, t(L, d, [-2]),
        L.zeros((1, 0), dtype=L.bool, device=d), "prod"), device)


def test_complex_logcumsumexp_nan_parts(device: str) -> None:
    for data in ([complex(NAN, 0.47), 3 - 1.12j, -3 + 1.8j], [3 - 1.12j, complex(1, NAN), 2j]):
        same_result(lambda L, d, x=data: L.logcumsumexp(t(L, d, x, "complex64"), 0), device)


# -- seed 505 ------------------------------------------------------------------------------------
def test_rsub_keeps_a_python_number_weak(device: str) -> None:
    same_result(lambda L, d: L.rsub(t(L, d, 0.0, "float16"), 0.5), device)
    same_result(lambda L, d: L.rsub(t(L, d, [1.0, 2.0], "float16"), 0.5, alpha=2), device)
    same_result(lambda L, d: L.rsub(t(L, d, [1, 2]), 3), device)


def test_take_along_dim_takes_int32_indices_without_dim(device: str) -> None:
    same_result(lambda L, d: L.take_along_dim(t(L, d, [1.0, 2.0]), t(L, d, [1], "int32")), device)
    same_result(lambda L, d: L.take_along_dim(t(L, d, True), t(L, d, [], "int32")), device)
    same_error(lambda L, d: L.take_along_dim(t(L, d, [1.0, 2.0]), t(L, d, [0.0])), device)
    same_error_type(lambda L, d: L.take_along_dim(L.ones(2, 3, device=d),
                                                  t(L, d, [[0, 2, 1]], "int32"), 1), device)


# -- seed 606 ------------------------------------------------------------------------------------
def test_sgn_of_non_finite_complex_is_nan(device: str) -> None:
    data = [complex(-INF, -0.96), complex(INF, 0), complex(INF, INF), complex(1, INF),
            complex(NAN, 1), 3 + 4j, 0j]
    for dtype in ("complex64", "complex128"):
        same_result(lambda L, d, dt=dtype: L.sgn(t(L, d, data, dt)), device)


@pytest.mark.parametrize("dtype", ["int64", "bool", "uint8"])
def test_nan_to_num_in_place_leaves_integers_untouched(device: str, dtype: str) -> None:
    def run(L: Any, d: str) -> Any:
        x = t(L, d, [1], dtype).expand(2)   # an overlapping target: nothing is written
        return x.nan_to_num_().clone()
    same_result(run, device)
    same_result(lambda L, d: t(L, d, [0, 1], dtype).nan_to_num_(nan=2.0), device)
    same_error_type(lambda L, d: t(L, d, [1.0]).expand(2).nan_to_num_(), device)


# -- seed 707 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_qr_of_a_negative_zero_pivot_reflects_like_pytorch(device: str, dtype: str) -> None:
    """A first column (-0.0, 3): LAPACK builds differ on the sign of a -0.0 pivot; R[0, 0] is
    -3 as with PyTorch's."""
    data = [[-0.0, -2.0, 1.0, 1.0], [3.0, -0.0, -2.0, -2.0]]
    same_result(lambda L, d: L.geqrf(t(L, d, data, dtype)), device)
    same_result(lambda L, d: L.linalg.qr(t(L, d, data, dtype)), device)


def test_unravel_index_wraps_out_of_range_indices(device: str) -> None:
    """PyTorch's formula has no range check: (i // prod(shape[k+1:])) % shape[k]."""
    same_result(lambda L, d: L.unravel_index(t(L, d, -3), ()), device)
    same_result(lambda L, d: L.unravel_index(t(L, d, [1, -7, 100, 7]), (4, 5)), device)
    same_result(lambda L, d: L.unravel_index(t(L, d, [[3, 9]], "int32"), (2, 2, 2)), device)
    same_error_type(lambda L, d: L.unravel_index(t(L, d, 1), (2, 0)), device)


def test_cumprod_meets_the_identity_once(device: str) -> None:
    """(1+0j) * (-inf+1.8j) is -inf+nanj; a second product with the identity would make it
    nan+nanj (the CUDA warp scan did)."""
    data = [complex(-INF, 1.85), complex(-0.0, -0.88), complex(-2, 2.67), complex(2, -1.35)]
    for dtype in ("complex64", "complex128"):
        same_result(lambda L, d, dt=dtype: L.view_as_real(L.cumprod(t(L, d, data, dt)[::2], 0)),
                    device)
        same_result(lambda L, d, dt=dtype: L.view_as_real(L.cumprod(t(L, d, data * 70, dt), 0)),
                    device)


# -- seed 808 ------------------------------------------------------------------------------------
def test_indexing_a_dim_of_size_0(device: str) -> None:
    """PyTorch's shape-only check comes first (also where CUDA leaves ranges to its kernels):
    any index into a dim of size 0 is out of bounds, unless the indices broadcast to nothing;
    an empty list index is int64."""
    empty = lambda L, d: L.zeros(0, dtype=L.bool, device=d)  # noqa: E731
    same_error(lambda L, d: empty(L, d).__setitem__((None, [0]), empty(L, d)), device)
    same_error(lambda L, d: empty(L, d)[[0]], device)
    same_result(lambda L, d: L.zeros(0, 3, device=d)[[0], []], device)
    same_result(lambda L, d: L.arange(6, device=d).view(2, 3)[[5], []], device)
    same_result(lambda L, d: L.arange(6, device=d).view(2, 3)[:, []], device)
    same_result(lambda L, d: L.arange(6, device=d).view(2, 3)[[], []], device)


# -- seed 1001 -----------------------------------------------------------------------------------
def test_nansum_checks_dims_one_at_a_time(device: str) -> None:
    """nansum's dims are checked one at a time (a repeat before a later dim's range), sum's
    all ranges first, as PyTorch's two kernels do."""
    same_error(lambda L, d: L.nansum(L.zeros(0, 0, 0, dtype=L.bool, device=d), dim=(0, 0, 3),
                                     dtype=L.bool), device)
    same_error(lambda L, d: L.nansum(L.zeros(2, 2, 2, device=d), dim=(0, 0, 3)), device)
    same_error(lambda L, d: L.sum(L.zeros(2, 2, 2, device=d), dim=(0, 0, 3)), device)


# -- seed 1111 -----------------------------------------------------------------------------------
def test_take_along_dim_broadcasts_before_checking_the_range(device: str) -> None:
    same_error_type(lambda L, d: L.take_along_dim(L.zeros(3, 0, 1, dtype=L.bool, device=d),
                                             t(L, d, [[[1]], [[-1]]]), 1), device)


# -- seed 1212 -----------------------------------------------------------------------------------
def test_setitem_with_0d_integer_tensor_indices_casts_the_value(device: str) -> None:
    """PyTorch selects with a 0-d integer tensor index (basic indexing): the value is copied,
    cast to the target's dtype; with a 1-d index the dtypes must match."""
    def run(L: Any, d: str, shape: tuple, idx: Any) -> Any:
        y = L.zeros(*shape, dtype=L.bool, device=d)
        y[idx(L, d)] = t(L, d, 1, "uint8")
        return y
    same_result(lambda L, d: run(L, d, (2, 1), lambda L, d: (slice(None), t(L, d, 0))), device)
    same_result(lambda L, d: run(L, d, (0, 1), lambda L, d: (slice(None), t(L, d, 0))), device)
    same_result(lambda L, d: run(L, d, (0, 1, 0), lambda L, d: (
        slice(None), t(L, d, 0), L.zeros(0, dtype=L.bool, device=d))), device)
    same_error(lambda L, d: run(L, d, (2, 3), lambda L, d: (slice(None), t(L, d, [0, 2]))),
               device)


def test_scatter_skips_an_empty_index_dtype_check(device: str) -> None:
    same_result(lambda L, d: L.scatter_add(t(L, d, [True]), 0, L.zeros(0, device=d),
                                           L.zeros(0, dtype=L.bool, device=d)), device)
    same_error(lambda L, d: L.scatter(t(L, d, [1.0]), 0, L.zeros(0, device=d),
                                      L.zeros(0, dtype=L.float64, device=d)), device)


def test_index_fill_checks_dim_before_the_value(device: str) -> None:
    same_error(lambda L, d: t(L, d, 3, "uint8").index_fill(1, L.zeros(0, dtype=L.int64, device=d),
                                                          NAN), device)


# -- seed 1313 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pad", [(), (1, 2), (1, 2, -1, 1), (-1, -2), (2, -4)])
def test_constant_pad_of_complex128_with_a_nonzero_fill(device: str, pad: tuple) -> None:
    """A fill of 1 is two different words per complex128 element (1.0, 0.0): CUDA fills the
    output, then copies the kept input in."""
    data = np.random.default_rng(0).standard_normal((3, 4, 2)).view(np.complex128)[..., 0]
    same_result(lambda L, d: L.nn.functional.pad(t(L, d, data, "complex128"), pad, value=1.5),
                device)


# -- seed 1414 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, -1, 3])
def test_take_along_dim_and_index_select_check_in_pytorchs_order(device: str, dim: int) -> None:
    """take_along_dim: the ranks, the index dtype, the dim's range, then a 0-d input's error;
    index_select: the dim first."""
    same_error_type(lambda L, d: L.take_along_dim(t(L, d, True), t(L, d, [0]), dim), device)
    same_error_type(lambda L, d: L.take_along_dim(t(L, d, True), t(L, d, 0), dim), device)
    same_error_type(lambda L, d: L.take_along_dim(t(L, d, True), t(L, d, 0.0), dim), device)
    same_error_type(lambda L, d: L.index_select(t(L, d, True), dim + 1,
                                                L.zeros(0, device=d)), device)


# -- seed 1515 -----------------------------------------------------------------------------------
def test_put_requires_the_source_dtype_and_a_non_empty_target(device: str) -> None:
    """put_ casts nothing (PyTorch's dtype check comes before the count and the range), and
    refuses to put into an empty tensor with PyTorch's message."""
    same_error(lambda L, d: L.put(L.zeros(0, dtype=L.bool, device=d), t(L, d, [-2]),
                                  t(L, d, [3], "uint8")), device)
    same_error(lambda L, d: L.zeros(3, device=d).put_(t(L, d, [0, 1]), t(L, d, [1.0], "float64")),
               device)
    same_error(lambda L, d: L.zeros(0, device=d).put_(t(L, d, [0]), t(L, d, [1.0])), device)
    same_result(lambda L, d: L.zeros(3, device=d).put_(t(L, d, [2, -3]), t(L, d, [1.0, 2.0])),
                device)


# -- seeds 1717 and 1919 -------------------------------------------------------------------------
@pytest.mark.parametrize(("data", "dtype"), [
    ([0.5, -3], "uint8"), ([[0.5, -3], [2, 1.5]], "uint8"), ([-129], "uint8"),
    ([0.5, -256], "uint8"), ([-3.0], "uint8"), ([(1 + 0j), 0, -3], "uint8"),
    ([0, 300, 1 + 0j], "uint8"), ([0.5, -3, 1j], "uint8"), ([2**63 - 1, 0.5], "int64"),
    ([2.0**63, 1], "int64"), ([2**53 + 1, 0.0], "int64"), ([-129, 0.5], "int8")], ids=str)
def test_tensor_from_mixed_numbers_converts_each_by_its_own_type(device: str, data: Any,
                                                                 dtype: str) -> None:
    """Integer dtypes from Python numbers, element by element as PyTorch converts: a negative
    int wraps into an unsigned dtype where a negative float overflows, a big int keeps the
    digits a double would round away, and the first complex object raises its TypeError."""
    def build(L: Any, d: str) -> Any:
        return L.tensor(data, dtype=getattr(L, dtype), device=d)

    try:
        torch.tensor(data, dtype=getattr(torch, dtype))
    except (RuntimeError, TypeError):
        same_error(build, device)
    else:
        same_result(build, device)


def test_nanmean_checks_its_dtype_before_the_dims(device: str) -> None:
    same_error(lambda L, d: L.nanmean(t(L, d, -0.67, "float16"), dim=1, dtype=L.bool), device)
    same_error(lambda L, d: L.nanmean(t(L, d, [1.0, NAN]), dtype=L.int64), device)


@pytest.mark.parametrize("value", [-1, 1000, 3])
def test_searchsorted_casts_a_lower_ranked_value_to_the_boundaries_dtype(device: str,
                                                                         value: int) -> None:
    """A 0-d tensor or a number ranks below dimensioned boundaries (PyTorch's result_type):
    -1 searched in uint8 boundaries is 255; a dimensioned value promotes both."""
    same_result(lambda L, d: L.searchsorted(t(L, d, [0, 0, 4], "uint8"),
                                            t(L, d, value, "int16"), out_int32=True), device)
    same_result(lambda L, d: L.searchsorted(t(L, d, [0, 0, 4], "uint8"), value), device)
    same_result(lambda L, d: L.searchsorted(t(L, d, [0, 0, 4], "uint8"),
                                            t(L, d, [value, 3], "int16")), device)
    same_result(lambda L, d: L.searchsorted(t(L, d, [4], "uint8"),
                                            L.zeros(0, dtype=L.complex64, device=d)), device)
    with pytest.raises(NotImplementedError, match="ComplexFloat"):
        gt.searchsorted(gt.tensor([4.0], device=device), gt.tensor([1j], device=device))


def test_complex_prod_of_one_element_is_one_times_it(device: str) -> None:
    """(1+0j) * (inf-0.4j) is inf+nanj: the CUDA reduction's lanes that saw no element do not
    multiply into the product (their identity is not exact for complex values)."""
    z = complex(INF, -0.39641931653022766)
    same_result(lambda L, d: t(L, d, z, "complex64").prod(0), device)
    same_result(lambda L, d: t(L, d, [z], "complex64").prod(), device)
    same_result(lambda L, d: t(L, d, [[z, 1 + 1j]], "complex128").prod(0), device)


def test_complex_cov_diagonal_is_real_before_the_division(device: str) -> None:
    """correction >= the observations divides by zero: the diagonal's zero imaginary part
    becomes nan, as in PyTorch, not rounding noise over zero (inf)."""
    x = [[-1 - 3.3856539726257324j, -2 + 2.439962148666382j],
         [2 + 1.204458475112915j, -3 - 0.8262895345687866j]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = gt.cov(t(gt, device, x, "complex64"), correction=2).cpu().numpy()
        want = torch.cov(t(torch, "cpu", x, "complex64"), correction=2).numpy()
    # PyTorch's diagonal is nan too where its complex product keeps the imaginary part exactly
    # zero; the MKL kernels of some CPUs (AVX-512) leave rounding noise there (inf). Checked
    # directly on the diagonal, against PyTorch off it.
    diagonal = np.eye(2, dtype=bool)
    assert np.isposinf(got.real[diagonal]).all() and np.isnan(got.imag[diagonal]).all(), got
    np.testing.assert_array_equal(got[~diagonal], want[~diagonal])


# -- seeds 2020, 2121 and 2323 -------------------------------------------------------------------
def test_index_add_complex_alpha_one_multiplies_only_for_a_vector(device: str) -> None:
    """PyTorch's index_add for a self of at most one dim multiplies complex sources by alpha
    even when it is 1 (inf + 3j becomes inf + nanj); its add kernel for more dims does not."""
    src = [[[0j, complex(INF, 3.27)]], [[1 + 1j, 2j]]]
    same_result(lambda L, d: L.zeros(2, 1, 4, dtype=L.complex64, device=d)[..., ::2].index_add(
        0, t(L, d, [0, 0]), t(L, d, src, "complex64")), device)
    same_result(lambda L, d: L.zeros(2, dtype=L.complex64, device=d).index_add(
        0, t(L, d, [1, 0]), t(L, d, [complex(INF, 3.27), 1j], "complex64")), device)


def test_index_add_and_index_reduce_check_in_pytorchs_order(device: str) -> None:
    """index_add wraps the dim before the dtype checks; index_reduce refuses a bool or complex
    self before any index check, naming the kernel that include_self selects."""
    same_error(lambda L, d: t(L, d, True).index_add(1, t(L, d, [], "int64"),
                                                    t(L, d, 0, "uint8"), alpha=0), device)
    same_error(lambda L, d: L.zeros(3, device=d).index_add(0, L.zeros(2, device=d),
                                                           L.zeros(2, device=d)), device)
    for include_self in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same_error(lambda L, d, inc=include_self: L.zeros(0, dtype=L.bool, device=d)
                       .index_reduce(0, t(L, d, [-2]), t(L, d, [False]), "prod",
                                     include_self=inc), device)


# -- seed 2727 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 5])
def test_gather_wraps_the_dim_first_and_takes_any_empty_index(device: str, dim: int) -> None:
    for index in ((0, 0, 0), (0,)):
        def build(L: Any, d: str, s: tuple = index) -> Any:
            return L.gather(L.zeros(1, 1, 1, dtype=L.bool, device=d), dim, L.zeros(s, device=d))

        (same_result if dim == 0 else same_error)(build, device)
    same_error(lambda L, d: L.gather(L.zeros(1, 1, 1, device=d), dim, L.zeros(2, 1, 1, device=d)),
               device)


# -- seeds 3232 and 3535 -------------------------------------------------------------------------
def test_complex_logcumsumexp_of_a_0d_input_passes_through(device: str) -> None:
    for z in (complex(NAN, -INF), complex(2, NAN), complex(1, INF)):
        same_result(lambda L, d, z=z: L.logcumsumexp(t(L, d, z, "complex64"), 0), device)
        same_result(lambda L, d, z=z: L.logcumsumexp(t(L, d, [z], "complex64"), 0), device)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_norm_of_one_element_is_its_magnitude(device: str, dtype: str) -> None:
    """PyTorch's norm of one element per output is |x|: no power that overflows (the 2-norm of
    [1e30] in float32 is 1e30) or rounds (the 3-norm of [5.] is 5)."""
    same_result(lambda L, d: L.dist(t(L, d, -0.5, dtype), t(L, d, 1e30, dtype)), device)
    same_result(lambda L, d: t(L, d, [[1e30], [-2e30]], dtype).norm(dim=1), device)
    same_result(lambda L, d: t(L, d, [[1e30, -2.5]], dtype)[:, ::2].renorm(2, 0, 1.0), device)
    same_result(lambda L, d: t(L, d, [[5.0]], dtype).norm(p=3, dim=(0, 1), keepdim=True),
                device)
    same_result(lambda L, d: t(L, d, [3 + 4j], "complex64").norm(), device)


# -- seeds 3838, 4242 and 4343 -------------------------------------------------------------------
def test_complex_logcumsumexp_keeps_the_running_value_at_minus_inf(device: str) -> None:
    """PyTorch's step starts from -inf+0j and keeps the running value when both real parts are
    -inf: [-inf+0.48j, -inf+0.7j] gives [-inf+0j, -inf+0j]."""
    ni = -INF
    for data in ([complex(ni, 0.48), complex(ni, 0.7)], [complex(ni, 0.48), 1 + 1j, complex(ni, 2)],
                 [[complex(NAN, INF), -0.92 - 0.003j, complex(ni, 0.48), 1.7 + 2.2j]]):
        for dim in (0, -1):
            same_result(lambda L, d, x=data, k=dim: L.logcumsumexp(t(L, d, x, "complex64"), k),
                        device)


def test_reductions_into_16_bit_floats_read_the_input_in_float32(device: str) -> None:
    """mean(dtype=float16) of bfloat16 [1e-30, 65536] averages in float to 32768 (the input is
    not rounded to float16 first, where 65536 overflows)."""
    same_result(lambda L, d: t(L, d, [1e-30, 65504.0], "bfloat16").mean(dtype=L.float16), device)
    same_result(lambda L, d: t(L, d, [[1e-30, 65504.0]], "bfloat16").mean(1, dtype=L.float16),
                device)


def test_renorm_of_16_bit_floats_norms_in_float32(device: str) -> None:
    data = np.random.default_rng(0).uniform(1000, 9000, (3, 3, 3)).astype(np.float16)
    same_result(lambda L, d: L.renorm(t(L, d, data), 1, 0, 1.0), device)
    same_result(lambda L, d: L.renorm(t(L, d, data).to(L.bfloat16), 2, 1, 5.0), device)


# -- seeds 4444, 4646 and 4747 -------------------------------------------------------------------
def test_a_broadcast_scalar_operand_rounds_to_the_16_bit_compute_dtype(device: str) -> None:
    """A one-element operand of another dtype joins float16/bfloat16 math rounded to that
    dtype, as a full operand does: int32 2**31 - 1 is inf (0 * inf is nan), bfloat16 1e-30 is
    0 in float16."""
    same_result(lambda L, d: t(L, d, [-2**31, -1], "int32").addcmul(
        t(L, d, [65504.0, 0.0], "float16"), t(L, d, 2**31 - 1, "int32"), value=0), device)

    def xor(L: Any, d: str) -> Any:
        out = L.zeros(2, dtype=L.bool, device=d)
        L.logical_xor(t(L, d, [0.4755859375, 1.97], "float16"), t(L, d, 1e-30, "bfloat16"),
                      out=out)
        return out
    same_result(xor, device)


def test_setitem_checks_the_value_shape_before_the_indices_range(device: str) -> None:
    def put(L: Any, d: str, rows: list, value: list) -> Any:
        x = L.zeros(1, 2, dtype=L.bool, device=d)
        x[t(L, d, rows), 0] = t(L, d, value)
        return x
    same_error(lambda L, d: put(L, d, [[0], [1]], [True, True]), device)
    same_error(lambda L, d: put(L, d, [[0], [1]], [True]), device)  # (checked at the sync)


# -- seed 5353 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0, 0), (2, 0)])
@pytest.mark.parametrize("dims", [(0, 2), (2, 0), (1, 2), (0, 0), (-1,), ()])
def test_inf_norm_of_an_empty_tensor_checks_dims_one_at_a_time(shape: tuple, dims: Any,
                                                                device: str) -> None:
    """Each dim is wrapped, then tested for emptiness, in the order given: an empty dim before
    an out-of-range one is the error (RuntimeError), an out-of-range one first is IndexError,
    repeated dims are checked after; () means every dim."""
    for p in (math.inf, -1.0):   # PyTorch's message lacks a space ("dimension 0because")
        same_error_type(lambda L, d, p=p: L.linalg.vector_norm(L.zeros(shape, device=d), p,
                                                               dims), device)


# -- seed 5656 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("interpolation", ["linear", "midpoint"])
@pytest.mark.parametrize("data", [[-math.inf, -1.0], [1.0, math.inf], [1.0, 2.0, math.inf],
                                  [3.0, 1.0, 2.0, 5.0]])
def test_quantile_interpolates_with_lerp(data: list, interpolation: str, device: str) -> None:
    """PyTorch interpolates between neighbours with lerp's two-sided formula: the median of
    [-inf, -1] is -inf (not -inf + inf * 0.5), that of [1, inf] nan."""
    q = [0.1, 0.25, 0.5, 0.75, 0.9]
    for name in ("quantile", "nanquantile"):
        same_result(lambda L, d, n=name: getattr(L, n)(
            t(L, d, data), t(L, d, q), interpolation=interpolation), device)


# -- seed 6060: Python numbers in float16/bfloat16 math --------------------------------------
HALF_DATA = [-4.0, 2.0, 0.5, 65504.0, 1e-3, -0.0]
HALF_NUMBERS = [1e-8, 0.3, 1e6, 65519.0, 70000.0, 1e-5, -1e-8]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["add", "sub", "radd", "rsub", "xlogy", "fmod", "remainder",
                                  "eq", "lt", "rpow", "special.xlog1py", "add_"])
def test_a_python_number_in_16_bit_math_is_narrowed_first(name: str, dtype: str,
                                                          device: str) -> None:
    """TensorIterator casts a Python number to the 16-bit common dtype before the kernel runs:
    float16 x + 65519 adds 65504, xlogy(x, 1e6) is x * log(inf)."""
    ops = {"radd": lambda L, x, s: s + x, "rsub": lambda L, x, s: s - x,
           "rpow": lambda L, x, s: s ** x, "add_": lambda L, x, s: x.clone().add_(s),
           "special.xlog1py": lambda L, x, s: L.special.xlog1py(x, s)}
    fn = ops.get(name, lambda L, x, s: getattr(L, name)(x, s))
    # (PyTorch's xlogy kernels also round the log to the 16-bit dtype: only the numbers that
    # narrow to inf or 0 give exact results there)
    numbers = [1e6, 70000.0] if "xlog" in name else HALF_NUMBERS
    for s in numbers:
        same_result(lambda L, d, s=s: fn(L, t(L, d, HALF_DATA, dtype), s), device, rtol=0,
                    atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["mul", "rmul", "mul_", "div", "div_", "rdiv", "floor_divide",
                                  "div_floor", "div_trunc", "lerp"])
def test_mul_div_and_lerp_read_a_python_number_in_float(name: str, dtype: str,
                                                         device: str) -> None:
    """mul and the divisions read a number second operand at float precision (their CPU
    kernels' original_scalar_value), a true division as a product with the float reciprocal;
    lerp's weight is a float: float16 x * 1e-8 is not 0, x / 0.3 is x * float(1 / 0.3f)."""
    ops = {"rmul": lambda L, x, s: s * x, "mul_": lambda L, x, s: x.clone().mul_(s),
           "div_": lambda L, x, s: x.clone().div_(s), "rdiv": lambda L, x, s: s / x,
           "div_floor": lambda L, x, s: L.div(x, s, rounding_mode="floor"),
           "div_trunc": lambda L, x, s: L.div(x, s, rounding_mode="trunc"),
           "lerp": lambda L, x, s: L.lerp(x, x * 2, s)}
    fn = ops.get(name, lambda L, x, s: getattr(L, name)(x, s))
    for s in HALF_NUMBERS:
        same_result(lambda L, d, s=s: fn(L, t(L, d, HALF_DATA, dtype), s), device, rtol=0,
                    atol=0)


def test_a_number_divided_by_a_tensor_is_its_reciprocal_times_the_number(device: str) -> None:
    """PyTorch's __rtruediv__ is reciprocal(x) * number: two roundings, in float32 too."""
    x = [6.405920505523682, 6.10569429397583, 7.322015762329102]
    same_result(lambda L, d: 3.0 / t(L, d, x, "float32"), device, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["elu", "celu", "selu"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_elu_family_keeps_the_sign_of_negative_zero(name: str, dtype: str, device: str) -> None:
    """The negative branch is expm1(x) * alpha, as PyTorch's kernel: elu(-0.0) is -0.0."""
    out = getattr(gt.nn.functional, name)(t(gt, device, [-0.0, -1e-3, -2.0], dtype))
    want = getattr(torch.nn.functional, name)(t(torch, "cpu", [-0.0, -1e-3, -2.0], dtype))
    assert math.copysign(1.0, float(out[0])) == -1.0
    assert_close(out, want)


def test_16_bit_overflow_to_inf_raises_no_numpy_warning(device: str) -> None:
    x = t(gt, device, [65504.0, -4.0], "float16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = synced(x / 0.3 + x)
    assert_close(out, t(torch, "cpu", [65504.0, -4.0], "float16") / 0.3
                 + t(torch, "cpu", [65504.0, -4.0], "float16"), rtol=0, atol=0)


# -- seeds 6363 and 6464 -------------------------------------------------------------------------
def test_searchsorted_compares_in_the_16_bit_promoted_dtype(device: str) -> None:
    """float16 values against int32 boundaries compare as float16: 2**31 - 1 is inf there."""
    same_result(lambda L, d: L.bucketize(t(L, d, [math.inf, -0.59, 2.17], "float16"),
                                         t(L, d, [2147483647], "int32"), out_int32=True), device)
    same_result(lambda L, d: L.searchsorted(t(L, d, [70000.0], "float32"),
                                            t(L, d, [65504.0], "float16")), device)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_mean_with_an_empty_index_divides_complex_values_by_one(
        include_self: bool, device: str) -> None:
    """PyTorch divides by the (clamped) counts even when nothing is scattered: a complex
    division by 1 + 0j, which makes inf - 1.5j inf + nanj."""
    data = [complex(math.inf, -1.5), complex(1, math.inf), 1 + 2j]
    same_result(lambda L, d: L.scatter_reduce(
        t(L, d, data, "complex64"), 0, L.zeros(0, dtype=L.int64, device=d),
        L.zeros(0, dtype=L.complex64, device=d), "mean", include_self=include_self), device)


# -- seed 6565 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "int64",
                                   "complex64"])
def test_linspace_is_bit_exact(dtype: str, device: str) -> None:
    """PyTorch's AVX2 kernel computes each float32/float64 element with one fused multiply-add
    (-0.5 .. 0.5 in 7 steps has 2**-55 in the middle); 16-bit ramps count their steps in
    integers before rounding them (index 2049 of a float16 ramp is not 2048)."""
    rng = np.random.default_rng(0)
    cases = [(-0.5, 0.5, 7), (-29.4, -1.6, 2449)] + [
        (float(rng.uniform(-30, 30)), float(rng.uniform(-30, 30)), int(rng.integers(2, 64)))
        for _ in range(20)]
    for start, end, steps in cases:
        same_result(lambda L, d, a=start, b=end, n=steps: L.linspace(
            a, b, n, dtype=getattr(L, dtype), device=d), device, rtol=0, atol=0)


def test_histogram_edges_follow_linspace(device: str) -> None:
    """A value on the middle edge falls in the bin PyTorch's edges (2**-55, not 0) give it."""
    same_result(lambda L, d: L.histogram(t(L, d, 0.0, "float64"), 6,
                                         weight=t(L, d, -math.inf, "float64")).hist, device)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
@pytest.mark.parametrize("length", [0, 1, 2])
def test_complex_windows_of_zero_or_one_sample_exist(name: str, length: int,
                                                     device: str) -> None:
    """PyTorch accepts complex dtypes and makes 0 or 1 samples without its ramp; from 2 on,
    the ramp (arange) has no complex kernel."""
    build = lambda L, d: getattr(L, name)(length, True, dtype=L.complex64, device=d)  # noqa: E731
    if length <= 1:
        same_result(build, device)
    else:
        same_error_type(build, device)


# -- --fuzz-deep ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dims", [(0, 0, 3), (3, 0, 0), (0, -3, 5), (1, 2, 1)])
@pytest.mark.parametrize("p", [1, 2, math.inf])
def test_norm_checks_repeats_and_ranges_dim_by_dim(dims: tuple, p: float, device: str) -> None:
    """norm wraps and checks each dim in order: (0, 0, 3) is a repeated dim, not out of range
    (sum checks the ranges first, as PyTorch's sum does)."""
    for shape in ((0, 0, 0), (2, 2, 2)):
        same_error_type(lambda L, d, s=shape: L.norm(L.zeros(s, dtype=L.float16, device=d),
                                                     p=p, dim=dims), device)
    same_error(lambda L, d: L.zeros(2, 2, 2, device=d).sum(dim=dims), device)


def test_frobenius_norm_over_more_than_two_dims_is_a_matrix_norm_error(device: str) -> None:
    same_error(lambda L, d: L.norm(L.ones(2, 2, 2, device=d), p="fro", dim=(0, 1, 2)), device)
    same_result(lambda L, d: L.norm(L.ones(2, 2, 2, device=d), p="fro", dim=(0, 1)), device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("alpha", [70000.0, 65519.0, -1e6, 1e39, math.inf, 65504.0, 3])
@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha_past_the_float_range_is_refused(dtype: str, alpha: float, name: str,
                                               device: str) -> None:
    """alpha converts to the result dtype with PyTorch's overflow check (float16 65519 is
    past its largest finite 65504; inf is allowed)."""
    build = lambda L, d: getattr(L, name)(t(L, d, [1.0, 2.0], dtype),  # noqa: E731
                                          t(L, d, [1.0, 2.0], dtype), alpha=alpha)
    try:
        want = build(torch, "cpu")
    except RuntimeError:
        same_error(build, device)
        return
    assert_close(build(gt, device), want)


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_moments_check_repeats_and_ranges_dim_by_dim(name: str, device: str) -> None:
    """var/std (unlike sum and mean) wrap and check each dim in order: (0, 0, 3) is a
    repeated dim, not out of range."""
    for shape in ((0, 0, 0), (2, 2, 2)):
        same_error(lambda L, d, s=shape: getattr(L, name)(L.zeros(s, dtype=L.float16, device=d),
                                                          dim=(0, 0, 3), correction=0), device)
        same_error(lambda L, d, s=shape: getattr(L, name)(L.zeros(s, device=d), dim=(0, 3)),
                   device)


@pytest.mark.parametrize("dtype", ["complex64", "float32", "int64"])
def test_vander_powers_are_a_cumulative_product(dtype: str, device: str) -> None:
    """vander's powers are PyTorch's cumprod (double accumulator for complex64 on the CPU):
    (1e30 + 1e30j)^2 is 2e60j, so inf in the imaginary part and 0 in the real part."""
    values = {"complex64": [1e30 + 1e30j, -1.1 - 0.6j, 0.3j], "float32": [1e30, 3.0, -0.5],
              "int64": [2, -3, 1 << 40]}[dtype]
    for increasing in (False, True):
        same_result(lambda L, d, inc=increasing: L.vander(t(L, d, values, dtype), N=4,
                                                          increasing=inc), device)


@pytest.mark.parametrize("dim", [None, (), 0, -1, (0,)])
@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_norm_of_a_0d_tensor_over_an_explicit_dim_is_computed(dim: object, dtype: str,
                                                               device: str) -> None:
    """A one-element norm is |x| (the 2-norm of [1e30] is 1e30), except for a 0-d input with
    an explicit dim, which PyTorch reduces in float like a longer one (inf). (Other orders sum
    |x|^p in float64: a reviewed difference of the fuzz registry.)"""
    value = 0.5 + 1e30j if dtype == "complex64" else 1e30
    for p in (2, 1, math.inf):
        same_result(lambda L, d, p=p: L.linalg.vector_norm(t(L, d, value, dtype), ord=p,
                                                           dim=dim), device)
    same_result(lambda L, d: L.norm(t(L, d, value, dtype), dim=dim), device)


@pytest.mark.parametrize("op", ["add", "sub"])
def test_complex_add_sub_scale_by_alpha_even_when_it_is_one(op: str, device: str) -> None:
    """Fuzz seed 16211: PyTorch computes a +- alpha * b with a complex multiply even for
    alpha 1, so b = nan - inf j becomes nan + nan j (and 1 - inf j a NaN real part)."""
    a_vals = [3 - 1e30j, 1 + 2j, 0.5 - 0.25j]
    b_vals = [complex(math.nan, -math.inf), complex(1, -math.inf), complex(math.inf, 1)]
    for alpha in ({}, {"alpha": 1}, {"alpha": 2}):
        same_result(lambda L, d, kw=alpha: getattr(L, op)(t(L, d, a_vals, "complex64"),
                                                          t(L, d, b_vals, "complex64"), **kw),
                    device)
    same_result(lambda L, d: t(L, d, a_vals, "complex64") - t(L, d, b_vals, "complex64"),
                device)

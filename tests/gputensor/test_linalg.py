"""Linear algebra ops (gputensor/_ops/linalg.py) against PyTorch: values, dtypes, shapes, errors.

Each case is written once as ``fn(m, *tensors)`` where ``m`` is the module (``torch`` or
``gputensor``), so the same code runs through both libraries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gputensor as gt
from gputensor.kernels.registry import OPS
from tests.helpers import assert_close, noncontiguous, random_array, requires_torch, torch

pytestmark = requires_torch

Fn = Callable[..., Any]


def _inputs(shapes: Sequence[Sequence[int]], dtypes: Any, device: str,
            noncontig: bool = False) -> tuple[list[gt.Tensor], list[Any]]:
    if not isinstance(dtypes, list | tuple):
        dtypes = [dtypes] * len(shapes)
    ours, theirs = [], []
    for i, (shape, dt) in enumerate(zip(shapes, dtypes, strict=True)):
        arr = random_array(shape, dt, seed=i)
        g = gt.tensor(arr, dtype=dt, device=device)
        ours.append(noncontiguous(g) if noncontig else g)
        if dt is gt.bfloat16:
            theirs.append(torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16))
        else:
            theirs.append(torch.from_numpy(np.array(arr)))  # (ascontiguousarray makes 0-d 1-d)
    return ours, theirs


def check(fn: Fn, shapes: Sequence[Sequence[int]], device: str, dtype: Any = gt.float32,
          noncontig: bool = False, **tol: Any) -> None:
    """fn(gt, *ours) matches fn(torch, *theirs) in values, dtype and shape."""
    ours, theirs = _inputs(shapes, dtype, device, noncontig)
    actual = fn(gt, *ours)
    assert_close(actual, fn(torch, *theirs), **tol)
    if isinstance(actual, gt.Tensor):
        assert actual.device == gt.device(device)


def check_error(fn: Fn, shapes: Sequence[Sequence[int]], device: str, dtype: Any = gt.float32,
                exact: bool = True) -> None:
    """fn raises the same exception type as in PyTorch, with the same message when ``exact``."""
    ours, theirs = _inputs(shapes, dtype, device)
    with pytest.raises(Exception) as expected:
        fn(torch, *theirs)
    with pytest.raises(type(expected.value)) as got:
        fn(gt, *ours)
    if exact:
        assert str(got.value) == str(expected.value).splitlines()[0]


# -- matmul and the products it dispatches to ----------------------------------------------------
MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)),
    ((2, 2, 3), (3,)), ((3,), (2, 3, 4)), ((2, 3), (2, 3, 4)), ((2, 2, 3), (2, 3, 4)),
    ((4, 1, 2, 3), (5, 3, 2)), ((2, 5, 4, 3), (3,)), ((3,), (2, 5, 3, 4)), ((1, 2, 3), (4, 3, 2)),
    ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 2, 0), (2, 0, 3)), ((0, 2, 3), (3, 4)),
    ((2, 1, 4, 3), (1, 3, 3, 2)),
]


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.int64, gt.complex64],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_shapes(device: str, shapes: tuple, dtype: gt.dtype) -> None:
    check(lambda m, a, b: m.matmul(a, b), shapes, device, dtype)


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_noncontiguous(device: str, shapes: tuple) -> None:
    check(lambda m, a, b: a @ b, shapes, device, noncontig=True)


@pytest.mark.parametrize("dtype", [gt.float16, gt.bfloat16, gt.int8, gt.uint8, gt.int16,
                                   gt.int32, gt.complex128], ids=lambda d: d.name)
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((2, 5), (5, 4)),
                                    ((2, 2, 3), (2, 3, 4))], ids=str)
def test_matmul_dtypes(device: str, shapes: tuple, dtype: gt.dtype) -> None:
    check(lambda m, a, b: m.matmul(a, b), shapes, device, dtype)


TRANSPOSED = [
    ("t_left", lambda m, a, b: a.t() @ b, [(3, 2), (3, 4)]),
    ("t_right", lambda m, a, b: a @ b.t(), [(2, 3), (4, 3)]),
    ("t_both", lambda m, a, b: a.t() @ b.t(), [(3, 2), (4, 3)]),
    ("mT_batched", lambda m, a, b: a.mT @ b, [(2, 3, 2), (2, 3, 4)]),
    ("unfoldable_3d_2d", lambda m, a, b: a.transpose(0, 1) @ b, [(3, 2, 4), (4, 5)]),
    ("expanded_batch", lambda m, a, b: a.expand(3, 2, 4) @ b, [(1, 2, 4), (3, 4, 2)]),
    ("sliced_rows", lambda m, a, b: a[::2] @ b[:, 1:], [(6, 3), (3, 5)]),
    ("rmatmul_operator", lambda m, a, b: a.__rmatmul__(b), [(3, 4), (2, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", TRANSPOSED, ids=[c[0] for c in TRANSPOSED])
def test_matmul_strided_views(device: str, name: str, fn: Fn, shapes: list) -> None:
    check(fn, shapes, device)


def test_matmul_large_blas_path(device: str) -> None:
    # Big enough for OpenBLAS's threaded kernels; transposed and sliced views too.
    check(lambda m, a, b: a @ b, [(96, 130), (130, 70)], device, atol=1e-4, rtol=1e-4)
    check(lambda m, a, b: a.t() @ b[:, ::2], [(130, 96), (130, 140)], device, atol=1e-4,
          rtol=1e-4)


def test_integer_overflow_wraps(device: str) -> None:
    def fn(m: Any) -> Any:
        a = m.full((1, 2), 100, dtype=m.int8, device=device if m is gt else "cpu")
        return a @ a.t(), m.dot(a[0], a[0])
    assert_close(fn(gt), fn(torch))


@pytest.mark.parametrize("out_shape", [(0,), (2, 4)])
def test_matmul_out(device: str, out_shape: tuple) -> None:
    def fn(m: Any, a: Any, b: Any) -> Any:
        out = m.empty(out_shape, device=a.device)
        res = m.matmul(a, b, out=out)
        assert res is out
        return out
    check(fn, [(2, 3), (3, 4)], device)


@pytest.mark.parametrize("shapes,make_out", [
    ([(2, 3), (3, 4)], lambda m, d: m.empty(4, 2, device=d).t()),
    ([(2, 2, 3), (3, 4)], lambda m, d: m.empty(4, 2, 2, device=d).permute(1, 2, 0)),
    ([(2, 2, 3), (2, 3, 4)], lambda m, d: m.empty(2, 4, 2, device=d).transpose(1, 2)),
    ([(3,), (3, 4)], lambda m, d: m.empty(8, device=d)[::2]),
], ids=["t", "fold_unviewable", "batched", "vec"])
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_matmul_noncontiguous_out(device: str, shapes: list, make_out: Fn) -> None:
    def fn(m: Any, a: Any, b: Any) -> Any:
        out = make_out(m, a.device)
        assert m.matmul(a, b, out=out) is out
        return out
    check(fn, shapes, device)


@pytest.mark.parametrize("fn,shapes", [
    (lambda m, a, b: m.mm(a, b, out=m.empty(0, device=a.device)), [(2, 3), (3, 4)]),
    (lambda m, a, b: m.bmm(a, b, out=m.empty(0, device=a.device)), [(2, 2, 3), (2, 3, 4)]),
    (lambda m, a, b: m.mv(a, b, out=m.empty(0, device=a.device)), [(2, 3), (3,)]),
    (lambda m, a, b: m.dot(a, b, out=m.empty(0, device=a.device)), [(3,), (3,)]),
    (lambda m, a, b: m.matmul(a, b, out=m.empty(0, device=a.device)), [(3,), (3,)]),
    (lambda m, a, b: m.matmul(a, b, out=m.empty(0, device=a.device)), [(2, 2, 3), (3,)]),
    (lambda m, a, b: m.outer(a, b, out=m.empty(0, dtype=m.float64, device=a.device)),
     [(2,), (3,)]),
], ids=["mm", "bmm", "mv", "dot", "matmul_1d", "matmul_fold_mv", "outer_float64"])
def test_out_variants(device: str, fn: Fn, shapes: list) -> None:
    check(fn, shapes, device)


def test_out_bumps_version(device: str) -> None:
    a = gt.ones(2, 2, device=device)
    out = gt.empty(2, 2, device=device)
    v = out._version
    gt.mm(a, a, out=out)
    assert out._version > v


# -- the named products ----------------------------------------------------------------------
NAMED = [
    ("mm", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)]),
    ("mm_method", lambda m, a, b: a.mm(b), [(2, 3), (3, 4)]),
    ("bmm", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (2, 3, 4)]),
    ("mv", lambda m, a, b: m.mv(a, b), [(2, 3), (3,)]),
    ("dot", lambda m, a, b: m.dot(a, b), [(5,), (5,)]),
    ("vdot", lambda m, a, b: m.vdot(a, b), [(5,), (5,)]),
    ("outer", lambda m, a, b: m.outer(a, b), [(2,), (3,)]),
    ("ger", lambda m, a, b: m.ger(a, b), [(2,), (3,)]),
    ("inner", lambda m, a, b: m.inner(a, b), [(2, 3), (4, 3)]),
    ("inner_1d", lambda m, a, b: m.inner(a, b), [(3,), (3,)]),
    ("inner_3d", lambda m, a, b: a.inner(b), [(2, 3, 4), (5, 4)]),
    ("inner_0d", lambda m, a, b: m.inner(a, b), [(), (2, 3)]),
    ("kron", lambda m, a, b: m.kron(a, b), [(2, 3), (4,)]),
    ("kron_3d_2d", lambda m, a, b: a.kron(b), [(2, 3, 4), (2, 2)]),
    ("kron_0d", lambda m, a, b: m.kron(a, b), [(), (4,)]),
    ("kron_empty", lambda m, a, b: m.kron(a, b), [(0, 2), (3,)]),
    ("kron_out", lambda m, a, b: m.kron(a, b, out=m.empty(0, device=a.device)), [(2,), (3,)]),
    ("tensordot_2", lambda m, a, b: m.tensordot(a, b), [(2, 3, 4), (3, 4, 5)]),
    ("tensordot_1", lambda m, a, b: m.tensordot(a, b, dims=1), [(2, 3), (3, 4)]),
    ("tensordot_0", lambda m, a, b: m.tensordot(a, b, dims=0), [(2, 3), (4,)]),
    ("tensordot_lists", lambda m, a, b: m.tensordot(a, b, dims=([1, 2], [1, 0])),
     [(2, 3, 4), (4, 3)]),
    ("tensordot_neg", lambda m, a, b: m.tensordot(a, b, dims=([-1], [0])), [(2, 3), (3, 4)]),
    ("tensordot_tensor_dims", lambda m, a, b: m.tensordot(a, b, dims=m.tensor(1)),
     [(2, 3), (3, 4)]),
    ("tensordot_tensor_pair", lambda m, a, b: m.tensordot(a, b, dims=m.tensor([[1], [0]])),
     [(2, 3), (3, 4)]),
    ("tensordot_broadcast", lambda m, a, b: m.tensordot(a, b, dims=([1], [0])), [(2, 1), (3, 5)]),
    ("tensordot_out", lambda m, a, b: m.tensordot(a, b, dims=1, out=m.empty(0, device=a.device)),
     [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", NAMED, ids=[c[0] for c in NAMED])
def test_named_products(device: str, name: str, fn: Fn, shapes: list) -> None:
    check(fn, shapes, device)


@pytest.mark.parametrize("name,fn,shapes", NAMED[:9], ids=[c[0] for c in NAMED[:9]])
def test_named_products_noncontiguous(device: str, name: str, fn: Fn, shapes: list) -> None:
    check(fn, shapes, device, noncontig=True)


@pytest.mark.parametrize("dtype", [gt.int32, gt.float16, gt.complex64, gt.complex128],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("name,fn,shapes", NAMED[:9], ids=[c[0] for c in NAMED[:9]])
def test_named_products_dtypes(device: str, name: str, fn: Fn, shapes: list,
                               dtype: gt.dtype) -> None:
    check(fn, shapes, device, dtype)


PROMOTING = [
    ("outer_int_float", lambda m, a, b: m.outer(a, b), [(3,), (2,)], [gt.int32, gt.float32]),
    ("outer_bool", lambda m, a, b: m.outer(a, b), [(3,), (2,)], [gt.bool, gt.bool]),
    ("kron_int_bool", lambda m, a, b: m.kron(a, b), [(3,), (2,)], [gt.int64, gt.bool]),
    ("kron_bool", lambda m, a, b: m.kron(a, b), [(3,), (2,)], [gt.bool, gt.bool]),
    ("inner_0d", lambda m, a, b: m.inner(a, b), [(), (3,)], [gt.int64, gt.float32]),
]


@pytest.mark.parametrize("name,fn,shapes,dtypes", PROMOTING, ids=[c[0] for c in PROMOTING])
def test_promoting_products(device: str, name: str, fn: Fn, shapes: list, dtypes: list) -> None:
    check(fn, shapes, device, dtypes)


def test_vdot_conjugates(device: str) -> None:
    def fn(m: Any) -> Any:
        dev = device if m is gt else "cpu"
        x = m.tensor([1 + 2j, 3j], device=dev)
        y = m.tensor([1 + 1j, 2 + 0j], device=dev)
        return m.vdot(x, y), m.dot(x, y)
    assert_close(fn(gt), fn(torch))


# -- add* products with beta and alpha ---------------------------------------------------------
ADD_CASES = [
    ("addmm", lambda m, c, a, b, **k: m.addmm(c, a, b, **k), [(2, 4), (2, 3), (3, 4)]),
    ("addmm_bias", lambda m, c, a, b, **k: m.addmm(c, a, b, **k), [(4,), (2, 3), (3, 4)]),
    ("addmm_0d", lambda m, c, a, b, **k: m.addmm(c, a, b, **k), [(), (2, 3), (3, 4)]),
    ("addmm_method", lambda m, c, a, b, **k: c.addmm(a, b, **k), [(2, 4), (2, 3), (3, 4)]),
    ("addmv", lambda m, c, a, b, **k: m.addmv(c, a, b, **k), [(2,), (2, 3), (3,)]),
    ("addmv_0d", lambda m, c, a, b, **k: m.addmv(c, a, b, **k), [(), (2, 3), (3,)]),
    ("addmv_method", lambda m, c, a, b, **k: c.addmv(a, b, **k), [(2,), (2, 3), (3,)]),
    ("baddbmm", lambda m, c, a, b, **k: m.baddbmm(c, a, b, **k), [(2, 2, 4), (2, 2, 3),
                                                                    (2, 3, 4)]),
    ("baddbmm_bcast", lambda m, c, a, b, **k: m.baddbmm(c, a, b, **k), [(4,), (2, 2, 3),
                                                                          (2, 3, 4)]),
    ("addbmm", lambda m, c, a, b, **k: m.addbmm(c, a, b, **k), [(2, 4), (3, 2, 3), (3, 3, 4)]),
    ("addbmm_empty_batch", lambda m, c, a, b, **k: m.addbmm(c, a, b, **k),
     [(2, 4), (0, 2, 3), (0, 3, 4)]),
]
ADD_DTYPE_CASES = [c for c in ADD_CASES if c[0] in ("addmm_bias", "addmv", "baddbmm", "addbmm",
                                                   "addbmm_empty_batch")]
SCALARS = [{}, {"beta": 0.5, "alpha": 2.0}, {"beta": 0}, {"alpha": 0}, {"beta": 2, "alpha": -1},
           {"alpha": True}]


@pytest.mark.parametrize("scalars", SCALARS, ids=str)
@pytest.mark.parametrize("name,fn,shapes", ADD_CASES, ids=[c[0] for c in ADD_CASES])
def test_add_products(device: str, name: str, fn: Fn, shapes: list, scalars: dict) -> None:
    check(lambda m, *t: fn(m, *t, **scalars), shapes, device)


@pytest.mark.parametrize("dtype", [gt.int64, gt.float64, gt.float16, gt.complex64],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("name,fn,shapes", ADD_DTYPE_CASES, ids=[c[0] for c in ADD_DTYPE_CASES])
def test_add_products_dtypes(device: str, name: str, fn: Fn, shapes: list,
                             dtype: gt.dtype) -> None:
    # Float scalars on integer tensors truncate, as in PyTorch (whose empty-batch addbmm instead
    # raises for them: it scales with mul_ there, a path-dependent quirk not copied here).
    if name == "addbmm_empty_batch" and dtype is gt.int64:
        # Compare with the truncated scalars PyTorch would use on its other integer paths.
        check(lambda m, *t: fn(m, *t, beta=2.7 if m is gt else 2, alpha=1.5 if m is gt else 1),
              shapes, device, dtype)
        return
    check(lambda m, *t: fn(m, *t, beta=2.7, alpha=1.5), shapes, device, dtype)


@pytest.mark.parametrize("name,fn,shapes", ADD_CASES, ids=[c[0] for c in ADD_CASES])
def test_add_products_noncontiguous_and_out(device: str, name: str, fn: Fn,
                                            shapes: list) -> None:
    check(lambda m, *t: fn(m, *t, beta=0.5), shapes, device, noncontig=True)
    if "method" not in name:  # Tensor.addmm and friends take no out=
        check(lambda m, *t: fn(m, *t, out=m.empty(0, device=t[0].device)), shapes, device)


def test_beta_zero_ignores_nan_alpha_zero_ignores_inf(device: str) -> None:
    def fn(m: Any) -> Any:
        dev = device if m is gt else "cpu"
        nan = m.full((2, 2), float("nan"), device=dev)
        one = m.ones(2, 2, device=dev)
        inf = m.full((2, 2), float("inf"), device=dev)
        return (m.addmm(nan, one, one, beta=0), m.addmm(one, inf, one, alpha=0),
                m.addmv(nan[0], one, one[0], beta=0),
                m.baddbmm(nan[None], one[None], one[None], beta=0.0))
    assert_close(fn(gt), fn(torch))


@pytest.mark.parametrize("dtype,value", [
    (gt.uint8, -1), (gt.uint8, -256), (gt.uint8, 2.9), (gt.int8, 300), (gt.int8, -128),
    (gt.int16, 70000), (gt.int32, 2 ** 40), (gt.float16, 1e6), (gt.float16, 1e300),
    (gt.float32, 1e300), (gt.float64, 1e300), (gt.complex64, 1e300j), (gt.float32, 1 + 0j),
], ids=str)
def test_alpha_conversion(device: str, dtype: gt.dtype, value: Any) -> None:
    """alpha converts to the tensors' type like PyTorch's checked conversion (wrap or raise)."""
    def fn(m: Any, c: Any) -> Any:
        return m.addmm(c, c, c, alpha=value)
    shapes = [(2, 2)]
    ours, theirs = _inputs(shapes, dtype, device)
    try:
        expected = fn(torch, *theirs)
    except RuntimeError:
        check_error(fn, shapes, device, dtype)
    else:
        assert_close(fn(gt, *ours), expected)


INPLACE = [
    ("addmm_", lambda c, a, b, **k: c.addmm_(a, b, **k), [(2, 4), (2, 3), (3, 4)]),
    ("addmv_", lambda c, a, b, **k: c.addmv_(a, b, **k), [(2,), (2, 3), (3,)]),
    ("baddbmm_", lambda c, a, b, **k: c.baddbmm_(a, b, **k), [(2, 2, 4), (2, 2, 3), (2, 3, 4)]),
    ("addbmm_", lambda c, a, b, **k: c.addbmm_(a, b, **k), [(2, 4), (3, 2, 3), (3, 3, 4)]),
]


@pytest.mark.parametrize("noncontig", [False, True])
@pytest.mark.parametrize("name,fn,shapes", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_products(device: str, name: str, fn: Fn, shapes: list,
                          noncontig: bool) -> None:
    def run(m: Any, c: Any, a: Any, b: Any) -> Any:
        v = c._version
        res = fn(c, a, b, beta=0.5, alpha=2)
        assert res is c and c._version > v
        return c
    check(run, shapes, device, noncontig=noncontig)


# -- einsum ------------------------------------------------------------------------------------
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("i,j->ij", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(5, 1, 2, 3), (4, 3, 4)]), ("i...->...", [(2, 3)]),
    ("...i->i", [(2, 3)]), ("ij->...", [(2, 3)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ba,ca", [(2, 3), (4, 3)]), ("Aa", [(2, 3)]), ("iij->j", [(2, 2, 3)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]), ("i,i->i", [(1,), (3,)]), ("i,i->", [(0,), (0,)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("", [()]), (",i->i", [(), (2,)]), ("...,...->...", [(2, 1), (3,)]), ("i...->...", [(2,)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]), ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[repr(c[0]) for c in EINSUM])
def test_einsum(device: str, eq: str, shapes: list) -> None:
    check(lambda m, *t: m.einsum(eq, *t), shapes, device)


@pytest.mark.parametrize("dtype", [gt.float64, gt.float16, gt.bfloat16, gt.int32, gt.complex64,
                                   gt.bool], ids=lambda d: d.name)
@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij->i", [(2, 3)]),
                                       ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]),
                                       ("i,j->ij", [(2,), (3,)]), ("ii->i", [(3, 3)])], ids=str)
def test_einsum_dtypes(device: str, eq: str, shapes: list, dtype: gt.dtype) -> None:
    fn = lambda m, *t: m.einsum(eq, *t)  # noqa: E731
    if dtype is gt.bool and eq == "ij,jk->ik":
        check_error(fn, shapes, device, dtype)  # a bool contraction: "bmm" not implemented
    else:
        check(fn, shapes, device, dtype)


@pytest.mark.parametrize("fn", [
    lambda m, a, b: m.einsum("ij,jk", [a, b]),
    lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]),
    lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2]),
    lambda m, a, b: m.einsum(a, [Ellipsis, 1], b, [1, 2], [Ellipsis, 2]),
    lambda m, a, b: m.einsum("ij,jk", a.t().t(), b[:, ::1]),
], ids=["list", "sublist", "sublist_implicit", "sublist_ellipsis", "views"])
def test_einsum_call_forms(device: str, fn: Fn) -> None:
    check(fn, [(2, 3), (3, 4)], device)
    check(fn, [(2, 3), (3, 4)], device, noncontig=True)


EINSUM_ERRORS = [
    ("ij,jk->ik", [(2, 3), (4, 5)]), ("ij,jk->ik", [(2, 3)]), ("ij,jk->ik", [(2, 3, 3), (3, 4)]),
    ("ij->k", [(3, 3)]), ("ij->ii", [(3, 3)]), ("i1->i", [(3, 3)]), ("ii->i", [(2, 3)]),
    ("...i...->i", [(2, 3)]), ("ij-k", [(2, 3)]), ("ij->i", [(2, 3), (2, 3)]),
    ("i.j", [(2, 3)]), ("ij->i..", [(2, 3)]), ("ijk", [(2, 3)]), ("...ijk", [(2, 3)]),
    ("ii->i", [(1, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_ERRORS, ids=[repr(c[0]) for c in EINSUM_ERRORS])
def test_einsum_errors(device: str, eq: str, shapes: list) -> None:
    check_error(lambda m, *t: m.einsum(eq, *t), shapes, device)


def test_einsum_argument_errors(device: str) -> None:
    x = gt.ones(2, 3, device=device)
    with pytest.raises(ValueError, match="must specify the equation string"):
        gt.einsum("->")
    with pytest.raises(TypeError, match="expected Tensor as element 0"):
        gt.einsum("ij", [[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"not within the valid range \[0, 52\)"):
        gt.einsum(x, [0, 60])
    with pytest.raises(RuntimeError, match="expected scalar type Int but found Float"):
        gt.einsum("ij,jk", x.int(), x.t())
    with pytest.raises(RuntimeError, match="ellipsis .* does not broadcast"):
        gt.einsum("...ij,...ij", gt.ones(2, 3, 3, device=device), gt.ones(4, 3, 3, device=device))


# -- error messages ----------------------------------------------------------------------------
F32, F64, I32, I64, B = gt.float32, gt.float64, gt.int32, gt.int64, gt.bool
ERRORS = [
    ("mm_shapes", lambda m, a, b: m.mm(a, b), [(2, 3), (4, 5)], F32),
    ("matmul_shapes", lambda m, a, b: a @ b, [(2, 3), (4, 5)], F32),
    ("matmul_1d2d", lambda m, a, b: a @ b, [(3,), (4, 5)], F32),
    ("matmul_2d1d", lambda m, a, b: a @ b, [(2, 3), (4,)], F32),
    ("matmul_1d1d", lambda m, a, b: a @ b, [(3,), (4,)], F32),
    ("matmul_3d2d", lambda m, a, b: a @ b, [(2, 2, 3), (4, 5)], F32),
    ("matmul_3d1d", lambda m, a, b: a @ b, [(2, 2, 3), (4,)], F32),
    ("matmul_1d3d", lambda m, a, b: a @ b, [(3,), (2, 4, 5)], F32),
    ("matmul_2d3d", lambda m, a, b: a @ b, [(2, 3), (2, 4, 5)], F32),
    ("matmul_3d3d", lambda m, a, b: a @ b, [(2, 2, 3), (2, 4, 5)], F32),
    ("matmul_batch", lambda m, a, b: a @ b, [(2, 2, 3), (3, 3, 5)], F32),
    ("matmul_0d", lambda m, a, b: m.matmul(a, b), [(), (3,)], F32),
    ("matmul_0d_right", lambda m, a, b: m.matmul(a, b), [(3,), ()], F32),
    ("matmul_dtype", lambda m, a, b: a @ b, [(2, 3), (3, 4)], [F32, F64]),
    ("matmul_dtype_int", lambda m, a, b: a @ b, [(2, 3), (3, 4)], [I32, I64]),
    ("matmul_dtype_1d", lambda m, a, b: a @ b, [(3,), (3,)], [F32, F64]),
    ("matmul_dtype_2d1d", lambda m, a, b: a @ b, [(2, 3), (3,)], [F32, F64]),
    ("matmul_dtype_3d", lambda m, a, b: a @ b, [(2, 2, 3), (2, 3, 4)], [F32, F64]),
    ("matmul_out_dtype", lambda m, a, b: m.matmul(a, b, out=m.empty(2, 4, dtype=m.float64,
                                                                    device=a.device)),
     [(2, 3), (3, 4)], F32),
    ("mm_1d", lambda m, a, b: m.mm(a, b), [(3,), (3, 4)], F32),
    ("mm_3d", lambda m, a, b: m.mm(a, b), [(2, 3), (2, 3, 4)], F32),
    ("mm_dtype", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)], [F32, F64]),
    ("mm_complex_float", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)], [gt.complex64, F32]),
    ("mm_out_dtype", lambda m, a, b: m.mm(a, b, out=m.empty(2, 4, dtype=m.float64,
                                                            device=a.device)),
     [(2, 3), (3, 4)], F32),
    ("mm_not_tensor", lambda m, a, b: m.mm(a, [1]), [(2, 3), (3, 4)], F32),
    ("mm_bool", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)], B),
    ("matmul_bool_1d", lambda m, a, b: a @ b, [(3,), (3,)], B),
    ("matmul_bool_3d", lambda m, a, b: a @ b, [(2, 2, 3), (2, 3, 4)], B),
    ("bmm_2d", lambda m, a, b: m.bmm(a, b), [(2, 3), (3, 4)], F32),
    ("bmm_2d_right", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (3, 4)], F32),
    ("bmm_batch", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (3, 3, 4)], F32),
    ("bmm_inner", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (2, 4, 4)], F32),
    ("bmm_dtype", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (2, 3, 4)], [F32, F64]),
    ("bmm_bool", lambda m, a, b: m.bmm(a, b), [(2, 2, 3), (2, 3, 4)], B),
    ("bmm_out_dtype", lambda m, a, b: m.bmm(a, b, out=m.empty(0, dtype=m.float64,
                                                              device=a.device)),
     [(2, 2, 3), (2, 3, 4)], F32),
    ("mv_shapes", lambda m, a, b: m.mv(a, b), [(2, 3), (4,)], F32),
    ("mv_1d", lambda m, a, b: m.mv(a, b), [(3,), (3,)], F32),
    ("mv_2d_vec", lambda m, a, b: m.mv(a, b), [(2, 3), (3, 1)], F32),
    ("mv_dtype", lambda m, a, b: m.mv(a, b), [(2, 3), (3,)], [F32, F64]),
    ("mv_bool", lambda m, a, b: m.mv(a, b), [(2, 3), (3,)], B),
    ("dot_2d", lambda m, a, b: m.dot(a, b), [(2, 3), (3,)], F32),
    ("dot_0d", lambda m, a, b: m.dot(a, b), [(), ()], F32),
    ("dot_sizes", lambda m, a, b: m.dot(a, b), [(3,), (4,)], F32),
    ("dot_dtype", lambda m, a, b: m.dot(a, b), [(3,), (3,)], [F32, F64]),
    ("dot_bool", lambda m, a, b: m.dot(a, b), [(3,), (3,)], B),
    ("dot_out_dtype", lambda m, a, b: m.dot(a, b, out=m.empty(0, dtype=m.float64,
                                                              device=a.device)),
     [(3,), (3,)], F32),
    ("vdot_sizes", lambda m, a, b: m.vdot(a, b), [(3,), (4,)], F32),
    ("vdot_2d", lambda m, a, b: m.vdot(a, b), [(2, 3), (3,)], F32),
    ("vdot_dtype", lambda m, a, b: m.vdot(a, b), [(3,), (3,)], [F32, F64]),
    ("outer_2d", lambda m, a, b: m.outer(a, b), [(2, 3), (3,)], F32),
    ("outer_0d", lambda m, a, b: m.outer(a, b), [(), (3,)], F32),
    ("outer_out_cast", lambda m, a, b: m.outer(a, b, out=m.empty(0, dtype=m.int64,
                                                                 device=a.device)),
     [(2,), (3,)], F32),
    ("inner_last_dim", lambda m, a, b: m.inner(a, b), [(2, 3), (2, 4)], F32),
    ("inner_dtype", lambda m, a, b: m.inner(a, b), [(2, 3), (4, 3)], [I32, F32]),
    ("inner_bool", lambda m, a, b: m.inner(a, b), [(2, 3), (4, 3)], B),
    ("tensordot_sizes", lambda m, a, b: m.tensordot(a, b, dims=1), [(2, 3), (4, 5)], F32),
    ("tensordot_list_sizes", lambda m, a, b: m.tensordot(a, b, dims=([1], [0])),
     [(2, 3), (4, 5)], F32),
    ("tensordot_lengths", lambda m, a, b: m.tensordot(a, b, dims=([1], [0, 1])),
     [(2, 3), (3, 5)], F32),
    ("tensordot_negative", lambda m, a, b: m.tensordot(a, b, dims=-1), [(2, 3), (3, 5)], F32),
    ("tensordot_too_many", lambda m, a, b: m.tensordot(a, b, dims=3), [(2, 3), (3, 5)], F32),
    ("tensordot_float_dims", lambda m, a, b: m.tensordot(a, b, dims=1.0), [(2, 3), (3, 5)], F32),
    ("tensordot_dup", lambda m, a, b: m.tensordot(a, b, dims=([0, 0], [0, 1])),
     [(3, 3), (3, 3)], F32),
    ("tensordot_bad_dim", lambda m, a, b: m.tensordot(a, b, dims=([5], [0])), [(2, 3), (3, 4)],
     F32),
    ("tensordot_dtype", lambda m, a, b: m.tensordot(a, b, dims=1), [(2, 3), (3, 4)], [I32, F32]),
    ("tensordot_int_pair", lambda m, a, b: m.tensordot(a, b, dims=[1, 0]), [(2, 3), (3, 4)],
     F32),
]
ADD_ERRORS = [
    ("addmm_input_shape", lambda m, c, a, b: m.addmm(c, a, b), [(3,), (2, 3), (3, 4)], F32),
    ("addmm_shapes", lambda m, c, a, b: m.addmm(c, a, b), [(2, 4), (2, 3), (2, 4)], F32),
    ("addmm_input_dtype", lambda m, c, a, b: m.addmm(c, a, b), [(2, 4), (2, 3), (3, 4)],
     [F64, F32, F32]),
    ("addmm_mat_dtype", lambda m, c, a, b: m.addmm(c, a, b), [(2, 4), (2, 3), (3, 4)],
     [F32, F64, F32]),
    ("addmm_mat2_dtype", lambda m, c, a, b: m.addmm(c, a, b), [(2, 4), (2, 3), (3, 4)],
     [F32, F32, F64]),
    ("addmm_1d_mat", lambda m, c, a, b: m.addmm(c, a, b), [(2, 4), (3,), (3, 4)], F32),
    ("addmm_bool", lambda m, c, a, b: m.addmm(c, a, b), [(2, 4), (2, 3), (3, 4)], B),
    ("addmm_complex_beta", lambda m, c, a, b: m.addmm(c, a, b, beta=1j), [(2, 4), (2, 3), (3, 4)],
     F32),
    ("addmm_out_dtype", lambda m, c, a, b: m.addmm(c, a, b, out=m.empty(0, dtype=m.float64,
                                                                        device=a.device)),
     [(2, 4), (2, 3), (3, 4)], F32),
    ("addmm_inplace_shape", lambda m, c, a, b: c.addmm_(a, b), [(4,), (2, 3), (3, 4)], F32),
    ("addmv_input", lambda m, c, a, b: m.addmv(c, a, b), [(3,), (2, 3), (3,)], F32),
    ("addmv_input_2d", lambda m, c, a, b: m.addmv(c, a, b), [(2, 2), (2, 3), (3,)], F32),
    ("addmv_shapes", lambda m, c, a, b: m.addmv(c, a, b), [(2,), (2, 3), (4,)], F32),
    ("addmv_dtype", lambda m, c, a, b: m.addmv(c, a, b), [(2,), (2, 3), (3,)], [F32, F64, F32]),
    ("addmv_bool", lambda m, c, a, b: m.addmv(c, a, b), [(2,), (2, 3), (3,)], B),
    ("baddbmm_input", lambda m, c, a, b: m.baddbmm(c, a, b), [(3, 2, 4), (2, 2, 3), (2, 3, 4)],
     F32),
    ("baddbmm_shapes", lambda m, c, a, b: m.baddbmm(c, a, b), [(2, 2, 4), (2, 2, 3), (2, 4, 4)],
     F32),
    ("baddbmm_input_dtype", lambda m, c, a, b: m.baddbmm(c, a, b),
     [(2, 2, 4), (2, 2, 3), (2, 3, 4)], [F64, F32, F32]),
    ("baddbmm_batch_dtype", lambda m, c, a, b: m.baddbmm(c, a, b),
     [(2, 2, 4), (2, 2, 3), (2, 3, 4)], [F32, F32, F64]),
    ("baddbmm_bool", lambda m, c, a, b: m.baddbmm(c, a, b), [(2, 2, 4), (2, 2, 3), (2, 3, 4)], B),
    ("addbmm_input", lambda m, c, a, b: m.addbmm(c, a, b), [(3, 4), (2, 2, 3), (2, 3, 4)], F32),
    ("addbmm_batches", lambda m, c, a, b: m.addbmm(c, a, b), [(2, 4), (2, 2, 3), (3, 3, 4)], F32),
    ("addbmm_inner", lambda m, c, a, b: m.addbmm(c, a, b), [(2, 4), (2, 2, 3), (2, 4, 4)], F32),
    ("addbmm_input_dtype", lambda m, c, a, b: m.addbmm(c, a, b),
     [(2, 4), (2, 2, 3), (2, 3, 4)], [F64, F32, F32]),
    ("addbmm_batch_dtype", lambda m, c, a, b: m.addbmm(c, a, b),
     [(2, 4), (2, 2, 3), (2, 3, 4)], [F32, F32, F64]),
    ("addbmm_bool", lambda m, c, a, b: m.addbmm(c, a, b), [(2, 4), (2, 2, 3), (2, 3, 4)], B),
]


@pytest.mark.parametrize("name,fn,shapes,dtype", ERRORS + ADD_ERRORS,
                         ids=[c[0] for c in ERRORS + ADD_ERRORS])
def test_errors_match_torch(device: str, name: str, fn: Fn, shapes: list, dtype: Any) -> None:
    # Sizes in the 2-D addmm input message come from expand, which words >2-D inputs its own way.
    check_error(fn, shapes, device, dtype, exact=name != "addmv_input_2d")


def test_errors_raise_before_any_kernel(device: str) -> None:
    out = gt.full((2, 4), 7.0, device=device)
    with pytest.raises(RuntimeError):
        gt.addmm(out, gt.ones(2, 3, device=device), gt.ones(4, 4, device=device), out=out)
    assert out.cpu().numpy().tolist() == [[7.0] * 4] * 2


# -- registry, methods, cost models ----------------------------------------------------------
def test_registry_and_methods() -> None:
    for name in ["matmul", "mm", "bmm", "addmm", "addmv", "mv", "dot", "vdot", "outer",
                 "baddbmm", "addbmm", "inner", "tensordot", "einsum", "kron"]:
        assert name in OPS and getattr(gt, name) is OPS[name].frontend
        assert OPS[name].cost is not None
    assert gt.ger is gt.outer
    for name in ["matmul", "mm", "bmm", "addmm", "addmm_", "addmv_", "baddbmm_", "addbmm_",
                 "mv", "dot", "vdot", "outer", "ger", "inner", "kron"]:
        assert hasattr(gt.Tensor, name), name
    assert not hasattr(gt.Tensor, "einsum") and not hasattr(gt.Tensor, "tensordot")


def test_cost_models() -> None:
    a, b, c = gt.ones(2, 4), gt.ones(4, 3), gt.ones(2, 3)
    out = gt.mm(a, b)
    assert OPS["mm"].cost([a, b], out) == ((8 + 12 + 6) * 4, 2 * 6 * 4)
    nbytes, flops = OPS["addmm"].cost([c, a, b], out)
    assert flops == 2 * 6 * 4 + 2 * 6 and nbytes == (6 + 8 + 12 + 6) * 4
    b1, b2 = gt.ones(5, 2, 4), gt.ones(5, 4, 3)
    assert OPS["bmm"].cost([b1, b2], gt.bmm(b1, b2))[1] == 5 * 2 * 2 * 3 * 4
    assert OPS["addbmm"].cost([c, b1, b2], out)[1] == 2 * 6 * (5 * 4) + 2 * 6
    v, w = gt.ones(6), gt.ones(4)
    assert OPS["outer"].cost([v, w], gt.outer(v, w)) == ((6 + 4 + 24) * 4, 24)
    assert OPS["tensordot"].cost([a, b], out)[1] == 2 * 6 * 4  # exact for a contraction
    assert OPS["einsum"].cost(["ij,jk->ik", a, b], out)[1] == 2 * 6 * 4


# -- property test: random broadcast shapes through matmul ---------------------------------------
_dims = st.integers(0, 3)


@settings(max_examples=40, deadline=None)
@given(batch_a=st.lists(st.integers(1, 3), max_size=2), batch_b=st.lists(st.integers(1, 3),
       max_size=2), n=_dims, k=_dims, m=_dims, vec_a=st.booleans(), vec_b=st.booleans(),
       transpose=st.booleans())
def test_matmul_random_shapes(batch_a: list, batch_b: list, n: int, k: int, m: int, vec_a: bool,
                              vec_b: bool, transpose: bool) -> None:
    # Batch sizes broadcast when one side is 1; otherwise both errors must agree.
    shape_a = (k,) if vec_a else (*batch_a, n, k)
    shape_b = (k,) if vec_b else (*batch_b, k, m)
    if transpose and not vec_a:
        fn = lambda m_, a, b: a.transpose(-1, -2).transpose(-1, -2) @ b  # noqa: E731
    else:
        fn = lambda m_, a, b: a @ b  # noqa: E731
    ours, theirs = _inputs([shape_a, shape_b], gt.float64, "cpu")
    try:
        expected = fn(torch, *theirs)
    except RuntimeError:
        check_error(fn, [shape_a, shape_b], "cpu", gt.float64)
        return
    assert_close(fn(gt, *ours), expected)


@requires_torch
@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_mm_gradients_of_a_column_major_factor_keep_its_layout(device: str, op: str) -> None:
    """PyTorch's mm_mat1/mat2_backward: the gradient of a transposed (column-major) factor is
    computed column-major, so ``x @ w.t()``'s ``w.grad`` has ``w``'s layout (no copy in
    AccumulateGrad); values and gradcheck as before."""
    rng = np.random.default_rng(6)
    xn, wn, bn = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    grads = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        x = lib.tensor(xn, device=dev).t().contiguous().t().requires_grad_()  # column-major
        w = lib.tensor(wn, device=dev, requires_grad=True)
        b = lib.tensor(bn, device=dev, requires_grad=True)
        y = lib.mm(x, w.t()) if op == "mm" else lib.addmm(b, x, w.t(), beta=0.5, alpha=2.0)
        (y * y).sum().backward()
        grads.append([(t.grad.stride(), t.grad.cpu().numpy()) for t in (x, w)])
    for (gs, gv), (ts, tv) in zip(*grads, strict=True):
        assert gs == ts
        np.testing.assert_allclose(gv, tv, rtol=1e-12)
    x = gt.tensor(xn, device=device).t().contiguous().t().requires_grad_()
    w = gt.tensor(wn, device=device, requires_grad=True)
    assert gt.autograd.gradcheck(lambda x, w: gt.mm(x, w.t()), (x, w))

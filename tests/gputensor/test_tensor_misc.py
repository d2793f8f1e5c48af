"""Small Tensor methods and torch functions (gputensor/_ops/tensor_misc.py, tensor_set.py,
tensor_apply.py, gputensor/_buffers.py, gputensor/_misc_functions.py,
gputensor/sparse/_resize.py and _products.py), each compared with PyTorch on cpu and emulated
cuda."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def _raises_like(gt_fn, torch_fn, exact: bool = True) -> Exception:
    """Both calls raise the same exception type (and message, when ``exact``)."""
    with pytest.raises(Exception) as te:
        torch_fn()
    with pytest.raises(type(te.value)) as ge:
        gt_fn()
    if exact:
        assert str(ge.value) == str(te.value)
    return ge.value


def _sparse_pair(dense: np.ndarray, device: str, sparse_dim: int | None = None):
    args = () if sparse_dim is None else (sparse_dim,)
    return (gt.tensor(dense, device=device).to_sparse(*args),
            torch.tensor(dense).to_sparse(*args))


def _assert_sparse_like(a, b, atol: float = 1e-6) -> None:
    assert a.layout is gt.sparse_coo and b.layout is torch.sparse_coo
    assert tuple(a.shape) == tuple(b.shape)
    assert a.sparse_dim() == b.sparse_dim() and a.dense_dim() == b.dense_dim()
    assert a.is_coalesced() == b.is_coalesced()
    assert_close(a._indices(), b._indices())
    assert_close(a._values(), b._values(), atol=atol, rtol=atol)


# -- predicates ----------------------------------------------------------------------------------
NEVER = ["is_xla", "is_ipu", "is_maia", "is_mtia", "is_vulkan", "is_mkldnn", "is_nested",
         "is_sparse_csr"]


@pytest.mark.parametrize("name", NEVER)
def test_absent_backend_predicates(device: str, name: str) -> None:
    x, t = gt.ones(2, device=device), torch.ones(2)
    assert getattr(x, name) is getattr(t, name) is False
    assert getattr(x.to_sparse(), name) is getattr(t.to_sparse(), name) is False


def test_is_distributed_and_vulkan(device: str) -> None:
    x = gt.ones(2, device=device)
    assert x.is_distributed() is torch.ones(2).is_distributed() is False
    assert gt.is_distributed(x) is False and gt.is_vulkan_available() is False
    assert torch.is_vulkan_available() is False
    _raises_like(lambda: gt.is_distributed(3), lambda: torch.is_distributed(3), exact=False)


def test_is_inference_follows_inference_mode(device: str) -> None:
    for lib, dev in ((gt, device), (torch, "cpu")):
        x = lib.ones(2, device=dev)
        with lib.inference_mode():
            made = lib.ones(2, device=dev)
            from_normal = x + 1
            view_of_normal = x.view(2)
            with lib.inference_mode(False):
                inside_disabled = lib.ones(2, device=dev)
            view_of_inference = made[:1]
        assert [made.is_inference(), from_normal.is_inference(), view_of_normal.is_inference(),
                inside_disabled.is_inference(), view_of_inference.is_inference(),
                x.is_inference(), lib.is_inference(made)] == \
            [True, True, False, False, True, False, True], lib.__name__
        with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor"):
            made.requires_grad_()
    with gt.inference_mode():
        assert gt.ones(2, device=device).requires_grad_().requires_grad
    assert gt.ones(2, device=device).to_sparse().is_inference() is False


def test_inference_mode_false_restores_grad_mode() -> None:
    for lib in (gt, torch):
        seen = []
        with lib.no_grad(), lib.inference_mode(False):
            seen.append(lib.is_grad_enabled())
        with lib.inference_mode():
            with lib.inference_mode(False):
                seen += [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
            seen += [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
        assert seen == [True, True, False, False, True], lib.__name__


# -- conversions to absent backends ---------------------------------------------------------------
def test_absent_backend_conversions_raise(device: str) -> None:
    x, t = gt.ones(2, device=device), torch.ones(2)
    _raises_like(lambda: x.xpu(), lambda: t.xpu())
    _raises_like(lambda: x.xpu(1), lambda: t.xpu(1))
    _raises_like(lambda: x.ipu(), lambda: t.ipu())
    err = _raises_like(lambda: x.mtia(), lambda: t.mtia(), exact=False)
    assert str(err) == "Torch not compiled with MTIA enabled"


def test_to_mkldnn_raises_clearly(device: str) -> None:
    _raises_like(lambda: gt.ones(2, dtype=gt.int64, device=device).to_mkldnn(),
                 lambda: torch.ones(2, dtype=torch.int64).to_mkldnn())
    with pytest.raises(RuntimeError, match="no mkldnn"):
        gt.ones(2, device=device).to_mkldnn()


# -- metadata -------------------------------------------------------------------------------------
def test_volatile_warns_and_is_false(device: str) -> None:
    for x in (gt.ones(2, device=device), torch.ones(2)):
        with pytest.warns(UserWarning, match=r"volatile was removed \(Variable.volatile is always"):
            assert x.volatile is False
        with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
            x.volatile = True
        with pytest.warns(UserWarning):
            assert x.volatile is False


def test_output_nr_and_name(device: str) -> None:
    a = gt.ones(3, 2, device=device, requires_grad=True)
    b = torch.ones(3, 2, requires_grad=True)
    assert [t.output_nr for t in a.unbind(0)] == [t.output_nr for t in b.unbind(0)] == [0, 1, 2]
    assert a.output_nr == b.output_nr == 0
    assert a.name is None and b.name is None
    for x in (a, b):
        with pytest.raises(AttributeError):
            x.name = "w"
        with pytest.raises(AttributeError):
            x.output_nr = 1


def test_grad_dtype(device: str) -> None:
    for lib, d in ((gt, device), (torch, "cpu")):
        x = lib.tensor([1.0, 2.0], device=d, requires_grad=True)
        assert x.grad_dtype == lib.float32
        assert lib.ones(2, dtype=lib.int64, device=d).grad_dtype == lib.int64
        with pytest.raises(RuntimeError, match="^grad_dtype can only be accessed on leaf"):
            _ = (x * 2).grad_dtype
        with pytest.raises(RuntimeError, match="^grad_dtype can only be set on leaf"):
            (x * 2).grad_dtype = lib.float16
        with pytest.raises(RuntimeError, match="^grad_dtype must be a torch.dtype or None, but got "
                                               "str$"):
            x.grad_dtype = "float"
        x.grad_dtype = lib.float16
        (x * 2).sum().backward()
        assert x.grad.dtype == lib.float16 and x.grad.tolist() == [2.0, 2.0]
        with pytest.raises(RuntimeError) as err:
            x.grad_dtype = lib.int64
        assert str(err.value).startswith("Cannot set grad_dtype to 'Long' because there is "
                                         "already a gradient with dtype ")
        x.grad_dtype = None
        assert x.grad_dtype is None
        y = lib.ones(2, device=d, requires_grad=True)
        y.grad_dtype = lib.float64
        (g,) = lib.autograd.grad((y * 3).sum(), y)
        assert g.dtype == lib.float64 and g.tolist() == [3.0, 3.0]
        assert y.detach().grad_dtype == lib.float32


def test_const_data_ptr(device: str) -> None:
    x = gt.arange(6.0, device=device)[2:]
    assert x.const_data_ptr() == x.data_ptr()


def test_reinforce_was_removed(device: str) -> None:
    _raises_like(lambda: gt.ones(2, device=device).reinforce(1), lambda: torch.ones(2).reinforce(1))


def _layouts(lib, device: str | None = None):
    kw = {} if device is None else {"device": device}
    base = lib.arange(2 * 3 * 4 * 5, dtype=lib.float32, **kw).reshape(2, 3, 4, 5)
    return [base, base.transpose(1, 2), base.permute(3, 1, 0, 2),
            base.contiguous(memory_format=lib.channels_last), base[:, :1], base[:, :, ::2],
            lib.ones(1, 3, 1, 2, **kw), lib.ones(3, 1, **kw).expand(3, 4), lib.ones(4, **kw),
            lib.tensor(2.0, **kw), lib.ones(2, 2, **kw)[:, :1].expand(2, 2), lib.ones(0, 3, **kw)]


@pytest.mark.parametrize("check", [False, True, [], "cl"])
def test_dim_order(device: str, check) -> None:
    def args(lib):
        if check == "cl":
            return {"ambiguity_check": [lib.contiguous_format, lib.channels_last]}
        return {"ambiguity_check": check}
    for x, t in zip(_layouts(gt, device), _layouts(torch), strict=True):
        try:
            want = t.dim_order(**args(torch))
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as got:
                x.dim_order(**args(gt))
            assert str(got.value) == str(e)
            continue
        assert x.dim_order(**args(gt)) == want, (t.shape, t.stride())


def test_dim_order_bad_argument(device: str) -> None:
    x, t = gt.ones(2, 3, device=device), torch.ones(2, 3)
    _raises_like(lambda: x.dim_order(ambiguity_check="x"), lambda: t.dim_order(ambiguity_check="x"))
    _raises_like(lambda: x.dim_order(ambiguity_check=[1]), lambda: t.dim_order(ambiguity_check=[1]))
    with pytest.raises(AttributeError, match="Can't get dim order on sparse type"):
        x.to_sparse().dim_order()


# -- as_subclass and module_load -----------------------------------------------------------------
def test_as_subclass_shares_data_and_graph(device: str) -> None:
    class Sub(gt.Tensor):
        pass

    class TSub(torch.Tensor):
        pass

    x = gt.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s, ts = x.as_subclass(Sub), t.as_subclass(TSub)
    assert type(s) is Sub and s.requires_grad == ts.requires_grad and s.is_leaf == ts.is_leaf
    assert s.data_ptr() == x.data_ptr()
    (s * s).sum().backward()
    (ts * ts).sum().backward()
    assert_close(x.grad, t.grad)
    p = gt.ones(2, device=device).as_subclass(gt.nn.Parameter)
    assert type(p) is gt.nn.Parameter and not p.requires_grad
    with gt.no_grad():
        assert x.as_subclass(Sub).requires_grad
    _raises_like(lambda: x.as_subclass(int), lambda: t.as_subclass(int))


@pytest.mark.parametrize("assign", [False, True])
def test_module_load(device: str, assign: bool) -> None:
    x, other = gt.zeros(3, device=device), gt.arange(3.0, device=device)
    t, tother = torch.zeros(3), torch.arange(3.0)
    r, tr = x.module_load(other, assign=assign), t.module_load(tother, assign=assign)
    assert_close(r, tr)
    assert_close(x, t)
    assert (r.data_ptr() == other.data_ptr()) == (tr.data_ptr() == tother.data_ptr())
    assert (r.data_ptr() == x.data_ptr()) == (tr.data_ptr() == t.data_ptr())
    assert r is not x and r is not other and not r.requires_grad


# -- apply_ / map_ / map2_ ------------------------------------------------------------------------
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_matches_torch(dtype: str) -> None:
    data = np.array([[0, 1, 2], [3, 1, 0]])
    x = gt.tensor(data).to(getattr(gt, dtype)).t()
    t = torch.tensor(data).to(getattr(torch, dtype)).t()
    seen, tseen = [], []

    def fn(log):
        def f(v):
            log.append(type(v))
            return (not v) if isinstance(v, bool) else v * 3 - 1
        return f
    assert x.apply_(fn(seen)) is x
    t.apply_(fn(tseen))
    assert seen == tseen
    assert_close(x, t)


@pytest.mark.parametrize(("dtype", "value"), [
    ("int32", 2.7), ("int32", -2.7), ("int32", True), ("uint8", -1), ("uint8", 300),
    ("int32", float("nan")), ("int64", 10**30), ("int32", "a"), ("int32", None),
    ("int32", 1j), ("bool", 2), ("bool", 0.0), ("bool", 1j), ("bool", "a"), ("float32", 1e300),
    ("float32", 10**400), ("float32", "a"), ("float32", 1j), ("float16", 1e10),
    ("complex64", "a"), ("complex64", 2), ("float64", 3)])
def test_apply_stores_results_as_torch(dtype: str, value) -> None:
    x, t = gt.ones(3, dtype=getattr(gt, dtype)), torch.ones(3, dtype=getattr(torch, dtype))
    try:
        t.apply_(lambda v: value)
    except Exception as e:
        with pytest.raises(type(e)) as got:
            x.apply_(lambda v: value)
        assert str(got.value) == str(e)
        return
    x.apply_(lambda v: value)
    assert_close(x, t)


def test_apply_checks(device: str) -> None:
    x, t = gt.ones(3, device=device), torch.ones(3)
    _raises_like(lambda: x.requires_grad_().apply_(lambda v: v),
                 lambda: t.requires_grad_().apply_(lambda v: v))
    _raises_like(lambda: (x * 2).apply_(lambda v: v), lambda: (t * 2).apply_(lambda v: v))
    with pytest.raises(ZeroDivisionError):
        gt.ones(2).apply_(lambda v: 1 / 0)
    if device != "cpu":
        with pytest.raises(TypeError, match="^apply_ is only implemented on CPU tensors$"):
            gt.ones(2, device=device).apply_(lambda v: v)
    assert_close(gt.tensor(3.0).apply_(lambda v: v + 1), torch.tensor(3.0).apply_(lambda v: v + 1))
    y = gt.ones(2)
    before = y._version
    y.apply_(lambda v: v)
    assert y._version > before   # gputensor bumps the version of every in-place write


def test_map_and_map2_match_torch() -> None:
    a = np.arange(6.0).reshape(2, 3)
    x, t = gt.tensor(a), torch.tensor(a)
    assert_close(x.map_(gt.tensor([1.0, 2.0, 3.0], dtype=gt.float64), lambda p, q: p * q),
                 t.map_(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), lambda p, q: p * q))
    x2, t2 = gt.tensor(a).t(), torch.tensor(a).t()
    bx, by = gt.tensor(a).t() + 1, gt.tensor([[1.0], [2.0], [3.0]], dtype=gt.float64)
    tx, ty = torch.tensor(a).t() + 1, torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    assert_close(x2.map2_(bx, by, lambda p, q, r: p + q * r),
                 t2.map2_(tx, ty, lambda p, q, r: p + q * r))


def test_map_checks(device: str) -> None:
    x, o = gt.ones(3), gt.ones(3)
    t, to = torch.ones(3), torch.ones(3)
    f2, f3 = (lambda p, q: p), (lambda p, q, r: p)
    _raises_like(lambda: x.map_(gt.ones(3, dtype=gt.float64), f2),
                 lambda: t.map_(torch.ones(3, dtype=torch.float64), f2))
    _raises_like(lambda: x.map_(gt.ones(4), f2), lambda: t.map_(torch.ones(4), f2))
    _raises_like(lambda: x.map_(o.requires_grad_(), f2), lambda: t.map_(to.requires_grad_(), f2))
    _raises_like(lambda: x.map2_(gt.ones(3), gt.ones(3, dtype=gt.int64), f3),
                 lambda: t.map2_(torch.ones(3), torch.ones(3, dtype=torch.int64), f3))
    _raises_like(lambda: x.map2_(gt.ones(3, dtype=gt.int64), gt.ones(3), f3),
                 lambda: t.map2_(torch.ones(3, dtype=torch.int64), torch.ones(3), f3))
    _raises_like(lambda: x.map2_(gt.ones(2), gt.ones(3), f3),
                 lambda: t.map2_(torch.ones(2), torch.ones(3), f3))
    _raises_like(lambda: x.map_(3, f2), lambda: t.map_(3, f2))
    _raises_like(lambda: x.map2_(o, 3, f3), lambda: t.map2_(to, 3, f3))
    if device != "cpu":
        c = gt.ones(3, device=device)
        with pytest.raises(TypeError, match="expected torch.cuda.FloatTensor for 'other'"):
            c.map_(gt.ones(3), f2)
        with pytest.raises(TypeError, match="^map_ is only implemented on CPU tensors$"):
            c.map_(gt.ones(3, device=device), f2)
        with pytest.raises(TypeError, match="^map2_ is only implemented on CPU tensors$"):
            c.map2_(gt.ones(3, device=device), gt.ones(3, device=device), f3)


# -- resize forms -------------------------------------------------------------------------------
def test_resize_deprecated_forms(device: str) -> None:
    x, t = gt.arange(6.0, device=device), torch.arange(6.0)
    with pytest.warns(UserWarning, match="^non-inplace resize is deprecated$"):
        r = x.resize(2, 3)
    with pytest.warns(UserWarning):
        tr = t.resize(2, 3)
    assert_close(r, tr)
    assert r.data_ptr() == x.data_ptr() and tuple(x.shape) == (6,)
    with pytest.warns(UserWarning, match="^non-inplace resize_as is deprecated$"):
        r = x.resize_as(gt.zeros(3, 2))
    with pytest.warns(UserWarning):
        tr = t.resize_as(torch.zeros(3, 2))
    assert_close(r, tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _raises_like(lambda: x.resize(4, 3), lambda: t.resize(4, 3))
        _raises_like(lambda: x.resize((2, 3)), lambda: t.resize((2, 3)))
        nc = gt.arange(6.0, device=device).reshape(2, 3).t()
        tnc = torch.arange(6.0).reshape(2, 3).t()
        assert_close(nc.resize(6), tnc.resize(6))


def test_resize_gradients(device: str) -> None:
    a = np.arange(6.0).reshape(2, 3)
    x = gt.tensor(a, device=device, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    w = np.linspace(-1, 1, 6).reshape(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (x.t().resize(3, 2) * gt.tensor(w, device=device)).sum().backward()
        (t.t().resize(3, 2) * torch.tensor(w)).sum().backward()
        assert_close(x.grad, t.grad)
        assert gt.autograd.gradcheck(lambda v: v.resize_as(gt.zeros(3, 2)), (x.detach().clone()
                                     .requires_grad_(),))


@pytest.mark.parametrize("fmt", [None, "contiguous_format", "channels_last", "preserve_format"])
def test_resize_as_memory_format(device: str, fmt) -> None:
    def run(lib, dev):
        x = lib.ones(2, 3, device=dev)
        template = lib.ones(2, 3, 4, 5, device=dev).contiguous(memory_format=lib.channels_last)
        kw = {} if fmt is None else {"memory_format": getattr(lib, fmt)}
        return lib.resize_as_(x, template, **kw)
    r, tr = run(gt, device), run(torch, "cpu")
    assert tuple(r.shape) == tuple(tr.shape) and r.stride() == tr.stride()
    assert r.is_contiguous() == tr.is_contiguous()


def test_resize_checks(device: str) -> None:
    x, t = gt.ones(2, device=device, requires_grad=True), torch.ones(2, requires_grad=True)
    _raises_like(lambda: x.resize_(3), lambda: t.resize_(3))
    _raises_like(lambda: x.resize_as_(gt.ones(3)), lambda: t.resize_as_(torch.ones(3)))
    y, u = gt.ones(2, 3, 4, 5, device=device), torch.ones(2, 3, 4, 5)
    assert y.resize_(2, 3, 4, 5, memory_format=gt.channels_last).stride() == \
        u.resize_(2, 3, 4, 5, memory_format=torch.channels_last).stride()
    _raises_like(lambda: y.resize_(2, 3, 4, memory_format=gt.channels_last),
                 lambda: u.resize_(2, 3, 4, memory_format=torch.channels_last))
    _raises_like(lambda: y.resize_(2, memory_format=gt.preserve_format),
                 lambda: u.resize_(2, memory_format=torch.preserve_format))
    # a dense tensor takes a sparse template's size
    s, ts = _sparse_pair(np.eye(3), device)
    assert tuple(gt.ones(2, device=device).resize_as_(s).shape) == \
        tuple(torch.ones(2).resize_as_(ts).shape)


def test_resize_as_sparse_(device: str) -> None:
    _raises_like(lambda: gt.ones(2, device=device).resize_as_sparse_(gt.ones(3, device=device)),
                 lambda: torch.ones(2).resize_as_sparse_(torch.ones(3)), exact=False)
    with pytest.raises(RuntimeError):
        gt.ones(2, device=device).resize_as_sparse_(gt.ones(3, device=device).to_sparse())
    s, ts = _sparse_pair(np.zeros((2, 3)), device)
    big, tbig = _sparse_pair(np.zeros((3, 4, 2)), device, 1)
    _assert_sparse_like(s.resize_as_sparse_(big), ts.resize_as_sparse_(tbig))
    s, ts = _sparse_pair(np.zeros((2, 3)), device)
    _assert_sparse_like(s.resize_as_(big), ts.resize_as_(tbig))
    full, tfull = _sparse_pair(np.eye(2), device)
    _raises_like(lambda: full.resize_as_sparse_(big), lambda: tfull.resize_as_sparse_(tbig))


# -- set_ -----------------------------------------------------------------------------------------
def _storage_args(lib, dev):
    return lib.arange(10.0, device=dev).untyped_storage()


@pytest.mark.parametrize("case", ["empty", "tensor", "tensor_geometry", "storage",
                                  "storage_geometry", "storage_no_stride", "storage_kw",
                                  "typed", "grow", "other_dtype_untyped", "empty_stride"])
def test_set_overloads(device: str, case: str) -> None:
    def run(lib, dev):
        a = lib.zeros(2, device=dev)
        src = lib.arange(12.0, device=dev).reshape(3, 4)
        s = _storage_args(lib, dev)
        call = {
            "empty": lambda: a.set_(),
            "tensor": lambda: a.set_(src.t()[1:]),
            "tensor_geometry": lambda: a.set_(src, 2, (2, 3), (1, 2)),
            "storage": lambda: a.set_(s),
            "storage_geometry": lambda: a.set_(s, 1, (2, 2), (1, 2)),
            "storage_no_stride": lambda: a.set_(s, 1, (2, 2)),
            "storage_kw": lambda: a.set_(source=s, storage_offset=3, size=(3,)),
            "typed": lambda: a.set_(src.storage(), 0, (2,), (1,)),
            "grow": lambda: a.set_(s, 4, (4, 2), (2, 1)),
            "other_dtype_untyped": lambda: a.set_(lib.arange(4, device=dev).untyped_storage()),
            "empty_stride": lambda: a.set_(s, 0, (2, 3), ()),
        }[case]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # torch's TypedStorage deprecation
            out = call()
        assert out is a
        return a, s, src
    (a, s, src), (ta, ts, tsrc) = run(gt, device), run(torch, "cpu")
    assert tuple(a.shape) == tuple(ta.shape) and a.stride() == ta.stride()
    assert a.storage_offset() == ta.storage_offset()
    if case == "grow":   # the storage grew to hold the geometry; its old bytes are kept
        assert s.nbytes() == ts.nbytes() == 12 * 4
        assert_close(a[:2], ta[:2])
    elif case != "other_dtype_untyped":
        assert_close(a, ta)
    else:   # the int64 bytes read as float32
        assert_close(a.view(gt.int32), ta.view(torch.int32))
    if case == "empty":
        assert a.untyped_storage().nbytes() == 0
    elif case.startswith("tensor") or case == "typed":
        assert a.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
        a.fill_(-1)
        ta.fill_(-1)
        assert_close(src, tsrc)   # writes through the set_ tensor reach the source
    elif case != "other_dtype_untyped":
        assert a.untyped_storage() is s


def test_set_errors(device: str) -> None:
    def both(f):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _raises_like(lambda: f(gt, device), lambda: f(torch, "cpu"))
    both(lambda lib, d: lib.zeros(2, device=d).set_(lib.arange(3, device=d)))
    both(lambda lib, d: lib.zeros(2, device=d).set_(lib.ones(3, dtype=lib.float64, device=d)))
    both(lambda lib, d: lib.zeros(2, device=d).set_(lib.arange(3, device=d).storage()))
    both(lambda lib, d: lib.zeros(2, device=d).set_(_storage_args(lib, d), -1, (2,), (1,)))
    both(lambda lib, d: lib.zeros(2, device=d).set_(_storage_args(lib, d), 0, (2,), (-1,)))
    both(lambda lib, d: lib.zeros(2, device=d).set_(_storage_args(lib, d), 0, (-2,), (1,)))
    both(lambda lib, d: lib.zeros(2, device=d).set_(_storage_args(lib, d), 0, (2, 3), (1,)))
    for bad in ((5,), (_storage_args(gt, device), 1)):
        with pytest.raises(TypeError, match="set_\\(\\) received an invalid combination"):
            gt.zeros(2, device=device).set_(*bad)
    if device != "cpu":
        with pytest.raises(RuntimeError, match="the devices must match"):
            gt.zeros(2).set_(gt.ones(2, device=device))


def test_set_autograd(device: str) -> None:
    for lib, d in ((gt, device), (torch, "cpu")):
        leaf = lib.zeros(2, device=d, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
            leaf.set_(lib.ones(3, device=d))
        with lib.no_grad():
            leaf.set_(lib.ones(3, device=d))
        assert leaf.requires_grad and leaf.is_leaf and tuple(leaf.shape) == (3,)
        plain = lib.zeros(2, device=d)
        src = lib.ones(3, device=d, requires_grad=True)
        plain.set_(src)
        assert plain.requires_grad and plain.grad_fn is not None
        nonleaf = lib.zeros(2, device=d, requires_grad=True) * 2
        nonleaf.set_(lib.ones(3, device=d))
        assert nonleaf.grad_fn is not None
        with pytest.raises(RuntimeError):
            nonleaf.sum().backward()
    a = gt.zeros(2, device=device)
    v = a.view(2)
    v.set_(gt.ones(3, device=device))
    assert v._is_view() and v._base is a   # as PyTorch: set_ keeps the view's base


# -- sparse-layout methods on dense tensors --------------------------------------------------------
@pytest.mark.parametrize("name", ["values", "indices", "coalesce", "is_coalesced", "sparse_dim",
                                  "dense_dim", "sparse_resize_", "sparse_resize_and_clear_"])
def test_sparse_methods_on_dense(device: str, name: str) -> None:
    x, t = gt.zeros(2, 3, device=device), torch.zeros(2, 3)
    args = ((3, 3), 1, 1) if name.startswith("sparse_resize") else ()
    try:
        want = getattr(t, name)(*args)
    except NotImplementedError:   # no strided kernel: PyTorch lists its long backend table
        with pytest.raises(NotImplementedError, match=f"Could not run 'aten::{name}' with "
                                                      f"arguments from the '(CPU|CUDA)' backend"):
            getattr(x, name)(*args)
        return
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            getattr(x, name)(*args)
        assert str(got.value) == str(e)
        return
    assert getattr(x, name)(*args) == want


def test_to_sparse_coo(device: str) -> None:
    a = np.array([[0.0, 1.0], [2.0, 0.0]])
    x, t = gt.tensor(a, device=device), torch.tensor(a)
    _assert_sparse_like(x.to_sparse_coo(), t.to_sparse_coo())
    s = x.to_sparse()
    assert s.to_sparse_coo() is s


@pytest.mark.parametrize(("dense", "sparse_dim", "args"), [
    (np.array([[0.0, 1, 0], [2, 0, 3]]), 2, ((3, 4), 2, 0)),
    (np.array([[0.0, 1, 0], [2, 0, 3]]), 2, ((2, 3), 2, 0)),
    (np.array([[0.0, 1, 0], [2, 0, 3]]), 2, ((2, 2), 2, 0)),
    (np.array([[0.0, 1, 0], [2, 0, 3]]), 2, ((2, 3), 1, 1)),
    (np.array([[0.0, 1, 0], [2, 0, 3]]), 2, ((2, 3, 4), 2, 0)),
    (np.array([[0.0, 1, 0], [2, 0, 3]]), 2, ((-1, 4), 2, 0)),
    (np.ones((2, 3)), 1, ((3, 3), 1, 1)),
    (np.ones((2, 3)), 1, ((3, 2), 1, 1)),
    (np.ones((2, 3)), 1, ((3,), 1, 0)),
    (np.zeros((2, 3)), 2, ((3, 4, 5), 1, 2)),
    (np.zeros((2, 3)), 2, ((-1, 3), 2, 0)),
])
@pytest.mark.parametrize("clear", [False, True])
def test_sparse_resize(device: str, dense, sparse_dim, args, clear: bool) -> None:
    s, ts = _sparse_pair(dense, device, sparse_dim)
    name = "sparse_resize_and_clear_" if clear else "sparse_resize_"
    try:
        want = getattr(ts, name)(*args)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            getattr(s, name)(*args)
        assert str(got.value) == str(e)
        return
    before = s._version
    assert getattr(s, name)(*args) is s and s._version > before
    _assert_sparse_like(s, want)


def test_sparse_resize_grows_dense_dims(device: str) -> None:
    # PyTorch keeps the values' flat elements; the new ones are uninitialised memory.
    s, ts = _sparse_pair(np.arange(1.0, 7.0).reshape(2, 3), device, 1)
    s.sparse_resize_((3, 4), 1, 1)
    ts.sparse_resize_((3, 4), 1, 1)
    assert tuple(s._values().shape) == tuple(ts._values().shape) == (2, 4)
    assert_close(s._values().reshape(-1)[:6], ts._values().reshape(-1)[:6])


def test_sparse_resize_autograd(device: str) -> None:
    for lib, d in ((gt, device), (torch, "cpu")):
        s = lib.zeros(2, 3, device=d).to_sparse().requires_grad_()
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            s.sparse_resize_((3, 4), 2, 0)
        with lib.no_grad():
            assert s.sparse_resize_((3, 4), 2, 0).requires_grad
        y = lib.ones(2, 3, device=d).to_sparse().requires_grad_() * 2
        y.sparse_resize_((3, 4), 2, 0)
        assert y.grad_fn is not None


# -- indices_copy / values_copy -------------------------------------------------------------------
def test_indices_and_values_copy(device: str) -> None:
    s, ts = _sparse_pair(np.array([[0.0, 1, 0], [2, 0, 3]]), device)
    # PyTorch 2.13's CPU build has no SparseCPU kernel for these (NotImplementedError); they
    # follow the documentation: indices()/values() in new memory.
    for name in ("indices", "values"):
        got, want = getattr(gt, f"{name}_copy")(s), getattr(ts, name)()
        assert_close(got, want)
        assert got.data_ptr() != getattr(s, name)().data_ptr()
        _raises_like(lambda n=name: getattr(gt, f"{n}_copy")(gt.ones(2, device=device)),
                     lambda n=name: getattr(torch, f"{n}_copy")(torch.ones(2)))
    out = gt.empty(0, dtype=gt.float64, device=device)
    assert gt.values_copy(s, out=out) is out
    assert_close(out, ts.values())
    v = gt.values_copy(s.requires_grad_())
    v.sum().backward()
    assert_close(s.grad.to_dense(), torch.ones_like(ts.to_dense()) * (ts.to_dense() != 0))


# -- sparse-result products ------------------------------------------------------------------------
MAT = np.array([[0.0, 0, 0], [2, 0, 3], [0, 1, 0]])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_smm_hspmm_sspaddmm_match_torch(device: str, dtype: str) -> None:
    if dtype == "int64" and device != "cpu":
        pytest.skip("the SparseCUDA _spmm kernel is floating-point only")
    s, ts = _sparse_pair(MAT, device)
    s, ts = s.to(getattr(gt, dtype)), ts.to(getattr(torch, dtype))
    d = np.arange(12.0).reshape(3, 4) - 5
    x, t = gt.tensor(d, device=device).to(getattr(gt, dtype)), \
        torch.tensor(d).to(getattr(torch, dtype))
    _assert_sparse_like(gt.smm(s, x), torch.smm(ts, t))
    _assert_sparse_like(s.smm(x), ts.smm(t))
    _assert_sparse_like(gt.hspmm(s, x), torch.hspmm(ts, t))
    _assert_sparse_like(gt.hsmm(s, x), torch.hsmm(ts, t))
    inp, tinp = _sparse_pair(np.array([[1.0, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]]), device)
    inp, tinp = inp.to(getattr(gt, dtype)), tinp.to(getattr(torch, dtype))
    kw = {"beta": 2, "alpha": 3}
    _assert_sparse_like(gt.sspaddmm(inp, s, x, **kw), torch.sspaddmm(tinp, ts, t, **kw))
    _assert_sparse_like(gt.saddmm(inp, s, x, **kw), torch.saddmm(tinp, ts, t, **kw))
    _assert_sparse_like(inp.sspaddmm(s, x, **kw), tinp.sspaddmm(ts, t, **kw))
    assert_close(gt.spmm(s, x), torch.spmm(ts, t))
    assert_close(gt.dsmm(s, x), torch.dsmm(ts, t))


def test_sparse_products_uncoalesced_and_empty(device: str) -> None:
    idx, vals = [[1, 1, 0], [0, 0, 2]], [1.0, 2.0, 5.0]
    s = gt.sparse_coo_tensor(idx, vals, (3, 3), device=device)
    ts = torch.sparse_coo_tensor(idx, vals, (3, 3))
    d = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x, t = gt.tensor(d, device=device), torch.tensor(d)
    _assert_sparse_like(gt.smm(s, x), torch.smm(ts, t))
    _assert_sparse_like(gt.sspaddmm(gt.sparse_coo_tensor(idx, vals, (3, 4), device=device),
                                    s, x, beta=0.5),
                        torch.sspaddmm(torch.sparse_coo_tensor(idx, vals, (3, 4)), ts, t,
                                       beta=0.5))
    z, tz = _sparse_pair(np.zeros((3, 3), dtype=np.float32), device)
    _assert_sparse_like(gt.hspmm(z, x), torch.hspmm(tz, t))
    _assert_sparse_like(gt.smm(z, x), torch.smm(tz, t))


def test_sparse_product_errors(device: str) -> None:
    s, ts = _sparse_pair(MAT, device)
    x, t = gt.ones(3, 4, device=device), torch.ones(3, 4)
    _raises_like(lambda: gt.smm(x, x), lambda: torch.smm(t, t))
    _raises_like(lambda: gt.hspmm(s, gt.ones(2, 2, device=device)),
                 lambda: torch.hspmm(ts, torch.ones(2, 2)))
    _raises_like(lambda: gt.hspmm(s, x), lambda: torch.hspmm(ts, t))   # float64 @ float32
    _raises_like(lambda: gt.hspmm(s, x.to_sparse()), lambda: torch.hspmm(ts, t.to_sparse()))
    _raises_like(lambda: gt.hspmm(gt.ones(2, 2, 2, device=device).to_sparse(), x),
                 lambda: torch.hspmm(torch.ones(2, 2, 2).to_sparse(), t))
    _raises_like(lambda: gt.hspmm(x, x), lambda: torch.hspmm(t, t), exact=False)
    inp, tinp = _sparse_pair(np.ones((3, 3)), device)
    _raises_like(lambda: gt.sspaddmm(inp, s, x), lambda: torch.sspaddmm(tinp, ts, t))
    inp, tinp = _sparse_pair(np.ones((3, 4)), device)
    _raises_like(lambda: gt.sspaddmm(inp, s, gt.ones(2, 4, device=device)),
                 lambda: torch.sspaddmm(tinp, ts, torch.ones(2, 4)))
    _raises_like(lambda: gt.sspaddmm(inp, s, gt.ones(3, device=device)),
                 lambda: torch.sspaddmm(tinp, ts, torch.ones(3)))
    _raises_like(lambda: gt.sspaddmm(inp, s, x), lambda: torch.sspaddmm(tinp, ts, t))
    _raises_like(lambda: gt.sspaddmm(inp.float(), s, x.double()),
                 lambda: torch.sspaddmm(tinp.float(), ts, t.double()))
    with pytest.raises(RuntimeError):
        gt.sspaddmm(gt.ones(3, 4, device=device), s, x)


def test_sparse_products_have_no_derivative(device: str) -> None:
    for lib, d in ((gt, device), (torch, "cpu")):
        s = lib.tensor(MAT, device=d).to_sparse().requires_grad_()
        x = lib.ones(3, 4, dtype=lib.float64, device=d).requires_grad_()
        for r in (lib.smm(s, x), lib.hspmm(s, x),
                  lib.sspaddmm(lib.zeros(3, 4, dtype=lib.float64, device=d).to_sparse(), s, x)):
            assert r.requires_grad and r.grad_fn is not None
            with pytest.raises((RuntimeError, NotImplementedError)):
                r.to_dense().sum().backward()


def test_sparse_product_out(device: str) -> None:
    s, ts = _sparse_pair(MAT, device)
    x, t = gt.ones(3, 4, device=device, dtype=gt.float64), torch.ones(3, 4, dtype=torch.float64)
    out, tout = _sparse_pair(np.zeros((1, 1)), device)
    assert gt.hspmm(s, x, out=out) is out
    torch.hspmm(ts, t, out=tout)
    assert_close(out.to_dense(), tout.to_dense())


# -- frombuffer / from_file ------------------------------------------------------------------------
def test_frombuffer_shares_memory() -> None:
    buf = bytearray(16)
    x = gt.frombuffer(buf, dtype=gt.float32)
    buf[0:4] = np.float32(1.5).tobytes()
    assert x[0].item() == 1.5
    x[3] = 2.0
    assert np.frombuffer(buf, np.float32)[3] == 2.0
    with pytest.raises(RuntimeError, match="Trying to resize storage that is not resizable"):
        x.resize_(10)
    arr = np.arange(6, dtype=np.int32)
    y, ty = gt.frombuffer(arr, dtype=gt.int16, count=3, offset=2), \
        torch.frombuffer(arr, dtype=torch.int16, count=3, offset=2)
    assert_close(y, ty)
    y[0] = 7   # the high half of arr[0] (little-endian)
    assert arr[0] == 7 << 16


@pytest.mark.parametrize(("nbytes", "kw"), [
    (16, {"dtype": "int32", "count": 5}), (16, {"dtype": "int32", "offset": 16}),
    (16, {"dtype": "int32", "offset": -1}), (16, {"dtype": "int32", "offset": 1}),
    (15, {"dtype": "int32"}), (16, {"dtype": "int32", "count": 0}), (0, {"dtype": "int32"}),
    (16, {"dtype": "int32", "count": -2}), (16, {"dtype": "float64", "count": 1, "offset": 8}),
    (8, {"dtype": "float32", "requires_grad": True}), (8, {"dtype": "int32",
                                                           "requires_grad": True})])
def test_frombuffer_matches_torch(nbytes: int, kw: dict) -> None:
    data = bytes(range(nbytes))

    def run(lib):
        args = dict(kw, dtype=getattr(lib, kw["dtype"]))
        return lib.frombuffer(bytearray(data), **args)
    try:
        want = run(torch)
    except (ValueError, RuntimeError) as e:
        with pytest.raises(type(e)) as got:
            run(gt)
        if isinstance(e, ValueError):
            assert str(got.value) == str(e)
        return
    got = run(gt)
    assert_close(got.detach(), want.detach())
    assert got.requires_grad == want.requires_grad


def test_frombuffer_other_inputs() -> None:
    _raises_like(lambda: gt.frombuffer([1, 2], dtype=gt.int32),
                 lambda: torch.frombuffer([1, 2], dtype=torch.int32))
    import array
    assert_close(gt.frombuffer(array.array("i", [1, 2, 3]), dtype=gt.int32),
                 torch.frombuffer(array.array("i", [1, 2, 3]), dtype=torch.int32))
    ro = bytes(bytearray(b"abcd"))   # a fresh object: the tensor may write into it
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        t = gt.frombuffer(ro, dtype=gt.uint8)
    assert t.tolist() == [97, 98, 99, 100]


def test_from_file(tmp_path) -> None:
    p = str(tmp_path / "f.bin")
    np.arange(10, dtype=np.float64).tofile(p)
    for lib in (gt, torch):
        x = lib.from_file(p, size=10, dtype=lib.float64)
        assert x.tolist() == list(range(10))
        x[0] = 100.0   # a private mapping: the file keeps its bytes
    assert np.fromfile(p, np.float64)[0] == 0
    assert_close(gt.from_file(p, False, 4, dtype=gt.float64),
                 torch.from_file(p, False, 4, dtype=torch.float64))
    assert tuple(gt.from_file(p, dtype=gt.float64).shape) == (0,)
    assert gt.from_file(p, size=2).dtype is gt.get_default_dtype()
    x = gt.from_file(p, shared=True, size=10, dtype=gt.float64)
    x[0] = 100.0
    del x
    assert np.fromfile(p, np.float64)[0] == 100.0
    with pytest.raises(RuntimeError, match="not resizable"):
        gt.from_file(p, True, 10, dtype=gt.float64).resize_(20)
    q = str(tmp_path / "new.bin")
    for size, want in ((4, 16), (8, 32), (2, 32)):
        t = gt.from_file(q, shared=True, size=size, dtype=gt.int32)
        assert tuple(t.shape) == (size,) and os.path.getsize(q) == want
    assert gt.from_file(p, size=2, requires_grad=True).requires_grad


def test_from_file_errors(tmp_path) -> None:
    p = str(tmp_path / "f.bin")
    np.arange(10, dtype=np.float64).tofile(p)
    _raises_like(lambda: gt.from_file(p, size=11, dtype=gt.float64),
                 lambda: torch.from_file(p, size=11, dtype=torch.float64))
    _raises_like(lambda: gt.from_file(p + "x", size=2, dtype=gt.float64),
                 lambda: torch.from_file(p + "x", size=2, dtype=torch.float64))
    _raises_like(lambda: gt.from_file(p, size=2, pin_memory=True),
                 lambda: torch.from_file(p, size=2, pin_memory=True))
    _raises_like(lambda: gt.from_file(p, size=-1), lambda: torch.from_file(p, size=-1))
    import pathlib
    err = _raises_like(lambda: gt.from_file(pathlib.Path(p), size=2),
                       lambda: torch.from_file(pathlib.Path(p), size=2), exact=False)
    assert "must be str, not PosixPath" in str(err)
    with pytest.raises(NotImplementedError):
        gt.from_file(p, size=2, layout=gt.sparse_coo)
    if gt.cuda.is_available():
        with pytest.raises(NotImplementedError, match="only CPU tensors"):
            gt.from_file(p, size=2, device="cuda")


# -- set_default_tensor_type -----------------------------------------------------------------------
@pytest.fixture
def _restore_tensor_type():
    from gputensor import _misc_functions
    yield
    _misc_functions._device_from_tensor_type = False
    torch.set_default_tensor_type(torch.FloatTensor)


@pytest.mark.usefixtures("_restore_tensor_type")
@pytest.mark.parametrize("name", ["DoubleTensor", "HalfTensor", "BFloat16Tensor", "FloatTensor",
                                  "torch.DoubleTensor", "IntTensor", "torch.LongTensor",
                                  "torch.Foo", "float64", "Tensor", "None", "sparse"])
def test_set_default_tensor_type(name: str) -> None:
    def arg(lib):
        if name == "None":
            return None
        if name == "sparse":
            return lib.sparse.FloatTensor
        if name.startswith("torch."):
            return name
        return getattr(lib, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.set_default_tensor_type(arg(torch))
        except (TypeError, AttributeError) as e:
            with pytest.raises(type(e)) as got:
                gt.set_default_tensor_type(arg(gt))
            assert str(got.value) == str(e).replace("module 'torch'", "module 'gputensor'")
            return
        gt.set_default_tensor_type(arg(gt))
    assert gt.get_default_dtype().name == str(torch.get_default_dtype()).removeprefix("torch.")
    assert gt.empty(2).dtype.name == str(torch.empty(2).dtype).removeprefix("torch.")
    assert gt.get_default_device().type == "cpu"


@pytest.mark.usefixtures("_restore_tensor_type")
def test_set_default_tensor_type_cuda() -> None:
    if not gt.cuda.is_available():
        with pytest.raises(TypeError, match="not available"):
            gt.set_default_tensor_type(gt.cuda.FloatTensor)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gt.set_default_tensor_type(gt.cuda.DoubleTensor)
        assert gt.empty(2).device.type == "cuda" and gt.empty(2).dtype is gt.float64
        gt.set_default_tensor_type(gt.FloatTensor)
    assert gt.empty(2).device.type == "cpu" and gt.empty(2).dtype is gt.float32


def test_names_exist_in_torch() -> None:
    names = ["set_", "resize", "resize_as", "resize_as_", "resize_as_sparse_", "is_inference",
             "is_distributed", "xpu", "ipu", "mtia", "to_mkldnn", "dim_order", "const_data_ptr",
             "as_subclass", "apply_", "map_", "map2_", "module_load", "reinforce", "values",
             "indices", "coalesce", "is_coalesced", "sparse_dim", "dense_dim", "to_sparse_coo",
             "sparse_resize_", "sparse_resize_and_clear_", "smm", "sspaddmm"]
    for n in names:
        assert hasattr(torch.Tensor, n) and callable(getattr(gt.Tensor, n)), n
    for n in ["resize_as_", "is_inference", "is_distributed", "is_vulkan_available",
              "indices_copy", "values_copy", "smm", "sspaddmm", "spmm", "dsmm", "hsmm", "hspmm",
              "saddmm", "frombuffer", "from_file", "set_default_tensor_type"]:
        assert hasattr(torch, n) and n in gt.__all__, n

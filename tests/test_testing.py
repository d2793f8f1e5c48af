"""gputensor.testing (assert_close, make_tensor, assert_allclose) against torch.testing: the
same inputs give the same outcome, exception type and message."""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch

import gputensor as gt
import gputensor.testing as gtt
from tests.helpers import torch_dtype


def _outcome(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 (the outcome is what is compared)
        return type(e), str(e).replace("gputensor._tensor.Tensor", "torch.Tensor")
    return None


def _same(g_call, t_call, *, expect_error=True):
    g, t = _outcome(g_call), _outcome(t_call)
    if t is not None:
        t = (t[0], t[1].replace("torch.", "gputensor.").replace("gputensor.Tensor",
                                                                  "torch.Tensor"))
    assert g == t
    assert (g is not None) == expect_error
    return g


A = np.array([[1.0, 2.0, 3.5], [4.0, -5.0, 6.0]])
B = np.array([[1.0, 2.5, 3.0], [4.0, -5.0, 6.00001]])


def _pair(m, device, a, b, dtype):
    dev = device if m is gt else "cpu"
    dt = dtype if m is gt else torch_dtype(dtype)
    return m.tensor(a, dtype=dt, device=dev), m.tensor(b, dtype=dt, device=dev)


@pytest.mark.parametrize("dtype", [gt.float16, gt.bfloat16, gt.float32, gt.float64,
                                   gt.complex64, gt.complex128, gt.int8, gt.int32, gt.int64,
                                   gt.uint8, gt.bool])
def test_mismatch_message_per_dtype(device, dtype):
    """PyTorch's message: mismatched count, greatest absolute / relative difference with their
    index, and the dtype's default tolerances."""
    a, b = (A, B) if dtype is not gt.bool else (A > 2, B > 2)
    if not (dtype.is_floating_point or dtype.is_complex or dtype is gt.bool):
        a, b = np.round(2 * A), np.round(2 * B)   # 2 of 6 elements differ
    if dtype is gt.uint8:
        a, b = np.abs(a), np.abs(b)
    msg = _same(lambda: gtt.assert_close(*_pair(gt, device, a, b, dtype)),
                lambda: torch.testing.assert_close(*_pair(torch, device, a, b, dtype)))
    assert msg[0] is AssertionError
    assert "Mismatched elements" in msg[1]


@pytest.mark.parametrize("dtype", [gt.float16, gt.bfloat16, gt.float32, gt.float64,
                                   gt.complex64, gt.complex128])
def test_default_tolerances_per_dtype(device, dtype):
    """Just inside and just outside each dtype's (rtol, atol) pass and fail as in PyTorch."""
    rtol, atol = gtt._DTYPE_PRECISIONS[dtype]
    base = np.array([1.0, 100.0, -3.0])
    for factor, fails in ((0.5, False), (4.0, True)):
        other = base + factor * (atol + rtol * np.abs(base))
        _same(lambda o=other: gtt.assert_close(*_pair(gt, device, o, base, dtype)),
              lambda o=other: torch.testing.assert_close(*_pair(torch, device, o, base, dtype)),
              expect_error=fails)


def test_explicit_tolerances_and_equal_nan(device):
    nan = [1.0, math.nan, math.inf]
    for kw, fails in (({"rtol": 0.2, "atol": 0.0}, False), ({"rtol": 0.0, "atol": 0.6}, False),
                      ({"rtol": 0.0, "atol": 0.1}, True), ({"rtol": 0, "atol": 0}, True)):
        _same(lambda kw=kw: gtt.assert_close(*_pair(gt, device, A, B, gt.float64), **kw),
              lambda kw=kw: torch.testing.assert_close(*_pair(torch, device, A, B, gt.float64),
                                                       **kw), expect_error=fails)
    _same(lambda: gtt.assert_close(*_pair(gt, device, nan, nan, gt.float32)),
          lambda: torch.testing.assert_close(*_pair(torch, device, nan, nan, gt.float32)))
    _same(lambda: gtt.assert_close(*_pair(gt, device, nan, nan, gt.float32), equal_nan=True),
          lambda: torch.testing.assert_close(*_pair(torch, device, nan, nan, gt.float32),
                                             equal_nan=True), expect_error=False)
    _same(lambda: gtt.assert_close(gt.ones(2, device=device), gt.ones(2, device=device),
                                   rtol=1e-3),
          lambda: torch.testing.assert_close(torch.ones(2), torch.ones(2), rtol=1e-3))
    _same(lambda: gtt.assert_close(1.0, 1.0, atol=1e-3),
          lambda: torch.testing.assert_close(1.0, 1.0, atol=1e-3))


def test_scalar_tensors_and_python_scalars():
    cases = [(1.5, 1.0), (1.0, 1.0 + 1e-9), (3, 4), (2 + 1j, 2 + 1.5j), (True, False),
             (True, True), (None, None), (None, 1.0), (np.float32(1.5), np.float32(1.0)),
             (np.bool_(True), False), (1, 1.0), ("a", "a")]
    for a, b in cases:
        _same(lambda a=a, b=b: gtt.assert_close(a, b),
              lambda a=a, b=b: torch.testing.assert_close(a, b),
              expect_error=_outcome(lambda a=a, b=b: torch.testing.assert_close(a, b))
              is not None)
    # a bool and an int: PyTorch's NumberPair fails unexpectedly (no dtype for bool)
    g, t = _outcome(lambda: gtt.assert_close(True, 1)), \
        _outcome(lambda: torch.testing.assert_close(True, 1))
    assert g[0] is t[0] is RuntimeError and t[1].startswith(g[1])
    _same(lambda: gtt.assert_close(1, 1.0, check_dtype=True),
          lambda: torch.testing.assert_close(1, 1.0, check_dtype=True))
    _same(lambda: gtt.assert_close(gt.tensor(1.5), gt.tensor(1.0)),
          lambda: torch.testing.assert_close(torch.tensor(1.5), torch.tensor(1.0)))
    _same(lambda: gtt.assert_close(gt.tensor(7), gt.tensor(5)),
          lambda: torch.testing.assert_close(torch.tensor(7), torch.tensor(5)))


def test_attribute_checks(device):
    g, t = gt.ones(2, 3, device=device), torch.ones(2, 3)
    _same(lambda: gtt.assert_close(g, gt.ones(3, 2, device=device)),
          lambda: torch.testing.assert_close(t, torch.ones(3, 2)))
    _same(lambda: gtt.assert_close(g, g.double()),
          lambda: torch.testing.assert_close(t, t.double()))
    _same(lambda: gtt.assert_close(g, g.double(), check_dtype=False),
          lambda: torch.testing.assert_close(t, t.double(), check_dtype=False),
          expect_error=False)
    _same(lambda: gtt.assert_close(g.t().contiguous().t(), g, check_stride=True),
          lambda: torch.testing.assert_close(t.t().contiguous().t(), t, check_stride=True))
    _same(lambda: gtt.assert_close(g.t().contiguous().t(), g),
          lambda: torch.testing.assert_close(t.t().contiguous().t(), t), expect_error=False)
    # sparse vs dense: layout checked, or compared densely when check_layout=False
    gs = gt.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    ts = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    _same(lambda: gtt.assert_close(gs, gs.to_dense()),
          lambda: torch.testing.assert_close(ts, ts.to_dense()))
    _same(lambda: gtt.assert_close(gs, gs.to_dense(), check_layout=False),
          lambda: torch.testing.assert_close(ts, ts.to_dense(), check_layout=False),
          expect_error=False)
    gs2 = gt.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.5], (2, 2))
    ts2 = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.5], (2, 2))
    _same(lambda: gtt.assert_close(gs, gs2), lambda: torch.testing.assert_close(ts, ts2))
    gs3 = gt.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0], (2, 2))
    ts3 = torch.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0], (2, 2))
    _same(lambda: gtt.assert_close(gs, gs3), lambda: torch.testing.assert_close(ts, ts3))


@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs a second device type")
def test_check_device():
    c, g = gt.ones(2), gt.ones(2, device="cuda")
    with pytest.raises(AssertionError, match="The values for attribute 'device' do not match: "
                                             "cuda:0 != cpu."):
        gtt.assert_close(g, c)
    gtt.assert_close(g, c, check_device=False)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        gtt.assert_close(g, gt.tensor([1.0, 2.0]), check_device=False)


def test_nested_containers_and_ids():
    def build(m, b):
        return [m.tensor(A), {"x": m.tensor(A), "y": (m.tensor(b), 1.0)}]

    _same(lambda: gtt.assert_close(build(gt, A), build(gt, B)),
          lambda: torch.testing.assert_close(build(torch, A), build(torch, B)))
    _same(lambda: gtt.assert_close(build(gt, A), build(gt, A)),
          lambda: torch.testing.assert_close(build(torch, A), build(torch, A)),
          expect_error=False)
    _same(lambda: gtt.assert_close([1, 2], [1, 2, 3]),
          lambda: torch.testing.assert_close([1, 2], [1, 2, 3]))
    _same(lambda: gtt.assert_close({"a": 1, "b": 2}, {"a": 1, "c": 2}),
          lambda: torch.testing.assert_close({"a": 1, "b": 2}, {"a": 1, "c": 2}))
    _same(lambda: gtt.assert_close(OrderedDict(b=1.0, a=2.0), {"a": 2.0, "b": 1.5}),
          lambda: torch.testing.assert_close(OrderedDict(b=1.0, a=2.0), {"a": 2.0, "b": 1.5}))
    _same(lambda: gtt.assert_close([[gt.tensor([1.0, 2.0])]], [[gt.tensor([1.0, 3.0])]]),
          lambda: torch.testing.assert_close([[torch.tensor([1.0, 2.0])]],
                                             [[torch.tensor([1.0, 3.0])]]))


def test_numpy_arrays_and_unsupported_pairs():
    a32, b32 = A.astype(np.float32), B.astype(np.float32)
    _same(lambda: gtt.assert_close(a32, b32), lambda: torch.testing.assert_close(a32, b32))
    _same(lambda: gtt.assert_close(a32, a32), lambda: torch.testing.assert_close(a32, a32),
          expect_error=False)
    a, b = (2 * A).astype(np.int32), (2 * B).astype(np.int32)
    _same(lambda: gtt.assert_close(a, b), lambda: torch.testing.assert_close(a, b))
    # a tensor and an array (or a number) are no pair
    _same(lambda: gtt.assert_close(gt.tensor(a32), a32),
          lambda: torch.testing.assert_close(torch.tensor(a32), a32))
    _same(lambda: gtt.assert_close(gt.tensor(1.0), 1.0),
          lambda: torch.testing.assert_close(torch.tensor(1.0), 1.0))
    _same(lambda: gtt.assert_close(object(), object()),
          lambda: torch.testing.assert_close(object(), object()))


def test_msg_str_and_callable():
    def run(m, t, msg):
        m.testing.assert_close(m.tensor(A), m.tensor(B), msg=msg) if m is torch else \
            gtt.assert_close(gt.tensor(A), gt.tensor(B), msg=msg)

    _same(lambda: run(gt, None, "custom"), lambda: run(torch, None, "custom"))
    _same(lambda: run(gt, None, lambda s: f"Header\n\n{s}\n\nFooter"),
          lambda: run(torch, None, lambda s: f"Header\n\n{s}\n\nFooter"))
    # the item path is added before a callable msg sees the text, not with a str msg
    _same(lambda: gtt.assert_close([1.0], [2.0], msg=lambda s: s.upper()),
          lambda: torch.testing.assert_close([1.0], [2.0], msg=lambda s: s.upper()))
    _same(lambda: gtt.assert_close([1.0], [2.0], msg="plain"),
          lambda: torch.testing.assert_close([1.0], [2.0], msg="plain"))


def test_allow_subclasses():
    class Sub(np.ndarray):
        pass

    a, b = A.view(Sub), A.copy()
    _same(lambda: gtt.assert_close(a, b, allow_subclasses=False),
          lambda: torch.testing.assert_close(a, b, allow_subclasses=False))
    _same(lambda: gtt.assert_close(a, b), lambda: torch.testing.assert_close(a, b),
          expect_error=False)


def test_assert_allclose_deprecated():
    for m, fn in ((gt, gtt.assert_allclose), (torch, torch.testing.assert_allclose)):
        with pytest.warns(FutureWarning, match="assert_allclose\\(\\)` is deprecated"):
            fn(m.tensor([1.0, 2.0]), [1.0, 2.00001])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(lambda: gtt.assert_allclose(gt.tensor([1.0, float("nan")]), [1.1, float("nan")]),
              lambda: torch.testing.assert_allclose(torch.tensor([1.0, float("nan")]),
                                                    [1.1, float("nan")]))


# -- make_tensor -------------------------------------------------------------------------------
RANGES = {gt.bool: (0, 1), gt.uint8: (0, 9), gt.int8: (-9, 9), gt.int16: (-9, 9),
          gt.int32: (-9, 9), gt.int64: (-9, 9), gt.float16: (-9, 9), gt.bfloat16: (-9, 9),
          gt.float32: (-9, 9), gt.float64: (-9, 9), gt.complex64: (-9, 9),
          gt.complex128: (-9, 9)}


@pytest.mark.parametrize("dtype", list(RANGES), ids=str)
def test_make_tensor_default_ranges(device, dtype):
    t = gtt.make_tensor(40, 50, dtype=dtype, device=device)
    ref = torch.testing.make_tensor(40, 50, dtype=torch_dtype(dtype), device="cpu")
    assert t.shape == (40, 50) and t.dtype is dtype and t.device == gt.device(device)
    assert ref.shape == torch.Size(t.shape) and ref.dtype == torch_dtype(dtype)
    vals = (gt.view_as_real(t) if dtype.is_complex else t).cpu().numpy().astype(np.float64)
    lo, hi = RANGES[dtype]
    assert vals.min() >= lo and vals.max() <= hi
    if dtype.is_floating_point or dtype.is_complex:
        assert vals.max() > lo + 0.9 * (hi - lo) and vals.min() < lo + 0.1 * (hi - lo)
    else:   # every value of the range occurs in 2000 draws
        assert set(np.unique(vals)) == set(range(lo, hi + 1))


def test_make_tensor_options(device):
    t = gtt.make_tensor((3, 4), dtype=gt.float32, device=device, low=-1, high=1,
                        requires_grad=True)
    assert t.requires_grad and t.is_leaf and float(t.abs().max()) <= 1
    for shape in ((3, 4), (2, 3, 5)):
        g = gtt.make_tensor(*shape, dtype=gt.float32, device=device, noncontiguous=True)
        r = torch.testing.make_tensor(*shape, dtype=torch.float32, device="cpu",
                                      noncontiguous=True)
        assert not g.is_contiguous() and tuple(g.stride()) == r.stride()
        assert g.storage_offset() == r.storage_offset() == 1
    one = gtt.make_tensor(1, dtype=gt.float32, device=device, noncontiguous=True)
    assert one.is_contiguous()   # ignored for fewer than two elements, as in PyTorch
    cl = gtt.make_tensor(2, 3, 4, 5, dtype=gt.float32, device=device,
                         memory_format=gt.channels_last)
    assert cl.is_contiguous(memory_format=gt.channels_last)
    z = gtt.make_tensor(2000, dtype=gt.int8, device=device, low=-1, high=2, exclude_zero=True)
    assert int((z == 0).sum()) == 0 and set(z.cpu().numpy().tolist()) <= {-1, 1}
    f = gtt.make_tensor(100, dtype=gt.float32, device=device, low=-1e-45, high=1e-45,
                        exclude_zero=True)
    assert int((f == 0).sum()) == 0
    # bounds beyond the dtype are clamped; integer bounds are ceiled
    big = gtt.make_tensor(1000, dtype=gt.float16, device=device, low=-1e10, high=1e10)
    assert bool(big.isfinite().all())
    c = gtt.make_tensor(1000, dtype=gt.int32, device=device, low=-0.5, high=1.5)
    assert set(c.cpu().numpy().tolist()) <= {0, 1}
    assert gtt.make_tensor([2, 3], dtype=gt.int64, device=device).shape == (2, 3)
    assert gtt.make_tensor((), dtype=gt.float64, device=device).shape == ()


def test_make_tensor_errors_match_torch():
    cases = [
        dict(dtype="int64", requires_grad=True),
        dict(dtype="bool", requires_grad=True),
        dict(dtype="float32", low=2, high=1),
        dict(dtype="int32", low=5, high=5),
        dict(dtype="float32", low=math.nan),
        dict(dtype="uint8", low=-10, high=-1),
        dict(dtype="int8", low=200, high=300),
        dict(dtype="float32", noncontiguous=True, memory_format="channels_last"),
    ]
    for case in cases:
        def call(m, case=case):
            kw = dict(case)
            kw["dtype"] = getattr(m, kw["dtype"])
            if "memory_format" in kw:
                kw["memory_format"] = getattr(m, kw["memory_format"])
            fn = gtt.make_tensor if m is gt else torch.testing.make_tensor
            return fn(2, 3, 4, 5, device="cpu", **kw)
        err = _same(lambda c=call: c(gt), lambda c=call: c(torch))
        assert err[0] is ValueError
    with pytest.raises(TypeError, match="is not supported by torch.testing.make_tensor"):
        gtt.make_tensor(2, dtype=torch.float32, device="cpu")
    for m, fn in ((gt, gtt.make_tensor), (torch, torch.testing.make_tensor)):
        with pytest.warns(FutureWarning, match="Passing `low==high`"):
            t = fn(3, dtype=m.float32, device="cpu", low=2, high=2)
        assert float(t.min()) == float(t.max()) == 2

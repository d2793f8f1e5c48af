"""Tensor metadata, construction, conversions, NumPy interop and legacy tensor types."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, requires_torch, torch


@requires_torch
@pytest.mark.parametrize("data", [[1, 2], [1.5, 2], [True, False], [1 + 2j], 3, 2.5, True,
                                  [[1, 2], [3, 4]], [], [[]]])
def test_tensor_infers_dtype_like_torch(data: object) -> None:
    ours, theirs = gt.tensor(data), torch.tensor(data)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.tolist() == theirs.tolist()


def test_tensor_from_numpy_keeps_dtype_and_copies() -> None:
    a = np.arange(4, dtype=np.int16)
    t = gt.tensor(a)
    assert t.dtype is gt.int16
    a[0] = 9
    assert t[0].item() == 0


def test_tensor_bad_data() -> None:
    with pytest.raises(ValueError, match="rectangular"):
        gt.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="can't build a tensor"):
        gt.tensor(["a", "b"])


def test_metadata(device: str) -> None:
    x = gt.zeros(2, 3, 4, device=device)
    assert x.shape == gt.Size([2, 3, 4]) and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12 and x.storage_offset() == 0
    assert x.dim() == x.ndim == 3 and x.numel() == 24 and x.element_size() == 4
    assert x.is_contiguous() and x.layout is gt.strided and x.device == gt.device(device)
    assert repr(x.shape) == "gputensor.Size([2, 3, 4])"
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.size(3)


def test_from_numpy_is_zero_copy() -> None:
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = gt.from_numpy(a)
    a[0, 0] = 100
    assert t[0, 0].item() == 100
    t[1, 2] = -1
    assert a[1, 2] == -1
    assert t.numpy() is not None and np.shares_memory(t.numpy(), a)
    tt = gt.from_numpy(a.T)  # non-contiguous arrays share memory too
    assert tt.stride() == (1, 3) and np.shares_memory(tt.numpy(), a)
    with pytest.raises(ValueError, match="negative"):
        gt.from_numpy(a[:, ::-1])


def test_numpy_array_protocol() -> None:
    t = gt.arange(4)
    assert np.asarray(t).tolist() == [0, 1, 2, 3]
    assert np.add(t, 1).tolist() == [1, 2, 3, 4]


def test_item_and_python_scalars() -> None:
    assert gt.tensor(2.5).item() == 2.5 and float(gt.tensor([3])) == 3.0
    assert int(gt.tensor(7)) == 7 and bool(gt.tensor([1])) and complex(gt.tensor(1j)) == 1j
    assert [10, 20, 30][gt.tensor(1)] == 20
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(gt.ones(2))
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        gt.ones(2).item()


@pytest.mark.parametrize("method,dtype", [("double", gt.float64), ("float", gt.float32),
                                          ("half", gt.float16), ("bfloat16", gt.bfloat16),
                                          ("long", gt.int64), ("int", gt.int32),
                                          ("short", gt.int16), ("char", gt.int8),
                                          ("byte", gt.uint8), ("bool", gt.bool)])
def test_cast_methods(device: str, method: str, dtype: gt.dtype) -> None:
    x = gt.tensor([[0.0, 1.5], [-2.0, 3.25]], device=device).t()  # non-contiguous source
    y = getattr(x, method)()
    assert y.dtype is dtype and y.device == x.device
    expected = np.array([[0.0, -2.0], [1.5, 3.25]]).astype(dtype.np_dtype)
    assert_close(y.cpu().numpy().astype(np.float64), expected.astype(np.float64))


def test_to_variants(device: str) -> None:
    x = gt.ones(2, device=device)
    assert x.to(gt.float64).dtype is gt.float64
    assert x.to(device) is x
    assert x.to(device, gt.int32).dtype is gt.int32
    other = gt.zeros(1, dtype=gt.int16)
    assert x.to(other).dtype is gt.int16
    assert x.to(dtype=gt.float32, copy=True) is not x
    assert x.type_as(other).dtype is gt.int16


def test_legacy_tensor_types() -> None:
    x = gt.FloatTensor(2, 3)
    assert x.shape == (2, 3) and x.dtype is gt.float32
    assert isinstance(x, gt.FloatTensor) and not isinstance(x, gt.DoubleTensor)
    assert not isinstance(x, gt.cuda.FloatTensor)
    assert gt.LongTensor([1, 2]).tolist() == [1, 2]
    assert x.type() == "gputensor.FloatTensor"
    y = x.type(gt.DoubleTensor)
    assert y.type() == "gputensor.DoubleTensor" and isinstance(y, gt.DoubleTensor)
    assert x.type("gputensor.IntTensor").dtype is gt.int32
    assert x.type(gt.int64).dtype is gt.int64
    assert gt.Tensor(2).dtype is gt.float32 and gt.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert repr(gt.FloatTensor) == "<class 'gputensor.FloatTensor'>"
    assert repr(gt.cuda.FloatTensor) == "<class 'gputensor.cuda.FloatTensor'>"
    assert repr(gt.sparse.FloatTensor) == "<class 'gputensor.sparse.FloatTensor'>"
    names = ["DoubleTensor", "FloatTensor", "HalfTensor", "LongTensor", "IntTensor",
             "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]
    assert all(hasattr(gt, n) and hasattr(gt.cuda, n) and hasattr(gt.sparse, n) for n in names)


def test_sparse_legacy_constructor_makes_an_empty_sparse_tensor() -> None:
    s = gt.sparse.FloatTensor(2, 3)
    assert s.is_sparse and s._nnz() == 0 and tuple(s.shape) == (2, 3)
    assert s.type() == "gputensor.sparse.FloatTensor"


def test_storage_and_views_share_memory() -> None:
    x = gt.arange(6.0)
    st = x.storage()
    assert isinstance(st, gt.FloatStorage) and st.size() == 6
    assert x.untyped_storage().nbytes() == 24
    y = x[2:]
    assert y.storage_offset() == 2 and y.data_ptr() == x.data_ptr() + 8


def test_pickle_and_deepcopy_keep_views_separate() -> None:
    x = gt.arange(6.0).reshape(2, 3)
    y = pickle.loads(pickle.dumps(x.t()))
    assert y.tolist() == x.t().tolist() and y.stride() == (1, 3)
    z = copy.deepcopy(x)
    z[0, 0] = 100
    assert x[0, 0].item() == 0


def test_repr_matches_torch_format() -> None:
    assert repr(gt.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(gt.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(gt.tensor([1.0], dtype=gt.float64)) == "tensor([1.], dtype=gputensor.float64)"
    assert repr(gt.ones(1, requires_grad=True)) == "tensor([1.], requires_grad=True)"
    gt.set_printoptions(precision=2)
    try:
        assert repr(gt.tensor([1.2345])) == "tensor([1.23])"
    finally:
        gt.set_printoptions(profile="default")


def test_requires_grad_only_for_float() -> None:
    with pytest.raises(RuntimeError, match="floating point"):
        gt.ones(2, dtype=gt.int64).requires_grad_()
    x = gt.ones(2).requires_grad_()
    assert x.requires_grad and x.is_leaf and not x.detach().requires_grad
    with pytest.raises(RuntimeError, match="requires grad"):
        x.numpy()


def test_all_is_computed_from_registry() -> None:
    from gputensor.kernels.registry import OPS
    public = {name for name, op in OPS.items() if not name.startswith("_") and op.function}
    assert public <= set(gt.__all__)
    assert "view" not in gt.__all__ and not hasattr(gt, "view")  # method-only ops
    assert {"tensor", "FloatStorage", "FloatTensor", "float32", "no_grad"} <= set(gt.__all__)
    for name in gt.__all__:
        assert hasattr(gt, name), name


def test_shape_is_a_size_of_python_ints_shared_per_shape():
    """``Tensor.shape``/``size()`` come from one Size per shape (built once: reading a shape is
    on most ops' paths); a shape tuple holding NumPy ints still gives Python ints."""
    a, b = gt.zeros(2, 3), gt.ones(2, 3)
    assert type(a.shape) is gt.Size and a.shape == (2, 3) and a.shape is b.size()
    assert all(type(d) is int for d in a.shape)
    odd = (np.int64(5), np.int64(7))   # as if a shape tuple were built from NumPy values
    from gputensor._size import size_of
    s = size_of(odd)
    assert s == (5, 7) and all(type(d) is int for d in s) and type(s) is gt.Size
    assert gt.zeros(5, 7).shape is s

"""Untyped and typed storages, their names, methods and the copy-function table."""

from __future__ import annotations

import copy
import multiprocessing as mp
import pickle

import numpy as np
import pytest

import gputensor as gt
from gputensor.storage import COPY_TABLE, STORAGE_TYPES, copy_storage

NAMED = ["DoubleStorage", "FloatStorage", "HalfStorage", "LongStorage", "IntStorage",
         "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage", "BFloat16Storage",
         "ComplexFloatStorage", "ComplexDoubleStorage"]


@pytest.mark.parametrize("name", NAMED)
def test_named_storage_classes(name: str) -> None:
    cpu_cls = getattr(gt, name)
    cuda_cls = getattr(gt.cuda, name)
    assert f"{cpu_cls.__module__}.{cpu_cls.__name__}" == f"gputensor.{name}"
    assert f"{cuda_cls.__module__}.{cuda_cls.__name__}" == f"gputensor.cuda.{name}"
    assert issubclass(cpu_cls, gt.TypedStorage) and issubclass(cuda_cls, gt.TypedStorage)
    s = cpu_cls(4)
    assert len(s) == s.size() == 4 and s.type() == f"gputensor.{name}"
    assert not s.is_cuda and not s.is_sparse


def test_storage_from_sequence_and_methods() -> None:
    s = gt.FloatStorage([1, 2, 3])
    assert s.tolist() == [1.0, 2.0, 3.0] and list(s) == [1.0, 2.0, 3.0]
    assert s[1] == 2.0 and s[-1] == 3.0
    s[0] = 7
    assert s[0] == 7.0
    s.fill_(2.5)
    assert s.tolist() == [2.5] * 3
    assert s.element_size() == 4 and s.nbytes() == 12 and s.data_ptr() != 0
    assert isinstance(s[0:2], gt.FloatStorage) and s[0:2].tolist() == [2.5, 2.5]
    with pytest.raises(IndexError, match="out of range"):
        s[3]
    assert "gputensor.FloatStorage" in repr(s) and "of size 3" in repr(s)
    assert s.__sizeof__() >= 12


@pytest.mark.parametrize("method,dtype", [("double", gt.float64), ("float", gt.float32),
                                          ("half", gt.float16), ("long", gt.int64),
                                          ("int", gt.int32), ("short", gt.int16),
                                          ("char", gt.int8), ("byte", gt.uint8),
                                          ("bool", gt.bool), ("bfloat16", gt.bfloat16)])
def test_storage_casts(method: str, dtype: gt.dtype) -> None:
    s = gt.DoubleStorage([0.0, 1.5, -2.0])
    out = getattr(s, method)()
    assert out.dtype is dtype
    expected = np.array([0.0, 1.5, -2.0]).astype(dtype.np_dtype)
    np.testing.assert_array_equal(np.array(out.tolist(), dtype=dtype.np_dtype), expected)


def test_type_conversions_by_class_and_name() -> None:
    s = gt.IntStorage([1, 2])
    assert isinstance(s.type(gt.DoubleStorage), gt.DoubleStorage)
    assert isinstance(s.type("gputensor.FloatStorage"), gt.FloatStorage)
    assert s.type(gt.IntStorage) is s
    assert s.type(gt.float16).dtype is gt.float16


def test_copy_clone_deepcopy_pickle() -> None:
    a = gt.FloatStorage([1, 2, 3])
    b = gt.LongStorage(3).copy_(a)
    assert b.tolist() == [1, 2, 3]
    c = a.clone()
    c[0] = 9
    assert a[0] == 1
    assert copy.copy(a)._untyped is a._untyped
    d = copy.deepcopy(a)
    assert d.tolist() == a.tolist() and d.data_ptr() != a.data_ptr()
    e = pickle.loads(pickle.dumps(a))
    assert isinstance(e, gt.FloatStorage) and e.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="size mismatch"):
        gt.FloatStorage(2).copy_(a)


def test_untyped_storage() -> None:
    u = gt.UntypedStorage(8)
    assert u.nbytes() == 8 and len(u) == 8 and u.element_size() == 1
    u.fill_(3)
    assert u.tolist() == [3] * 8 and u[0] == 3
    f = gt.TypedStorage(wrap_storage=u, dtype=gt.int32)
    assert f.size() == 2 and f.untyped() is u
    v = pickle.loads(pickle.dumps(u))
    assert v.tolist() == u.tolist()
    with pytest.raises(RuntimeError, match="multiple"):
        gt.TypedStorage(wrap_storage=gt.UntypedStorage(3), dtype=gt.int32)


def _child_writes(storage: gt.FloatStorage) -> None:
    storage[0] = 42.0


def test_share_memory_is_seen_by_another_process() -> None:
    s = gt.FloatStorage([1, 2, 3])
    t = gt.tensor([0.0])
    t.set_ = None  # tensors are separate; the storage is what is shared
    assert not s.is_shared()
    s.share_memory_()
    assert s.is_shared()
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_child_writes, args=(s,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert s[0] == 42.0


def test_share_memory_keeps_tensor_views_valid() -> None:
    x = gt.tensor([1.0, 2.0, 3.0])
    y = x[1:]
    x.share_memory_()
    x[0] = 5.0
    assert y.tolist() == [2.0, 3.0] and x.tolist() == [5.0, 2.0, 3.0]
    y[0] = 7.0
    assert x[1].item() == 7.0


def test_pin_memory() -> None:
    s = gt.FloatStorage([1, 2])
    p = s.pin_memory()
    assert p.is_pinned() and not s.is_pinned() and p.tolist() == [1.0, 2.0]


def test_copy_table_is_filled_from_the_registry() -> None:
    cpu_types = [c for (dt, dev), c in STORAGE_TYPES.items() if dev == "cpu"]
    assert len(cpu_types) == 12
    for src in cpu_types:
        for dst in cpu_types:
            assert (src, dst) in COPY_TABLE
    # One generic mover serves every same-device pair: no per-pair functions.
    assert len({COPY_TABLE[s, d] for s in cpu_types for d in cpu_types}) == 1


@pytest.mark.skipif(gt.cuda.is_available(), reason="checks the error without a CUDA driver")
def test_missing_pair_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        gt.FloatStorage([1.0]).cuda()
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        gt.tensor([1.0]).cuda()
    with pytest.raises(RuntimeError, match="no copy function"):
        copy_storage(gt.FloatStorage(1), gt.cuda.FloatStorage.__new__(gt.cuda.FloatStorage))


def test_version_counter_bumps_on_writes() -> None:
    x = gt.zeros(3)
    v0 = x._version
    x.add_(1)
    x[0] = 2
    x.copy_(gt.ones(3))
    assert x._version == v0 + 3
    y = x[1:]
    y.mul_(2)
    assert x._version == v0 + 4  # views share the counter

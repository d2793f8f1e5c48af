"""Zero-copy exchange with NumPy and PyTorch: DLPack both ways, the array interfaces, asarray."""

from __future__ import annotations

import contextlib
import gc

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor import _dlpack

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]


def _sample(name: str, device: str) -> gt.Tensor:
    t = gt.arange(24, device=device).reshape(2, 3, 4)
    return (t % 2 == 0) if name == "bool" else t.to(getattr(gt, name))


def _strided_views(t: gt.Tensor) -> list[gt.Tensor]:
    """Contiguous, transposed, offset, stepped and expanded views of one storage."""
    return [t, t.transpose(0, 2), t[1], t[:, 1:, ::2], t[0, 0].expand(3, 4), t[:, :0]]


@pytest.mark.parametrize("name", DTYPES)
def test_torch_reads_gputensor_memory(name: str) -> None:
    # (CPU only: the CPU build of PyTorch takes no CUDA capsules; the CUDA round trips are
    # test_cuda_round_trips_share_memory)
    for view in _strided_views(_sample(name, "cpu")):
        theirs = torch.from_dlpack(view)  # the versioned protocol, negotiated by torch
        assert theirs.shape == view.shape and theirs.stride() == view.stride()
        assert str(theirs.dtype) == f"torch.{name}"
        assert theirs.data_ptr() == (view.data_ptr() if view.numel() else 0)
        np.testing.assert_array_equal(theirs.float().numpy() if name == "bfloat16" else
                                      theirs.numpy(), view.numpy(force=True))


@pytest.mark.parametrize("name", DTYPES)
def test_gputensor_reads_torch_memory(name: str) -> None:
    base = torch.arange(24).reshape(2, 3, 4)
    base = (base % 2 == 0) if name == "bool" else base.to(getattr(torch, name))
    for view in (base, base.transpose(0, 2), base[1], base[:, 1:, ::2]):
        for make in (gt.from_dlpack, lambda v: gt.from_dlpack(torch.utils.dlpack.to_dlpack(v))):
            ours = make(view)
            assert ours.shape == view.shape and ours.stride() == view.stride()
            assert ours.dtype is getattr(gt, name) and ours.data_ptr() == view.data_ptr()
            assert ours.tolist() == view.tolist()


def test_writes_are_seen_both_ways() -> None:
    ours = gt.zeros(2, 3)
    theirs = torch.from_dlpack(ours.t())
    theirs[2, 1] = 5.0
    assert ours[1, 2].item() == 5.0
    ours.add_(1)
    assert theirs[2, 1].item() == 6.0
    arr = np.arange(6.0).reshape(2, 3)
    view = gt.from_dlpack(arr[:, 1:])
    view.mul_(10)
    np.testing.assert_array_equal(arr, [[0, 10, 20], [3, 40, 50]])


def test_numpy_both_ways_and_its_array_interface() -> None:
    t = gt.arange(12, dtype=gt.int32).reshape(3, 4)[:, 1:]
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr() and a.strides == (16, 4)
    b = np.asarray(t)  # through __array_interface__: a view, not a copy
    assert b.ctypes.data == t.data_ptr() and b.base is t
    b[0, 0] = -1
    assert t[0, 0].item() == -1
    assert t.__array_interface__ == {"shape": (3, 3), "typestr": "<i4",
                                     "data": (t.data_ptr(), False), "strides": (16, 4),
                                     "version": 3}
    x = np.arange(8, dtype=np.float32)[::2]
    assert gt.from_dlpack(x).stride() == (2,) and gt.asarray(x).data_ptr() == x.ctypes.data


def test_array_interface_falls_back_where_memory_is_not_numpys() -> None:
    # Tensors that require grad and bfloat16 ones convert through __array__ (a copy).
    w = gt.ones(2, requires_grad=True)
    assert not hasattr(w, "__array_interface__")
    assert np.asarray(w).tolist() == [1.0, 1.0]
    h = gt.ones(2, dtype=gt.bfloat16)
    assert not hasattr(h, "__array_interface__") and np.asarray(h).dtype.name == "bfloat16"


def test_export_errors_are_pytorchs(device: str) -> None:
    with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
        gt.ones(2, device=device, requires_grad=True).__dlpack__()
    with pytest.raises(BufferError, match="layout other than torch.strided"):
        gt.eye(2, device=device).to_sparse().__dlpack__()
    with pytest.raises(TypeError, match="stream must be ``int`` or ``none``"):
        gt.ones(2, device=device).__dlpack__(stream="0")
    if device == "cpu":
        with pytest.raises(AssertionError, match="stream should be None on cpu"):
            gt.ones(2).__dlpack__(stream=3)
    else:
        t = gt.ones(2, device=device)
        with gt.cuda.device(t.device):
            with pytest.raises(BufferError, match="per-thread default stream is not supported"):
                t.__dlpack__(stream=2)
            with pytest.raises(AssertionError, match="unsupported stream on CUDA: 0"):
                t.__dlpack__(stream=0)
        with gt.cuda.device(gt.cuda.device_count() - 1 - t.device.index):
            if gt.cuda.current_device() != t.device.index:  # (with two devices)
                with pytest.raises(BufferError, match="on a different CUDA device index"):
                    t.__dlpack__()


def test_capsules_are_consumed_once_and_freed() -> None:
    t = gt.arange(4.0)
    before = len(_dlpack._EXPORTS)
    capsule = gt.utils.dlpack.to_dlpack(t)
    assert len(_dlpack._EXPORTS) == before + 1
    u = gt.from_dlpack(capsule)
    with pytest.raises(RuntimeError, match="can be consumed only once"):
        gt.from_dlpack(capsule)
    del u, capsule
    gc.collect()
    assert len(_dlpack._EXPORTS) == before  # the consumer ran the deleter
    unused = t.__dlpack__(max_version=(1, 0))
    assert len(_dlpack._EXPORTS) == before + 1
    del unused
    gc.collect()
    assert len(_dlpack._EXPORTS) == before  # the capsule's destructor did
    with pytest.raises(AssertionError, match="device and copy kwargs not supported"):
        gt.from_dlpack(gt.utils.dlpack.to_dlpack(t), copy=True)


def _current(device: str):
    """Exports need their CUDA device current (as in PyTorch)."""
    return contextlib.nullcontext() if device == "cpu" else gt.cuda.device(gt.device(device))


def test_copy_and_dl_device_requests(device: str) -> None:
    t = gt.arange(4.0, device=device)
    with _current(device):
        copied = gt.from_dlpack(t, copy=True)
        assert copied.data_ptr() != t.data_ptr() and copied.tolist() == t.tolist()
        shared = gt.from_dlpack(t, copy=False)
        assert shared.data_ptr() == t.data_ptr() and shared.device == t.device
        on_cpu = gt.from_dlpack(t, device="cpu")
        assert on_cpu.device.type == "cpu" and on_cpu.tolist() == t.tolist()
        if device == "cpu":
            return
        with pytest.raises(ValueError, match="without copying"):
            gt.from_dlpack(t, device="cpu", copy=False)
        # A versioned capsule copied to the host says so in its flags.
        capsule = t.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
        imported = _dlpack.Imported(capsule)
        assert imported.device[0] == _dlpack.DLDeviceType.kDLCPU
        assert imported._managed.flags & _dlpack.FLAG_IS_COPIED


def test_dlpack_device(device: str) -> None:
    t = gt.ones(1, device=device)
    kind, index = t.__dlpack_device__()
    if device == "cpu":
        assert (kind, index) == (gt.utils.dlpack.DLDeviceType.kDLCPU, 0)
        assert gt.ones(1).pin_memory().__dlpack_device__()[0] == 3  # kDLCUDAHost
    else:
        assert (kind, index) == (2, t.device.index)


def test_cuda_round_trips_share_memory(device: str) -> None:
    if device == "cpu":
        assert not hasattr(gt.ones(1), "__cuda_array_interface__")
        with pytest.raises(AttributeError, match="non-CUDA tensor type: gputensor.FloatTensor"):
            gt.ones(1).__cuda_array_interface__  # noqa: B018
        return
    t = gt.arange(12.0, device=device).reshape(3, 4)
    with gt.cuda.device(t.device):
        u = gt.from_dlpack(t.t())
        assert u.device == t.device and u.data_ptr() == t.data_ptr() and u.stride() == (1, 4)
        u[0, 1] = -5.0
        assert t[1, 0].item() == -5.0
        desc = t[:, 1:].__cuda_array_interface__
        assert desc["shape"] == (3, 3) and desc["strides"] == (16, 4) and desc["version"] == 3
        assert desc["data"] == (t.data_ptr() + 4, False) and desc["stream"] == 1

        class Producer:  # another library's array over the same memory
            __cuda_array_interface__ = desc

        v = gt.asarray(Producer())
        assert v.data_ptr() == t.data_ptr() + 4 and v.tolist() == t[:, 1:].tolist()
        side = gt.cuda.Stream()
        capsule = t.__dlpack__(stream=side.cuda_stream)  # the side stream waits for ours
        assert gt.from_dlpack(capsule).tolist() == t.tolist()
    with pytest.raises(RuntimeError, match="__cuda_array_interface__ on Variable that requires"):
        gt.ones(1, device=device, requires_grad=True).__cuda_array_interface__  # noqa: B018


def test_asarray_matches_torch() -> None:
    arr = np.arange(3.0)
    assert gt.asarray(arr).data_ptr() == arr.ctypes.data
    for lib, mod in ((gt, gt), (torch, torch)):
        with pytest.raises(ValueError, match="can't alias tensor with dtype 'Double' into "
                                             "dtype 'Float'"):
            lib.asarray(arr, dtype=mod.float32, copy=False)
        with pytest.raises(ValueError, match="can't alias arbitrary sequence"):
            lib.asarray([1, 2], copy=False)
    assert gt.asarray(bytearray(8)).tolist() == torch.asarray(bytearray(8)).tolist()
    assert gt.asarray(bytearray(8), dtype=gt.int32).dtype is gt.int32
    assert gt.asarray(3.5).dtype is gt.float32 and gt.asarray([1, 2]).dtype is gt.int64
    x = gt.ones(2, requires_grad=True)
    y = x * 2
    assert gt.asarray(y) is y
    z = gt.asarray(y, requires_grad=False)
    assert not z.requires_grad and z.grad_fn is None and z.data_ptr() == y.data_ptr()
    w = gt.asarray(x, dtype=gt.float64)
    assert w.requires_grad and w.grad_fn is not None
    c = gt.asarray(x, copy=True)
    assert c.requires_grad and c.data_ptr() != x.data_ptr()
    plain = gt.zeros(2)
    r = gt.asarray(plain, requires_grad=True)
    assert r.requires_grad and not plain.requires_grad and r.data_ptr() == plain.data_ptr()
    assert gt.as_tensor(torch.arange(3)).tolist() == [0, 1, 2]

"""Kernel-side error reporting (kernels/cuda/errors.py): a bad index found by a CUDA kernel
raises at the op when launches are synchronous (the emulator, CUDA_LAUNCH_BLOCKING=1), and at
the next synchronising call otherwise; the first error wins and the record resets after raising.
``errors.set_mode("deferred")`` runs the asynchronous path on the emulator.

The kernels are called directly where the frontends check indices before dispatch, since the
device check is what these tests are about.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops._core import empty, kernel
from gputensor.kernels.cuda import device as cuda_device
from gputensor.kernels.cuda import errors

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
pytestmark = cuda

ASYNC = r"raised asynchronously: an earlier '{op}' kernel launch.*CUDA_LAUNCH_BLOCKING=1"


@pytest.fixture(autouse=True)
def _restore_mode() -> Iterator[None]:
    """Every test starts in automatic mode with nothing pending or recorded, and leaves nothing
    behind for later tests even when it fails (the tests assert a clear record themselves)."""
    errors.set_mode(None)
    errors.check_pending()
    yield
    errors.set_mode(None)
    with contextlib.suppress(Exception):
        errors.check_pending()


def _record_words() -> np.ndarray:
    """The device's error record, read with the raw runtime copy (read_back would check it)."""
    words = np.empty(errors.RECORD_WORDS, np.int64)
    cuda_device.runtime().memcpy_dtoh(words, errors.record(0))
    return words


def _assert_record_clear() -> None:
    assert not errors._state.pending
    words = _record_words()
    assert not words.any(), f"error record not reset: {words.tolist()}"


def _bad_gather() -> gt.Tensor:
    """gather with index 5 along a dim of size 3 (straight to the CUDA kernel)."""
    x = gt.arange(6.0, device="cuda").reshape(2, 3)
    out = empty((2, 2), gt.float32, x.device)
    idx = gt.tensor([[0, 5], [1, 2]], device="cuda")
    kernel(x, "gather")(out, x, 1, idx)
    return out


GATHER_MESSAGE = "index 5 is out of bounds for dimension 1 with size 3"


# -- modes ----------------------------------------------------------------------------------------
@pytest.mark.skipif(gt.cuda.is_available() and gt.cuda.runtime_name() != "emulator",
                    reason="the emulator's automatic mode (a GPU's is deferred: test_mode_policy)")
def test_emulator_checks_immediately() -> None:
    assert errors.get_mode() == "immediate"
    with pytest.raises(RuntimeError, match=GATHER_MESSAGE) as info:
        _bad_gather()
    assert "asynchronously" not in str(info.value)
    _assert_record_clear()
    assert gt.tensor([1.0, 2.0], device="cuda").sum().item() == 3.0  # nothing left behind


def test_mode_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Automatic mode: deferred on an asynchronous runtime unless a *_LAUNCH_BLOCKING variable
    asks for synchronous checks; set_mode overrides both."""
    for name in errors.BLOCKING_ENVS:
        monkeypatch.delenv(name, raising=False)
    from gputensor.kernels.cuda import device

    # an asynchronous runtime, as CuPy's
    monkeypatch.setattr(type(device.active()), "synchronous_launches", False)
    assert errors.get_mode() == "deferred"
    for name in errors.BLOCKING_ENVS:
        monkeypatch.setenv(name, "1")
        assert errors.get_mode() == "immediate"
        monkeypatch.setenv(name, "0")
        assert errors.get_mode() == "deferred"
    errors.set_mode("immediate")
    assert errors.get_mode() == "immediate"
    errors.set_mode("deferred")
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    assert errors.get_mode() == "deferred"
    with pytest.raises(ValueError, match="mode must be one of"):
        errors.set_mode("sometimes")


# -- deferred: raised at the next synchronising call ------------------------------------------
def test_deferred_raises_at_synchronize_then_resets() -> None:
    errors.set_mode("deferred")
    out = _bad_gather()  # returns: nothing waits for the device
    assert out.shape == (2, 2)
    words = _record_words()  # recorded (site, value, bound, dim), not yet raised
    assert words[0] != 0 and words[1:4].tolist() == [5, 3, 1] and errors._state.pending
    with pytest.raises(RuntimeError, match=GATHER_MESSAGE + r"[\s\S]*" + ASYNC.format(op="gather")):
        gt.cuda.synchronize()
    _assert_record_clear()
    gt.cuda.synchronize()  # raised once: the record was reset


@pytest.mark.parametrize("sync", ["item", "cpu", "tolist", "read_back", "stream", "event"])
def test_deferred_raises_at_every_sync_point(sync: str) -> None:
    errors.set_mode("deferred")
    y = gt.tensor([4.0], device="cuda")
    _bad_gather()
    ev = gt.cuda.Event()
    ev.record()
    actions = {
        "item": lambda: y.item(),
        "cpu": lambda: y.cpu(),
        "tolist": lambda: y.tolist(),
        "read_back": lambda: gt.tensor([0, 3, 0], device="cuda").nonzero(),  # a count read
        "stream": lambda: gt.cuda.current_stream().synchronize(),
        "event": lambda: ev.synchronize(),
    }
    with pytest.raises(RuntimeError, match=ASYNC.format(op="gather")):
        actions[sync]()
    _assert_record_clear()
    assert y.item() == 4.0


def test_first_error_wins() -> None:
    """Later failures (another op, other bad indices) cannot overwrite the first record."""
    errors.set_mode("deferred")
    _bad_gather()
    x = gt.zeros(4, device="cuda")
    kernel(x, "index_select")(empty((2,), gt.float32, x.device), x, 0,
                              gt.tensor([9, -7], device="cuda"))
    with pytest.raises(RuntimeError, match=GATHER_MESSAGE) as info:
        gt.cuda.synchronize()
    assert "index_select" not in str(info.value)
    _assert_record_clear()


def test_no_pending_check_does_not_touch_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a deferred launch since the last check, synchronising points skip the read."""
    errors.set_mode("deferred")
    gt.arange(4, device="cuda").sum()  # launches without an error record
    monkeypatch.setattr(errors, "_check", lambda *a, **k: pytest.fail("read the record"))
    errors.check_pending()
    gt.cuda.synchronize()


# -- each kind of index kernel reports through the record --------------------------------------
def _scatter(mode: str) -> None:
    x = gt.zeros(2, 3, device="cuda")
    kernel(x, "scatter")(x, 1, gt.tensor([[0, 3]], device="cuda"), gt.ones(1, 2, device="cuda"),
                         None)


def _index_add(mode: str) -> None:
    x = gt.zeros(3, 2, device="cuda")
    kernel(x, "index_add")(x, 0, gt.tensor([0, -4], device="cuda"), gt.ones(2, 2, device="cuda"),
                           1)


def _index_put(mode: str) -> None:
    x = gt.zeros(3, device="cuda", dtype=gt.complex64)
    kernel(x, "_index_put")(x, [gt.tensor([1, 3], device="cuda")],
                            gt.ones(2, device="cuda", dtype=gt.complex64), mode == "acc")


def _embedding(mode: str) -> None:
    w = gt.ones(4, 2, device="cuda")
    kernel(w, "_embedding")(empty((2, 2), gt.float32, w.device), w,
                            gt.tensor([1, 7], device="cuda"))


def _nll(mode: str) -> None:
    x = gt.zeros(3, 4, device="cuda").log_softmax(1)
    gt.nn.functional.nll_loss(x, gt.tensor([1, 9, 2], device="cuda"))


def _take(mode: str) -> None:
    x = gt.zeros(2, 2, device="cuda")
    kernel(x, "take")(empty((1,), gt.float32, x.device), x, gt.tensor([-5], device="cuda"))


CASES = [  # scatter and gather raise RuntimeError, as PyTorch's CPU checks do
    (_scatter, "scatter", "index 3 is out of bounds for dimension 1 with size 3"),
    (_index_add, "index_add_", r"index_add_\(\): index -4 is out of bounds for dimension 0 "
                               r"with size 3"),
    (_index_put, "index_put_", "index 3 is out of bounds for dimension 0 with size 3"),
    (_embedding, "embedding", "index out of range in self: index 7 with 4 embeddings"),
    (_nll, "nll_loss", r"Target 9 is out of bounds. \(the input has 4 classes\)"),
    (_take, "take", r"take\(\): \(on the flattened input\) index -5 is out of bounds"),
]


@pytest.mark.parametrize(("fn", "op", "message"), CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_index_kernels_report(fn, op: str, message: str, mode: str) -> None:
    errors.set_mode(mode)
    exc = RuntimeError if op == "scatter" else IndexError
    if mode == "immediate":
        with pytest.raises(exc, match=message):
            fn(mode)
    else:
        fn(mode)
        with pytest.raises(exc, match=message + r"[\s\S]*" + ASYNC.format(op=op)):
            gt.cuda.synchronize()
    _assert_record_clear()


def test_masked_scatter_short_source_reports_runtime_error() -> None:
    x = gt.zeros(4, device="cuda")
    mask = gt.tensor([True, True, False, True], device="cuda")
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        kernel(x, "masked_scatter")(x, mask, gt.ones(2, device="cuda"))
        gt.cuda.synchronize()  # where a GPU (deferred mode) raises it
    _assert_record_clear()


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_max_pool_backward_reports(mode: str) -> None:
    errors.set_mode(mode)
    g = gt.ones(1, 1, 2, 2, device="cuda")
    gi = gt.empty(1, 1, 3, 3, device="cuda")
    idx = gt.tensor([[[[0, 1], [2, 9]]]], device="cuda")
    message = r"an index is outside its input plane of 3x3 = 9 elements \(index 9\)"
    if mode == "immediate":
        with pytest.raises(RuntimeError, match=message):
            kernel(gi, "_max_pool2d_backward")(gi, g, idx)
    else:
        kernel(gi, "_max_pool2d_backward")(gi, g, idx)
        with pytest.raises(RuntimeError, match=message + r"[\s\S]*" +
                           ASYNC.format(op="max_pool2d_backward")):
            gt.cuda.synchronize()
    _assert_record_clear()


def _frontend_cases() -> list:
    """(op, call with a bad CUDA index, message) of the frontends that leave the range check
    to their kernel."""
    x, w = gt.zeros(3, device="cuda"), gt.ones(4, 2, device="cuda")
    bad = gt.tensor([1, 7], device="cuda")
    src = gt.ones(2, device="cuda")
    oob = "index 7 is out of bounds for dimension 0 with size 3"
    return [
        ("embedding", lambda: gt.nn.functional.embedding(bad, w),
         IndexError, "index out of range in self: index 7 with 4 embeddings"),
        ("index_select", lambda: x.index_select(0, bad), IndexError, oob),
        ("gather", lambda: x.gather(0, bad), RuntimeError, oob),
        ("take", lambda: x.take(bad), IndexError, "index 7 is out of bounds"),
        ("index", lambda: x[bad], IndexError, oob),
        ("index_put_", lambda: x.__setitem__(bad, 1.0), IndexError, oob),
        ("scatter", lambda: x.scatter_(0, bad, src), RuntimeError, oob),
        ("index_add_", lambda: x.index_add_(0, bad, src), IndexError, oob),
        ("index_copy_", lambda: x.index_copy_(0, bad, src), IndexError, oob),
    ]


@pytest.mark.parametrize("case", range(9))
def test_index_frontends_check_on_the_device_without_a_host_read(monkeypatch, case) -> None:
    """Embedding, gathers, scatters and tensor indexing on CUDA leave the index check to
    their kernel (PyTorch's device-side assert): the call reads nothing back (no host sync),
    and the bad index raises at the next synchronising point."""
    op, call, exc, message = _frontend_cases()[case]
    errors.set_mode("deferred")
    rt = cuda_device.runtime()
    reads = []
    original = rt.memcpy_dtoh
    monkeypatch.setattr(rt, "memcpy_dtoh", lambda *a, **k: (reads.append(a), original(*a, **k)))
    call()
    assert reads == [], op
    monkeypatch.undo()
    with pytest.raises(exc, match=re.escape(message) + r"[\s\S]*" + ASYNC.format(op=op)):
        gt.cuda.synchronize()
    _assert_record_clear()

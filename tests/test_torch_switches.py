"""torch.* switches and small top-level names, against PyTorch: warn-always, the deterministic
debug mode, anomaly mode, the legacy autocast switches, build flags, threads, denormals,
device modules, error types, Stream/Event, cond, the sym_* helpers and futures."""

from __future__ import annotations

import threading
import warnings

import numba
import numpy as np
import pytest
import torch

import gputensor as gt


def _raises_like(gt_fn, torch_fn) -> BaseException:
    """Both calls raise the same exception type with the same message; returns gputensor's."""
    with pytest.raises(Exception) as theirs:
        torch_fn()
    with pytest.raises(type(theirs.value)) as ours:
        gt_fn()
    assert str(ours.value) == str(theirs.value)
    return ours.value


# -- warn always ---------------------------------------------------------------------------------
def test_warn_always_round_trips_like_torch() -> None:
    assert gt.is_warn_always_enabled() is torch.is_warn_always_enabled() is False
    try:
        gt.set_warn_always(True)
        torch.set_warn_always(True)
        assert gt.is_warn_always_enabled() is torch.is_warn_always_enabled() is True
    finally:
        gt.set_warn_always(False)
        torch.set_warn_always(False)
    assert gt.is_warn_always_enabled() is False
    _raises_like(lambda: gt.set_warn_always(1), lambda: torch.set_warn_always(1))


def test_warn_always_repeats_warn_once_warnings_like_torch() -> None:
    """frombuffer's read-only-buffer warning is PyTorch's TORCH_WARN_ONCE."""
    def count(lib) -> int:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.frombuffer(bytes(8), dtype=lib.int32)
            lib.frombuffer(bytes(8), dtype=lib.int32)
        return sum("not writable" in str(w.message) for w in caught)

    count(gt), count(torch)  # the once-per-process warning is spent now
    assert count(gt) == count(torch) == 0
    try:
        gt.set_warn_always(True)
        torch.set_warn_always(True)
        assert count(gt) == count(torch) == 2
    finally:
        gt.set_warn_always(False)
        torch.set_warn_always(False)


# -- deterministic debug mode --------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0, 1, 2, "default", "warn", "error", True, False])
def test_deterministic_debug_mode_maps_like_torch(mode) -> None:
    try:
        gt.set_deterministic_debug_mode(mode)
        torch.set_deterministic_debug_mode(mode)
        assert gt.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
        assert gt.are_deterministic_algorithms_enabled() == \
            torch.are_deterministic_algorithms_enabled()
        assert gt.is_deterministic_algorithms_warn_only_enabled() == \
            torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        gt.set_deterministic_debug_mode(0)
        torch.set_deterministic_debug_mode(0)


@pytest.mark.parametrize("bad", [3, -1, "loud", 1.0, None])
def test_deterministic_debug_mode_rejects_like_torch(bad) -> None:
    _raises_like(lambda: gt.set_deterministic_debug_mode(bad),
                 lambda: torch.set_deterministic_debug_mode(bad))
    assert gt.get_deterministic_debug_mode() == 0


def test_deterministic_debug_mode_drives_the_alerts(device: str) -> None:
    """Mode 2 makes a CUDA atomic accumulation raise, mode 1 warn; the CPU never alerts."""
    def run() -> None:
        gt.zeros(4, device=device).index_add_(0, gt.tensor([0, 0], device=device),
                                              gt.ones(2, device=device))
    try:
        gt.set_deterministic_debug_mode("error")
        if device == "cpu":
            run()
        else:
            with pytest.raises(RuntimeError, match="does not have a deterministic"):
                run()
        gt.set_deterministic_debug_mode(1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
        assert any("deterministic" in str(w.message) for w in caught) == (device != "cpu")
    finally:
        gt.set_deterministic_debug_mode(0)


# -- anomaly mode --------------------------------------------------------------------------------
@pytest.mark.parametrize("enabled,check_nan", [(True, True), (True, False), (False, False),
                                               (False, True)])
def test_anomaly_switches_match_torch(enabled: bool, check_nan: bool) -> None:
    try:
        gt.set_anomaly_enabled(enabled, check_nan)
        torch.set_anomaly_enabled(enabled, check_nan)
        assert gt.is_anomaly_enabled() is torch.is_anomaly_enabled()
        assert gt.is_anomaly_check_nan_enabled() is torch.is_anomaly_check_nan_enabled()
    finally:
        gt.set_anomaly_enabled(False)
        torch.set_anomaly_enabled(False)
    assert gt.is_anomaly_enabled() is False and gt.is_anomaly_check_nan_enabled() is True


def test_anomaly_switch_rejects_non_bools_like_torch() -> None:
    _raises_like(lambda: gt.set_anomaly_enabled(1), lambda: torch.set_anomaly_enabled(1))
    _raises_like(lambda: gt.set_anomaly_enabled(True, 1),
                 lambda: torch.set_anomaly_enabled(True, 1))
    assert gt.is_anomaly_enabled() is False


def test_set_anomaly_enabled_makes_backward_catch_nans(device: str) -> None:
    def backward(lib, dev) -> None:
        x = lib.tensor([-1.0, 4.0], device=dev, requires_grad=True)
        x.sqrt().sum().backward()

    backward(gt, device)  # off: a NaN gradient passes silently
    try:
        gt.set_anomaly_enabled(True)
        torch.set_anomaly_enabled(True)
        with pytest.raises(RuntimeError, match="returned nan values"):
            backward(torch, "cpu")
        with pytest.raises(RuntimeError, match="returned nan values"):
            backward(gt, device)
        gt.set_anomaly_enabled(True, check_nan=False)
        backward(gt, device)
    finally:
        gt.set_anomaly_enabled(False)
        torch.set_anomaly_enabled(False)


# -- legacy autocast switches --------------------------------------------------------------------
_GETTERS = ["get_autocast_cpu_dtype", "get_autocast_gpu_dtype", "get_autocast_ipu_dtype",
            "get_autocast_xla_dtype", "is_autocast_cpu_enabled", "is_autocast_ipu_enabled",
            "is_autocast_xla_enabled"]


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return fn(*args)


def _same(a, b) -> bool:
    if isinstance(a, bool):
        return a is b
    return str(a).split(".")[-1] == str(b).split(".")[-1]  # gputensor.bfloat16 ~ torch.bfloat16


@pytest.mark.parametrize("name", _GETTERS)
def test_autocast_getters_default_like_torch_and_warn(name: str) -> None:
    assert _same(_quiet(getattr(gt, name)), _quiet(getattr(torch, name)))
    with pytest.warns(DeprecationWarning) as ours:
        getattr(gt, name)()
    with pytest.warns(DeprecationWarning) as theirs:
        getattr(torch, name)()
    assert str(theirs[0].message).startswith(str(ours[0].message))


@pytest.mark.parametrize("dev,name", [("cpu", "cpu"), ("cuda", "gpu"), ("ipu", "ipu"),
                                      ("xla", "xla")])
def test_autocast_dtype_setters_change_the_autocast_state(dev: str, name: str) -> None:
    setter, getter = f"set_autocast_{name}_dtype", f"get_autocast_{name}_dtype"
    before = gt.get_autocast_dtype(dev)
    try:
        _quiet(getattr(gt, setter), gt.float16 if before is gt.bfloat16 else gt.bfloat16)
        assert gt.get_autocast_dtype(dev) is not before
        assert _quiet(getattr(gt, getter)) is gt.get_autocast_dtype(dev)
    finally:
        gt.set_autocast_dtype(dev, before)
    with pytest.warns(DeprecationWarning) as ours:
        getattr(gt, setter)(before)
    with pytest.warns(DeprecationWarning) as theirs:
        getattr(torch, setter)(_quiet(getattr(torch, getter)))
    assert str(theirs[0].message).startswith(str(ours[0].message))
    _raises_like(lambda: _quiet(getattr(gt, setter), 1), lambda: _quiet(getattr(torch, setter), 1))


@pytest.mark.parametrize("dev", ["cpu", "ipu", "xla"])
def test_autocast_enabled_setters_round_trip(dev: str) -> None:
    setter, getter = getattr(gt, f"set_autocast_{dev}_enabled"), \
        getattr(gt, f"is_autocast_{dev}_enabled")
    try:
        _quiet(setter, True)
        assert _quiet(getter) is True and gt.is_autocast_enabled(dev) is True
    finally:
        _quiet(setter, False)
    assert gt.is_autocast_enabled(dev) is False
    _raises_like(lambda: _quiet(setter, 1),
                 lambda: _quiet(getattr(torch, f"set_autocast_{dev}_enabled"), 1))


def test_set_autocast_cpu_enabled_makes_cpu_ops_autocast() -> None:
    a, b = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
    try:
        _quiet(gt.set_autocast_cpu_enabled, True)
        _quiet(gt.set_autocast_cpu_dtype, gt.bfloat16)
        _quiet(torch.set_autocast_cpu_enabled, True)
        _quiet(torch.set_autocast_cpu_dtype, torch.bfloat16)
        ours = gt.mm(gt.tensor(a), gt.tensor(b))
        theirs = torch.mm(torch.tensor(a), torch.tensor(b))
    finally:
        _quiet(gt.set_autocast_cpu_enabled, False)
        _quiet(torch.set_autocast_cpu_enabled, False)
    assert ours.dtype is gt.bfloat16 and theirs.dtype is torch.bfloat16
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=2e-2,
                               atol=2e-2)
    assert gt.mm(gt.tensor(a), gt.tensor(b)).dtype is gt.float32


def test_autocast_cache_switch_is_the_one_autocast_uses() -> None:
    assert gt.is_autocast_cache_enabled() is torch.is_autocast_cache_enabled() is True
    with gt.autocast("cpu", cache_enabled=False):
        assert gt.is_autocast_cache_enabled() is False
    assert gt.is_autocast_cache_enabled() is True
    w = gt.randn(3, 3, requires_grad=True)
    x = gt.randn(3, 3)
    try:
        gt.set_autocast_cache_enabled(False)
        with gt.autocast("cpu"):
            gt.set_autocast_cache_enabled(False)  # the region set its own; switch it off inside
            gt.mm(x, w)
            gt.mm(x, w)
            assert not gt.amp.autocast_mode._state.cache
            gt.set_autocast_cache_enabled(True)
            gt.mm(x, w)
            assert gt.amp.autocast_mode._state.cache  # the cast of w is cached now
    finally:
        gt.set_autocast_cache_enabled(True)
    assert not gt.amp.autocast_mode._state.cache  # cleared when the region exits
    _raises_like(lambda: gt.set_autocast_cache_enabled(1),
                 lambda: torch.set_autocast_cache_enabled(1))


def test_autocast_nesting_counts_like_torch() -> None:
    def trace(lib) -> list[int]:
        out = [lib.autocast_increment_nesting()]
        with lib.autocast("cpu"):
            out += [lib.autocast_increment_nesting(), lib.autocast_decrement_nesting()]
        out += [lib.autocast_decrement_nesting(), lib.autocast_decrement_nesting(),
                lib.autocast_increment_nesting()]
        return out

    assert trace(gt) == trace(torch)


# -- build flags, threads, denormals -------------------------------------------------------------
def test_build_flags_are_truthful() -> None:
    assert gt.has_lapack is True
    gt.linalg.inv(gt.eye(2))  # LAPACK really answers
    assert gt.has_spectral is True
    gt.fft.fft(gt.ones(4))
    blas = np.__config__.CONFIG["Build Dependencies"]["blas"]["name"].lower()
    assert gt.has_mkl is ("mkl" in blas)
    assert isinstance(gt.has_openmp, bool)


def test_init_num_threads_gives_new_threads_the_set_count() -> None:
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs Numba to have started at least 2 threads")
    before = gt.get_num_threads()
    seen: list[int] = []

    def worker() -> None:
        seen.append(numba.get_num_threads())
        gt.init_num_threads()
        seen.append(gt.get_num_threads())

    try:
        gt.set_num_threads(1)
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    finally:
        gt.set_num_threads(before)
    assert seen == [numba.config.NUMBA_NUM_THREADS, 1]
    with pytest.raises(TypeError):
        gt.init_num_threads(1)


def test_set_flush_denormal_flushes_cpu_kernels() -> None:
    assert gt.tensor([1e-40]).mul(1).item() != 0
    try:
        assert gt.set_flush_denormal(True) is torch.set_flush_denormal(True) is True
        assert (gt.tensor([1e-40]) * 1).item() == 0
        assert (gt.tensor([1e-40], dtype=gt.float64) * 1e-270).item() == 0
    finally:
        assert gt.set_flush_denormal(False) is True
    assert (gt.tensor([1e-40]) * 1).item() == pytest.approx(1e-40, rel=1e-3)
    _raises_like(lambda: gt.set_flush_denormal(1), lambda: torch.set_flush_denormal(1))


# -- device modules and error types --------------------------------------------------------------
def test_get_device_module() -> None:
    assert gt.get_device_module("cpu") is gt.cpu
    assert gt.get_device_module(gt.device("cpu")) is gt.cpu
    assert gt.get_device_module("cuda:0") is gt.cuda
    assert gt.get_device_module() is (gt.cuda if gt.cuda.is_available() else gt.cpu)
    _raises_like(lambda: gt.get_device_module(3), lambda: torch.get_device_module(3))
    with pytest.raises(RuntimeError, match="device type"):
        gt.get_device_module("foo")


def test_error_types() -> None:
    assert issubclass(gt.OutOfMemoryError, RuntimeError)
    assert issubclass(gt.AcceleratorError, RuntimeError)
    assert gt.cuda.OutOfMemoryError is gt.OutOfMemoryError
    assert gt.GradScaler is gt.amp.GradScaler


def test_cuda_out_of_memory_raises_out_of_memory_error(device: str) -> None:
    if device == "cpu":
        with pytest.raises(RuntimeError, match="can't allocate memory") as info:
            gt.empty(2**62, dtype=gt.uint8)
        assert not isinstance(info.value, gt.OutOfMemoryError)  # as PyTorch's CPU allocator
        return
    total = gt.cuda.get_device_properties(device).total_memory
    with pytest.raises(gt.OutOfMemoryError, match="out of memory"):
        gt.empty(total + 1, dtype=gt.uint8, device=device)


def test_bad_device_ordinal_is_an_accelerator_error(device: str) -> None:
    if device == "cpu":
        pytest.skip("CUDA only")
    with pytest.raises(gt.AcceleratorError, match="invalid device ordinal"):
        gt.cuda.set_device(99)


# -- Stream and Event ----------------------------------------------------------------------------
def test_cpu_stream_and_event_like_torch() -> None:
    s, ts = gt.Stream("cpu"), torch.Stream("cpu")
    assert repr(s) == repr(ts) and s.query() is ts.query() is True
    assert (s.device_type, s.device_index, s.stream_id) == \
        (ts.device_type, ts.device_index, ts.stream_id)
    assert str(s.device) == str(ts.device) == "cpu"
    s.synchronize()
    assert s == gt.Stream("cpu") and hash(s) == hash(gt.Stream("cpu"))
    with s:
        pass
    assert s.is_capturing() is ts.is_capturing() is False
    _raises_like(lambda: s.record_event(), lambda: ts.record_event())
    _raises_like(lambda: s.wait_stream(s), lambda: ts.wait_stream(ts))
    _raises_like(lambda: s.native_handle, lambda: ts.native_handle)
    e, te = gt.Event("cpu", enable_timing=True), torch.Event("cpu", enable_timing=True)
    assert repr(e) == repr(te) and e.query() is te.query() is True
    e.synchronize()
    e.wait()
    _raises_like(lambda: e.record(), lambda: te.record())
    _raises_like(lambda: gt.Event("cpu").elapsed_time(e),
                 lambda: torch.Event("cpu").elapsed_time(te))


def test_cuda_stream_and_event_drive_gt_cuda(device: str) -> None:
    if device == "cpu":
        pytest.skip("CUDA only")
    s = gt.Stream(device)
    assert s.device == gt.device(device) and s.device_type == 1
    with gt.cuda.device(device), s:
        assert gt.cuda.current_stream() == s._impl
        y = gt.ones(8, device=device) * 3
    start, end = gt.Event(device, enable_timing=True), gt.Event(device, enable_timing=True)
    start.record(s)
    with gt.cuda.device(device):
        ev = s.record_event()
        gt.Stream(device).wait_event(ev)
        gt.Stream(device).wait_stream(s)
    end.record(s)
    end.synchronize()
    assert ev.query() and s.query() and end.query()
    assert start.elapsed_time(end) >= 0
    assert y.sum().item() == 24
    assert gt.Stream(device) != s


# -- cond ----------------------------------------------------------------------------------------
def _branches(lib):
    return (lambda a, b: (a.sin() + b, a.sum() * 0 + 1)), (lambda a, b: (a.cos() - b, a.mean()))


@pytest.mark.parametrize("pred", [True, False])
def test_cond_with_tensor_pred_matches_torch(device: str, pred: bool) -> None:
    x = np.random.default_rng(1).standard_normal(5)
    a = gt.tensor(x, device=device, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    out = gt.cond(gt.tensor(pred, device=device), *_branches(gt), (a, gt.tensor(2.0,
                  device=device, dtype=gt.float64)))
    tout = torch.cond(torch.tensor(pred), *_branches(torch), (ta, torch.tensor(2.0,
                      dtype=torch.float64)))
    for o, t in zip(out, tout, strict=True):
        np.testing.assert_allclose(o.detach().cpu().numpy(), t.detach().numpy(), rtol=1e-12)
    (out[0].sum() + out[1]).backward()
    (tout[0].sum() + tout[1]).backward()
    np.testing.assert_allclose(a.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-12)


def test_cond_python_pred_runs_one_branch() -> None:
    calls = []
    out = gt.cond(0, lambda: calls.append("t"), lambda: "anything", ())
    assert out == "anything" and calls == []
    assert gt.cond(2.5, lambda x: x + 1, lambda x: x - 1, (gt.tensor(1.0),)).item() == 2.0


def test_cond_validates_like_torch() -> None:
    x, tx = gt.ones(3), torch.ones(3)

    def both(pred_g, pred_t, tf, ff, ops_g, ops_t):
        _raises_like(lambda: gt.cond(pred_g, tf, ff, ops_g),
                     lambda: torch.cond(pred_t, tf, ff, ops_t))

    def ident(a):
        return a.clone()

    both(gt.tensor([True, False]), torch.tensor([True, False]), ident, ident, (x,), (tx,))
    both("a", "a", ident, ident, (x,), (tx,))
    both(gt.tensor(True), torch.tensor(True), 3, ident, (x,), (tx,))
    both(gt.tensor(True), torch.tensor(True), ident, ident, (3,), (3,))


@pytest.mark.parametrize("case", ["dtype", "structure", "alias", "mutation", "constant"])
def test_cond_rejects_what_torch_rejects(device: str, case: str) -> None:
    x = gt.ones(3, device=device)
    true_fn = {"dtype": lambda a: a.sin(), "structure": lambda a: (a.sin(), a.cos()),
               "alias": lambda a: a, "mutation": lambda a: a.add_(1),
               "constant": lambda a: None}[case]
    false_fn = {"dtype": lambda a: a.double()}.get(case, lambda a: a.sin())
    with pytest.raises(RuntimeError, match={"dtype": "expected same dtype",
                                            "structure": "Unmatched output spec",
                                            "alias": "aliasing", "mutation": "mutat",
                                            "constant": "must be ints"}[case]):
        gt.cond(gt.tensor(True, device=device), true_fn, false_fn, (x,))
    if case != "mutation":  # (the taken branch ran on the operands: its write stays)
        assert x.sum().item() == 3
    # sizes may differ between branches (PyTorch's dynamic shapes)
    out = gt.cond(gt.tensor(False, device=device), lambda a: a.sin(), lambda a: a[:2].clone(),
                  (x,))
    assert out.shape == (2,)


# -- sym helpers ---------------------------------------------------------------------------------
_SYM_CASES = [
    ("sym_int", (2.7,)), ("sym_int", (-2.7,)), ("sym_int", ("3",)), ("sym_float", (3,)),
    ("sym_max", (1, 2.0)), ("sym_max", (True, 2)), ("sym_max", (3, 2)), ("sym_min", (1, 2.0)),
    ("sym_min", (np.int64(5), 1)), ("sym_max", (1, np.float32(5))), ("sym_max", ("a", 2)),
    ("sym_not", (0,)), ("sym_not", (True,)), ("sym_ite", (True, 1, 2)),
    ("sym_ite", (False, 1.0, 2.0)), ("sym_ite", (1, 2, 3)), ("sym_ite", (True, 2, 3.0)),
    ("sym_sum", ([1, 2, 3],)), ("sym_sum", (1.5, 2)), ("sym_sum", ()), ("sym_sqrt", (4,)),
    ("sym_sqrt", (-1,)), ("sym_fresh_size", (5,)), ("sym_fresh_size", (5.5,)),
]


@pytest.mark.parametrize("name,args", _SYM_CASES, ids=[f"{n}{a}" for n, a in _SYM_CASES])
def test_sym_helpers_match_torch_on_plain_numbers(name: str, args: tuple) -> None:
    try:
        theirs = getattr(torch, name)(*args)
    except Exception as e:  # noqa: BLE001 - the same failure is expected of gputensor
        with pytest.raises(type(e)) as ours:
            getattr(gt, name)(*args)
        assert str(ours.value) == str(e)
        return
    ours = getattr(gt, name)(*args)
    assert ours == theirs and type(ours) is type(theirs)


def test_sym_classes() -> None:
    assert not isinstance(3, gt.SymInt) and not isinstance(3.0, gt.SymFloat)
    assert not isinstance(True, gt.SymBool)

    class Node:
        def int_(self) -> int:
            return 7

        def float_(self) -> float:
            return 2.5

        def bool_(self) -> bool:
            return False

    i, f, b = gt.SymInt(Node()), gt.SymFloat(Node()), gt.SymBool(Node())
    assert gt.sym_int(i) is i and int(i) == 7 and [0] * 8 and list(range(10))[i] == 7
    assert gt.sym_int(f) == 2 and gt.sym_float(f) is f and gt.sym_float(i) == 7.0
    assert gt.sym_not(b) is True and gt.sym_ite(b, "t", "f") == "f" and not b


# -- futures, fork and wait ----------------------------------------------------------------------
@pytest.mark.parametrize("lib", [gt, torch], ids=["gt", "torch"])
def test_future_protocol(lib) -> None:
    f = lib.futures.Future()
    assert not f.done()
    chained = f.then(lambda fut: fut.value() + 1)
    seen = []
    f.add_done_callback(lambda fut: seen.append(fut.value()))
    f.set_result(3)
    assert f.done() and f.wait() == 3 and f.value() == 3 and seen == [3]
    assert chained.wait() == 4
    with pytest.raises(RuntimeError, match="Future can only be marked completed once"):
        f.set_result(4)
    g = lib.futures.Future()
    g.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        g.wait()
    with pytest.raises(RuntimeError, match="Got the following error when running the "
                                           "callback: ValueError: boom"):
        g.then(lambda fut: fut.value()).wait()
    with pytest.raises(AssertionError, match="not an Exception"):
        lib.futures.Future().set_exception(3)
    assert lib.futures.wait_all([f, chained]) == [3, 4]
    assert [x.value() for x in lib.futures.collect_all([f, chained]).wait()] == [3, 4]
    with pytest.raises(ValueError, match="boom"):
        lib.futures.wait_all([f, g])
    with pytest.raises(ValueError, match="Expected devices to have indices, got cpu"):
        lib.futures.Future(devices=["cpu"])


def test_future_waits_across_threads() -> None:
    f = gt.Future()
    t = threading.Timer(0.05, lambda: f.set_result("late"))
    t.start()
    assert f.wait() == "late"
    t.join()


def test_fork_and_wait_like_torch() -> None:
    fut = gt.fork(lambda x, y=1: x + y, gt.tensor(2), y=5)
    tfut = torch.jit.fork(lambda x, y=1: x + y, torch.tensor(2), y=5)
    assert isinstance(fut, gt.Future) and fut.done() is tfut.done() is True
    assert gt.wait(fut).item() == torch.jit.wait(tfut).item() == 7

    def bad():
        raise KeyError("k")

    _raises_like(lambda: gt.fork(bad), lambda: torch.fork(bad))
    with pytest.raises(TypeError):
        gt.wait(3)


def test_future_with_cuda_devices_orders_streams(device: str) -> None:
    if device == "cpu":
        pytest.skip("CUDA only")
    f = gt.futures.Future(devices=[device])
    s = gt.cuda.Stream(device)
    with gt.cuda.device(device), gt.cuda.stream(s):
        y = gt.arange(4.0, device=device) * 2
        f.set_result(y)
    with gt.cuda.device(device):
        assert f.wait().sum().item() == 12

"""Shared fixtures: every op test runs on each available device (cpu, and cuda when present)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import gputensor as gt

# "cuda:N", not "cuda": a CUDA tensor's device carries its index, and as in PyTorch
# device("cuda") != device("cuda:0"), so tests compare against the indexed device. On a
# machine with several devices (GPUTENSOR_CUDA_EMULATOR=2 in CI) the tests run on the last
# one while device 0 stays current: every op must then run on its tensors' device, and a
# kernel that launched on the current device instead would meet pointers of another device's
# memory (a stray address in the emulator).
DEVICES = ["cpu"] + ([f"cuda:{gt.cuda.device_count() - 1}"] if gt.cuda.is_available() else [])


@pytest.fixture(params=DEVICES, ids=[d.split(":")[0] for d in DEVICES])
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def _kernel_errors_as_on_a_gpu() -> Iterator[None]:
    """CUDA kernel errors (a bad index) are checked as on a real GPU, at the next synchronising
    call rather than at the launch, even on the emulator (tests of the modes themselves set
    their own); a test must not leave such an error pending for the next one."""
    if not DEVICES[-1].startswith("cuda"):
        yield
        return
    from gputensor.kernels.cuda import errors

    errors.set_mode("deferred")
    try:
        yield
        try:
            errors.check_pending()
        except (IndexError, RuntimeError) as e:
            pytest.fail(f"the test left a pending CUDA kernel error: {e}")
    finally:
        errors.set_mode(None)


@pytest.fixture(autouse=True)
def _restore_defaults():
    """Tests that change global defaults cannot leak them into other tests."""
    dtype, dev = gt.get_default_dtype(), gt.get_default_device()
    yield
    gt.set_default_dtype(dtype)
    gt.set_default_device(dev)

"""Post-accumulate-grad hooks and engine callbacks (what DistributedDataParallel hooks into),
against PyTorch."""

from __future__ import annotations

import pytest

import gputensor as gt
from tests.helpers import requires_torch, torch

pytestmark = requires_torch


def _trace(lib) -> list:
    x = lib.ones(2, requires_grad=True)
    seen: list = []
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    y = x * 2
    y.register_hook(lambda g: lib.autograd.Variable._execution_engine.queue_callback(
        lambda: seen.append("end")))
    y.sum().backward()
    (x * 3).sum().backward()
    h.remove()
    (x * 4).sum().backward()
    return seen


def test_post_accumulate_hooks_and_queued_callbacks_match_torch() -> None:
    assert _trace(gt) == _trace(torch)


def test_post_accumulate_hook_errors() -> None:
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        gt.ones(1).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (gt.ones(1, requires_grad=True) * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during"):
        gt.autograd.Variable._execution_engine.queue_callback(print)

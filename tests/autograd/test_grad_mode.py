"""Grad mode switches (the engine itself lands with the training issue)."""

from __future__ import annotations

import threading

import gputensor as gt


def test_no_grad_and_enable_grad_nest() -> None:
    assert gt.is_grad_enabled()
    with gt.no_grad():
        assert not gt.is_grad_enabled()
        with gt.enable_grad():
            assert gt.is_grad_enabled()
        assert not gt.is_grad_enabled()
    assert gt.is_grad_enabled()


def test_decorators() -> None:
    @gt.no_grad()
    def off() -> bool:
        return gt.is_grad_enabled()

    @gt.inference_mode()
    def inference() -> tuple[bool, bool]:
        return gt.is_grad_enabled(), gt.is_inference_mode_enabled()

    assert off() is False and inference() == (False, True)
    assert gt.is_grad_enabled() and not gt.is_inference_mode_enabled()


def test_set_grad_enabled_as_function_and_context() -> None:
    gt.set_grad_enabled(False)
    assert not gt.is_grad_enabled()
    gt.set_grad_enabled(True)
    with gt.set_grad_enabled(False):
        assert not gt.is_grad_enabled()
    assert gt.is_grad_enabled()


def test_grad_mode_is_per_thread() -> None:
    seen = []
    with gt.no_grad():
        t = threading.Thread(target=lambda: seen.append(gt.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]

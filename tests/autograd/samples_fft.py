"""Derivative samples for test_every_derivative.py (same contract as its SAMPLES): the three
FFT primitives, reached through gt.fft (complex values enter and leave as view_as_complex /
view_as_real of float64 leaves, so gradcheck compares real Jacobians)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import gputensor as gt


def _leaf(device: str, *shape: int, seed: int = 0) -> gt.Tensor:
    values = np.random.default_rng(seed).uniform(-1, 1, shape)
    return gt.tensor(values, dtype=gt.float64, device=device, requires_grad=True)


def _c2c(device: str) -> tuple:
    # two dims, odd and even sizes, a zero-padded n and the ortho scale; forward and inverse
    def fn(x: gt.Tensor) -> gt.Tensor:
        z = gt.view_as_complex(x)
        y = gt.fft.fftn(z, s=(3, 6), norm="ortho")
        return gt.view_as_real(gt.fft.ifft(y, dim=0) * (0.5 + 0.3j))
    return fn, (_leaf(device, 3, 5, 2),)


def _r2c(device: str) -> tuple:
    # one-sided over an odd length and two-sided (fft of a real input)
    def fn(x: gt.Tensor) -> tuple[gt.Tensor, gt.Tensor]:
        return (gt.view_as_real(gt.fft.rfft(x, norm="forward")),
                gt.view_as_real(gt.fft.fft(x, dim=0)))
    return fn, (_leaf(device, 2, 5),)


def _c2r(device: str) -> tuple:
    # even and odd output lengths: the doubled bins differ (no Nyquist bin for odd n)
    def fn(x: gt.Tensor) -> tuple[gt.Tensor, gt.Tensor]:
        z = gt.view_as_complex(x)
        return gt.fft.irfft(z, n=6), gt.fft.irfft(z, n=7, norm="ortho")
    return fn, (_leaf(device, 2, 4, 2),)


SAMPLES: dict[str, Callable[[str], Any]] = {
    "_fft_c2c": lambda device: (*_c2c(device), "grad"),
    "_fft_r2c": lambda device: (*_r2c(device), "grad"),
    "_fft_c2r": lambda device: (*_c2r(device), "grad"),
}

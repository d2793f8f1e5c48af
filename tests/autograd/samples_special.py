"""Derivative samples for test_every_derivative.py (same contract as its SAMPLES): the
torch.special family (gputensor/_ops/special.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import gputensor as gt

SAMPLES: dict[str, Callable[[str], Any]] = {}


def _leaf(device: str, lo: float, hi: float, n: int = 5, seed: int = 0) -> gt.Tensor:
    values = np.random.default_rng(seed).uniform(lo, hi, n)
    return gt.tensor(values, dtype=gt.float64, device=device, requires_grad=True)


def _const(device: str, lo: float, hi: float, n: int = 5, seed: int = 1) -> gt.Tensor:
    values = np.random.default_rng(seed).uniform(lo, hi, n)
    return gt.tensor(values, dtype=gt.float64, device=device)


def _unary(fn: Callable, lo: float, hi: float, check: str = "grad") -> Callable[[str], Any]:
    return lambda device: (fn, (_leaf(device, lo, hi),), check)


# gradgradcheck: each formula is itself differentiable (lgamma -> digamma -> polygamma(1) ...)
SAMPLES.update({
    "lgamma": _unary(gt.lgamma, 0.3, 4.0, "gradgrad"),
    "digamma": _unary(gt.digamma, 0.3, 4.0, "gradgrad"),
    "_polygamma": _unary(lambda x: (gt.polygamma(1, x), gt.polygamma(3, x), x.polygamma(0)),
                         0.5, 4.0, "gradgrad"),
    "_mvlgamma": _unary(lambda x: (gt.mvlgamma(x, 1), gt.mvlgamma(x, 3)), 1.5, 4.0,
                        "gradgrad"),
    "erfc": _unary(gt.erfc, -2.0, 2.0, "gradgrad"),
    "erfinv": _unary(gt.erfinv, -0.9, 0.9, "gradgrad"),
    "i0": _unary(gt.i0, -3.0, 3.0, "gradgrad"),
    "_special_i1": _unary(gt.special.i1, -3.0, 3.0, "gradgrad"),
    "_special_i0e": _unary(gt.special.i0e, 0.2, 3.0, "gradgrad"),
    "_special_i1e": _unary(gt.special.i1e, 0.2, 3.0, "gradgrad"),
    "_special_erfcx": _unary(gt.special.erfcx, -1.5, 3.0, "gradgrad"),
    "_special_ndtr": _unary(gt.special.ndtr, -3.0, 3.0, "gradgrad"),
    "_special_ndtri": _unary(gt.special.ndtri, 0.05, 0.95, "gradgrad"),
    "_special_log_ndtr": _unary(gt.special.log_ndtr, -4.0, 3.0, "gradgrad"),
    "_special_entr": _unary(gt.special.entr, 0.2, 3.0, "gradgrad"),
})


def _xlog1py(device: str) -> tuple:
    return (gt.special.xlog1py, (_leaf(device, -2.0, 2.0), _leaf(device, -0.5, 3.0, seed=1)),
            "gradgrad")


def _igamma(device: str) -> tuple:
    # only the second argument is differentiable (the first raises, as in PyTorch)
    a = _const(device, 0.5, 3.0)
    return (lambda x: (gt.igamma(a, x), gt.special.gammaincc(a, x)),
            (_leaf(device, 0.3, 4.0),), "gradgrad")


def _zeta(device: str) -> tuple:
    s = _const(device, 1.5, 4.0)
    return lambda q: gt.special.zeta(s, q), (_leaf(device, 0.5, 3.0),), "gradgrad"


SAMPLES.update({"_special_xlog1py": _xlog1py, "igamma": _igamma, "igammac": _igamma,
                "_special_zeta": _zeta})

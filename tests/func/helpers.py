"""Shared helpers for the gt.func tests: the same data in gputensor and in PyTorch."""

from __future__ import annotations

import numpy as np
import torch

import gputensor as gt


def pair(shape: tuple, device: str, dtype: str = "float64", seed: int = 0) -> tuple:
    """A random array as (gputensor tensor on ``device``, torch tensor)."""
    arr = np.random.default_rng(seed + len(shape) * 7 + sum(shape)).standard_normal(shape)
    arr = arr.astype(dtype)
    return gt.tensor(arr, device=device), torch.tensor(arr)


def close(actual, expected, atol: float = 1e-6) -> None:
    """Trees of results equal (gputensor vs torch), shapes included."""
    if isinstance(expected, dict):
        assert set(actual) == set(expected)
        for k in expected:
            close(actual[k], expected[k], atol)
        return
    if isinstance(expected, tuple | list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=False):
            close(a, e, atol)
        return
    assert isinstance(actual, gt.Tensor), type(actual)
    assert tuple(actual.shape) == tuple(expected.shape), (actual.shape, expected.shape)
    np.testing.assert_allclose(actual.cpu().numpy(), expected.detach().numpy(), atol=atol,
                               rtol=1e-5)

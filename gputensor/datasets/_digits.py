"""The 8x8 handwritten digits that scikit-learn ships (1,797 images, pixel counts 0..16).

Credit: this is scikit-learn's copy of the test set of the UCI ML "Optical Recognition of
Handwritten Digits" dataset by E. Alpaydin and C. Kaynak (Bogazici University, 1998),
https://archive.ics.uci.edu/ml/datasets/Optical+Recognition+of+Handwritten+Digits. The UCI
dataset is licensed under CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/); the copy
comes from scikit-learn (BSD-3-Clause, (c) the scikit-learn developers). ``digits.npz`` holds
the same values, converted from ``sklearn/datasets/data/digits.csv.gz`` by
``_convert_digits.py``; nothing else was changed.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

import gputensor as gt
from gputensor.datasets._convert_digits import NPZ_PATH
from gputensor.utils.data import TensorDataset

N_DIGITS = 1797
_SPLITS = ("all", "train", "test")
_GOLDEN = 0x9E3779B97F4A7C15
_U64 = 1 << 64


class Digits(NamedTuple):
    """``images``: float32 (N, 1, 8, 8) in [0, 1]; ``targets``: int64 (N,) labels 0..9."""

    images: Any
    targets: Any


@lru_cache(maxsize=1)
def _raw() -> tuple[np.ndarray, np.ndarray]:
    with np.load(NPZ_PATH) as f:
        images, targets = f["images"], f["targets"]
    if images.shape != (N_DIGITS, 8, 8) or targets.shape != (N_DIGITS,):
        raise RuntimeError(f"{NPZ_PATH} is damaged: images {images.shape}, targets "
                           f"{targets.shape}; expected ({N_DIGITS}, 8, 8) and ({N_DIGITS},)")
    images.flags.writeable = False  # cached and shared: callers get converted copies
    targets.flags.writeable = False
    return images, targets


def _split_order(n: int, seed: int) -> np.ndarray:
    """A seeded shuffle of ``range(n)`` that no library version can change.

    Each index is ranked by the splitmix64 hash of ``index + (seed + 1) * golden``, written out
    here in wrapping uint64 arithmetic rather than borrowed from an RNG whose stream may
    change between NumPy releases.
    """
    # Python ints for the scalar part (NumPy warns on scalar overflow); arrays wrap silently.
    z = np.arange(n, dtype=np.uint64) + np.uint64((seed + 1) * _GOLDEN % _U64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.argsort(z, kind="stable")


def split_indices(split: str, test_fraction: float = 0.2, seed: int = 0,
                  n: int = N_DIGITS) -> np.ndarray:
    """Indices of ``split`` ("all", "train" or "test"), ascending (see ``digits``)."""
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    if split == "all":
        return np.arange(n)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    n_test = int(np.ceil(test_fraction * n))
    if not 0 < n_test < n:
        raise ValueError(f"test_fraction={test_fraction} leaves an empty split of {n} samples")
    order = _split_order(n, int(seed))
    chosen = order[:n_test] if split == "test" else order[n_test:]
    return np.sort(chosen)


def digits(split: str = "all", *, test_fraction: float = 0.2, seed: int = 0,
           as_tensor: bool = True) -> Digits:
    """The 8x8 handwritten digits: ``Digits(images, targets)``.

    ``images`` is float32 of shape (N, 1, 8, 8), the 0..16 pixel counts divided by 16, so in
    [0, 1]. ``targets`` is int64 of shape (N,), labels 0..9. ``as_tensor=False`` returns NumPy
    arrays instead of gputensor tensors.

    Split convention: ``split="all"`` gives all 1,797 images in their original order. For
    "train" and "test", the test split holds ``ceil(test_fraction * 1797)`` samples (360 at
    the default 0.2) and the train split the rest. Which samples go where depends only on
    ``seed``, through a fixed hash that does not change between versions, so the two splits
    never overlap and together cover the dataset. Each split keeps the original order;
    shuffle with the DataLoader.
    """
    images, targets = _raw()
    idx = split_indices(split, test_fraction, seed)
    x = (images[idx].astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    y = targets[idx].astype(np.int64)
    if not as_tensor:
        return Digits(x, y)
    return Digits(gt.from_numpy(x), gt.from_numpy(y))


def digits_dataset(split: str = "all", *, test_fraction: float = 0.2,
                   seed: int = 0) -> TensorDataset:
    """``digits(...)`` as a ``TensorDataset`` of (image, target) pairs."""
    d = digits(split, test_fraction=test_fraction, seed=seed)
    return TensorDataset(d.images, d.targets)


__all__ = ["Digits", "N_DIGITS", "digits", "digits_dataset", "split_indices"]

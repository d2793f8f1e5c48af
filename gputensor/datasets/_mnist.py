"""MNIST from its IDX files in a folder you give (nothing is downloaded).

IDX layout (big-endian): two zero bytes, a data-type code, the number of dimensions, one
uint32 per dimension, then the values in C order. ``read_idx`` validates every part of that
and names the file in each error. Fashion-MNIST uses the same file names and format.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import gputensor as gt
from gputensor.utils.data import TensorDataset

# IDX data-type codes -> big-endian NumPy dtypes.
IDX_DTYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"IDX file not found: {path}")
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path}: corrupt or truncated gzip data ({err})") from None


def parse_idx(raw: bytes, name: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of an IDX file into a native-endian array (``name`` is for errors)."""
    if len(raw) < 4:
        raise ValueError(f"{name}: truncated IDX file: {len(raw)} bytes, shorter than the "
                         f"4-byte magic number")
    if raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{name}: not an IDX file: bad magic number 0x{raw[:4].hex()} (an "
                         f"IDX file starts with two zero bytes)")
    code, ndim = raw[2], raw[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02x}" for c in IDX_DTYPES)
        raise ValueError(f"{name}: unknown IDX data-type code 0x{code:02x} (known: {known})")
    if ndim == 0:
        raise ValueError(f"{name}: IDX header declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{name}: truncated IDX header: {ndim} dimensions need {header} "
                         f"bytes, the file has {len(raw)}")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    count = 1
    for d in shape:
        count *= d
    want, have = count * dtype.itemsize, len(raw) - header
    if have < want:
        raise ValueError(f"{name}: truncated IDX file: the header declares shape {shape} of "
                         f"{dtype.newbyteorder('=')} ({want} bytes of data) but only {have} "
                         f"bytes follow")
    if have > want:
        raise ValueError(f"{name}: {have - want} unexpected bytes after the {want} bytes of "
                         f"data the header declares (shape {shape})")
    values = np.frombuffer(raw, dtype=dtype, count=count, offset=header)
    return values.astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (``.gz`` compressed or not) into a NumPy array."""
    path = Path(path)
    return parse_idx(_read_bytes(path), str(path))


class MNIST(NamedTuple):
    """``images``: float32 (N, 1, 28, 28) in [0, 1]; ``targets``: int64 (N,) labels 0..9."""

    images: Any
    targets: Any


def _find(root: Path, prefix: str, kind: str) -> Path:
    """The IDX file for (prefix, kind) under root or root/MNIST/raw (torchvision's layout)."""
    stems = [f"{prefix}-{kind}", f"{prefix}-{kind.replace('-idx', '.idx')}"]
    tried = []
    for folder in (root, root / "MNIST" / "raw"):
        for stem in stems:
            for name in (stem, stem + ".gz"):
                candidate = folder / name
                tried.append(str(candidate))
                if candidate.is_file():
                    return candidate
    raise FileNotFoundError(f"MNIST file {prefix}-{kind} not found under {root}; tried: "
                            f"{', '.join(tried)}")


def mnist(root: str | Path, train: bool = True, *, as_tensor: bool = True) -> MNIST:
    """MNIST (or Fashion-MNIST) from the IDX files in ``root``: ``MNIST(images, targets)``.

    Reads ``train-images-idx3-ubyte`` / ``train-labels-idx1-ubyte`` (``train=True``) or the
    ``t10k-...`` pair, each optionally ``.gz``, from ``root`` or ``root/MNIST/raw``. Images
    come back as float32 (N, 1, 28, 28) scaled by 1/255, targets as int64. ``as_tensor=False``
    returns NumPy arrays.
    """
    root = Path(root)
    prefix = "train" if train else "t10k"
    img_path = _find(root, prefix, "images-idx3-ubyte")
    lbl_path = _find(root, prefix, "labels-idx1-ubyte")
    images, labels = read_idx(img_path), read_idx(lbl_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{img_path}: expected uint8 images of shape (N, rows, cols), got "
                         f"{images.dtype} {images.shape}")
    if labels.ndim != 1 or labels.dtype != np.uint8:
        raise ValueError(f"{lbl_path}: expected uint8 labels of shape (N,), got {labels.dtype} "
                         f"{labels.shape}")
    if len(images) != len(labels):
        raise ValueError(f"{img_path} holds {len(images)} images but {lbl_path} holds "
                         f"{len(labels)} labels")
    if labels.size and labels.max() > 9:
        raise ValueError(f"{lbl_path}: labels must lie in 0..9, found {int(labels.max())}")
    x = (images.astype(np.float32) / np.float32(255.0))[:, None]
    y = labels.astype(np.int64)
    if not as_tensor:
        return MNIST(x, y)
    return MNIST(gt.from_numpy(x), gt.from_numpy(y))


def mnist_dataset(root: str | Path, train: bool = True) -> TensorDataset:
    """``mnist(root, train)`` as a ``TensorDataset`` of (image, target) pairs."""
    m = mnist(root, train)
    return TensorDataset(m.images, m.targets)


__all__ = ["IDX_DTYPES", "MNIST", "mnist", "mnist_dataset", "parse_idx", "read_idx"]

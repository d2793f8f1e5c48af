"""gputensor.datasets: the packaged digits, their split convention, and the MNIST IDX reader."""

from __future__ import annotations

import gzip
import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import gputensor as gt
from gputensor.datasets import (
    digits,
    digits_dataset,
    mnist,
    mnist_dataset,
    parse_idx,
    read_idx,
    split_indices,
)
from gputensor.datasets._convert_digits import CSV_MEMBER, NPZ_PATH, digits_from_wheel
from gputensor.utils.data import DataLoader, TensorDataset

# Checksums of the packaged data, computed once from scikit-learn's digits.csv.gz.
IMAGES_SHA256 = "8f26b2bd9d135c256808f68f14fdabddde6d9c7f869ae419704b051f0f14b3b3"
TARGETS_SHA256 = "8ba4f891220f5e4c9c819638d1602d74b83618f167043c6da52a2a247841ddf0"
CLASS_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
FIRST_IMAGE = [[0, 0, 5, 13, 9, 1, 0, 0], [0, 0, 13, 15, 10, 15, 5, 0],
               [0, 3, 15, 2, 0, 11, 8, 0], [0, 4, 12, 0, 0, 8, 8, 0],
               [0, 5, 8, 0, 0, 9, 8, 0], [0, 4, 11, 0, 1, 12, 7, 0],
               [0, 2, 14, 5, 10, 12, 0, 0], [0, 0, 6, 13, 10, 0, 0, 0]]
PINNED_TEST_HEAD = [3, 10, 18, 21, 33, 41, 48, 49]  # split_indices("test") at seed 0


# -- digits -----------------------------------------------------------------------------------
def test_packaged_file_is_small_and_typed():
    assert NPZ_PATH.stat().st_size < 100_000
    with np.load(NPZ_PATH) as f:
        assert sorted(f.files) == ["images", "targets"]
        assert f["images"].dtype == np.uint8 and f["images"].shape == (1797, 8, 8)
        assert f["targets"].dtype == np.uint8 and f["targets"].shape == (1797,)
        assert hashlib.sha256(f["images"].tobytes()).hexdigest() == IMAGES_SHA256
        assert hashlib.sha256(f["targets"].tobytes()).hexdigest() == TARGETS_SHA256


def test_digits_shapes_values_checksums():
    d = digits()
    assert isinstance(d.images, gt.Tensor) and isinstance(d.targets, gt.Tensor)
    assert tuple(d.images.shape) == (1797, 1, 8, 8) and d.images.dtype is gt.float32
    assert tuple(d.targets.shape) == (1797,) and d.targets.dtype is gt.int64
    x = d.images.numpy()
    assert x.min() == 0.0 and x.max() == 1.0
    counts = x * 16
    np.testing.assert_array_equal(counts, np.round(counts))  # exactly k/16
    raw = counts.astype(np.uint8).reshape(1797, 8, 8)
    assert hashlib.sha256(raw.tobytes()).hexdigest() == IMAGES_SHA256
    assert raw[0].tolist() == FIRST_IMAGE
    assert np.bincount(d.targets.numpy()).tolist() == CLASS_COUNTS
    assert d.targets[:10].tolist() == list(range(10))
    d.images.fill_(0.0)  # each call returns fresh tensors: the cache is not shared
    assert digits().images.sum().item() == pytest.approx(561718 / 16)


def test_digits_split_convention():
    train, test = digits("train"), digits("test")
    assert len(train.targets) == 1437 and len(test.targets) == 360  # ceil(0.2 * 1797) = 360
    tr, te = split_indices("train"), split_indices("test")
    assert not set(tr) & set(te) and sorted(np.concatenate([tr, te])) == list(range(1797))
    assert (np.diff(tr) > 0).all() and (np.diff(te) > 0).all()  # original order kept
    everything = digits()
    np.testing.assert_array_equal(train.images.numpy(), everything.images.numpy()[tr])
    np.testing.assert_array_equal(test.targets.numpy(), everything.targets.numpy()[te])
    # Pinned: the split must never change between versions.
    assert te[:8].tolist() == PINNED_TEST_HEAD
    np.testing.assert_array_equal(split_indices("test"), te)
    other = split_indices("test", seed=1)
    assert not np.array_equal(other, te) and len(other) == 360
    assert len(digits("test", test_fraction=0.5).targets) == 899
    assert len(split_indices("all")) == 1797


def test_digits_numpy_and_dataset_forms():
    arrays = digits("test", as_tensor=False)
    assert isinstance(arrays.images, np.ndarray) and arrays.images.dtype == np.float32
    assert arrays.targets.dtype == np.int64 and arrays.images.shape == (360, 1, 8, 8)
    ds = digits_dataset("train")
    assert isinstance(ds, TensorDataset) and len(ds) == 1437
    x, y = next(iter(DataLoader(ds, batch_size=64, shuffle=True)))
    assert tuple(x.shape) == (64, 1, 8, 8) and tuple(y.shape) == (64,)


@pytest.mark.parametrize("kwargs,msg", [({"split": "val"}, "split must be one of"),
                                        ({"split": "test", "test_fraction": 0.0}, "between"),
                                        ({"split": "train", "test_fraction": 1.0}, "between"),
                                        ({"split": "test", "seed": -1}, "seed"),
                                        ({"split": "test", "test_fraction": 0.9999999}, "empty")])
def test_digits_bad_arguments(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        digits(**kwargs)


def _fake_wheel(path: Path, rows: np.ndarray) -> Path:
    csv = "\n".join(",".join(str(int(v)) for v in row) for row in rows).encode()
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(CSV_MEMBER, gzip.compress(csv))
    return path


def test_convert_from_wheel(tmp_path):
    rows = np.zeros((3, 65), dtype=np.int64)
    rows[:, :64] = np.arange(64) % 17
    rows[:, 64] = [4, 0, 9]
    images, targets = digits_from_wheel(_fake_wheel(tmp_path / "fake.whl", rows))
    assert images.dtype == np.uint8 and images.shape == (3, 8, 8)
    assert images[1].ravel().tolist() == (np.arange(64) % 17).tolist()
    assert targets.tolist() == [4, 0, 9]
    rows[0, 3] = 17
    with pytest.raises(ValueError, match="0..16"):
        digits_from_wheel(_fake_wheel(tmp_path / "bad.whl", rows))
    with zipfile.ZipFile(tmp_path / "empty.whl", "w") as zf:
        zf.writestr("other.txt", "x")
    with pytest.raises(FileNotFoundError, match="digits.csv.gz"):
        digits_from_wheel(tmp_path / "empty.whl")


# -- IDX / MNIST ------------------------------------------------------------------------------
IDX_CODES = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D,
             np.float64: 0x0E}


def idx_bytes(arr: np.ndarray) -> bytes:
    """An IDX file's bytes: magic (0, 0, type code, ndim), big-endian dims, big-endian data."""
    code = IDX_CODES[arr.dtype.type]
    header = bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    return header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx(path: Path, arr: np.ndarray, compress: bool = False) -> Path:
    data = idx_bytes(arr)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("dtype", list(IDX_CODES))
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, dtype, compress):
    arr = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    if dtype is np.uint8:
        arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 10
    path = write_idx(tmp_path / ("a.idx.gz" if compress else "a.idx"), arr, compress)
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)
    out[0, 0, 0] = 1  # a writable copy, not a view of the file buffer


def test_read_idx_errors_name_the_file(tmp_path):
    good = idx_bytes(np.arange(6, dtype=np.uint8).reshape(2, 3))
    cases = {
        "magic.idx": (b"\x01\x00" + good[2:], "bad magic number 0x01000802"),
        "code.idx": (good[:2] + b"\x07" + good[3:], "unknown IDX data-type code 0x07"),
        "short.idx": (good[:2], "shorter than the 4-byte magic"),
        "header.idx": (good[:7], "truncated IDX header"),
        "data.idx": (good[:-1], r"truncated IDX file: .*\(2, 3\).* only 5 bytes"),
        "extra.idx": (good + b"\x00", "1 unexpected bytes"),
        "zero.idx": (b"\x00\x00\x08\x00", "0 dimensions"),
    }
    for name, (raw, msg) in cases.items():
        path = tmp_path / name
        path.write_bytes(raw)
        with pytest.raises(ValueError, match=msg) as info:
            read_idx(path)
        assert str(path) in str(info.value)
    with pytest.raises(FileNotFoundError, match="nope.idx"):
        read_idx(tmp_path / "nope.idx")
    (tmp_path / "broken.gz").write_bytes(gzip.compress(good)[:-6])
    with pytest.raises(ValueError, match="broken.gz.*gzip"):
        read_idx(tmp_path / "broken.gz")
    assert parse_idx(good).shape == (2, 3)


def _write_mnist(folder: Path, prefix: str, n: int, compress: bool, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if compress else ""
    write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images, compress)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress)
    return images, labels


def test_mnist_reads_train_and_test(tmp_path):
    images, labels = _write_mnist(tmp_path, "train", 5, compress=False, seed=0)
    t_images, t_labels = _write_mnist(tmp_path, "t10k", 3, compress=True, seed=1)
    train = mnist(tmp_path)
    assert tuple(train.images.shape) == (5, 1, 28, 28) and train.images.dtype is gt.float32
    np.testing.assert_allclose(train.images.numpy()[:, 0], images / np.float32(255), rtol=0,
                               atol=0)
    assert train.targets.dtype is gt.int64 and train.targets.tolist() == labels.tolist()
    test = mnist(tmp_path, train=False, as_tensor=False)
    assert test.images.shape == (3, 1, 28, 28) and test.targets.tolist() == t_labels.tolist()
    assert len(mnist_dataset(tmp_path, train=False)) == 3


def test_mnist_torchvision_layout_and_errors(tmp_path):
    _write_mnist(tmp_path / "MNIST" / "raw", "train", 2, compress=True, seed=2)
    assert len(mnist(tmp_path).targets) == 2
    with pytest.raises(FileNotFoundError, match=r"t10k-images-idx3-ubyte not found under") as e:
        mnist(tmp_path, train=False)
    assert str(tmp_path / "t10k-images-idx3-ubyte.gz") in str(e.value)

    bad = tmp_path / "bad"
    images, labels = _write_mnist(bad, "train", 4, compress=False, seed=3)
    write_idx(bad / "train-labels-idx1-ubyte", labels[:3])
    with pytest.raises(ValueError, match="holds 4 images but .* holds 3 labels"):
        mnist(bad)
    write_idx(bad / "train-labels-idx1-ubyte", np.array([1, 2, 3, 12], dtype=np.uint8))
    with pytest.raises(ValueError, match="labels must lie in 0..9, found 12"):
        mnist(bad)
    write_idx(bad / "train-labels-idx1-ubyte", labels.astype(np.int32))
    with pytest.raises(ValueError, match="expected uint8 labels"):
        mnist(bad)
    write_idx(bad / "train-images-idx3-ubyte", images.reshape(4, -1))
    with pytest.raises(ValueError, match="expected uint8 images"):
        mnist(bad)


def test_idx_writer_matches_reference_header():
    # The test's writer itself, checked against the format spec by hand: a 2x3 uint8 matrix.
    raw = idx_bytes(np.zeros((2, 3), dtype=np.uint8))
    assert raw[:12] == b"\x00\x00\x08\x02" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x03"
    assert len(raw) == 12 + 6

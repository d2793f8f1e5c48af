"""Build ``digits.npz`` from the copy of the digits data that ships in scikit-learn's wheel.

The wheel is a zip; ``sklearn/datasets/data/digits.csv.gz`` holds one row per image: 64 pixel
counts (0..16, row-major 8x8) and the label. Run once to (re)create the packaged file::

    python -m gputensor.datasets._convert_digits /path/to/scikit_learn-*.whl
"""

from __future__ import annotations

import gzip
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

CSV_MEMBER = "sklearn/datasets/data/digits.csv.gz"
NPZ_PATH = Path(__file__).with_name("digits.npz")


def digits_from_wheel(wheel: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read (images uint8 (N, 8, 8), targets uint8 (N,)) out of a scikit-learn wheel."""
    with zipfile.ZipFile(wheel) as zf:
        try:
            raw = zf.read(CSV_MEMBER)
        except KeyError:
            raise FileNotFoundError(f"{wheel} has no member {CSV_MEMBER}") from None
    table = np.loadtxt(io.StringIO(gzip.decompress(raw).decode("ascii")), delimiter=",", ndmin=2)
    if table.shape[1] != 65:
        raise ValueError(f"{CSV_MEMBER}: expected 65 columns (64 pixels + label), got "
                         f"{table.shape[1]}")
    if table.min() < 0 or table[:, :64].max() > 16 or table[:, 64].max() > 9:
        raise ValueError(f"{CSV_MEMBER}: pixel values must lie in 0..16 and labels in 0..9")
    images = table[:, :64].astype(np.uint8).reshape(-1, 8, 8)
    targets = table[:, 64].astype(np.uint8)
    return images, targets


def write_npz(path: str | Path, images: np.ndarray, targets: np.ndarray) -> None:
    np.savez_compressed(path, images=images, targets=targets)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        print("usage: python -m gputensor.datasets._convert_digits WHEEL [OUT.npz]",
              file=sys.stderr)
        return 2
    out = Path(args[1]) if len(args) == 2 else NPZ_PATH
    images, targets = digits_from_wheel(args[0])
    write_npz(out, images, targets)
    print(f"wrote {out}: {len(targets)} images, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

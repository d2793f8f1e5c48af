"""Writing files so that no reader ever sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: str | os.PathLike, text: str | bytes) -> Path:
    """Write ``text`` (str or bytes) to ``path`` through a temporary file in the same folder,
    renamed into place: a concurrent reader sees the old file or the whole new one, and a
    failure (a full disk, an interrupt) leaves no partial file behind."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def cache_dir(name: str) -> Path:
    """``<cache root>/<name>``, created: the root is ``$GPUTENSOR_CACHE_DIR``, else
    ``~/.cache/gputensor`` (every compiled-kernel cache of the project lives under it)."""
    root = os.environ.get("GPUTENSOR_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "gputensor"
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path

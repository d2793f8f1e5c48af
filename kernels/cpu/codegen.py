"""Turn generated kernel source into importable, disk-cached Numba modules.

Numba's ``cache=True`` needs a real source file, so generated kernels are written once to
the user cache directory (keyed by a hash of their text) and imported from there. Nothing is
compiled until a kernel is first called.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from gputensor._files import write_atomically


@functools.cache
def vocabulary_hash() -> str:
    """Kernels that call ``scalar_fns`` embed this in their source, so editing scalar_fns.py,
    fast_math.py or fast_math64.py (whose functions it inlines) or scalar_special.py (which it
    re-exports) re-keys Numba's disk cache (Numba does not track that dependency), as does
    the vector width those functions ask for (``vector_width.wide``)."""
    from . import fast_math, fast_math64, scalar_fns, scalar_special, vector_width

    text = b"".join(Path(m.__file__).read_bytes() for m in (scalar_fns, fast_math, fast_math64,
                                                            scalar_special, vector_width))
    text += b"512" if vector_width.wide() else b"256"
    return hashlib.sha1(text).hexdigest()[:16]


def cache_dir() -> Path:
    root = os.environ.get("GPUTENSOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "gputensor")
    path = Path(root) / "numba_kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


_MODULES: dict[str, ModuleType] = {}


def load_module(prefix: str, source: str) -> ModuleType:
    """Import ``source`` as a module from a content-addressed file in the cache directory."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    name = f"_gputensor_gen_{prefix}_{digest}"
    mod = _MODULES.get(name)
    if mod is not None:
        return mod
    path = cache_dir() / f"{name}.py"
    if not path.exists():
        # Write-then-rename so concurrent processes never import a half-written file.
        write_atomically(path, source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    _MODULES[name] = mod
    return mod

"""The CPU backend: importing this package registers every CPU kernel with the registry
(``sparse`` holds the SparseCPU backend's kernels).

Nothing is compiled here; Numba compiles each kernel on first call and caches it on disk.
"""

from . import (  # noqa: F401
    conv,
    elementwise,
    indexing,
    linalg,
    nn,
    optim,
    random,
    reduction,
    shape,
    sparse,
)

__all__ = ["conv", "elementwise", "indexing", "linalg", "nn", "optim", "random", "reduction",
           "shape", "sparse"]

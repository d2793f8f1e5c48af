"""The CPU backend: importing this package registers every CPU kernel with the registry.

Nothing is compiled here; Numba compiles each kernel on first call and caches it on disk.
"""

from . import conv, elementwise, indexing, linalg, nn, optim, random, reduction, shape  # noqa: F401

__all__ = ["conv", "elementwise", "indexing", "linalg", "nn", "optim", "random", "reduction",
           "shape"]

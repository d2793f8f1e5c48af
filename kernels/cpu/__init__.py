"""The CPU backend: importing this package registers every CPU kernel with the registry
(``sparse`` holds the SparseCPU backend's kernels).

Nothing is compiled here; Numba compiles each kernel on first call and caches it on disk.
"""

from . import (  # noqa: F401
    amp,
    conv,
    elementwise,
    fft,
    fused,
    householder,
    lapack,
    linalg,
    mode,
    nn,
    optim,
    random,
    random_gamma,
    reduce,
    rnn,
    scatter,
    shape,
    sort,
    sparse,
)

__all__ = ["amp", "conv", "elementwise", "fft", "fused", "householder", "lapack", "linalg",
           "mode", "nn", "optim", "random", "random_gamma", "reduce", "rnn", "scatter", "shape",
           "sort", "sparse"]

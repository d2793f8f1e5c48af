"""The CUDA backend's kernels: importing this package registers them with the registry.

Nothing compiles at import: each kernel's module is compiled by the active runtime (NVRTC
through CuPy, or g++ through the emulator) on first launch and cached on disk.
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

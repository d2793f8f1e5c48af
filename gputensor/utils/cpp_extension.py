"""``gputensor.utils.cpp_extension``: where PyTorch users look for ``load_inline``.

gputensor's ``load_inline`` compiles CUDA kernels only (no host C++ code, no pybind11 module):
the module it returns has one launchable kernel per ``__global__`` function, called from Python
as ``module.kernel(grid, block, args)``. See :mod:`gputensor.cuda.kernels`.
"""

from gputensor.cuda.kernels import CudaKernel, CudaModule, load_inline

__all__ = ["CudaKernel", "CudaModule", "load_inline"]

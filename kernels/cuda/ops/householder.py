"""CUDA registration of the Householder QR kernels (kernels/cpu/householder.py): cuSOLVER
through CuPy on a GPU, SciPy's LAPACK on the emulator's memory, as kernels/cuda/ops/lapack.py
does for gt.linalg."""

from __future__ import annotations

from gputensor.kernels.cpu.householder import KERNELS

from .lapack import _register_cuda

for _name, _fn in KERNELS.items():
    _register_cuda(_name, _fn)

"""gputensor.backends.cpu (PyTorch's torch.backends.cpu)."""

from __future__ import annotations

from gputensor.kernels.cpu import vector_width


def get_cpu_capability() -> str:
    """The widest vector instruction set the CPU kernels use, in PyTorch's names: "AVX512",
    "AVX2" or "DEFAULT" (``ATEN_CPU_CAPABILITY=avx2`` keeps AVX-512 CPUs at AVX2)."""
    return vector_width.capability()


__all__ = ["get_cpu_capability"]

"""gputensor.backends: switches that choose how a backend computes (PyTorch's torch.backends).

``gt.backends.cuda.matmul.allow_tf32`` and ``gt.set_float32_matmul_precision`` are the two views
of one setting: whether float32 matrix products on CUDA may use TF32 tensor cores.
"""

from __future__ import annotations

from . import cpu, cuda

__all__ = ["cpu", "cuda"]

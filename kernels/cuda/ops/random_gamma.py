"""The CUDA backend's gamma-family samplers and gradients (kernels/cuda/random_gamma.cu).

Same contracts as kernels/cpu/random_gamma.py: parameters arrive as tensors on the device
(broadcast here to the output's shape as contiguous float64), the output is a fresh contiguous
float32/float64 tensor, and samplers draw their per-call key from the generator on the host.
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CUDA

from ...cpu.random_gamma import _below_one, _tiny
from ...sample_keys import draw_key
from ..device import CudaSource, grid_for, launch
from ..dtypes import CTYPES, SHORT
from .random import _as_f64

SRC = CudaSource("random_gamma.cu")
BLOCK = 128
_TYPES = [{"s": SHORT[d], "T": CTYPES[d]} for d in (D.float32, D.float64)]

SRC.instantiate("standard_gamma_{s}", "const double* alpha, {T}* out, long long n, unsigned k0, "
                "unsigned k1, double tiny", "gg_standard_gamma<{T}>(alpha, out, n, k0, k1, tiny)",
                _TYPES)
SRC.instantiate("sample_dirichlet_{s}", "const double* alpha, {T}* out, long long rows, "
                "long long k, unsigned k0, unsigned k1, double tiny, double top",
                "gg_sample_dirichlet<{T}>(alpha, out, rows, k, k0, k1, tiny, top)", _TYPES)
SRC.instantiate("binomial_{s}", "const double* count, const double* prob, {T}* out, "
                "long long n, unsigned k0, unsigned k1",
                "gg_binomial<{T}>(count, prob, out, n, k0, k1)", _TYPES)
SRC.instantiate("standard_gamma_grad_{s}", "const double* alpha, const double* x, {T}* out, "
                "long long n", "gg_standard_gamma_grad<{T}>(alpha, x, out, n)", _TYPES)
SRC.instantiate("dirichlet_grad_{s}", "const double* x, const double* alpha, "
                "const double* total, {T}* out, long long n",
                "gg_dirichlet_grad<{T}>(x, alpha, total, out, n)", _TYPES)


def _launch(name: str, out: Tensor, n: int, args: list) -> None:
    launch(SRC, f"{name}_{SHORT[out._dtype]}", grid_for(n, BLOCK), BLOCK, args)


@CUDA.register("_standard_gamma")
def standard_gamma(out: Tensor, gen: Any, alpha: Tensor) -> None:
    k0, k1 = draw_key(gen)
    n = out.numel()
    _launch("standard_gamma", out, n, [_as_f64(alpha, out._shape), out, n, k0, k1,
                                       _tiny(out._dtype)])


@CUDA.register("_sample_dirichlet")
def sample_dirichlet(out: Tensor, gen: Any, alpha: Tensor) -> None:
    k0, k1 = draw_key(gen)
    k = out._shape[-1] if out._shape else 1
    rows = out.numel() // k
    _launch("sample_dirichlet", out, rows, [_as_f64(alpha, out._shape), out, rows, k, k0, k1,
                                            _tiny(out._dtype), _below_one(out._dtype)])


@CUDA.register("binomial")
def binomial(out: Tensor, gen: Any, count: Tensor, prob: Tensor) -> None:
    k0, k1 = draw_key(gen)
    n = out.numel()
    _launch("binomial", out, n, [_as_f64(count, out._shape), _as_f64(prob, out._shape), out, n,
                                 k0, k1])


@CUDA.register("_standard_gamma_grad")
def standard_gamma_grad(out: Tensor, alpha: Tensor, x: Tensor) -> None:
    n = out.numel()
    _launch("standard_gamma_grad", out, n, [_as_f64(alpha, out._shape), _as_f64(x, out._shape),
                                            out, n])


@CUDA.register("_dirichlet_grad")
def dirichlet_grad(out: Tensor, x: Tensor, alpha: Tensor, total: Tensor) -> None:
    n = out.numel()
    _launch("dirichlet_grad", out, n, [_as_f64(x, out._shape), _as_f64(alpha, out._shape),
                                       _as_f64(total, out._shape), out, n])

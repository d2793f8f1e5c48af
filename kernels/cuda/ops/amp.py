"""CUDA backend of GradScaler's fused ops (kernels/cuda/amp.cu), registered under the CPU
kernels' names (kernels/cpu/amp.py):

- ``_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)``: one launch for
  the whole list (the frontend passes one dtype on one device), the tensors described by a
  pointer table in device memory (kernels/foreach.py);
- ``_amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
  growth_interval)``: one single-thread launch.

The frontend (gputensor/amp/fused_ops.py) has checked devices, dtypes and element counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gputensor._tensor import Tensor
from gputensor.kernels.foreach import write_table
from gputensor.kernels.registry import CUDA

from ..device import MAX_GRID, CudaSource, constant_array, launch, ptr, runtime
from ..dtypes import FLOAT_DTYPES, short_name, variants

SRC = CudaSource("amp.cu")
SRC.instantiate(
    "amp_foreach_unscale_{s}",
    "const long long* table, int count, int width, long long total, float* found_inf, "
    "const float* inv_scale",
    "gtamp::foreach_unscale<{T}, {A}>(table, count, width, total, found_inf, inv_scale)",
    variants(FLOAT_DTYPES))  # {A}: float for 16-bit and float32 grads, double for float64
SRC.instantiate(
    "amp_update_scale",
    "float* scale, int* growth_tracker, const float* found_inf, double growth_factor, "
    "double backoff_factor, long long growth_interval",
    "gtamp::update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, "
    "growth_interval)", [{}])

BLOCK = 256
CHUNK = 4096  # GT_AMP_CHUNK in amp.cu: elements a block handles per step


@CUDA.register("_amp_foreach_non_finite_check_and_unscale_")
def foreach_non_finite_check_and_unscale(grads: Sequence[Tensor], found_inf: Tensor,
                                         inv_scale: Tensor) -> None:
    """Unscale ``grads`` (one float dtype) in place with one launch; found_inf := 1 on inf/NaN."""
    s = short_name(grads[0]._dtype, "_amp_foreach_non_finite_check_and_unscale_",
                   FLOAT_DTYPES)
    rt = runtime()
    table, count, width, total = write_table(
        grads, lambda ts: rt.kernel_addresses([ptr(t) for t in ts]))
    if not total:
        return
    grid = max(1, min(MAX_GRID, -(-total // CHUNK)))
    launch(SRC, f"amp_foreach_unscale_{s}", grid, BLOCK,
           [constant_array(table.reshape(-1).tolist()), np.int32(count), np.int32(width),
            np.int64(total), found_inf, inv_scale])


@CUDA.register("_amp_update_scale_")
def update_scale(scale: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                 growth_factor: float, backoff_factor: float, growth_interval: int) -> None:
    launch(SRC, "amp_update_scale", 1, 1,
           [scale, growth_tracker, found_inf, np.float64(growth_factor),
            np.float64(backoff_factor), np.int64(growth_interval)])

"""CUDA launcher of torch.mode's row kernel (kernels/cuda/mode.cu): one thread per row replays
libstdc++'s std::sort on (value, index) pairs, so the index among ties is PyTorch's CPU one."""

from __future__ import annotations

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.registry import CUDA

from ..device import CudaSource, grid_for, launch
from ..dtypes import REAL_DTYPES, short_name, variants

SRC = CudaSource("mode.cu")
BLOCK = 64
# the scratch keys' dtype: the accumulator type the values compare in
_KEY_DTYPE = {D.float16: D.float32, D.bfloat16: D.float32, D.float32: D.float32,
              D.float64: D.float64}

SRC.instantiate("mode_rows_{s}", "const {T}* x, long long rows, long long n, {A}* keys, "
                "long long* order, {T}* values, long long* indices",
                "gt_mode_rows<{T}, {A}>(x, rows, n, keys, order, values, indices)",
                variants(REAL_DTYPES))


@CUDA.register("mode")
def mode(values: Tensor, indices: Tensor, rows: Tensor) -> None:
    """values/indices: contiguous (R,); rows: contiguous (R, n) with n >= 1."""
    r, n = rows._shape
    s = short_name(rows.dtype, "mode", REAL_DTYPES)
    keys = empty((r, n), _KEY_DTYPE.get(rows.dtype, D.int64), rows.device)
    order = empty((r, n), D.int64, rows.device)
    launch(SRC, f"mode_rows_{s}", grid_for(r, BLOCK), BLOCK,
           [rows, r, n, keys, order, values, indices])

"""LinearCrossEntropyOptions (torch.nn's, new in PyTorch 2.13): how the chunked path of
``linear_cross_entropy`` splits the batch and which dtype it accumulates in."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import gputensor as gt

__all__ = ["LinearCrossEntropyOptions"]


class _AutoDefault(NamedTuple):
    acc_policy: str
    chunking_method: str


# PyTorch's picks for the "auto" sentinels per (device type, input dtype); anything else
# takes the fallback.
_AUTO_DEFAULTS: dict[tuple[str, Any], _AutoDefault] = {
    ("cuda", gt.bfloat16): _AutoDefault("compact", "aspect_ratio:2"),
    ("cuda", gt.float16): _AutoDefault("compact", "aspect_ratio:2"),
    ("cpu", gt.bfloat16): _AutoDefault("accurate", "aspect_ratio"),
    ("cpu", gt.float16): _AutoDefault("accurate", "aspect_ratio"),
}
_AUTO_FALLBACK = _AutoDefault("compact", "aspect_ratio:2")
_POLICIES = ("auto", "accurate", "balanced", "compact")
_ACC_DTYPES = (gt.float16, gt.bfloat16, gt.float32, gt.float64)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _auto_acc_dtype(dtype: Any, device: Any) -> Any:
    """float32 for float16/bfloat16 input where mixed-precision products exist (CUDA from
    compute capability 7.0 for float16 and 8.0 for bfloat16, and the CPU), else None."""
    if device is None or dtype not in (gt.float16, gt.bfloat16):
        return None
    if device.type == "cuda":
        if not gt.cuda.is_available():
            return None
        major, _ = gt.cuda.get_device_capability(device)
        if major < (8 if dtype == gt.bfloat16 else 7):
            return None
        return gt.float32
    return gt.float32 if device.type == "cpu" else None


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """Opts ``linear_cross_entropy`` into its chunked path, which runs the batch in row
    chunks so the full (N, num_classes) logits never exist at once.

    ``batch_chunk_size`` rows per chunk (None: one chunk), or ``chunking_method``
    ``"aspect_ratio[:k]"`` (chunk logits about as large as the input, divided by k) or
    ``"auto"``; ``acc_dtype`` the dtype the logits, softmax and gradient sums are computed in
    (None: float32 for half-precision input under ``acc_policy="auto"``, else the input's);
    ``acc_policy`` how widely it is used: ``"accurate"`` also runs the input-gradient product
    and every cross-chunk sum in ``acc_dtype``, ``"balanced"`` and ``"compact"`` run the
    input-gradient product in the input dtype and add each chunk's weight gradient into an
    input-dtype sum (PyTorch's "compact" differs from "balanced" only in a CUDA scratch
    buffer, which gputensor's composite does not allocate in either case).
    ``allow_retain_graph``: for the 'mean'/'sum' reductions the gradients are computed
    during the forward pass and consumed by the backward; a second backward then raises
    unless this is True.
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None

    def __post_init__(self) -> None:
        if self.acc_policy not in _POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        size = self.batch_chunk_size
        if not (size is None or (isinstance(size, int) and size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in _ACC_DTYPES:
            raise ValueError(f"acc_dtype must be one of {{None, gputensor.float16, "
                             f"gputensor.bfloat16, gputensor.float32, gputensor.float64}}, "
                             f"got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                             f"automatically.")

    def _compute_batch_chunk_size(self, num_batches: int, in_features: int, num_classes: int,
                                  method: str | None = None) -> int:
        """Rows per chunk for an ``aspect_ratio[:k]`` method: the power of two at or above
        ``ceil(N / ceil(V / F))``, divided by k, at most N."""
        method = str(method if method is not None else self.chunking_method)
        if not method.startswith("aspect_ratio"):
            raise AssertionError(f"unhandled chunking_method: {method!r}")
        factor = int(method.split(":", 1)[1]) if ":" in method else 1
        target = _ceil_div(num_batches, _ceil_div(num_classes, in_features))
        return min((1 << (target - 1).bit_length()) // factor, num_batches)

    def _adjust(self, num_batches: int, in_features: int, num_classes: int, dtype: Any,
                device: Any = None) -> LinearCrossEntropyOptions:
        """These options with every "auto"/None resolved for one call."""
        acc_policy, chunking_method = self.acc_policy, self.chunking_method
        if chunking_method == "auto" and self.batch_chunk_size is not None:
            chunking_method = None  # an explicit size wins over the automatic method
        if acc_policy == "auto" or chunking_method == "auto":
            picks = (_AUTO_DEFAULTS.get((device.type, dtype), _AUTO_FALLBACK)
                     if device is not None else _AUTO_FALLBACK)
            acc_policy = picks.acc_policy if acc_policy == "auto" else acc_policy
            if chunking_method == "auto":
                chunking_method = picks.chunking_method
        size = num_batches if self.batch_chunk_size is None else min(self.batch_chunk_size,
                                                                     num_batches)
        if chunking_method is not None:
            size = self._compute_batch_chunk_size(num_batches, in_features, num_classes,
                                                  chunking_method)
            if self.batch_chunk_size is not None and self.batch_chunk_size != size:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and "
                                 f"chunking_method ('{chunking_method}') give different chunk "
                                 f"sizes ({self.batch_chunk_size} vs {size}); pass only one.")
        acc_dtype = self.acc_dtype
        if acc_dtype is None:
            auto = _auto_acc_dtype(dtype, device) if self.acc_policy == "auto" else None
            acc_dtype = auto if auto is not None else dtype
        return dataclasses.replace(self, acc_policy=acc_policy, chunking_method=chunking_method,
                                   batch_chunk_size=max(1, size), acc_dtype=acc_dtype)

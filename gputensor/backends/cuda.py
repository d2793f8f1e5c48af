"""``gt.backends.cuda``: the CUDA matmul switches, with PyTorch's names and defaults.

One setting backs both APIs, as in PyTorch: the float32 matmul precision. ``"highest"`` (the
default) computes float32 products in full float32; ``"high"`` and ``"medium"`` let cuBLAS
use TF32 tensor cores (10-bit mantissa inputs, float32 accumulation), and
``matmul.allow_tf32`` is True exactly then. The CPU backend always computes in full float32
(PyTorch documents the precision as a permission, which a backend may not use).
"""

from __future__ import annotations

PRECISIONS = ("highest", "high", "medium")


class _MatmulSwitches:
    """``gt.backends.cuda.matmul``."""

    def __init__(self) -> None:
        self._precision = "highest"

    @property
    def allow_tf32(self) -> bool:
        """Whether float32 matrix products on CUDA may use TF32 tensor cores."""
        return self._precision != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        self._precision = "high" if bool(value) else "highest"

    def __setattr__(self, name: str, value: object) -> None:
        if name not in ("_precision", "allow_tf32"):
            raise AttributeError(f"Unknown attribute {name}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"<gt.backends.cuda.matmul allow_tf32={self.allow_tf32}>"


matmul = _MatmulSwitches()


def set_float32_matmul_precision(precision: str) -> None:
    """``"highest"``, ``"high"`` or ``"medium"`` (see the module docstring)."""
    if precision not in PRECISIONS:
        raise RuntimeError(f"Invalid float32 matmul precision: {precision!r} (expected one of "
                           f"{', '.join(repr(p) for p in PRECISIONS)})")
    matmul._precision = precision


def get_float32_matmul_precision() -> str:
    return matmul._precision


def is_built() -> bool:
    """Whether this build of gputensor has a CUDA backend (always: CuPy or the emulator serve
    it at run time; ``gt.cuda.is_available()`` says whether one does now)."""
    return True


__all__ = ["get_float32_matmul_precision", "is_built", "matmul", "set_float32_matmul_precision"]

"""Dropout functions: dropout and the channel-wise dropout1d/2d/3d (torch.nn.functional's).

The keep-mask is drawn with ``bernoulli_(1 - p)`` from gputensor's default generator, so
``gt.manual_seed`` makes it reproducible. The output is ``input * mask / (1 - p)`` in one op
(``_masked_scale``) that saves the mask for its backward, ``g * mask / (1 - p)``. Channel-wise
dropout draws one mask entry per (sample, channel) and broadcasts it over the spatial dims.
"""

from __future__ import annotations

import math
import warnings

import gputensor as gt
from gputensor._ops import nn as nn_ops
from gputensor._tensor import Tensor

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout"]


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _masked(input: Tensor, mask_shape: tuple[int, ...], p: float, inplace: bool) -> Tensor:
    keep = 1.0 - p
    mask = gt.empty(mask_shape, dtype=input.dtype, device=input.device).bernoulli_(keep)
    scale = 0.0 if keep == 0 else 1.0 / keep   # p == 1 drops everything
    if inplace:
        return input.mul_(mask.mul_(scale))
    return nn_ops._masked_scale(input, mask, scale)


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``;
    the input itself when not training (or p == 0)."""
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    return _masked(input, tuple(input.shape), p, inplace)


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool) -> Tensor:
    """Zero whole channels: one draw per (N, C), broadcast over dims 2 and up."""
    if input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not training or p == 0 or input.numel() == 0:
        return input
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return _masked(input, shape, p, inplace)


def _unbatched(input: Tensor, p: float, training: bool, inplace: bool) -> Tensor:
    # An input without a batch dim is one sample; in place, the view writes through.
    out = _feature_dropout(input.unsqueeze(0), p, training, inplace)
    return input if inplace else out.squeeze(0)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel-wise dropout of (N, C, L) or unbatched (C, L) inputs."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D "
                           f"input. Note that dropout1d exists to provide channel-wise dropout "
                           f"on inputs with 1 spatial dimension, a channel dimension, and an "
                           f"optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 2:
        return _unbatched(input, p, training, inplace)
    return _feature_dropout(input, p, training, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel-wise dropout of (N, C, H, W) inputs (a 3-D input is taken as (N, C, L), with
    PyTorch's warning)."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated "
                      f"and will result in an error in a future release. To retain the behavior "
                      f"and silence this warning, please use dropout instead. Note that "
                      f"dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 3D or 4D inputs).", stacklevel=2)
    if ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape "
                      "(C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel-wise dropout of (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {ndim}-D input to dropout3d, which is deprecated "
                      f"and will result in an error in a future release. To retain the behavior "
                      f"and silence this warning, please use dropout instead. Note that "
                      f"dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 4D or 5D inputs).", stacklevel=2)
    if ndim == 4:
        return _unbatched(input, p, training, inplace)
    return _feature_dropout(input, p, training, inplace)


_SELU_ALPHA = 1.7580993408473766  # -scale * alpha of SELU: where SELU saturates


def _alpha(input: Tensor, p: float, training: bool, inplace: bool, feature: bool) -> Tensor:
    """Dropout that keeps SELU's self-normalisation: dropped values go to SELU's negative
    saturation, and an affine transform restores the mean and variance (PyTorch's formula)."""
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else input * 0.0
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
    keep = gt.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1.0 - p)
    a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
    b = (keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    if inplace:
        return input.mul_(keep * a).add_(b)
    return input * (keep * a) + b


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Alpha dropout (for SELU networks) of each element; off unless ``training``."""
    return _alpha(input, p, training, inplace, feature=False)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (one draw per (N, C)); off unless ``training``."""
    return _alpha(input, p, training, inplace, feature=True)


"""Padding and pixel shuffles (torch.nn.functional's pad, pixel_shuffle, pixel_unshuffle):
pad is the ``gt.pad`` op; the shuffles are a reshape, a permute and a reshape."""

from __future__ import annotations

import gputensor as gt
from gputensor._tensor import Tensor

__all__ = ["pad", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "local_response_norm"]

pad = gt.pad


def _check_factor(input: Tensor, factor: int, name: str, what: str) -> None:
    if input.dim() < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {input.dim()} dimension(s)")
    if not isinstance(factor, int) or factor <= 0:
        raise RuntimeError(f"{name} expects {what} to be greater than 0, but got: {factor}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = upscale_factor
    _check_factor(input, r, "pixel_shuffle", "upscale_factor")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) -> (*, C r^2, H, W): pixel_shuffle's inverse."""
    r = downscale_factor
    _check_factor(input, r, "pixel_unshuffle", "downscale_factor")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects {'height' if h % r else 'width'} to be "
                           f"divisible by downscale_factor, but input.size("
                           f"{-2 if h % r else -1})={h if h % r else w} is not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, C, *) with its C channels regrouped: (g, C/g) -> (C/g, g) (ShuffleNet's shuffle)."""
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {list(input.shape)}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(input.shape)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Divide each value by (k + alpha * mean of the squares over ``size`` neighbouring
    channels)^beta, the window centred as PyTorch's (size // 2 before, (size - 1) // 2
    after, zero-padded)."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = (input * input).movedim(1, -1)
    sq = gt.nn.functional.pad(sq, (size // 2, (size - 1) // 2))
    window = sq.narrow(-1, 0, c)
    for j in range(1, size):
        window = window + sq.narrow(-1, j, c)
    div = (window / size).movedim(-1, 1)
    return input / (div * alpha + k).pow(beta)


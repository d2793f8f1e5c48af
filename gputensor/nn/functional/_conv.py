"""Convolutions: conv1d, conv2d, conv_transpose1d and conv_transpose2d.

All four are declared in gputensor/_ops/conv.py (they are also gt.conv2d, ...).
"""

from __future__ import annotations

from gputensor._ops.conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]

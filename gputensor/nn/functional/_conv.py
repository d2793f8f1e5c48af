"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d.

All six are declared in gputensor/_ops/conv.py and volumetric.py (they are also gt.conv2d, ...).
"""

from __future__ import annotations

from gputensor._ops.conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from gputensor._ops.volumetric import conv3d, conv_transpose3d

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]

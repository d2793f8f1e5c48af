"""Spatial transformer sampling: affine_grid and grid_sample (being written)."""

from __future__ import annotations

__all__: list[str] = []

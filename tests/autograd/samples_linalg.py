"""Derivative samples for test_every_derivative.py (same contract as its SAMPLES)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SAMPLES: dict[str, Callable[[str], Any]] = {}

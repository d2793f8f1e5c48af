"""Cumulative extrema and log-sum-exp scans: cummax, cummin, logcumsumexp (being written)."""

from __future__ import annotations

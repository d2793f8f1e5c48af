"""Placeholder: filled in by this slice."""

__all__: list[str] = []

"""Placeholder: kernels land here (issue 17)."""

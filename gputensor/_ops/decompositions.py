"""Placeholder: declarations land here (issue 17)."""

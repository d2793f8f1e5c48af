"""Helpers shared by the DataPipes."""

"""Tests for the CUDA backend and its CPU emulator."""

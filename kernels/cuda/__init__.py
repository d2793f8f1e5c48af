"""CUDA kernels for gputensor.

The ``.cu`` sources here target NVIDIA GPUs; every one of them also runs on the CPU through
``gputensor.kernels.cuda.emulator`` (the same source compiled with g++ against a small shim),
so the CUDA backend is testable on machines without a GPU.
"""

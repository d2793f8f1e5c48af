"""``gputensor bench``: sweep catalogued kernels over sizes and dtypes, with a roofline.

One module per job:

- ``catalogue.py``  which kernels are swept, how their inputs are built, and what each
  comparison library runs for them
- ``inputs.py``     seeded host data per dtype
- ``libs.py``       the comparison libraries (gputensor, NumPy, PyTorch, CuPy) on a device
- ``timing.py``     warm-up, then the median of N repeats, synchronised on CUDA
- ``roofline.py``   device peaks (from ``gputensor.profiler.peaks``) and % of the roofline
- ``sweep.py``      the engine: kernel x dtype x size -> ``Result``
- ``output.py``     the per-kernel tables and the JSON file
- ``plot.py``       throughput against size, with the roofline (matplotlib, on request)
- ``cli.py``        the command line (``gputensor bench ...``)
"""

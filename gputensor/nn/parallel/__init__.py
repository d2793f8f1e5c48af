"""gputensor.nn.parallel: DataParallel over the CUDA devices of one process."""

from .data_parallel import DataParallel, data_parallel, gather, scatter

__all__ = ["DataParallel", "data_parallel", "gather", "scatter"]

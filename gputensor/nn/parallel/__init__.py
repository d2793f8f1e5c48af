"""gputensor.nn.parallel: DataParallel over the CUDA devices of one process, and
DistributedDataParallel over the processes of a gt.distributed job."""

from .data_parallel import DataParallel, data_parallel, gather, scatter
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel", "gather", "scatter"]

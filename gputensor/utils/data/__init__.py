"""gputensor.utils.data: datasets, samplers, collation and the DataLoader (torch.utils.data).

``DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2)`` mirrors PyTorch's loader,
with real worker processes for ``num_workers > 0`` (see ``dataloader.py`` for the start method)
and a batched fast path for ``TensorDataset``.
"""

from gputensor.utils.data import distributed
from gputensor.utils.data.collate import default_collate, default_convert
from gputensor.utils.data.dataloader import DataLoader
from gputensor.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from gputensor.utils.data.distributed import DistributedSampler
from gputensor.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from gputensor.utils.data.worker import WorkerInfo, get_worker_info

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
    "DistributedSampler", "distributed",
    "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
    "SubsetRandomSampler",
    "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate", "default_convert",
    "get_worker_info", "random_split",
]

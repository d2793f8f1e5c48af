"""gputensor.utils.data: datasets, samplers, collation and the DataLoader (torch.utils.data).

``DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2)`` mirrors PyTorch's loader,
with real worker processes for ``num_workers > 0`` (see ``dataloader.py`` for the start method)
and a batched fast path for ``TensorDataset``.
"""

from gputensor.utils.data import datapipes, distributed, graph, graph_settings
from gputensor.utils.data.collate import default_collate, default_convert
from gputensor.utils.data.dataloader import DataLoader
from gputensor.utils.data.datapipes import (
    DataChunk,
    DFIterDataPipe,
    IterDataPipe,
    MapDataPipe,
    argument_validation,
    functional_datapipe,
    guaranteed_datapipes_determinism,
    non_deterministic,
    runtime_validation,
    runtime_validation_disabled,
)
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
    "DFIterDataPipe", "DataChunk", "IterDataPipe", "MapDataPipe", "argument_validation",
    "datapipes", "functional_datapipe", "graph", "graph_settings",
    "guaranteed_datapipes_determinism", "non_deterministic", "runtime_validation",
    "runtime_validation_disabled",
]

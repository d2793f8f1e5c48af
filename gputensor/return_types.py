"""Named result tuples (PyTorch's torch.return_types): tuples whose fields are attributes."""

from collections import namedtuple

max = namedtuple("max", ["values", "indices"])  # noqa: A001 - PyTorch's names
min = namedtuple("min", ["values", "indices"])  # noqa: A001
aminmax = namedtuple("aminmax", ["min", "max"])
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])

for _t in (max, min, aminmax, sort, topk, kthvalue, median, nanmedian, cummax, cummin):
    _t.__module__ = "gputensor.return_types"

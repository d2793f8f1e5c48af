"""gputensor.utils.data: datasets, samplers, collation and the DataLoader with and without workers.

PyTorch is the oracle for lengths, batch boundaries and collation structure. It is imported per
test through the ``torch`` fixture, not at module top: worker processes unpickle this module's
dataset classes by importing the module, and a top-level ``import torch`` would add seconds to
every worker start.
"""

from __future__ import annotations

import collections
import gc
import multiprocessing
import os
import time
import warnings

import numpy as np
import pytest

import gputensor as gt
from gputensor.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)
from gputensor.utils.data.fetch import MapFetcher


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# -- datasets the worker processes import (module level, so they pickle by reference) ---------
class Squares(Dataset):
    """Plain Python samples: a dict with an int, a float and a NumPy row."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        return {"i": i, "sq": float(i * i), "row": np.full(3, i, dtype=np.int32)}


class Boom(Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> int:
        if i == 5:
            raise ValueError(f"sample {i} is broken")
        return i


class MissingKey(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        return {}["no-such-key"]


class Dies(Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> int:
        if i == 5:
            os._exit(3)
        return i


class Slow(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        time.sleep(1.0)
        return i


class WhoAmI(Dataset):
    """Each sample reports the worker that fetched it and a draw from that worker's RNGs."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple:
        info = get_worker_info()
        wid = -1 if info is None else info.id
        seed = -1 if info is None else info.seed
        return (i, wid, seed, float(gt.rand(1).item()), _INIT_SEEN.get("worker", -1))


_INIT_SEEN: dict = {}


def remember_worker(worker_id: int) -> None:
    _INIT_SEEN["worker"] = worker_id


class Stream(IterableDataset):
    """0..n-1, split across workers by get_worker_info (stride = number of workers)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self) -> int:
        return self.n


class RowByRow(TensorDataset):
    """A TensorDataset that overrides item access: it must not take the batched fast path."""

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)


def _as_np(x):
    """Nested gt/torch output -> the same structure of NumPy arrays, for comparisons."""
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return np.asarray(x.numpy())
    if isinstance(x, dict):
        return {k: _as_np(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_as_np(v) for v in x) if not hasattr(x, "_fields") else \
            type(x)(*(_as_np(v) for v in x))
    return x


def _assert_same(a, b) -> None:
    """Same structure, same container types, same values and dtypes."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{type(b)} is not an array"
        assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert type(a) is type(b) and a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert type(a).__name__ == type(b).__name__ and len(a) == len(b), f"{a!r} vs {b!r}"
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    else:
        assert a == b


def _ids(batches) -> list[list[int]]:
    return [b.tolist() if isinstance(b, gt.Tensor) else b for b in batches]


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited and been reaped (no zombie left behind)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" in f.read()  # a zombie is reaped by its parent, the fork server
    except FileNotFoundError:
        return True


def _assert_workers_gone(procs, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(
            not p.is_alive() and _gone(p.pid) for p in procs):
        time.sleep(0.02)
    for p in procs:
        assert not p.is_alive(), f"worker pid {p.pid} still alive"
        assert p.exitcode == 0, f"worker pid {p.pid} exit code {p.exitcode} (not a clean exit)"
        assert not os.path.exists(f"/proc/{p.pid}") or _gone(p.pid)
    live = {c.pid for c in multiprocessing.active_children()}
    assert not live & {p.pid for p in procs}


# -- datasets ---------------------------------------------------------------------------------
def test_tensor_dataset_items_and_size_check():
    x, y = gt.arange(12).reshape(6, 2), gt.arange(6)
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    xi, yi = ds[4]
    assert xi.tolist() == [8, 9] and yi.item() == 4
    with pytest.raises(ValueError, match=r"\[6, 5\]"):
        TensorDataset(x, gt.arange(5))
    with pytest.raises(TypeError, match="argument 1"):
        TensorDataset(x, [1, 2, 3])
    with pytest.raises(ValueError, match="0-dimensional"):
        TensorDataset(gt.tensor(1.0))


def test_concat_dataset_matches_torch(torch):
    a = TensorDataset(gt.arange(3))
    b = TensorDataset(gt.arange(10, 15))
    cat = a + b
    assert isinstance(cat, ConcatDataset)
    ref = torch.utils.data.ConcatDataset([torch.utils.data.TensorDataset(torch.arange(3)),
                                          torch.utils.data.TensorDataset(torch.arange(10, 15))])
    assert len(cat) == len(ref) == 8
    assert cat.cumulative_sizes == ref.cumulative_sizes
    for i in range(-8, 8):
        assert cat[i][0].item() == ref[i][0].item()
    for bad in (8, -9):
        with pytest.raises(IndexError, match="out of range"):
            cat[bad]
    with pytest.raises(TypeError, match="IterableDataset"):
        ConcatDataset([a, Stream(3)])
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])


def test_chain_dataset_and_iterable_add():
    chained = Stream(3) + Stream(2)
    assert isinstance(chained, ChainDataset)
    assert list(chained) == [0, 1, 2, 0, 1] and len(chained) == 5


def test_subset_and_getitems():
    ds = Squares(10)
    sub = Subset(ds, [7, 2, 5])
    assert len(sub) == 3 and sub[0]["i"] == 7 and sub[-1]["i"] == 5
    assert [s["i"] for s in sub.__getitems__([2, 0])] == [5, 7]


@pytest.mark.parametrize("n,lengths", [(10, [3, 7]), (10, [0.3, 0.3, 0.4]), (11, [0.5, 0.5]),
                                       (7, [0.1, 0.9]), (5, [0.2, 0.2, 0.2, 0.2, 0.2]),
                                       (101, [0.6, 0.2, 0.2])])
def test_random_split_lengths_match_torch(torch, n, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a zero-length split warns in both libraries
        parts = random_split(Squares(n), lengths, generator=gt.Generator().manual_seed(0))
        ref = torch.utils.data.random_split(range(n), lengths,
                                            generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(r) for r in ref]
    seen = sorted(i for p in parts for i in p.indices)
    assert seen == list(range(n))  # disjoint and complete


def test_random_split_reproducible_and_validated():
    ds = Squares(20)
    a = random_split(ds, [15, 5], generator=gt.Generator().manual_seed(3))
    b = random_split(ds, [15, 5], generator=gt.Generator().manual_seed(3))
    assert a[0].indices == b[0].indices
    gt.manual_seed(11)
    c = random_split(ds, [0.5, 0.5])
    gt.manual_seed(11)
    d = random_split(ds, [0.5, 0.5])
    assert c[1].indices == d[1].indices
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(ds, [10, 5])
    with pytest.raises(ValueError, match="between 0 and 1"):
        random_split(ds, [1.5, -0.5])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(Squares(3), [1.0, 0.0])


# -- samplers ---------------------------------------------------------------------------------
def test_sequential_and_random_samplers():
    ds = Squares(9)
    assert list(SequentialSampler(ds)) == list(range(9))
    rs = RandomSampler(ds, generator=gt.Generator().manual_seed(0))
    order = list(rs)
    assert sorted(order) == list(range(9)) and len(rs) == 9
    assert list(RandomSampler(ds, generator=gt.Generator().manual_seed(0))) == order
    more = list(RandomSampler(ds, num_samples=20, generator=gt.Generator().manual_seed(1)))
    assert len(more) == 20 and sorted(more[:9]) == list(range(9))  # whole permutations first
    draws = list(RandomSampler(ds, replacement=True, num_samples=50,
                               generator=gt.Generator().manual_seed(2)))
    assert len(draws) == 50 and all(0 <= i < 9 for i in draws)
    gt.manual_seed(5)
    first = list(RandomSampler(ds))
    gt.manual_seed(5)
    assert list(RandomSampler(ds)) == first
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(ds, num_samples=0)


@pytest.mark.parametrize("replacement", [True, False])
def test_random_sampler_draws_lazily(replacement):
    """minGPT's trainer asks for 10**10 draws and takes a few batches: the sampler draws as
    it is read, in chunks, never all up front (that would be 74 GiB)."""
    ds = Squares(9)
    sampler = RandomSampler(ds, replacement=replacement, num_samples=10**10,
                            generator=gt.Generator().manual_seed(3))
    assert len(sampler) == 10**10
    it = iter(sampler)
    taken = [next(it) for _ in range(3 * RandomSampler.CHUNK + 5)]  # across chunk boundaries
    assert all(0 <= i < 9 for i in taken)
    if not replacement:  # whole permutations back to back
        assert all(sorted(taken[j:j + 9]) == list(range(9)) for j in range(0, 3063, 9))
    again = iter(RandomSampler(ds, replacement=replacement, num_samples=10**10,
                               generator=gt.Generator().manual_seed(3)))
    assert [next(again) for _ in range(len(taken))] == taken


def test_subset_and_weighted_samplers():
    picked = list(SubsetRandomSampler([3, 8, 11], generator=gt.Generator().manual_seed(0)))
    assert sorted(picked) == [3, 8, 11]
    draws = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200,
                                       generator=gt.Generator().manual_seed(0)))
    assert len(draws) == 200 and set(draws) <= {1, 3} and draws.count(3) > draws.count(1)
    with pytest.raises(ValueError, match="num_samples"):
        WeightedRandomSampler([1.0], 0)


@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (9, 3, True),
                                       (2, 5, False), (2, 5, True), (0, 4, False)])
def test_batch_sampler_matches_torch(torch, n, bs, drop):
    ours = BatchSampler(SequentialSampler(range(n)), bs, drop)
    ref = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(n)), bs, drop)
    assert list(ours) == list(ref) and len(ours) == len(ref)


def test_batch_sampler_validates():
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last"):
        BatchSampler(range(3), 2, 1)


# -- collation --------------------------------------------------------------------------------
Point = collections.namedtuple("Point", "x y")


def _nested_samples(lib_tensor):
    return [
        {"img": lib_tensor(np.full((2, 2), i, dtype=np.float32)), "label": i,
         "w": 0.5 * i, "ok": i % 2 == 0, "name": f"s{i}", "np": np.arange(3, dtype=np.int16) + i,
         "npf": np.float32(i) / 2, "pair": (i, lib_tensor(np.array([i, -i]))),
         "pt": Point(i, [1.5 * i, 2.5])}
        for i in range(3)
    ]


def test_default_collate_nested_matches_torch(torch):
    ours = default_collate(_nested_samples(gt.from_numpy))
    ref = torch.utils.data.default_collate(_nested_samples(torch.from_numpy))
    _assert_same(_as_np(ours), _as_np(ref))
    assert ours["w"].dtype is gt.float64 and ours["label"].dtype is gt.int64
    assert ours["ok"].dtype is gt.bool and ours["npf"].dtype is gt.float32
    assert isinstance(ours["pair"], list) and isinstance(ours["pt"], Point)


def test_default_collate_tensor_paths_agree():
    rows = [gt.randn(2, 3) for _ in range(4)]
    fast = default_collate(rows)
    assert fast.shape == (4, 2, 3)
    np.testing.assert_array_equal(fast.numpy(), gt.stack(rows).numpy())
    mixed = default_collate([gt.tensor([1, 2]), gt.tensor([0.5, 1.5])])  # dtypes differ
    assert mixed.dtype is gt.float32 and mixed.tolist() == [[1.0, 2.0], [0.5, 1.5]]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([gt.zeros(2), gt.zeros(3)])


def test_default_collate_errors(torch):
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="<U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    assert default_collate([b"x", b"y"]) == [b"x", b"y"]


def test_default_convert(torch):
    data = [np.array([1, 2]), (np.float64(1.0), "x"), {"a": np.int64(3)}]
    ours = default_convert(data)
    ref = torch.utils.data.default_convert(data)
    _assert_same(_as_np(ours), _as_np(ref))
    assert isinstance(ours[0], gt.Tensor) and ours[1][1] == "x"


# -- DataLoader, single process ---------------------------------------------------------------
@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (12, 4, False),
                                       (3, 5, False), (3, 5, True)])
def test_loader_batches_match_torch(torch, n, bs, drop):
    data = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    ours = DataLoader(TensorDataset(gt.from_numpy(data), gt.arange(n)), batch_size=bs,
                      drop_last=drop)
    ref = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(data), torch.arange(n)),
        batch_size=bs, drop_last=drop)
    got, want = list(ours), list(ref)
    assert len(ours) == len(ref) == len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _assert_same(_as_np(g), _as_np(w))


def test_loader_python_samples_match_torch(torch):
    ours = list(DataLoader(Squares(7), batch_size=3))
    ref = list(torch.utils.data.DataLoader(Squares(7), batch_size=3))
    _assert_same(_as_np(ours), _as_np(ref))


def test_loader_unbatched_sampler_and_batch_sampler(torch):
    ds = Squares(5)
    ours = list(DataLoader(ds, batch_size=None))
    ref = list(torch.utils.data.DataLoader(ds, batch_size=None))
    _assert_same(_as_np(ours), _as_np(ref))
    rev = DataLoader(ds, batch_size=2, sampler=[4, 3, 2, 1, 0], collate_fn=list)
    assert [[s["i"] for s in b] for b in rev] == [[4, 3], [2, 1], [0]]
    custom = DataLoader(ds, batch_sampler=[[0, 4], [2]], collate_fn=lambda b: [s["i"] for s in b])
    assert list(custom) == [[0, 4], [2]] and len(custom) == 2


def test_loader_argument_errors():
    ds = Squares(4)
    for kwargs, msg in [({"sampler": [0], "shuffle": True}, "mutually exclusive with shuffle"),
                        ({"batch_sampler": [[0]], "batch_size": 2}, "mutually exclusive"),
                        ({"batch_size": None, "drop_last": True}, "drop_last"),
                        ({"num_workers": -1}, "non-negative"),
                        ({"prefetch_factor": 2}, "prefetch_factor"),
                        ({"persistent_workers": True}, "num_workers > 0"),
                        ({"timeout": -1}, "timeout"),
                        ({"num_workers": 1, "multiprocessing_context": "bogus"}, "start method")]:
        with pytest.raises(ValueError, match=msg):
            iter(DataLoader(ds, **kwargs))
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(3), shuffle=True)
    loader = DataLoader(ds, batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute"):
        loader.batch_size = 3


def test_loader_shuffle_reproducible():
    ds = TensorDataset(gt.arange(50))

    def epoch(loader):
        return [i for (b,) in loader for i in b.tolist()]

    gt.manual_seed(0)
    loader = DataLoader(ds, batch_size=8, shuffle=True)
    e1, e2 = epoch(loader), epoch(loader)
    assert sorted(e1) == sorted(e2) == list(range(50)) and e1 != e2
    gt.manual_seed(0)
    assert epoch(DataLoader(ds, batch_size=8, shuffle=True)) == e1
    g = gt.Generator().manual_seed(7)
    with_gen = epoch(DataLoader(ds, batch_size=8, shuffle=True, generator=g))
    g.manual_seed(7)
    assert epoch(DataLoader(ds, batch_size=8, shuffle=True, generator=g)) == with_gen


def test_tensor_dataset_fast_path_equals_row_path():
    x = gt.randn(40, 3, 2)
    y = gt.arange(40)
    fast_ds, slow_ds = TensorDataset(x, y), RowByRow(x, y)
    assert MapFetcher(fast_ds, True, default_collate, False)._gather is not None
    assert MapFetcher(slow_ds, True, default_collate, False)._gather is None
    sub_fast = random_split(fast_ds, [30, 10], generator=gt.Generator().manual_seed(0))[0]
    sub_slow = Subset(slow_ds, sub_fast.indices)
    assert MapFetcher(sub_fast, True, default_collate, False)._gather is not None
    for a_ds, b_ds in [(fast_ds, slow_ds), (sub_fast, sub_slow)]:
        gt.manual_seed(1)
        a = list(DataLoader(a_ds, batch_size=7, shuffle=True))
        gt.manual_seed(1)
        b = list(DataLoader(b_ds, batch_size=7, shuffle=True))
        _assert_same(_as_np(a), _as_np(b))
        assert isinstance(a[0], list) and a[0][0].dtype is gt.float32
    batch = next(iter(DataLoader(fast_ds, batch_size=4)))
    batch[0].fill_(0.0)  # batches are copies: writing one leaves the dataset alone
    assert x[0].abs().sum().item() > 0
    with pytest.raises(IndexError):
        list(DataLoader(fast_ds, batch_size=2, sampler=[0, 40]))


def test_loader_on_device(device):
    ds = TensorDataset(gt.arange(10, device=device).float(), gt.arange(10, device=device))
    batches = list(DataLoader(ds, batch_size=4, shuffle=True))
    assert all(t.device == gt.device(device) for b in batches for t in b)
    assert sorted(i for b in batches for i in b[1].cpu().tolist()) == list(range(10))


def test_iterable_dataset_single_process():
    ours = [b.tolist() for b in DataLoader(Stream(10), batch_size=3)]
    ref = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert ours == ref and len(DataLoader(Stream(10), batch_size=3)) == 4
    assert [b.tolist() for b in DataLoader(Stream(10), batch_size=3, drop_last=True)] == ref[:3]
    assert get_worker_info() is None


def test_pin_memory_without_accelerator_warns():
    if gt.cuda.is_available():
        batch = next(iter(DataLoader(TensorDataset(gt.arange(4)), batch_size=2,
                                     pin_memory=True)))
        assert batch[0].is_pinned()
        return
    with pytest.warns(UserWarning, match="pin_memory"):
        batches = list(DataLoader(TensorDataset(gt.arange(4)), batch_size=2, pin_memory=True))
    assert len(batches) == 2


# -- DataLoader, worker processes -------------------------------------------------------------
def test_workers_match_single_process():
    ds = TensorDataset(gt.arange(60).float().reshape(30, 2), gt.arange(30))
    for kwargs in ({"batch_size": 4}, {"batch_size": 4, "drop_last": True},
                   {"batch_size": 5, "shuffle": True}):
        gt.manual_seed(3)
        single = list(DataLoader(ds, **kwargs))
        gt.manual_seed(3)
        multi = list(DataLoader(ds, num_workers=2, **kwargs))
        _assert_same(_as_np(multi), _as_np(single))
    single = list(DataLoader(Squares(9), batch_size=2))
    multi = list(DataLoader(Squares(9), batch_size=2, num_workers=2, prefetch_factor=1))
    _assert_same(_as_np(multi), _as_np(single))


def test_workers_out_of_order_and_unbatched():
    got = list(DataLoader(Squares(9), batch_size=2, num_workers=2, in_order=False))
    assert sorted(i for b in got for i in b["i"].tolist()) == list(range(9))
    unbatched = list(DataLoader(Squares(4), batch_size=None, num_workers=2))
    assert [s["i"] for s in unbatched] == [0, 1, 2, 3]
    assert isinstance(unbatched[0]["row"], gt.Tensor)  # default_convert ran in the worker


def test_worker_error_is_reraised_with_traceback():
    it = iter(DataLoader(Boom(), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(ValueError) as info:
        next(it)
    msg = str(info.value)
    assert "in DataLoader worker process 0" in msg  # batch 2 went to worker 0
    assert "Original Traceback" in msg and "sample 5 is broken" in msg
    assert 'raise ValueError(f"sample {i} is broken")' in msg  # the worker's source line
    assert [b.tolist() for b in it] == [[6, 7], [8, 9]]  # iteration goes on after the error
    with pytest.raises(KeyError) as info:
        next(iter(DataLoader(MissingKey(), batch_size=2, num_workers=1)))
    assert "no-such-key" in str(info.value) and "\nOriginal Traceback" in str(info.value)


def test_worker_death_is_reported():
    with pytest.raises(RuntimeError, match=r"worker 0 \(pid \d+\) exited unexpectedly with "
                                           r"exit code 3"):
        list(DataLoader(Dies(), batch_size=2, num_workers=2))


def test_timeout():
    with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
        next(iter(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.2)))


def test_unpicklable_collate_fn_explains():
    with pytest.raises(TypeError, match="picklable"):
        iter(DataLoader(Squares(4), batch_size=2, num_workers=1, collate_fn=lambda b: b))


def test_workers_exit_cleanly():
    ds = TensorDataset(gt.arange(20))
    it = iter(DataLoader(ds, batch_size=3, num_workers=2))
    procs = list(it._workers)
    assert len(procs) == 2 and all(p.is_alive() for p in procs)
    assert len(list(it)) == 7
    _assert_workers_gone(procs)  # finishing the epoch shuts them down

    it = iter(DataLoader(ds, batch_size=3, num_workers=2))
    next(it)
    procs = list(it._workers)
    del it  # abandoning an iterator mid-epoch shuts them down too
    gc.collect()
    _assert_workers_gone(procs)

    # An iterator in a reference cycle is shut down by the garbage collector, after its index
    # queues' own finalizers have already closed them.
    box = [iter(DataLoader(ds, batch_size=3, num_workers=2))]
    next(box[0])
    procs = list(box[0]._workers)
    box.append(box)
    del box
    gc.collect()
    _assert_workers_gone(procs)


def test_persistent_workers_survive_epochs():
    ds = TensorDataset(gt.arange(20))
    loader = DataLoader(ds, batch_size=6, num_workers=2, persistent_workers=True)
    first = [b.tolist() for (b,) in loader]
    procs = list(loader._iterator._workers)
    it = iter(loader)
    next(it)  # abandon the second epoch early: stale batches must not leak into the third
    third = [b.tolist() for (b,) in loader]
    assert first == third == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11], [12, 13, 14, 15, 16, 17],
                              [18, 19]]
    assert list(loader._iterator._workers) == procs and all(p.is_alive() for p in procs)
    stream = DataLoader(Stream(7), batch_size=2, num_workers=2, persistent_workers=True)
    assert sorted(i for _ in range(2) for b in stream for i in b.tolist()) == \
        sorted(list(range(7)) * 2)
    del loader, it
    gc.collect()
    _assert_workers_gone(procs)


def test_worker_info_seeds_and_init_fn():
    gt.manual_seed(123)
    rows = list(DataLoader(WhoAmI(), batch_size=None, num_workers=2,
                           worker_init_fn=remember_worker))
    assert [r[1] for r in rows] == [0, 1] * 4  # round-robin task assignment
    assert [r[4] for r in rows] == [0, 1] * 4  # worker_init_fn ran in each worker
    seeds = {r[1]: r[2] for r in rows}
    assert seeds[1] == seeds[0] + 1  # base_seed + worker_id
    draws = [r[3] for r in rows]
    assert len(set(draws)) == 8  # workers do not share random streams
    gt.manual_seed(123)
    again = list(DataLoader(WhoAmI(), batch_size=None, num_workers=2))
    assert [r[3] for r in again] == draws  # reproducible from gt.manual_seed
    assert WhoAmI()[0][1] == -1  # main process: no worker info


def test_iterable_dataset_with_workers():
    batches = [b.tolist() for b in DataLoader(Stream(11), batch_size=2, num_workers=2)]
    assert sorted(i for b in batches for i in b) == list(range(11))
    assert batches[0] == [0, 2] and batches[1] == [1, 3]  # worker 0 evens, worker 1 odds
    dropped = [b.tolist() for b in DataLoader(Stream(11), batch_size=2, num_workers=2,
                                              drop_last=True)]
    # drop_last applies per worker: worker 1's stream 1, 3, 5, 7, 9 loses its odd one out.
    assert dropped == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10]]

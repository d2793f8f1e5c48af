"""gt.multiprocessing: tensors cross process boundaries by reference (PyTorch's semantics)."""

from __future__ import annotations

import pickle

import pytest

import gputensor as gt
import gputensor.multiprocessing as mp
from gputensor import nn
from gputensor.multiprocessing import reductions

from ..conftest import DEVICES
from . import workers

CUDA_DEVICES = [d for d in DEVICES if d.startswith("cuda")]  # the CPU has the strategy tests

TIMEOUT = 120


@pytest.fixture(params=sorted(mp.get_all_sharing_strategies()))
def strategy(request: pytest.FixtureRequest):
    old = mp.get_sharing_strategy()
    mp.set_sharing_strategy(request.param)
    yield request.param
    mp.set_sharing_strategy(old)


def _run(target, *args):
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=target, args=(q_in, q_out))
    proc.start()
    return ctx, proc, q_in, q_out


def test_names_match_torch() -> None:
    torch_mp = pytest.importorskip("torch.multiprocessing")
    missing = set(torch_mp.__all__) - set(mp.__all__)
    assert not missing
    for name in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
                 "ProcessExitedException", "SpawnContext", "init_reductions"):
        assert hasattr(mp, name)
    assert mp.get_sharing_strategy() == torch_mp.get_sharing_strategy()
    assert mp.get_all_sharing_strategies() == torch_mp.get_all_sharing_strategies()


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(AssertionError, match="invalid sharing strategy 'bogus'"):
        mp.set_sharing_strategy("bogus")


def test_queue_passes_tensors_by_reference(strategy: str) -> None:
    a = gt.arange(6, dtype=gt.float32).reshape(2, 3)
    b = gt.tensor([10, 20], dtype=gt.int64)
    empty = gt.empty(0)
    ctx, proc, q_in, q_out = _run(workers.add_one)
    q_in.put([a, b, empty])
    seen = q_out.get(timeout=TIMEOUT)
    proc.join(TIMEOUT)
    assert proc.exitcode == 0
    # The child wrote into the parent's memory: no copy was made on either side.
    assert a.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]] and b.tolist() == [11, 21]
    assert [s[0] for s in seen] == [a.tolist(), b.tolist(), []]
    assert all(s[1] for s in seen) and a.is_shared() and b.is_shared()


def test_views_of_one_storage_stay_views(strategy: str) -> None:
    base = gt.zeros(5)
    ctx, proc, q_in, q_out = _run(workers.views_share)
    q_in.put((base, base[2:]))
    values, same_storage = q_out.get(timeout=TIMEOUT)
    proc.join(TIMEOUT)
    assert same_storage and values == [0.0, 0.0, 99.0, 0.0, 0.0]
    assert base[2].item() == 99.0


@pytest.mark.parametrize("make", [
    lambda: nn.Parameter(gt.ones(2, 3, dtype=gt.float64)),
    lambda: gt.ones(3, 2, dtype=gt.float64, requires_grad=True).t(),  # a view is not a leaf
    lambda: gt.ones(2, 3, dtype=gt.float64).t(),
])
def test_type_grad_flag_and_layout_survive(make) -> None:
    x = make()
    if x.requires_grad and not x.is_leaf:
        with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf"):
            reductions.reduce_tensor(x)
        return
    ctx, proc, q_in, q_out = _run(workers.describe)
    q_in.put(x)
    name, requires_grad, is_leaf, shape, stride, is_f64 = q_out.get(timeout=TIMEOUT)
    proc.join(TIMEOUT)
    assert (name, requires_grad, is_leaf) == (type(x).__name__, x.requires_grad, True)
    assert (shape, stride, is_f64) == (list(x.shape), x.stride(), True)


def test_plain_pickle_copies() -> None:
    x = gt.arange(4.0).share_memory_()
    y = pickle.loads(pickle.dumps(x))
    y.add_(1)
    assert not y.is_shared() and x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_shared_storage_cannot_resize() -> None:
    x = gt.zeros(4).share_memory_()
    with pytest.raises(RuntimeError, match="not resizable"):
        x.untyped_storage().resize_(64)


def test_missing_file_system_segment_is_named() -> None:
    with pytest.raises(RuntimeError, match="'gputensor-no-such-segment' no longer exists"):
        reductions.rebuild_storage_filename("gputensor-no-such-segment", 8)


def test_pool_map_returns_tensors() -> None:
    with mp.get_context("spawn").Pool(2) as pool:
        out = pool.map(workers.square, [gt.tensor([1.0, 2.0]), gt.tensor([3.0])])
    assert [t.tolist() for t in out] == [[1.0, 4.0], [9.0]]


def test_spawn_runs_every_rank_on_shared_memory() -> None:
    shared = gt.zeros(3).share_memory_()
    assert mp.spawn(workers.fill_rank, args=(shared,), nprocs=3) is None
    assert shared.tolist() == [1.0, 2.0, 3.0]


def test_spawn_raises_the_childs_traceback() -> None:
    with pytest.raises(mp.ProcessRaisedException, match="worker one failed on purpose") as e:
        mp.spawn(workers.raise_in, nprocs=2)
    assert e.value.error_index == 1
    assert "-- Process 1 terminated with the following error:" in str(e.value)


def test_spawn_reports_exit_codes() -> None:
    context = mp.start_processes(workers.exit_with, args=(3,), nprocs=2, join=False)
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3"):
        while not context.join(TIMEOUT):
            pass


def test_spawn_warns_for_other_start_methods() -> None:
    with pytest.warns(FutureWarning, match="only supports start_method=spawn"):
        mp.spawn(workers.fill_rank, args=(gt.zeros(1).share_memory_(),), nprocs=1,
                 start_method="fork")


def test_hogwild_training_with_two_processes() -> None:
    gt.manual_seed(0)
    model = nn.Linear(4, 1)
    model.share_memory()
    x = gt.randn(256, 4, generator=gt.Generator().manual_seed(7))
    y = x @ (gt.arange(4, dtype=gt.float32).reshape(1, 4) / 4).t()
    before = nn.functional.mse_loss(model(x), y).item()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=workers.hogwild_train, args=(rank, model, 40, 1))
             for rank in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(TIMEOUT)
    assert [p.exitcode for p in procs] == [0, 0]
    after = nn.functional.mse_loss(model(x), y).item()
    assert after < before / 20, (before, after)


@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_cuda_tensors_pass_by_ipc_handle(device: str) -> None:
    base = gt.arange(8, dtype=gt.float32, device=device)
    view = base[4:]
    other = gt.ones(3, dtype=gt.int64, device=device)
    ctx, proc, q_in, q_out = _run(workers.cuda_add_one)
    q_in.put([view, other, base[:2]])
    seen, one_storage = q_out.get(timeout=TIMEOUT)
    assert seen == [(device, [5.0, 6.0, 7.0, 8.0]), (device, [2, 2, 2]), (device, [1.0, 2.0])]
    assert one_storage  # two views of one storage there are views of one storage here
    # The child wrote into this process's device memory.
    assert base.tolist() == [1.0, 2.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0]
    assert other.tolist() == [2, 2, 2]
    q_in.put(None)
    proc.join(TIMEOUT)
    assert proc.exitcode == 0

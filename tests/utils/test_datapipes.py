"""gt.utils.data DataPipes against torch.utils.data's: the functional-form registry, the
iterable and map DataPipes, the single-iterator rule, the decorators, graph settings and the
DataLoader integration (shuffle switch, seeding, sharding across workers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.data as tdata
from torch.utils.data import graph_settings as t_settings
from torch.utils.data.datapipes import iter as t_iter
from torch.utils.data.datapipes import map as t_map

import gputensor as gt
import gputensor.utils.data as gdata
from gputensor.utils.data import graph_settings as g_settings
from gputensor.utils.data.datapipes import iter as g_iter
from gputensor.utils.data.datapipes import map as g_map

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # lambdas cannot be pickled


# -- module-level functions: workers receive the pipelines pickled ---------------------------------
def add_one(x: int) -> int:
    return x + 1


def is_even(x: int) -> bool:
    return x % 2 == 0


def parity(x: int) -> int:
    return x % 2


def _plain(x):
    """Tensors (either library) as nested lists, so results compare with ==."""
    if isinstance(x, (gt.Tensor, torch.Tensor)):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x) if not hasattr(x, "_fields") else \
            tuple(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _same(build) -> list:
    """build(lib_iter_module) for gputensor and torch; both iterate to the same list."""
    ours, theirs = list(build(g_iter)), list(build(t_iter))
    assert _plain(ours) == _plain(theirs)
    return ours


# -- custom DataPipes registered in both libraries -------------------------------------------------
@gdata.functional_datapipe("test_repeat")
class GRepeat(gdata.IterDataPipe):
    def __init__(self, source, times: int) -> None:
        self.source, self.times = source, times
        self.resets = 0

    def __iter__(self):
        for x in self.source:
            for _ in range(self.times):
                yield x

    def reset(self) -> None:
        self.resets += 1


@tdata.functional_datapipe("test_repeat")
class TRepeat(tdata.IterDataPipe):
    def __init__(self, source, times: int) -> None:
        self.source, self.times = source, times

    def __iter__(self):
        for x in self.source:
            for _ in range(self.times):
                yield x


@gdata.functional_datapipe("test_double")
class GDouble(gdata.MapDataPipe):
    def __init__(self, source) -> None:
        self.source = source

    def __getitem__(self, i):
        return 2 * self.source[i]

    def __len__(self) -> int:
        return len(self.source)


def test_functional_registration_makes_methods() -> None:
    dp = g_iter.IterableWrapper([1, 2])
    out = dp.test_repeat(2)
    assert isinstance(out, GRepeat) and list(out) == [1, 1, 2, 2]
    assert list(t_iter.IterableWrapper([1, 2]).test_repeat(2)) == [1, 1, 2, 2]
    assert "test_repeat" in dir(dp) and "map" in dir(dp)
    assert list(g_map.SequenceWrapper([1, 2]).test_double()) == [2, 4]
    assert not hasattr(g_iter.IterableWrapper([1]), "test_double")  # kinds keep own tables
    with pytest.raises(AttributeError, match="object has no attribute 'nope"):
        dp.nope  # noqa: B018
    for lib in (gdata, tdata):
        with pytest.raises(Exception, match="Unable to add DataPipe function name test_repeat "
                                            "as it is already taken"):
            lib.functional_datapipe("test_repeat")(type("Again", (lib.IterDataPipe,), {}))


def test_reset_runs_at_each_new_iterator() -> None:
    dp = GRepeat(g_iter.IterableWrapper([1, 2]), 1)
    assert dp.resets == 0
    list(dp)
    list(dp)
    assert dp.resets == 2 and dp._number_of_samples_yielded == 2


# -- iterable DataPipes vs torch -------------------------------------------------------------------
PIPELINES = {
    "map": lambda m: m.IterableWrapper(range(6)).map(add_one),
    "map_cols": lambda m: m.IterableWrapper([(1, 2), (3, 4)]).map(lambda a, b: a * b,
                                                                   input_col=[0, 1]),
    "map_out": lambda m: m.IterableWrapper([[1, 2], [3, 4]]).map(add_one, input_col=1,
                                                                  output_col=-1),
    "map_dict": lambda m: m.IterableWrapper([{"a": 1}, {"a": 5}]).map(add_one, input_col="a"),
    "filter": lambda m: m.IterableWrapper(range(10)).filter(is_even),
    "filter_col": lambda m: m.IterableWrapper([(1, "a"), (2, "b")]).filter(is_even,
                                                                           input_col=0),
    "batch": lambda m: m.IterableWrapper(range(7)).batch(3),
    "batch_drop": lambda m: m.IterableWrapper(range(7)).batch(3, drop_last=True),
    "unbatch": lambda m: m.IterableWrapper([[[0, 1], [2]], [[3]]]).unbatch(2),
    "unbatch_all": lambda m: m.IterableWrapper([[[0, 1], [2]], [[3]]]).unbatch(-1),
    "shuffle": lambda m: m.IterableWrapper(range(20)).shuffle().set_seed(7),
    "shuffle_buffer": lambda m: m.IterableWrapper(range(20)).shuffle(buffer_size=4).set_seed(3),
    "shuffle_unbatch": lambda m: m.IterableWrapper([[0, 1], [2, 3]]).shuffle(
        unbatch_level=1).set_seed(1),
    "shuffle_off": lambda m: m.IterableWrapper(range(5)).shuffle().set_shuffle(False),
    "collate": lambda m: m.IterableWrapper([[1, 2], [3, 4]]).collate(),
    "concat": lambda m: m.IterableWrapper([1, 2]).concat(m.IterableWrapper([3])),
    "zip": lambda m: m.IterableWrapper([1, 2, 3]).zip(m.IterableWrapper("ab")),
    "mux": lambda m: m.IterableWrapper([1, 2, 3]).mux(m.IterableWrapper([10, 20])),
    "groupby": lambda m: m.IterableWrapper(range(9)).groupby(parity, group_size=2),
    "groupby_key": lambda m: m.IterableWrapper(range(7)).groupby(parity, keep_key=True,
                                                                 buffer_size=3),
    "sharded": lambda m: _sharded(m.IterableWrapper(range(10)).sharding_filter()),
    "sampler": lambda m: m.Sampler(m.IterableWrapper(range(4))),
}


def _sharded(dp):
    dp.apply_sharding(3, 1)
    return dp


@pytest.mark.parametrize("name", list(PIPELINES))
def test_iter_datapipes_match_torch(name: str) -> None:
    ours = _same(PIPELINES[name])
    again = list(PIPELINES[name](g_iter))
    assert _plain(again) == _plain(ours)  # a rebuilt pipeline gives the same stream


@pytest.mark.parametrize("name", ["map", "batch", "batch_drop", "shuffle", "concat", "zip",
                                  "mux", "sharded", "sampler"])
def test_iter_datapipe_lengths_match_torch(name: str) -> None:
    assert len(PIPELINES[name](g_iter)) == len(PIPELINES[name](t_iter))


def test_batches_are_datachunks() -> None:
    batch = next(iter(g_iter.IterableWrapper(range(4)).batch(2)))
    assert isinstance(batch, gdata.DataChunk) and isinstance(batch, list)
    chunk = gdata.DataChunk([1, 2])
    tchunk = tdata.DataChunk([1, 2])
    assert chunk.as_str("  ") == tchunk.as_str("  ") and list(chunk.raw_iterator()) == [1, 2]


def test_no_length_raises_type_error_like_torch() -> None:
    def stream():
        yield 1

    for m in (g_iter, t_iter):
        with pytest.raises(TypeError, match="IterableWrapperIterDataPipe instance doesn't "
                                            "have valid length"):
            len(m.IterableWrapper(stream()).map(add_one))
        with pytest.raises(TypeError, match="ConcaterIterDataPipe instance doesn't have valid "
                                            "length"):
            len(m.IterableWrapper([1]).concat(m.Mapper(m.IterableWrapper(range(2)), add_one)
                                              .filter(is_even)))


def test_fork_and_demux_match_torch() -> None:
    for m in (g_iter, t_iter):
        a, b = m.IterableWrapper(range(5)).fork(2)
        assert list(zip(a, b, strict=True)) == [(i, i) for i in range(5)]
        assert list(a) == list(range(5)) and list(b) == list(range(5))
        evens, odds = m.IterableWrapper(range(7)).demux(2, parity)
        assert list(evens) == [0, 2, 4, 6] and list(odds) == [1, 3, 5]
        assert m.IterableWrapper([1]).fork(1).__class__.__name__ == \
            "IterableWrapperIterDataPipe"
        small_a, small_b = m.IterableWrapper(range(10)).fork(2, buffer_size=2)
        with pytest.raises(BufferError, match="buffer size 2 is insufficient"):
            list(small_a)
        with pytest.raises(ValueError, match="Expected `num_instances` larger than 0"):
            m.IterableWrapper([1]).fork(0)
        bad_a, _ = m.IterableWrapper(range(3)).demux(2, lambda x: 5)
        with pytest.raises(ValueError, match="should be between 0 and 1. 5 is returned"):
            list(bad_a)


def test_map_argument_errors_match_torch() -> None:
    def check(build) -> None:
        with pytest.raises(Exception) as theirs:
            build(t_iter)
        with pytest.raises(type(theirs.value)) as ours:
            build(g_iter)
        assert str(ours.value) == str(theirs.value)

    def two(a, b):
        return a

    def kw(a, *, b):
        return a

    check(lambda m: m.IterableWrapper([1]).map(add_one, output_col=1))
    check(lambda m: m.IterableWrapper([1]).map(add_one, input_col=0, output_col=[1, 2]))
    check(lambda m: m.IterableWrapper([1]).map(two))
    check(lambda m: m.IterableWrapper([1]).map(add_one, input_col=[0, 1]))
    check(lambda m: m.IterableWrapper([1]).map(kw))
    check(lambda m: m.IterableWrapper([1]).map(3))
    check(lambda m: m.IterableWrapper([1]).batch(0))
    check(lambda m: m.IterableWrapper([1]).shuffle(buffer_size=0))
    check(lambda m: m.Concater())
    check(lambda m: m.IterableWrapper([1]).concat([1]))


def test_filter_needs_a_bool_like_torch() -> None:
    for m in (g_iter, t_iter):
        with pytest.raises(ValueError, match="Boolean output is required"):
            list(m.IterableWrapper([1]).filter(add_one))


def test_file_datapipes_match_torch(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    for name, text in [("b.txt", "bee"), ("a.txt", "ay"), ("c.csv", "1,2"),
                       ("sub/d.txt", "dee")]:
        (tmp_path / name).write_text(text)
    root = str(tmp_path)
    for kwargs in ({}, {"masks": "*.txt"}, {"masks": ["*.csv", "d*"], "recursive": True}):
        ours = list(g_iter.FileLister(root, **kwargs))
        assert ours == list(t_iter.FileLister(root, **kwargs))
        assert ours == sorted(ours) and ours
    assert list(g_iter.FileLister(str(tmp_path / "a.txt"))) == [str(tmp_path / "a.txt")]

    def read(m, mode):
        return list(m.FileLister(root, "*.txt").open_files(mode=mode).read_from_stream())

    assert read(g_iter, "r") == read(t_iter, "r") == [
        (str(tmp_path / "a.txt"), "ay"), (str(tmp_path / "b.txt"), "bee")]
    assert read(g_iter, "b") == read(t_iter, "b")
    chunks = list(g_iter.FileLister(root, "b.txt").open_files().read_from_stream(chunk=2))
    assert [c for _, c in chunks] == ["be", "e"]
    for m in (g_iter, t_iter):
        with pytest.raises(ValueError, match="Invalid mode w"):
            m.FileOpener([root], mode="w")
        with pytest.raises(ValueError, match="binary mode doesn't take an encoding"):
            m.FileOpener([root], mode="rb", encoding="utf-8")
        with pytest.raises(TypeError, match="FileListerIterDataPipe instance doesn't have"):
            len(m.FileLister(root))
    opened = list(g_iter.FileLister(root, "*.txt").open_files())
    kept = list(g_iter.IterableWrapper(opened, deepcopy=False).filter(
        lambda pair: pair[0].endswith("a.txt")))
    assert len(kept) == 1 and not kept[0][1].closed
    assert [stream.closed for _, stream in opened] == [False, True]  # b.txt was dropped


# -- the single-iterator rule and exception annotation --------------------------------------------
def test_new_iterator_invalidates_the_old_one_like_torch() -> None:
    messages = []
    for m in (g_iter, t_iter):
        dp = m.IterableWrapper(range(5)).map(add_one)
        it1 = iter(dp)
        assert next(it1) == 1
        it2 = iter(dp)
        assert next(it2) == 1
        with pytest.raises(RuntimeError, match="This iterator has been invalidated") as info:
            next(it1)
        messages.append(str(info.value))
        assert next(it2) == 2
    assert messages[0] == messages[1]


def test_exceptions_name_the_datapipe_like_torch() -> None:
    messages = []
    for m in (g_iter, t_iter):
        with pytest.raises(ZeroDivisionError) as info:
            list(m.IterableWrapper([1, 0]).map(lambda x: 1 // x))
        messages.append(str(info.value))
    assert "This exception is thrown by __iter__ of MapperIterDataPipe(" in messages[0]
    assert messages[0] == messages[1]


# -- map DataPipes vs torch ------------------------------------------------------------------------
MAP_PIPELINES = {
    "wrap": lambda m: m.SequenceWrapper([3, 1, 2]),
    "map": lambda m: m.SequenceWrapper(range(5)).map(add_one),
    "batch": lambda m: m.SequenceWrapper(range(5)).batch(2),
    "batch_drop": lambda m: m.SequenceWrapper(range(5)).batch(2, drop_last=True),
    "concat": lambda m: m.SequenceWrapper([1, 2]).concat(m.SequenceWrapper([3])),
    "zip": lambda m: m.SequenceWrapper([1, 2, 3]).zip(m.SequenceWrapper("ab")),
}


@pytest.mark.parametrize("name", list(MAP_PIPELINES))
def test_map_datapipes_match_torch(name: str) -> None:
    ours, theirs = MAP_PIPELINES[name](g_map), MAP_PIPELINES[name](t_map)
    assert len(ours) == len(theirs)
    assert [_plain(ours[i]) for i in range(len(ours))] == \
        [_plain(theirs[i]) for i in range(len(theirs))]
    for dp in (ours, theirs):
        with pytest.raises(IndexError):
            dp[len(dp) + 5]


def test_map_shuffle_matches_torch() -> None:
    ours = list(g_map.SequenceWrapper(range(10)).shuffle().set_seed(4))
    theirs = list(t_map.SequenceWrapper(range(10)).shuffle().set_seed(4))
    assert ours == theirs and sorted(ours) == list(range(10))
    assert list(g_map.SequenceWrapper("abc").shuffle().set_shuffle(False)) == list("abc")
    assert isinstance(g_map.SequenceWrapper([1]).shuffle(), gdata.IterDataPipe)


def test_unseeded_shuffle_follows_gt_manual_seed() -> None:
    gt.manual_seed(11)
    first = list(g_iter.IterableWrapper(range(30)).shuffle())
    gt.manual_seed(11)
    assert list(g_iter.IterableWrapper(range(30)).shuffle()) == first
    assert sorted(first) == list(range(30)) and first != list(range(30))


# -- decorators ------------------------------------------------------------------------------------
def test_non_deterministic_and_guaranteed_determinism_like_torch() -> None:
    for lib in (gdata, tdata):
        @lib.non_deterministic
        class Random(lib.IterDataPipe):
            def __init__(self, n) -> None:
                self.n = n

            def __iter__(self):
                yield from range(self.n)

        @lib.non_deterministic(lambda n: n > 2)
        class Sometimes(lib.IterDataPipe):
            def __init__(self, n) -> None:
                self.n = n

            def __iter__(self):
                yield from range(self.n)

        assert list(Random(2)) == [0, 1]
        with lib.guaranteed_datapipes_determinism():
            with pytest.raises(TypeError, match="Random is non-deterministic, but you set "
                                                "'guaranteed_datapipes_determinism'"):
                Random(2)
            assert list(Sometimes(2)) == [0, 1]
            with pytest.raises(TypeError, match="Sometimes is non-deterministic with the "
                                                "inputs"):
                Sometimes(3)
        assert list(Random(1)) == [0]
        with pytest.raises(TypeError, match="Only `IterDataPipe` can be decorated with "
                                            "`non_deterministic`, but int is found"):
            lib.non_deterministic(int)


def test_runtime_validation() -> None:
    class Ints(gdata.IterDataPipe[int]):
        def __init__(self, items) -> None:
            self.items = items

        @gdata.runtime_validation
        def __iter__(self):
            yield from self.items

    assert Ints.type.param is int and gdata.IterDataPipe.type.param is not int
    assert list(Ints([1, 2, True])) == [1, 2, True]
    with pytest.raises(RuntimeError, match=r"Expected an instance as subtype of int, but found "
                                           r"a\(<class 'str'>\)"):
        list(Ints([1, "a"]))
    with gdata.runtime_validation_disabled():
        assert list(Ints(["a"])) == ["a"]
    with pytest.raises(RuntimeError):
        list(Ints(["a"]))
    for lib in (gdata, tdata):
        with pytest.raises(TypeError, match="Can not decorate function f with "
                                            "'runtime_validation'"):
            lib.runtime_validation(add_one.__class__(add_one.__code__, {}, "f"))


def test_argument_validation() -> None:
    class Ints(gdata.IterDataPipe[int]):
        def __iter__(self):
            yield 1

    @gdata.argument_validation
    def wants_numbers(dp: gdata.IterDataPipe[float], n: int) -> int:
        return n

    @gdata.argument_validation
    def wants_strings(dp: gdata.IterDataPipe[str]) -> None:
        return None

    assert wants_numbers(Ints(), 3) == 3  # int is a subtype of float, as in typing
    with pytest.raises(TypeError, match="Expected type of argument 'dp' as a subtype of hint "
                                        "str, but found int"):
        wants_strings(Ints())

    def plain(dp: tdata.IterDataPipe) -> None:
        return None

    def g_plain(dp: gdata.IterDataPipe) -> None:
        return None

    with pytest.raises(TypeError) as theirs:
        tdata.argument_validation(plain)(3)
    with pytest.raises(TypeError) as ours:
        gdata.argument_validation(g_plain)(3)
    assert str(ours.value) == str(theirs.value)


# -- graph settings --------------------------------------------------------------------------------
def test_graph_and_settings_like_torch() -> None:
    for m, settings in ((g_iter, g_settings), (t_iter, t_settings)):
        source = m.IterableWrapper(range(10))
        dp = source.shuffle().sharding_filter().map(add_one)
        pipes = settings.get_all_graph_pipes(
            (gdata.graph if m is g_iter else tdata.graph).traverse_dps(dp))
        assert [type(p).__name__ for p in pipes] == [
            "MapperIterDataPipe", "ShardingFilterIterDataPipe", "ShufflerIterDataPipe",
            "IterableWrapperIterDataPipe"]
        settings.apply_sharding(dp, 2, 1)
        settings.apply_shuffle_settings(dp, shuffle=False)
        assert list(dp) == [2, 4, 6, 8, 10]
        twice = source.sharding_filter().sharding_filter()
        with pytest.raises(RuntimeError, match="Sharding twice on a single pipeline"):
            settings.apply_sharding(twice, 2, 0)
        with pytest.warns(UserWarning, match="does not contain a `Shuffler`"):
            added = settings.apply_shuffle_settings(source, shuffle=True)
        assert type(added).__name__ == "ShufflerIterDataPipe"


# -- DataLoader ------------------------------------------------------------------------------------
def test_dataloader_batches_a_datapipe_like_torch() -> None:
    ours = list(gdata.DataLoader(g_iter.IterableWrapper(range(7)).map(add_one), batch_size=3))
    theirs = list(tdata.DataLoader(t_iter.IterableWrapper(range(7)).map(add_one), batch_size=3))
    assert _plain(ours) == _plain(theirs)
    assert all(isinstance(b, gt.Tensor) for b in ours)
    assert len(gdata.DataLoader(g_iter.IterableWrapper(range(7)), batch_size=3)) == 3
    mapped = gdata.DataLoader(g_map.SequenceWrapper(range(5)).map(add_one), batch_size=2)
    assert _plain(list(mapped)) == [[1, 2], [3, 4], [5]]


def test_dataloader_shuffle_switches_the_shufflers() -> None:
    def loader(shuffle, seed):
        dp = g_iter.IterableWrapper(range(40)).shuffle()
        return [int(x) for x in gdata.DataLoader(
            dp, batch_size=None, shuffle=shuffle, generator=gt.Generator().manual_seed(seed))]

    assert loader(False, 0) == list(range(40))
    a, b, c = loader(True, 0), loader(True, 0), loader(True, 1)
    assert a == b and a != c and sorted(a) == list(range(40)) and a != list(range(40))
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        gdata.DataLoader(gdata.ChainDataset([]), shuffle=True)
    with pytest.warns(UserWarning, match="does not contain a `Shuffler`"):
        gdata.DataLoader(g_iter.IterableWrapper(range(3)), shuffle=True)


def test_dataloader_epochs_reshuffle() -> None:
    dl = gdata.DataLoader(g_iter.IterableWrapper(range(30)).shuffle(), batch_size=None,
                          shuffle=True, generator=gt.Generator().manual_seed(5))
    first, second = [int(x) for x in dl], [int(x) for x in dl]
    assert sorted(first) == sorted(second) == list(range(30)) and first != second


def test_dataloader_workers_shard_the_datapipe() -> None:
    dp = g_iter.IterableWrapper(range(20)).shuffle().sharding_filter().map(add_one)
    dl = gdata.DataLoader(dp, batch_size=2, num_workers=2, shuffle=True,
                          generator=gt.Generator().manual_seed(3))
    got = sorted(int(x) for batch in dl for x in batch)
    assert got == list(range(1, 21))  # every element once: the workers split the stream
    np.testing.assert_array_equal(
        sorted(int(x) for batch in gdata.DataLoader(
            g_iter.IterableWrapper(range(6)).sharding_filter(), batch_size=1, num_workers=2)
            for x in batch), np.arange(6))

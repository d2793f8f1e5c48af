"""Index shapes and empty views match PyTorch (issue 15): a 0-dim integer tensor index drops
its dim, bool scalars next to advanced indices are advanced indices themselves (True: [0],
False: [] on a new dim), mismatched advanced indices raise PyTorch's IndexError, and empty
views whose offset lies past a 0-byte storage convert, print and split."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import gputensor as gt
from tests.helpers import error_message, synced


def _idx(lib: Any, d: str) -> dict[str, Any]:
    return {"i": lib.tensor([0, 1, 1], device=d), "s": lib.tensor(1, device=d),
            "t": lib.tensor(True, device=d), "f": lib.tensor(False, device=d)}


INDEXES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "0-d int": lambda x: x["s"],
    "two 0-d ints": lambda x: (x["s"], x["s"]),
    "0-d int and a list": lambda x: (x["i"], x["s"]),
    "True, i": lambda x: (True, x["i"]),
    "i, True": lambda x: (x["i"], True),
    "False, i": lambda x: (False, x["i"]),
    "None, i, True": lambda x: (None, x["i"], True),
    "True": lambda x: True,
    "False": lambda x: False,
    "..., True": lambda x: (Ellipsis, True),
    "0-d True tensor, i": lambda x: (x["t"], x["i"]),
    "0-d False tensor": lambda x: x["f"],
    "mismatched lists": lambda x: ([0, 1], [0, 1, 2]),
    "out of bounds": lambda x: ([0, 2],),
    "slice, i, True": lambda x: (slice(0, 2), x["i"], True),
}


@pytest.mark.parametrize("name", sorted(INDEXES))
def test_index_shapes_match_pytorch(device: str, name: str) -> None:
    make = INDEXES[name]
    t = torch.arange(24).view(2, 3, 4)
    g = gt.arange(24, device=device).view(2, 3, 4)
    try:
        want = t[make(_idx(torch, "cpu"))]
    except IndexError as e:
        with pytest.raises(IndexError) as got:
            synced(g[make(_idx(gt, device))])
        assert error_message(got.value) == str(e)
        return
    got = g[make(_idx(gt, device))]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


@pytest.mark.parametrize("name", ["0-d int", "True, i", "None, i, True", "slice, i, True"])
def test_setitem_with_the_same_indexes(device: str, name: str) -> None:
    make = INDEXES[name]
    t = torch.zeros(2, 3, 4, dtype=torch.int64)
    g = gt.zeros(2, 3, 4, dtype=gt.int64, device=device)
    t[make(_idx(torch, "cpu"))] = 7
    g[make(_idx(gt, device))] = 7
    np.testing.assert_array_equal(g.cpu().numpy(), t.numpy())


def test_a_0d_index_result_is_a_view_of_its_source(device: str) -> None:
    """PyTorch selects with a 0-d integer tensor index (its item()), so the row aliases m."""
    rows = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        m = lib.arange(12, device=dev).view(3, 4)
        row = m[lib.tensor(1, device=dev)]
        row[0] = 100
        rows.append(m[1].tolist())
    assert rows[0] == rows[1] == [100, 5, 6, 7]


def test_empty_views_past_the_end_of_their_storage(device: str) -> None:
    z = gt.zeros(3, 0, device=device)[2:]
    tz = torch.zeros(3, 0)[2:]
    assert z.storage_offset() == tz.storage_offset()
    assert z.double().shape == (1, 0) and z.double().dtype == gt.float64
    assert z.cpu().shape == (1, 0) and z.tolist() == tz.tolist()
    assert repr(z.cpu()) == repr(tz)
    assert z.cpu().numpy().shape == (1, 0)
    assert [tuple(p.shape) for p in z.split(1)] == [tuple(p.shape) for p in tz.split(1)]
    assert [tuple(p.shape) for p in z.tensor_split(2)] == \
        [tuple(p.shape) for p in tz.tensor_split(2)]
    assert tuple(z.nonzero().shape) == tuple(tz.nonzero().shape)
    assert z.clone().shape == (1, 0) and (z + 1).shape == (1, 0) and float(z.sum()) == 0.0
    if gt.cuda.is_available():
        assert z.to("cuda").shape == (1, 0)

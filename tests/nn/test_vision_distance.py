"""F.pad and the padding layers, pixel (un)shuffle, one_hot, normalize, cosine_similarity,
pairwise_distance and rms_norm / RMSNorm against PyTorch, forward and backward, on cpu and
emulated cuda."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F
from tests.helpers import assert_close

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(shape: tuple[int, ...], device: str, seed: int = 0) -> tuple[gt.Tensor, object]:
    data = np.random.default_rng(seed).standard_normal(shape)
    return (gt.tensor(data, device=device, requires_grad=True),
            torch.tensor(data, requires_grad=True))


def _compare(device: str, shapes: list[tuple[int, ...]], g_fn: Callable, t_fn: Callable,
             atol: float = 1e-10) -> None:
    """Forward values and every input's gradient (of a weighted sum) match PyTorch."""
    pairs = [_pair(s, device, seed=i) for i, s in enumerate(shapes)]
    got, want = g_fn(*(g for g, _ in pairs)), t_fn(*(t for _, t in pairs))
    assert_close(got, want, atol=atol, rtol=1e-8)
    weights = np.random.default_rng(9).standard_normal(tuple(want.shape))
    (got * gt.tensor(weights, device=device)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    for g, t in pairs:
        assert_close(g.grad, t.grad, atol=atol, rtol=1e-8)


# -- padding --------------------------------------------------------------------------------
PADS = [((2, 5), "constant", (1, 2)), ((2, 3, 5), "reflect", (2, 1)),
        ((1, 2, 4, 5), "reflect", (1, 2, 3, 1)), ((2, 3, 4), "replicate", (3, 1)),
        ((1, 2, 3, 4), "replicate", (2, 2, 1, 0)), ((1, 2, 3, 4), "circular", (1, 2, 2, 1)),
        ((1, 1, 3, 3, 4), "circular", (1, 1, 1, 1, 1, 1)), ((2, 4), "constant", (-1, 2))]


@pytest.mark.parametrize(("shape", "mode", "widths"), PADS)
def test_pad_matches_torch(device: str, shape, mode: str, widths) -> None:
    value = 1.5 if mode == "constant" else None
    _compare(device, [shape], lambda x: F.pad(x, widths, mode, value),
             lambda x: TF.pad(x, widths, mode, value))


@pytest.mark.parametrize(("name", "args", "shape"), [
    ("ZeroPad1d", (2,), (2, 3, 4)), ("ZeroPad2d", ((1, 0, 2, 1),), (1, 2, 3, 3)),
    ("ZeroPad3d", (1,), (1, 1, 2, 2, 2)), ("ConstantPad1d", ((1, 2), 3.5), (2, 3, 4)),
    ("ConstantPad2d", (1, -2.0), (1, 2, 3, 3)), ("ConstantPad3d", (1, 0.5), (1, 1, 2, 2, 2)),
    ("ReflectionPad1d", (2,), (2, 3, 4)), ("ReflectionPad2d", ((1, 2, 2, 1),), (1, 2, 3, 4)),
    ("ReflectionPad3d", (1,), (1, 1, 3, 3, 3)), ("ReplicationPad1d", ((3, 1),), (2, 3, 4)),
    ("ReplicationPad2d", (2,), (1, 2, 3, 3)), ("ReplicationPad3d", (1,), (1, 1, 2, 2, 2)),
    ("CircularPad1d", (2,), (2, 3, 4)), ("CircularPad2d", ((1, 2, 1, 0),), (1, 2, 3, 3)),
    ("CircularPad3d", (1,), (1, 1, 2, 2, 2)),
])
def test_padding_layers_match_torch(device: str, name: str, args: tuple, shape) -> None:
    g_layer, t_layer = getattr(gt.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(g_layer) == repr(t_layer) and g_layer.padding == t_layer.padding
    _compare(device, [shape], g_layer, t_layer)


# -- pixel shuffles and one_hot -------------------------------------------------------------
@pytest.mark.parametrize(("shape", "r"), [((1, 8, 2, 3), 2), ((2, 3, 9, 2, 2), 3),
                                          ((4, 1, 1), 1)])
def test_pixel_shuffle_matches_torch(device: str, shape, r: int) -> None:
    _compare(device, [shape], lambda x: F.pixel_shuffle(x, r),
             lambda x: TF.pixel_shuffle(x, r))
    out_shape = (*shape[:-3], shape[-3] // (r * r), shape[-2] * r, shape[-1] * r)
    _compare(device, [out_shape], gt.nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r))
    assert repr(gt.nn.PixelShuffle(r)) == repr(torch.nn.PixelShuffle(r))


@pytest.mark.parametrize(("fn", "args"), [("pixel_shuffle", ((1, 6, 2, 2), 2)),
                                          ("pixel_shuffle", ((6, 2), 2)),
                                          ("pixel_unshuffle", ((1, 1, 3, 4), 2)),
                                          ("pixel_shuffle", ((1, 4, 2, 2), 0))])
def test_pixel_shuffle_errors_are_torchs(fn: str, args: tuple) -> None:
    shape, r = args
    with pytest.raises(RuntimeError) as want:
        getattr(TF, fn)(torch.zeros(shape), r)
    with pytest.raises(type(want.value)):
        getattr(F, fn)(gt.zeros(shape), r)


@pytest.mark.parametrize(("values", "classes"), [([0, 2, 1, 2], -1), ([[1, 0], [3, 3]], 5),
                                                 ([], 3)])
def test_one_hot_matches_torch(device: str, values: list, classes: int) -> None:
    got = F.one_hot(gt.tensor(values, dtype=gt.int64, device=device), classes)
    want = TF.one_hot(torch.tensor(values, dtype=torch.int64), classes)
    assert got.dtype is gt.int64 and tuple(got.shape) == tuple(want.shape)
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize(("values", "classes", "dtype", "match"), [
    ([1, -1], -1, "int64", "non-negative"), ([1, 5], 3, "int64", "smaller than num_classes"),
    ([1.0], -1, "float32", "LongTensor"), ([], -1, "int64", "empty tensor")])
def test_one_hot_errors(values, classes, dtype, match) -> None:
    with pytest.raises(RuntimeError, match=match):
        TF.one_hot(torch.tensor(values, dtype=getattr(torch, dtype)), classes)
    with pytest.raises(RuntimeError, match=match):
        F.one_hot(gt.tensor(values, dtype=getattr(gt, dtype)), classes)


# -- distances and normalisation ------------------------------------------------------------
@pytest.mark.parametrize(("kw", "shape"), [({}, (4, 5)), ({"p": 1.0, "dim": 0}, (4, 5)),
                                           ({"dim": -1, "eps": 0.5}, (2, 3, 4))])
def test_normalize_matches_torch(device: str, kw: dict, shape) -> None:
    _compare(device, [shape], lambda x: F.normalize(x, **kw), lambda x: TF.normalize(x, **kw))


@pytest.mark.parametrize(("shapes", "kw"), [([(4, 5), (4, 5)], {}),
                                            ([(3, 1, 6), (1, 4, 6)], {"dim": -1}),
                                            ([(2, 5), (5,)], {"dim": -1, "eps": 1e-3})])
def test_cosine_similarity_matches_torch(device: str, shapes, kw: dict) -> None:
    _compare(device, shapes, lambda a, b: F.cosine_similarity(a, b, **kw),
             lambda a, b: TF.cosine_similarity(a, b, **kw))
    dim = kw.get("dim", 1)
    _compare(device, shapes, gt.nn.CosineSimilarity(dim), torch.nn.CosineSimilarity(dim))


@pytest.mark.parametrize("kw", [{}, {"p": 1.0}, {"p": 3.0, "keepdim": True},
                                {"p": float("inf")}])
def test_pairwise_distance_matches_torch(device: str, kw: dict) -> None:
    _compare(device, [(4, 6), (4, 6)], lambda a, b: F.pairwise_distance(a, b, **kw),
             lambda a, b: TF.pairwise_distance(a, b, **kw))
    _compare(device, [(4, 6), (4, 6)], gt.nn.PairwiseDistance(**kw),
             torch.nn.PairwiseDistance(**kw))


@pytest.mark.parametrize(("shape", "normalized", "eps"), [((3, 4), (4,), None),
                                                          ((2, 3, 4), (3, 4), 1e-3)])
def test_rms_norm_matches_torch(device: str, shape, normalized, eps) -> None:
    _compare(device, [shape, normalized], lambda x, w: F.rms_norm(x, normalized, w, eps),
             lambda x, w: TF.rms_norm(x, normalized, w, eps))
    g_layer, t_layer = gt.nn.RMSNorm(normalized, eps), torch.nn.RMSNorm(normalized, eps)
    assert repr(g_layer) == repr(t_layer)
    assert list(g_layer.state_dict()) == list(t_layer.state_dict())
    g_layer.to(device, gt.float64)
    _compare(device, [shape], g_layer, t_layer.double())
    x32 = np.random.default_rng(3).standard_normal(shape).astype(np.float32)  # eps of float32
    assert_close(F.rms_norm(gt.tensor(x32, device=device), normalized),
                 TF.rms_norm(torch.tensor(x32), normalized), atol=1e-6, rtol=1e-5)
    with pytest.raises(RuntimeError, match="expected input with shape"):
        F.rms_norm(gt.zeros(3, 4), (5,))

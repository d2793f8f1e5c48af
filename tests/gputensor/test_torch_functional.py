"""torch.* spellings of nn functions with PyTorch's native signatures, and the layers added
with them (RReLU, Softmax2d, ChannelShuffle, LocalResponseNorm, AlphaDropout,
FeatureAlphaDropout, F.pdist), against PyTorch on cpu and emulated cuda."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 4, 3, 3))
X2 = RNG.standard_normal((3, 4))
Y2 = RNG.standard_normal((3, 4))
T3 = np.array([1.0, -1.0, 1.0])
W4, B4 = RNG.uniform(0.5, 1.5, 4), RNG.standard_normal(4)
WB = RNG.standard_normal((2, 4, 4))


def _cases():
    """name -> (args built from a tensor maker), deterministic torch.* calls."""
    return {
        "batch_norm": lambda t: (t(X4), t(W4), t(B4), t(np.zeros(4)), t(np.ones(4)), False, 0.1,
                                 1e-5, True),
        "instance_norm": lambda t: (t(X4), t(W4), t(B4), None, None, True, 0.1, 1e-5, True),
        "layer_norm": lambda t: (t(X4), (3, 3), None, None, 1e-5, True),
        "group_norm": lambda t: (t(X4), 2, t(W4), t(B4), 1e-5, True),
        "rms_norm": lambda t: (t(X4), (3,), None, 1e-6),
        "dropout": lambda t: (t(X2), 0.5, False),
        "alpha_dropout": lambda t: (t(X2), 0.5, False),
        "feature_dropout": lambda t: (t(X4), 0.5, False),
        "embedding": lambda t: (t(X2), t(np.array([[0, 2], [1, 1]])), -1),
        "prelu": lambda t: (t(X4), t(np.array([0.25]))),
        "selu": lambda t: (t(X2),), "celu": lambda t: (t(X2), 0.7),
        "threshold": lambda t: (t(X2), 0.1, -3.0), "hardshrink": lambda t: (t(X2), 0.4),
        "rrelu": lambda t: (t(X2), 0.1, 0.3, False),
        "pixel_shuffle": lambda t: (t(X4), 2), "pixel_unshuffle": lambda t: (t(X4[:, :, :2, :2]),
                                                                             2),
        "channel_shuffle": lambda t: (t(X4), 2),
        "constant_pad_nd": lambda t: (t(X2), [1, 2], 0.5),
        "cosine_similarity": lambda t: (t(X2), t(Y2), 1, 1e-8),
        "pairwise_distance": lambda t: (t(X2), t(Y2), 3.0, 1e-6, True),
        "pdist": lambda t: (t(X2), 1.5),
        "bilinear": lambda t: (t(X2), t(Y2), t(WB), None),
        "kl_div": lambda t: (t(X2), t(np.abs(Y2)), 2),
        "margin_ranking_loss": lambda t: (t(X2[:, 0]), t(Y2[:, 0]), t(T3), 0.2, 0),
        "hinge_embedding_loss": lambda t: (t(X2), t(np.sign(Y2)), 1.0, 1),
        "cosine_embedding_loss": lambda t: (t(X2), t(Y2), t(T3), 0.1, 1),
        "poisson_nll_loss": lambda t: (t(X2), t(np.abs(Y2)), True, False, 1e-8, 1),
        "triplet_margin_loss": lambda t: (t(X2), t(Y2), t(X2 * 0.5), 1.0, 2.0, 1e-6, True, 2),
        "binary_cross_entropy_with_logits": lambda t: (t(X2), t((Y2 > 0) * 1.0), None,
                                                       t(np.full(4, 2.0)), 1),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_torch_spellings_match_torch(device, name) -> None:
    make = _cases()[name]
    tt = lambda a: torch.tensor(a)  # noqa: E731
    gg = lambda a: gt.tensor(a, device=device)  # noqa: E731
    want = getattr(torch, name)(*make(tt))
    got = getattr(gt, name)(*make(gg))
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-9,
                               atol=1e-12)


def test_reduction_enum_is_checked() -> None:
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        gt.kl_div(gt.ones(2), gt.ones(2), 5)


@pytest.mark.parametrize("layer,args", [("RReLU", (0.1, 0.3)), ("Softmax2d", ()),
                                        ("ChannelShuffle", (2,)), ("LocalResponseNorm", (3,)),
                                        ("AlphaDropout", (0.3,)),
                                        ("FeatureAlphaDropout", (0.3,))])
def test_layers_match_torch_in_eval_mode(device, layer, args) -> None:
    tm, gm = getattr(torch.nn, layer)(*args), getattr(gt.nn, layer)(*args)
    tm.eval()
    gm.eval()
    assert repr(gm) == repr(tm)
    tx = torch.tensor(X4, requires_grad=True)
    gx = gt.tensor(X4, device=device, requires_grad=True)
    want, got = tm(tx), gm(gx)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    (want * torch.tensor(X4)).sum().backward()
    (got * gt.tensor(X4, device=device)).sum().backward()
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_training_mode_randomness(device) -> None:
    gt.manual_seed(0)
    x = gt.randn(20000, device=device)
    y = F.alpha_dropout(x, 0.2, training=True)
    assert abs(float(y.mean())) < 0.03 and abs(float(y.std()) - 1) < 0.03  # self-normalising
    # feature alpha dropout: a dropped channel is one constant value throughout
    z = F.feature_alpha_dropout(gt.ones(50, 8, 4, device=device), 0.5, training=True)
    spread = (z.amax(-1) - z.amin(-1)).abs().max()
    assert float(spread) < 1e-6 and len(set(z[:, :, 0].flatten().tolist())) == 2
    r = F.rrelu(-gt.ones(10000, device=device), 0.1, 0.3, training=True)
    assert -0.3 <= float(r.min()) and float(r.max()) <= -0.1
    assert abs(float(r.mean()) + 0.2) < 0.01


def test_pdist_gradient(device) -> None:
    tx = torch.tensor(X2, requires_grad=True)
    gx = gt.tensor(X2, device=device, requires_grad=True)
    torch.nn.functional.pdist(tx, 1.5).sum().backward()
    F.pdist(gx, 1.5).sum().backward()
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-9)

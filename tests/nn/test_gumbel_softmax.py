"""F.gumbel_softmax: its samples follow softmax(logits), hard samples are one-hot with the
soft sample's gradient (straight-through), on cpu and emulated cuda."""

from __future__ import annotations

import numpy as np

import gputensor as gt
import gputensor.nn.functional as F


def test_argmax_frequencies_follow_the_softmax(device) -> None:
    gt.manual_seed(0)
    logits = gt.tensor([1.0, 0.0, -1.0, 2.0], device=device)
    samples = F.gumbel_softmax(logits.expand(4000, 4), tau=0.7, hard=True)
    assert samples.device == logits.device
    counts = samples.sum(0).cpu().numpy()
    assert np.array_equal(samples.sum(1).cpu().numpy(), np.ones(4000))  # one-hot rows
    probs = np.exp([1.0, 0.0, -1.0, 2.0])
    probs /= probs.sum()
    # 4000 draws: each frequency within 4 standard deviations of its probability
    sd = np.sqrt(probs * (1 - probs) / 4000)
    assert np.all(np.abs(counts / 4000 - probs) < 4 * sd), (counts / 4000, probs)


def test_hard_samples_carry_the_soft_gradient(device) -> None:
    logits = gt.randn(3, 6, device=device, requires_grad=True)
    w = gt.randn(3, 6, device=device)
    gt.manual_seed(5)
    soft = F.gumbel_softmax(logits, tau=0.5, dim=1)
    (soft * w).sum().backward()
    want = logits.grad.clone()
    logits.grad = None
    gt.manual_seed(5)  # the same noise
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True, dim=1)
    (hard * w).sum().backward()
    np.testing.assert_allclose(logits.grad.cpu().numpy(), want.cpu().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(hard.argmax(1).cpu().numpy(), soft.argmax(1).cpu().numpy())
    np.testing.assert_allclose(soft.sum(1).detach().cpu().numpy(), np.ones(3), rtol=1e-6)

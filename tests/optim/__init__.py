"""Tests of gputensor.optim against torch.optim.

The autograd engine is developed separately, so these tests never call backward(): each step
sets every parameter's ``.grad`` from a fixed function of its current value (computed in NumPy,
identically for both libraries) and compares the parameter trajectories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import gputensor as gt
from tests.helpers import random_array

SHAPES = [(5, 4), (7,), (3, 2, 2)]


def grad_of(x: np.ndarray) -> np.ndarray:
    """A gradient field with a minimum away from 0 and a cubic term (so steps vary)."""
    return (2 * (x - 0.5) + 0.1 * x ** 3).astype(x.dtype)


def make_params(dtype: gt.dtype = gt.float32, shapes: Sequence[tuple[int, ...]] = SHAPES,
                device: str = "cpu") -> tuple[list[gt.Tensor], list[Any]]:
    """The same random leaf parameters in gputensor and in torch."""
    import torch
    arrays = [random_array(s, dtype, seed=i) for i, s in enumerate(shapes)]
    g = [gt.tensor(a, device=device).requires_grad_() for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    return g, t


def set_grads(g_params: Sequence[gt.Tensor], t_params: Sequence[Any],
              fn: Callable[[np.ndarray], np.ndarray] = grad_of) -> None:
    """Each library's params get fn(own current value) as their gradient."""
    import torch
    for gp, tp in zip(g_params, t_params, strict=True):
        gp.grad = gt.tensor(fn(gp.detach().cpu().numpy()), device=gp.device)
        tp.grad = torch.from_numpy(fn(tp.detach().numpy()))


def to_np(x: Any) -> np.ndarray:
    if isinstance(x, gt.Tensor):
        return x.detach().cpu().numpy()
    return x.detach().numpy()


def run_both(g_opt: Any, t_opt: Any, g_params: Sequence[gt.Tensor], t_params: Sequence[Any],
             steps: int = 10) -> None:
    for _ in range(steps):
        set_grads(g_params, t_params)
        g_opt.step()
        t_opt.step()


def assert_params_close(g_params: Sequence[gt.Tensor], t_params: Sequence[Any],
                        rtol: float, atol: float) -> None:
    for i, (gp, tp) in enumerate(zip(g_params, t_params, strict=True)):
        a, e = to_np(gp), to_np(tp)
        assert a.dtype == e.dtype, f"param {i}: dtype {a.dtype} != {e.dtype}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"param {i}")


def assert_states_close(g_opt: Any, t_opt: Any, rtol: float, atol: float) -> None:
    """Every per-param state entry (buffers and step counters) matches torch's."""
    import torch
    gs, ts = g_opt.state_dict()["state"], t_opt.state_dict()["state"]
    assert sorted(gs) == sorted(ts), f"state keys {sorted(gs)} != {sorted(ts)}"
    for idx in ts:
        assert list(gs[idx]) == list(ts[idx]), f"param {idx}: {list(gs[idx])} != {list(ts[idx])}"
        for key, tv in ts[idx].items():
            gv = gs[idx][key]
            if isinstance(tv, torch.Tensor):
                assert isinstance(gv, gt.Tensor), f"param {idx} {key}: not a tensor"
                assert str(tv.dtype).removeprefix("torch.") == gv.dtype.name, \
                    f"param {idx} {key}: dtype {gv.dtype} != {tv.dtype}"
                np.testing.assert_allclose(to_np(gv), to_np(tv), rtol=rtol, atol=atol,
                                           err_msg=f"param {idx} state {key}")
            else:
                assert gv == tv, f"param {idx} {key}: {gv} != {tv}"

"""The CPU's one-pass matrix product (kernels/cpu/linalg.py ``_gemm_lane``, taken by matmul and
mm for CPU float32/float64 matrices BLAS reads as they are): the planned call's bits, the
planned call's errors and gradients for everything else, and never past a profiler."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.registry import BACKENDS

LANE = BACKENDS["cpu", "strided"].kernel("_gemm").lane


def _planned(a: gt.Tensor, b: gt.Tensor) -> gt.Tensor:
    out = gt.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    return gt.mm(a, b, out=out)   # out= never takes the lane


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "row-slice"])
def test_lane_gives_the_planned_bits(dtype: gt.dtype, layout: str) -> None:
    rng = np.random.default_rng(0)
    a = gt.tensor(rng.standard_normal((7, 5)), dtype=dtype)
    b = gt.tensor(rng.standard_normal((5, 3)), dtype=dtype)
    if layout == "transposed":
        a = gt.tensor(rng.standard_normal((5, 7)), dtype=dtype).t()
    elif layout == "row-slice":
        b = gt.tensor(rng.standard_normal((5, 6)), dtype=dtype)[:, :3]
    got = LANE(a, b)
    assert got is not None and got.dtype is dtype and got.shape == (7, 3)
    np.testing.assert_array_equal(got.numpy(), _planned(a, b).numpy())
    np.testing.assert_array_equal((a @ b).numpy(), got.numpy())
    np.testing.assert_array_equal(gt.mm(a, b).numpy(), got.numpy())


def test_lane_declines_what_the_plan_handles() -> None:
    a, b = gt.ones(4, 3), gt.ones(3, 2)
    assert LANE(a, b.double()) is None                    # mixed dtypes: the plan's error
    assert LANE(a.half(), b.half()) is None               # computed in float32 by the kernel
    assert LANE(a.int(), b.int()) is None
    assert LANE(a, gt.ones(3)) is None and LANE(gt.ones(2, 4, 3), b) is None
    assert LANE(a, gt.ones(4, 2)) is None                 # the plan names the shapes
    assert LANE(gt.ones(0, 3), b) is None and LANE(gt.ones(4, 0), gt.ones(0, 2)) is None
    assert LANE(gt.ones(4, 6)[:, ::2], b) is None         # NumPy would not call BLAS
    assert LANE(a, 2.0) is None
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        a @ gt.ones(4, 2)
    with pytest.raises(RuntimeError, match="same dtype"):
        gt.mm(a, b.double())
    np.testing.assert_array_equal((gt.ones(4, 0) @ gt.ones(0, 2)).numpy(), np.zeros((4, 2)))


def test_lane_products_record_the_planned_gradients() -> None:
    rng = np.random.default_rng(1)
    av, bv = rng.standard_normal((6, 4)), rng.standard_normal((4, 5))
    grads = []
    for lane_layout in (True, False):
        a = gt.tensor(av, requires_grad=True)
        b = gt.tensor(bv, requires_grad=True)
        if lane_layout:
            y = a @ b
        else:   # the same values in a layout the lane declines: the planned product
            strided = gt.zeros(6, 8, dtype=a.dtype)[:, ::2].copy_(a)
            assert LANE(strided, b) is None
            y = strided @ b
        assert type(y.grad_fn).__name__ == "MatmulBackward0"
        (y * gt.tensor(np.arange(30.0).reshape(6, 5))).sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


def test_profiler_sees_products_after_the_lane_was_used() -> None:
    x, w = gt.randn(8, 4), gt.randn(4, 3)
    x @ w   # loads the lane
    with gt.profiler.profile() as prof:
        x @ w
        gt.mm(x, w)
    names = [e.name for e in prof.events() if e.name == "_gemm"]
    assert len(names) == 2
    x @ w   # and the lane again after it

"""nansum of a float input into an integral or bool dtype drops the NaNs before the cast, as
PyTorch does (fuzz seed 13311: the cast came first, so a NaN summed as INT_MIN or True); an
integral out= without dtype= is refused as PyTorch's float kernel refuses it."""

from __future__ import annotations

import pytest

import gputensor as gt
from tests.helpers import torch

NAN = float("nan")


@pytest.mark.parametrize("values, dtype", [([NAN], "bool"), ([NAN, 1.0], "bool"),
                                           ([NAN, 2.5], "int32"), ([NAN, 2.5, 0.7], "int64"),
                                           ([[NAN, 2.5], [1.5, NAN]], "int16"),
                                           ([NAN, 2.5], "float64")])
@pytest.mark.parametrize("source", ["float16", "float32", "float64"])
def test_nansum_into_integral_dtypes(device, values, dtype, source) -> None:
    g = gt.tensor(values, dtype=getattr(gt, source), device=device)
    t = torch.tensor(values, dtype=getattr(torch, source))
    want, got = torch.nansum(t, dtype=getattr(torch, dtype)), gt.nansum(g, dtype=getattr(gt,
                                                                                      dtype))
    assert got.dtype == getattr(gt, dtype) and got.item() == want.item()
    want, got = torch.nansum(t, 0, dtype=getattr(torch, dtype)), \
        gt.nansum(g, 0, dtype=getattr(gt, dtype))
    assert got.cpu().tolist() == want.tolist()


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_nansum_integral_out_without_dtype_is_refused(device, dtype) -> None:
    x = gt.tensor([NAN, 3.5], device=device)
    with pytest.raises(NotImplementedError, match=f"\"nansum_{x.device.type}\" not implemented "
                                                   f"for '{getattr(gt, dtype).legacy_name}'"):
        gt.nansum(x, out=gt.empty((), dtype=getattr(gt, dtype), device=device))
    with pytest.raises(NotImplementedError):
        torch.nansum(torch.tensor([NAN, 3.5]), out=torch.empty((), dtype=getattr(torch, dtype)))
    out = gt.empty((), dtype=gt.int32, device=device)
    gt.nansum(x, dtype=gt.int32, out=out)
    assert out.item() == 3

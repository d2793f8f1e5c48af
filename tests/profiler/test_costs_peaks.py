"""The cost models' arithmetic and the device peaks (overrides, datasheets, the cached
measurement, the roofline formula)."""

from __future__ import annotations

import json
import math

import pytest

import gputensor as gt
from gputensor.profiler import peaks as peaks_module
from gputensor.profiler.costs import kernel_cost
from gputensor.profiler.peaks import Peaks, datasheet_peaks, device_peaks, roofline_fraction

F32 = 4


def zeros(*shape):
    return gt.zeros(*shape)


# -- costs -------------------------------------------------------------------------------------
def test_gemm_cost_counts_2mnk_per_batch_plus_the_add_pass():
    out, a, b, c = zeros(3, 64, 16), zeros(3, 64, 32), zeros(3, 32, 16), zeros(16)
    moved, flops = kernel_cost("_gemm", [out, a, b, None, 0, 1])
    assert flops == 3 * 2 * 64 * 16 * 32
    assert moved == (out.numel() + a.numel() + b.numel()) * F32
    moved, flops = kernel_cost("_gemm", [out, a, b, c, 1, 1])
    assert flops == 3 * 2 * 64 * 16 * 32 + 2 * out.numel()
    assert moved == (out.numel() + a.numel() + b.numel() + 16) * F32


def test_conv2d_costs_forward_and_both_gradients():
    x, w, bias = zeros(2, 3, 8, 8), zeros(4, 3, 3, 3), zeros(4)
    out = zeros(2, 4, 6, 6)
    taps = 3 * 3 * 3
    moved, flops = kernel_cost("_conv2d", [out, x, w, bias, (1, 1), (0, 0), (1, 1), 1])
    assert flops == 2 * out.numel() * taps + out.numel()
    assert moved == (out.numel() + x.numel() + w.numel() + 4) * F32
    _, flops = kernel_cost("_conv2d_input_backward", [x, out, w, (1, 1), (0, 0), (1, 1), 1])
    assert flops == 2 * out.numel() * taps
    _, flops = kernel_cost("_conv2d_weight_backward", [w, out, x, (1, 1), (0, 0), (1, 1), 1])
    assert flops == 2 * out.numel() * taps


def test_einsum_cost_is_the_naive_contraction():
    a, b, out = zeros(5, 7), zeros(7, 3), zeros(5, 3)
    moved, flops = kernel_cost("einsum", [out, [a, b], "ij,jk->ik", gt.float32])
    assert flops == 2 * 5 * 7 * 3
    assert moved == (5 * 7 + 7 * 3 + 5 * 3) * F32
    _, flops = kernel_cost("einsum", [zeros(()), [a], "ij->", gt.float32])
    assert flops == 5 * 7


def test_norm_softmax_and_reduction_costs_count_the_input():
    x = zeros(4, 10)
    out, mean, rstd = zeros(4, 10), zeros(10), zeros(10)
    _, flops = kernel_cost("_batch_norm", [out, mean, rstd, x, None, None, None, None, 0.1,
                                           1e-5, (4, 10, 1)])
    assert flops == 8 * x.numel()
    _, flops = kernel_cost("softmax", [out, x, 1, False])
    assert flops == 5 * x.numel()
    moved, flops = kernel_cost("sum", [zeros(()), x, (0, 1)])
    assert (moved, flops) == ((40 + 1) * F32, 40)


def test_elementwise_kernels_use_the_op_declaration():
    a, b, out = zeros(100), zeros(100), zeros(100)
    assert kernel_cost("add", [out, [a, b], (1,), gt.float32]) == (300 * F32, 100)
    # a kernel the registry does not know: bytes only
    assert kernel_cost("not_a_kernel", [out, a]) == (200 * F32, 0)


def test_fused_optimizer_costs():
    params, grads = [zeros(10), zeros(5)], [zeros(10), zeros(5)]
    bufs = [zeros(10), zeros(5)]
    moved, flops = kernel_cost("_fused_sgd", [params, grads, bufs, [True, True]],
                               kwargs=dict(lr=0.1, momentum=0.9, dampening=0.0,
                                           weight_decay=0.0, nesterov=False, maximize=False))
    assert flops == (2 + 3) * 15
    assert moved == (2 * 15 + 2 * 15 + 15) * F32
    _, flops = kernel_cost("_fused_sgd", [params, grads, [None, None], [True, True]],
                           kwargs=dict(lr=0.1, momentum=0.0, weight_decay=0.01))
    assert flops == (2 + 2) * 15


# -- peaks -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,model", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM5"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM4"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"), ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
])
def test_datasheet_lookup(name, model):
    found = datasheet_peaks(name)
    assert found is not None and found.source.endswith(model)
    assert found.flops_per_s > 1e12 and found.bandwidth_bytes_per_s > 1e11


def test_datasheet_knows_nothing_of_the_emulator_or_unknown_gpus():
    assert datasheet_peaks("gputensor CUDA emulator (CPU)") is None
    assert datasheet_peaks("Some Future GPU") is None


def test_roofline_fraction_picks_the_binding_limit():
    p = Peaks(bandwidth_bytes_per_s=1e9, flops_per_s=1e10, source="test")
    # memory bound (AI = 1 flop/byte < ridge 10): 1e9 bytes in 2 s is half the bandwidth
    assert math.isclose(roofline_fraction(p, 1e9, 1e9, 2.0), 0.5)
    # compute bound (AI = 100): 1e10 flops in 4 s is a quarter of the peak
    assert math.isclose(roofline_fraction(p, 1e8, 1e10, 4.0), 0.25)
    assert math.isclose(p.attainable_flops(1.0), 1e9)
    assert math.isnan(roofline_fraction(p, 0, 0, 1.0))


def test_set_device_peaks_overrides_and_validates():
    gt.profiler.set_device_peaks("cpu", bandwidth=5e9, flops=7e9)
    assert device_peaks("cpu") == Peaks(5e9, 7e9, "user override")
    gt.profiler.set_device_peaks("cpu", flops=3e9)  # the other one from below (the fixture's)
    assert device_peaks("cpu").flops_per_s == 3e9
    with pytest.raises(ValueError, match="bandwidth must be a positive number"):
        gt.profiler.set_device_peaks("cpu", bandwidth=-1)
    with pytest.raises(ValueError, match="flops"):
        gt.profiler.set_device_peaks("cpu", flops=float("nan"))


def test_measured_peaks_are_cached_per_device_and_host(tmp_path, monkeypatch):
    cache = tmp_path / "device_peaks.json"
    monkeypatch.setattr(peaks_module, "_cache_file", lambda: cache)
    gt.profiler.set_device_peaks("cpu")  # drop the fixture's override
    monkeypatch.setattr(peaks_module, "_known", {})
    measured = device_peaks("cpu")
    assert measured.source.startswith("measured (CPU): copy of ")
    assert int(measured.source.split("copy of ")[1].split()[0]) * (1 << 20) >= \
        4 * peaks_module.last_level_cache_bytes()  # DRAM, not the caches
    assert measured.bandwidth_bytes_per_s > 0 and measured.flops_per_s > 0
    table = json.loads(cache.read_text())
    (key,) = table
    assert key.startswith(peaks_module.device_name(gt.device("cpu")) + " @ ")
    assert table[key]["bandwidth_bytes_per_s"] == measured.bandwidth_bytes_per_s
    assert [p.name for p in tmp_path.iterdir()] == ["device_peaks.json"]  # written atomically
    # a later process reads the file instead of measuring again
    monkeypatch.setattr(peaks_module, "_known", {})
    monkeypatch.setattr(peaks_module, "measure_peaks",
                        lambda *a: pytest.fail("measured twice"))
    assert device_peaks("cpu") == measured
    # ... until the entry is a day old (or the machine's core count changed)
    table[key]["measured_at"] -= peaks_module.MAX_AGE_S + 1
    cache.write_text(json.dumps(table))
    monkeypatch.setattr(peaks_module, "_known", {})
    monkeypatch.setattr(peaks_module, "measure_peaks", lambda *a: measured)
    assert device_peaks("cpu") == measured
    assert json.loads(cache.read_text())[key]["measured_at"] > table[key]["measured_at"]


@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs a cuda device (the emulator)")
def test_emulator_peaks_are_measured(tmp_path, monkeypatch):
    if "emulator" not in gt.cuda.get_device_name():
        pytest.skip("a real GPU answers from the datasheet")
    monkeypatch.setattr(peaks_module, "_cache_file", lambda: tmp_path / "device_peaks.json")
    gt.profiler.set_device_peaks("cuda:0")
    monkeypatch.setattr(peaks_module, "_known", {})
    found = device_peaks("cuda")
    assert found.source == "measured (CUDA emulator)"
    assert found.bandwidth_bytes_per_s > 0 and found.flops_per_s > 0

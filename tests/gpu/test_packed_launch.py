"""The CuPy driver's direct launch (cupy_driver.PackedArgs): after a kernel's first launch on a
thread (through CuPy's Function), its arguments go to cuLaunchKernel as one parameter buffer
in the CUDA ABI's layout. Only hardware says whether that layout is the one the compiled kernel
reads: a kernel with every scalar type, in an order that needs padding, writes back what it
received, launched through both paths, on the default and a side stream, and from a second
thread."""

from __future__ import annotations

import threading

import numpy as np

import gputensor as gt
from gputensor.kernels.cuda import device
from gputensor.kernels.cuda.device import NVRTC_OPTIONS

_SRC = r"""#include <cuda_fp16.h>
extern "C" __global__ void every(double* o, signed char i8, const float* x, float f, short i16,
                                 double d, bool flag, int i32, unsigned char u8, long long i64,
                                 __half h, unsigned u32, unsigned long long u64) {
    o[0] = f; o[1] = d; o[2] = i32; o[3] = u32; o[4] = (double)i64; o[5] = (double)u64;
    o[6] = i16; o[7] = u8; o[8] = i8; o[9] = flag; o[10] = __half2float(h);
    o[11] = x == nullptr ? -1.0 : 1.0;
}
extern "C" __global__ void tail(double* o, double d, int v) { o[0] = d; o[1] = v; }
"""


def _values(x: object) -> list:
    # o, i8, x, f, i16, d, flag, i32, u8, i64, h, u32, u64
    return [None, -7, x, 0.1, -300, 1 / 3, True, -5, 200, -(2**40), 0.5, 2**32 - 1, 2**53 + 2]


_WANT = [np.float32(0.1), 1 / 3, -5, 2**32 - 1, -(2**40), 2**53 + 2, -300, 200, -7, 1, 0.5]


def test_both_launch_paths_pass_every_scalar_type_as_the_kernel_reads_it() -> None:
    rt = device.runtime()
    kern = rt.get_kernel(rt.compile(_SRC, "gpu_packed_every", options=NVRTC_OPTIONS), "every")
    assert kern.packed is not None and kern.packed.owner is None
    out = gt.zeros(4, 12, dtype=gt.float64, device="cuda")
    x = gt.ones(4, device="cuda")
    side = gt.cuda.Stream()

    def launch(row: int, with_x: bool) -> None:
        args = _values(device.ptr(x) if with_x else None)
        args[0] = device.ptr(out[row])
        rt.launch(kern, 1, 1, 0, args)

    launch(0, True)                 # CuPy's Function: the thread becomes the buffer's owner
    assert kern.packed.owner == threading.get_ident()
    launch(1, False)                # packed
    with gt.cuda.stream(side):
        launch(2, True)             # packed, on the side stream (the current one)
    worker = threading.Thread(target=launch, args=(3, False))  # Function again
    worker.start()
    worker.join()
    got = out.cpu().numpy()
    for row, flag in ((0, 1.0), (1, -1.0), (2, 1.0), (3, -1.0)):
        np.testing.assert_array_equal(got[row, :11], np.array(_WANT, np.float64), f"row {row}")
        assert got[row, 11] == flag, row


def test_a_kernel_ending_in_a_narrow_parameter_launches_packed() -> None:
    """The buffer's size is the end of its last parameter (no tail padding: the driver refuses
    a padded one with "too many resources requested for launch")."""
    rt = device.runtime()
    kern = rt.get_kernel(rt.compile(_SRC, "gpu_packed_tail", options=NVRTC_OPTIONS), "tail")
    out = gt.zeros(3, 2, dtype=gt.float64, device="cuda")
    for row in range(3):  # Function, then packed twice
        rt.launch(kern, 1, 1, 0, [device.ptr(out[row]), 0.5 * row, row - 7])
    assert out.cpu().tolist() == [[0.0, -7.0], [0.5, -6.0], [1.0, -5.0]]


def test_elementwise_ops_run_packed_after_their_first_launch() -> None:
    a = gt.arange(1000, dtype=gt.float32, device="cuda")
    want = (np.arange(1000, dtype=np.float32) * 0.5 + 3).tolist()
    for _ in range(3):  # the first launch goes through Function, the others are packed
        assert (a * 0.5 + 3).cpu().tolist() == want
        assert float(a.sum()) == 499500.0

"""Kernel arguments packed as bytes, the layout prepared once per kernel from its parameters.

Both drivers hand a launch's arguments to the kernel as one blob: the emulator in 8-byte slots
(emulator/launch.py), a GPU in the CUDA ABI's parameter layout (each parameter at its natural
alignment), given to ``cuLaunchKernel`` as one buffer (cupy_driver.py). A launch is a type test
per argument and one ``struct`` pack. The types that pass the test are those for which struct
packs every value exactly as ``scalar_value`` converts it, or raises (an integer out of range,
a float overflowing float32 / float16), sending the launch down the checked path for the error.
"""

from __future__ import annotations

import struct

import numpy as np

from .runtime import BFLOAT16, SCALAR_DTYPES, Param

_NP_INTS = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
_NP_FLOATS = (np.float16, np.float32, np.float64)
# bool is an int to scalar_value, but not a real number.
FAST_INT = frozenset((int, bool, *_NP_INTS))
FAST_REAL = frozenset((float, int, *_NP_FLOATS, *_NP_INTS))
FAST_BOOL = frozenset((bool, np.bool_))
NO_FAST: frozenset = frozenset()

# struct codes of the scalar C types (by NumPy dtype name); 16-bit floats below
CODES = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
         "int64": "q", "uint64": "Q", "float32": "f", "float64": "d", "bool": "?"}
HALF = "e"    # struct rounds a number to IEEE binary16 (OverflowError past its range)
BITS16 = "H"  # a 16-bit float's bit pattern (what scalar_value returns for them)


def fast_scalar_types(p: Param) -> frozenset:
    """The argument types scalar parameter ``p`` packs without ``scalar_value``."""
    dtype = SCALAR_DTYPES.get(p.base)
    if dtype is None or dtype == BFLOAT16:
        return NO_FAST  # always checked by scalar_value (which converts or explains)
    if dtype == np.bool_:
        return FAST_BOOL
    return FAST_INT if dtype.kind in "iu" else FAST_REAL


def code(p: Param, exact: bool) -> str:
    """``p``'s struct code: pointers as 64-bit addresses; with ``exact``, for the values
    ``scalar_value`` returns (16-bit floats as bit patterns), else for raw Python numbers."""
    if p.pointer:
        return "Q"
    dtype = SCALAR_DTYPES.get(p.base)
    if dtype is None:
        return "Q"  # never packed: scalar_value refuses the type first
    if dtype.itemsize == 2 and dtype.kind not in "iu":  # __half, bfloat16
        return BITS16 if exact or dtype == BFLOAT16 else HALF
    return CODES[dtype.name]


def cuda_format(params: tuple[Param, ...], exact: bool) -> str:
    """The struct format of the CUDA ABI's parameter buffer: each parameter at a multiple of
    its size (its alignment: every kernel parameter type here is a power-of-two size up to 8
    bytes), and NO tail padding: cuLaunchKernel takes the buffer's size as the end of the last
    parameter and refuses a larger one ("too many resources requested for launch" on an H200
    for a kernel ending in an int; LLVM's offload runtime met the same, llvm-project#156229)."""
    fmt, offset = "<", 0
    for p in params:
        c = code(p, exact)
        size = struct.calcsize(c)
        pad = -offset % size
        fmt += "x" * pad + c
        offset += pad + size
    return fmt

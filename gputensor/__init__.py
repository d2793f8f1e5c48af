"""gputensor: a PyTorch-shaped tensor runtime (Numba on the CPU, CuPy RawKernels on NVIDIA GPUs).

The init sequence follows torch/__init__.py: dtypes, layouts and devices; storage classes and
the copy-function table; backends and legacy tensor types; the op namespace; submodules.
Kernels compile lazily on first use, so importing compiles nothing.
"""

from __future__ import annotations

import builtins as _builtins
import math as _math


# 1. dtype registry ------------------------------------------------------------------------------
from gputensor import _dtype
from gputensor._dtype import (
    bfloat16,
    can_cast,
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    dtype,
    finfo,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    set_default_dtype,
    short,
    uint8,
)
from gputensor._dtype import bool as bool  # noqa: A004 - PyTorch's public name
from gputensor._dtype import float as float  # noqa: A004
from gputensor._dtype import int as int  # noqa: A004

# PyTorch's limited-support dtypes (gt.uint16, gt.float8_e4m3fn, gt.int4, gt.bits8, ...).
globals().update({_d.name: _d for _d in _dtype.LIMITED_DTYPES})

# 2. layouts and devices -------------------------------------------------------------------------
from gputensor._layout import (
    layout,
    sparse_bsc,
    sparse_bsr,
    sparse_coo,
    sparse_csc,
    sparse_csr,
    strided,
)
from gputensor._device import device, get_default_device, set_default_device
from gputensor._size import Size

# 3-4. storages and the copy-function table ------------------------------------------------------
from gputensor.storage.untyped import UntypedStorage
from gputensor.storage.typed import STORAGE_TYPES, TypedStorage

globals().update({cls.__name__: cls for (_dt, _dev), cls in STORAGE_TYPES.items()
                  if _dev == "cpu"})

# 5. backends, kernels and legacy tensor types ---------------------------------------------------
from gputensor.kernels import registry as _registry
from gputensor.kernels import cpu as _cpu_backend  # registers the CPU kernels
from gputensor._tensor import Tensor
from gputensor._legacy import types_in as _types_in

globals().update(_types_in("gputensor"))

# 6. the op namespace: every registered op becomes gt.<name> ------------------------------------
from gputensor import _ops
from gputensor._ops import public_ops as _public_ops
from gputensor._random import (Generator, default_generator, get_rng_state, initial_seed,
                               manual_seed, seed, set_rng_state)
from gputensor._size import broadcast_shapes
from gputensor._ops._core import result_type as _result_type
from gputensor._tensor_str import get_printoptions, printoptions, set_printoptions

globals().update(_public_ops())
# torch's private samplers that torch.distributions calls (torch._standard_gamma, ...).
from gputensor._ops.sampling import PRIVATE_FUNCTIONS as _private_samplers  # noqa: E402

globals().update(_private_samplers)


def result_type(tensor1: object, tensor2: object) -> dtype:
    """The dtype an op over these two tensors/scalars would produce (PyTorch's rules)."""
    return _result_type(tensor1, tensor2)


def is_tensor(obj: object) -> _builtins.bool:
    return isinstance(obj, Tensor)


def is_storage(obj: object) -> _builtins.bool:
    return isinstance(obj, TypedStorage | UntypedStorage)


def is_floating_point(input: Tensor) -> _builtins.bool:
    return input.is_floating_point()


def is_complex(input: Tensor) -> _builtins.bool:
    return input.is_complex()


def numel(input: Tensor) -> _builtins.int:
    return input.numel()


from gputensor._memory_format import (  # noqa: E402
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
    preserve_format,
)

# PyTorch's constants (torch.inf, torch.pi, ...; newaxis is None, as in NumPy).
inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
newaxis = None


from gputensor._threads import (  # noqa: E402
    get_num_interop_threads,
    get_num_threads,
    set_num_interop_threads,
    set_num_threads,
)


# 7. submodules in dependency order ---------------------------------------------------------------
from gputensor import autograd, backends, cuda, return_types, sparse  # noqa: E402
from gputensor import amp, cpu  # noqa: E402
from gputensor.amp.fused_ops import (  # noqa: E402
    _amp_foreach_non_finite_check_and_unscale_,
    _amp_update_scale_,
)
from gputensor.amp.autocast_mode import (  # noqa: E402
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from gputensor import accelerator  # noqa: E402
from gputensor._determinism import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    is_deterministic_algorithms_warn_only_enabled,
    use_deterministic_algorithms,
)
from gputensor.backends.cuda import (  # noqa: E402
    get_float32_matmul_precision,
    set_float32_matmul_precision,
)
from gputensor.sparse import sparse_coo_tensor  # noqa: E402
from gputensor.sparse._compressed_construct import (  # noqa: E402
    ccol_indices_copy,
    col_indices_copy,
    crow_indices_copy,
    row_indices_copy,
    sparse_bsc_tensor,
    sparse_bsr_tensor,
    sparse_compressed_tensor,
    sparse_csc_tensor,
    sparse_csr_tensor,
)
from gputensor import serialization  # noqa: E402
from gputensor.serialization import load, save  # noqa: E402
from gputensor import nn, optim, utils  # noqa: E402
from gputensor.nn.modules.module import typename  # noqa: E402
from gputensor import datasets  # noqa: E402
from gputensor import profiler  # noqa: E402
from gputensor import library  # noqa: E402
from gputensor import random  # noqa: E402  (torch.random's names)
from gputensor import fft, linalg, special  # noqa: E402
from gputensor import compiler  # noqa: E402
from gputensor import onnx  # noqa: E402  (imports the onnx package only to export)
from gputensor import testing  # noqa: E402
from gputensor import distributions, func, multiprocessing  # noqa: E402
from gputensor._interop import asarray, from_dlpack  # noqa: E402
from gputensor import distributed  # noqa: E402
from gputensor.compiler import compile  # noqa: E402
from gputensor.func import vmap  # noqa: E402  (torch.vmap)
from gputensor.library import ops  # noqa: E402
from gputensor.autograd import (  # noqa: E402
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

_HANDWRITTEN = [
    *(_d.name for _d in _dtype.LIMITED_DTYPES),
    "dtype", "finfo", "iinfo", "promote_types", "result_type", "can_cast", "get_default_dtype",
    "set_default_dtype", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64", "complex64", "complex128", "bool", "float", "double", "half", "long",
    "int", "short", "cfloat", "cdouble", "layout", "strided", "sparse_coo", "device",
    "get_default_device", "set_default_device", "Size", "Tensor", "TypedStorage",
    "UntypedStorage", "broadcast_shapes", "is_tensor", "is_storage", "is_floating_point",
    "is_complex", "numel", "set_printoptions", "get_printoptions", "printoptions", "autograd",
    "cuda", "sparse", "return_types", "no_grad", "enable_grad", "set_grad_enabled",
    "inference_mode", "is_grad_enabled", "is_inference_mode_enabled",
    "Generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
    "default_generator", "save", "load", "serialization", "nn", "optim", "utils",
    "datasets", "sparse_coo_tensor", "backends", "get_float32_matmul_precision",
    "set_float32_matmul_precision", "library", "ops", "accelerator", "inf", "nan", "pi", "e",
    "newaxis", "set_num_threads", "get_num_threads", "set_num_interop_threads",
    "get_num_interop_threads", "compile", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format",
    "amp", "cpu", "autocast", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
    "set_autocast_dtype", "clear_autocast_cache", "typename", "multiprocessing", "asarray",
    "from_dlpack", "distributed",
]
_HANDWRITTEN += ["vmap"]
_HANDWRITTEN += [  # the sparse compressed layouts (gputensor/sparse/compressed.py)
    "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "sparse_compressed_tensor",
    "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor",
    "crow_indices_copy", "col_indices_copy", "ccol_indices_copy", "row_indices_copy",
]
# Process switches, legacy autocast switches, sym_* helpers, futures, cond, Stream/Event, errors.
from gputensor import futures  # noqa: E402
from gputensor._toplevel_extras import NAMES as _extras  # noqa: E402

globals().update(_extras)
_HANDWRITTEN += ["futures", *_extras]
_HANDWRITTEN += [c.__name__ for (_dt, _dev), c in STORAGE_TYPES.items() if _dev == "cpu"]
_HANDWRITTEN += list(_types_in("gputensor"))
# torch.exp_(x)-style in-place functions and the *_copy variants of the views.
from gputensor._function_forms import function_forms as _function_forms  # noqa: E402

_forms = {k: v for k, v in _function_forms().items() if k not in globals()}  # ops win
globals().update(_forms)
_HANDWRITTEN += list(_forms)
# torch.* spellings of nn functions with PyTorch's native signatures (torch.batch_norm, ...).
from gputensor._torch_functional import FUNCTIONS as _torch_functions  # noqa: E402
from gputensor._torch_native_nn import FUNCTIONS as _native_nn  # noqa: E402
from gputensor._torch_native_rnn import FUNCTIONS as _native_rnn  # noqa: E402
from gputensor._torch_syncbn import FUNCTIONS as _syncbn  # noqa: E402

_torch_functions = {**_torch_functions, **_native_nn, **_native_rnn, **_syncbn}
_torch_functions = {k: v for k, v in _torch_functions.items() if k not in globals()}
globals().update(_torch_functions)
_HANDWRITTEN += list(_torch_functions)
# torch.frombuffer, from_file, set_default_tensor_type, is_inference, smm, hspmm, ...
from gputensor._misc_functions import functions as _misc_functions  # noqa: E402

_misc = {k: v for k, v in _misc_functions().items() if k not in globals()}
globals().update(_misc)
_HANDWRITTEN += list(_misc)
# Computed like the seed's _VariableFunctions loop: hand-written names plus every public op.
__all__ = sorted(set(_HANDWRITTEN) | set(_public_ops()))

del _dtype

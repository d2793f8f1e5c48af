"""Parameter initialisation (torch.nn.init): fill tensors in place, without recording a graph.

Random fills draw from gputensor's generators (``generator=`` or the default one), so a seed
reproduces them. The two schemes that need math the op set lacks (erfinv for trunc_normal_, QR
for orthogonal_) sample on the tensor's device and finish on the host with NumPy/SciPy, which
is fine for a one-off initialisation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import gputensor as gt
from gputensor._tensor import Tensor

_LINEAR_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: int | float | None = None) -> float:
    """The recommended gain for a nonlinearity (scales the std of the init schemes)."""
    if nonlinearity in _LINEAR_GAIN:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, int | float) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4  # PyTorch's empirically chosen value
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight laid out as (out, in, *kernel)."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _host(t: Tensor) -> np.ndarray:
    """A float host copy (float64 for float64 tensors, float32 otherwise) to compute on."""
    arr = t.detach().cpu().numpy()
    return arr.astype(np.float64 if arr.dtype == np.float64 else np.float32)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: gt.Generator | None = None) -> Tensor:
    """Fill with samples from U(a, b)."""
    with gt.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: gt.Generator | None = None) -> Tensor:
    """Fill with samples from N(mean, std^2)."""
    with gt.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: gt.Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2) samples truncated to [a, b] by rejection, PyTorch's algorithm and
    draw order (so a seeded mt19937 stream gives PyTorch's numbers), on the tensor's device."""
    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    with gt.no_grad():
        if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
            # Most normal draws land in [a, b]: redraw only the ones outside.
            # The bounds as the tensor's dtype rounds them, as PyTorch compares.
            lo, hi = (gt.tensor(v, dtype=tensor.dtype).item() for v in (a, b))
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                outside = (result < lo) | (result > hi)
                if not outside.any():
                    break
                redraw = gt.empty_like(result).normal_(mean, std, generator=generator)
                result = gt.where(outside, redraw, result)
        else:
            # A narrow window: uniform proposals on [a, b] accepted with the normal's density
            # relative to its peak inside the window (log u <= log density - log peak).
            peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2

            def log_ratio(x: Tensor) -> Tensor:
                return ((x - mean) / std).pow(2).mul(-0.5).sub(peak)

            result = tensor.uniform_(a, b, generator=generator)
            u = gt.empty_like(tensor)
            pending = u.uniform_(generator=generator).log().gt(log_ratio(result))
            while pending.any():
                proposal = gt.empty_like(tensor).uniform_(a, b, generator=generator)
                result = gt.where(pending, proposal, result)
                pending = gt.where(pending, u.uniform_(generator=generator).log()
                                   .gt(log_ratio(proposal)), pending)
        if result is not tensor:
            tensor.copy_(result)
        return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    with gt.no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    with gt.no_grad():
        return tensor.zero_()


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with gt.no_grad():
        tensor.zero_()
        tensor.diagonal().fill_(1)
    return tensor


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D conv weight so the convolution is the identity (per group)."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_ch, in_ch, *kernel = tensor.shape
    if out_ch % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out_ch // groups
    n = min(per_group, in_ch)
    with gt.no_grad():
        tensor.zero_()
        d = np.arange(n)
        rows = (np.arange(groups)[:, None] * per_group + d).reshape(-1)
        cols = np.tile(d, groups)
        centre = tuple(gt.full((rows.size,), k // 2, dtype=gt.int64) for k in kernel)
        index = (gt.from_numpy(rows), gt.from_numpy(cols), *centre)
        tensor.index_put_(index, gt.ones((), dtype=tensor.dtype, device=tensor.device))
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: gt.Generator | None = None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: gt.Generator | None = None) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: gt.Generator | None = None) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: gt.Generator | None = None) -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator: gt.Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix over (size(0), rest), scaled by ``gain`` (Saxe et al.)."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with gt.no_grad():
        sample = gt.empty((rows, cols), dtype=tensor.dtype, device=tensor.device)
        sample.normal_(0.0, 1.0, generator=generator)
        flat = _host(sample)
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        # Fix the signs so Q is uniformly distributed (QR is unique only up to them).
        q *= np.sign(np.diagonal(r))
        if rows < cols:
            q = q.T
        q = np.ascontiguousarray(q * gain)
        return tensor.copy_(gt.from_numpy(q).view(tuple(tensor.shape)))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01,
            generator: gt.Generator | None = None) -> Tensor:
    """N(0, std^2) in a 2-D tensor with ceil(sparsity * rows) zeros in every column."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with gt.no_grad():
        tensor.normal_(0.0, std, generator=generator)
        if num_zeros:
            # A random permutation per column: argsort of uniform keys, first num_zeros rows.
            keys = gt.empty((rows, cols), dtype=gt.float32, device=tensor.device)
            keys.uniform_(generator=generator)
            zero_rows = keys.argsort(dim=0)[:num_zeros]
            tensor.scatter_(0, zero_rows, 0.0)
    return tensor


def _deprecated_alias(meth: Callable[..., Any]) -> Callable[..., Any]:
    """PyTorch's old non-underscore names (``init.normal``...): the in-place initialiser, with
    PyTorch's deprecation warning."""
    new_name, old_name = meth.__name__, meth.__name__[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"Deprecated: use ``{new_name}``."
    return deprecated_init


uniform = _deprecated_alias(uniform_)
normal = _deprecated_alias(normal_)
constant = _deprecated_alias(constant_)
eye = _deprecated_alias(eye_)
dirac = _deprecated_alias(dirac_)
xavier_uniform = _deprecated_alias(xavier_uniform_)
xavier_normal = _deprecated_alias(xavier_normal_)
kaiming_uniform = _deprecated_alias(kaiming_uniform_)
kaiming_normal = _deprecated_alias(kaiming_normal_)
orthogonal = _deprecated_alias(orthogonal_)
sparse = _deprecated_alias(sparse_)

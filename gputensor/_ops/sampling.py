"""The gamma-family samplers torch.distributions is built on: ``_standard_gamma`` (with its
reparameterisation gradient ``_standard_gamma_grad``), ``_sample_dirichlet`` (and
``_dirichlet_grad``) and ``binomial``.

Frontends check dtypes, shapes and devices with PyTorch's messages, then run the kernel of the
parameters' device (kernels/cpu/random_gamma.py, kernels/cuda/ops/random_gamma.py). Samples are
drawn element-parallel from per-call Philox keys (kernels/sample_keys.py), so a seed gives the
same numbers on every device and for either generator algorithm.
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor._device import device as Device
from gputensor._random import Generator
from gputensor._tensor import Tensor

from ._core import broadcast_shapes, common_device, empty, kernel, op
from .random import _generator

_FLOATS = (D.float32, D.float64)


def _check_tensor(x: Any, fn: str, arg: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _check_float(t: Tensor, kernel_name: str) -> None:
    """PyTorch's dispatch error for a dtype its CPU kernels don't cover."""
    if t.dtype not in _FLOATS:
        raise NotImplementedError(f'"{kernel_name}" not implemented for '
                                  f"'{t.dtype.legacy_name}'")


def _check_same_dtype(first: Tensor, *others: Tensor) -> None:
    for t in others:
        if t.dtype is not first.dtype:
            raise RuntimeError(f"Found dtype {t.dtype.legacy_name} but expected "
                               f"{first.dtype.legacy_name}")


def _on(t: Tensor, dev: Device) -> Tensor:
    """A parameter on the op's device (a 0-dim CPU tensor may join a CUDA op as a scalar)."""
    return t if t._storage.device == dev else t.to(dev)


def _run(shape: tuple[int, ...], dt: D.dtype, dev: Device, name: str, *args: Any) -> Tensor:
    out = empty(shape, dt, dev)
    if out.numel():
        kernel(out, name)(out, *args)
    return out


def _gen(generator: Any, dev: Device) -> Generator:
    return _generator(generator, dev)


@op(method=False, grad={"input": "g * _standard_gamma_grad(input, out)"}, jvp="auto_element_wise")
def _standard_gamma(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Gamma(input, 1) samples (Marsaglia-Tsang); at least the dtype's smallest normal."""
    input = _check_tensor(input, "_standard_gamma", "input")
    dev = input.device
    _check_float(input, f"gamma_{dev.type}")
    return _run(input._shape, input.dtype, dev, "_standard_gamma", _gen(generator, dev),
                input.detach())


@op(method=False)
def _standard_gamma_grad(input: Tensor, output: Tensor) -> Tensor:
    """d sample / d alpha of Gamma(alpha=input, 1) samples ``output`` (implicit
    reparameterisation: -(dCDF/dalpha) / pdf)."""
    input = _check_tensor(input, "_standard_gamma_grad", "input")
    output = _check_tensor(output, "_standard_gamma_grad", "output")
    dev = common_device(input, output, op_name="_standard_gamma_grad")
    _check_float(input, f"_standard_gamma_grad_{dev.type}")
    _check_same_dtype(input, output)
    shape = broadcast_shapes(input._shape, output._shape)
    return _run(shape, input.dtype, dev, "_standard_gamma_grad", _on(input.detach(), dev),
                _on(output.detach(), dev))


@op(method=False)
def _sample_dirichlet(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Dirichlet samples with the concentrations along the last dim (gammas normalised)."""
    input = _check_tensor(input, "_sample_dirichlet", "input")
    dev = input.device
    _check_float(input, "dirichlet")
    return _run(input._shape, input.dtype, dev, "_sample_dirichlet", _gen(generator, dev),
                input.detach())


@op(method=False)
def _dirichlet_grad(x: Tensor, alpha: Tensor, total: Tensor) -> Tensor:
    """dx/dalpha of Dirichlet samples x, each x_i ~ Beta(alpha_i, total_i - alpha_i) marginally,
    divided by (1 - x_i): the factor Dirichlet's backward combines over the simplex."""
    for name, t in (("x", x), ("alpha", alpha), ("total", total)):
        _check_tensor(t, "_dirichlet_grad", name)
    dev = common_device(x, alpha, total, op_name="_dirichlet_grad")
    _check_float(x, f"_dirichlet_grad_{dev.type}")
    _check_same_dtype(x, alpha, total)
    if not x._shape == alpha._shape == total._shape:
        raise RuntimeError(f"_dirichlet_grad: expected x, alpha and total to have the same "
                           f"shape, but got {list(x.shape)}, {list(alpha.shape)} and "
                           f"{list(total.shape)}")
    return _run(x._shape, x.dtype, dev, "_dirichlet_grad", _on(x.detach(), dev),
                _on(alpha.detach(), dev), _on(total.detach(), dev))


@op(method=False)
def binomial(count: Tensor, prob: Tensor, generator: Generator | None = None) -> Tensor:
    """Binomial(count, prob) samples (shapes broadcast): inversion for small count * prob,
    BTRS otherwise; NaN where a parameter is NaN or count is infinite."""
    count = _check_tensor(count, "binomial", "count")
    prob = _check_tensor(prob, "binomial", "prob")
    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: "
                         f"{count.dtype.legacy_name}")
    dev = common_device(count, prob, op_name="binomial")
    _check_float(count, f"binomial_{dev.type}")
    _check_same_dtype(count, prob)
    shape = broadcast_shapes(count._shape, prob._shape)
    return _run(shape, count.dtype, dev, "binomial", _gen(generator, dev),
                _on(count.detach(), dev), _on(prob.detach(), dev))


# torch's private sampling functions, for the gputensor namespace (gt._standard_gamma, ...).
PRIVATE_FUNCTIONS = {f.__name__: f for f in (_standard_gamma, _standard_gamma_grad,
                                               _sample_dirichlet, _dirichlet_grad)}

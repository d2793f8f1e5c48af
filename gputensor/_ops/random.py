"""Random sampling: rand/randn/randint/randperm, normal, bernoulli, multinomial, poisson, the
``*_like`` factories and the in-place samplers (uniform_, normal_, random_, bernoulli_, ...).

Frontends validate arguments and pick the generator; sampling kernels are looked up by name.
CUDA has its own kernels, which draw on the device from the generator's Philox state and give
the CPU's numbers (kernels/cuda/ops/random.py), so a CPU generator may drive CUDA sampling too.
A device whose backend has no sampling kernel gets its values drawn on the host from the same
generator and copied over through the copy table (``convert`` / ``copy_``).

An mt19937 generator (PyTorch's CPU stream, ``gt.Generator(algorithm="mt19937")``) samples
with the ``mt19937.<op>`` kernels (kernels/cpu/random_torch.py); only the CPU has them, so on
another device such a generator's samples are drawn on the host and copied over.
"""

from __future__ import annotations

import warnings
from typing import Any

from gputensor import _dtype as D
from gputensor._device import CPU
from gputensor._device import device as Device
from gputensor._random import MT19937, Generator, default_generator_for
from gputensor._tensor import Tensor, new_shape
from gputensor.autograd.forward_ad import _state as _fw_state
from gputensor.autograd.jvp import fill_tangent
from gputensor.kernels.registry import BACKENDS

from ._core import broadcast_shapes, common_device, empty, kernel, op, resolve_device, tensor_method
from .copying import convert
from .creation import empty_like_layout

_UNSET = object()  # tells random_(from, None) apart from random_(from)


# -- generators and sampling ------------------------------------------------------------------
def _generator(generator: Any, dev: Device) -> Generator:
    if generator is None:
        return default_generator_for(dev)
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a gputensor.Generator, not "
                        f"{type(generator).__name__}")
    # The Philox state is device independent: a CPU generator also drives CUDA sampling (and
    # gives the same numbers there); a CUDA generator stays with CUDA tensors.
    if generator.device.type != dev.type and generator.device.type != "cpu":
        raise RuntimeError(f"Expected a '{dev.type}' device type for generator but found "
                           f"'{generator.device.type}'")
    return generator


def _stream_kernel(name: str, gen: Generator) -> str:
    """The kernel name for ``gen``'s stream: mt19937 generators have their own samplers."""
    return f"mt19937.{name}" if gen.algorithm == MT19937 else name


def _device_kernel(dev: Device, name: str) -> Any:
    backend = BACKENDS.get((dev.type, "strided"))
    return None if backend is None else backend.kernels.get(name)


def _host_args(args: tuple) -> list:
    return [a.detach().cpu() if isinstance(a, Tensor) else a for a in args]


def _sample_into(dest: Tensor, name: str, gen: Generator, *args: Any) -> Tensor:
    """Fill ``dest`` in place (any strides) with kernel ``name``; bumps its version once."""
    name = _stream_kernel(name, gen)
    k = _device_kernel(dest.device, name)
    if k is not None:
        k(dest, gen, *args)
        dest._bump_version()
        if _fw_state.active:   # forward AD: samples do not depend on the old values
            fill_tangent(dest)
        return dest
    host = empty(dest._shape, dest._dtype, CPU)
    kernel(host, name)(host, gen, *_host_args(args))
    return dest.copy_(host)


def _sample_new(shape: tuple[int, ...], dt: D.dtype, dev: Device, name: str, gen: Generator,
                *args: Any) -> Tensor:
    """A fresh tensor of samples (version 0)."""
    name = _stream_kernel(name, gen)
    k = _device_kernel(dev, name)
    if k is not None:
        t = empty(shape, dt, dev)
        k(t, gen, *args)
        return t
    host = empty(shape, dt, CPU)
    kernel(host, name)(host, gen, *_host_args(args))
    return convert(host, dt, dev)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


# -- argument checks --------------------------------------------------------------------------
def _as_int(x: Any, what: str, fn: str) -> int:
    if isinstance(x, Tensor) and x.numel() == 1 and x.dtype.category == D.INTEGRAL:
        x = x.item()
    if isinstance(x, bool) or not (isinstance(x, int) or hasattr(x, "__index__")):
        raise TypeError(f"{fn}(): argument '{what}' must be int, not {type(x).__name__}")
    return int(x.__index__())


def _as_number(x: Any, what: str, fn: str) -> float:
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise RuntimeError(f"{fn}(): argument '{what}' must be a number or a one-element "
                               f"tensor, got shape {list(x.shape)}")
        x = x.item()
    if isinstance(x, bool) or not (isinstance(x, int | float) or hasattr(x, "__float__")):
        raise TypeError(f"{fn}(): argument '{what}' must be a number, not {type(x).__name__}")
    return float(x)


def _require_float(dt: D.dtype, fn: str, complex_ok: bool = True) -> None:
    if dt.is_floating_point or (complex_ok and dt.is_complex):
        return
    kinds = "floating point or complex" if complex_ok else "floating point"
    raise RuntimeError(f"{fn}: not implemented for '{dt.legacy_name}' tensors; it needs a "
                       f"{kinds} dtype, got {dt}")


def _check_std(std: float, fn: str = "normal") -> None:
    if not std >= 0.0:
        raise RuntimeError(f"{fn} expects std >= 0.0, but found std {std:g}")


def _factory_dtype(dtype: Any, out: Tensor | None, default: D.dtype) -> D.dtype:
    if dtype is None:
        return default if out is None else out.dtype
    dt = D.to_dtype(dtype)
    if out is not None and out.dtype is not dt:
        raise RuntimeError(f"dtype {dt.legacy_name} does not match dtype of out parameter "
                           f"({out.dtype.legacy_name})")
    return dt


def _factory_device(device: Any, out: Tensor | None) -> Device:
    if out is None:
        return resolve_device(device)
    if not isinstance(out, Tensor):
        raise TypeError(f"argument 'out' must be Tensor, not {type(out).__name__}")
    if device is not None and resolve_device(device) != out.device:
        raise RuntimeError(f"device {resolve_device(device)} does not match the device of the "
                           f"out parameter ({out.device})")
    return out.device


def _factory(shape: tuple[int, ...], dt: D.dtype, dev: Device, out: Tensor | None,
             requires_grad: bool, name: str, gen: Generator, *args: Any) -> Tensor:
    """Shared tail of rand/randn/randint/randperm/normal(size): sample into out or a new one."""
    if requires_grad and not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    if out is None:
        return _finish(_sample_new(shape, dt, dev, name, gen, *args), requires_grad)
    if tuple(out._shape) != shape:
        out.resize_(shape)
    return _finish(_sample_into(out, name, gen, *args), requires_grad)


def _prepare_out(out: Tensor, shape: tuple[int, ...], dev: Device, fn: str) -> None:
    """out= of a sampling op: same device; resized when empty; values cast to its dtype."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{fn}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if out.device != dev:
        raise RuntimeError(f"{fn}(): out is on {out.device} but the inputs are on {dev}")
    if tuple(out._shape) != tuple(shape):
        if out.numel() != 0:
            raise RuntimeError(f"{fn}(): out has shape {list(out._shape)} but the result has "
                               f"shape {list(shape)}")
        out.resize_(shape)


def _size_args(fn: str, args: tuple, size: Any) -> tuple[int, ...]:
    if size is not None:
        if args:
            raise TypeError(f"{fn}() got the size both positionally and as size=")
        args = (size,)
    if not args:
        raise TypeError(f"{fn}() missing required argument 'size'")
    try:
        return new_shape(args)
    except TypeError:
        got = type(args[0]).__name__
        raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, not {got}") from None


# -- integer ranges (randint, random_) -------------------------------------------------------
def _dtype_range(dt: D.dtype) -> tuple[int | float, int | float]:
    if dt is D.bool:
        return 0, 1
    if dt.category == D.INTEGRAL:
        info = D.iinfo(dt)
        return info.min, info.max
    info = D.finfo(dt)
    return info.min, info.max


def _default_high(dt: D.dtype) -> int:
    """random_()'s exclusive upper bound: the largest exactly representable integer plus 1."""
    if dt.category == D.FLOATING:
        digits = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}[dt]
        return (1 << digits) + 1
    return int(_dtype_range(dt)[1]) + 1


def _check_range(low: int, high: int, dt: D.dtype) -> None:
    if dt.is_complex:
        raise RuntimeError(f"random_: not implemented for '{dt.legacy_name}' tensors")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    lo, hi = _dtype_range(dt)
    lo, hi = max(lo, -(1 << 63)), min(hi, (1 << 63) - 1)  # samples are drawn as int64
    if not lo <= low <= hi:
        raise RuntimeError(f"from is out of bounds for {dt.name} (from={low}, valid range "
                           f"[{lo:g}, {hi:g}])")
    if not lo <= high - 1 <= hi:
        raise RuntimeError(f"to - 1 is out of bounds for {dt.name} (to={high}, valid range "
                           f"[{lo:g}, {hi:g}])")
    if dt.category == D.FLOATING:
        limit = _default_high(dt) - 1
        if low < -limit or high - 1 > limit:
            warnings.warn(f"random_: the range [{low}, {high}) exceeds [-2^k, 2^k] where "
                          f"{dt.name} represents every integer; some values can't be drawn "
                          f"exactly", UserWarning, stacklevel=3)


# -- factories -------------------------------------------------------------------------------
@op(method=False, differentiable=False)
def rand(*args: Any, size: Any = None, generator: Generator | None = None,
         out: Tensor | None = None, dtype: Any = None, layout: Any = None, device: Any = None,
         requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Uniform samples on [0, 1) of the given size."""
    shape = _size_args("rand", args, size)
    dt = _factory_dtype(dtype, out, D.get_default_dtype())
    _require_float(dt, "rand")
    dev = _factory_device(device, out)
    return _factory(shape, dt, dev, out, requires_grad, "uniform_", _generator(generator, dev),
                    0.0, 1.0)


@op(method=False, differentiable=False)
def randn(*args: Any, size: Any = None, generator: Generator | None = None,
          out: Tensor | None = None, dtype: Any = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Standard normal samples (mean 0, variance 1) of the given size."""
    shape = _size_args("randn", args, size)
    dt = _factory_dtype(dtype, out, D.get_default_dtype())
    _require_float(dt, "randn")
    dev = _factory_device(device, out)
    return _factory(shape, dt, dev, out, requires_grad, "normal_", _generator(generator, dev),
                    0.0, 1.0)


def _randint_args(args: tuple, low: Any, high: Any, size: Any) -> tuple[int, int, Any]:
    pos = list(args)
    if size is None:
        if not pos:
            raise TypeError("randint() missing required argument 'size'")
        size = pos.pop()
    if high is None:
        if not pos:
            raise TypeError("randint() missing required argument 'high'")
        high = pos.pop()
    if low is None:
        low = pos.pop() if pos else 0
    if pos:
        raise TypeError(f"randint() takes at most 3 positional arguments (low, high, size), got "
                        f"{len(args)}")
    if not isinstance(size, tuple | list):  # gt.Size is a tuple
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    return _as_int(low, "low", "randint"), _as_int(high, "high", "randint"), size


@op(method=False, differentiable=False)
def randint(*args: Any, low: Any = None, high: Any = None, size: Any = None,
            generator: Generator | None = None, out: Tensor | None = None, dtype: Any = None,
            layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """randint(low=0, high, size): integers uniform on [low, high); int64 unless dtype= says."""
    lo, hi, size = _randint_args(args, low, high, size)
    shape = new_shape((size,))
    dt = _factory_dtype(dtype, out, D.int64)
    _check_range(lo, hi, dt)
    dev = _factory_device(device, out)
    return _factory(shape, dt, dev, out, requires_grad, "random_", _generator(generator, dev),
                    lo, hi)


@op(method=False, differentiable=False)
def randperm(n: Any, *, generator: Generator | None = None, out: Tensor | None = None,
             dtype: Any = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A random permutation of 0 .. n-1 (int64 unless dtype= says)."""
    n = _as_int(n, "n", "randperm")
    new_shape((n,))
    dt = _factory_dtype(dtype, out, D.int64)
    if dt is D.bool or dt.is_complex:
        raise RuntimeError(f"randperm: not implemented for '{dt.legacy_name}' tensors")
    limit = _default_high(dt)  # n - 1 must be exactly representable
    if n > limit:
        raise RuntimeError(f"randperm: n cannot be greater than {limit} for {dt} results, got "
                           f"n={n}")
    dev = _factory_device(device, out)
    return _factory((n,), dt, dev, out, requires_grad, "randperm", _generator(generator, dev),
                    n)


# -- normal ----------------------------------------------------------------------------------
@op(method=False)
def normal(mean: Any = 0.0, std: Any = 1.0, size: Any = None, *,
           generator: Generator | None = None, out: Tensor | None = None, dtype: Any = None,
           layout: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """Normal samples: normal(mean, std) with either a tensor (shapes broadcast), or
    normal(mean: float, std: float, size) for a new tensor of that size."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None or dtype is not None or device is not None or requires_grad:
            raise TypeError("normal(): size, dtype, device and requires_grad only go with a "
                            "float mean and a float std")
        return _normal_tensor(mean, std, generator, out)
    if size is None:
        raise TypeError("normal(): with a float mean and a float std, the size argument is "
                        "required: normal(mean, std, size)")
    mean = _as_number(mean, "mean", "normal")
    std = _as_number(std, "std", "normal")
    _check_std(std)
    shape = _size_args("normal", (size,), None)
    dt = _factory_dtype(dtype, out, D.get_default_dtype())
    _require_float(dt, "normal")
    dev = _factory_device(device, out)
    if dt.is_complex:
        mean = complex(mean, mean)  # like normal_ on a complex tensor: both parts centred
    return _factory(shape, dt, dev, out, requires_grad, "normal_", _generator(generator, dev),
                    mean, std)


def _normal_tensor(mean: Any, std: Any, generator: Any, out: Tensor | None) -> Tensor:
    ref = mean if isinstance(mean, Tensor) else std
    dt = ref.dtype
    _require_float(dt, "normal")
    if isinstance(std, Tensor):
        if std.dtype.is_complex:
            raise RuntimeError(f"normal: std must be a real tensor, got {std.dtype}")
    else:
        std = _as_number(std, "std", "normal")
        _check_std(std)
    if not isinstance(mean, Tensor):
        mean = _as_number(mean, "mean", "normal")
    dev = common_device(mean, std, op_name="normal")
    shape = broadcast_shapes(*(t._shape for t in (mean, std) if isinstance(t, Tensor)))
    gen = _generator(generator, dev)
    if out is None:
        return _sample_new(shape, dt, dev, "normal_", gen, mean, std)
    _prepare_out(out, shape, dev, "normal")
    if not D.can_cast(dt, out.dtype):
        raise RuntimeError(f"normal: result type {dt.legacy_name} can't be cast to the desired "
                           f"output type {out.dtype.legacy_name}")
    return _sample_into(out, "normal_", gen, mean, std)


# -- bernoulli, multinomial, poisson ----------------------------------------------------------
def _check_p(p: float, fn: str) -> float:
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"{fn} expects p to be in [0, 1], but got p={p}")
    return p


def _check_p_tensor(p: Tensor, fn: str) -> None:
    if not p.dtype.is_floating_point:
        raise RuntimeError(f"{fn}: the probabilities p must be a floating point tensor, got "
                           f"{p.dtype}")


def bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 1 with probability p (a number, or a tensor expandable to self), else 0."""
    if self.dtype.is_complex:
        raise RuntimeError(f"bernoulli_: not implemented for '{self.dtype.legacy_name}' tensors")
    if isinstance(p, Tensor):
        _check_p_tensor(p, "bernoulli_")
        if broadcast_shapes(self._shape, p._shape) != self._shape:
            raise RuntimeError(f"bernoulli_: the probabilities of shape {list(p.shape)} can't "
                               f"be expanded to the tensor's shape {list(self.shape)}")
        common_device(self, p, op_name="bernoulli_")
    else:
        p = _check_p(_as_number(p, "p", "bernoulli_"), "bernoulli_")
    return _sample_into(self, "bernoulli", _generator(generator, self.device), p)


@op(inplace=True, inplace_fn=bernoulli_, differentiable=False)
def bernoulli(input: Tensor, p: Any = None, *, generator: Generator | None = None,
              out: Tensor | None = None) -> Tensor:
    """0/1 samples: with probabilities ``input`` (in [0, 1]), or with the number ``p`` in a
    tensor shaped like ``input``. The result has input's dtype."""
    dev = input.device
    gen = _generator(generator, dev)
    if p is not None:
        if out is not None:
            raise TypeError("bernoulli(): out= is not supported with a float p")
        if input.dtype.is_complex:
            raise RuntimeError(f"bernoulli: not implemented for '{input.dtype.legacy_name}' "
                               f"tensors")
        p = _check_p(_as_number(p, "p", "bernoulli"), "bernoulli_")
        return _sample_new(input._shape, input.dtype, dev, "bernoulli", gen, p)
    _check_p_tensor(input, "bernoulli")
    if out is None:
        return _sample_new(input._shape, input.dtype, dev, "bernoulli", gen, input)
    _prepare_out(out, input._shape, dev, "bernoulli")
    return _sample_into(out, "bernoulli", gen, input)


@op(method=True)
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None, out: Tensor | None = None) -> Tensor:
    """Category indices sampled from the rows of ``input`` (non-negative weights, 1-d or 2-d)."""
    if input.dim() not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.dim()} dims")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype.legacy_name}")
    n = _as_int(num_samples, "num_samples", "multinomial")
    if n <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples (num_samples={n})")
    cats = input.shape[-1]
    if not replacement and n > cats:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (num_samples={n}, categories={cats})")
    if cats > 1 << 24:
        raise RuntimeError(f"number of categories cannot exceed 2^24, got {cats}")
    shape = (n,) if input.dim() == 1 else (input.shape[0], n)
    dev = input.device
    gen = _generator(generator, dev)
    if out is None:
        return _sample_new(shape, D.int64, dev, "multinomial", gen, input, n, bool(replacement))
    _prepare_out(out, shape, dev, "multinomial")
    if out.dtype is not D.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {out.dtype.legacy_name}")
    return _sample_into(out, "multinomial", gen, input, n, bool(replacement))


@op(method=False, differentiable=False)
def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Poisson samples with the (non-negative) rates in ``input``; same dtype and shape."""
    _require_float(input.dtype, "poisson", complex_ok=False)
    dev = input.device
    return _sample_new(input._shape, input.dtype, dev, "poisson", _generator(generator, dev),
                       input)


# -- *_like ----------------------------------------------------------------------------------
def _like_layout(t: Tensor, input: Tensor, memory_format: Any, requires_grad: bool,
                 where: str) -> Tensor:
    """``t`` (row-major samples) in the layout ``memory_format`` asks of a tensor like
    ``input``: the same values at the same indices."""
    out = empty_like_layout(input, t.dtype, t.device, memory_format, where)
    if out._stride != t._stride:
        out.copy_(t)
        t = out
    return t.requires_grad_() if requires_grad else t


@op(method=False, differentiable=False)
def rand_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None,
              layout: Any = None, device: Any = None, requires_grad: bool = False,
              memory_format: Any = None) -> Tensor:
    return _like_layout(rand(input._shape, generator=generator, dtype=dtype or input.dtype,
                             device=device or input.device), input, memory_format,
                        requires_grad, "rand_like")


@op(method=False, differentiable=False)
def randn_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None,
               layout: Any = None, device: Any = None, requires_grad: bool = False,
               memory_format: Any = None) -> Tensor:
    return _like_layout(randn(input._shape, generator=generator, dtype=dtype or input.dtype,
                              device=device or input.device), input, memory_format,
                        requires_grad, "randn_like")


@op(method=False, differentiable=False)
def randint_like(input: Tensor, low: Any = 0, high: Any = None, *,
                 generator: Generator | None = None, dtype: Any = None, layout: Any = None,
                 device: Any = None, requires_grad: bool = False,
                 memory_format: Any = None) -> Tensor:
    """randint_like(input, high) or randint_like(input, low, high): shaped like input."""
    if high is None:
        low, high = 0, low
    return _like_layout(randint(low, high, input._shape, generator=generator,
                                dtype=dtype or input.dtype, device=device or input.device),
                        input, memory_format, requires_grad, "randint_like")


# -- in-place samplers (Tensor methods only, as in PyTorch) -----------------------------------
def _pop_from(kwargs: dict, default: Any, fn: str) -> Any:
    """PyTorch names the lower bound ``from`` (a Python keyword): accept it via **kwargs."""
    value = kwargs.pop("from", default)
    if kwargs:
        raise TypeError(f"{fn}() got unexpected keyword argument(s) {sorted(kwargs)}")
    return value


@tensor_method()
def uniform_(self: Tensor, from_: Any = 0.0, to: Any = 1.0, *,
             generator: Generator | None = None, **kwargs: Any) -> Tensor:
    """Fill with samples uniform on [from, to)."""
    low = _as_number(_pop_from(kwargs, from_, "uniform_"), "from", "uniform_")
    high = _as_number(to, "to", "uniform_")
    _require_float(self.dtype, "uniform_")
    if low > high:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={low:g} > to={high:g}")
    if not high - low <= D.finfo(self.dtype).max:
        raise RuntimeError(f"uniform_ expects to-from <= finfo({self.dtype}).max, but found "
                           f"to={high:g} and from={low:g}")
    return _sample_into(self, "uniform_", _generator(generator, self.device), low, high)


@tensor_method()
def normal_(self: Tensor, mean: Any = 0.0, std: Any = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill with normal samples (complex: each part has variance std**2 / 2)."""
    mean = _as_number(mean, "mean", "normal_")
    std = _as_number(std, "std", "normal_")
    _require_float(self.dtype, "normal_")
    _check_std(std)
    if self.dtype.is_complex:
        mean = complex(mean, mean)
    return _sample_into(self, "normal_", _generator(generator, self.device), mean, std)


@tensor_method()
def random_(self: Tensor, *args: Any, to: Any = _UNSET, generator: Generator | None = None,
            **kwargs: Any) -> Tensor:
    """random_(), random_(to) or random_(from, to): integers uniform on [from, to); ``to``
    defaults to one past the largest integer the dtype holds exactly."""
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments, got {len(args)}")
    if len(args) == 2:
        low, to = args
    elif len(args) == 1 and to is _UNSET and "from" not in kwargs:
        low, to = 0, args[0]  # random_(to)
    else:
        low = args[0] if args else 0
    bounded = bool(args) or to is not _UNSET or "from" in kwargs
    low = _as_int(_pop_from(kwargs, low, "random_"), "from", "random_")
    high = _default_high(self.dtype) if to is _UNSET or to is None else \
        _as_int(to, "to", "random_")
    if self.dtype.is_complex:
        raise RuntimeError(f"random_: not implemented for '{self.dtype.legacy_name}' tensors")
    _check_range(low, high, self.dtype)
    gen = _generator(generator, self.device)
    if not bounded and gen.algorithm == MT19937:  # PyTorch draws random_() its own way
        return _sample_into(self, "random_bits", gen)
    return _sample_into(self, "random_", gen, low, high)


@tensor_method()
def exponential_(self: Tensor, lambd: Any = 1.0, *,
                 generator: Generator | None = None) -> Tensor:
    """Fill with samples of density lambd * exp(-lambd * x)."""
    lambd = _as_number(lambd, "lambd", "exponential_")
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"Exponential distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {self.dtype}")
    if not lambd > 0.0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    return _sample_into(self, "exponential_", _generator(generator, self.device), lambd)


@tensor_method()
def cauchy_(self: Tensor, median: Any = 0.0, sigma: Any = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill with Cauchy samples: median + sigma * tan(pi * (U - 1/2))."""
    median = _as_number(median, "median", "cauchy_")
    sigma = _as_number(sigma, "sigma", "cauchy_")
    _require_float(self.dtype, "cauchy_", complex_ok=False)
    if not sigma > 0.0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    return _sample_into(self, "cauchy_", _generator(generator, self.device), median, sigma)


@tensor_method()
def log_normal_(self: Tensor, mean: Any = 1.0, std: Any = 2.0, *,
                generator: Generator | None = None) -> Tensor:
    """Fill with exp(N(mean, std**2)) samples."""
    mean = _as_number(mean, "mean", "log_normal_")
    std = _as_number(std, "std", "log_normal_")
    _require_float(self.dtype, "log_normal_", complex_ok=False)
    if not std > 0.0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    return _sample_into(self, "log_normal_", _generator(generator, self.device), mean, std)


@tensor_method()
def geometric_(self: Tensor, p: Any, *, generator: Generator | None = None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    p = _as_number(p, "p", "geometric_")
    if self.dtype is D.bool or self.dtype.is_complex:
        raise RuntimeError(f"geometric_: not implemented for '{self.dtype.legacy_name}' tensors")
    if not 0.0 < p < 1.0:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    return _sample_into(self, "geometric_", _generator(generator, self.device), p)

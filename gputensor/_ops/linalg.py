"""Linear algebra: matmul and the matrix-product family, tensordot, inner, einsum, kron.

Every matrix product funnels into one backend kernel, so a backend implements a single gemm:

    kernel(out, "_gemm")(out, a, b, c, beta, alpha)      # out = beta * c + alpha * (a @ b)

a: (*Ba, M, K), b: (*Bb, K, N) and out: (*B, M, N) have one ndim (>= 2) and one dtype; the batch
dims Ba and Bb broadcast to B (each size 1 or equal); c is None or broadcastable to out's shape.
beta == 0 ignores c and alpha == 0 ignores a @ b (no NaN propagation, as in BLAS and PyTorch);
out may share memory with c (the in-place addmm_ family). Any strides are allowed. The frontends
here only validate and build views (unsqueeze, permute, reshape) around that call.
einsum has its own kernel, ``einsum(out, operands, equation, compute)``, fed an explicit
letters-only equation whose operands already have every label at its broadcast size.

Cost models (``OpDef.cost(inputs, output) -> (bytes moved, flops)``, for the profiler):
``gemm_cost(...)`` builds the products' model (2*K flops per output element, plus the add pass
of the add* ops), ``product_cost`` counts one multiply per output element (outer, kron) and
``contraction_cost`` estimates tensordot/einsum from operand and output sizes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor, normalize_dim
from gputensor.autograd.formulas import cj, into_zeros, sum_to
from gputensor.autograd.inplace import apply_inplace, needs_graph
from gputensor.kernels.registry import BACKENDS, OPS, kernel_cache, memory_cost

from ._core import check_out, empty, kernel, op, tensor_method
from .composite import conj
from .copying import copy_
from .views import expand, permute, reshape, unsqueeze


# -- cost models: cost(inputs, output) -> (bytes moved, flops) ---------------------------------
def _nbytes(ts: Sequence[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, Tensor))


def gemm_cost(left: int = 0, accumulate: bool = False,
              contracted: Callable[[Tensor], int] | None = None) -> Callable:
    """Cost of products whose left factor is ``inputs[left]``: 2*K flops per output element,
    K being the factor's last dim (or ``contracted(factor)``); ``accumulate`` adds the
    beta*input + alpha*product pass of the add* ops."""
    def cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
        factor = inputs[left]
        k = contracted(factor) if contracted else (factor._shape[-1] if factor._shape else 1)
        n_out = output.numel() if isinstance(output, Tensor) else 1
        flops = 2 * n_out * k + (2 * n_out if accumulate else 0)
        return _nbytes(inputs) + _nbytes([output]), flops
    return cost


def contraction_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    """tensordot/einsum of two operands: K = sqrt(numel(a) * numel(b) / numel(out)) is exact
    for a pure contraction (a = free_a*K, b = K*free_b) and an estimate with batch labels."""
    ts = [t for t in inputs if isinstance(t, Tensor)]
    n_out = max(output.numel(), 1)
    if len(ts) == 2:
        k = math.sqrt(ts[0].numel() * ts[1].numel() / n_out)
    else:
        k = max((t.numel() for t in ts), default=0) / n_out
    return _nbytes(ts) + _nbytes([output]), int(2 * n_out * max(k, 1.0))


product_cost = memory_cost(1)  # outer, kron: one multiply per output element


# -- argument checks -----------------------------------------------------------------------------
# PyTorch names C++ scalar types in some of its matmul messages.
_CTYPE = {D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int", D.int32: "int",
          D.int64: "long int", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
          D.float32: "float", D.float64: "double", D.complex64: "c10::complex<float>",
          D.complex128: "c10::complex<double>", D.bool: "bool"}


def _tensor_arg(x: Any, name: str, op_name: str, pos: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op_name}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _no_bool(dt: D.dtype, impl: str) -> None:
    if dt is D.bool:
        raise NotImplementedError(f"\"{impl}\" not implemented for 'Bool'")


# ... and the C++ type an alpha/beta converts to (float16/bfloat16 products scale in float).
_SCALAR_CTYPE = {**_CTYPE, D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
                 D.int64: "int64_t", D.float16: "float", D.bfloat16: "float"}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _overflows(value: Any, dt: D.dtype) -> bool:
    if dt.category == D.INTEGRAL:
        info = D.iinfo(dt)
        # Unsigned types take negatives that wrap (-1 -> 255), like PyTorch's checked_convert.
        return not (info.min if dt.is_signed else -info.max) <= value <= info.max
    if dt in (D.float16, D.bfloat16, D.float32, D.complex64):
        return any(math.isfinite(x) and abs(x) > _FLOAT32_MAX
                   for x in (value.real, value.imag))
    return False


def _scalar(value: Any, dt: D.dtype, name: str, op_name: str) -> Any:
    """alpha/beta as a Python number of ``dt``'s kind (truncated for integers, like PyTorch)."""
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, numbers.Number):
        raise TypeError(f"{op_name}(): argument '{name}' must be Number, not "
                        f"{type(value).__name__}")
    overflow = RuntimeError(f"value cannot be converted to type {_SCALAR_CTYPE[dt]} without "
                            f"overflow")
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        if not dt.is_complex:
            if value.imag:
                raise overflow
            value = value.real
    if dt is D.bool:
        return bool(value)
    if dt.category == D.INTEGRAL:
        value = int(value)
    elif dt.is_complex:
        value = complex(value)
    else:
        value = float(value)
    if _overflows(value, dt):
        raise overflow
    return value


def _device(*tensors: Tensor, op_name: str) -> Any:
    """The one device of all operands: unlike elementwise ops, products take no 0-d CPU
    tensor alongside CUDA ones (their kernels read every operand on the device)."""
    dev = tensors[0].device
    for t in tensors[1:]:
        if t.device != dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {dev} and {t.device}! (in {op_name})")
    return dev


def _result(out: Tensor | None, shape: tuple[int, ...], dt: D.dtype, dev: Any,
            op_name: str) -> Tensor:
    """A fresh output, or ``out`` checked like PyTorch's matmul family (exact dtype)."""
    if out is None:
        return empty(shape, dt, dev)
    if isinstance(out, Tensor) and out._dtype is not dt:
        raise RuntimeError(f"Expected out tensor to have dtype {_CTYPE[dt]}, but got "
                           f"{_CTYPE[out._dtype]} instead")
    check_out(out, shape, dt, dev, op_name)
    return out


def _gemm(res: Tensor, shape: tuple[int, ...], a: Tensor, b: Tensor, c: Tensor | None = None,
          beta: Any = 0, alpha: Any = 1, bump: bool = False) -> Tensor:
    """Run the gemm kernel into ``res`` seen as ``shape`` (through a temporary only when res is
    an out= tensor whose strides admit no such view)."""
    if res._shape == shape:
        target = res
    elif res.dim() == 0:  # views.reshape cannot turn a 0-d tensor into (1, 1)
        target = unsqueeze(unsqueeze(res, 0), 0)
    else:
        target = reshape(res, shape)
    kernel(res, "_gemm")(target, a, b, c, beta, alpha)
    if target._storage is not res._storage:
        copy_(res, reshape(target, res._shape))
    if bump:
        res._bump_version()
    return res


def _lead_ones(t: Tensor, ndim: int) -> Tensor:
    """``t`` with leading size-1 dims up to ``ndim`` dims (always a view)."""
    for _ in range(ndim - t.dim()):
        t = unsqueeze(t, 0)
    return t


def _mm_shapes_error(a: tuple[int, ...], b: tuple[int, ...]) -> RuntimeError:
    return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and "
                        f"{b[0]}x{b[1]})")


def _bmm_shapes_error(batch: int, k: int, got: tuple[int, int]) -> RuntimeError:
    return RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                        f"[{batch}, {k}] but got: [{got[0]}, {got[1]}].")


# -- matrix @ matrix -----------------------------------------------------------------------------
# The CPU _gemm kernel's lane (kernels/cpu/linalg.py), looked up once; None where a
# profiler's or a capture's wrapper serves the kernel (the lane would bypass it). Emptied with
# the kernel tables.
_GEMM_LANES = kernel_cache()
_UNLOADED = object()


def _product_lane(a: Any, b: Any) -> Tensor | None:
    """``a @ b`` by the CPU's one-pass product where it takes the operands, else None."""
    lane = _GEMM_LANES.get("cpu", _UNLOADED)
    if lane is _UNLOADED:
        k = BACKENDS["cpu", "strided"].kernel("_gemm")
        lane = _GEMM_LANES["cpu"] = None if hasattr(k, "_gt_profiler_raw") else \
            getattr(k, "lane", None)
    return None if lane is None else lane(a, b)


def _mm(a: Tensor, b: Tensor, out: Tensor | None, op_name: str,
        res_shape: tuple[int, ...] | None = None) -> Tensor:
    """a (n x k) @ b (k x m) into a result of ``res_shape`` (default (n, m), same element count)."""
    if a._dtype is not b._dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_CTYPE[a._dtype]} != {_CTYPE[b._dtype]}")
    _no_bool(a._dtype, "addmm_impl_cpu_")
    if a._shape[1] != b._shape[0]:
        raise _mm_shapes_error(a._shape, b._shape)
    dev = _device(a, b, op_name=op_name)
    shape = (a._shape[0], b._shape[1])
    res = _result(out, shape if res_shape is None else res_shape, a._dtype, dev, op_name)
    return _gemm(res, shape, a, b, bump=out is not None)


# Derivatives: grad * conj(the other factor), transposed; the training path (mm, addmm, matmul
# of 2-d operands) costs one product per input and no copies (BLAS reads the transposed views).
@op(cost=gemm_cost(), grad={"input": "mm_mat1_grad(g, mat2, input_shape, input_strides)",
                            "mat2": "mm_mat2_grad(g, input, mat2_shape, mat2_strides)"},
    jvp="mm(input_t, mat2) + mm(input, mat2_t)")
def mm(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Matrix product of an (n x k) and a (k x m) matrix."""
    if out is None and (result := _product_lane(input, mat2)) is not None:
        return result
    _tensor_arg(input, "input", "mm", 1)
    _tensor_arg(mat2, "mat2", "mm", 2)
    if input.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    return _mm(input, mat2, out, "mm")


def _check_addmm(input: Tensor, mat1: Tensor, mat2: Tensor, op_name: str) -> None:
    for name, x, pos in (("input", input, 1), ("mat1", mat1, 2), ("mat2", mat2, 3)):
        _tensor_arg(x, name, op_name, pos)
    for name, x in (("mat1", mat1), ("mat2", mat2)):
        if x.dim() != 2:
            raise RuntimeError(f"{name} must be a matrix, got {x.dim()}-D tensor")
    if input._dtype is not mat2._dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{input._dtype.legacy_name} and {mat2._dtype.legacy_name}")
    if mat1._dtype is not mat2._dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                           f"{mat1._dtype.legacy_name} and {mat2._dtype.legacy_name}")
    _no_bool(input._dtype, "addmm_impl_cpu_")
    if mat1._shape[1] != mat2._shape[0]:
        raise _mm_shapes_error(mat1._shape, mat2._shape)


@op(inplace=True, cost=gemm_cost(left=1, accumulate=True),
    grad={"input": "scale(g, cj(beta))",
          "mat1": "scale(mm_mat1_grad(g, mat2, mat1_shape, mat1_strides), cj(alpha))",
          "mat2": "scale(mm_mat2_grad(g, mat1, mat2_shape, mat2_strides), cj(alpha))"},
    jvp="scale(input_t, beta) + scale(mm(mat1_t, mat2) + mm(mat1, mat2_t), alpha)")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1,
          out: Tensor | None = None) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2); input broadcasts to the product's shape."""
    _check_addmm(input, mat1, mat2, "addmm")
    shape = (mat1._shape[0], mat2._shape[1])
    return _add_product("addmm", input, mat1, mat2, shape, beta, alpha, out)


@tensor_method()
def addmm_(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1,
           alpha: Any = 1) -> Tensor:
    _check_addmm(self, mat1, mat2, "addmm_")
    shape = (mat1._shape[0], mat2._shape[1])
    if needs_graph(self, (mat1, mat2), {}):
        _check_inplace_shape(self, shape)
        return apply_inplace(self, lambda: addmm(self, mat1, mat2, beta=beta, alpha=alpha))
    return _add_product("addmm_", self, mat1, mat2, shape, beta, alpha, inplace=True)


def _check_inplace_shape(self: Tensor, shape: tuple[int, ...]) -> None:
    if self._shape != shape:
        raise RuntimeError(f"Bad in-place call: input tensor size {list(self._shape)} and output "
                           f"tensor size {list(shape)} should match")


def _add_product(op_name: str, input: Tensor, a: Tensor, b: Tensor, shape: tuple[int, ...],
                 beta: Any, alpha: Any, out: Tensor | None = None,
                 inplace: bool = False) -> Tensor:
    """beta * input + alpha * (a @ b): into a new tensor, into ``out``, or into ``input``."""
    if inplace:
        _check_inplace_shape(input, shape)
    dt = input._dtype
    beta, alpha = _scalar(beta, dt, "beta", op_name), _scalar(alpha, dt, "alpha", op_name)
    dev = _device(input, a, b, op_name=op_name)
    if inplace:
        return _gemm(input, shape, a, b, input, beta, alpha, bump=True)
    res = _result(out, shape, dt, dev, op_name)
    return _gemm(res, shape, a, b, expand(input, shape), beta, alpha, bump=out is not None)


# -- linear: the affine map of nn.Linear, one product and one graph node ---------------------------
def _linear_cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
    """2·K flops per output element, plus the bias add."""
    moved = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, Tensor))
    moved += output.numel() * output.element_size()
    has_bias = len(inputs) > 2 and inputs[2] is not None
    return moved, output.numel() * (2 * inputs[1]._shape[1] + has_bias)


@op(method=False, cost=_linear_cost,
    grad={"input": "g.matmul(cj(weight))",
          "weight": lambda g, input: _linear_weight_grad(g, input),
          "bias": "sum_to(g, bias_shape)"},
    jvp="linear(input_t, weight) + linear(input, weight_t, bias_t)")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` over the last dim of ``input`` (nn.Linear's map): the bias
    add is fused into the product, and autograd records a single node."""
    _tensor_arg(input, "input", "linear", 1)
    _tensor_arg(weight, "weight", "linear", 2)
    if input.dim() == 0:
        raise RuntimeError("linear(): input must have at least 1 dimension, got a 0-d tensor")
    if weight.dim() != 2:
        raise RuntimeError(f"linear(): weight must be 2-D (out_features, in_features), got "
                           f"shape {list(weight._shape)}")
    out_f, k = weight._shape
    if input._shape[-1] != k:
        lead = math.prod(input._shape[:-1])
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({lead}x"
                           f"{input._shape[-1]} and {k}x{out_f})")
    if input._dtype is not weight._dtype or (bias is not None and bias._dtype is not
                                             weight._dtype):
        names = [t._dtype.legacy_name for t in (input, weight, bias) if t is not None]
        raise RuntimeError(f"linear(): expected input, weight and bias of one dtype, got "
                           f"{', '.join(names)}")
    _no_bool(input._dtype, "linear")
    if bias is not None and bias._shape not in ((out_f,), (), (1,)):
        raise RuntimeError(f"linear(): bias of shape {list(bias._shape)} does not match "
                           f"out_features={out_f}")
    dev = _device(input, weight, *(() if bias is None else (bias,)), op_name="linear")
    lead = input._shape[:-1]
    n = math.prod(lead)
    out = empty((*lead, out_f), input._dtype, dev)
    flat = input if input.dim() == 2 else reshape(input, (n, k))
    w_t = weight._view((k, out_f), (weight._stride[1], weight._stride[0]), weight._offset)
    target = out if out.dim() == 2 else out._view((n, out_f), (out_f, 1), 0)
    kernel(out, "_gemm")(target, flat, w_t, bias, 0 if bias is None else 1, 1)
    return out


def _linear_weight_grad(g: Tensor, input: Tensor) -> Tensor:
    """d(loss)/d(weight) of linear: g^T @ conj(input), with leading dims folded."""
    if g.dim() == 1:
        return g.unsqueeze(1).mm(cj(input).unsqueeze(0))
    if g.dim() > 2:
        g, input = g.reshape(-1, g.shape[-1]), input.reshape(-1, input.shape[-1])
    return g.t().mm(cj(input))


# -- batched products ----------------------------------------------------------------------------
def _check_bmm(batch1: Tensor, batch2: Tensor, op_name: str, impl: str) -> None:
    for name, x in (("batch1", batch1), ("batch2", batch2)):
        if x.dim() != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if batch1._dtype is not batch2._dtype:
        raise RuntimeError(f"expected scalar type {batch1._dtype.legacy_name} but found "
                           f"{batch2._dtype.legacy_name}")
    _no_bool(batch1._dtype, impl)
    b, _, k = batch1._shape
    if batch2._shape[:2] != (b, k):
        raise _bmm_shapes_error(b, k, batch2._shape[:2])


@op(cost=gemm_cost(), grad={"input": "g.bmm(cj(mat2).transpose(1, 2))",
                           "mat2": "cj(input).transpose(1, 2).bmm(g)"},
    jvp="bmm(input_t, mat2) + bmm(input, mat2_t)")
def bmm(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Batched matrix product: (b x n x k) @ (b x k x m) -> (b x n x m)."""
    _tensor_arg(input, "input", "bmm", 1)
    _tensor_arg(mat2, "mat2", "bmm", 2)
    _check_bmm(input, mat2, "bmm", "bmm")
    dev = _device(input, mat2, op_name="bmm")
    shape = input._shape[:2] + mat2._shape[2:]
    res = _result(out, shape, input._dtype, dev, "bmm")
    return _gemm(res, shape, input, mat2, bump=out is not None)


def _check_baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, op_name: str) -> None:
    for name, x, pos in (("input", input, 1), ("batch1", batch1, 2), ("batch2", batch2, 3)):
        _tensor_arg(x, name, op_name, pos)
    _check_bmm(batch1, batch2, op_name, "baddbmm")
    if input._dtype is not batch1._dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {_CTYPE[input._dtype]}, "
                           f"batch1: {_CTYPE[batch1._dtype]}, batch2: {_CTYPE[batch2._dtype]}")


@op(inplace=True, cost=gemm_cost(left=1, accumulate=True),
    grad={"input": "scale(g, cj(beta))",
          "batch1": "scale(g.bmm(cj(batch2).transpose(1, 2)), cj(alpha))",
          "batch2": "scale(cj(batch1).transpose(1, 2).bmm(g), cj(alpha))"},
    jvp="scale(input_t, beta) + scale(bmm(batch1_t, batch2) + bmm(batch1, batch2_t), alpha)")
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1,
            out: Tensor | None = None) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2); input broadcasts to (b, n, m)."""
    _check_baddbmm(input, batch1, batch2, "baddbmm")
    shape = batch1._shape[:2] + batch2._shape[2:]
    return _add_product("baddbmm", input, batch1, batch2, shape, beta, alpha, out)


@tensor_method()
def baddbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
             alpha: Any = 1) -> Tensor:
    _check_baddbmm(self, batch1, batch2, "baddbmm_")
    shape = batch1._shape[:2] + batch2._shape[2:]
    if needs_graph(self, (batch1, batch2), {}):
        _check_inplace_shape(self, shape)
        return apply_inplace(self, lambda: baddbmm(self, batch1, batch2, beta=beta, alpha=alpha))
    return _add_product("baddbmm_", self, batch1, batch2, shape, beta, alpha, inplace=True)


def _check_addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, op_name: str) -> None:
    for name, x, pos in (("input", input, 1), ("batch1", batch1, 2), ("batch2", batch2, 3)):
        _tensor_arg(x, name, op_name, pos)
    for name, x in (("batch1", batch1), ("batch2", batch2)):
        if x.dim() != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if batch1._shape[0] != batch2._shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{batch1._shape[0]} and {batch2._shape[0]}")
    if batch1._shape[2] != batch2._shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1._shape[1]}x"
                           f"{batch1._shape[2]} and {batch2._shape[1]}x{batch2._shape[2]})")
    if input._dtype is not batch2._dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{input._dtype.legacy_name} and {batch2._dtype.legacy_name}")
    if batch1._dtype is not batch2._dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                           f"{batch1._dtype.legacy_name} and {batch2._dtype.legacy_name}")
    _no_bool(input._dtype, "addmm_impl_cpu_")


def _addbmm_operands(batch1: Tensor, batch2: Tensor) -> tuple[Tensor, Tensor]:
    """The sum over batches of batch1[i] @ batch2[i] as one product: (n, b*k) @ (b*k, m)."""
    b, n, k = batch1._shape
    m = batch2._shape[2]
    return reshape(permute(batch1, 1, 0, 2), (n, b * k)), reshape(batch2, (b * k, m))


_ADDBMM_G = "g.unsqueeze(0).expand(batch1_shape[0], g.shape[0], g.shape[1])"


@op(inplace=True, cost=gemm_cost(left=1, accumulate=True,
                                     contracted=lambda b: b._shape[0] * b._shape[2]),
    grad={"input": "scale(g, cj(beta))",
          "batch1": f"scale({_ADDBMM_G}.bmm(cj(batch2).transpose(1, 2)), cj(alpha))",
          "batch2": f"scale(cj(batch1).transpose(1, 2).bmm({_ADDBMM_G}), cj(alpha))"},
    jvp=("scale(input_t, beta) + scale((bmm(batch1_t, batch2) + "
         "bmm(batch1, batch2_t)).sum(0), alpha)"))
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1,
           out: Tensor | None = None) -> Tensor:
    """beta * input + alpha * sum_i batch1[i] @ batch2[i]; input broadcasts to (n, m)."""
    _check_addbmm(input, batch1, batch2, "addbmm")
    shape = (batch1._shape[1], batch2._shape[2])
    _device(input, batch1, batch2, op_name="addbmm")
    a, b = _addbmm_operands(batch1, batch2)
    return _add_product("addbmm", input, a, b, shape, beta, alpha, out)


@tensor_method()
def addbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
            alpha: Any = 1) -> Tensor:
    _check_addbmm(self, batch1, batch2, "addbmm_")
    shape = (batch1._shape[1], batch2._shape[2])
    _device(self, batch1, batch2, op_name="addbmm_")
    if needs_graph(self, (batch1, batch2), {}):
        _check_inplace_shape(self, shape)
        return apply_inplace(self, lambda: addbmm(self, batch1, batch2, beta=beta, alpha=alpha))
    a, b = _addbmm_operands(batch1, batch2)
    return _add_product("addbmm_", self, a, b, shape, beta, alpha, inplace=True)


# -- matrix @ vector, vector . vector ------------------------------------------------------------
def _check_addmv(input_dim: int, input_dt: D.dtype, input_numel: int, mat: Tensor,
                 vec: Tensor) -> None:
    if mat.dim() != 2 or vec.dim() != 1 or input_dim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input_dim}, {mat.dim()}, "
                           f"{vec.dim()}")
    if not (input_dt is mat._dtype and mat._dtype is vec._dtype):
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{input_dt.legacy_name}, {mat._dtype.legacy_name}, and "
                           f"{vec._dtype.legacy_name}")
    _no_bool(mat._dtype, "addmv_impl_cpu")
    n, k = mat._shape
    if vec._shape[0] != k or input_numel not in (n, 1):
        raise RuntimeError(f"size mismatch, got input ({input_numel}), mat ({n}x{k}), vec "
                           f"({vec._shape[0]})")


def _mv(mat: Tensor, vec: Tensor, out: Tensor | None, op_name: str,
        res_shape: tuple[int, ...] | None = None) -> Tensor:
    n = mat._shape[0]
    _check_addmv(1, D.promote_types(mat._dtype, vec._dtype), n, mat, vec)
    dev = _device(mat, vec, op_name=op_name)
    res = _result(out, (n,) if res_shape is None else res_shape, mat._dtype, dev, op_name)
    return _gemm(res, (n, 1), mat, unsqueeze(vec, 1), bump=out is not None)


@op(cost=gemm_cost(), grad={"input": "outer(g, cj(vec))", "vec": "cj(input).t().mv(g)"},
    jvp="mv(input_t, vec) + mv(input, vec_t)")
def mv(input: Tensor, vec: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Matrix-vector product: (n x k) @ (k,) -> (n,)."""
    _tensor_arg(input, "input", "mv", 1)
    _tensor_arg(vec, "vec", "mv", 2)
    return _mv(input, vec, out, "mv")


def _addmv_prepare(input: Tensor, mat: Tensor, vec: Tensor, beta: Any, alpha: Any,
                   op_name: str) -> tuple[Tensor, Any, Any]:
    for name, x, pos in (("input", input, 1), ("mat", mat, 2), ("vec", vec, 3)):
        _tensor_arg(x, name, op_name, pos)
    _check_addmv(input.dim(), input._dtype, input.numel(), mat, vec)
    dt = input._dtype
    _device(input, mat, vec, op_name=op_name)  # input's device is then everyone's
    c = unsqueeze(expand(input, (mat._shape[0],)), 1)
    return c, _scalar(beta, dt, "beta", op_name), _scalar(alpha, dt, "alpha", op_name)


@op(inplace=True, cost=gemm_cost(left=1, accumulate=True),
    grad={"input": "scale(g, cj(beta))", "mat": "scale(outer(g, cj(vec)), cj(alpha))",
          "vec": "scale(cj(mat).t().mv(g), cj(alpha))"},
    jvp="scale(input_t, beta) + scale(mv(mat_t, vec) + mv(mat, vec_t), alpha)")
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1,
          out: Tensor | None = None) -> Tensor:
    """beta * input + alpha * (mat @ vec); input broadcasts to (n,)."""
    c, beta, alpha = _addmv_prepare(input, mat, vec, beta, alpha, "addmv")
    n = mat._shape[0]
    res = _result(out, (n,), input._dtype, input.device, "addmv")
    return _gemm(res, (n, 1), mat, unsqueeze(vec, 1), c, beta, alpha, bump=out is not None)


@tensor_method()
def addmv_(self: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    c, beta, alpha = _addmv_prepare(self, mat, vec, beta, alpha, "addmv_")
    n = mat._shape[0]
    _check_inplace_shape(self, (n,))
    if needs_graph(self, (mat, vec), {}):
        return apply_inplace(self, lambda: addmv(self, mat, vec, beta=beta, alpha=alpha))
    return _gemm(self, (n, 1), mat, unsqueeze(vec, 1), c, beta, alpha, bump=True)


def _check_dot(a: Tensor, b: Tensor) -> None:
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{a._dtype.legacy_name} and {b._dtype.legacy_name}")
    n, m = a._shape[0], b._shape[0]
    if n != m:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to "
                           f"have the same number of elements, but got {n} and {m} elements "
                           f"respectively")
    _no_bool(a._dtype, "dot")


def _dot(a: Tensor, b: Tensor, out: Tensor | None, op_name: str) -> Tensor:
    _check_dot(a, b)
    dev = _device(a, b, op_name=op_name)
    if isinstance(out, Tensor) and out._dtype is not a._dtype:
        raise RuntimeError(f"result dtype {out._dtype.legacy_name} does not match input dtype "
                           f"{a._dtype.legacy_name}")
    res = _result(out, (), a._dtype, dev, op_name)
    return _gemm(res, (1, 1), unsqueeze(a, 0), unsqueeze(b, 1), bump=out is not None)


@op(cost=gemm_cost(), grad={"input": "g * cj(tensor)", "tensor": "g * cj(input)"},
    jvp="dot(input_t, tensor) + dot(input, tensor_t)")
def dot(input: Tensor, tensor: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Inner product of two 1-D tensors of one dtype (no conjugation)."""
    _tensor_arg(input, "input", "dot", 1)
    _tensor_arg(tensor, "tensor", "dot", 2)
    return _dot(input, tensor, out, "dot")


@op(cost=gemm_cost(), grad={"input": "cj(g) * other", "other": "g * input"},
    jvp="vdot(input_t, other) + vdot(input, other_t)")
def vdot(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Inner product conjugating the first argument: sum(conj(input) * other)."""
    _tensor_arg(input, "input", "vdot", 1)
    _tensor_arg(other, "other", "vdot", 2)
    _check_dot(input, other)
    return _dot(conj(input), other, out, "vdot")


# -- matmul --------------------------------------------------------------------------------------
def _foldable(t: Tensor) -> bool:
    """Whether t's leading dims merge into one (t.view(-1, t.size(-1)) needs no copy)."""
    if t.numel() == 0:
        return True
    sh, st = t._shape, t._stride
    return all(st[i] == st[i + 1] * sh[i + 1] for i in range(t.dim() - 2))


def _broadcast_batch(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    nd = max(len(a), len(b))
    a, b = (1,) * (nd - len(a)) + a, (1,) * (nd - len(b)) + b
    out = []
    # Checked from the right, like PyTorch's infer_size, so the same dim is reported.
    for i in range(nd - 1, -1, -1):
        x, y = a[i], b[i]
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                               f"at non-singleton dimension {i}")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _matmul_batched(a: Tensor, b: Tensor, out: Tensor | None) -> Tensor:
    a2 = a if a.dim() >= 2 else unsqueeze(a, 0)
    b2 = b if b.dim() >= 2 else unsqueeze(b, 1)
    (n, k), (k2, m) = a2._shape[-2:], b2._shape[-2:]
    batch = _broadcast_batch(a2._shape[:-2], b2._shape[:-2])
    if a._dtype is not b._dtype:
        raise RuntimeError(f"expected scalar type {a._dtype.legacy_name} but found "
                           f"{b._dtype.legacy_name}")
    _no_bool(a._dtype, "bmm")
    if k != k2:
        raise _bmm_shapes_error(math.prod(batch), k, (math.prod(batch), k2))
    dev = _device(a, b, op_name="matmul")
    shape = batch + ((n,) if a.dim() >= 2 else ()) + ((m,) if b.dim() >= 2 else ())
    res = _result(out, shape, a._dtype, dev, "matmul")
    nd = len(batch) + 2
    return _gemm(res, batch + (n, m), _lead_ones(a2, nd), _lead_ones(b2, nd),
                 bump=out is not None)


@op(cost=gemm_cost(), grad={"input": lambda g, input, other: _matmul_grad_input(g, input, other),
                           "other": lambda g, input, other: _matmul_grad_other(g, input, other)},
    jvp="matmul(input_t, other) + matmul(input, other_t)")
def matmul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Matrix product with PyTorch's rules: dot (1-D @ 1-D), mv, mm, and batched products whose
    batch dims broadcast; a 1-D operand gets a dim prepended (left) or appended (right) that is
    removed from the result."""
    if out is None and (result := _product_lane(input, other)) is not None:
        return result
    _tensor_arg(input, "input", "matmul", 1)
    _tensor_arg(other, "other", "matmul", 2)
    d1, d2 = input.dim(), other.dim()
    if d1 == 0 or d2 == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{d1}D and {d2}D")
    if d1 == 1 and d2 == 1:
        return _dot(input, other, out, "matmul")
    if d1 == 2 and d2 == 1:
        return _mv(input, other, out, "matmul")
    if d1 == 1 and d2 == 2:
        return _mm(unsqueeze(input, 0), other, out, "matmul", (other._shape[1],))
    if d1 == 2 and d2 == 2:
        return _mm(input, other, out, "matmul")
    if d1 >= 3 and d2 <= 2 and _foldable(input):
        # (..., n, k) @ (k, m): one large product over the merged leading dims, no copy.
        lead = input._shape[:-1]
        folded = reshape(input, (math.prod(lead), input._shape[-1]))
        if d2 == 1:
            return _mv(folded, other, out, "matmul", lead)
        return _mm(folded, other, out, "matmul", lead + (other._shape[1],))
    return _matmul_batched(input, other, out)


def _matmul_grad_input(g: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """matmul's gradient for its first operand, case by case like the forward (the node sums
    broadcast batch dims back to a's shape)."""
    da, db = a.dim(), b.dim()
    bc = cj(b)
    if db == 1:
        if da == 1:
            return g * bc
        if da == 2:
            return outer(g, bc)
        return g.unsqueeze(-1) * bc  # (..., n, 1) * (k,)
    if da == 1:
        return bc.mv(g) if db == 2 else g.unsqueeze(-2).matmul(bc.transpose(-1, -2))
    if db == 2:
        return g.mm(bc.t()) if da == 2 else g.matmul(bc.t())  # one folded product for da > 2
    return g.matmul(bc.transpose(-1, -2))


def _matmul_grad_other(g: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """matmul's gradient for its second operand."""
    da, db = a.dim(), b.dim()
    ac = cj(a)
    if da == 1:
        if db == 1:
            return g * ac
        if db == 2:
            return outer(ac, g)
        return ac.unsqueeze(-1) * g.unsqueeze(-2)  # (k, 1) * (..., 1, m)
    if db <= 2:
        # (..., n, k) operands fold into one (N, k) matrix: one product, summed over N.
        k = a._shape[-1]
        folded = ac.reshape(-1, k).t()
        if db == 1:
            return folded.mv(g.reshape(-1))
        return folded.mm(g.reshape(-1, g._shape[-1]))
    return ac.transpose(-1, -2).matmul(g)


# -- outer products ------------------------------------------------------------------------------
def _mul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    return OPS["mul"].frontend(a, b, out=out)


@op(aliases=("ger",), cost=product_cost)
def outer(input: Tensor, vec2: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Outer product of two 1-D tensors (their dtypes promote, as for multiplication)."""
    _tensor_arg(input, "input", "outer", 1)
    _tensor_arg(vec2, "vec2", "outer", 2)
    for name, x in (("self", input), ("vec2", vec2)):
        if x.dim() != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {x.dim()}-D")
    return _mul(unsqueeze(input, 1), vec2, out)


@op(cost=product_cost)
def kron(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Kronecker product: result[i*Bs + j] = input[i] * other[j] over every dim (the fewer-dim
    operand gets leading size-1 dims)."""
    _tensor_arg(input, "input", "kron", 1)
    _tensor_arg(other, "other", "kron", 2)
    nd = max(input.dim(), other.dim())
    a, b = _lead_ones(input, nd), _lead_ones(other, nd)
    # Interleave: a as (a0, 1, a1, 1, ...) times b as (1, b0, 1, b1, ...).
    a_view = reshape(a, tuple(s for n in a._shape for s in (n, 1)))
    b_view = reshape(b, tuple(s for n in b._shape for s in (1, n)))
    shape = tuple(x * y for x, y in zip(a._shape, b._shape, strict=True))
    prod = reshape(_mul(a_view, b_view), shape)
    if out is None:
        return prod
    check_out(out, shape, prod._dtype, prod.device, "kron")
    return copy_(out, prod)


# -- tensordot, inner ----------------------------------------------------------------------------
_TENSORDOT_DIMS = ("tensordot expects dims to be int or tuple[list[int], list[int]] or "
                   "list[list[int]] containing two lists, but got dims={}")


def _dims_list(x: Any, name: str, pos: int) -> list[int]:
    if isinstance(x, Tensor):
        x = x.tolist()
        x = [x] if isinstance(x, int) else x
    if not isinstance(x, list | tuple):
        raise TypeError(f"tensordot(): argument '{name}' (position {pos}) must be tuple of ints, "
                        f"not {type(x).__name__}")
    for d in x:
        if not isinstance(d, int | np.integer) or isinstance(d, bool):
            raise TypeError(f"tensordot(): argument '{name}' (position {pos}) must be tuple of "
                            f"ints, but found element of type {type(d).__name__}")
    return [int(d) for d in x]


def _tensordot_dims(dims: Any, nd_a: int, nd_b: int) -> tuple[list[int], list[int]]:
    """The contracted dims of a and of b as given (not yet normalised)."""
    if isinstance(dims, Tensor):
        dims = dims.item() if dims.numel() == 1 else dims.tolist()
    if isinstance(dims, int | np.integer) and not isinstance(dims, bool):
        dims = int(dims)
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(nd_a, nd_b):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        return list(range(-dims, 0)), list(range(dims))
    if not isinstance(dims, list | tuple) or len(dims) != 2:
        raise RuntimeError(_TENSORDOT_DIMS.format(dims))
    da, db = _dims_list(dims[0], "dims_self", 3), _dims_list(dims[1], "dims_other", 4)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    return da, db


def _normalize_dims(dims: list[int], nd: int) -> list[int]:
    out = [normalize_dim(d, nd) for d in dims]
    for i, d in enumerate(out):
        if d in out[:i]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


def _expand_contracted(t: Tensor, dims: list[int], sizes: list[int]) -> Tensor:
    shape = list(t._shape)
    for d, s in zip(dims, sizes, strict=True):
        shape[d] = s
    return t if tuple(shape) == t._shape else expand(t, shape)


@op(method=False, cost=contraction_cost,
    grad={"a": lambda g, a, b, dims: _tensordot_grad(g, a, b, dims, True),
          "b": lambda g, a, b, dims: _tensordot_grad(g, a, b, dims, False)},
    jvp="tensordot(a_t, b, dims) + tensordot(a, b_t, dims)")
def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Tensor | None = None) -> Tensor:
    """Contract dims of a with dims of b: ``dims`` is an int (a's last n with b's first n) or a
    pair of lists. A size-1 contracted dim broadcasts against the other side, as in PyTorch."""
    _tensor_arg(a, "a", "tensordot", 1)
    _tensor_arg(b, "b", "tensordot", 2)
    raw_a, raw_b = _tensordot_dims(dims, a.dim(), b.dim())
    da, db = _normalize_dims(raw_a, a.dim()), _normalize_dims(raw_b, b.dim())
    sizes = []
    for ra, rb, x, y in zip(raw_a, raw_b, da, db, strict=True):
        sa, sb = a._shape[x], b._shape[y]
        if sa != sb and sa != 1 and sb != 1:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {sa} in "
                               f"dim {ra} and second has size {sb} in dim {rb}")
        sizes.append(sb if sa == 1 else sa)
    if a._dtype is not b._dtype:
        raise RuntimeError("both inputs should have same dtype")
    _no_bool(a._dtype, "addmm_impl_cpu_")
    dev = _device(a, b, op_name="tensordot")
    free_a = [i for i in range(a.dim()) if i not in da]
    free_b = [i for i in range(b.dim()) if i not in db]
    k = math.prod(sizes)
    pa = math.prod(a._shape[i] for i in free_a)
    pb = math.prod(b._shape[i] for i in free_b)
    mat_a = reshape(permute(_expand_contracted(a, da, sizes), free_a + da), (pa, k))
    mat_b = reshape(permute(_expand_contracted(b, db, sizes), db + free_b), (k, pb))
    shape = tuple(a._shape[i] for i in free_a) + tuple(b._shape[i] for i in free_b)
    res = _result(out, shape, a._dtype, dev, "tensordot")
    return _gemm(res, (pa, pb), mat_a, mat_b, bump=out is not None)


def _tensordot_grad(g: Tensor, a: Tensor, b: Tensor, dims: Any, wrt_a: bool) -> Tensor:
    """g (free dims of a, then of b) contracted with the other operand over its free dims,
    permuted back into the operand's dim order."""
    raw_a, raw_b = _tensordot_dims(dims, a.dim(), b.dim())
    da, db = _normalize_dims(raw_a, a.dim()), _normalize_dims(raw_b, b.dim())
    free_a = [i for i in range(a.dim()) if i not in da]
    free_b = [i for i in range(b.dim()) if i not in db]
    na, nb = len(free_a), len(free_b)
    if wrt_a:
        x, free, lead = a, free_a, 0
        # r: the free dims of a, then b's contracted dims in ascending order
        r = tensordot(g, cj(b), dims=(list(range(na, na + nb)), free_b))
        place = {d: na + sorted(db).index(db[da.index(d)]) for d in da}
    else:
        x, free, lead = b, free_b, len(da)
        # r: a's contracted dims in ascending order, then the free dims of b
        r = tensordot(cj(a), g, dims=(free_a, list(range(na))))
        place = {d: sorted(da).index(da[db.index(d)]) for d in db}
    perm = [lead + free.index(d) if d in free else place[d] for d in range(x.dim())]
    r = r.permute(perm) if perm != list(range(len(perm))) else r
    if r._shape != x._shape:  # a size-1 contracted dim of the other operand broadcast
        r = r.expand(tuple(xs if rs == 1 else rs for rs, xs in zip(r._shape, x._shape,
                                                                        strict=True)))
    return r


@op(cost=gemm_cost())
def inner(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Sum of products over the last dims (a plain product when either is 0-D)."""
    _tensor_arg(input, "input", "inner", 1)
    _tensor_arg(other, "other", "inner", 2)
    if input.dim() == 0 or other.dim() == 0:
        return _mul(input, other, out)
    if input._shape[-1] != other._shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input._shape)} and {list(other._shape)}")
    return tensordot(input, other, dims=([-1], [-1]), out=out)


# -- einsum --------------------------------------------------------------------------------------
_ELL = "..."
# Canonical labels handed to the kernel (NumPy's einsum accepts exactly these 52).
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_to_equation(args: tuple) -> tuple[str, list[Any]]:
    """einsum(op0, sub0, op1, sub1, ..., [out_sub]) -> ('AB,BC->AC', [op0, op1])."""
    def term(sub: Any) -> str:
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append(_ELL)
            elif isinstance(s, int | np.integer) and 0 <= s < 52:
                parts.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise ValueError("einsum(): subscript in subscript list is not within the valid "
                                 "range [0, 52)")
        return "".join(parts)
    operands, subs = list(args[0::2]), list(args[1::2])
    lhs = ",".join(term(s) for s in subs[:len(operands)])
    if len(args) % 2:
        operands.pop()
        return lhs + "->" + term(args[-1]), operands
    return lhs, operands


def _einsum_args(args: tuple) -> tuple[str, list[Tensor]]:
    if args and isinstance(args[0], str):
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], list | tuple):
            operands = list(operands[0])
    elif len(args) >= 2:
        equation, operands = _sublist_to_equation(args)
    else:
        operands = []
    if not operands:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                            f"{type(x).__name__}")
    return equation, operands


def _parse_terms(equation: str) -> tuple[list[list[str]], list[str] | None]:
    """Input terms and the output term (None when implicit) as lists of labels and '...'."""
    arrow = equation.find("->")
    lhs_end = len(equation) if arrow < 0 else arrow
    terms: list[list[str]] = [[]]
    i = 0
    while i < lhs_end:
        ch = equation[i]
        if ch == ",":
            terms.append([])
        elif ch == ".":
            where = f"operand {len(terms) - 1}"
            i = _parse_ellipsis(equation, i, terms[-1], where)
            continue
        elif ch.isascii() and ch.isalpha():
            terms[-1].append(ch)
        elif ch != " ":
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation "
                               f"string, subscripts must be in [a-zA-Z]")
        i += 1
    if arrow < 0:
        return terms, None
    output: list[str] = []
    i = arrow + 2
    while i < len(equation):
        ch = equation[i]
        if ch == ".":
            i = _parse_ellipsis(equation, i, output, "output")
            continue
        if ch.isascii() and ch.isalpha():
            if ch in output:
                raise RuntimeError(f"einsum(): output subscript {ch} appears more than once in "
                                   f"the output")
            output.append(ch)
        elif ch != " ":
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation "
                               f"string, subscripts must be in [a-zA-Z]")
        i += 1
    return terms, output


def _parse_ellipsis(equation: str, i: int, term: list[str], where: str) -> int:
    if equation[i:i + 3] != _ELL:
        raise RuntimeError(f"einsum(): found '.' for {where} that is not part of any ellipsis"
                           + (" (...)" if where == "output" else ""))
    if _ELL in term:
        raise RuntimeError(f"einsum(): found '.' for {where} for which an ellipsis was already "
                           f"found")
    term.append(_ELL)
    return i + 3


def _label_dims(term: list[str], x: Tensor, k: int) -> tuple[list[Any], int | None]:
    """One label per dim of operand k (a letter, or ('...', j) for the j-th dim from the right of
    its ellipsis block) and where the ellipsis block starts (None without an ellipsis)."""
    n_letters = len(term) - (_ELL in term)
    if _ELL not in term and n_letters != x.dim():
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n_letters}) does "
                           f"not match the number of dimensions ({x.dim()}) for operand {k} and "
                           f"no ellipsis was given")
    if n_letters > x.dim():
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n_letters}) is "
                           f"more than the number of dimensions ({x.dim()}) for operand {k}")
    n_ell = x.dim() - n_letters
    labels: list[Any] = []
    ell_at = None
    for lab in term:
        if lab == _ELL:
            ell_at = len(labels)
            labels.extend((_ELL, j) for j in range(n_ell - 1, -1, -1))
        else:
            labels.append(lab)
    return labels, ell_at


def _label_sizes(all_labels: list[list[Any]], operands: list[Tensor]) -> dict[Any, int]:
    sizes: dict[Any, int] = {}
    for k, (labels, x) in enumerate(zip(all_labels, operands, strict=True)):
        own: dict[Any, int] = {}
        for lab, s in zip(labels, x._shape, strict=True):
            if lab in own and own[lab] != s:
                raise RuntimeError(f"einsum(): subscript {lab} is repeated for operand {k} but the "
                                   f"sizes don't match, {s} != {own[lab]}")
            own[lab] = s
        for lab, s in own.items():
            prev = sizes.get(lab, 1)
            if s != prev and s != 1 and prev != 1:
                what = (f"dimension {lab[1]} (from the right) covered by the ellipsis"
                        if isinstance(lab, tuple) else f"subscript {lab}")
                raise RuntimeError(f"einsum(): {what} has size {s} for operand {k} which does not "
                                   f"broadcast with previously seen size {prev}")
            sizes[lab] = prev if s == 1 else s
    return sizes


def _output_labels(terms: list[list[str]], output: list[str] | None, n_ell: int) -> list[Any]:
    ell = [(_ELL, j) for j in range(n_ell - 1, -1, -1)]
    if output is None:
        counts: dict[str, int] = {}
        for term in terms:
            for lab in term:
                counts[lab] = counts.get(lab, 0) + 1
        # Implicit output: the ellipsis dims, then labels seen once, upper case first.
        return ell + sorted(lab for lab, c in counts.items() if c == 1 and lab != _ELL)
    seen = {lab for term in terms for lab in term}
    labels: list[Any] = []
    for lab in output:
        if lab == _ELL:
            labels.extend(ell)
        elif lab not in seen:
            raise RuntimeError(f"einsum(): output subscript {lab} does not appear in the equation "
                               f"for any input operand")
        else:
            labels.append(lab)
    return labels


def _einsum_operand(x: Tensor, labels: list[Any], ell_at: int | None, n_ell: int,
                    sizes: dict) -> tuple[Tensor, list[Any]]:
    """x with its ellipsis block padded to n_ell dims and every label at its broadcast size."""
    own_ell = sum(isinstance(lab, tuple) for lab in labels)
    if ell_at is not None and own_ell < n_ell:
        for _ in range(n_ell - own_ell):
            x = unsqueeze(x, ell_at)
        labels = labels[:ell_at] + [(_ELL, j) for j in range(n_ell - 1, own_ell - 1, -1)] \
            + labels[ell_at:]
    shape = tuple(sizes[lab] for lab in labels)
    return (x if shape == x._shape else expand(x, shape)), labels


def _einsum_dtypes(operands: list[Tensor], summed: bool) -> D.dtype:
    dt = operands[0]._dtype
    for x in operands[1:]:
        if x._dtype is not dt:
            raise RuntimeError(f"expected scalar type {dt.legacy_name} but found "
                               f"{x._dtype.legacy_name}")
    if summed and len(operands) > 1:
        _no_bool(dt, "bmm")
    if summed and len(operands) == 1 and dt.category <= D.INTEGRAL:
        return D.int64  # a plain sum, which promotes integers to int64
    return dt


def _einsum_plan(equation: str, operands: list[Tensor]
                 ) -> tuple[list[Tensor], list[str], str, dict[str, int], D.dtype, list]:
    """The letters-only form of an einsum: each operand with its ellipsis padded and every
    label at its broadcast size (views), their terms, the output term, each letter's size, the
    compute dtype, and each operand's shape after padding (before broadcasting)."""
    terms, output = _parse_terms(equation)
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    parsed = [_label_dims(t, x, k) for k, (t, x) in enumerate(zip(terms, operands, strict=True))]
    all_labels = [labels for labels, _ in parsed]
    sizes = _label_sizes(all_labels, operands)
    n_ell = max((sum(isinstance(lab, tuple) for lab in ls) for ls in all_labels), default=0)
    for j in range(n_ell):
        sizes.setdefault((_ELL, j), 1)
    out_labels = _output_labels(terms, output, n_ell)
    if len(sizes) > len(_LETTERS):
        raise RuntimeError(f"einsum(): {len(sizes)} distinct subscripts (counting the dims "
                           f"covered by ellipses) are more than the {len(_LETTERS)} supported")
    summed = [lab for lab in sizes if lab not in out_labels]
    compute = _einsum_dtypes(operands, bool(summed))
    letter = dict(zip(sizes, _LETTERS, strict=False))
    prepared, in_terms, padded = [], [], []
    for x, (labels, ell_at) in zip(operands, parsed, strict=True):
        n_pad = n_ell - sum(isinstance(lab, tuple) for lab in labels) if ell_at is not None \
            else 0
        padded.append(x._shape[:ell_at] + (1,) * n_pad + x._shape[ell_at:] if n_pad
                      else x._shape)
        x, labels = _einsum_operand(x, labels, ell_at, n_ell, sizes)
        prepared.append(x)
        in_terms.append("".join(letter[lab] for lab in labels))
    letter_sizes = {letter[lab]: n for lab, n in sizes.items()}
    return (prepared, in_terms, "".join(letter[lab] for lab in out_labels), letter_sizes,
            compute, padded)


@op(method=False, cost=contraction_cost)
def einsum(*args: Any) -> Tensor:
    """Einstein summation: ``einsum('ij,jk->ik', a, b)``, operands as a list, or the sublist
    form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``. Labels are [a-zA-Z]; '...' covers broadcast
    dims; size-1 dims broadcast; without '->' the output is the labels seen once, sorted."""
    equation, operands = _einsum_args(args)
    return _einsum(equation, operands)


@op(method=False, cost=contraction_cost,
    grad={"operands": lambda g, equation, operands: _einsum_grad(g, equation, operands)},
    jvp="product_rule(lambda xs: _einsum(equation, xs), operands, operands_t)")
def _einsum(equation: str, operands: list[Tensor]) -> Tensor:
    """einsum over a parsed argument list (the op that records, with operands as one list)."""
    prepared, in_terms, out_term, sizes, compute, _ = _einsum_plan(equation, operands)
    dev = _device(*operands, op_name="einsum")
    res = empty(tuple(sizes[c] for c in out_term), compute, dev)
    kernel(res, "einsum")(res, prepared, ",".join(in_terms) + "->" + out_term, compute)
    return res


def _einsum_grad(g: Tensor, equation: str, operands: list[Tensor]) -> list[Tensor | None]:
    """Each operand's gradient is an einsum too: g with the other operands (conjugated), out to
    the operand's own labels. Labels only that operand has are broadcast back, repeated labels
    (diagonals) are written into zeros, and the operand's preparation (ellipsis padding,
    broadcast size-1 dims) is summed away."""
    prepared, in_terms, out_term, sizes, _, padded = _einsum_plan(equation, operands)
    grads: list[Tensor | None] = []
    for k, x in enumerate(operands):
        if not x.requires_grad:
            grads.append(None)
            continue
        term = in_terms[k]
        labels = list(dict.fromkeys(term))  # unique, in order of first appearance
        terms = [out_term] + [t for j, t in enumerate(in_terms) if j != k]
        seen = set("".join(terms))
        kept = [c for c in labels if c in seen]
        others = [cj(p) for j, p in enumerate(prepared) if j != k]
        r = _einsum(",".join(terms) + "->" + "".join(kept), [g, *others])
        if len(kept) < len(labels):  # labels summed within this operand alone: broadcast
            for pos, c in enumerate(labels):
                if c not in seen:
                    r = r.unsqueeze(pos)
            r = r.expand(tuple(sizes[c] for c in labels))
        full = prepared[k]._shape
        if len(labels) < len(term):  # g lands on the diagonal of the repeated labels
            step = [math.prod(full[i + 1:]) for i in range(len(full))]
            strides = tuple(sum(st for st, c2 in zip(step, term, strict=True) if c2 == c)
                            for c in labels)
            shape = tuple(sizes[c] for c in labels)
            r = into_zeros(r, full, lambda z, shape=shape, strides=strides:
                           z.as_strided(shape, strides, 0))
        grads.append(sum_to(r, padded[k]).reshape(x._shape))
    return grads




# -- sparse operands ---------------------------------------------------------------------------
# A sparse_coo operand is routed to gputensor.sparse before the dense frontend (and its
# derivative, which would give the sparse operand a dense gradient) sees it. Dense calls pay
# one class-attribute test per operand.
def _sparse_routed(dense: Callable, route: Callable, n_operands: int) -> Callable:
    def frontend(*args: Any, **kwargs: Any) -> Any:
        for x in args[:n_operands]:
            if getattr(x, "_sparse", False):
                return route(*args, **kwargs)
        return dense(*args, **kwargs)
    frontend.__name__, frontend.__doc__ = dense.__name__, dense.__doc__
    frontend.__wrapped__ = dense
    return frontend


def _sparse_mm_route(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor:
    from gputensor.sparse._matmul import matmul_route
    return matmul_route("mm", input, mat2, out)


def _sparse_matmul_route(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    from gputensor.sparse._matmul import matmul_route
    return matmul_route("matmul", input, other, out)


def _sparse_addmm_route(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1,
                        alpha: Any = 1, out: Tensor | None = None) -> Tensor:
    from gputensor.sparse._matmul import addmm_route
    return addmm_route(input, mat1, mat2, beta, alpha, out)


mm = OPS["mm"].frontend = _sparse_routed(mm, _sparse_mm_route, 2)
matmul = OPS["matmul"].frontend = _sparse_routed(matmul, _sparse_matmul_route, 2)
addmm = OPS["addmm"].frontend = _sparse_routed(addmm, _sparse_addmm_route, 3)


@op()
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (the inputs broadcast; ``dim=None``: the
    first dim of size 3, PyTorch's deprecated default; ``linalg.cross`` uses -1)."""
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = tuple(OPS["broadcast_tensors"].frontend(input, other)[0].shape) \
        if input.shape != other.shape else tuple(input.shape)
    if dim is None:
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input (shapes {list(input.shape)} "
                               f"and {list(other.shape)})")
    d = normalize_dim(dim, len(shape))
    a, b = expand(input, shape), expand(other, shape)
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return OPS["cat"].frontend([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


@op()
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """p-norm distances between the rows of (B*, P, M) ``x1`` and (B*, R, M) ``x2``:
    (B*, P, R). Computed from the differences directly (PyTorch may use a matrix product for
    p=2 on large inputs, which is faster and less exact); ``compute_mode`` names that choice
    and is checked, then left to this one method."""
    if compute_mode not in (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.dim() < 2 or x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D, X2 "
                           f"got: {x2.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    return OPS["norm"].frontend(unsqueeze(x1, -2) - unsqueeze(x2, -3), p, dim=-1)

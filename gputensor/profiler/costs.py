"""What one backend kernel call costs: (bytes moved, flops), for achieved GB/s, GFLOP/s and the
roofline.

``kernel_cost(name, args, result)`` answers for any kernel by its backend name:

1. a model declared for that kernel name (``declare_kernel_cost`` in kernels/registry.py; the
   ones below cover the kernels whose flops matter: gemm, convolutions, einsum, the norms,
   softmax, reductions and scans, pools, recurrences, fused optimizers);
2. else, when the kernel name is an op, the op's own model (``OpDef.cost(inputs, output)``)
   applied to the kernel's arguments: most kernels take the output first
   (``kernel(out, *inputs)``), the rest return it (``masked_select(x, mask) -> out``);
3. else bytes only: every tensor in the arguments and the result, read or written once.

The bytes of rules 1-3 are "every tensor touched counted once" unless a model says otherwise (the
fused optimizers read and write their parameters and state, so those count twice).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gputensor._tensor import Tensor
from gputensor.kernels.registry import KERNEL_COSTS, OPS, declare_kernel_cost

__all__ = ["kernel_cost", "tensor_bytes"]


def _walk(items: Any) -> tuple[int, int]:
    """(elements, bytes) of every tensor in ``items``, lists and tuples flattened."""
    elements = nbytes = 0
    stack = [items]
    while stack:  # iterative and type-checked first: this runs once per profiled kernel call
        x = stack.pop()
        if isinstance(x, Tensor):
            n = math.prod(x._shape)
            elements += n
            nbytes += n * x._dtype.itemsize
        elif isinstance(x, list | tuple):
            stack.extend(x)
        elif hasattr(x, "numel") and hasattr(x, "element_size"):
            elements += x.numel()
            nbytes += x.numel() * x.element_size()
    return elements, nbytes


def tensor_bytes(*items: Any) -> int:
    """Bytes of every tensor in ``items`` (lists and tuples flattened, non-tensors ignored)."""
    return _walk(items)[1]


def _numel(t: Any) -> int:
    return t.numel() if hasattr(t, "numel") else 0


def kernel_cost(name: str, args: Sequence[Any], result: Any = None,
                kwargs: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(bytes moved, flops) of the backend kernel ``name`` called with positional ``args``
    (and keyword ``kwargs``) that returned ``result``."""
    kw = dict(kwargs) if kwargs else {}
    model = KERNEL_COSTS.get(name)
    if model is not None:
        moved, flops = model(args, result, kw)
        return int(moved), int(flops)
    moved = tensor_bytes(args, result)
    op = OPS.get(name)
    if op is None or not args:
        return moved, 0
    if result is None:
        inputs, output = args[1:], args[0]
    else:
        inputs, output = args, result
    per_element = getattr(op.cost, "flops_per_element", None)
    if per_element is not None:  # registry.memory_cost: flops per output (or input) element
        counted = output if op.cost.per == "output" else inputs
        return moved, int(per_element * _walk(counted)[0])
    try:
        _, flops = op.cost(inputs, output)
    except (TypeError, AttributeError, IndexError, ValueError, ZeroDivisionError):
        # An op-level model written for the frontend's arguments that does not fit this
        # kernel's: the bytes still stand, the flops are unknown (0), never a failed profile.
        return moved, 0
    return moved, int(flops)


# -- products ----------------------------------------------------------------------------------
@declare_kernel_cost("_gemm")
def _gemm(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
    """out = beta * c + alpha * (a @ b): 2*K flops per output element (2*M*N*K per batch),
    plus 2 per output element for the beta * c add pass."""
    out, a, _b, c, beta = args[:5]
    k = a.shape[-1] if a.dim() else 1
    flops = 2 * out.numel() * k
    if c is not None and beta != 0:
        flops += 2 * out.numel()
    return tensor_bytes(args[:4]), flops


@declare_kernel_cost("einsum")
def _einsum(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
    """The naive count: n operands multiply-accumulate over every combination of labels, so
    n * prod(label sizes) flops (2*M*N*K for a matmul; NumPy's optimised contraction order
    may do fewer)."""
    out, operands, equation = args[:3]
    lhs = equation.split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, t in zip(lhs, operands, strict=False):
        for label, size in zip(term, t.shape, strict=False):
            sizes[label] = max(sizes.get(label, 1), int(size))
    total = math.prod(sizes.values()) if sizes else 1
    return tensor_bytes(out, operands), len(operands) * total


# -- convolution and pooling ---------------------------------------------------------------------
def _taps(weight_shape: Sequence[int]) -> int:
    """Multiply-adds per output element: C_in/groups * kH * kW."""
    return math.prod(weight_shape[1:])


@declare_kernel_cost("_conv2d")
def _conv2d(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
    """(out, x, weight, bias, ...): 2 flops per tap per output element, plus the bias add."""
    out, _x, weight, bias = args[:4]
    flops = 2 * out.numel() * _taps(weight.shape) + (out.numel() if bias is not None else 0)
    return tensor_bytes(args[:4]), flops


@declare_kernel_cost("_conv2d_input_backward")
def _conv2d_input_backward(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
    """(grad_input, grad_output, weight, ...): every grad_output element meets every tap."""
    _gi, g, weight = args[:3]
    return tensor_bytes(args[:3]), 2 * g.numel() * _taps(weight.shape)


@declare_kernel_cost("_conv2d_weight_backward")
def _conv2d_weight_backward(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
    """(grad_weight, grad_output, input, ...): the same multiply-adds as the forward pass."""
    gw, g = args[:2]
    return tensor_bytes(args[:3]), 2 * g.numel() * _taps(gw.shape)


def _per_element(index: int, flops: float):
    """A model: ``flops`` per element of ``args[index]``, bytes of every tensor touched."""
    def model(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
        return tensor_bytes(args, result), int(flops * _numel(args[index]))
    return model


# Pools read every input element once and compare or add it (one flop).
for _name, _index in (("_max_pool2d", 2), ("_avg_pool2d", 1), ("_adaptive_avg_pool2d", 1),
                      ("_adaptive_max_pool2d", 2), ("_max_pool2d_backward", 1),
                      ("_avg_pool2d_backward", 1), ("_adaptive_avg_pool2d_backward", 1)):
    declare_kernel_cost(_name)(_per_element(_index, 1))

# -- recurrences (nn.LSTM/GRU/RNN) --------------------------------------------------------------
def _recurrence(gates_index: int, weight_index: int, flops_per_gate: int):
    """A model: the hidden gemm of every step (2 * H flops per gate element of
    ``args[gates_index]``, H from the (G*H, H) weight) plus the gate arithmetic."""
    def model(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
        gates, hidden = args[gates_index], args[weight_index].shape[1]
        return tensor_bytes(args, result), gates.numel() * (2 * hidden + flops_per_gate)
    return model


for _name, _gates, _weight, _flops in (
        ("_lstm_recurrence", 2, 7, 20), ("_lstm_recurrence_backward", 0, 7, 20),
        ("_gru_recurrence", 3, 5, 20), ("_gru_recurrence_backward", 0, 7, 20),
        ("_rnn_recurrence", 2, 4, 4), ("_rnn_recurrence_backward", 0, 4, 4)):
    declare_kernel_cost(_name)(_recurrence(_gates, _weight, _flops))


# -- normalisation, softmax, reductions ----------------------------------------------------------
def _op_flops(op_name: str) -> float:
    """Flops per element of the op's own model (``registry.memory_cost``, declared with the
    op), so a kernel's model never repeats, or disagrees with, its op's constant."""
    return OPS[op_name].cost.flops_per_element


# Kernels whose first arguments are outputs or saved statistics: the op's flops per element of
# the one argument they are counted on (x for the norms, the input for reductions and scans).
for _name, _index, _op in (
        ("_batch_norm", 3, "_batch_norm"), ("_layer_norm", 3, "_layer_norm"),
        ("_group_norm", 3, "_group_norm"), ("_batch_norm_backward", 3, "_batch_norm_backward"),
        ("_layer_norm_backward", 3, "_layer_norm_backward"),
        ("_group_norm_backward", 3, "_group_norm_backward"),
        ("softmax", 1, "softmax"), ("_softmax_backward", 1, "_softmax_backward"),
        ("sum", 1, "sum"), ("nansum", 1, "nansum"), ("prod", 1, "prod"), ("mean", 1, "mean"),
        ("amax", 1, "amax"), ("amin", 1, "amin"), ("all", 1, "all"), ("any", 1, "any"),
        ("norm", 1, "norm"), ("logsumexp", 1, "logsumexp"), ("_var_mean", 2, "var_mean"),
        ("_arg_extreme", 2, "argmax"), ("_scan", 1, "cumsum")):
    declare_kernel_cost(_name)(_per_element(_index, _op_flops(_op)))


# -- fused optimizers ----------------------------------------------------------------------------
def _optimizer_model(state_lists: int, flops_per_element: int, options: dict[str, int]):
    """A fused optimizer over (params, grads, *state lists, ...): every param and state element
    is read and written (counted twice), every grad read once; ``options`` add flops per
    element when the keyword argument of that name is truthy."""
    def model(args: Sequence[Any], result: Any, kw: dict) -> tuple[int, int]:
        params, grads = args[0], args[1]
        state = [args[2 + i] for i in range(state_lists) if 2 + i < len(args)]
        n = sum(_numel(p) for p in params)
        per = flops_per_element + sum(f for key, f in options.items() if kw.get(key))
        moved = 2 * tensor_bytes(params, state) + tensor_bytes(grads)
        return moved, per * n
    return model


# Adam: two moment updates (3 + 4), the bias-corrected denominator (3) and the step (3);
# weight decay adds a multiply-add, amsgrad a max (its list is the third state list).
declare_kernel_cost("_fused_adam")(
    _optimizer_model(3, 13, {"weight_decay": 2, "amsgrad": 1}))
# SGD: p -= lr * g; momentum's buffer update (3); nesterov's look-ahead (2); weight decay (2).
declare_kernel_cost("_fused_sgd")(
    _optimizer_model(1, 2, {"momentum": 3, "nesterov": 2, "weight_decay": 2}))
# Adagrad: s += g*g (2), p -= clr * g / (sqrt(s) + eps) (4); weight decay (2).
declare_kernel_cost("_fused_adagrad")(_optimizer_model(1, 6, {"weight_decay": 2}))

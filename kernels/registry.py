"""The op registry and the backend registry.

An op is declared once (``OpDef``): its name, the Python frontend that checks arguments and
dispatches, the elementwise expression when it has one, the dtype rule, a cost model for the
profiler and a slot for its derivative. Backends (CPU, CUDA, SparseCPU, SparseCUDA) are keyed by
(device type, layout); each registers kernels by op name, and a backend with an elementwise
code generator compiles every elementwise op from its one expression on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

CostModel = Callable[[Sequence[Any], Any], tuple[int, int]]


def _tensors(x: Any) -> list[Any]:
    """The tensors in an op's arguments or result (nested lists/tuples flattened)."""
    if isinstance(x, list | tuple):
        return [t for item in x for t in _tensors(item)]
    return [x] if hasattr(x, "numel") and hasattr(x, "element_size") else []


def memory_cost(flops_per_element: float = 0.0, per: str = "output") -> CostModel:
    """A cost model for ops bound by memory traffic: bytes = every tensor read plus every
    tensor written; flops = ``flops_per_element`` times the output's (or input's) elements."""
    def cost(inputs: Sequence[Any], output: Any) -> tuple[int, int]:
        ins, outs = _tensors(list(inputs)), _tensors(output)
        moved = sum(t.numel() * t.element_size() for t in ins + outs)
        counted = outs if per == "output" else ins
        return moved, int(flops_per_element * sum(t.numel() for t in counted))
    # Read by the profiler's kernel_cost, which counts the same thing in one cheaper pass.
    cost.flops_per_element = flops_per_element  # type: ignore[attr-defined]
    cost.per = per  # type: ignore[attr-defined]
    return cost


@dataclass(eq=False)
class OpDef:
    name: str
    frontend: Callable[..., Any]
    # Elementwise ops: one scalar expression over inputs a, b, c and named scalar params,
    # rendered to Numba on the CPU and to CUDA C by the CUDA backend.
    expr: str | None = None
    arity: int = 1
    params: tuple[str, ...] = ()
    dtype_rule: str = "promote"
    method: bool = True          # exposed as Tensor.<name>
    inplace: bool = False        # Tensor.<name>_ exists
    # cost(inputs, output) -> (bytes moved, flops), for the profiler's throughput figures.
    cost: CostModel = field(default_factory=memory_cost)
    # The op's Derivative (gputensor.autograd.derivatives): formulas per differentiable input.
    derivative: Any = None
    function: bool = True        # exported as gt.<name> (False: a method only, like x.view)
    aliases: tuple[str, ...] = ()
    doc: str = ""
    # False: the op yields no gradient at all (creation, random, integer results).
    differentiable: bool = True
    # The in-place frontend behind Tensor.<name>_ (elementwise ops build it with the frontend).
    inplace_fn: Callable[..., Any] | None = None
    # Elementwise dtype and argument rules, checked by the frontend before any kernel runs:
    no_bool: bool | str = False       # bool operands refused (a str is PyTorch's message)
    no_complex: bool = False          # complex operands refused
    float_only: bool = False          # integer and bool operands refused
    tensor_operands: bool = False     # Python-number operands refused (a Tensor-only signature)
    inplace_integral_noop: bool = False  # in-place on integer/bool: self untouched, unchecked
    reject_bool_operands: bool = False  # any bool operand refused, even if promotion allows
    int_div: bool = False             # integer division: a zero divisor raises
    int_pow: bool = False             # integer power: a negative Python-int exponent raises
    int_identity: bool = False        # the identity on integer dtypes (floor, ceil, trunc)
    int_quotient: str = ""            # PyTorch's error when inputs b and c are both integral
    defaults: dict[str, Any] = field(default_factory=dict)   # param -> default value
    param_map: dict[str, dict[Any, Any]] | None = None       # param -> {user value: kernel value}
    # (param values, compute dtype) -> the values the kernel takes (dtype-dependent defaults)
    resolve_params: Callable[[tuple, Any], tuple] | None = None
    # Flag params the CPU kernels are compiled per value of (gelu's ``approximate``): a runtime
    # branch between two heavy expressions keeps LLVM from vectorising the loop.
    specialize: tuple[str, ...] = ()


OPS: dict[str, OpDef] = {}

# Tensor methods and properties that are not ops of their own (hand-written in-place forms,
# properties like ``T``, the indexing protocol): Tensor attribute name -> function or property.
# gputensor/_ops/__init__.py installs these and every op's methods, the one place that does.
TENSOR_METHODS: dict[str, Any] = {}


def declare(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise RuntimeError(f"op {op.name!r} is declared twice")
    OPS[op.name] = op
    return op


class Backend:
    """A (device type, layout) pair's kernel table."""

    def __init__(self, name: str, device_type: str, layout_name: str) -> None:
        self.name = name
        self.device_type = device_type
        self.layout_name = layout_name
        self.kernels: dict[str, Callable[..., Any]] = {}
        # Called as factory(opdef) -> kernel for elementwise ops without an explicit kernel.
        self.elementwise_factory: Callable[[OpDef], Callable[..., Any]] | None = None
        # Called as fuser(group) -> a prebound kernel call running a run of elementwise ops
        # in one loop (gputensor/_compile/fusion.py's FusedGroup), or None when it declines
        # the group; no fuser: no fusion.
        self.fuse_elementwise: Callable[[Any], Callable[[], None] | None] | None = None
        # guard(kernel) -> kernel run in its device's context (CUDA with several devices:
        # kernels/cuda/device.py), or None; applied to every entry of the table.
        self.guard: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None

    def register(self, op_name: str) -> Callable:
        def deco(fn: Callable) -> Callable:
            # While a profiler runs, kernels registered late (the CUDA backend's, on first use
            # of the device) are wrapped like the rest of the table.
            k = fn if self.guard is None else self.guard(fn)
            wrap = kernel_wrapper
            self.kernels[op_name] = k if wrap is None else wrap(self, op_name, k)
            return fn
        return deco

    def rewrap(self) -> None:
        """Apply the current ``guard`` to every kernel in the table (or strip it when None),
        keeping a profiler's wrapping on the outside."""
        for name, k in list(self.kernels.items()):
            outer = getattr(k, "_gt_profiler_raw", None)
            inner = outer if outer is not None else k
            fn = getattr(inner, "_gt_guarded", inner)
            if self.guard is not None:
                fn = self.guard(fn)
            wrap = kernel_wrapper
            self.kernels[name] = fn if outer is None or wrap is None else wrap(self, name, fn)

    def kernel(self, op_name: str) -> Callable[..., Any]:
        k = self.kernels.get(op_name)
        if k is not None:
            return k
        op = OPS.get(op_name)
        if op is not None and op.expr is not None and self.elementwise_factory is not None:
            k = self.elementwise_factory(op)
            if self.guard is not None:
                k = self.guard(k)
            wrap = kernel_wrapper
            if wrap is not None:
                k = wrap(self, op_name, k)
            self.kernels[op_name] = k
            return k
        raise RuntimeError(f"op '{op_name}' has no kernel for the {self.name} backend "
                           f"({self.device_type}, {self.layout_name})")

    def __repr__(self) -> str:
        return f"<Backend {self.name}: {len(self.kernels)} kernels>"


BACKENDS: dict[tuple[str, str], Backend] = {}

# The profiler's hook, None unless a profiler is running: ``wrap(backend, name, fn)`` returns
# the recording wrapper of a kernel that enters a backend's table while the profiler runs
# (registered late, or compiled on first use by an elementwise factory). The profiler swaps
# whole tables on enter and exit (gputensor/profiler/hooks.py); this covers the entries that
# appear in between.
kernel_wrapper: Callable[[Backend, str, Callable[..., Any]], Callable[..., Any]] | None = None

# Kernel lookups that frontends cache on their hot path (device type -> kernel). Whoever swaps
# entries of a backend's kernel table (the profiler wraps them while it runs) empties these
# caches so the next call looks the kernel up again.
KERNEL_CACHES: list[dict[str, Callable[..., Any]]] = []


def kernel_cache() -> dict[str, Callable[..., Any]]:
    """A new hot-path kernel cache, registered in ``KERNEL_CACHES``."""
    cache: dict[str, Callable[..., Any]] = {}
    KERNEL_CACHES.append(cache)
    return cache


def clear_kernel_caches() -> None:
    for cache in KERNEL_CACHES:
        cache.clear()


# Per-kernel cost models, keyed by backend kernel name (the name a backend registers, such as
# "_gemm" or "_fused_adam"): model(args, result, kwargs) -> (bytes moved, flops), where ``args``
# are the kernel's positional arguments exactly as a frontend passes them (usually the output
# first) and ``result`` is what the kernel returned. They serve kernels whose name is no op, or
# whose op-level model (``OpDef.cost``, written for the frontend's arguments) does not fit the
# kernel's arguments. The profiler declares its models in gputensor/profiler/costs.py.
KernelCostModel = Callable[[Sequence[Any], Any, dict[str, Any]], tuple[int, int]]
KERNEL_COSTS: dict[str, KernelCostModel] = {}


def declare_kernel_cost(*names: str) -> Callable[[KernelCostModel], KernelCostModel]:
    """Decorator: ``model`` is the cost model of the backend kernels ``names``."""
    def deco(model: KernelCostModel) -> KernelCostModel:
        for n in names:
            if n in KERNEL_COSTS:
                raise RuntimeError(f"kernel {n!r} has two cost models")
            KERNEL_COSTS[n] = model
        return model
    return deco


def register_backend(name: str, device_type: str, layout_name: str) -> Backend:
    b = BACKENDS.get((device_type, layout_name))
    if b is None:
        b = BACKENDS[device_type, layout_name] = Backend(name, device_type, layout_name)
    return b


CPU = register_backend("CPU", "cpu", "strided")
CUDA = register_backend("CUDA", "cuda", "strided")
SPARSE_CPU = register_backend("SparseCPU", "cpu", "sparse_coo")
SPARSE_CUDA = register_backend("SparseCUDA", "cuda", "sparse_coo")

"""Activation checkpointing (``torch.utils.checkpoint``): trade compute for memory.

Two variants, as in PyTorch:

- non-reentrant (``use_reentrant=False``, recommended): the function runs once with grad
  enabled under :class:`~gputensor.autograd.graph.saved_tensors_hooks` whose pack hook keeps
  only a small holder per saved tensor, so activations die with the forward. The first unpack
  in backward reruns the function (same RNG states, same autocast) under a second hook that
  hands each recomputed tensor to its holder, in save order, stopping once the last one is
  filled (early stop). The recomputed tensors are re-wrapped by ``SavedTensor`` with the
  forward's autograd metadata, so gradients flow through the original graph.
- reentrant (``use_reentrant=True``): :class:`CheckpointFunction`, an autograd Function whose
  forward runs under no_grad and whose backward reruns the function under enable_grad and
  calls ``gt.autograd.backward`` on the recomputed outputs (a nested backward).

Selective checkpointing (``context_fn=functools.partial(create_selective_checkpoint_contexts,
policy)``, non-reentrant only) keeps the outputs of the ops a policy saves instead of
recomputing them: gputensor/utils/_selective_checkpoint.py.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import gputensor as gt
from gputensor.autograd import graph as _graph
from gputensor.autograd.function import Function
from gputensor.utils._selective_checkpoint import (
    SAC_IGNORED_OPS,
    CheckpointPolicy,
    SelectiveCheckpointContext,
    create_selective_checkpoint_contexts,
)

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction",
           "check_backward_validity", "detach_variable", "get_device_states",
           "set_device_states", "noop_context_fn", "set_checkpoint_early_stop",
           "DefaultDeviceType", "set_checkpoint_debug_enabled", "CheckpointPolicy",
           "SelectiveCheckpointContext", "create_selective_checkpoint_contexts",
           "SAC_IGNORED_OPS", "GraphExecGroup"]

_DEFAULT_DETERMINISM_MODE = "default"
_checkpoint_debug_enabled: bool | None = None
_enable_checkpoint_early_stop: bool | None = None


class CheckpointError(RuntimeError):
    """Recomputation in backward did not reproduce what the forward saved."""


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None) -> Iterator[None]:
    """Overrides the ``debug`` flag of every checkpoint run inside (None defers to it)."""
    global _checkpoint_debug_enabled
    prev = _checkpoint_debug_enabled
    _checkpoint_debug_enabled = enabled
    try:
        yield
    finally:
        _checkpoint_debug_enabled = prev


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Whether non-reentrant checkpoints made inside stop recomputing once every saved
    tensor is back (overrides their ``early_stop``); needed only around the forward."""
    global _enable_checkpoint_early_stop
    prev = _enable_checkpoint_early_stop
    _enable_checkpoint_early_stop = enable
    try:
        yield
    finally:
        _enable_checkpoint_early_stop = prev


_Contexts = tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]


def noop_context_fn() -> _Contexts:
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Detached copies of the tensors in ``inputs`` that keep their ``requires_grad``."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for inp in inputs:
        if not isinstance(inp, gt.Tensor):
            out.append(inp)
            continue
        x = inp.detach()
        x.requires_grad = inp.requires_grad
        out.append(x)
    return tuple(out)


def check_backward_validity(inputs: Iterable[Any]) -> None:
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, gt.Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)


class DefaultDeviceType:
    """The device type whose RNG state is stashed when no argument is on an accelerator."""

    _default_device_type: str | None = None

    @staticmethod
    def set_device_type(device: str = "cuda") -> None:
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type() -> str:
        if not DefaultDeviceType._default_device_type:
            DefaultDeviceType._default_device_type = "cuda" if gt.cuda.is_available() else "cpu"
        return DefaultDeviceType._default_device_type


def _tensors_in(args: Iterable[Any]) -> Iterator[Any]:
    """Tensors in ``args``, looking into lists, tuples and dicts (PyTorch's tree_map)."""
    for a in args:
        if isinstance(a, gt.Tensor):
            yield a
        elif isinstance(a, list | tuple):
            yield from _tensors_in(a)
        elif isinstance(a, dict):
            yield from _tensors_in(a.values())


def _infer_device_type(*args: Any) -> str:
    types = [t.device.type for t in _tensors_in(args) if t.device.type != "cpu"]
    if len(set(types)) > 1:
        warnings.warn(f"Tensor arguments, excluding CPU tensors, are detected on at least two "
                      f"types of devices. Device state will only be saved for devices of a "
                      f"single device type, and the remaining devices will be ignored.\nDevice "
                      f"types: {sorted(set(types))} first device type: {types[0]}", stacklevel=2)
    if not types:
        return DefaultDeviceType.get_device_type()
    return "cuda" if "cuda" in types else types[0]


def _device_module(device_type: str) -> Any:
    return getattr(gt, device_type, None)


def _device_initialized(device_type: str) -> bool:
    module = _device_module(device_type)
    is_init = getattr(module, "is_initialized", None)
    return bool(is_init()) if is_init is not None else False


def get_device_states(*args: Any) -> tuple[list[int], list[Any]]:
    """The ids of the accelerator devices of the tensors in ``args`` and their RNG states."""
    ids = []
    for t in _tensors_in(args):
        if t.device.type not in ("cpu", "meta") and t.get_device() not in ids:
            ids.append(t.get_device())
    module = _device_module(_infer_device_type(*args))
    return ids, [module.get_rng_state(i) for i in ids]


def set_device_states(devices: list[int], states: list[Any], *,
                      device_type: str | None = None) -> None:
    """Restores the RNG ``states`` of accelerator ``devices``."""
    device_type = device_type or DefaultDeviceType.get_device_type()
    if device_type == "meta":
        return
    module = _device_module(device_type)
    for device, state in zip(devices, states, strict=False):
        module.set_rng_state(state, device)


class _RngStash:
    """The CPU and accelerator RNG states of a forward, replayed around its recomputation
    (PyTorch's ``fork_rng`` + ``set_rng_state``): the surrounding states are restored after."""

    def __init__(self, args: tuple[Any, ...], device_type: str, enabled: bool) -> None:
        self.enabled = enabled
        self.device_type = device_type
        self.had_device = False
        if enabled:
            self.cpu_state = gt.get_rng_state()
            if _device_initialized(device_type):
                self.had_device = True
                self.devices, self.states = get_device_states(*args)

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        devices = self.devices if self.had_device else []
        module = _device_module(self.device_type)
        outer_cpu = gt.get_rng_state()
        outer_dev = [module.get_rng_state(d) for d in devices]
        gt.set_rng_state(self.cpu_state)
        if self.had_device:
            set_device_states(self.devices, self.states, device_type=self.device_type)
        try:
            yield
        finally:
            gt.set_rng_state(outer_cpu)
            set_device_states(devices, outer_dev, device_type=self.device_type)


def _autocast_contexts(device_type: str) -> Callable[[], contextlib.ExitStack]:
    """A factory of the autocast state now (device and CPU), to re-enter in recomputation."""
    kinds = [device_type] if device_type != "cpu" and gt.amp.is_autocast_available(device_type) \
        else []
    kinds.append("cpu")
    states = [(k, gt.is_autocast_enabled(k), gt.get_autocast_dtype(k)) for k in kinds]

    def enter() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        for kind, enabled, dtype in states:
            stack.enter_context(gt.autocast(kind, dtype=dtype, enabled=enabled))
        return stack
    return enter


# -- the reentrant variant -------------------------------------------------------------------
class CheckpointFunction(Function):
    """``use_reentrant=True``: forward without a graph; backward reruns and backpropagates."""

    @staticmethod
    def forward(ctx: Any, run_function: Callable, preserve_rng_state: bool, *args: Any) -> Any:
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.device_type = _infer_device_type(*args)
        ctx.autocast = _autocast_contexts(ctx.device_type)
        ctx.rng = _RngStash(args, ctx.device_type, preserve_rng_state)
        ctx.inputs = [None if isinstance(a, gt.Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, gt.Tensor)]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_indices))
        with gt.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors, strict=True):
            inputs[i] = t
        with ctx.rng.replay():
            detached = detach_variable(tuple(inputs))
            with gt.enable_grad(), ctx.autocast():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, gt.Tensor):
            outputs = (outputs,)
        with_grad = [(o, g) for o, g in zip(outputs, grads, strict=False)
                     if isinstance(o, gt.Tensor) and o.requires_grad]
        if not with_grad:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        gt.autograd.backward([o for o, _ in with_grad], [g for _, g in with_grad])
        return (None, None, *(x.grad if isinstance(x, gt.Tensor) else None for x in detached))


# -- the non-reentrant variant ---------------------------------------------------------------
class _Holder:
    """What the forward's pack hook keeps per saved tensor; the recomputation fills it."""

    __slots__ = ("__weakref__",)


class _StopRecomputationError(Exception):
    pass


class _InputsNode(_graph.Node):
    """Names the checkpoint's inputs in version-mismatch errors (they are saved tensors)."""

    __slots__ = ()

    def name(self) -> str:
        return "CheckpointInputs"


_DEBUG_TIP = ("\nTip: To see a more detailed error message, either pass `debug=True` to\n"
              "`gputensor.utils.checkpoint.checkpoint(...)` or wrap the code block\n"
              "with `with gputensor.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\n"
              "enable checkpoint-debug mode globally.\n")


def _default_meta(x: Any) -> dict[str, Any]:
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_DETERMINISM_CHECKS: dict[str, Callable[[Any], Any]] = {
    _DEFAULT_DETERMINISM_MODE: _default_meta, "none": lambda _: None}


class GraphExecGroup:
    """Backward calls inside one group recompute each checkpointed region at most once; they
    must then not overlap (two calls may not need the same saved activation)."""

    _current: GraphExecGroup | None = None

    def __enter__(self) -> GraphExecGroup:
        if GraphExecGroup._current is not None:
            raise RuntimeError(f"GraphExecGroup contexts cannot be nested. Already inside group "
                               f"{GraphExecGroup._current}")
        GraphExecGroup._current = self
        return self

    def __exit__(self, *exc: Any) -> None:
        GraphExecGroup._current = None


class _Frame:
    """One non-reentrant checkpoint: its inputs, one weak holder per saved tensor, and the
    recomputed tensors waiting to be unpacked."""

    def __init__(self, recompute_fn: Callable, args: tuple[Any, ...], early_stop: bool,
                 metadata_fn: Callable[[Any], Any], debug: bool) -> None:
        self.recompute_fn = recompute_fn
        # Inputs are saved tensors of the checkpoint (version-checked; an enclosing
        # checkpoint's hooks apply to them, which is what makes nesting work).
        self.saved_args = [_graph.SavedTensor(a) if isinstance(a, gt.Tensor) else a
                           for a in args]
        self.weak_holders: list[weakref.ref] = []
        self.recomputed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.unpacked: weakref.WeakSet = weakref.WeakSet()   # handed out, in a group
        self.group: GraphExecGroup | None = None   # the group of the last recomputation
        self.x_metadatas: list[Any] = []
        self.early_stop = early_stop
        self.metadata_fn = metadata_fn
        self.debug = debug
        self.forward_ops: list[str] = []
        self.forward_completed = False
        self.ignore_saved_mismatch = False

    # forward: a holder per saved tensor
    def pack(self, x: Any) -> _Holder:
        holder = _Holder()
        self.weak_holders.append(weakref.ref(holder))
        self.x_metadatas.append(self.metadata_fn(x))
        if self.debug:
            self.forward_ops.append(_describe(x))
        return holder

    # backward: recompute everything once, then hand out each tensor once. A holder asked
    # for again (a second backward) recomputes, except inside the GraphExecGroup of the
    # recomputation, where that is an overlap error as in PyTorch.
    def unpack(self, holder: _Holder) -> Any:
        group = GraphExecGroup._current
        if holder not in self.recomputed:
            if group is not None and group is self.group and holder in self.unpacked:
                raise CheckpointError(
                    "torch.utils.checkpoint: Unpack is being triggered for a tensor that was "
                    "already unpacked once. Performing two backward calls that overlap (i.e. "
                    "require the same saved activation in order to compute gradients) is not "
                    "allowed while under the torch.utils.checkpoint.GraphExecGroup context. If "
                    "you are calling ctx.saved_tensors in backward, make sure to do so only "
                    "once. Otherwise please open an issue with details on your use case.")
            self.group = group
            self.unpacked = weakref.WeakSet()
            self.recompute()
        self.unpacked.add(holder)
        return self.recomputed.pop(holder)

    def recompute(self) -> None:
        node = _InputsNode()
        args = [a.unpack(node) if isinstance(a, _graph.SavedTensor) else a
                for a in self.saved_args]
        counter = [0]
        recompute_ops: list[str] = []

        def pack(x: Any) -> Any:
            x = x.detach() if x.requires_grad else x
            i = counter[0]
            counter[0] += 1
            if self.debug:
                recompute_ops.append(_describe(x))
            if i >= len(self.weak_holders):
                if not self.forward_completed:  # a backward inside the checkpointed function
                    self.ignore_saved_mismatch = True
                    return x
                raise CheckpointError("torch.utils.checkpoint: trying to save more tensors "
                                      "during recomputation than during the original forward "
                                      "pass.\n" + _DEBUG_TIP)
            holder = self.weak_holders[i]()
            if holder is not None:  # a holder dies with its node (backward already done)
                self.recomputed[holder] = x
            if self.early_stop and counter[0] == len(self.weak_holders):
                raise _StopRecomputationError
            return x

        try:
            with _graph.saved_tensors_hooks(pack, _identity), gt.enable_grad():
                self.recompute_fn(*args)
        except _StopRecomputationError:
            pass
        self.check(counter[0], recompute_ops)

    def check(self, n_recomputed: int, recompute_ops: list[str]) -> None:
        if self.ignore_saved_mismatch:
            return
        if n_recomputed != len(self.weak_holders):
            self.fail("torch.utils.checkpoint: A different number of tensors was saved during "
                      "the original forward and recomputation.\nNumber of tensors saved during "
                      f"forward: {len(self.weak_holders)}\nNumber of tensors saved during "
                      f"recomputation: {n_recomputed}.\n", recompute_ops)
        different = []
        for i, ref in enumerate(self.weak_holders):
            holder = ref()
            if holder is None or holder not in self.recomputed:
                continue
            meta = self.metadata_fn(self.recomputed[holder])
            if meta != self.x_metadatas[i]:
                different.append(f"tensor at position {i}:\nsaved metadata: "
                                 f"{self.x_metadatas[i]}\nrecomputed metadata: {meta}\n")
        if different:
            self.fail("torch.utils.checkpoint: Recomputed values for the following tensors have "
                      "different metadata than during the forward pass.\n"
                      f"{''.join(different)}.\n", recompute_ops)

    def fail(self, msg: str, recompute_ops: list[str]) -> None:
        if self.debug:  # the saved tensors of each run, in order, instead of the tip
            raise CheckpointError(
                msg + "\nTensors saved during the original forward:\n"
                + "\n".join(self.forward_ops) + "\n\nTensors saved during recomputation:\n"
                + "\n".join(recompute_ops))
        raise CheckpointError(msg + _DEBUG_TIP)


def _identity(x: Any) -> Any:
    return x


def _describe(x: Any) -> str:
    fn = x.grad_fn
    return f"{type(fn).__name__ if fn is not None else 'tensor'}: {_default_meta(x)}"


def _checkpoint_without_reentrant(function: Callable, preserve_rng_state: bool,
                                  context_fn: Callable, determinism_check: str, debug: bool,
                                  early_stop: bool, *args: Any, **kwargs: Any) -> Any:
    debug = _checkpoint_debug_enabled if _checkpoint_debug_enabled is not None else debug
    if debug and context_fn is not noop_context_fn:
        raise ValueError("debug=True is incompatible with non-default context_fn")
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, "
                         f"but got {determinism_check}")
    device_type = _infer_device_type(*args)
    forward_context, recompute_context = context_fn()
    autocast = _autocast_contexts(device_type)
    rng = _RngStash(args, device_type, preserve_rng_state)

    def recompute_fn(*inputs: Any) -> None:
        with rng.replay(), autocast(), recompute_context:
            function(*inputs, **kwargs)

    if not gt.is_grad_enabled():
        return function(*args, **kwargs)
    stop = _enable_checkpoint_early_stop if _enable_checkpoint_early_stop is not None \
        else early_stop
    frame = _Frame(recompute_fn, args, stop, _DETERMINISM_CHECKS[determinism_check], debug)
    suppressed = True
    with _graph.saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        ret = function(*args, **kwargs)
        suppressed = False
    if suppressed:
        raise RuntimeError("torch.utils.checkpoint: the forward context provided by context_fn "
                           "suppressed an exception raised during the checkpointed forward. "
                           "This is not supported because checkpoint cannot return a value for "
                           "a failed forward.")
    frame.forward_completed = True
    if preserve_rng_state and not rng.had_device and _device_initialized(device_type):
        raise RuntimeError("PyTorch's device state was initialized in the forward pass of a "
                           "Checkpoint, which is not allowed. Please open an issue if you need "
                           "this feature.")
    return ret


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable = noop_context_fn,
               determinism_check: str = _DEFAULT_DETERMINISM_MODE, debug: bool = False,
               early_stop: bool = True, **kwargs: Any) -> Any:
    """Runs ``function(*args, **kwargs)`` without keeping its activations; backward
    recomputes them (see the module docstring for the two variants). ``preserve_rng_state``
    (default True) is taken from ``kwargs``, as in PyTorch."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check,
                                         debug, early_stop, *args, **kwargs)


def checkpoint_sequential(functions: Any, segments: int, input: Any,
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Runs ``functions`` (an ``nn.Sequential`` or a list) in ``segments`` chunks, all but the
    last checkpointed."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start: int, end: int, functions: Any) -> Callable:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    if isinstance(functions, gt.nn.Sequential):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input,
                           use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)

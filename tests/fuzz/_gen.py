"""Argument generation for the registry fuzz test: tensor recipes built the same way in
gputensor and PyTorch, and a ``Drawer`` whose helpers (shapes, dims, index tensors, scalars)
the per-op table in test_fuzz_registry.py combines into calls.

A recipe is a NumPy base array plus a list of view steps (transpose, step slice, expand,
offset slice) that both libraries apply with the same methods, so a non-contiguous,
self-overlapping or offset input has the same strides on both sides."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

import gputensor as gt

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
COMPLEX = ["complex64", "complex128"]
REAL = ["bool", *INTS, *FLOATS]
NUMERIC = [*INTS, *FLOATS, *COMPLEX]


def lib_dtype(lib: Any, name: str) -> Any:
    return getattr(lib, name)


@dataclass
class DT:
    """A dtype argument, resolved per library."""
    name: str

    def __repr__(self) -> str:
        return f"<{self.name}>"


@dataclass
class Recipe:
    """A tensor: values (a NumPy array, float32 for bfloat16), dtype and view steps."""
    base: np.ndarray
    dtype: str
    steps: list[tuple[str, Any]] = field(default_factory=list)
    shape: tuple[int, ...] = ()

    def build(self, lib: Any, device: str) -> Any:
        dt = lib_dtype(lib, self.dtype)
        if lib is torch:
            # A copy PyTorch owns, so that out= tensors are resizable as in user code.
            src = torch.from_numpy(np.array(self.base, copy=True)).clone()
            x = src.to(dt)
        else:
            x = gt.tensor(self.base, device=device).to(dt)
        for kind, arg in self.steps:
            if kind == "T":
                x = x.transpose(*arg)
            elif kind == "step":
                x = x[(Ellipsis, slice(None, None, 2))]
            elif kind == "offset":
                x = x[1:]
            elif kind == "expand":
                x = x.expand(*arg)
        return x

    def __repr__(self) -> str:
        steps = "".join(f".{k}{a if a is not None else ''}" for k, a in self.steps)
        vals = f"={self.base.tolist()}" if 0 < self.base.size <= 6 else ""
        return f"T({self.dtype}{list(self.shape)}{steps}{vals})"


SPECIAL_F = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 0.5, -1.5, 65504.0, 3.0]


class Drawer:
    """Hypothesis-driven helpers; values come from a NumPy generator seeded by hypothesis."""

    def __init__(self, data: Any, deep: bool, salt: int = 0) -> None:
        self.data = data
        self.deep = deep
        self.rng = np.random.default_rng([self.draw(st.integers(0, 2**32 - 1)), salt])
        self.max_nd = 4 if deep else 3
        self.max_size = 5 if deep else 4

    def draw(self, strategy: Any) -> Any:
        return self.data.draw(strategy)

    # -- small choices ------------------------------------------------------------------
    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def bool(self) -> bool:
        return self.draw(st.booleans())

    def chance(self, p: float) -> bool:
        """True with probability about ``p`` (a hypothesis draw, so it shrinks to False)."""
        return self.draw(st.integers(0, 999)) < int(p * 1000)

    def dtype(self, among: Sequence[str] = DTYPES) -> str:
        return self.pick(among)

    # -- shapes and tensors ---------------------------------------------------------------
    def shape(self, min_nd: int = 0, max_nd: int | None = None, min_size: int = 0) -> tuple:
        nd = self.int(min_nd, self.max_nd if max_nd is None else max_nd)
        return tuple(self.int(min_size, self.max_size) for _ in range(nd))

    def values(self, shape: Sequence[int], dtype: str, low: float = -4, high: float = 4,
               specials: bool = True) -> np.ndarray:
        rng, n = self.rng, int(np.prod(shape, dtype=np.int64))
        if dtype == "bool":
            return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
        if dtype in INTS:
            info = np.iinfo(dtype)
            lo, hi = max(int(low), int(info.min)), min(int(high), int(info.max))
            v = rng.integers(lo, hi + 1, n, dtype=np.int64)
            if specials and n and rng.random() < 0.3:
                v[rng.integers(0, n)] = rng.choice([info.min, info.max, 0])
            return v.astype(dtype).reshape(shape)
        v = rng.uniform(low, high, n)
        if rng.random() < 0.3:
            v = np.round(v)      # ties and exact integers (floor/round/remainder boundaries)
        if specials and n and rng.random() < 0.4:
            k = rng.integers(1, max(2, n // 2) + 1)
            v[rng.integers(0, n, k)] = rng.choice(SPECIAL_F, k)
        if dtype in COMPLEX:
            w = rng.uniform(low, high, n)
            if specials and n and rng.random() < 0.3:
                w[rng.integers(0, n)] = rng.choice(SPECIAL_F)
            out = (v + 1j * w).astype(dtype)
        elif dtype == "bfloat16":
            out = v.astype(np.float32)
        else:
            with np.errstate(over="ignore"):
                out = v.astype(dtype)
        return out.reshape(shape)

    def tensor(self, shape: Sequence[int] | None = None, dtype: str | Sequence[str] | None = None,
               layout: bool = True, low: float = -4, high: float = 4,
               specials: bool = True) -> Recipe:
        shape = tuple(self.shape() if shape is None else shape)
        if dtype is None:
            dtype = self.dtype()
        elif not isinstance(dtype, str):
            dtype = self.pick(dtype)
        kinds = ["plain"]
        if layout:
            kinds += ["step", "offset", "expand"] if shape else []
            kinds += ["T"] if len(shape) >= 2 else []
        kind = self.pick(kinds)
        base_shape, steps = list(shape), []
        if kind == "T":
            a, b = sorted(self.draw(st.lists(st.integers(0, len(shape) - 1), min_size=2,
                                             max_size=2, unique=True)))
            base_shape[a], base_shape[b] = base_shape[b], base_shape[a]
            steps = [("T", (a, b))]
        elif kind == "step":
            base_shape[-1] *= 2
            steps = [("step", None)]
        elif kind == "offset":
            base_shape[0] += 1
            steps = [("offset", None)]
        elif kind == "expand":
            d = self.int(0, len(shape) - 1)
            base_shape[d] = 1
            steps = [("expand", tuple(shape))]
        base = self.values(base_shape, dtype, low, high, specials)
        return Recipe(base, dtype, steps, shape)

    def like(self, r: Recipe, dtype: str | Sequence[str] | None = None) -> Recipe:
        """A second operand: same shape, a broadcastable shape, or rarely an incompatible one."""
        return self.tensor(self.broadcastable(r.shape), r.dtype if dtype is None else dtype)

    def broadcastable(self, shape: Sequence[int]) -> tuple:
        kind = self.pick(["same", "same", "suffix", "ones", "bad", "prefix"])
        shape = list(shape)
        if kind == "same":
            return tuple(shape)
        if kind == "suffix":
            return tuple(shape[self.int(0, len(shape)):])
        if kind == "ones":
            return tuple(1 if self.bool() else s for s in shape)
        if kind == "prefix":
            return (self.int(1, 3), *shape)
        return (*shape[:-1], shape[-1] + 1) if shape else (2,)

    # -- op arguments ---------------------------------------------------------------------
    def dim(self, r: Recipe | int, none: bool = False) -> Any:
        """A dim of ``r``: usually valid (negative too), sometimes out of range."""
        nd = r if isinstance(r, int) else len(r.shape)
        lo, hi = -max(nd, 1), max(nd, 1) - 1
        options = [self.int(lo, hi)] * 6 + [self.pick([hi + 1, lo - 1, 7])]
        if none:
            options.append(None)
        return self.pick(options)

    def dims(self, r: Recipe) -> Any:
        """None, an int, a tuple (possibly empty or with duplicates) or a list of dims."""
        nd = len(r.shape)
        kind = self.pick(["none", "int", "tuple", "tuple", "empty"])
        if kind == "none":
            return None
        if kind == "int":
            return self.dim(r)
        if kind == "empty":
            return ()
        k = self.int(1, max(1, nd))
        return tuple(self.dim(r) for _ in range(k))

    def scalar(self, kinds: Sequence[str] = ("int", "float", "bool", "special")) -> Any:
        kind = self.pick(kinds)
        if kind == "int":
            return self.pick([0, 1, 2, -3, 5, 300, -129, 2**31, 2**63 - 1])
        if kind == "float":
            return self.pick([0.5, -2.25, 1e-3, 3.0, 1e6, -0.0])
        if kind == "bool":
            return self.bool()
        if kind == "complex":
            return self.pick([1 + 2j, -0.5j, complex(1, 0)])
        return self.pick([float("nan"), float("inf"), -float("inf")])

    def index(self, size: int, shape: Sequence[int], valid: float = 0.85) -> Recipe:
        """An int64 index tensor with values in [-size, size) (out of range now and then)."""
        n = int(np.prod(shape, dtype=np.int64))
        if size == 0 or not self.chance(valid):
            vals = self.rng.integers(-size - 2, size + 3, n)
        else:
            vals = self.rng.integers(0, size, n)
        dtype = "int64" if self.chance(0.9) else self.pick(["int32", "float32", "int16"])
        return Recipe(vals.reshape(shape).astype(np.int64), dtype, [], tuple(shape))

    def sizes_for(self, n: int) -> list[int]:
        """Split sizes summing to ``n`` (wrong sum now and then)."""
        out, left = [], n
        while left > 0:
            k = self.int(1, left)
            out.append(k)
            left -= k
        if self.chance(0.1):
            out.append(1)
        return out or [0]


def materialize(obj: Any, lib: Any, device: str) -> Any:
    """Replace recipes and dtype markers in (nested) arguments by the library's objects."""
    if isinstance(obj, Recipe):
        return obj.build(lib, device)
    if isinstance(obj, DT):
        return lib_dtype(lib, obj.name)
    if isinstance(obj, Dev):
        return device if lib is gt else "cpu"
    if isinstance(obj, tuple):
        return tuple(materialize(o, lib, device) for o in obj)
    if isinstance(obj, list):
        return [materialize(o, lib, device) for o in obj]
    if isinstance(obj, dict):
        return {k: materialize(v, lib, device) for k, v in obj.items()}
    return obj


class Dev:
    """The device argument: the test's device for gputensor, cpu for PyTorch."""

    def __repr__(self) -> str:
        return "<device>"


DEV = Dev()


@dataclass
class Call:
    """One op call: ``form`` is "fn" (lib.<name>), "method" (x.<name>), "inplace"
    (x.<name>_), "F" (nn.functional.<name>) or a callable(lib, *args, **kwargs)."""
    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    form: str | Callable[..., Any] = "fn"
    compare: str = "exact"     # "exact", "meta" (shape/dtype only), or a checker name

    def __repr__(self) -> str:
        a = ", ".join([repr(x) for x in self.args] + [f"{k}={v!r}" for k, v in
                                                        self.kwargs.items()])
        form = self.form if isinstance(self.form, str) else getattr(self.form, "__name__", "fn")
        return f"{self.name}[{form}]({a})"

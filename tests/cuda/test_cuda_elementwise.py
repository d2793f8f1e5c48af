"""CUDA elementwise kernels rendered from the op registry, launched on device tensors by the
CUDA backend's launcher (kernels/cuda/ops/elementwise.py) and compared with the CPU backend (the
same op on CPU tensors).

Every op with an expression is run over every dtype its rule accepts (complex excepted), with
edge values, in three layouts: contiguous, strided/broadcast (non-contiguous output too) and a
Python-scalar operand. All kernels are compiled as ONE module per session (``precompile``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops._core import result_type
from gputensor._ops.elementwise import _rule_dtypes
from gputensor.kernels.cpu import scalar_special
from gputensor.kernels.cuda import elementwise_codegen as E
from gputensor.kernels.registry import BACKENDS, OPS

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime")

DTYPES = (D.bool, D.uint8, D.int8, D.int32, D.int64, D.float16, D.bfloat16, D.float32,
          D.float64)
MIXED_OPS = ("add", "mul", "true_divide", "maximum", "eq", "atan2", "_where", "_lerp")
SCALAR_DTYPES = (D.int64, D.float32)  # dtypes whose binary ops also run with a scalar b
N = 48

# Params for ops that declare no defaults (private ops whose callers pass them).
PARAMS: dict[str, dict] = {
    "_isclose": {"rtol": 1e-5, "atol": 1e-8, "equal_nan": True},
    "_leaky_relu_backward": {"negative_slope": 0.1},
    "_hardtanh_backward": {"min_val": -1.0, "max_val": 1.0},
    "_gelu_backward": {"approximate": 1},
    "_softplus_backward": {"beta": 1.5, "threshold": 20.0},
    "_elu_backward": {"alpha": 1.0, "scale": 1.05, "input_scale": 1.0},
    "_masked_scale": {"scale": 2.5},
    "_smooth_l1": {"beta": 1.0},
    "_smooth_l1_backward": {"beta": 1.0},
    "_huber": {"delta": 1.5},
    "_huber_backward": {"delta": 1.5},
    "round": {"decimals": 1},
    "nan_to_num": {"nan": 1.5, "posinf": None, "neginf": -7.0},
    "add": {"alpha": 2},
    "sub": {"alpha": 3},
}

# Float results may differ by a few ulp where the kernel computes in float what Numba computes
# in double (float literals are float64 in Numba) or where libm routines differ; every other op
# must match bit for bit (NaNs compared as NaN, signed zeros compared).
# The CPU's exp/log/log1p/tanh/sigmoid/erf/gelu/softplus (and float32 expm1/log2/log10) are
# kernels/cpu/fast_math.py's and fast_math64.py's vectorisable polynomials (within 1-2.2 ulp
# of exact) where the emulator calls libm: ops that use them may differ by 2 ulp in float32
# (and in the 16-bit floats, which compute in float32) and by 3 in float64.
_FAST_MATH = re.compile(r"\b(exp|expm1|log|log1p|log2|log10|tanh|sigmoid|erf|gelu_erf|"
                        r"gelu_erf_grad|fast_exp|softplus|softplus_grad)\(")
_SPECIAL_CALL = re.compile(r"\b(" + "|".join(
    n for n in dir(scalar_special) if not n.startswith("_") and callable(
        getattr(scalar_special, n))) + r")\(")
ULP_OPS: dict[str, int] = {
    "sigmoid": 2, "silu": 2, "gelu": 4, "_sigmoid_backward": 2, "_tanh_backward": 2,
    "_gelu_backward": 4, "_silu_backward": 4, "_softplus_backward": 2,
    "_binary_cross_entropy_backward": 2, "_bce_with_logits_backward": 4,
    "_bce_with_logits": 16, "_bce_with_logits_pos_weight": 32, "_binary_cross_entropy": 4,
    # a + c * (b - a) / b - (b - a) * (1 - c): Numba computes 1 - c in float64, and the
    # cancellation near 1e30 magnifies that difference.
    "_lerp": 16,
    # pi and degree factors are float64 literals to Numba: sinc at integers is a cancellation
    # (sin(pi * n) ~ 1e-8 in float, ~1e-16 in double) that REL_ATOL accepts
    "sinc": 4, "deg2rad": 1, "rad2deg": 1, "logaddexp": 2, "hypot": 1,
}
# ... and, for those ops, cancellation between terms of order 1 computed in float (the kernel)
# or float64 (Numba): sigmoid(b) - c, 1 + erf(-4.9) in gelu(-7), the two logs of BCE. Such
# results are also accepted within REL_ATOL * max(1, |want|).
REL_ATOL = 1e-5

# Private float-valued ops (loss and activation backward pieces) that nobody calls with integer
# tensors: with integer compute they convert float intermediates (NaN, +-inf, out of range) to
# integers, undefined in C and LLVM alike (and Numba's integer overflow follows LLVM's nsw
# folding), so only their float dtypes are compared.
FLOAT_VALUED = {
    "_gelu_backward", "_silu_backward", "_softplus_backward", "_elu_backward",
    "_abs_error", "_abs_error_backward", "_smooth_l1", "_smooth_l1_backward", "_huber",
    "_huber_backward", "_binary_cross_entropy", "_binary_cross_entropy_backward",
    "_bce_with_logits", "_bce_with_logits_backward", "_bce_with_logits_pos_weight",
}

_rng = np.random.default_rng(1234)


def _special(op) -> bool:
    """Whether the op calls a torch.special vocabulary function (kernels/cpu/scalar_special.py):
    the CPU runs SciPy's Cephes and the emulator CUDA's math library or the header's own
    algorithms, so results agree to accuracy, not bits; tests/gputensor/test_special.py checks
    each device against SciPy instead."""
    return bool(_SPECIAL_CALL.search(op.expr))


def _ops() -> list:
    return [op for op in OPS.values() if op.expr and not _special(op)]


def _values(dt: D.dtype, n: int, role: str, op_name: str, compute: D.dtype) -> np.ndarray:
    """Random values with edge cases for one operand (role: 'a', 'b' or 'c')."""
    npd = dt.np_dtype
    if dt is D.bool:
        return _rng.random(n) < 0.5
    if dt.category <= D.INTEGRAL:
        info = np.iinfo(npd)
        if op_name in ("bitwise_left_shift", "bitwise_right_shift") and role == "b":
            return _rng.integers(max(info.min, -3), min(info.max, 70), n).astype(npd)
        if op_name == "pow":
            lo, hi = (-3, 40) if role == "b" else (-4, 5)
            return _rng.integers(max(info.min, lo), hi, n).astype(npd)
        v = _rng.integers(max(info.min, -100), min(info.max, 100), n).astype(npd)
        edges = np.array([0, 1, info.max, info.min, info.max - 1, 7], dtype=npd)
        if info.min < 0:
            edges = np.concatenate([edges, np.array([-1, info.min + 1, -7], dtype=npd)])
        v[:len(edges)] = _rng.permutation(edges)
        if role == "b" and OPS[op_name].int_div and compute.category <= D.INTEGRAL:
            v[v == 0] = 3  # integer division by zero raises in the frontend
        return v
    v = _rng.standard_normal(n) * 3
    edges = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, np.inf, -np.inf, np.nan, 1e-3,
                      100.0, -100.0, 1e30, -1e-30, 3.0])
    v[:len(edges)] = _rng.permutation(edges)
    if op_name in ("round", "floor", "ceil", "trunc", "frac"):
        v[len(edges):len(edges) + 8] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.25, 0.35, -0.45])
    with np.errstate(over="ignore"):
        return v.astype(npd)


def _resolve(op, params: dict, compute: D.dtype) -> tuple:
    """The params tuple the frontend hands the kernel (defaults, param_map, resolve_params)."""
    defaults = op.defaults
    values = tuple(params.get(k, defaults.get(k)) for k in op.params)
    pm = op.param_map or {}
    values = tuple(pm[k][v] if k in pm and v in pm[k] else v
                   for k, v in zip(op.params, values, strict=True))
    rp = op.resolve_params
    return rp(values, compute) if rp is not None else values


def _cases(op) -> list[tuple]:
    """(label, out dtype, compute, inputs, out array maker, params dict) for every case."""
    cases = []
    params = PARAMS.get(op.name, {})
    for dt in DTYPES:
        try:
            compute, out_dt = _rule_dtypes(op, dt)
        except RuntimeError:
            continue
        if op.name in FLOAT_VALUED and not compute.is_floating_point:
            continue
        if op.int_quotient and dt.category <= D.INTEGRAL:
            continue  # the frontend refuses integer quotients (addcdiv), as PyTorch does
        if op.int_pow and compute is D.bool:
            continue  # bool ** bool tensor has no kernel (PyTorch's NotImplementedError)
        try:
            _resolve(op, params, compute)
        except RuntimeError:  # the frontend rejects these params for this dtype
            continue
        flat = [_values(dt, N, r, op.name, compute) for r in "abc"[:op.arity]]
        cases.append((f"{dt}-flat", out_dt, compute, flat, lambda s, d: np.empty(s, d),
                       params))
        # strided (4, 6): a transposed, b broadcast along rows, c a stepped slice; the output
        # transposed
        strided = []
        for k, r in enumerate("abc"[:op.arity]):
            v = _values(dt, 48, r, op.name, compute)
            if k == 0:
                strided.append(v[:24].reshape(6, 4).T)
            elif k == 1:
                strided.append(v[:6])
            else:
                strided.append(v.reshape(4, 12)[:, ::2])
        cases.append((f"{dt}-strided", out_dt, compute, strided,
                      lambda s, d: np.empty(s[::-1], d).T, params))
        if op.arity >= 2 and dt in SCALAR_DTYPES and not op.tensor_operands:
            sc = list(flat)
            sc[1] = 3 if dt.category <= D.INTEGRAL else -1.5
            cases.append((f"{dt}-scalar", out_dt, compute, sc, lambda s, d: np.empty(s, d),
                          params))
    if op.name in MIXED_OPS:
        # operands of different dtypes: each is converted to the compute dtype on load
        mixed = [_values(dt, N, r, op.name, D.float32)
                 for dt, r in zip((D.int32, D.float16, D.bool), "abc", strict=False)][:op.arity]
        promoted = result_type(*(gt.from_numpy(x) for x in mixed))
        compute, out_dt = _rule_dtypes(op, promoted)
        cases.append(("mixed", out_dt, compute, mixed, lambda s, d: np.empty(s, d), params))
    return cases


def _shape(inputs: list) -> tuple:
    return np.broadcast_shapes(*(x.shape for x in inputs if isinstance(x, np.ndarray)))


def _cuda(x: object) -> object:
    """A CUDA tensor with ``x``'s values and ``x``'s strides (a view into a device buffer that
    spans them), or ``x`` itself when it is a Python number."""
    if not isinstance(x, np.ndarray):
        return x
    strides = tuple(st // x.itemsize for st in x.strides)
    extent = 1 + sum((n - 1) * st for n, st in zip(x.shape, strides, strict=True))
    host = gt.from_numpy(np.ascontiguousarray(x))
    t = gt.empty(extent, dtype=host.dtype, device="cuda").as_strided(x.shape, strides)
    return t.copy_(host)


def _launch(op, out: gt.Tensor, inputs: list, params: tuple, compute: D.dtype) -> None:
    """The CUDA backend's kernel for ``op``, called as the elementwise frontend calls it."""
    BACKENDS["cuda", "strided"].kernel(op.name)(out, inputs, params, compute)


def _device_case(op, case: tuple) -> tuple:
    """(out, inputs, params, compute) of one case, on the device."""
    _, out_dt, compute, inputs, make_out, params = case
    out = _cuda(make_out(_shape(inputs), out_dt.np_dtype))
    return out, [_cuda(x) for x in inputs], _resolve(op, params, compute), compute


@pytest.fixture(scope="module")
def compiled() -> None:
    from gputensor.kernels.cuda.ops import elementwise as launcher

    specs = []
    for op in _ops():
        for case in _cases(op):
            out, inputs, _, compute = _device_case(op, case)
            specs.append(launcher.spec_for(op, out, inputs, compute))
    # -O0: the emulator's g++ builds the ~950 kernels in ~7 s instead of ~40 s at -O2 (same
    # IEEE results).
    launcher.precompile(specs, "test_cuda_elementwise", options=("-O0",))


def _ordered(x: np.ndarray) -> np.ndarray:
    """Float bits mapped to integers whose order is the floats' order (ulp distances)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    i = x.view(bits).astype(np.int64)
    return np.where(i < 0, np.iinfo(bits).min - i, i)


def _compare(op, label: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (op.name, label)
    if got.dtype.kind != "f" and str(got.dtype) != "bfloat16":
        mism = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        assert mism.size == 0, (f"{op.name} [{label}]: {mism.size} mismatches, e.g. got "
                                f"{got.reshape(-1)[mism[:5]]} want {want.reshape(-1)[mism[:5]]}")
        return
    g, w = got.reshape(-1), want.reshape(-1)
    gn, wn = np.isnan(g.astype(np.float64)), np.isnan(w.astype(np.float64))
    assert np.array_equal(gn, wn), f"{op.name} [{label}]: NaN positions differ"
    ok = ~gn
    dist = np.abs(_ordered(g[ok]) - _ordered(w[ok]))
    tol = ULP_OPS.get(op.name, 0)
    if _FAST_MATH.search(op.expr or ""):
        tol = max(tol, 2 if got.dtype.itemsize <= 4 else 3)
    with np.errstate(invalid="ignore"):  # inf - inf
        wf = w[ok].astype(np.float64)
        near = np.abs(g[ok].astype(np.float64) - wf) <= \
            (REL_ATOL * np.maximum(1, np.abs(wf)) if tol else 0)
    bad = np.flatnonzero((dist > tol) & ~near)
    assert bad.size == 0, (f"{op.name} [{label}]: {bad.size} values beyond {tol} ulp (max "
                           f"{dist.max()}), e.g. got {g[ok][bad[:5]]} want {w[ok][bad[:5]]}")


@cuda
@pytest.mark.parametrize("name", [op.name for op in _ops()])
def test_op_matches_cpu(name: str, compiled: None) -> None:
    op = OPS[name]
    cases = _cases(op)
    assert cases, f"{name}: no dtype to test"
    for case in cases:
        label, _, _, inputs, _, params = case
        tensors = [gt.from_numpy(x) if isinstance(x, np.ndarray) else x for x in inputs]
        with np.errstate(all="ignore"):
            want = op.frontend(*tensors, **params).numpy()
        out, dev_inputs, resolved, compute = _device_case(op, case)
        _launch(op, out, dev_inputs, resolved, compute)
        _compare(op, label, out.cpu().numpy(), want)


# ---- rendering -----------------------------------------------------------------------------
def test_render_syntax() -> None:
    r = E.render_expr
    assert r("b if a else c", ()) == "(a ? b : c)"
    assert r("(a != 0) and not (b < 0) or c", ()) == "(((a != 0) && (!(b < 0))) || c)"
    assert r("0 <= a < 64", ()) == "((0 <= a) && (a < 64))"
    assert r("np.conj(a) * 0.5 + abs(b)", ()) == \
        "((gt::conj(a) * ((gt_float_t)0.5)) + gt::pyabs(b))"
    assert r("a / b - a // b + a % b", ()) == \
        "((gt::truediv(a, b) - gt::floordiv(a, b)) + gt::pymod(a, b))"
    assert r("a * alpha + 3000000000", ("alpha",)) == "((a * p_alpha) + 3000000000LL)"
    assert r("sigmoid(a)", ()) == "gt::sigmoid(a)"


@pytest.mark.parametrize("expr, match", [
    ("a ** 2", r"'\*\*' is not allowed"),
    ("a + d", "unknown name 'd'"),
    ("foo(a)", "unknown function"),
    ("np.foo(a)", "unknown function"),
    ("a if a in b else c", "unsupported comparison"),
    ("maximum(a, b=1)", "keyword arguments"),
    ("[a]", "unsupported syntax"),
    ("a +", "cannot parse"),
])
def test_render_rejects(expr: str, match: str) -> None:
    with pytest.raises(E.RenderError, match=match):
        E.render_expr(expr, (), 2, "myop")


def test_vocabulary_matches_cpu() -> None:
    """Every CPU vocabulary name has a device function, and every op expression renders."""
    from gputensor.kernels.cpu import scalar_fns

    cpu_names = {n for n in vars(scalar_fns) if not n.startswith("_") and callable(
        getattr(scalar_fns, n)) and n not in ("njit", "overload", "intrinsic", "float_from_bits",
                                              "ordered_bits", "Callable")}
    assert cpu_names <= E.VOCABULARY | {"ipow"}, sorted(cpu_names - E.VOCABULARY)
    for op in _ops():
        E.render_expr(op.expr, op.params, op.arity, op.name)


# ---- layouts and errors ----------------------------------------------------------------------
@cuda
def test_offset_transposed_size1_and_noncontiguous_out() -> None:
    op = OPS["add"]
    a = gt.tensor(np.arange(40, dtype=np.float32), device="cuda")[4:].view(6, 6)[::2, 1:].t()
    b = gt.tensor([[10.0]], device="cuda")  # size 1: broadcast by zero strides
    out = gt.zeros((6, 11), device="cuda")[::2, 1::2].t()  # strided, transposed output
    _launch(op, out, [a, b], (2,), D.float32)
    np.testing.assert_array_equal(out.cpu().numpy(), a.cpu().numpy() + 2 * 10.0)


def test_complex_kernels_take_scalars_as_pairs() -> None:
    src = E.kernel_source(E.KernelSpec("add", "a + alpha * b", ("alpha",), D.complex64,
                                       D.complex64, (D.complex64, None)))
    assert "float b_in_re, float b_in_im, float p_alpha_re, float p_alpha_im" in src


@cuda
def test_repeated_layouts_allocate_only_their_outputs() -> None:
    """Broadcast, strided and offset operands pass their layout in cached device metadata:
    after a layout's first launch, an op allocates its output and nothing else (and operands
    that start inside their storage are addressed by their first element)."""
    a = gt.tensor(np.arange(64 * 32, dtype=np.float32).reshape(64, 32), device="cuda")
    b = gt.tensor(np.arange(32, dtype=np.float32), device="cuda")
    an, bn = a.cpu().numpy(), b.cpu().numpy()
    cases = [(lambda: a + b, an + bn), (lambda: a.t() * 2.0, an.T * 2.0),
             (lambda: a[3:, 1::2] - b[1::2], an[3:, 1::2] - bn[1::2])]
    for f, want in cases:
        np.testing.assert_array_equal(f().cpu().numpy(), want)
        before = gt.cuda.memory_stats()["allocation.all.allocated"]
        results = [f() for _ in range(3)]
        assert gt.cuda.memory_stats()["allocation.all.allocated"] - before == 3
        np.testing.assert_array_equal(results[-1].cpu().numpy(), want)


@cuda
def test_ten_unmergeable_dims_match_cpu() -> None:
    """Layouts that keep many dims after merging (PyTorch's CUDA kernels take up to 25)."""
    x = gt.tensor(np.arange(2**10, dtype=np.float32).reshape((2,) * 10))
    order = tuple(range(9, -1, -1))
    got = (x.cuda().permute(*order) * 2 + x.cuda()[..., :1].permute(*order)).cpu()
    want = x.permute(*order) * 2 + x[..., :1].permute(*order)
    np.testing.assert_array_equal(got.numpy(), want.numpy())

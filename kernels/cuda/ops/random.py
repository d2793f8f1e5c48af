"""The CUDA backend's sampling kernels (kernels/cuda/random.cu), bit-compatible with the CPU's.

A gt.Generator is NumPy's Philox4x64-10 bit generator (key, counter, four buffered words). The
device kernels receive that state as 13 words, compute every word they need from the counter
themselves (no sequential dependency between threads), reproduce the CPU kernels' NumPy
samplers word for word, and the generator is then advanced on the host by exactly the number
of words used, so a seed gives the same numbers on the CPU and on CUDA, draw after draw.

Fixed-width samplers (uniforms, bernoulli, multinomial with replacement) map value i to word i.
Rejection samplers (ziggurat normals and exponentials, cauchy, geometric, Lemire integers) run
as a chunked chain (see random.cu); their word count is read back once per call because the
generator's state lives in Python. Poisson (per-element rates) and randperm (Fisher-Yates) run
sequentially in one device thread. The ziggurat tables are NumPy's, read off its samplers once.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CUDA

from ..device import (
    CudaSource,
    grid_for,
    launch,
    runtime,
)
from ..dtypes import CTYPES, FLOAT_DTYPES, REAL_DTYPES, SHORT

SRC = CudaSource("random.cu")
BLOCK = 256
CHUNK = 64  # the shortest chain chunk, in words
_U64 = (1 << 64) - 1

_WORK = {D.float16: "float", D.bfloat16: "float", D.float32: "float", D.float64: "double"}
_FLOATS = [{"s": SHORT[d], "T": CTYPES[d], "W": _WORK[d]} for d in FLOAT_DTYPES]
_ALL = [{"s": SHORT[d], "T": CTYPES[d]} for d in REAL_DTYPES]
_ST = "const unsigned long long* st"

SRC.instantiate("uniform_{s}", "{T}* out, " + _ST + ", long long n, int mode, double low, "
                "double high, double top, double below",
                "gt_uniform<{T}, {W}>(out, st, n, mode, low, high, top, below)", _FLOATS)
SRC.instantiate("bernoulli_{s}", "{T}* out, " + _ST + ", long long n, double p, const double* pa",
                "gt_bernoulli<{T}>(out, st, n, p, pa)", _ALL)
SRC.instantiate("check_range_{s}", "const {T}* x, long long n, double lo, double hi, "
                "long long* flags", "gt_check_range<{T}>(x, n, lo, hi, flags)", _FLOATS)
SRC.instantiate("normal_finish_{s}", "{T}* out, const unsigned long long* raw, long long n, "
                "double mre, double mim, double sd, const double* mt, const double* stt, int c",
                "gt_normal_finish<{T}, {W}>(out, raw, n, mre, mim, sd, mt, stt, c)", _FLOATS)
SRC.instantiate("real_finish_{s}", "{T}* out, const unsigned long long* raw, long long n, int op, "
                "double a, double b", "gt_real_finish<{T}, {W}>(out, raw, n, op, a, b)", _FLOATS)
SRC.instantiate("int_finish_{s}", "{T}* out, const unsigned long long* raw, long long n, "
                "long long low", "gt_int_finish<{T}>(out, raw, n, low)", _ALL)
SRC.instantiate("multinomial_prep_{s}", "const {T}* p, long long rows, long long cats, "
                "long long rs, long long cs, double* cdf, long long* last, long long* flags",
                "gt_multinomial_prep<{T}>(p, rows, cats, rs, cs, cdf, last, flags)", _FLOATS)
SRC.instantiate("multinomial_rank_{s}", "const {T}* p, long long rows, long long cats, "
                "long long rs, long long cs, const unsigned long long* e, long long ns, "
                "long long* out", "gt_multinomial_rank<{T}>(p, rows, cats, rs, cs, e, ns, out)",
                _FLOATS)
SRC.instantiate("multinomial_draw", _ST + ", const double* cdf, const long long* last, "
                "long long rows, long long cats, long long ns, long long* out",
                "gt_multinomial_draw(st, cdf, last, rows, cats, ns, out)", [{}])
SRC.instantiate("poisson_seq", _ST + ", const double* lam, long long n, unsigned long long* out, "
                "long long* status", "gt_poisson_seq(st, lam, n, out, status)", [{}])
SRC.instantiate("randperm_seq", _ST + ", long long n, long long* out, long long* status",
                "gt_randperm_seq(st, n, out, status)", [{}])

# Chain samplers: name -> (C++ sampler, 32-bit words?, expected words per value).
SAMPLERS = {
    "normal64": ("GtNormal64", False, 1.01), "normal32": ("GtNormal32", True, 1.01),
    "exp64": ("GtExp64", False, 1.02), "exp32": ("GtExp32", True, 1.02),
    "cauchy": ("GtCauchy", False, 2.02), "geometric": ("GtGeometric", False, 1.02),
    "lemire32": ("GtLemire32", True, 1.0), "lemire64": ("GtLemire64", False, 1.0),
}
_CHAIN = [{"k": k, "S": v[0]} for k, v in SAMPLERS.items()]
_CARGS = _ST + ", const unsigned long long* zt, const double* prm, long long start, " \
    "long long chunk, long long nchunks"
SRC.instantiate("chain_walk_{k}", _CARGS + ", long long* ex, long long* cnt",
                "gt_chain_walk<{S}>(st, zt, prm, start, chunk, nchunks, ex, cnt)", _CHAIN)
SRC.instantiate("chain_link_{k}", _CARGS + ", long long n, const long long* ex, "
                "const long long* cnt, long long* entry, long long* base, long long* status",
                "gt_chain_link<{S}>(st, zt, prm, start, chunk, nchunks, n, ex, cnt, entry, "
                "base, status)", _CHAIN)
SRC.instantiate("chain_emit_{k}", _CARGS + ", long long n, const long long* entry, "
                "const long long* base, unsigned long long* out",
                "gt_chain_emit<{S}>(st, zt, prm, start, chunk, nchunks, n, entry, base, out)",
                _CHAIN)


# ---- helpers ----------------------------------------------------------------------------------
def _scratch(n: int, dt: D.dtype, dev: Any) -> Tensor:
    """A flat device work array (at least one element, so its pointer is never null)."""
    from gputensor.kernels.allocation import empty
    return empty((max(int(n), 1),), dt, dev)


def _read(t: Tensor, count: int) -> list[int]:
    """A few int64 values of a device scratch tensor, read back to the host."""
    return [int(v) for v in t[:count].cpu()._host.tolist()]


def _zeros_i64(n: int, dev: Any) -> Tensor:
    return _upload(np.zeros(n, dtype=np.int64), dev)


def _upload(arr: np.ndarray, dev: Any) -> Tensor:
    """A small host array (state, parameters) as a device tensor."""
    from gputensor.kernels.allocation import empty
    arr = np.ascontiguousarray(arr)
    dt = {np.dtype(np.int64): D.int64, np.dtype(np.uint64): D.int64,
          np.dtype(np.float64): D.float64}[arr.dtype]
    t = empty(arr.shape, dt, dev)
    if arr.size:
        from gputensor.storage.allocator import driver_for
        driver_for("cuda").from_host(t._storage._buf, 0, arr)
    return t


RUN = 4  # values per thread in the fixed-width kernels (GT_RUN in random.cu)


def _launch(name: str, n: int, args: list, grid: int | None = None, block: int = BLOCK,
            run: int = 1) -> None:
    grid = grid if grid is not None else grid_for(-(-n // run), block)
    launch(SRC, name, grid, block, args)


# ---- the generator's state ------------------------------------------------------------------
def _state(gen: Any) -> tuple[dict, np.ndarray]:
    st = gen._rng.bit_generator.state
    words = np.zeros(13, dtype=np.uint64)
    words[0:2] = st["state"]["key"]
    words[2:6] = st["state"]["counter"]
    words[6:10] = st["buffer"]
    words[10] = st["buffer_pos"]
    words[11] = st["has_uint32"]
    words[12] = st["uinteger"]
    return st, words


def _advance64(st: dict, words: int) -> dict:
    """The bit generator state after ``words`` more 64-bit draws (NumPy's next_uint64)."""
    pos = int(st["buffer_pos"])
    if words <= 4 - pos:
        st["buffer_pos"] = pos + words
        return st
    t = words - (4 - pos)
    blocks = (t + 3) // 4
    ctr = sum(int(c) << (64 * i) for i, c in enumerate(st["state"]["counter"]))
    ctr = (ctr + blocks - 1) % (1 << 256)  # one block short: random_raw makes the last one
    bg = np.random.Philox()
    bg.state = {"bit_generator": "Philox",
                "state": {"counter": np.array([(ctr >> (64 * i)) & _U64 for i in range(4)],
                                              dtype=np.uint64),
                          "key": np.asarray(st["state"]["key"], dtype=np.uint64)},
                "buffer": np.zeros(4, dtype=np.uint64), "buffer_pos": 4,
                "has_uint32": st["has_uint32"], "uinteger": st["uinteger"]}
    bg.random_raw(1)
    new = bg.state
    new["buffer_pos"] = t - 4 * (blocks - 1)
    return new


def _advance(gen: Any, st: dict, words: int, w32: bool) -> None:
    """Move ``gen`` past ``words`` draws (32-bit ones when ``w32``), as the CPU would have."""
    if words <= 0:
        return
    if w32:
        if st["has_uint32"]:
            st["has_uint32"] = 0  # NumPy leaves the stale half in uinteger
            words -= 1
        w64 = (words + 1) // 2
        if w64:  # NumPy keeps the last word's high half in uinteger, even once used
            st = _advance64(st, w64)
            last = int(st["buffer"][st["buffer_pos"] - 1])
            st["has_uint32"], st["uinteger"] = words % 2, last >> 32
    else:
        st = _advance64(st, words)
    gen._rng.bit_generator.state = st


class _Draw:
    """One sampling call: the state snapshot on the device, and the advance afterwards."""

    def __init__(self, gen: Any, dev: Any) -> None:
        self.gen = gen
        gen._lock.acquire()
        try:
            self.st, words = _state(gen)
            self.dev_state = _upload(words.view(np.int64), dev)
        except BaseException:
            gen._lock.release()
            raise

    def __enter__(self) -> _Draw:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.gen._lock.release()

    def advance(self, words: int, w32: bool) -> None:
        _advance(self.gen, self.st, words, w32)


# ---- ziggurat tables (NumPy's, probed once from its samplers) ---------------------------------
_zig_lock = threading.Lock()
_zig_host: list[np.ndarray] = []
_zig_dev: dict[int, Tensor] = {}


class _Probe:
    """Runs one NumPy sampler on a hand-made first word and reports the value and words used."""

    def __init__(self) -> None:
        self.bg = np.random.Philox(key=0)
        self.g = np.random.Generator(self.bg)
        self.base = self.bg.state

    def run(self, fn: Any, word: int, w32: bool) -> tuple[float, bool]:
        st = dict(self.base)
        st["buffer"] = np.array([word, 0, 0, 0], dtype=np.uint64)
        st["buffer_pos"], st["has_uint32"], st["uinteger"] = 0, 0, 0
        self.bg.state = st
        v = fn(self.g)
        after = self.bg.state
        same = bool((after["state"]["counter"] == self.base["state"]["counter"]).all())
        one = same and after["buffer_pos"] == 1 and (after["has_uint32"] == 1 or not w32)
        return float(v), one


def _probe_tables() -> np.ndarray:
    pr = _Probe()
    normal64 = lambda g: g.standard_normal()  # noqa: E731
    normal32 = lambda g: g.standard_normal(dtype=np.float32)  # noqa: E731
    exp64 = lambda g: g.standard_exponential()  # noqa: E731
    exp32 = lambda g: g.standard_exponential(dtype=np.float32)  # noqa: E731

    def table(fn: Any, word: Any, bits: int, w32: bool, scale: float,
              f: Any) -> tuple[list, list, list]:
        ks, ws = [], []
        for idx in range(256):
            ws.append(pr.run(fn, word(idx, 1), w32)[0])
            lo, hi = 0, 1 << bits  # smallest magnitude that leaves the fast path
            while lo < hi:
                mid = (lo + hi) // 2
                if pr.run(fn, word(idx, mid), w32)[1]:
                    lo = mid + 1
                else:
                    hi = mid
            ks.append(lo)
        fs = [1.0] + [f(w * scale) for w in ws[1:]]
        return ks, ws, fs

    ki, wi, fi = table(normal64, lambda i, m: i | (m << 9), 52, False, 2.0 ** 52,
                       lambda x: math.exp(-0.5 * x * x))
    ke, we, fe = table(exp64, lambda i, m: (i << 3) | (m << 11), 53, False, 2.0 ** 53,
                       lambda x: math.exp(-x))
    kif, wif, fif = table(normal32, lambda i, m: i | (m << 9), 23, True, 2.0 ** 23,
                          lambda x: math.exp(-0.5 * x * x))
    kef, wef, fef = table(exp32, lambda i, m: (i << 1) | (m << 9), 23, True, 2.0 ** 23,
                          lambda x: math.exp(-x))
    fif = [float(np.float32(v)) for v in fif]
    fef = [float(np.float32(v)) for v in fef]

    def bits(vals: list) -> np.ndarray:
        return np.asarray(vals, dtype=np.float64).view(np.uint64)

    parts = [np.asarray(ki, dtype=np.uint64), bits(wi), bits(fi),
             np.asarray(ke, dtype=np.uint64), bits(we), bits(fe),
             np.asarray(kif, dtype=np.uint64), bits(wif), bits(fif),
             np.asarray(kef, dtype=np.uint64), bits(wef), bits(fef)]
    return np.concatenate(parts)


def _zig(dev: Any) -> Tensor:
    key = id(runtime())
    t = _zig_dev.get(key)
    if t is None:
        with _zig_lock:
            if not _zig_host:
                _zig_host.append(_probe_tables())
            t = _zig_dev[key] = _upload(_zig_host[0].view(np.int64), dev)
    return t


# ---- the chain ------------------------------------------------------------------------------
def _chunk_words(words: int) -> int:
    """Chunk length: about sqrt(words), so the sequential link pass and each chunk's walk stay
    short together (64 words for small draws, at most 4096)."""
    return min(4096, max(CHUNK, 1 << max(0, math.isqrt(max(words, 1)).bit_length())))


def _chain(draw: _Draw, kind: str, n: int, params: list[float], dev: Any) -> Tensor:
    """n raw values (64-bit) of sampler ``kind``; advances the generator by the words used."""
    sname, w32, per = SAMPLERS[kind]
    raw = _scratch(n, D.int64, dev)
    if n == 0:
        return raw
    zt = _zig(dev)
    prm = _upload(np.asarray(params + [0.0], dtype=np.float64), dev)
    status = _zeros_i64(2, dev)
    pos, done = 0, 0
    while done < n:
        words = int((n - done) * per * 1.05) + 4 * CHUNK
        chunk = _chunk_words(words)
        nch = max(1, -(-words // chunk))
        ex, cnt = _scratch(nch, D.int64, dev), _scratch(nch, D.int64, dev)
        entry, base = _scratch(nch, D.int64, dev), _scratch(nch, D.int64, dev)
        common = [draw.dev_state, zt, prm, pos, chunk, nch]
        _launch(f"chain_walk_{kind}", nch, common + [ex, cnt], block=64)
        _launch(f"chain_link_{kind}", 1, common + [n, ex, cnt, entry, base, status], grid=1,
                block=1)
        _launch(f"chain_emit_{kind}", nch, common + [n, entry, base, raw], block=64)
        pos, done = _read(status, 2)
    draw.advance(pos, w32)
    return raw


# ---- output handling ----------------------------------------------------------------------
def _dense(out: Tensor) -> Tensor:
    """out itself when contiguous, else a contiguous temporary copied back by _commit."""
    return out if out.is_contiguous() else _scratch_like(out)


def _scratch_like(out: Tensor) -> Tensor:
    from gputensor.kernels.allocation import empty
    return empty(tuple(out._shape), out._dtype, out.device)


def _commit(out: Tensor, dense: Tensor) -> None:
    """Copy the dense samples into a strided out (the frontend bumps the version once)."""
    if dense is not out:
        from gputensor.kernels.allocation import strided_copy
        strided_copy(out, dense)


def _as_f64(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A tensor parameter as contiguous float64 broadcast to ``shape`` (device ops only)."""
    t = x if x.dtype is D.float64 else x.to(D.float64)
    if tuple(t._shape) != tuple(shape):
        t = t.expand(shape)
    return t.contiguous()


def _real_of(dt: D.dtype) -> D.dtype:
    return dt.to_real() if dt.is_complex else dt


def _check(x: Tensor, lo: float, hi: float) -> tuple[int, int]:
    """(bad count, first bad index) of x's values outside [lo, hi] or NaN."""
    xc = x.contiguous()
    flags = _upload(np.array([0, np.iinfo(np.int64).max], dtype=np.int64), xc.device)
    n = xc.numel()
    if n:
        _launch(f"check_range_{SHORT[xc.dtype]}", n, [xc, n, lo, hi, flags])
    bad, first = _read(flags, 2)
    return bad, first


def _value_at(x: Tensor, flat: int) -> float:
    return float(x.contiguous().reshape(-1)[flat].item())


# ---- kernels --------------------------------------------------------------------------------
_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}


@CUDA.register("uniform_")
def uniform_(out: Tensor, gen: Any, low: float, high: float) -> None:
    """U[low, high) from 53-bit (float64), 24-bit (float32) or k-bit (16-bit) fractions."""
    real = _real_of(out._dtype)
    dense = _dense(out)
    ncomp = out.numel() * (2 if out._dtype.is_complex else 1)
    mode = 0 if real is D.float64 else 1 if real is D.float32 else _DIGITS[real]
    np_t = real.np_dtype
    top = np.asarray(high, dtype=np_t)
    below = np.nextafter(top, np.asarray(low, dtype=np_t))
    with _Draw(gen, out.device) as draw:
        if ncomp:
            _launch(f"uniform_{SHORT[real]}", ncomp,
                    [dense, draw.dev_state, ncomp, mode, float(low), float(high),
                     float(top), float(below)], run=RUN)
        draw.advance(ncomp, mode != 0)
    _commit(out, dense)


@CUDA.register("normal_")
def normal_(out: Tensor, gen: Any, mean: Any, std: Any) -> None:
    """mean + std * N(0, 1) (NumPy's ziggurat); complex parts have variance 1/2 each."""
    if isinstance(std, Tensor):
        bad, _ = _check(std, 0.0, math.inf)
        if bad:
            raise RuntimeError("normal expects all elements of std >= 0.0")
    real = _real_of(out._dtype)
    cplx = out._dtype.is_complex
    dense = _dense(out)
    ncomp = out.numel() * (2 if cplx else 1)
    tensors = isinstance(mean, Tensor) or isinstance(std, Tensor)
    mt = _as_f64(mean, out._shape) if isinstance(mean, Tensor) else None
    stt = _as_f64(std, out._shape) if isinstance(std, Tensor) else None
    m = 0.0 if mt is not None else mean
    mre, mim = (m.real, m.imag) if isinstance(m, complex) else (float(m), 0.0)
    sd = 1.0 if stt is not None else float(std)
    kind = "normal64" if real is D.float64 else "normal32"
    with _Draw(gen, out.device) as draw:
        raw = _chain(draw, kind, ncomp, [], out.device)
    if ncomp:
        _launch(f"normal_finish_{SHORT[real]}", ncomp,
                [dense, raw, ncomp, mre, mim, sd, mt, stt, int(cplx and not tensors)])
    _commit(out, dense)


def _real_sample(out: Tensor, gen: Any, kind64: str, kind32: str | None, op: int, a: float,
                 b: float) -> None:
    dense = _dense(out)
    n = out.numel()
    kind = kind64 if out._dtype is D.float64 or kind32 is None else kind32
    with _Draw(gen, out.device) as draw:
        raw = _chain(draw, kind, n, [], out.device)
    if n:
        _launch(f"real_finish_{SHORT[out._dtype]}", n, [dense, raw, n, op, float(a), float(b)])
    _commit(out, dense)


@CUDA.register("log_normal_")
def log_normal_(out: Tensor, gen: Any, mean: float, std: float) -> None:
    _real_sample(out, gen, "normal64", "normal32", 0, mean, std)


@CUDA.register("exponential_")
def exponential_(out: Tensor, gen: Any, lambd: float) -> None:
    _real_sample(out, gen, "exp64", "exp32", 1, lambd, 0.0)


@CUDA.register("cauchy_")
def cauchy_(out: Tensor, gen: Any, median: float, sigma: float) -> None:
    _real_sample(out, gen, "cauchy", None, 2, median, sigma)


def _int_store(out: Tensor, dense: Tensor, raw: Tensor, low: int) -> None:
    n = out.numel()
    if n:
        low64 = ((low + (1 << 63)) % (1 << 64)) - (1 << 63)
        _launch(f"int_finish_{SHORT[out._dtype]}", n, [dense, raw, n, low64])
    _commit(out, dense)


@CUDA.register("geometric_")
def geometric_(out: Tensor, gen: Any, p: float) -> None:
    """Trials up to the first success: NumPy's search (p >= 1/3) or exponential inversion."""
    dense = _dense(out)
    with _Draw(gen, out.device) as draw:
        raw = _chain(draw, "geometric", out.numel(), [float(p)], out.device)
    _int_store(out, dense, raw, 0)


@CUDA.register("random_")
def random_(out: Tensor, gen: Any, low: int, high: int) -> None:
    """Integers uniform on [low, high): NumPy's Lemire bounded integers on int64."""
    rng = high - 1 - low
    dense = _dense(out)
    n = out.numel()
    with _Draw(gen, out.device) as draw:
        if rng == 0:
            raw = _upload(np.zeros(max(n, 1), dtype=np.int64), out.device)
        elif rng <= 0xFFFFFFFF:
            raw = _chain(draw, "lemire32", n, [float(rng)], out.device)
        else:
            raw = _chain(draw, "lemire64", n, [float(rng >> 32), float(rng & 0xFFFFFFFF)],
                         out.device)
    _int_store(out, dense, raw, low)


@CUDA.register("randperm")
def randperm(out: Tensor, gen: Any, n: int) -> None:
    """NumPy's permutation: Fisher-Yates in one device thread (inherently sequential)."""
    if n > 0xFFFFFFFF:
        raise RuntimeError("randperm on CUDA supports n <= 2**32")
    dense = _dense(out)
    perm = _scratch(n, D.int64, out.device)
    status = _zeros_i64(1, out.device)
    with _Draw(gen, out.device) as draw:
        if n:
            _launch("randperm_seq", 1, [draw.dev_state, n, perm, status], grid=1, block=1)
            draw.advance(_read(status, 1)[0], True)
    _int_store(out, dense, perm, 0)


@CUDA.register("bernoulli")
def bernoulli(out: Tensor, gen: Any, p: Any) -> None:
    """1 where a 53-bit uniform is below p (a number, or a tensor broadcastable to out)."""
    pa = None
    if isinstance(p, Tensor):
        bad, first = _check(p if p.dtype.is_floating_point else p.to(D.float64), 0.0, 1.0)
        if bad:
            val = _value_at(p, first)
            raise RuntimeError(f"bernoulli: expected all probabilities p to be in [0, 1], but "
                               f"found p={val} (Expected p_in >= 0 && p_in <= 1)")
        pa = _as_f64(p, out._shape)
    dense = _dense(out)
    n = out.numel()
    with _Draw(gen, out.device) as draw:
        if n:
            _launch(f"bernoulli_{SHORT[out._dtype]}", n,
                    [dense, draw.dev_state, n, 0.0 if pa is not None else float(p), pa],
                    run=RUN)
        draw.advance(n, False)
    _commit(out, dense)


@CUDA.register("poisson")
def poisson(out: Tensor, gen: Any, rates: Tensor) -> None:
    """NumPy's Poisson sampler in one device thread (its word use depends on each rate)."""
    lam = _as_f64(rates, out._shape)
    bad, _ = _check(lam, 0.0, math.inf)
    if bad:
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    bad, first = _check(lam, 0.0, 1e18)
    if bad:
        raise RuntimeError(f"poisson: rate {_value_at(lam, first)} is too large to sample")
    dense = _dense(out)
    n = out.numel()
    raw = _scratch(n, D.int64, out.device)
    status = _zeros_i64(1, out.device)
    with _Draw(gen, out.device) as draw:
        if n:
            _launch("poisson_seq", 1, [draw.dev_state, lam, n, raw, status], grid=1, block=1)
            draw.advance(_read(status, 1)[0], False)
    _int_store(out, dense, raw, 0)


@CUDA.register("multinomial")
def multinomial(out: Tensor, gen: Any, probs: Tensor, num_samples: int,
                replacement: bool) -> None:
    """Inverse-CDF draws (with replacement) or the top keys p / Exp(1) per row (without)."""
    p = probs if probs.dim() == 2 else probs.unsqueeze(0)
    rows, cats = p.shape
    rs, cs = p._stride
    dev = out.device
    cdf = _scratch(rows * cats, D.float64, dev)
    last = _scratch(rows, D.int64, dev)
    flags = _zeros_i64(2, dev)
    pbase = p  # strided access through (rs, cs) from the first element
    if rows:
        _launch(f"multinomial_prep_{SHORT[p.dtype]}", rows,
                [pbase, rows, cats, rs, cs, cdf, last, flags])
    bad, nonpos = _read(flags, 2)
    if bad:
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if nonpos:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    dense = _dense(out)
    idx = dense if dense.dtype is D.int64 else _scratch(rows * num_samples, D.int64, dev)
    with _Draw(gen, dev) as draw:
        if replacement:
            n = rows * num_samples
            if n:
                _launch("multinomial_draw", n,
                        [draw.dev_state, cdf, last, rows, cats, num_samples, idx], run=RUN)
            draw.advance(n, False)
        else:
            expo = _chain(draw, "exp64", rows * cats, [], dev)
            if rows * cats:
                _launch(f"multinomial_rank_{SHORT[p.dtype]}", rows * cats,
                        [pbase, rows, cats, rs, cs, expo, num_samples, idx])
    if idx is not dense:
        from gputensor.kernels.allocation import strided_copy
        strided_copy(dense, idx.reshape(dense.shape))
    _commit(out, dense)

// Reductions, arg-extrema, scans and softmax for the CUDA backend.
//
// Every reduction is one pass over its input. The launcher (kernels/cuda/ops/reduce.py)
// describes the input as kept dims (one output each, row-major) and reduced dims (the index k,
// row-major), merged where memory allows, in a small int64 array:
//     meta = [nk, ksize[nk], kstride[nk], nr, rsize[nr], rstride[nr]]   (element strides)
// A block of 256 threads serves P outputs with T lanes each (P * T == 256):
//   row mode    (the reduced index is the innermost in memory): tid = p * T + t, the T lanes of
//               an output read consecutive k, so a warp reads contiguous memory;
//   column mode (an output index is innermost):                 tid = t * P + p, neighbouring
//               threads own neighbouring outputs and walk k together (coalesced too).
// Lanes combine by warp shuffles (xor butterflies within the warp), then across warps through
// shared memory. Few outputs with a long reduction split k over blockIdx.y: each block writes
// its partial accumulator to a workspace and a second small kernel combines the partials in a
// fixed order (results never depend on timing).
//
// An op is a struct: Acc (a POD accumulator), init(), step(acc, x, k, p) (one element),
// comb(a, b), shfl(acc, lane_xor) and store(acc, K, p, flag, out1, out2, o). The structs of
// the one-number folds (sum, nansum, prod, mean, amax, amin, all, any, count_nonzero, the
// norms) are generated from their declarations in kernels/reduce.py (fold_codegen.py) and
// appended to this source; the multi-field ones are written here: var/std (Welford, float64,
// complex<double> means), logsumexp (a running max and shifted sum, float64) and the
// arg-extrema. Scans accumulate in float64/complex128/int64.
#include "common.cuh"
#include "scalar_fns.cuh"

namespace gtr {

// Launches use 256 threads per block (P * T == 256) and 256 * kMaxAcc bytes of shared memory.
[[maybe_unused]] constexpr int kMaxAcc = 32;  // bytes per accumulator the launcher reserves

// ---- constants and small helpers -----------------------------------------------------------
template <class A> __device__ __forceinline__ A inf_of();  // +inf, or the largest int64
template <> __device__ __forceinline__ float inf_of<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double inf_of<double>() {
    return __longlong_as_double(0x7ff0000000000000LL);
}
template <> __device__ __forceinline__ long long inf_of<long long>() {
    return 0x7fffffffffffffffLL;
}
__device__ __forceinline__ double nan64() { return __longlong_as_double(0x7ff8000000000000LL); }
template <class A> __device__ __forceinline__ A lowest() { return -inf_of<A>(); }
template <> __device__ __forceinline__ long long lowest<long long>() {
    return (long long)(-0x7fffffffffffffffLL - 1);
}

// Warp shuffles; a complex value travels as its two parts (the intrinsics take scalars only).
template <class V> __device__ __forceinline__ V shfl_x(V v, int lane_xor) {
    return __shfl_xor_sync(GT_FULL_MASK, v, lane_xor);
}
template <class T> __device__ __forceinline__ gt::complex<T> shfl_x(gt::complex<T> v, int m) {
    return gt::complex<T>(shfl_x(v.re, m), shfl_x(v.im, m));
}
template <class V> __device__ __forceinline__ V shfl_up(V v, int delta) {
    return __shfl_up_sync(GT_FULL_MASK, v, delta);
}
template <class T> __device__ __forceinline__ gt::complex<T> shfl_up(gt::complex<T> v, int d) {
    return gt::complex<T>(shfl_up(v.re, d), shfl_up(v.im, d));
}
template <class V> __device__ __forceinline__ V shfl_idx(V v, int src) {
    return __shfl_sync(GT_FULL_MASK, v, src);
}
template <class T> __device__ __forceinline__ gt::complex<T> shfl_idx(gt::complex<T> v, int s) {
    return gt::complex<T>(shfl_idx(v.re, s), shfl_idx(v.im, s));
}

// Re(conj(a) * b): the real inner product var's running sum of squares uses.
__device__ __forceinline__ double dot_re(double a, double b) { return a * b; }
__device__ __forceinline__ double dot_re(gt::complex<double> a, gt::complex<double> b) {
    return a.re * b.re + a.im * b.im;
}
template <class M> __device__ __forceinline__ M nan_of();
template <> __device__ __forceinline__ double nan_of<double>() {
    return __longlong_as_double(0x7ff8000000000000LL);
}
template <> __device__ __forceinline__ gt::complex<double> nan_of<gt::complex<double>>() {
    return gt::complex<double>(nan_of<double>(), nan_of<double>());
}

// Element offset of row-major index `idx` over `n` dims of sizes `size` and strides `stride`.
__device__ __forceinline__ long long offset_of(long long idx, int n, const long long* size,
                                               const long long* stride) {
    if (n == 1) return idx * stride[0];
    long long off = 0;
    for (int d = n - 1; d >= 0; --d) {
        long long q = idx / size[d];
        off += (idx - q * size[d]) * stride[d];
        idx = q;
    }
    return off;
}

// ---- var/std (and their mean): Welford's running (count, mean, M2) in float64 ---------------
// M is the mean's type: double, or complex<double> for complex inputs (whose M2 sums |x - mean|^2
// and whose var/std are real, of type O).
template <class M>
struct Moments {
    double n;
    M mean;
    double m2;
};
template <class T, class M, class O>
struct VarOp {
    typedef Moments<M> Acc;
    typedef O O1;  // var or std
    typedef T O2;  // the mean (optional)
    static __device__ __forceinline__ Acc init() { return Acc{0.0, M(0.0), 0.0}; }
    static __device__ __forceinline__ Acc step(Acc a, T x, long long, double) {
        const M v = gt::load<M>(x);
        a.n += 1.0;
        const M d = v - a.mean;
        a.mean = a.mean + d / a.n;
        a.m2 += dot_re(d, v - a.mean);
        return a;
    }
    static __device__ __forceinline__ Acc comb(Acc a, Acc b) {
        if (b.n == 0.0) return a;
        if (a.n == 0.0) return b;
        const double n = a.n + b.n, f = b.n / n;
        const M d = b.mean - a.mean;
        return Acc{n, a.mean + d * f, a.m2 + b.m2 + dot_re(d, d) * a.n * f};
    }
    static __device__ __forceinline__ Acc shfl(Acc a, int m) {
        return Acc{shfl_x(a.n, m), shfl_x(a.mean, m), shfl_x(a.m2, m)};
    }
    // p: the correction; flag: take the square root (std).
    static __device__ __forceinline__ void store(Acc a, long long K, double p, long long flag,
                                                 O1* out, O2* mean, long long o) {
        double dof = (double)K - p;
        double v = a.m2 / (dof > 0.0 ? dof : 0.0);
        out[o] = gt::store<O>(flag ? ::sqrt(v) : v);
        if (mean) mean[o] = gt::store<T>(a.n == 0.0 ? nan_of<M>() : a.mean);
    }
};

// ---- log(sum(exp(x))): a running (max, sum of exp(x - max)) ---------------------------------
// A NaN max sticks; an infinite max makes the result that infinity (logsumexp) or a NaN slice
// (softmax), as the CPU backend's max-shifted formula gives.
template <class A>
struct Lse {
    A m, s;
};
template <class A> __device__ __forceinline__ Lse<A> lse_comb(Lse<A> a, Lse<A> b) {
    if (a.m != a.m) return a;
    if (b.m != b.m) return b;
    A M = a.m > b.m ? a.m : b.m;
    if (M == inf_of<A>() || M == -inf_of<A>()) return Lse<A>{M, A(0)};
    A s = (a.m == -inf_of<A>() ? A(0) : a.s * gt::exp(a.m - M)) +
          (b.m == -inf_of<A>() ? A(0) : b.s * gt::exp(b.m - M));
    return Lse<A>{M, s};
}
template <class A> __device__ __forceinline__ Lse<A> lse_step(Lse<A> a, A x) {
    if (a.m != a.m || x == -inf_of<A>()) return a;
    if (x != x || x == inf_of<A>()) return Lse<A>{x, A(0)};
    if (a.m == inf_of<A>()) return a;
    if (x > a.m) {
        A s = (a.m == -inf_of<A>() ? A(0) : a.s * gt::exp(a.m - x)) + A(1);
        return Lse<A>{x, s};
    }
    return Lse<A>{a.m, a.s + gt::exp(x - a.m)};
}
template <class A> __device__ __forceinline__ Lse<A> lse_shfl(Lse<A> a, int m) {
    return Lse<A>{shfl_x(a.m, m), shfl_x(a.s, m)};
}

template <class T>
struct LogSumExpOp {
    typedef Lse<double> Acc;
    typedef T O1;
    typedef long long O2;
    static __device__ __forceinline__ Acc init() { return Acc{-inf_of<double>(), 0.0}; }
    static __device__ __forceinline__ Acc step(Acc a, T x, long long, double) {
        return lse_step(a, gt::load<double>(x));
    }
    static __device__ __forceinline__ Acc comb(Acc a, Acc b) { return lse_comb(a, b); }
    static __device__ __forceinline__ Acc shfl(Acc a, int m) { return lse_shfl(a, m); }
    static __device__ __forceinline__ void store(Acc a, long long, double, long long, O1* out,
                                                 O2*, long long o) {
        double r = (a.m != a.m || a.m == inf_of<double>() || a.m == -inf_of<double>())
                       ? a.m : gt::log(a.s) + a.m;
        out[o] = gt::store<T>(r);
    }
};

// ---- a fold whose identity is not exact: partials say whether they hold any element -------
// A complex product's identity is not (1+0j times inf+nanj is nan+nanj), so the lanes and
// accumulators that saw no element stay out of the result; a lone element x still gives
// identity * x, as the CPU kernel and PyTorch compute it (fold_codegen.py wraps such folds).
template <class F>
struct Tracked {
    struct Acc {
        typename F::Acc v;
        long long has;
    };
    typedef typename F::O1 O1;
    typedef typename F::O2 O2;
    static __device__ __forceinline__ Acc init() { return Acc{F::init(), 0}; }
    static __device__ __forceinline__ Acc comb(Acc a, Acc b) {
        if (!b.has) return a;
        if (!a.has) return b;
        return Acc{F::comb(a.v, b.v), 1};
    }
    template <class T>
    static __device__ __forceinline__ Acc step(Acc a, T x, long long k, double p) {
        return Acc{F::step(a.v, x, k, p), 1};
    }
    static __device__ __forceinline__ Acc shfl(Acc a, int m) {
        return Acc{F::shfl(a.v, m), shfl_x(a.has, m)};
    }
    static __device__ __forceinline__ void store(Acc a, long long n, double p, long long flag,
                                                 O1* out1, O2* out2, long long o) {
        F::store(a.v, n, p, flag, out1, out2, o);
    }
};

// ---- arg-extrema: (value, index); the first extremum wins, the first NaN wins and sticks ----
template <class A>
struct ValIdx {
    A v;
    long long i;  // -1: no element yet
};
template <class T, class A, bool LARGEST>
struct ArgOp {
    typedef ValIdx<A> Acc;
    typedef T O1;          // values (optional)
    typedef long long O2;  // indices
    static __device__ __forceinline__ Acc init() { return Acc{A(0), -1}; }
    static __device__ __forceinline__ Acc step(Acc a, T x, long long k, double) {
        return comb(a, Acc{gt::load<A>(x), k});
    }
    // Commutative and associative: ties and NaNs go to the lower index.
    static __device__ __forceinline__ Acc comb(Acc a, Acc b) {
        if (b.i < 0) return a;
        if (a.i < 0) return b;
        bool an = a.v != a.v, bn = b.v != b.v;
        if (an || bn) return (an && bn) ? (b.i < a.i ? b : a) : (an ? a : b);
        if (LARGEST ? b.v > a.v : b.v < a.v) return b;
        if (b.v == a.v && b.i < a.i) return b;
        return a;
    }
    static __device__ __forceinline__ Acc shfl(Acc a, int m) {
        return Acc{shfl_x(a.v, m), shfl_x(a.i, m)};
    }
    static __device__ __forceinline__ void store(Acc a, long long, double, long long, O1* values,
                                                 O2* indices, long long o) {
        if (values) values[o] = gt::store<T>(a.v);
        indices[o] = a.i;
    }
};

// ---- the block: P groups of T lanes ---------------------------------------------------------
// Combines `a` over the T lanes of each group and returns the total to every lane. `row`: the
// lanes of a group are consecutive threads (else they are P threads apart). The order of
// combination is fixed by the launch shape, so results are reproducible.
template <class Op>
__device__ __forceinline__ typename Op::Acc group_allreduce(typename Op::Acc a, int row, int P,
                                                            int T, int t, int p,
                                                            typename Op::Acc* sm) {
    const int ls = row ? 1 : P;  // thread distance between consecutive lanes of a group
    for (int off = ls; off < 32 && off < ls * T; off <<= 1) a = Op::comb(a, Op::shfl(a, off));
    const int in_warp = row ? (T < 32 ? T : 32) : (P >= 32 ? 1 : (T < 32 / P ? T : 32 / P));
    const int W = T / in_warp;  // warps holding a share of each group (the same for all)
    if (W > 1) {
        __syncthreads();  // the previous round's readers are done with sm
        if (t % in_warp == 0) sm[(t / in_warp) * P + p] = a;
        __syncthreads();
        a = sm[p];
        for (int j = 1; j < W; ++j) a = Op::comb(a, sm[j * P + p]);
    }
    return a;
}

// Reduce x over meta's reduced dims into N outputs. Block (x: output groups, grid-stride; y:
// a chunk of the reduced index when the launcher splits it, partials then go to `ws`).
template <class Op, class T>
__device__ void reduce(const T* __restrict__ x, typename Op::O1* out1, typename Op::O2* out2,
                       unsigned char* ws, const long long* __restrict__ meta, long long N,
                       long long K, int row, int P, int T_, long long chunk, double p,
                       long long flag) {
    typedef typename Op::Acc Acc;
    static_assert(sizeof(Acc) <= kMaxAcc, "accumulator larger than the launcher reserves");
    GT_DYNAMIC_SHARED(Acc, sm);
    const int nk = (int)meta[0];
    const long long* ksize = meta + 1;
    const long long* kstride = ksize + nk;
    const int nr = (int)meta[1 + 2 * nk];
    const long long* rsize = meta + 2 + 2 * nk;
    const long long* rstride = rsize + nr;
    const int tid = threadIdx.x;
    const int pl = row ? tid / T_ : tid % P;
    const int t = row ? tid % T_ : tid / P;
    const long long k0 = (long long)blockIdx.y * chunk;
    const long long k1 = k0 + chunk < K ? k0 + chunk : K;
    const long long groups = (N + P - 1) / P;
    for (long long g = blockIdx.x; g < groups; g += gridDim.x) {
        const long long o = g * P + pl;
        Acc a = Op::init();
        if (o < N) {
            const T* xo = x + offset_of(o, nk, ksize, kstride);
            if (nr == 1) {
                // Four independent accumulators: four loads in flight per thread (what the
                // memory system needs to run near its bandwidth), merged with comb as lanes are.
                const long long s = rstride[0];
                const long long st = T_;
                Acc b = Op::init(), c = Op::init(), d = Op::init();
                long long k = k0 + t;
                constexpr int V = 16 / sizeof(T) > 1 ? 16 / sizeof(T) : 1;
                if (V > 1 && sizeof(T) * V == 16 && s == 1 && k1 - k0 >= 4 * V * st &&
                    reinterpret_cast<unsigned long long>(xo + k0) % 16 == 0) {
                    // A contiguous line: 16-byte chunks (one vector load each, the launcher
                    // keeps chunk starts aligned), four in flight per thread (two left an H200
                    // at 80% of its bandwidth), then the tail.
                    typedef gt::ew_vec<T, V> Chunk;
                    const Chunk* xv = reinterpret_cast<const Chunk*>(xo + k0);
                    const long long nv = (k1 - k0) / V;
                    long long j = t;
                    for (; j + 3 * st < nv; j += 4 * st) {
                        const Chunk v0 = xv[j], v1 = xv[j + st];
                        const Chunk v2 = xv[j + 2 * st], v3 = xv[j + 3 * st];
#pragma unroll
                        for (int e = 0; e < V; ++e) {
                            a = Op::step(a, v0.v[e], k0 + j * V + e, p);
                            b = Op::step(b, v1.v[e], k0 + (j + st) * V + e, p);
                            c = Op::step(c, v2.v[e], k0 + (j + 2 * st) * V + e, p);
                            d = Op::step(d, v3.v[e], k0 + (j + 3 * st) * V + e, p);
                        }
                    }
                    for (; j < nv; j += st) {
                        const Chunk v0 = xv[j];
#pragma unroll
                        for (int e = 0; e < V; ++e) a = Op::step(a, v0.v[e], k0 + j * V + e, p);
                    }
                    k = k0 + nv * V + t;  // fewer than V elements are left: the loops below
                }
                for (; k + 3 * st < k1; k += 4 * st) {
                    const T x0 = xo[k * s], x1 = xo[(k + st) * s];
                    const T x2 = xo[(k + 2 * st) * s], x3 = xo[(k + 3 * st) * s];
                    a = Op::step(a, x0, k, p);
                    b = Op::step(b, x1, k + st, p);
                    c = Op::step(c, x2, k + 2 * st, p);
                    d = Op::step(d, x3, k + 3 * st, p);
                }
                for (; k < k1; k += st) a = Op::step(a, xo[k * s], k, p);
                a = Op::comb(Op::comb(a, b), Op::comb(c, d));
            } else {
                for (long long k = k0 + t; k < k1; k += T_)
                    a = Op::step(a, xo[offset_of(k, nr, rsize, rstride)], k, p);
            }
        }
        a = group_allreduce<Op>(a, row, P, T_, t, pl, sm);
        if (t == 0 && o < N) {
            if (gridDim.y == 1) Op::store(a, K, p, flag, out1, out2, o);
            else reinterpret_cast<Acc*>(ws)[(long long)blockIdx.y * N + o] = a;
        }
    }
}

// Combine the S partials of each output and store it. L lanes (a power of two, at most 32:
// one warp's shuffles merge them) share an output, each combining every L-th partial, so a
// full reduction's 1024 partials take 32 loads per lane instead of 1024 in one thread (a
// serial chain of dependent loads that cost more than the whole split pass). Every comb is
// commutative and associative (the split pass already merges lanes in butterfly order).
template <class Op>
__device__ void reduce_finish(const unsigned char* ws, typename Op::O1* out1,
                              typename Op::O2* out2, long long N, long long S, long long K,
                              double p, long long flag, int L) {
    typedef typename Op::Acc Acc;
    const Acc* part = reinterpret_cast<const Acc*>(ws);
    const int lane = threadIdx.x % L;
    const long long per_block = blockDim.x / L;
    // Uniform trip count per block: every lane reaches the shuffles.
    for (long long base = blockIdx.x * per_block; base < N; base += gridDim.x * per_block) {
        const long long o = base + threadIdx.x / L;
        Acc a = Op::init();
        if (o < N)
            for (long long s = lane; s < S; s += L) a = Op::comb(a, part[s * N + o]);
        for (int off = 1; off < L; off <<= 1) a = Op::comb(a, Op::shfl(a, off));
        if (lane == 0 && o < N) Op::store(a, K, p, flag, out1, out2, o);
    }
}

// ---- lines: scans and softmax run along one dim -------------------------------------------
// Line l (row-major over the other dims, `lmeta = [nd, size[nd], stride_0[nd], stride_1[nd]]`
// with one stride row per input) starts at offset_of(l, ...) in each input. Outputs are
// contiguous: line l starts at (l / I) * K * I + l % I and steps by I along the dim.
__device__ __forceinline__ long long line_in(long long l, const long long* lmeta, int which) {
    const int nd = (int)lmeta[0];
    return offset_of(l, nd, lmeta + 1, lmeta + 1 + (1 + which) * nd);
}
__device__ __forceinline__ long long line_out(long long l, long long K, long long I) {
    return (l / I) * K * I + l % I;
}

// cumsum (MUL false) / cumprod along the dim, accumulating in A (float64 or int64, as the CPU
// backend); `reverse` scans from the end. I == 1 (contiguous output lines): a warp per line,
// 32 * kScanItems elements per step (a serial scan per lane, a shuffle scan of the lanes'
// totals, the running carry); otherwise a thread per line (neighbouring threads own
// neighbouring lines: coalesced).
template <class T, class A, class O, bool MUL>
__device__ void scan(const T* __restrict__ x, O* __restrict__ out, const long long* lmeta,
                     long long L, long long K, long long xs, long long I, long long reverse) {
    constexpr int kScanItems = 8;  // local: modules without scans would warn it is unused
    const A ident = MUL ? A(1) : A(0);
    if (I == 1) {
        const int lane = threadIdx.x & 31;
        const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
        const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
        for (long long l = warp; l < L; l += nwarps) {
            const T* xl = x + line_in(l, lmeta, 0);
            O* ol = out + l * K;
            A carry = ident;
            for (long long base = 0; base < K; base += 32 * kScanItems) {
                // Each lane scans its own kScanItems consecutive elements...
                // Only the line's first element meets the identity, as in the CPU's serial
                // loop (acc = 1; acc *= x[j]): a second product with it is not exact for
                // non-finite complex values ((1+0j) * (-inf+nanj) is nan+nanj).
                const long long j0 = base + (long long)lane * kScanItems;
                const bool first = base == 0 && lane == 0;
                A v[kScanItems];
                A tot = ident;
                for (int i = 0; i < kScanItems; ++i) {
                    const long long j = j0 + i;
                    if (j < K) {
                        const A u = gt::load<A>(xl[(reverse ? K - 1 - j : j) * xs]);
                        tot = (i > 0 || first) ? (MUL ? tot * u : tot + u) : u;
                    }
                    v[i] = tot;
                }
                // ...then the lanes' totals are scanned across the warp.
                A inc = tot;
                for (int off = 1; off < 32; off <<= 1) {
                    A u = shfl_up(inc, off);
                    if (lane >= off) inc = MUL ? u * inc : u + inc;
                }
                const A excl = shfl_up(inc, 1);
                // what precedes this lane's items: nothing (the line's start), the carry, the
                // lanes below, or both
                const A pre = lane == 0 ? carry
                                        : (base == 0 ? excl : (MUL ? carry * excl : carry + excl));
                for (int i = 0; i < kScanItems; ++i) {
                    const long long j = j0 + i;
                    if (j < K)
                        ol[reverse ? K - 1 - j : j] = gt::store<O>(
                            first ? v[i] : (MUL ? pre * v[i] : pre + v[i]));
                }
                const A chunk = shfl_idx(inc, 31);
                carry = base == 0 ? chunk : (MUL ? carry * chunk : carry + chunk);
            }
        }
        return;
    }
    for (GT_GRID_STRIDE(l, L)) {
        const T* xl = x + line_in(l, lmeta, 0);
        O* ol = out + line_out(l, K, I);
        A s = ident;
        for (long long j = 0; j < K; ++j) {
            const long long k = reverse ? K - 1 - j : j;
            A v = gt::load<A>(xl[k * xs]);
            s = MUL ? s * v : s + v;
            ol[k * I] = gt::store<O>(s);
        }
    }
}

// A line's lanes as in `reduce`: row mode (I == 1) puts a group's T lanes on consecutive
// threads along the line; otherwise P neighbouring lines share a block's threads.
struct LineLanes {
    int row, P, T, t, p;
};
__device__ __forceinline__ LineLanes line_lanes(long long I, int P, int T) {
    const int tid = threadIdx.x;
    const int row = I == 1;
    return LineLanes{row, P, T, row ? tid % T : tid / P, row ? tid / T : tid % P};
}

template <class A>
struct LseOp {
    typedef Lse<A> Acc;
    static __device__ __forceinline__ Acc comb(Acc a, Acc b) { return lse_comb(a, b); }
    static __device__ __forceinline__ Acc shfl(Acc a, int m) { return lse_shfl(a, m); }
};
template <class A>
struct PlusOp {
    typedef A Acc;
    static __device__ __forceinline__ Acc comb(Acc a, Acc b) { return a + b; }
    static __device__ __forceinline__ Acc shfl(Acc a, int m) { return shfl_x(a, m); }
};

// A line read in 16-byte chunks: row mode (the group's lanes run along the line), a
// contiguous line (stride 1) whose start is 16-byte aligned and that holds at least two chunks
// per lane. Chunk loads, two in flight per lane, keep enough bytes moving to run near the
// memory bandwidth; one element per load and a serial chain per lane ran at a quarter of it.
template <class T>
struct LineChunks {
    static constexpr int V = 16 / sizeof(T) > 1 ? 16 / sizeof(T) : 1;
    typedef gt::ew_vec<T, V> Chunk;
    static __device__ __forceinline__ bool usable(const void* p, int row, long long stride,
                                                  long long K, int lanes) {
        return V > 1 && sizeof(T) * V == 16 && row && stride == 1 && K >= 2 * V * lanes &&
               reinterpret_cast<unsigned long long>(p) % 16 == 0;
    }
};

// softmax / log_softmax along the dim: one pass for the running (max, sum of exp(x - max)),
// combined over the lanes, then one pass writing exp(x - max) / sum or (x - max) - log(sum).
// A slice whose max is not finite is NaN throughout (as the CPU backend's formula gives).
template <class T, class A>
__device__ void softmax(const T* __restrict__ x, T* __restrict__ out, const long long* lmeta,
                        long long L, long long K, long long xs, long long I, int P, int T_,
                        long long log) {
    typedef Lse<A> Acc;
    typedef LineChunks<T> LC;
    typedef typename LC::Chunk Chunk;
    constexpr int V = LC::V;
    static_assert(sizeof(Acc) <= kMaxAcc, "accumulator larger than the launcher reserves");
    GT_DYNAMIC_SHARED(Acc, sm);
    const LineLanes ln = line_lanes(I, P, T_);
    const long long groups = (L + P - 1) / P;
    const long long st = T_;
    for (long long g = blockIdx.x; g < groups; g += gridDim.x) {
        const long long l = g * P + ln.p;
        const T* xl = x + (l < L ? line_in(l, lmeta, 0) : 0);
        const bool chunked = LC::usable(xl, ln.row, xs, K, T_);
        Acc a{-inf_of<A>(), A(0)}, b{-inf_of<A>(), A(0)};
        if (l < L) {
            long long k = ln.t;
            if (chunked) {
                const Chunk* xv = reinterpret_cast<const Chunk*>(xl);
                const long long nv = K / V;
                long long j = ln.t;
                for (; j + st < nv; j += 2 * st) {
                    const Chunk v0 = xv[j], v1 = xv[j + st];
#pragma unroll
                    for (int e = 0; e < V; ++e) {
                        a = lse_step(a, gt::load<A>(v0.v[e]));
                        b = lse_step(b, gt::load<A>(v1.v[e]));
                    }
                }
                if (j < nv) {
                    const Chunk v0 = xv[j];
#pragma unroll
                    for (int e = 0; e < V; ++e) a = lse_step(a, gt::load<A>(v0.v[e]));
                }
                k = nv * V + ln.t;  // fewer than V elements are left
            }
            for (; k + st < K; k += 2 * st) {
                const T x0 = xl[k * xs], x1 = xl[(k + st) * xs];
                a = lse_step(a, gt::load<A>(x0));
                b = lse_step(b, gt::load<A>(x1));
            }
            if (k < K) a = lse_step(a, gt::load<A>(xl[k * xs]));
            a = lse_comb(a, b);
        }
        a = group_allreduce<LseOp<A>>(a, ln.row, P, T_, ln.t, ln.p, sm);
        if (l >= L) continue;
        T* ol = out + line_out(l, K, I);
        const bool finite = a.m - a.m == A(0);
        const A m = a.m;
        const A inv = finite ? A(1) / a.s : A(nan64());
        const A lg = finite ? gt::log(a.s) : A(nan64());
        long long k = ln.t;
        if (chunked && reinterpret_cast<unsigned long long>(ol) % 16 == 0) {
            const Chunk* xv = reinterpret_cast<const Chunk*>(xl);
            Chunk* ov = reinterpret_cast<Chunk*>(ol);
            const long long nv = K / V;
            for (long long j = ln.t; j < nv; j += st) {
                const Chunk v0 = xv[j];
                Chunk r;
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    const A v = gt::load<A>(v0.v[e]);
                    r.v[e] = gt::store<T>(log ? (v - m) - lg : gt::exp(v - m) * inv);
                }
                ov[j] = r;
            }
            k = nv * V + ln.t;
        }
        for (; k < K; k += st) {
            const A v = gt::load<A>(xl[k * xs]);
            ol[k * I] = gt::store<T>(log ? (v - m) - lg : gt::exp(v - m) * inv);
        }
    }
}

// The gradient of softmax (log false: y * (g - sum(g * y))) or log_softmax (g - exp(y) *
// sum(g)) along the dim, from the output's gradient g and the output y. Contiguous aligned
// lines of g and y are read in chunks, as in softmax.
template <class T, class A>
__device__ void softmax_backward(const T* __restrict__ g, const T* __restrict__ y,
                                 T* __restrict__ out, const long long* lmeta, long long L,
                                 long long K, long long gs, long long ys, long long I, int P,
                                 int T_, long long log) {
    typedef LineChunks<T> LC;
    typedef typename LC::Chunk Chunk;
    constexpr int V = LC::V;
    GT_DYNAMIC_SHARED(A, sm);
    const LineLanes ln = line_lanes(I, P, T_);
    const long long groups = (L + P - 1) / P;
    const long long st = T_;
    for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x) {
        const long long l = grp * P + ln.p;
        const T* gl = g + (l < L ? line_in(l, lmeta, 0) : 0);
        const T* yl = y + (l < L ? line_in(l, lmeta, 1) : 0);
        const bool chunked = LC::usable(gl, ln.row, gs, K, T_) && LC::usable(yl, ln.row, ys, K, T_);
        A s = A(0), s2 = A(0);
        if (l < L) {
            long long k = ln.t;
            if (chunked) {
                const Chunk* gv = reinterpret_cast<const Chunk*>(gl);
                const Chunk* yv = reinterpret_cast<const Chunk*>(yl);
                const long long nv = K / V;
                for (long long j = ln.t; j < nv; j += st) {
                    const Chunk g0 = gv[j];
                    if (log) {
#pragma unroll
                        for (int e = 0; e < V; ++e) s += gt::load<A>(g0.v[e]);
                    } else {
                        const Chunk y0 = yv[j];
#pragma unroll
                        for (int e = 0; e < V; ++e)
                            s2 += gt::load<A>(g0.v[e]) * gt::load<A>(y0.v[e]);
                    }
                }
                k = nv * V + ln.t;
            }
            for (; k < K; k += st) {
                A gv = gt::load<A>(gl[k * gs]);
                s += log ? gv : gv * gt::load<A>(yl[k * ys]);
            }
            s += s2;
        }
        s = group_allreduce<PlusOp<A>>(s, ln.row, P, T_, ln.t, ln.p, sm);
        if (l >= L) continue;
        T* ol = out + line_out(l, K, I);
        long long k = ln.t;
        if (chunked && reinterpret_cast<unsigned long long>(ol) % 16 == 0) {
            const Chunk* gv = reinterpret_cast<const Chunk*>(gl);
            const Chunk* yv = reinterpret_cast<const Chunk*>(yl);
            Chunk* ov = reinterpret_cast<Chunk*>(ol);
            const long long nv = K / V;
            for (long long j = ln.t; j < nv; j += st) {
                const Chunk g0 = gv[j], y0 = yv[j];
                Chunk r;
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    const A gx = gt::load<A>(g0.v[e]), yx = gt::load<A>(y0.v[e]);
                    r.v[e] = gt::store<T>(log ? gx - gt::exp(yx) * s : yx * (gx - s));
                }
                ov[j] = r;
            }
            k = nv * V + ln.t;
        }
        for (; k < K; k += st) {
            const A gv = gt::load<A>(gl[k * gs]), yv = gt::load<A>(yl[k * ys]);
            ol[k * I] = gt::store<T>(log ? gv - gt::exp(yv) * s : yv * (gv - s));
        }
    }
}

}  // namespace gtr

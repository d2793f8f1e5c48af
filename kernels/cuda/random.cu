// Random sampling on the device from a gt.Generator's Philox4x64-10 stream.
//
// The CPU backend draws with NumPy's Generator on a Philox4x64-10 bit generator. That stream is
// counter based: the j-th 64-bit word after a state (key, counter, 4 buffered words, buffer
// position, a buffered 32-bit half) is a pure function of the state and j. So every thread here
// computes the words it needs from (key, counter + j / 4) itself, and the samplers reproduce
// NumPy's algorithms (53/24-bit uniforms, ziggurat normals and exponentials, Lemire bounded
// integers, ...) word for word: a seed gives the same numbers on the CPU and on the GPU, and the
// generator advances by the same number of words.
//
// Samplers that always take one word per value (uniforms, bernoulli, multinomial with
// replacement) map value i to word i directly. Samplers with rejection loops take a variable
// number of words; they run as a "chain": word position p -> the value that starts at p and the
// position after it. The stream is cut into chunks; one thread per chunk walks the chain from
// the chunk's first word (kernel walk), one thread links the chunks in order, following the true
// chain only until it meets the chunk's own walk, which happens within a few steps because
// rejections are rare (kernel link), and one thread per chunk re-walks from the true entry and
// writes the values (kernel emit). Only Poisson (words depend on each element's rate) and
// randperm (Fisher-Yates) are inherently sequential and run as one device thread.
//
// Raw samples go to a 64-bit scratch array (double bits, float bits or integers); small
// "finish" kernels then apply the op's parameters in the same precision as the CPU kernels and
// store the target dtype.
#include "common.cuh"
#include "scalar_fns.cuh"

typedef unsigned long long gt_u64;
typedef long long gt_i64;

// ---- Philox4x64-10 -------------------------------------------------------------------------
__device__ __forceinline__ gt_u64 gt_mulhi64(gt_u64 a, gt_u64 b) {
#ifdef GT_CUDA_EMULATOR
    return (gt_u64)(((unsigned __int128)a * b) >> 64);
#else
    return __umul64hi(a, b);
#endif
}

struct GtBlock { gt_u64 v[4]; };

__device__ __forceinline__ GtBlock gt_philox(gt_u64 c0, gt_u64 c1, gt_u64 c2, gt_u64 c3,
                                             gt_u64 k0, gt_u64 k1) {
    const gt_u64 M0 = 0xD2E7470EE14C6C93ULL, M1 = 0xCA5A826395121157ULL;
    const gt_u64 W0 = 0x9E3779B97F4A7C15ULL, W1 = 0xBB67AE8584CAA73BULL;
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += W0; k1 += W1; }
        gt_u64 hi0 = gt_mulhi64(M0, c0), lo0 = M0 * c0;
        gt_u64 hi1 = gt_mulhi64(M1, c2), lo1 = M1 * c2;
        gt_u64 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    GtBlock b;
    b.v[0] = c0; b.v[1] = c1; b.v[2] = c2; b.v[3] = c3;
    return b;
}

// A generator state, as the host packs it: key[2], counter[4], buffer[4], buffer position,
// has_uint32, the buffered 32-bit half. Each thread builds its own and keeps the last block it
// computed, so walking consecutive words costs one Philox call per four 64-bit words.
struct GtStream {
    gt_u64 key[2], ctr[4], buf[4];
    int pos, has32;
    unsigned u32;
    mutable gt_u64 cblk, cval[4];

    __device__ explicit GtStream(const gt_u64* s) {
        key[0] = s[0]; key[1] = s[1];
        for (int i = 0; i < 4; ++i) { ctr[i] = s[2 + i]; buf[i] = s[6 + i]; cval[i] = 0; }
        pos = (int)s[10]; has32 = (int)s[11]; u32 = (unsigned)s[12];
        cblk = 0;  // block 0 is the buffer, never cached
    }
    // The j-th 64-bit word after the state (NumPy's next_uint64 called j + 1 times).
    __device__ gt_u64 word64(gt_i64 j) const {
        gt_i64 avail = 4 - pos;
        if (j < avail) return buf[pos + j];
        gt_u64 t = (gt_u64)(j - avail);
        gt_u64 blk = t / 4 + 1;  // the counter is bumped before each new block
        if (blk != cblk) {
            gt_u64 c0 = ctr[0] + blk, c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
            if (c0 < blk) { if (++c1 == 0) { if (++c2 == 0) ++c3; } }
            GtBlock b = gt_philox(c0, c1, c2, c3, key[0], key[1]);
            for (int i = 0; i < 4; ++i) cval[i] = b.v[i];
            cblk = blk;
        }
        return cval[t % 4];
    }
    // The j-th 32-bit word (NumPy's next_uint32: low half first, then the buffered high half).
    __device__ unsigned word32(gt_i64 j) const {
        if (has32) {
            if (j == 0) return u32;
            --j;
        }
        gt_u64 w = word64(j >> 1);
        return (j & 1) ? (unsigned)(w >> 32) : (unsigned)(w & 0xffffffffULL);
    }
    __device__ double next_double(gt_i64 j) const {
        return (double)(word64(j) >> 11) * (1.0 / 9007199254740992.0);
    }
    __device__ float next_float(gt_i64 j) const {
        return (float)(word32(j) >> 8) * (1.0f / 16777216.0f);
    }
};

// Ziggurat tables (NumPy's, read off the host generator), 256 entries each, as 64-bit words:
// normal ki/wi/fi double, exponential ke/we/fe double, then the float versions (ki/ke as
// integers, the rest as float values widened to double bits).
struct GtZig {
    const gt_u64* t;
    __device__ gt_u64 ki(int i) const { return t[i]; }
    __device__ double wi(int i) const { return __longlong_as_double((long long)t[256 + i]); }
    __device__ double fi(int i) const { return __longlong_as_double((long long)t[512 + i]); }
    __device__ gt_u64 ke(int i) const { return t[768 + i]; }
    __device__ double we(int i) const { return __longlong_as_double((long long)t[1024 + i]); }
    __device__ double fe(int i) const { return __longlong_as_double((long long)t[1280 + i]); }
    __device__ unsigned kif(int i) const { return (unsigned)t[1536 + i]; }
    __device__ float wif(int i) const {
        return (float)__longlong_as_double((long long)t[1792 + i]);
    }
    __device__ float fif(int i) const {
        return (float)__longlong_as_double((long long)t[2048 + i]);
    }
    __device__ unsigned kef(int i) const { return (unsigned)t[2304 + i]; }
    __device__ float wef(int i) const {
        return (float)__longlong_as_double((long long)t[2560 + i]);
    }
    __device__ float fef(int i) const {
        return (float)__longlong_as_double((long long)t[2816 + i]);
    }
};

#define GT_NOR_R 3.6541528853610087963519472518
#define GT_NOR_INV_R 0.27366123732975827203338247596
#define GT_EXP_R 7.6971174701310497140446280481
#define GT_NOR_R_F 3.6541528853610087963519472518f
#define GT_NOR_INV_R_F 0.27366123732975827203338247596f
#define GT_EXP_R_F 7.6971174701310497140446280481f

__device__ __forceinline__ gt_u64 gt_dbits(double x) { return (gt_u64)__double_as_longlong(x); }
__device__ __forceinline__ double gt_bitsd(gt_u64 b) { return __longlong_as_double((long long)b); }

// ---- samplers: (stream, first word) -> value bits, returns the position after the value ------
// Parameters arrive in a small double array `prm`.
struct GtNormal64 {  // NumPy random_standard_normal (64-bit words)
    __device__ static gt_i64 step(const GtStream& s, const GtZig& z, const double*, gt_i64 p,
                                  gt_u64* out) {
        for (;;) {
            gt_u64 r = s.word64(p++);
            int idx = (int)(r & 0xff);
            r >>= 8;
            int sign = (int)(r & 1);
            gt_u64 rabs = (r >> 1) & 0x000fffffffffffffULL;
            double x = (double)rabs * z.wi(idx);
            if (sign) x = -x;
            if (rabs < z.ki(idx)) { *out = gt_dbits(x); return p; }
            if (idx == 0) {
                for (;;) {
                    double xx = -GT_NOR_INV_R * log1p(-s.next_double(p++));
                    double yy = -log1p(-s.next_double(p++));
                    if (yy + yy > xx * xx) {
                        double v = ((rabs >> 8) & 1) ? -(GT_NOR_R + xx) : GT_NOR_R + xx;
                        *out = gt_dbits(v);
                        return p;
                    }
                }
            } else {
                double u = s.next_double(p++);
                if ((z.fi(idx - 1) - z.fi(idx)) * u + z.fi(idx) < exp(-0.5 * x * x)) {
                    *out = gt_dbits(x);
                    return p;
                }
            }
        }
    }
};

struct GtNormal32 {  // NumPy random_standard_normal_f (32-bit words)
    __device__ static gt_i64 step(const GtStream& s, const GtZig& z, const double*, gt_i64 p,
                                  gt_u64* out) {
        for (;;) {
            unsigned r = s.word32(p++);
            int idx = (int)(r & 0xff);
            int sign = (int)((r >> 8) & 1);
            unsigned rabs = (r >> 9) & 0x0007fffffu;
            float x = (float)rabs * z.wif(idx);
            if (sign) x = -x;
            if (rabs < z.kif(idx)) { *out = gt_dbits((double)x); return p; }
            if (idx == 0) {
                for (;;) {
                    float xx = -GT_NOR_INV_R_F * log1pf(-s.next_float(p++));
                    float yy = -log1pf(-s.next_float(p++));
                    if (yy + yy > xx * xx) {
                        float v = ((rabs >> 8) & 1) ? -(GT_NOR_R_F + xx) : GT_NOR_R_F + xx;
                        *out = gt_dbits((double)v);
                        return p;
                    }
                }
            } else {
                float u = s.next_float(p++);
                if ((double)((z.fif(idx - 1) - z.fif(idx)) * u + z.fif(idx)) <
                    exp(-0.5 * (double)x * (double)x)) {
                    *out = gt_dbits((double)x);
                    return p;
                }
            }
        }
    }
};

struct GtExp64 {  // NumPy random_standard_exponential (ziggurat, 64-bit words)
    __device__ static gt_i64 step(const GtStream& s, const GtZig& z, const double*, gt_i64 p,
                                  gt_u64* out) {
        for (;;) {
            gt_u64 ri = s.word64(p++) >> 3;
            int idx = (int)(ri & 0xff);
            ri >>= 8;
            double x = (double)ri * z.we(idx);
            if (ri < z.ke(idx)) { *out = gt_dbits(x); return p; }
            if (idx == 0) {
                *out = gt_dbits(GT_EXP_R - log1p(-s.next_double(p++)));
                return p;
            }
            double u = s.next_double(p++);
            if ((z.fe(idx - 1) - z.fe(idx)) * u + z.fe(idx) < exp(-x)) {
                *out = gt_dbits(x);
                return p;
            }
        }
    }
};

struct GtExp32 {  // NumPy random_standard_exponential_f (ziggurat, 32-bit words)
    __device__ static gt_i64 step(const GtStream& s, const GtZig& z, const double*, gt_i64 p,
                                  gt_u64* out) {
        for (;;) {
            unsigned ri = s.word32(p++) >> 1;
            int idx = (int)(ri & 0xff);
            ri >>= 8;
            float x = (float)ri * z.wef(idx);
            if (ri < z.kef(idx)) { *out = gt_dbits((double)x); return p; }
            if (idx == 0) {
                float v = GT_EXP_R_F - log1pf(-s.next_float(p++));
                *out = gt_dbits((double)v);
                return p;
            }
            float u = s.next_float(p++);
            if ((z.fef(idx - 1) - z.fef(idx)) * u + z.fef(idx) < expf(-x)) {
                *out = gt_dbits((double)x);
                return p;
            }
        }
    }
};

struct GtCauchy {  // NumPy random_standard_cauchy: a ratio of two normals
    __device__ static gt_i64 step(const GtStream& s, const GtZig& z, const double* prm, gt_i64 p,
                                  gt_u64* out) {
        gt_u64 a, b;
        p = GtNormal64::step(s, z, prm, p, &a);
        p = GtNormal64::step(s, z, prm, p, &b);
        *out = gt_dbits(gt_bitsd(a) / gt_bitsd(b));
        return p;
    }
};

struct GtGeometric {  // NumPy random_geometric; prm[0] = p
    __device__ static gt_i64 step(const GtStream& s, const GtZig& z, const double* prm, gt_i64 p,
                                  gt_u64* out) {
        double pr = prm[0];
        if (pr >= 0.333333333333333333333333) {  // search
            double u = s.next_double(p++);
            gt_i64 x = 1;
            double sum = pr, prod = pr, q = 1.0 - pr;
            while (u > sum) { prod *= q; sum += prod; ++x; }
            *out = (gt_u64)x;
            return p;
        }
        gt_u64 e;  // inversion through an exponential
        p = GtExp64::step(s, z, prm, p, &e);
        double v = ceil(-gt_bitsd(e) / log1p(-pr));
        *out = (gt_u64)(v >= 9.223372036854776e18 ? 0x7fffffffffffffffLL : (gt_i64)v);
        return p;
    }
};

struct GtLemire32 {  // NumPy buffered_bounded_lemire_uint32; prm[0] = rng (< 2**32 - 1)
    __device__ static gt_i64 step(const GtStream& s, const GtZig&, const double* prm, gt_i64 p,
                                  gt_u64* out) {
        if (prm[0] == 4294967295.0) { *out = s.word32(p); return p + 1; }
        unsigned rng_excl = (unsigned)((gt_u64)prm[0]) + 1u;
        gt_u64 m = (gt_u64)s.word32(p++) * rng_excl;
        unsigned left = (unsigned)(m & 0xffffffffULL);
        if (left < rng_excl) {
            unsigned thresh = (0u - rng_excl) % rng_excl;
            while (left < thresh) {
                m = (gt_u64)s.word32(p++) * rng_excl;
                left = (unsigned)(m & 0xffffffffULL);
            }
        }
        *out = m >> 32;
        return p;
    }
};

struct GtLemire64 {  // NumPy bounded_lemire_uint64; the range comes as two 32-bit halves
    __device__ static gt_i64 step(const GtStream& s, const GtZig&, const double* prm, gt_i64 p,
                                  gt_u64* out) {
        gt_u64 rng = ((gt_u64)prm[0] << 32) | (gt_u64)prm[1];
        if (rng == ~0ULL) { *out = s.word64(p); return p + 1; }
        gt_u64 rng_excl = rng + 1;
        gt_u64 w = s.word64(p++);
        gt_u64 lo = w * rng_excl, hi = gt_mulhi64(w, rng_excl);
        if (lo < rng_excl) {
            gt_u64 thresh = (0ULL - rng_excl) % rng_excl;
            while (lo < thresh) {
                w = s.word64(p++);
                lo = w * rng_excl;
                hi = gt_mulhi64(w, rng_excl);
            }
        }
        *out = hi;
        return p;
    }
};

// ---- the chain: walk, link, emit ------------------------------------------------------------
// Word positions are relative to the state; chunk c covers [start + c * chunk, ... + chunk).
template <class S>
__device__ void gt_chain_walk(const gt_u64* st, const gt_u64* zt, const double* prm,
                              gt_i64 start, gt_i64 chunk, gt_i64 nchunks, gt_i64* exit_pos,
                              gt_i64* count) {
    GtStream s(st);
    GtZig z{zt};
    for (GT_GRID_STRIDE(c, nchunks)) {
        gt_i64 p = start + c * chunk, end = p + chunk, m = 0;
        gt_u64 v;
        while (p < end) { p = S::step(s, z, prm, p, &v); ++m; }
        exit_pos[c] = p;
        count[c] = m;
    }
}

// One thread. status: [position after the last value so far, values so far]; entry[c] is the
// true chain's first position in chunk c (-1: none), base[c] the index of its value.
template <class S>
__device__ void gt_chain_link(const gt_u64* st, const gt_u64* zt, const double* prm,
                              gt_i64 start, gt_i64 chunk, gt_i64 nchunks, gt_i64 n,
                              const gt_i64* exit_pos, const gt_i64* count, gt_i64* entry,
                              gt_i64* base, gt_i64* status) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    GtStream s(st);
    GtZig z{zt};
    gt_u64 v;
    gt_i64 q = status[0], done = status[1];
    for (gt_i64 c = 0; c < nchunks; ++c) {
        gt_i64 a = start + c * chunk, end = a + chunk;
        entry[c] = -1;
        if (done >= n || q >= end) continue;
        entry[c] = q;
        base[c] = done;
        gt_i64 p = a, kp = 0, kq = 0, q0 = q;
        while (q < end && p != q) {
            if (p < q) { p = S::step(s, z, prm, p, &v); ++kp; }
            else { q = S::step(s, z, prm, q, &v); ++kq; }
        }
        gt_i64 cnt = kq;
        if (q < end) {  // merged with the chunk's own walk
            cnt = kq + count[c] - kp;
            q = exit_pos[c];
        }
        if (done + cnt >= n) {  // the last values: find the exact end position
            q = q0;
            for (gt_i64 k = done; k < n; ++k) q = S::step(s, z, prm, q, &v);
            done = n;
        } else {
            done += cnt;
        }
    }
    status[0] = q;
    status[1] = done;
}

template <class S>
__device__ void gt_chain_emit(const gt_u64* st, const gt_u64* zt, const double* prm,
                              gt_i64 start, gt_i64 chunk, gt_i64 nchunks, gt_i64 n,
                              const gt_i64* entry, const gt_i64* base, gt_u64* out) {
    GtStream s(st);
    GtZig z{zt};
    for (GT_GRID_STRIDE(c, nchunks)) {
        gt_i64 q = entry[c];
        if (q < 0) continue;
        gt_i64 end = start + (c + 1) * chunk, k = base[c];
        while (q < end && k < n) { q = S::step(s, z, prm, q, &out[k]); ++k; }
    }
}

// ---- fixed-width draws ----------------------------------------------------------------------
// Uniform bits: mode 0: 53-bit doubles from 64-bit words; 1: 24-bit floats from 32-bit words;
// k >= 2: k-bit fractions (as double) from 32-bit words (NumPy integers(0, 2**k)).
__device__ __forceinline__ double gt_unit(const GtStream& s, int mode, gt_i64 j) {
    if (mode == 0) return s.next_double(j);
    if (mode == 1) return (double)s.next_float(j);
    return (double)(s.word32(j) >> (32 - mode)) * (1.0 / (double)(1ULL << mode));
}

// double -> 16-bit float with one rounding: round to float with "round to odd" first (a float
// has enough extra bits for the second rounding to be exact), as NumPy's casts round once.
__device__ __forceinline__ float gt_round_odd_float(double d) {
    float f = (float)d;
    if ((double)f != d && f == f) {
        if ((d > 0) == ((double)f > d)) {  // rounded away from zero: step back toward zero
            unsigned b = __float_as_uint(f) - 1u;
            f = __uint_as_float(b);
        }
        f = __uint_as_float(__float_as_uint(f) | 1u);
    }
    return f;
}
template <class T> __device__ __forceinline__ T gt_from_double(double v) {
    return gt::store<T>(v);
}
template <> __device__ __forceinline__ __half gt_from_double<__half>(double v) {
    return __float2half_rn(gt_round_odd_float(v));
}
template <> __device__ __forceinline__ __nv_bfloat16 gt_from_double<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn(gt_round_odd_float(v));
}

// uniform_: W is the precision NumPy computes in (float for float32 tensors, else double).
// ncomp components (2 per complex element); the result stays below `high`.
// Fixed-width kernels give each thread GT_RUN consecutive values (one Philox block serves
// several of them): for (GT_RUNS(i, n)) visits every i once.
#define GT_RUN 4
#define GT_RUNS(i, n)                                                                        \
    gt_i64 i = ((gt_i64)blockIdx.x * blockDim.x + threadIdx.x) * GT_RUN, i##_k = 0;         \
    i < (gt_i64)(n);                                                                         \
    (++i##_k % GT_RUN) ? ++i : (i += ((gt_i64)blockDim.x * gridDim.x - 1) * GT_RUN + 1)

template <class T, class W>
__device__ void gt_uniform(T* out, const gt_u64* st, gt_i64 ncomp, int mode, double low,
                           double high, double top, double below) {
    GtStream s(st);
    for (GT_RUNS(i, ncomp)) {
        W u = (W)gt_unit(s, mode, i);
        W v = u;
        if (!(low == 0.0 && high == 1.0) || mode >= 2) {
            v = (W)(u * (W)(high - low));
            v = (W)(v + (W)low);
        }
        T t = gt_from_double<T>((double)v);
        // top: `high` in T; below: the T just under it (CPU _clip_below)
        if (low < high && gt::load<double>(t) >= top) t = gt_from_double<T>(below);
        out[i] = t;
    }
}

// bernoulli: out = u < p with u a 53-bit double (p: a number, or per element when p_arr).
template <class T>
__device__ void gt_bernoulli(T* out, const gt_u64* st, gt_i64 n, double p, const double* p_arr) {
    GtStream s(st);
    for (GT_RUNS(i, n)) {
        double pi = p_arr ? p_arr[i] : p;
        out[i] = gt::store<T>(s.next_double(i) < pi ? 1 : 0);
    }
}

// Range checks before sampling: flags[0] counts bad values (NaN or outside [lo, hi]),
// flags[1] is the first bad index; ge0_only: no upper bound.
template <class T>
__device__ void gt_check_range(const T* x, gt_i64 n, double lo, double hi, gt_i64* flags) {
    for (GT_GRID_STRIDE(i, n)) {
        double v = gt::load<double>(x[i]);
        if (!(v >= lo && v <= hi)) {
            atomicAdd((unsigned long long*)&flags[0], 1ULL);
            atomicMin(&flags[1], i);
        }
    }
}

// ---- finishing: raw samples -> the op's values in the target dtype -----------------------
// normal_: kind 0: z float (NumPy float32 work), 1: z double. Scalar mean/std are applied in the
// work precision as NumPy does with Python floats; tensors (contiguous doubles, broadcast to n)
// in double. cplx: components come in pairs scaled by 1/sqrt(2); mean is (mre, mim).
template <class T, class W>
__device__ void gt_normal_finish(T* out, const gt_u64* raw, gt_i64 ncomp, double mre, double mim,
                                 double sd, const double* mean_t, const double* std_t, int cplx) {
    for (GT_GRID_STRIDE(i, ncomp)) {
        W z = (W)gt_bitsd(raw[i]);
        if (mean_t || std_t) {
            double m = mean_t ? mean_t[i] : mre, s = std_t ? std_t[i] : sd;
            out[i] = gt_from_double<T>(m + s * (double)z);
            continue;
        }
        if (cplx) z = (W)(z * (W)0.7071067811865475);  // 1 / math.sqrt(2.0)
        double m = (cplx && (i & 1)) ? mim : mre;
        W v = z;
        if (cplx || sd != 1.0) v = (W)(v * (W)sd);
        if (cplx || m != 0.0) v = (W)(v + (W)m);
        out[i] = gt_from_double<T>((double)v);
    }
}

// NumPy's float32 exp on x86-64 with AVX2/AVX512 (its SIMD loop): Cody-Waite reduction by
// ln 2 and a 5/2 rational minimax approximation, scaled by 2**k. The CPU's log_normal_ goes
// through it, so computing the same steps here keeps the two devices bit-identical.
__device__ __forceinline__ float gt_numpy_expf(float x) {
    if (x != x) return x;
    if (x >= 88.72283935546875f) return 1.0f / 0.0f;
    if (x <= -103.97208404541015625f) return 0.0f;
    float q = x * 1.44269504088896340736f;  // log2(e); -fmad=false keeps these two roundings
    q = q + 12582912.0f;                     // 1.5 * 2**23: round to the nearest integer
    q = q - 12582912.0f;
    float y = fmaf(q, -6.93145752e-1f, x);   // ln 2 in two parts
    y = fmaf(q, -1.42860677e-6f, y);
    y = fmaf(q, 0.0f, y);
    float num = fmaf(5.082762527590693718096e-04f, y, 6.757896990527504603057e-03f);
    num = fmaf(num, y, 5.114512081637298353406e-02f);
    num = fmaf(num, y, 2.473615434895520810817e-01f);
    num = fmaf(num, y, 7.257664613233124478488e-01f);
    num = fmaf(num, y, 9.999999999980870924916e-01f);
    float den = fmaf(2.159509375685829852307e-02f, y, -2.742335390411667452936e-01f);
    den = fmaf(den, y, 1.0f);
    return ldexpf(num / den, (int)q);
}

// log_normal_, exponential_, cauchy_: op 0: exp(mean + std * z), 1: z / a, 2: a + b * z.
template <class T, class W>
__device__ void gt_real_finish(T* out, const gt_u64* raw, gt_i64 n, int op, double a, double b) {
    for (GT_GRID_STRIDE(i, n)) {
        double r = gt_bitsd(raw[i]);
        double v;
        if (op == 0) {
            W z = (W)r;
            W t = (W)((W)a + (W)((W)b * z));
            v = sizeof(W) == 4 ? (double)gt_numpy_expf((float)t) : exp((double)t);
        } else if (op == 1) {
            v = (double)(W)((W)r / (W)a);
        } else {
            v = a + b * r;
        }
        out[i] = gt_from_double<T>(v);
    }
}

// Integer results (geometric, random_, poisson, multinomial, randperm): low + raw as int64,
// cast to T like NumPy's assignment (wrapping for integers, rounding for floats).
template <class T>
__device__ void gt_int_finish(T* out, const gt_u64* raw, gt_i64 n, gt_i64 low) {
    for (GT_GRID_STRIDE(i, n)) {
        gt_i64 v = (gt_i64)((gt_u64)low + raw[i]);
        out[i] = gt::store<T>(v);
    }
}

// ---- sequential samplers (one device thread) ------------------------------------------------
// NumPy random_loggam (log-gamma for PTRS).
__device__ double gt_loggam(double x) {
    const double a[10] = {8.333333333333333e-02, -2.777777777777778e-03,
                          7.936507936507937e-04, -5.952380952380952e-04,
                          8.417508417508418e-04, -1.917526917526918e-03,
                          6.410256410256410e-03, -2.955065359477124e-02,
                          1.796443723688307e-01, -1.39243221690590e+00};
    if (x == 1.0 || x == 2.0) return 0.0;
    gt_i64 n = x < 7.0 ? (gt_i64)(7 - x) : 0;
    double x0 = x + n;
    double x2 = (1.0 / x0) * (1.0 / x0), lg2pi = 1.8378770664093453e+00;
    double gl0 = a[9];
    for (int k = 8; k >= 0; k--) { gl0 *= x2; gl0 += a[k]; }
    double gl = gl0 / x0 + 0.5 * lg2pi + (x0 - 0.5) * log(x0) - x0;
    if (x < 7.0) {
        for (gt_i64 k = 1; k <= n; k++) { gl -= log(x0 - 1.0); x0 -= 1.0; }
    }
    return gl;
}

// Poisson (NumPy random_poisson: multiplication below 10, PTRS above); status[0] = words used.
__device__ void gt_poisson_seq(const gt_u64* st, const double* lam, gt_i64 n, gt_u64* out,
                               gt_i64* status) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    GtStream s(st);
    gt_i64 p = 0;
    for (gt_i64 i = 0; i < n; ++i) {
        double l = lam[i];
        gt_i64 x = 0;
        if (l >= 10) {
            double slam = sqrt(l), loglam = log(l);
            double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
            double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
            for (;;) {
                double U = s.next_double(p++) - 0.5, V = s.next_double(p++);
                double us = 0.5 - fabs(U);
                gt_i64 k = (gt_i64)floor((2 * a / us + b) * U + l + 0.43);
                if (us >= 0.07 && V <= vr) { x = k; break; }
                if (k < 0 || (us < 0.013 && V > us)) continue;
                if ((log(V) + log(invalpha) - log(a / (us * us) + b)) <=
                    (-l + (double)k * loglam - gt_loggam((double)k + 1))) { x = k; break; }
            }
        } else if (l != 0) {
            double enlam = exp(-l), prod = 1.0;
            for (;;) {
                prod *= s.next_double(p++);
                if (prod > enlam) ++x; else break;
            }
        }
        out[i] = (gt_u64)x;
    }
    status[0] = p;
}

// randperm: NumPy's permutation(n) = Fisher-Yates over arange(n) with random_interval (masked
// rejection on 32-bit words below 2**32, 64-bit words above). Word kinds never mix within one
// call for n <= 2**32; status[0] = words used (32-bit ones when n <= 2**32).
__device__ void gt_randperm_seq(const gt_u64* st, gt_i64 n, gt_i64* out, gt_i64* status) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    GtStream s(st);
    for (gt_i64 i = 0; i < n; ++i) out[i] = i;
    gt_i64 p = 0;
    for (gt_i64 i = n - 1; i >= 1; --i) {
        gt_u64 mx = (gt_u64)i, mask = mx, v;
        mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4;
        mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
        if (mx <= 0xffffffffULL) {
            while ((v = ((gt_u64)s.word32(p++) & mask)) > mx) {}
        } else {
            while ((v = (s.word64(p++) & mask)) > mx) {}
        }
        gt_i64 t = out[i];
        out[i] = out[(gt_i64)v];
        out[(gt_i64)v] = t;
    }
    status[0] = p;
}

// ---- multinomial ------------------------------------------------------------------------------
// One thread per row: cumulative sums (sequential, like np.cumsum), the last non-zero category,
// and the validation flags (flags[0]: bad value seen, flags[1]: a row sums to <= 0).
template <class T>
__device__ void gt_multinomial_prep(const T* probs, gt_i64 rows, gt_i64 cats, gt_i64 rs,
                                    gt_i64 cs, double* cdf, gt_i64* last, gt_i64* flags) {
    for (GT_GRID_STRIDE(r, rows)) {
        double acc = 0.0;
        bool pos = false;
        for (gt_i64 c = 0; c < cats; ++c) {
            double v = gt::load<double>(probs[r * rs + c * cs]);
            if (!(v >= 0.0) || v == 1.0 / 0.0) atomicMax((unsigned long long*)&flags[0], 1ULL);
            if (v > 0.0) pos = true;
            acc += v;
            cdf[r * cats + c] = acc;
        }
        if (!pos) atomicMax((unsigned long long*)&flags[1], 1ULL);
        gt_i64 l = cats - 1;
        while (l > 0 && cdf[r * cats + l] == cdf[r * cats + l - 1]) --l;
        last[r] = l;
    }
}

// With replacement: out[r, j] = first category whose cumulative weight exceeds u * total.
__device__ void gt_multinomial_draw(const gt_u64* st, const double* cdf, const gt_i64* last,
                                    gt_i64 rows, gt_i64 cats, gt_i64 ns, gt_i64* out) {
    GtStream s(st);
    for (GT_RUNS(i, rows * ns)) {
        gt_i64 r = i / ns;
        const double* row = cdf + r * cats;
        double v = s.next_double(i) * row[cats - 1];
        gt_i64 lo = 0, hi = cats;
        while (lo < hi) {
            gt_i64 mid = (lo + hi) / 2;
            if (row[mid] > v) hi = mid; else lo = mid + 1;
        }
        out[i] = lo < last[r] ? lo : last[r];
    }
}

// Without replacement: keys p / e; each element's rank in the stable descending order of its
// row; the first ns ranks are the sample.
template <class T>
__device__ void gt_multinomial_rank(const T* probs, gt_i64 rows, gt_i64 cats, gt_i64 rs,
                                    gt_i64 cs, const gt_u64* expo, gt_i64 ns, gt_i64* out) {
    for (GT_GRID_STRIDE(i, rows * cats)) {
        gt_i64 r = i / cats, j = i % cats;
        double kj = -(gt::load<double>(probs[r * rs + j * cs]) / gt_bitsd(expo[i]));
        gt_i64 rank = 0;
        for (gt_i64 c = 0; c < cats; ++c) {
            double kc = -(gt::load<double>(probs[r * rs + c * cs]) / gt_bitsd(expo[r * cats + c]));
            // argsort order: ascending, NaN last, ties by index
            bool before = (kc < kj) || (kc == kj && c < j) ||
                          (kj != kj && (kc == kc || c < j));
            if (c != j && before) ++rank;
        }
        if (rank < ns) out[r * ns + rank] = j;
    }
}

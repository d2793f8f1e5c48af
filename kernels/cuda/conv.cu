// Convolution helpers (im2col, the col2im fold, layout permutes) and 2-D pooling kernels.
//
// Convolutions are im2col + GEMM (kernels/cuda/ops/conv.py runs the products): the column matrix
// is batch-wide, (C*kh*kw, N, Ho*Wo) row-major, so each group is ONE product over the whole
// batch. The fold (col2im) is a gather: each input cell sums the taps that read it, in tap order,
// with no atomics, so results are deterministic and every uncovered cell gets 0.
//
// Pools run one thread per output element (or per input cell for the gathers of the average
// backward passes). Max pooling keeps the CPU kernel's rules: the first in-bounds tap seeds the
// maximum, NaN wins, and the index is the flat position within the (H, W) plane. Its backward
// (shared with adaptive max pooling, whose windows it does not know) scatters with atomics and
// checks every index against the plane, raising a flag instead of writing out of bounds.
//
// Geometry and strides travel in a small int64 device array `g` (layouts below); T is the
// storage type, C the compute type (float for 16-bit floats, double for float64 and integer
// averages), all 4-D tensors NCHW with arbitrary element strides.
#include "common.cuh"
#include "errors.cuh"
#include "scalar_fns.cuh"

namespace gt_conv {

// Convolution geometry: g = [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo,
//                            x strides (4), second tensor's strides (4)]
struct Geo {
    long long n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo;
    long long xs[4], ys[4];
};

__device__ __forceinline__ Geo load_geo(const long long* g) {
    Geo r;
    r.n = g[0]; r.c = g[1]; r.h = g[2]; r.w = g[3]; r.kh = g[4]; r.kw = g[5];
    r.sh = g[6]; r.sw = g[7]; r.ph = g[8]; r.pw = g[9]; r.dh = g[10]; r.dw = g[11];
    r.ho = g[12]; r.wo = g[13];
    for (int i = 0; i < 4; ++i) { r.xs[i] = g[14 + i]; r.ys[i] = g[18 + i]; }
    return r;
}

// cols[(c*kh*kw + tap), n, l] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] or 0 (padding).
template <class T, class C>
__device__ void im2col(C* __restrict__ cols, const T* __restrict__ x, const long long* gp) {
    const Geo g = load_geo(gp);
    const long long L = g.ho * g.wo, taps = g.kh * g.kw;
    const long long total = g.c * taps * g.n * L;
    for (GT_GRID_STRIDE(e, total)) {
        long long t = e;
        const long long l = t % L; t /= L;
        const long long n = t % g.n; t /= g.n;
        const long long tap = t % taps;
        const long long c = t / taps;
        const long long ih = (l / g.wo) * g.sh - g.ph + (tap / g.kw) * g.dh;
        const long long iw = (l % g.wo) * g.sw - g.pw + (tap % g.kw) * g.dw;
        C v = C(0);
        if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
            v = gt::load<C>(x[n * g.xs[0] + c * g.xs[1] + ih * g.xs[2] + iw * g.xs[3]]);
        cols[e] = v;
    }
}

// The adjoint of im2col as a gather: out[n, c, ih, iw] (strides ys) = sum of the column
// entries whose tap reads (ih, iw), in tap order; cells no tap reads get 0.
template <class T, class C>
__device__ void col2im(T* __restrict__ out, const C* __restrict__ cols, const long long* gp) {
    const Geo g = load_geo(gp);
    const long long L = g.ho * g.wo, taps = g.kh * g.kw;
    const long long total = g.n * g.c * g.h * g.w;
    for (GT_GRID_STRIDE(e, total)) {
        long long t = e;
        const long long iw = t % g.w; t /= g.w;
        const long long ih = t % g.h; t /= g.h;
        const long long c = t % g.c;
        const long long n = t / g.c;
        C acc = C(0);
        for (long long i = 0; i < g.kh; ++i) {
            const long long th = ih + g.ph - i * g.dh;
            if (th < 0) break;
            if (th % g.sh) continue;
            const long long oh = th / g.sh;
            if (oh >= g.ho) continue;
            for (long long j = 0; j < g.kw; ++j) {
                const long long tw = iw + g.pw - j * g.dw;
                if (tw < 0) break;
                if (tw % g.sw) continue;
                const long long ow = tw / g.sw;
                if (ow >= g.wo) continue;
                acc += cols[((c * taps + i * g.kw + j) * g.n + n) * L + oh * g.wo + ow];
            }
        }
        out[n * g.ys[0] + c * g.ys[1] + ih * g.ys[2] + iw * g.ys[3]] = gt::store<T>(acc);
    }
}

// dst[c, n, l] = src[n, c, l] (src (N, C, H, W) strided, dst contiguous (C, N, H*W)): the
// batch-wide layout of a gradient, cast to the compute type.
template <class T, class C>
__device__ void nchw_to_cnl(C* __restrict__ dst, const T* __restrict__ src, long long N,
                            long long Cc, long long H, long long W, const long long* s) {
    const long long L = H * W, total = N * Cc * L;
    for (GT_GRID_STRIDE(e, total)) {
        long long t = e;
        const long long l = t % L; t /= L;
        const long long n = t % N;
        const long long c = t / N;
        dst[e] = gt::load<C>(src[n * s[0] + c * s[1] + (l / W) * s[2] + (l % W) * s[3]]);
    }
}

// out[n, c, l] = store(src[c, n, l]) (+ bias[c], added in out's type as the CPU does):
// the batch-wide product back to NCHW (out contiguous, bias strided by bias_stride).
template <class T, class C>
__device__ void cnl_to_nchw(T* __restrict__ out, const C* __restrict__ src, const T* bias,
                            long long bias_stride, long long N, long long Cc, long long L) {
    const long long total = N * Cc * L;
    for (GT_GRID_STRIDE(e, total)) {
        long long t = e;
        const long long l = t % L; t /= L;
        const long long c = t % Cc;
        const long long n = t / Cc;
        T v = gt::store<T>(src[(c * N + n) * L + l]);
        if (bias != nullptr) {
            if constexpr (gt::is_float<C>::value)
                v = gt::store<T>(gt::load<C>(v) + gt::load<C>(bias[c * bias_stride]));
            else
                v = (T)((unsigned long long)(long long)v +
                        (unsigned long long)(long long)bias[c * bias_stride]);
        }
        out[e] = v;
    }
}

// ---- pooling ------------------------------------------------------------------------------
// Pool geometry: p = [N, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw,
//                     x strides (4), out strides (4), index strides (4)]
struct Pool {
    long long n, c, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw;
    long long xs[4], os[4], is[4];
};

__device__ __forceinline__ Pool load_pool(const long long* p) {
    Pool r;
    r.n = p[0]; r.c = p[1]; r.h = p[2]; r.w = p[3]; r.ho = p[4]; r.wo = p[5];
    r.kh = p[6]; r.kw = p[7]; r.sh = p[8]; r.sw = p[9]; r.ph = p[10]; r.pw = p[11];
    r.dh = p[12]; r.dw = p[13];
    for (int i = 0; i < 4; ++i) { r.xs[i] = p[14 + i]; r.os[i] = p[18 + i]; r.is[i] = p[22 + i]; }
    return r;
}

// Decompose a flat (N, C, Ho, Wo) output index.
__device__ __forceinline__ void out_coords(long long e, const Pool& g, long long& n, long long& c,
                                           long long& oh, long long& ow) {
    ow = e % g.wo; e /= g.wo;
    oh = e % g.ho; e /= g.ho;
    c = e % g.c;
    n = e / g.c;
}

// Adaptive window o of n_out over n_in: [floor(o*n_in/n_out), ceil((o+1)*n_in/n_out)).
__device__ __forceinline__ long long win_start(long long o, long long n_out, long long n_in) {
    return (o * n_in) / n_out;
}
__device__ __forceinline__ long long win_end(long long o, long long n_out, long long n_in) {
    return ((o + 1) * n_in + n_out - 1) / n_out;
}

template <class T, class C>
__device__ void max_pool(T* __restrict__ out, long long* __restrict__ idx,
                         const T* __restrict__ x, const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.ho * g.wo;
    for (GT_GRID_STRIDE(e, total)) {
        long long n, c, oh, ow;
        out_coords(e, g, n, c, oh, ow);
        const T* plane = x + n * g.xs[0] + c * g.xs[1];
        const long long h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        long long i0 = h0, j0 = w0;  // the first in-bounds tap seeds the maximum
        while (i0 < 0) i0 += g.dh;
        while (j0 < 0) j0 += g.dw;
        if (i0 > g.h - 1) i0 = g.h - 1;
        if (j0 > g.w - 1) j0 = g.w - 1;
        C best = gt::load<C>(plane[i0 * g.xs[2] + j0 * g.xs[3]]);
        long long best_i = i0 * g.w + j0;
        for (long long i = 0; i < g.kh; ++i) {
            const long long ih = h0 + i * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            for (long long j = 0; j < g.kw; ++j) {
                const long long iw = w0 + j * g.dw;
                if (iw < 0 || iw >= g.w) continue;
                const C v = gt::load<C>(plane[ih * g.xs[2] + iw * g.xs[3]]);
                if (v > best || v != v) {  // NaN wins and propagates, as in PyTorch
                    best = v;
                    best_i = ih * g.w + iw;
                }
            }
        }
        out[n * g.os[0] + c * g.os[1] + oh * g.os[2] + ow * g.os[3]] = gt::store<T>(best);
        idx[n * g.is[0] + c * g.is[1] + oh * g.is[2] + ow * g.is[3]] = best_i;
    }
}

template <class T, class C>
__device__ void adaptive_max_pool(T* __restrict__ out, long long* __restrict__ idx,
                                  const T* __restrict__ x, const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.ho * g.wo;
    for (GT_GRID_STRIDE(e, total)) {
        long long n, c, oh, ow;
        out_coords(e, g, n, c, oh, ow);
        const T* plane = x + n * g.xs[0] + c * g.xs[1];
        const long long hs = win_start(oh, g.ho, g.h), he = win_end(oh, g.ho, g.h);
        const long long ws = win_start(ow, g.wo, g.w), we = win_end(ow, g.wo, g.w);
        C best = gt::load<C>(plane[hs * g.xs[2] + ws * g.xs[3]]);
        long long best_i = hs * g.w + ws;
        for (long long ih = hs; ih < he; ++ih)
            for (long long iw = ws; iw < we; ++iw) {
                const C v = gt::load<C>(plane[ih * g.xs[2] + iw * g.xs[3]]);
                if (v > best || v != v) {
                    best = v;
                    best_i = ih * g.w + iw;
                }
            }
        out[n * g.os[0] + c * g.os[1] + oh * g.os[2] + ow * g.os[3]] = gt::store<T>(best);
        idx[n * g.is[0] + c * g.is[1] + oh * g.is[2] + ow * g.is[3]] = best_i;
    }
}

// Scatter-add of the max pools' gradient: acc[n, c, idx] += grad[n, c, oh, ow] (acc a zeroed,
// contiguous (N, C, H, W) buffer of an atomic type). An index outside the plane is skipped
// and reported to the error record `err` (errors.cuh) as error site `site`.
template <class T, class Acc>
__device__ void max_pool_backward(Acc* __restrict__ acc, const T* __restrict__ grad,
                                  const long long* __restrict__ idx, long long* err,
                                  long long site, const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.ho * g.wo;
    const long long plane = g.h * g.w;
    for (GT_GRID_STRIDE(e, total)) {
        long long n, c, oh, ow;
        out_coords(e, g, n, c, oh, ow);
        const long long k = idx[n * g.is[0] + c * g.is[1] + oh * g.is[2] + ow * g.is[3]];
        if (k < 0 || k >= plane) {
            gt_report_error(err, site, k, plane, g.h, g.w);  // "dim", "extra": the plane
            continue;
        }
        const Acc v = gt::load<Acc>(grad[n * g.xs[0] + c * g.xs[1] + oh * g.xs[2] + ow * g.xs[3]]);
        atomicAdd(acc + (n * g.c + c) * plane + k, v);
    }
}

// The average pools' window: divisor and in-bounds extent [hs, he) x [ws, we), as the CPU.
__device__ __forceinline__ long long avg_window(long long h0, long long w0, const Pool& g,
                                                bool count_include_pad, long long divisor,
                                                long long& hs, long long& he, long long& ws,
                                                long long& we) {
    he = h0 + g.kh < g.h + g.ph ? h0 + g.kh : g.h + g.ph;
    we = w0 + g.kw < g.w + g.pw ? w0 + g.kw : g.w + g.pw;
    const long long pool = (he - h0) * (we - w0);
    hs = h0 > 0 ? h0 : 0;
    ws = w0 > 0 ? w0 : 0;
    he = he < g.h ? he : g.h;
    we = we < g.w ? we : g.w;
    if (divisor != 0) return divisor;
    return count_include_pad ? pool : (he - hs) * (we - ws);
}

// C accumulates; integer inputs sum exactly in 64 bits (C = long long) and divide in double.
template <class T, class C>
__device__ __forceinline__ T average(C acc, long long d) {
    if constexpr (gt::is_float<C>::value) return gt::store<T>(acc / (C)d);
    else return gt::store<T>((double)acc / (double)d);  // truncates toward zero, as the CPU
}

template <class T, class C>
__device__ void avg_pool(T* __restrict__ out, const T* __restrict__ x, bool count_include_pad,
                         long long divisor, const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.ho * g.wo;
    for (GT_GRID_STRIDE(e, total)) {
        long long n, c, oh, ow;
        out_coords(e, g, n, c, oh, ow);
        const T* plane = x + n * g.xs[0] + c * g.xs[1];
        long long hs, he, ws, we;
        const long long d = avg_window(oh * g.sh - g.ph, ow * g.sw - g.pw, g, count_include_pad,
                                       divisor, hs, he, ws, we);
        C acc = C(0);
        for (long long ih = hs; ih < he; ++ih)
            for (long long iw = ws; iw < we; ++iw) acc += gt::load<C>(plane[ih * g.xs[2] + iw * g.xs[3]]);
        out[n * g.os[0] + c * g.os[1] + oh * g.os[2] + ow * g.os[3]] = average<T>(acc, d);
    }
}

// Gather form of the average pool's backward: each input cell sums grad / divisor over the
// windows covering it (in output order). xs are grad's strides, os grad_input's.
template <class T, class C>
__device__ void avg_pool_backward(T* __restrict__ gin, const T* __restrict__ grad,
                                  bool count_include_pad, long long divisor, const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.h * g.w;
    for (GT_GRID_STRIDE(e, total)) {
        long long t = e;
        const long long iw = t % g.w; t /= g.w;
        const long long ih = t % g.h; t /= g.h;
        const long long c = t % g.c;
        const long long n = t / g.c;
        const T* gp = grad + n * g.xs[0] + c * g.xs[1];
        // Windows oh with oh*sh - ph <= ih < oh*sh - ph + kh.
        long long oh_lo = ih + g.ph - g.kh + 1;
        oh_lo = oh_lo <= 0 ? 0 : (oh_lo + g.sh - 1) / g.sh;
        long long oh_hi = (ih + g.ph) / g.sh;
        if (oh_hi > g.ho - 1) oh_hi = g.ho - 1;
        long long ow_lo = iw + g.pw - g.kw + 1;
        ow_lo = ow_lo <= 0 ? 0 : (ow_lo + g.sw - 1) / g.sw;
        long long ow_hi = (iw + g.pw) / g.sw;
        if (ow_hi > g.wo - 1) ow_hi = g.wo - 1;
        C acc = C(0);
        for (long long oh = oh_lo; oh <= oh_hi; ++oh)
            for (long long ow = ow_lo; ow <= ow_hi; ++ow) {
                long long hs, he, ws, we;
                const long long d = avg_window(oh * g.sh - g.ph, ow * g.sw - g.pw, g,
                                               count_include_pad, divisor, hs, he, ws, we);
                acc += gt::load<C>(gp[oh * g.xs[2] + ow * g.xs[3]]) / (C)d;
            }
        gin[n * g.os[0] + c * g.os[1] + ih * g.os[2] + iw * g.os[3]] = gt::store<T>(acc);
    }
}

template <class T, class C>
__device__ void adaptive_avg_pool(T* __restrict__ out, const T* __restrict__ x,
                                  const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.ho * g.wo;
    for (GT_GRID_STRIDE(e, total)) {
        long long n, c, oh, ow;
        out_coords(e, g, n, c, oh, ow);
        const T* plane = x + n * g.xs[0] + c * g.xs[1];
        const long long hs = win_start(oh, g.ho, g.h), he = win_end(oh, g.ho, g.h);
        const long long ws = win_start(ow, g.wo, g.w), we = win_end(ow, g.wo, g.w);
        C acc = C(0);
        for (long long ih = hs; ih < he; ++ih)
            for (long long iw = ws; iw < we; ++iw) acc += gt::load<C>(plane[ih * g.xs[2] + iw * g.xs[3]]);
        out[n * g.os[0] + c * g.os[1] + oh * g.os[2] + ow * g.os[3]] =
            average<T>(acc, (he - hs) * (we - ws));
    }
}

template <class T, class C>
__device__ void adaptive_avg_pool_backward(T* __restrict__ gin, const T* __restrict__ grad,
                                           const long long* pp) {
    const Pool g = load_pool(pp);
    const long long total = g.n * g.c * g.h * g.w;
    for (GT_GRID_STRIDE(e, total)) {
        long long t = e;
        const long long iw = t % g.w; t /= g.w;
        const long long ih = t % g.h; t /= g.h;
        const long long c = t % g.c;
        const long long n = t / g.c;
        const T* gp = grad + n * g.xs[0] + c * g.xs[1];
        // Candidate windows around ih*Ho/H; membership is checked exactly.
        long long oh_lo = (ih * g.ho) / g.h - 1, oh_hi = ((ih + 1) * g.ho + g.h - 1) / g.h;
        long long ow_lo = (iw * g.wo) / g.w - 1, ow_hi = ((iw + 1) * g.wo + g.w - 1) / g.w;
        oh_lo = oh_lo < 0 ? 0 : oh_lo;
        ow_lo = ow_lo < 0 ? 0 : ow_lo;
        oh_hi = oh_hi > g.ho - 1 ? g.ho - 1 : oh_hi;
        ow_hi = ow_hi > g.wo - 1 ? g.wo - 1 : ow_hi;
        C acc = C(0);
        for (long long oh = oh_lo; oh <= oh_hi; ++oh) {
            const long long hs = win_start(oh, g.ho, g.h), he = win_end(oh, g.ho, g.h);
            if (ih < hs || ih >= he) continue;
            for (long long ow = ow_lo; ow <= ow_hi; ++ow) {
                const long long ws = win_start(ow, g.wo, g.w), we = win_end(ow, g.wo, g.w);
                if (iw < ws || iw >= we) continue;
                acc += gt::load<C>(gp[oh * g.xs[2] + ow * g.xs[3]]) / (C)((he - hs) * (we - ws));
            }
        }
        gin[n * g.os[0] + c * g.os[1] + ih * g.os[2] + iw * g.os[3]] = gt::store<T>(acc);
    }
}

}  // namespace gt_conv

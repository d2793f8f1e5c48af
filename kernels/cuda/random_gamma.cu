// The gamma-family samplers and their reparameterisation gradients on the device: the same
// algorithms, streams and arithmetic as kernels/cpu/random_gamma.py (read it for the why), so a
// seed gives the CPU's samples here too.
//
// Element i reads its own Philox4x32-10 stream, counter (block, i), under a per-call key drawn
// from the generator on the host (kernels/sample_keys.py): rejection loops take as many draws as
// they need without any order between elements. Every draw takes one Philox block: a uniform is
// its first two 32-bit words (53 bits), a normal all four (Box-Muller).
#include "common.cuh"
#include "scalar_fns.cuh"

typedef unsigned long long gg_u64;

struct GgStream {
    unsigned k0, k1;
    gg_u64 elem;

    __device__ void block(gg_u64 blk, unsigned w[4]) const {
        unsigned c0 = (unsigned)blk, c1 = (unsigned)(blk >> 32);
        unsigned c2 = (unsigned)elem, c3 = (unsigned)(elem >> 32);
        unsigned a = k0, b = k1;
        for (int r = 0; r < 10; ++r) {
            gg_u64 p0 = (gg_u64)0xD2511F53u * c0, p1 = (gg_u64)0xCD9E8D57u * c2;
            unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ a, n2 = (unsigned)(p0 >> 32) ^ c3 ^ b;
            c0 = n0; c1 = (unsigned)p1; c2 = n2; c3 = (unsigned)p0;
            a += 0x9E3779B9u; b += 0xBB67AE85u;
        }
        w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
    }
    __device__ static double u53(unsigned hi, unsigned lo) {
        return (double)((gg_u64)(hi >> 5) * 67108864ULL + (gg_u64)(lo >> 6)) *
               (1.0 / 9007199254740992.0);
    }
    __device__ double uniform(gg_u64 blk) const {
        unsigned w[4];
        block(blk, w);
        return u53(w[0], w[1]);
    }
    __device__ double normal(gg_u64 blk) const {
        unsigned w[4];
        block(blk, w);
        double u1 = u53(w[0], w[1]), u2 = u53(w[2], w[3]);
        return sqrt(-2.0 * log1p(-u1)) * cos(2.0 * 3.141592653589793 * u2);
    }
};

#define GG_EPS 1e-16
#define GG_TINY 1e-300
#define GG_MAX_TERMS 100000

// ---- samplers -------------------------------------------------------------------------------
// Marsaglia-Tsang with the alpha < 1 boost; 0 for alpha <= 0 or NaN (callers clamp to tiny).
__device__ double gg_gamma_one(double alpha, const GgStream& s) {
    if (!(alpha > 0.0)) return 0.0;
    gg_u64 blk = 0;
    double scale = 1.0;
    if (alpha < 1.0) {
        scale = pow(1.0 - s.uniform(blk++), 1.0 / alpha);
        alpha += 1.0;
    }
    const double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = s.normal(blk++);
        double y = 1.0 + c * x;
        if (y <= 0.0) continue;
        double v = y * y * y;
        double u = 1.0 - s.uniform(blk++);
        double xsq = x * x;
        if (u < 1.0 - 0.0331 * xsq * xsq || log(u) < 0.5 * xsq + d * (1.0 - v + log(v)))
            return scale * d * v;
    }
}

template <class T>
__device__ void gg_standard_gamma(const double* alpha, T* out, long long n, unsigned k0,
                                  unsigned k1, double tiny) {
    for (GT_GRID_STRIDE(i, n)) {
        GgStream s{k0, k1, (gg_u64)i};
        out[i] = (T)fmax(gg_gamma_one(alpha[i], s), tiny);
    }
}

// One thread per row of k concentrations: gammas normalised in double, clamped to [tiny, top]
// (top: the largest value below 1); a row of zero gammas is uniform.
template <class T>
__device__ void gg_sample_dirichlet(const double* alpha, T* out, long long rows, long long k,
                                    unsigned k0, unsigned k1, double tiny, double top) {
    for (GT_GRID_STRIDE(r, rows)) {
        double total = 0.0;
        for (long long j = 0; j < k; ++j) {
            GgStream s{k0, k1, (gg_u64)(r * k + j)};
            total += gg_gamma_one(alpha[r * k + j], s);
        }
        for (long long j = 0; j < k; ++j) {  // the same draws again: streams are pure functions
            GgStream s{k0, k1, (gg_u64)(r * k + j)};
            double x = total > 0.0 ? gg_gamma_one(alpha[r * k + j], s) / total : 1.0 / k;
            out[r * k + j] = (T)fmin(fmax(x, tiny), top);
        }
    }
}

__device__ double gg_binomial_inversion(double n, double p, const GgStream& s) {
    const double logq = log1p(-p);
    double total = 0.0, k = 0.0;
    for (gg_u64 blk = 0;; ++blk) {
        double u = 1.0 - s.uniform(blk);
        total += ceil(log(u) / logq);
        if (total > n) return k;
        k += 1.0;
    }
}

__device__ double gg_binomial_btrs(double n, double p, const GgStream& s) {
    const double q = 1.0 - p, spq = sqrt(n * p * q);
    const double b = 1.15 + 2.53 * spq, a = -0.0873 + 0.0248 * b + 0.01 * p;
    const double c = n * p + 0.5, vr = 0.92 - 4.2 / b, alpha = (2.83 + 5.1 / b) * spq;
    const double lpq = log(p / q), m = floor((n + 1.0) * p);
    const double h = lgamma(m + 1.0) + lgamma(n - m + 1.0);
    for (gg_u64 blk = 0;; blk += 2) {
        double u = s.uniform(blk) - 0.5, v = s.uniform(blk + 1);
        double us = 0.5 - fabs(u);
        double k = floor((2.0 * a / us + b) * u + c);
        if (k < 0.0 || k > n) continue;
        if (us >= 0.07 && v <= vr) return k;
        double lv = log(v * alpha / (a / (us * us) + b));
        if (lv <= h - lgamma(k + 1.0) - lgamma(n - k + 1.0) + (k - m) * lpq) return k;
    }
}

__device__ double gg_binomial_one(double n, double p, const GgStream& s) {
    if (n != n || p != p || n - n != n - n) return nan("");  // NaN parameter or count
    if (n <= 0.0 || p <= 0.0) return 0.0;
    if (p >= 1.0) return n;
    const bool flip = p > 0.5;
    const double pp = flip ? 1.0 - p : p;
    double k = n * pp >= 10.0 ? gg_binomial_btrs(n, pp, s) : gg_binomial_inversion(n, pp, s);
    return flip ? n - k : k;
}

template <class T>
__device__ void gg_binomial(const double* count, const double* prob, T* out, long long n,
                            unsigned k0, unsigned k1) {
    for (GT_GRID_STRIDE(i, n)) {
        GgStream s{k0, k1, (gg_u64)i};
        out[i] = (T)gg_binomial_one(count[i], prob[i], s);
    }
}

// ---- reparameterisation gradients -----------------------------------------------------------
// A value and its derivative in the parameter being differentiated (forward-mode dual number).
struct GgDual {
    double v, d;
};

// One step of Lentz's algorithm for h = b0 + a1/(b1 + a2/(b2 + ...)) in the form
// d <- 1 / (b + a d), c <- b + a / c, h <- h d c, every quantity carried with its derivative.
// Returns delta = d c (its value tells convergence).
__device__ GgDual gg_lentz_step(GgDual a, GgDual b, GgDual& c, GgDual& d, GgDual& h) {
    GgDual nd{a.v * d.v + b.v, a.d * d.v + a.v * d.d + b.d};
    if (fabs(nd.v) < GG_TINY) nd.v = GG_TINY;
    GgDual nc{b.v + a.v / c.v, b.d + (a.d * c.v - a.v * c.d) / (c.v * c.v)};
    if (fabs(nc.v) < GG_TINY) nc.v = GG_TINY;
    d.v = 1.0 / nd.v;
    d.d = -nd.d * d.v * d.v;
    c = nc;
    GgDual delta{d.v * c.v, d.d * c.v + d.v * c.d};
    h.d = h.d * delta.v + h.v * delta.d;
    h.v *= delta.v;
    return delta;
}

__device__ bool gg_converged(GgDual delta, GgDual h) {
    return fabs(delta.v - 1.0) < GG_EPS && fabs(delta.d) < GG_EPS * (1.0 + fabs(h.d / h.v));
}

// dx/dalpha for x ~ Gamma(alpha, 1): the series of P below alpha + 1, else Legendre's
// continued fraction of Q (see kernels/cpu/random_gamma.py).
__device__ double gg_gamma_grad_one(double alpha, double x) {
    if (!(x > 0.0) || x - x != x - x) return x == x ? 0.0 : x;
    if (x <= alpha + 1.0) {
        double s = 1.0, s_a = 0.0, t = 1.0, h = 0.0;
        for (int n = 1; n < GG_MAX_TERMS; ++n) {
            t *= x / (alpha + n);
            h += 1.0 / (alpha + n);
            s += t;
            s_a -= t * h;
            if (t < GG_EPS * s && t * h < GG_EPS * fabs(s_a)) break;
        }
        return -(x / alpha) * ((log(x) - gt::sp::digamma(alpha + 1.0)) * s + s_a);
    }
    GgDual b{x + 1.0 - alpha, -1.0}, c{1.0 / GG_TINY, 0.0};
    GgDual d{1.0 / b.v, -b.d / (b.v * b.v)}, h = d;
    for (int i = 1; i < GG_MAX_TERMS; ++i) {
        GgDual an{-i * (i - alpha), (double)i};
        b.v += 2.0;
        if (gg_converged(gg_lentz_step(an, b, c, d, h), h)) break;
    }
    return x * ((log(x) - gt::sp::digamma(alpha)) * h.v + h.d);
}

// Numerical Recipes' betacf continued fraction of I_y(p, q) and its derivative along (dp, dq).
__device__ GgDual gg_beta_cf(double p, double q, double y, double dp, double dq) {
    GgDual one{1.0, 0.0}, c = one;
    double den = 1.0 - (p + q) * y / (p + 1.0);
    double den_a = -(((dp + dq) * (p + 1.0) - (p + q) * dp) * y) / ((p + 1.0) * (p + 1.0));
    if (fabs(den) < GG_TINY) den = GG_TINY;
    GgDual d{1.0 / den, 0.0};
    d.d = -den_a * d.v * d.v;
    GgDual h = d;
    for (int m = 1; m < GG_MAX_TERMS; ++m) {
        GgDual delta{0.0, 0.0};
        for (int odd = 0; odd < 2; ++odd) {
            double num, num_a, r1, r2;
            if (odd == 0) {
                num = m * (q - m) * y;
                num_a = m * dq * y;
                r1 = p + 2.0 * m - 1.0;
                r2 = p + 2.0 * m;
            } else {
                num = -(p + m) * (p + q + m) * y;
                num_a = -(dp * (p + q + m) + (p + m) * (dp + dq)) * y;
                r1 = p + 2.0 * m;
                r2 = p + 2.0 * m + 1.0;
            }
            double dd = r1 * r2;
            GgDual aa{num / dd, (num_a * dd - num * dp * (r1 + r2)) / (dd * dd)};
            delta = gg_lentz_step(aa, one, c, d, h);
        }
        if (gg_converged(delta, h)) break;
    }
    return h;
}

// PyTorch's _dirichlet_grad: dx/dalpha of x ~ Beta(alpha, total - alpha), over (1 - x).
__device__ double gg_dirichlet_grad_one(double x, double alpha, double total) {
    if (!(x > 0.0 && x < 1.0)) return x == x ? 0.0 : x;
    const double b = total - alpha;
    const double common = gt::sp::digamma(total) - gt::sp::digamma(alpha) + log(x);
    if (x < (alpha + 1.0) / (total + 2.0)) {
        GgDual h = gg_beta_cf(alpha, b, x, 1.0, 0.0);
        return -(x / alpha) * ((common - 1.0 / alpha) * h.v + h.d);
    }
    GgDual h = gg_beta_cf(b, alpha, 1.0 - x, 0.0, 1.0);
    return (x / b) * (common * h.v + h.d);
}

template <class T>
__device__ void gg_standard_gamma_grad(const double* alpha, const double* x, T* out,
                                       long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = (T)gg_gamma_grad_one(alpha[i], x[i]);
}

template <class T>
__device__ void gg_dirichlet_grad(const double* x, const double* alpha, const double* total,
                                  T* out, long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = (T)gg_dirichlet_grad_one(x[i], alpha[i], total[i]);
}

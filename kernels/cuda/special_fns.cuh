// torch.special's functions as CUDA __device__ functions: the vocabulary names of
// kernels/cpu/scalar_special.py (the Numba side), included by scalar_fns.cuh.
//
// CUDA's own math library serves what it has (lgamma, erfc, erfinv, erfcx, normcdf,
// normcdfinv, j0/j1/y0/y1, cyl_bessel_i0/i1), in float for float operands as PyTorch's CUDA
// kernels do. The rest follow the algorithms of PyTorch's ATen/native/Math.h and Cephes, or
// classical ones (series plus continued fraction for the incomplete gamma, with Temme's uniform
// expansion for large orders; series plus a trapezoidal rule for K0/K1, whose integrand decays
// doubly exponentially), computed in double.
// The CPU emulator's shim supplies host versions of the CUDA functions that <cmath> lacks.
#pragma once

#include "temme_gamma.cuh"

namespace gt {
namespace sp {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEps = 1.11022302462515654042e-16;
#define kInf __longlong_as_double(0x7ff0000000000000LL)
#define kNan __longlong_as_double(0x7ff8000000000000LL)

__device__ inline bool isnan_(double x) { return x != x; }
__device__ inline bool isinf_(double x) { return x - x != x - x && x == x; }

// ---- gamma family ------------------------------------------------------------------------
__device__ inline double digamma(double x) {
    if (x == 0) return ::copysign(kInf, -x);
    if (x < 0) {
        if (x == ::trunc(x)) return kNan;
        // reflection: psi(x) = psi(1 - x) - pi / tan(pi x), with x's fraction for accuracy
        const double r = x - ::trunc(x);
        return digamma(1 - x) - kPi / ::tan(kPi * r);
    }
    double result = 0;
    while (x < 10) {
        result -= 1 / x;
        x += 1;
    }
    if (x == 10) return result + 2.25175258906672110764;  // psi(10)
    double y = 0;
    if (x < 1.0e17) {  // ln x - 1/(2x) - sum B_2k / (2k x^2k)
        const double z = 1 / (x * x);
        y = z * (1.0 / 12 + z * (-1.0 / 120 + z * (1.0 / 252 + z * (-1.0 / 240 + z * (
            1.0 / 132 + z * (-691.0 / 32760 + z * (1.0 / 12)))))));
    }
    return result + ::log(x) - 0.5 / x - y;
}

__device__ inline double trigamma(double x) {
    double sign = 1, result = 0;
    if (x < 0.5) {
        sign = -1;
        const double s = ::sin(kPi * x);
        result -= kPi * kPi / (s * s);
        x = 1 - x;
    }
    for (int i = 0; i < 6; ++i) {
        result += 1 / (x * x);
        x += 1;
    }
    const double ixx = 1 / (x * x);
    result += (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x;
    return sign * result;
}

// Hurwitz zeta sum_k (k + q)^-x by Euler-Maclaurin summation (Cephes' algorithm, as PyTorch).
__device__ inline double zeta(double x, double q) {
    // (2k)! / B_2k, k = 1..12
    const double A[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
                          -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
                          1.1646782814350067249e14, -4.5979787224074726105e15,
                          1.8152105401943546773e17, -7.1661652561756670113e18};
    if (x == 1) return kInf;
    if (x < 1) return kNan;
    if (q <= 0) {
        if (q == ::floor(q)) return kInf;
        if (x != ::floor(x)) return kNan;  // q^-x is not real
    }
    double s = ::pow(q, -x), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9) {
        i += 1;
        a += 1;
        b = ::pow(a, -x);
        s += b;
        if (::fabs(b / s) < kEps) return s;
    }
    const double w = a;
    s += b * w / (x - 1);
    s -= 0.5 * b;
    double aa = 1, k = 0;
    for (int j = 0; j < 12; ++j) {
        aa *= x + k;
        b /= w;
        const double t = aa * b / A[j];
        s += t;
        if (::fabs(t / s) < kEps) return s;
        k += 1;
        aa *= x + k;
        b /= w;
        k += 1;
    }
    return s;
}

__device__ inline double polygamma(double n, double x) {
    const long long k = (long long)n;
    if (k == 0) return digamma(x);
    if (k == 1) return trigamma(x);
    const double sign = (k % 2 == 1) ? 1.0 : -1.0;  // (-1)^(n+1)
    return sign * ::exp(::lgamma((double)k + 1)) * zeta((double)k + 1, x);
}

__device__ inline double mvlgamma(double x, double p) {
    double s = p * (p - 1) * 0.25 * 1.1447298858494002;  // log(pi)
    for (long long j = 0; j < (long long)p; ++j) s += ::lgamma(x - (double)j * 0.5);
    return s;
}

// Regularised incomplete gamma (the algorithm of kernels/temme_gamma.py, shared with the CPU's
// scalar_special.py). For a > 20 and |x - a| < 0.3 a, Temme's uniform expansion; elsewhere, for
// x < a + 1 the power series gives log P (and Q = -expm1 of it, accurate when P is near 1),
// else Lentz's continued fraction gives Q. Those two need O(sqrt(a)) terms near x = a, and
// lose all digits past a ~ 1e6 there.

// t - log(1 + t) without cancellation for small |t|: with u = t / (2 + t), log(1 + t) is
// 2 atanh(u) and t - 2u = t u, so it is t u - 2 (u^3 / 3 + u^5 / 5 + ...).
__device__ inline double t_minus_log1p(double t) {
    if (::fabs(t) > 0.3) return t - ::log1p(t);
    const double u = t / (2 + t), u2 = u * u;
    double power = u * u2, sum = 0;
    for (int j = 3; j < 61; j += 2) {
        const double term = power / j;
        sum += term;
        if (::fabs(term) <= ::fabs(sum) * kEps) break;
        power *= u2;
    }
    return t * u - 2 * sum;
}
// log Gamma*(a) = log Gamma(a) - (a - 1/2) log a + a - log(2 pi) / 2 by Stirling's series:
// six terms reach 1e-19 for a > 20.
__device__ inline double log_gamma_star(double a) {
    const double r = 1 / a, r2 = r * r;
    return r * (1.0 / 12 + r2 * (-1.0 / 360 + r2 * (1.0 / 1260 + r2 * (-1.0 / 1680 +
                r2 * (1.0 / 1188 + r2 * (-691.0 / 360360))))));
}
// log(x^a e^-x / Gamma(a)). For a > 20 it is -a (t - log(1 + t)) + log(sqrt(a / 2 pi) /
// Gamma*(a)) with t = (x - a) / a, which keeps its digits where a log x, x and lgamma(a) are
// each far larger than their difference.
__device__ inline double log_gamma_weight(double a, double x) {
    if (a <= kTemmeOrderMin) return a * ::log(x) - x - ::lgamma(a);
    return -a * t_minus_log1p((x - a) / a) + 0.5 * ::log(a / (2 * kPi)) - log_gamma_star(a);
}
// Q(a, x) = erfc(eta sqrt(a / 2)) / 2 + R (P = erfc(-eta sqrt(a / 2)) / 2 - R), with
// R = e^(-a mu) / sqrt(2 pi a) sum_k c_k(eta) a^-k, mu = t - log(1 + t), eta = sign(t) sqrt(2 mu).
__device__ inline double igamma_temme(double a, double x, bool upper) {
    const double mu = t_minus_log1p((x - a) / a);
    const double eta = ::copysign(::sqrt(2 * mu), x - a);
    const double inv_a = 1 / a;
    double sum = 0;
    for (int k = kTemmeTerms - 1; k >= 0; --k) {
        double ck = 0;
        for (int n = kTemmeTaylor - 1; n >= 0; --n) ck = ck * eta + kTemmeD[k][n];
        sum = sum * inv_a + ck;
    }
    const double r = ::exp(-a * mu) / (2.5066282746310002 * ::sqrt(a)) * sum;
    const double y = eta * ::sqrt(0.5 * a);
    return upper ? 0.5 * ::erfc(y) + r : 0.5 * ::erfc(-y) - r;
}
__device__ inline bool igamma_uses_temme(double a, double x) {
    return a > kTemmeOrderMin && ::fabs(x - a) < kTemmeRatioMax * a;
}
__device__ inline double igamma_log_series(double a, double x) {
    double ap = a, del = 1, sum = 1;
    for (int n = 0; n < 4000; ++n) {
        ap += 1;
        del *= x / ap;
        sum += del;
        if (::fabs(del) < ::fabs(sum) * kEps) break;
    }
    return log_gamma_weight(a, x) - ::log(a) + ::log(sum);
}
__device__ inline double igammac_fraction(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 4000; ++i) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (::fabs(del - 1) < kEps) break;
    }
    return ::exp(log_gamma_weight(a, x)) * h;
}
__device__ inline double igamma(double a, double x) {
    if (x < 0 || a < 0) return kNan;  // PyTorch's order: igamma(nan, 0) = 0
    if (a == 0) return x > 0 ? 1.0 : kNan;
    if (x == 0) return 0;
    if (isinf_(a)) return isinf_(x) ? kNan : 0.0;
    if (isinf_(x)) return 1;
    if (igamma_uses_temme(a, x)) return igamma_temme(a, x, false);
    if (x >= a + 1) return 1 - igammac_fraction(a, x);
    return ::exp(igamma_log_series(a, x));
}
__device__ inline double igammac(double a, double x) {
    if (x < 0 || a < 0) return kNan;
    if (a == 0) return x > 0 ? 0.0 : kNan;
    if (x == 0) return 1;
    if (isinf_(a)) return isinf_(x) ? kNan : 1.0;
    if (isinf_(x)) return 0;
    if (igamma_uses_temme(a, x)) return igamma_temme(a, x, true);
    if (x < a + 1) return -::expm1(igamma_log_series(a, x));
    return igammac_fraction(a, x);
}

// ---- Bessel functions ------------------------------------------------------------------------
// e^-|x| I0(x), e^-|x| I1(x): CUDA's I0/I1 in double up to where they overflow, then Hankel's
// asymptotic series (a handful of terms is exact there).
__device__ inline double bessel_ie_asymptotic(double x, double mu) {
    double term = 1, sum = 1;
    for (int k = 1; k < 12; ++k) {
        const double m = 2.0 * k - 1;
        term *= -(mu - m * m) / (k * 8.0 * x);
        sum += term;
    }
    return sum / ::sqrt(2 * kPi * x);
}
__device__ inline double i0e(double x) {
    const double ax = ::fabs(x);
    if (isnan_(x)) return x;
    if (ax > 700) return bessel_ie_asymptotic(ax, 0);
    return ::exp(-ax) * ::cyl_bessel_i0(ax);
}
__device__ inline double i1e(double x) {
    const double ax = ::fabs(x);
    if (isnan_(x)) return x;
    const double r = ax > 700 ? bessel_ie_asymptotic(ax, 4) : ::exp(-ax) * ::cyl_bessel_i1(ax);
    return x < 0 ? -r : r;
}
// K0(x) and K1(x) for 0 < x <= 2 from their series around 0 (A&S 9.6.13, 9.6.11).
__device__ inline void bessel_k_series(double x, double* k0, double* k1) {
    const double y = 0.25 * x * x, lg = ::log(0.5 * x);
    const double euler = 0.57721566490153286061;
    double t0 = 1, i0 = 1, s0 = 0;        // (y^k / k!^2), I0, sum of H_k terms
    double t1 = 1, i1 = 1, s1 = 0;        // (y^k / (k! (k+1)!)), I1 / (x/2), psi sums
    double hk = 0;                        // harmonic number H_k
    s1 = (-euler) + (1 - euler);          // psi(1) + psi(2) at k = 0
    for (int k = 1; k < 40; ++k) {
        t0 *= y / ((double)k * k);
        t1 *= y / ((double)k * (k + 1));
        hk += 1.0 / k;
        i0 += t0;
        i1 += t1;
        s0 += t0 * hk;
        s1 += t1 * (2 * hk + 1.0 / (k + 1) - 2 * euler);
        if (t0 < 1e-18 * i0 && t1 < 1e-18 * i1) break;
    }
    *k0 = -(lg + euler) * i0 + s0;
    *k1 = 1 / x + lg * (0.5 * x * i1) - 0.25 * x * s1;
}
// e^x K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt for x > 2: the trapezoidal rule
// converges geometrically fast for this integrand; a step of min(1/4, 1/(2 sqrt x)) (the peak
// narrows as 1/sqrt(x)) is exact to double precision, in about 20 terms.
__device__ inline double bessel_ke_integral(double x, double nu) {
    const double h = x < 4 ? 0.25 : 0.5 / ::sqrt(x);
    double sum = 0.5;
    for (int i = 1; i < 400; ++i) {
        const double t = i * h, s = ::sinh(0.5 * t);
        const double term = ::exp(-2 * x * s * s) * ::cosh(nu * t);
        sum += term;
        if (term < 1e-18 * sum) break;
    }
    return sum * h;
}
__device__ inline double k0e(double x) {
    if (isnan_(x) || x < 0) return kNan;
    if (isinf_(x)) return 0;
    if (x == 0) return kInf;
    if (x <= 2) {
        double k0, k1;
        bessel_k_series(x, &k0, &k1);
        return k0 * ::exp(x);
    }
    return bessel_ke_integral(x, 0);
}
__device__ inline double k1e(double x) {
    if (isnan_(x) || x < 0) return kNan;
    if (isinf_(x)) return 0;
    if (x == 0) return kInf;
    if (x <= 2) {
        double k0, k1;
        bessel_k_series(x, &k0, &k1);
        return k1 * ::exp(x);
    }
    return bessel_ke_integral(x, 1);
}
__device__ inline double k0(double x) {
    if (x > 2) return x > 710 ? 0.0 : bessel_ke_integral(x, 0) * ::exp(-x);
    if (isnan_(x) || x < 0) return kNan;
    if (x == 0) return kInf;
    double k0v, k1v;
    bessel_k_series(x, &k0v, &k1v);
    return k0v;
}
__device__ inline double k1(double x) {
    if (x > 2) return x > 710 ? 0.0 : bessel_ke_integral(x, 1) * ::exp(-x);
    if (isnan_(x) || x < 0) return kNan;
    if (x == 0) return kInf;
    double k0v, k1v;
    bessel_k_series(x, &k0v, &k1v);
    return k1v;
}

__device__ inline double spherical_j0(double x) {
    if (isinf_(x)) return 0;
    if (::fabs(x) < 0.5) {
        const double x2 = x * x;
        return 1 + x2 * (-1.0 / 6 + x2 * (1.0 / 120 + x2 * (-1.0 / 5040 + x2 * (
            1.0 / 362880 + x2 * (-1.0 / 39916800 + x2 / 6227020800.0)))));
    }
    return ::sin(x) / x;
}

// Airy Ai: Maclaurin series on [-8, 2], K_{1/3} (the integral above) beyond 2, and the
// oscillatory asymptotic expansion below -8.
__device__ inline double airy_ai(double x) {
    if (isnan_(x) || isinf_(x)) return kNan;  // PyTorch's answer at both infinities
    if (x > 2) {
        if (x > 104) return 0;
        const double z = 2.0 / 3 * x * ::sqrt(x);
        return ::sqrt(x / 3) / kPi * bessel_ke_integral(z, 1.0 / 3) * ::exp(-z);
    }
    if (x >= -8) {
        const double c1 = 0.355028053887817239, c2 = 0.258819403792806798;
        const double x3 = x * x * x;
        double f = 1, g = x, tf = 1, tg = x;
        for (int k = 1; k < 200; ++k) {
            tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
            tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
            f += tf;
            g += tg;
            if (::fabs(tf) < 1e-17 * ::fabs(f) && ::fabs(tg) < 1e-17 * (::fabs(g) + 1e-300))
                break;
        }
        return c1 * f - c2 * g;
    }
    const double ax = -x, z = 2.0 / 3 * ax * ::sqrt(ax);
    double u = 1, p = 1, q = 0, zk = 1;  // p: even terms, q: odd terms
    for (int k = 1; k < 30; ++k) {
        u *= (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216.0 * k);
        zk /= z;
        const double t = u * zk;
        if (k % 2 == 1) q += (k % 4 == 1 ? t : -t);
        else p += (k % 4 == 2 ? -t : t);
        if (t < 1e-17) break;
    }
    const double th = z + 0.25 * kPi;
    return (::sin(th) * p - ::cos(th) * q) / (::sqrt(kPi) * ::sqrt(::sqrt(ax)));
}

// ---- normal distribution, entropy ----------------------------------------------------------
__device__ inline double log_ndtr(double x) {
    const double t = x * 0.70710678118654752440;
    if (x < -1) return ::log(::erfcx(-t) / 2) - t * t;
    return ::log1p(-::erfc(t) / 2);
}
__device__ inline double entr(double x) {
    if (isnan_(x)) return x;
    if (x > 0) return -x * ::log(x);
    if (x == 0) return 0;
    return -kInf;
}
__device__ inline double xlog1py(double x, double y) {
    if (isnan_(y)) return kNan;
    if (x == 0) return 0;
    return x * ::log1p(y);
}

// ---- orthogonal polynomials: PyTorch's edge cases and closed forms, then the recurrences --
__device__ inline double cheb_t(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
    if (n > 6 && ::fabs(x) < 1) return ::cos((double)n * ::acos(x));
    if (n == 0) return 1;
    double p = 1, q = x, r = q;
    for (long long k = 2; k <= n; ++k) { r = (x + x) * q - p; p = q; q = r; }
    return r;
}
__device__ inline double cheb_u(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? n + 1.0 : -(n + 1.0);
    if (n > 8 && ::fabs(x) < 1) {
        const double t = ::acos(x);
        if (::sin(t) != 0) return ::sin((n + 1.0) * t) / ::sin(t);
        return (n + 1.0) * ::cos((n + 1.0) * t) / x;
    }
    if (n == 0) return 1;
    double p = 1, q = x + x, r = q;
    for (long long k = 2; k <= n; ++k) { r = (x + x) * q - p; p = q; q = r; }
    return r;
}
__device__ inline double cheb_v(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (::fabs(x) == 1) {
        if (x > 0) return 1;
        return n % 2 == 0 ? n + n + 1.0 : -(n + n + 1.0);
    }
    if (n > 8 && ::fabs(x) < 1) {
        const double t = ::acos(x);
        if (::sin(t / 2) != 1) return ::cos((n + 0.5) * t) / ::cos(t / 2);
        return n % 2 == 0 ? n + n + 1.0 : -(n + n + 1.0);
    }
    if (n == 0) return 1;
    double p = 1, q = x + x - 1, r = q;
    for (long long k = 2; k <= n; ++k) { r = (x + x) * q - p; p = q; q = r; }
    return r;
}
__device__ inline double cheb_w(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (::fabs(x) == 1) {
        if (x > 0) return n + n + 1.0;
        return n % 2 == 0 ? 1.0 : -1.0;
    }
    if (n > 8 && ::fabs(x) < 1) {
        const double t = ::acos(x);
        if (::cos(t / 2) != 1) return ::sin((n + 0.5) * t) / ::sin(t / 2);
        if (x > 0) return n + n + 1.0;
        return n % 2 == 0 ? 1.0 : -1.0;
    }
    if (n == 0) return 1;
    double p = 1, q = x + x + 1, r = q;
    for (long long k = 2; k <= n; ++k) { r = (x + x) * q - p; p = q; q = r; }
    return r;
}
__device__ inline double hermite_h(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (n == 0) return 1;
    double p = 1, q = x + x;
    for (long long k = 2; k <= n; ++k) {
        const double r = (x + x) * q - 2.0 * (k - 1) * p;
        p = q;
        q = r;
    }
    return q;
}
__device__ inline double hermite_he(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (n == 0) return 1;
    double p = 1, q = x;
    for (long long k = 2; k <= n; ++k) {
        const double r = x * q - (k - 1.0) * p;
        p = q;
        q = r;
    }
    return q;
}
__device__ inline double laguerre_l(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (::fabs(x) == 0 || n == 0) return 1;
    double p = 1, q = 1 - x;
    for (long long k = 1; k < n; ++k) {
        const double r = ((k + k + 1.0 - x) * q - k * p) / (k + 1.0);
        p = q;
        q = r;
    }
    return q;
}
__device__ inline double legendre_p(double x, double nf) {
    const long long n = (long long)nf;
    if (n < 0) return 0;
    if (::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
    if (n == 0) return 1;
    double p = 1, q = x;
    for (long long k = 1; k < n; ++k) {
        const double r = ((k + k + 1.0) * x * q - k * p) / (k + 1.0);
        p = q;
        q = r;
    }
    return q;
}

#undef kInf
#undef kNan
}  // namespace sp

// ---- the vocabulary: float operands keep float results (computed in double unless CUDA has
// the float function); integer compute never reaches these (the ops' results are float) -----
#define GT_SP_CUDA1(NAME, FN)                                                      \
    __device__ __forceinline__ float NAME(float x) { return ::FN##f(x); }          \
    __device__ __forceinline__ double NAME(double x) { return ::FN(x); }
GT_SP_CUDA1(lgamma, lgamma) GT_SP_CUDA1(erfc, erfc) GT_SP_CUDA1(erfinv, erfinv)
GT_SP_CUDA1(erfcx, erfcx) GT_SP_CUDA1(ndtr, normcdf) GT_SP_CUDA1(ndtri, normcdfinv)
#undef GT_SP_CUDA1
// Bessel J/Y: NaN at +-inf, as PyTorch (CUDA's and libm's give 0).
#define GT_SP_BESSEL(NAME, FN)                                                             \
    __device__ __forceinline__ float NAME(float x) {                                       \
        return sp::isinf_(x) ? x - x : ::FN##f(x);                                              \
    }                                                                                      \
    __device__ __forceinline__ double NAME(double x) { return sp::isinf_(x) ? x - x : ::FN(x); }
GT_SP_BESSEL(bessel_j0, j0) GT_SP_BESSEL(bessel_j1, j1) GT_SP_BESSEL(bessel_y0, y0)
GT_SP_BESSEL(bessel_y1, y1)
#undef GT_SP_BESSEL
// I0 and I1 are even and odd; CUDA's float versions lose range early, so both go through double.
// Infinite arguments give NaN, as PyTorch's (its Chebyshev evaluation) and SciPy's i0/i1 do;
// CUDA's cyl_bessel_i0/i1 return inf there (seen on an H200).
__device__ __forceinline__ double bessel_i0(double x) {
    return sp::isinf_(x) ? x - x : ::cyl_bessel_i0(::fabs(x));
}
__device__ __forceinline__ float bessel_i0(float x) { return (float)bessel_i0((double)x); }
__device__ __forceinline__ double bessel_i1(double x) {
    const double r = sp::isinf_(x) ? x - x : ::cyl_bessel_i1(::fabs(x));
    return x < 0 ? -r : r;
}
__device__ __forceinline__ float bessel_i1(float x) { return (float)bessel_i1((double)x); }

#define GT_SP_OWN1(NAME, FN)                                                                 \
    __device__ __forceinline__ double NAME(double x) { return sp::FN(x); }                   \
    __device__ __forceinline__ float NAME(float x) { return (float)sp::FN((double)x); }
GT_SP_OWN1(digamma, digamma) GT_SP_OWN1(trigamma, trigamma) GT_SP_OWN1(bessel_i0e, i0e)
GT_SP_OWN1(bessel_i1e, i1e) GT_SP_OWN1(bessel_k0, k0) GT_SP_OWN1(bessel_k0e, k0e)
GT_SP_OWN1(bessel_k1, k1) GT_SP_OWN1(bessel_k1e, k1e) GT_SP_OWN1(spherical_j0, spherical_j0)
GT_SP_OWN1(airy_ai, airy_ai) GT_SP_OWN1(log_ndtr, log_ndtr) GT_SP_OWN1(entr, entr)
#undef GT_SP_OWN1
#define GT_SP_OWN2(NAME)                                                                     \
    __device__ __forceinline__ double NAME(double x, double y) { return sp::NAME(x, y); }    \
    __device__ __forceinline__ float NAME(float x, float y) {                                \
        return (float)sp::NAME((double)x, (double)y);                                        \
    }
GT_SP_OWN2(zeta) GT_SP_OWN2(polygamma) GT_SP_OWN2(mvlgamma) GT_SP_OWN2(igamma)
GT_SP_OWN2(igammac) GT_SP_OWN2(xlog1py) GT_SP_OWN2(cheb_t) GT_SP_OWN2(cheb_u) GT_SP_OWN2(cheb_v)
GT_SP_OWN2(cheb_w) GT_SP_OWN2(hermite_h) GT_SP_OWN2(hermite_he) GT_SP_OWN2(laguerre_l)
GT_SP_OWN2(legendre_p)
#undef GT_SP_OWN2

}  // namespace gt

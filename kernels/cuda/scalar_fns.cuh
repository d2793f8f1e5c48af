// The scalar vocabulary of elementwise expressions, as CUDA __device__ functions.
//
// Mirrors kernels/cpu/scalar_fns.py (the Numba vocabulary) name for name, so one op expression
// renders to the same semantics on both backends: PyTorch's answers where C leaves a case
// undefined (INT_MIN / -1, shifts out of [0, 64), integer division by zero gives 0 as Numba's
// numpy error model does), sign(nan) = 0, relu keeping NaN and -0.0, nan_to_num, predicates on
// integers. Real types here (bool, 8/16/32/64-bit ints, float, double; float16/bfloat16
// operands are computed in float by the generated kernels); complex.cuh, included at the end,
// overloads the vocabulary for gt::complex<float> / gt::complex<double>.
//
// Integer results of +, -, *, shifts and powers wrap (the kernels compute them in 64 bits or in
// C's promoted int and truncate on store, which keeps the same low bits as Numba's int64).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace gt {

// ---- type traits (no <type_traits>: NVRTC has no standard library) -------------------------
template <class T> struct is_float { static constexpr bool value = false; };
template <> struct is_float<float> { static constexpr bool value = true; };
template <> struct is_float<double> { static constexpr bool value = true; };
template <class T> struct is_signed_int { static constexpr bool value = T(-1) < T(0); };
template <> struct is_signed_int<float> { static constexpr bool value = false; };
template <> struct is_signed_int<double> { static constexpr bool value = false; };
template <class T> struct is_bool { static constexpr bool value = false; };
template <> struct is_bool<bool> { static constexpr bool value = true; };
template <class T> struct is_uint8 { static constexpr bool value = false; };
template <> struct is_uint8<unsigned char> { static constexpr bool value = true; };
template <class T> struct complex;  // complex.cuh
template <class T> struct is_complex { static constexpr bool value = false; };
template <class T> struct is_complex<complex<T>> { static constexpr bool value = true; };

// ---- loads and stores: float16/bfloat16 travel as float -----------------------------------
template <class C, class T>
__device__ __forceinline__ C load(T x) { return static_cast<C>(x); }
template <class C>
__device__ __forceinline__ C load(__half x) { return static_cast<C>(__half2float(x)); }
template <class C>
__device__ __forceinline__ C load(__nv_bfloat16 x) {
    return static_cast<C>(__bfloat162float(x));
}
// Float to integer stores saturate (NaN gives 0), as PTX's cvt.rzi does on the GPU; a plain C
// cast is undefined out of range. Numba's (x86) conversions differ there: such results are
// outside the ops' meaningful domain and are not part of the shared semantics.
template <class O, class V>
__device__ __forceinline__ O store(V v) {
    if constexpr (is_float<V>::value && is_uint8<O>::value) {
        // uint8 through int64, as PyTorch converts it on either device: -2.0 wraps to 254.
        if (v != v) return O(0);
        if (v >= (V)9.2233720368547758e18 || v <= (V)-9.2233720368547758e18) return O(0);
        return static_cast<O>(static_cast<long long>(v));
    } else if constexpr (is_float<V>::value && !is_float<O>::value && !is_bool<O>::value &&
                         !is_complex<O>::value) {
        if (v != v) return O(0);
        constexpr bool sgn = O(-1) < O(0);
        constexpr double top = (double)(1ULL << (8 * sizeof(O) - (sgn ? 1 : 0)));  // max + 1
        if (v >= (V)top) return static_cast<O>(sgn ? (1ULL << (8 * sizeof(O) - 1)) - 1 : ~0ULL);
        if (v <= (sgn ? -(V)top : V(-1))) return sgn ? static_cast<O>(1ULL << (8 * sizeof(O) - 1))
                                                     : O(0);
    }
    return static_cast<O>(v);
}
template <>
__device__ __forceinline__ __half store<__half, float>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __half store<__half, double>(double v) {
    return __float2half_rn((float)v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, float>(float v) {
    return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, double>(double v) {
    return __float2bfloat16_rn((float)v);
}
#define GT_STORE_VIA_FLOAT(H, CONV, V) \
    template <> __device__ __forceinline__ H store<H, V>(V v) { return CONV((float)v); }
#define GT_STORE_INTS(H, CONV)                                                     \
    GT_STORE_VIA_FLOAT(H, CONV, bool) GT_STORE_VIA_FLOAT(H, CONV, int)             \
    GT_STORE_VIA_FLOAT(H, CONV, long long) GT_STORE_VIA_FLOAT(H, CONV, unsigned char) \
    GT_STORE_VIA_FLOAT(H, CONV, signed char) GT_STORE_VIA_FLOAT(H, CONV, short)      \
    GT_STORE_VIA_FLOAT(H, CONV, unsigned long long)
GT_STORE_INTS(__half, __float2half_rn)
GT_STORE_INTS(__nv_bfloat16, __float2bfloat16_rn)
#undef GT_STORE_INTS
#undef GT_STORE_VIA_FLOAT

// ---- libm: float and double overloads; integers and bool compute in double (as NumPy does) --
#define GT_MATH1(NAME, FN)                                                          \
    __device__ __forceinline__ float NAME(float x) { return ::FN##f(x); }          \
    __device__ __forceinline__ double NAME(double x) { return ::FN(x); }           \
    template <class T> __device__ __forceinline__ double NAME(T x) { return ::FN((double)x); }
GT_MATH1(exp, exp) GT_MATH1(exp2, exp2) GT_MATH1(expm1, expm1) GT_MATH1(log, log)
GT_MATH1(log2, log2) GT_MATH1(log10, log10) GT_MATH1(log1p, log1p) GT_MATH1(sqrt, sqrt)
GT_MATH1(sin, sin) GT_MATH1(cos, cos) GT_MATH1(tan, tan) GT_MATH1(asin, asin)
GT_MATH1(acos, acos) GT_MATH1(atan, atan) GT_MATH1(sinh, sinh) GT_MATH1(cosh, cosh)
GT_MATH1(tanh, tanh) GT_MATH1(floor, floor) GT_MATH1(ceil, ceil) GT_MATH1(trunc, trunc)
GT_MATH1(rint, rint) GT_MATH1(erf, erf) GT_MATH1(asinh, asinh) GT_MATH1(acosh, acosh)
GT_MATH1(atanh, atanh)
#undef GT_MATH1
__device__ __forceinline__ float atan2(float y, float x) { return ::atan2f(y, x); }
__device__ __forceinline__ double atan2(double y, double x) { return ::atan2(y, x); }
template <class T> __device__ __forceinline__ double atan2(T y, T x) {
    return ::atan2((double)y, (double)x);
}
#define GT_MATH2(NAME, FN)                                                            \
    __device__ __forceinline__ float NAME(float a, float b) { return ::FN##f(a, b); }    \
    __device__ __forceinline__ double NAME(double a, double b) { return ::FN(a, b); }    \
    template <class T> __device__ __forceinline__ double NAME(T a, T b) {               \
        return ::FN((double)a, (double)b);                                              \
    }
GT_MATH2(hypot, hypot) GT_MATH2(copysign, copysign)
#undef GT_MATH2
__device__ __forceinline__ float fast_exp(float x) { return ::expf(x); }
__device__ __forceinline__ double fast_exp(double x) { return ::exp(x); }

// ---- predicates ----------------------------------------------------------------------------
template <class T> __device__ __forceinline__ bool isnan(T a) {
    if constexpr (is_float<T>::value) return a != a;
    else return false;
}
template <class T> __device__ __forceinline__ bool isinf(T a) {
    if constexpr (is_float<T>::value) return a - a != a - a && a == a;
    else return false;
}
template <class T> __device__ __forceinline__ bool isfinite(T a) {
    if constexpr (is_float<T>::value) return a - a == a - a;
    else return true;
}
template <class T> __device__ __forceinline__ bool signbit(T a) {
    if constexpr (is_float<T>::value) {
        if constexpr (sizeof(T) == 4) return __float_as_int(a) < 0;
        else return __double_as_longlong(a) < 0;
    }
    else return a < 0;
}
template <class T> __device__ __forceinline__ T real(T a) { return a; }
template <class T> __device__ __forceinline__ T conj(T a) { return a; }
template <class T> __device__ __forceinline__ T abs2(T a) { return a * a; }  // |a| ** 2

// ---- sign, abs, bits -----------------------------------------------------------------------
template <class T> __device__ __forceinline__ T bitnot(T a) {
    if constexpr (is_bool<T>::value) return !a;
    else return static_cast<T>(~a);
}
// (0 < a) - (a < 0), as PyTorch: sign(nan) = 0, sign(-0.0) = +0.
template <class T> __device__ __forceinline__ T sign(T a) {
    if constexpr (is_bool<T>::value) return a;
    else return static_cast<T>((int)(a > 0) - (int)(a < 0));
}
// Python's abs: fabs for floats (clears the sign of -0.0 and NaN), wrapping for INT_MIN.
__device__ __forceinline__ float pyabs(float a) { return ::fabsf(a); }
__device__ __forceinline__ double pyabs(double a) { return ::fabs(a); }
template <class T> __device__ __forceinline__ T pyabs(T a) {
    if constexpr (is_bool<T>::value) return a;
    else return a < 0 ? static_cast<T>(0ULL - (unsigned long long)a) : a;
}
// Shifts outside [0, 64) are undefined in C; PyTorch gives 0 (left) or the sign bits (right).
// The 64-bit result is truncated on store, matching a narrower type's own width.
template <class A, class B> __device__ __forceinline__ long long lshift(A a, B b) {
    return (b >= 0 && b < 64) ? (long long)((unsigned long long)(long long)a << (int)b) : 0LL;
}
template <class A, class B> __device__ __forceinline__ long long rshift(A a, B b) {
    return (b >= 0 && b < 64) ? ((long long)a >> (int)b) : ((long long)a >> 63);
}

// ---- powers ----------------------------------------------------------------------------------
__device__ __forceinline__ float ipow(float a, float b) { return ::powf(a, b); }
__device__ __forceinline__ double ipow(double a, double b) { return ::pow(a, b); }
// Integers: exponentiation by squaring in 64 bits with wrap-around, like C++ integer pow.
template <class T> __device__ __forceinline__ long long ipow(T a, T b) {
    long long e = (long long)b;
    long long x = (long long)a;
    if (e < 0) {
        if (x == 1) return 1;
        if (x == -1) return (e % 2 == 0) ? 1 : -1;
        return 0;
    }
    unsigned long long result = 1, base = (unsigned long long)x;
    while (e) {
        if (e & 1) result *= base;
        base *= base;
        e >>= 1;
    }
    return (long long)result;
}
// pow's Tensor-Scalar and Scalar-Tensor forms: no special cases in real dtypes (complex.cuh's)
template <class T> __device__ __forceinline__ auto ipow_scalar(T a, T b) { return ipow(a, b); }
template <class T> __device__ __forceinline__ auto ipow_scalar_base(T a, T b) {
    return ipow(a, b);
}

// ---- division ------------------------------------------------------------------------------
// Integer division by zero is rejected by the frontend; kernels return 0 (Numba's numpy error
// model) instead of trapping.
template <class A, class B> __device__ __forceinline__ auto truediv(A a, B b) {
    if constexpr (is_float<A>::value || is_float<B>::value) return a / b;
    else return (double)a / (double)b;
}
__device__ __forceinline__ float fmod_(float a, float b) { return ::fmodf(a, b); }
__device__ __forceinline__ double fmod_(double a, double b) { return ::fmod(a, b); }
// Python's float floor division (CPython's algorithm, as Numba implements it); x / 0 gives
// a / b (inf or nan).
template <class T> __device__ __forceinline__ T py_float_floordiv(T a, T b) {
    if (b == 0) return a / b;
    T m = fmod_(a, b);
    T div = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) div -= 1;
    if (div != 0) {
        T fd = floor(div);
        if (div - fd > T(0.5)) fd += 1;
        return fd;
    }
    return ::copysign(T(0), a / b);
}
template <class T> __device__ __forceinline__ T floordiv(T a, T b) {
    if constexpr (is_float<T>::value) {
        return py_float_floordiv(a, b);
    } else {
        if (b == 0) return 0;
        if constexpr (is_signed_int<T>::value) {
            if (b == T(-1)) return static_cast<T>(0ULL - (unsigned long long)a);  // INT_MIN wraps
        }
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
        return q;
    }
}
template <class T> __device__ __forceinline__ T tdiv(T a, T b) {
    if constexpr (is_float<T>::value) {
        return trunc(a / b);
    } else {
        if (b == 0) return 0;
        if constexpr (is_signed_int<T>::value) {
            if (b == T(-1)) return static_cast<T>(0ULL - (unsigned long long)a);
        }
        return a / b;
    }
}
template <class T> __device__ __forceinline__ T fmod(T a, T b) {
    if constexpr (is_float<T>::value) {
        return fmod_(a, b);
    } else {
        if (b == 0) return 0;
        if constexpr (is_signed_int<T>::value) {
            if (b == T(-1)) return 0;
        }
        return a % b;  // C's truncated remainder
    }
}
// PyTorch's remainder: floats take fmod moved to the divisor's sign; ints Python's floor mod.
template <class T> __device__ __forceinline__ T mod(T a, T b) {
    if constexpr (is_float<T>::value) {
        T r = fmod_(a, b);
        if (r != 0 && ((b < 0) != (r < 0))) r += b;
        return r;
    } else {
        if (b == 0) return 0;
        if constexpr (is_signed_int<T>::value) {
            if (b == T(-1)) return 0;
        }
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
}
// Python's % operator: as mod, but a zero result takes the divisor's sign (floats).
template <class T> __device__ __forceinline__ T pymod(T a, T b) {
    if constexpr (is_float<T>::value) {
        if (b == 0) return fmod_(a, b);
        T r = mod(a, b);
        return r == 0 ? ::copysign(T(0), b) : r;
    } else {
        return mod(a, b);
    }
}

// ---- min/max (NaN-propagating; mixed operand types take the common type) --------------------
template <class A, class B> __device__ __forceinline__ auto maximum(A a, B b) {
    typedef decltype(a + b) R;
    if (isnan(a)) return static_cast<R>(a);
    if (isnan(b)) return static_cast<R>(b);
    return a >= b ? static_cast<R>(a) : static_cast<R>(b);
}
template <class A, class B> __device__ __forceinline__ auto minimum(A a, B b) {
    typedef decltype(a + b) R;
    if (isnan(a)) return static_cast<R>(a);
    if (isnan(b)) return static_cast<R>(b);
    return a <= b ? static_cast<R>(a) : static_cast<R>(b);
}
// log(exp(a) + exp(b)) without overflow; equal operands (infinities included) give a + log 2.
template <class T> __device__ __forceinline__ auto logaddexp(T a, T b) {
    typedef decltype(maximum(a, b) + log1p(exp(-pyabs(a - b)))) R;
    return a == b ? static_cast<R>(a + 0.6931471805599453)
                  : static_cast<R>(maximum(a, b) + log1p(exp(-pyabs(a - b))));
}
// Python's min/max builtins: the first argument unless the second compares strictly better.
template <class A, class B> __device__ __forceinline__ auto pymin(A a, B b) {
    typedef decltype(a + b) R;
    return b < a ? static_cast<R>(b) : static_cast<R>(a);
}
template <class A, class B> __device__ __forceinline__ auto pymax(A a, B b) {
    typedef decltype(a + b) R;
    return b > a ? static_cast<R>(b) : static_cast<R>(a);
}

// ---- rounding --------------------------------------------------------------------------------
// Scales in the input's own precision, like PyTorch; integers are already round.
template <class T, class D> __device__ __forceinline__ T round_decimals(T a, D decimals) {
    if constexpr (is_float<T>::value) {
        if (decimals == 0) return rint(a);
        if (decimals > 0) {
            T p = static_cast<T>(::pow(10.0, (double)decimals));
            return rint(a * p) / p;
        }
        T p = static_cast<T>(::pow(10.0, -(double)decimals));
        return rint(a / p) * p;
    } else {
        return a;
    }
}

// ---- activations and special functions ------------------------------------------------------
// 0 for negatives, else the input: keeps NaN and -0.0.
template <class T> __device__ __forceinline__ T relu(T a) { return a < 0 ? T(0) : a; }
// a * 2**b exactly, rounded once (C's ldexp); b holds an integer the caller clamped (the
// clamp here only keeps the conversion defined for any value).
__device__ __forceinline__ int ldexp_exponent(double b) {
    return b != b ? 0 : (int)(b < -2200.0 ? -2200.0 : b > 2200.0 ? 2200.0 : b);
}
__device__ __forceinline__ float ldexp_int(float a, float b) {
    return ::ldexpf(a, ldexp_exponent(b));
}
__device__ __forceinline__ double ldexp_int(double a, double b) {
    return ::ldexp(a, ldexp_exponent(b));
}
template <class T> __device__ __forceinline__ auto rsqrt(T a) {
    auto s = sqrt(a);
    return decltype(s)(1) / s;
}
template <class T> __device__ __forceinline__ auto sigmoid(T a) {
    auto e = exp(-a);
    typedef decltype(e) R;
    return R(1) / (R(1) + e);
}
template <class T, class P> __device__ __forceinline__ auto softplus(T a, P beta, P threshold) {
    typedef decltype(exp(a * beta)) R;
    return a * beta > threshold ? static_cast<R>(a) : static_cast<R>(log1p(exp(a * beta)) / beta);
}
template <class T> __device__ __forceinline__ auto gelu_erf(T a) {
    typedef decltype(erf(a)) R;
    return R(0.5) * a * (R(1) + erf(a * R(0.7071067811865476)));
}
template <class T> __device__ __forceinline__ auto gelu_tanh(T a) {
    typedef decltype(tanh(a)) R;
    return R(0.5) * a * (R(1) + tanh(R(0.7978845608028654) * (a + R(0.044715) * a * a * a)));
}
template <class T> __device__ __forceinline__ auto gelu_erf_grad(T a) {
    typedef decltype(erf(a)) R;
    R cdf = R(0.5) * (R(1) + erf(a * R(0.7071067811865476)));
    return cdf + a * R(0.3989422804014327) * exp(R(-0.5) * a * a);
}
template <class T> __device__ __forceinline__ auto gelu_tanh_grad(T a) {
    typedef decltype(tanh(a)) R;
    R inner = R(0.7978845608028654) * (a + R(0.044715) * a * a * a);
    R t = tanh(inner);
    R d_inner = R(0.7978845608028654) * (R(1) + R(3.0 * 0.044715) * a * a);
    // Where tanh saturates the second term is 0 for finite a, even when a^3 overflows float
    // (inf * 0), as it is in double.
    R s = R(1) - t * t;
    return R(0.5) * (R(1) + t) +
           ((s == R(0) && isfinite(a)) ? R(0) : R(0.5) * a * s * d_inner);
}
template <class T, class P> __device__ __forceinline__ auto softplus_grad(T a, P beta,
                                                                          P threshold) {
    typedef decltype(exp(a * beta)) R;
    return a * beta > threshold ? R(1) : R(1) / (R(1) + exp(-a * beta));
}
template <class T, class P> __device__ __forceinline__ T nan_to_num(T a, P nan, P posinf,
                                                                    P neginf) {
    if (isnan(a)) return static_cast<T>(nan);
    if (isinf(a)) return static_cast<T>(a > 0 ? posinf : neginf);
    return a;
}

// ---- gcd, lcm, nextafter, angle, frexp ---------------------------------------------------------
// gcd/lcm follow PyTorch's calc_gcd in the compute type's own width, passed as `bits` (a
// signed type's width, 0 for uint8): operands (loaded wide, each from its own dtype) are
// converted into it, std::abs of INT_MIN wraps to INT_MIN and the loop takes C's truncated
// remainder.
__device__ __forceinline__ long long sext_bits(long long x, long long bits) {
    if (bits <= 0 || bits >= 64) return x;
    const unsigned long long m = 1ULL << (bits - 1);
    return (long long)((((unsigned long long)x & ((m << 1) - 1)) ^ m) - m);
}
__device__ __forceinline__ long long in_type_bits(long long x, long long bits) {
    if (bits == 0) return x & 255;
    return sext_bits(x, bits);
}
__device__ __forceinline__ long long wrap_abs(long long x) {
    return x < 0 ? (long long)(0ULL - (unsigned long long)x) : x;
}
__device__ __forceinline__ long long gcd_bits(long long x, long long y, long long bits) {
    x = sext_bits(wrap_abs(in_type_bits(x, bits)), bits);
    y = sext_bits(wrap_abs(in_type_bits(y, bits)), bits);
    while (x != 0) {
        const long long r = (x == -1) ? 0 : y % x;
        y = x;
        x = r;
    }
    return y;
}
template <class T, class P> __device__ __forceinline__ long long gcd(T a, T b, P bits) {
    return gcd_bits((long long)a, (long long)b, (long long)bits);
}
// |a / gcd * b|: operands narrower than int compute in C's int (no overflow) and truncate on
// store; int32 and int64 wrap before the abs.
template <class T, class P> __device__ __forceinline__ long long lcm(T a, T b, P bits) {
    const long long n = (long long)bits;
    const long long x = in_type_bits((long long)a, n), y = in_type_bits((long long)b, n);
    const long long g = gcd_bits(x, y, n);
    if (g == 0) return 0;
    const long long q = (g == -1) ? (long long)(0ULL - (unsigned long long)x) : x / g;
    long long r = (long long)((unsigned long long)q * (unsigned long long)y);
    if (n >= 32) r = sext_bits(r, n);
    return wrap_abs(r);
}
__device__ __forceinline__ float nextafter(float a, float b) { return ::nextafterf(a, b); }
__device__ __forceinline__ double nextafter(double a, double b) { return ::nextafter(a, b); }
// Real angle: pi for negatives, 0 otherwise, NaN kept (PyTorch's angle_impl).
template <class T> __device__ __forceinline__ T angle(T a) {
    return a != a ? a : (a < T(0) ? T(3.141592653589793) : T(0));
}
// C's frexp; infinities and NaN come back as they are, with exponent 0.
__device__ __forceinline__ float frexp_mantissa(float a) {
    int e;
    return isfinite(a) ? ::frexpf(a, &e) : a;
}
__device__ __forceinline__ double frexp_mantissa(double a) {
    int e;
    return isfinite(a) ? ::frexp(a, &e) : a;
}
template <class T> __device__ __forceinline__ int frexp_exponent(T a) {
    int e = 0;
    if (isfinite(a)) (void)::frexp((double)a, &e);  // float values: the same exponent
    return e;
}

}  // namespace gt

#include "special_fns.cuh"  // torch.special's functions
#include "complex.cuh"

// Dtype conversion of a contiguous run of elements on the device (storage casts, tensor.to(dtype)).
//
// One grid-stride loop per (source, destination) dtype pair, instantiated by kernels/cuda/cast.py.
// The conversions are C's, element by element, which is what the CPU backend's NumPy cast does:
// integers wrap, floats round to nearest even, bool is "!= 0", float -> uint8 goes through int64
// (so negative values wrap, as in PyTorch on either device), float -> other integers is the
// hardware's truncating conversion (its out-of-range results are undefined in C: the emulator
// gets x86's answers, as NumPy does, and a GPU its saturating ones, as PyTorch on CUDA does).
// float16/bfloat16 travel as float, except double -> float16, which is rounded once (like NumPy)
// through a round-to-odd float. Complex dtypes are pairs of float/double components: complex ->
// real keeps the real part, real -> complex sets a zero imaginary part, complex -> bool tests
// both parts.
#include "common.cuh"
#include "scalar_fns.cuh"

namespace gt_cast {

template <class A, class B> struct same { static constexpr bool value = false; };
template <class A> struct same<A, A> { static constexpr bool value = true; };
template <class T> struct is_half { static constexpr bool value = false; };
template <> struct is_half<__half> { static constexpr bool value = true; };
template <> struct is_half<__nv_bfloat16> { static constexpr bool value = true; };

// double -> float16 with a single rounding: round to odd into float (24 bits is more than
// float16's 11 + 2), then to nearest even into float16.
__device__ __forceinline__ __half double_to_half(double d) {
    float f = (float)d;
    if (d == d && (double)f != d) {
        unsigned u = __float_as_uint(f);
        bool away = f > 0.0f ? (double)f > d : (double)f < d;  // rounded away from zero
        if (away) u -= 1u;                                      // one ulp back toward zero
        f = __uint_as_float(u | 1u);                            // sticky bit: inexact
    }
    return __float2half_rn(f);
}

// float -> uint16/32/64 (PyTorch's limited unsigned dtypes): on a GPU the hardware's saturating
// conversion, as PyTorch on CUDA; in the emulator x86's vectorised answers, as NumPy gives them
// on the CPU: the truncating int32/int64 conversion, whose out-of-range result is the minimum,
// with 2**31 (2**63) taken off first for values past the signed range.
template <class D>
__device__ __forceinline__ D float_to_unsigned(double x) {
#ifdef __CUDA_ARCH__
    return static_cast<D>(x);
#else
    auto cvt32 = [](double y) -> unsigned {
        return y > -2147483649.0 && y < 2147483648.0 ? (unsigned)(int)y : 0x80000000u;
    };
    auto cvt64 = [](double y) -> unsigned long long {
        return y >= -9223372036854775808.0 && y < 9223372036854775808.0
                   ? (unsigned long long)(long long)y : 0x8000000000000000ull;
    };
    if constexpr (sizeof(D) == 2) {
        return static_cast<D>(cvt32(x));
    } else if constexpr (sizeof(D) == 4) {
        return x >= 2147483648.0 ? cvt32(x - 2147483648.0) ^ 0x80000000u : cvt32(x);
    } else {
        return x >= 9223372036854775808.0
                   ? cvt64(x - 9223372036854775808.0) ^ 0x8000000000000000ull : cvt64(x);
    }
#endif
}

template <class D, class S>
__device__ __forceinline__ D conv(S v) {
    if constexpr (gt::is_bool<D>::value) {
        if constexpr (is_half<S>::value) {
            return gt::load<float>(v) != 0.0f;
        } else {
            return v != S(0);
        }
    } else if constexpr (same<D, __half>::value) {
        if constexpr (same<S, __half>::value) {
            return v;
        } else if constexpr (same<S, double>::value) {
            return double_to_half(v);
        } else {
            return __float2half_rn(gt::load<float>(v));
        }
    } else if constexpr (same<D, __nv_bfloat16>::value) {
        if constexpr (same<S, __nv_bfloat16>::value) {
            return v;
        } else {
            return __float2bfloat16_rn(gt::load<float>(v));
        }
    } else if constexpr (same<D, unsigned char>::value &&
                         (is_half<S>::value || gt::is_float<S>::value)) {
        // Through int64 as PyTorch does (static_cast_with_inter_type), so -2.0 becomes 254 on
        // the GPU as on the CPU; a direct conversion would saturate to 0 on the GPU.
        return static_cast<unsigned char>(static_cast<long long>(gt::load<double>(v)));
    } else if constexpr ((same<D, unsigned short>::value || same<D, unsigned int>::value ||
                          same<D, unsigned long long>::value) &&
                         (gt::is_float<S>::value || same<S, __nv_bfloat16>::value)) {
        // (a float16 source takes the scalar conversion below, as NumPy's half loop does)
        return float_to_unsigned<D>(gt::load<double>(v));
    } else if constexpr (is_half<S>::value) {
        return static_cast<D>(gt::load<float>(v));
    } else {
        return static_cast<D>(v);
    }
}

// S and D are element types, or a complex dtype's component type with SC / DC set.
template <class S, class D, bool SC, bool DC>
__device__ __forceinline__ void cast(const S* __restrict__ src, D* __restrict__ dst, long long n) {
    for (GT_GRID_STRIDE(i, n)) {
        if constexpr (SC && DC) {
            dst[2 * i] = conv<D>(src[2 * i]);
            dst[2 * i + 1] = conv<D>(src[2 * i + 1]);
        } else if constexpr (SC) {
            if constexpr (gt::is_bool<D>::value) {
                dst[i] = src[2 * i] != S(0) || src[2 * i + 1] != S(0);
            } else {
                dst[i] = conv<D>(src[2 * i]);
            }
        } else if constexpr (DC) {
            dst[2 * i] = conv<D>(src[i]);
            dst[2 * i + 1] = D(0);
        } else {
            dst[i] = conv<D>(src[i]);
        }
    }
}

}  // namespace gt_cast

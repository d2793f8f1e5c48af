// CUDA-on-CPU shim: force-included (g++ -include) before every .cu source compiled by the
// emulator. Each CUDA thread is a user-space fiber; a block's fibers run on ONE OS thread and
// blocks run one after another, so plain globals (not TLS, which is slow and size-limited in a
// dlopen'ed library) hold the current thread's coordinates, and function-static storage is
// per block ("__shared__" = static in a dedicated section that is poisoned before each block).
#pragma once
#define GT_CUDA_EMULATOR 1

#include <assert.h>  // assert() -> __assert_fail, which the runtime overrides (-Bsymbolic)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

// ---- qualifiers ----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __shared__ static __attribute__((section("gt_emu_shared")))

// ---- vector types --------------------------------------------------------------------------
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
#define GT_EMU_VEC2(T, N) struct alignas(2 * sizeof(T)) N { T x, y; }; \
    inline N make_##N(T x, T y) { return N{x, y}; }
#define GT_EMU_VEC3(T, N) struct N { T x, y, z; }; \
    inline N make_##N(T x, T y, T z) { return N{x, y, z}; }
#define GT_EMU_VEC4(T, N) struct alignas(4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T)) N \
    { T x, y, z, w; }; inline N make_##N(T x, T y, T z, T w) { return N{x, y, z, w}; }
GT_EMU_VEC2(float, float2) GT_EMU_VEC3(float, float3) GT_EMU_VEC4(float, float4)
GT_EMU_VEC2(double, double2) GT_EMU_VEC2(int, int2) GT_EMU_VEC4(int, int4)
GT_EMU_VEC2(unsigned, uint2) GT_EMU_VEC4(unsigned, uint4)
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// ---- runtime interface (runtime.cpp) ------------------------------------------------------
namespace gt_emu {
struct Fiber;
struct ThreadCoords { uint3 tid; };  // first member of Fiber: threadIdx is one load away
extern ThreadCoords* g_cur;          // the running fiber
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;
extern unsigned char* g_dyn_shared;

void syncthreads(const char* file, int line);
// Warp exchange: every lane in `mask` deposits `value`, names a source lane, and gets back the
// source lane's value; `pred` feeds the warp vote (returned through *ballot).
unsigned long long warp_exchange(unsigned mask, unsigned long long value, int src_lane, int pred,
                                 unsigned* ballot, const char* what);
[[noreturn]] void trap(const char* what, const char* file, int line);
unsigned lane_id();

// What launch.py packs in front of a launch's arguments (struct format "<6I2I2Q", 48 bytes);
// one 8-byte little-endian slot per kernel argument follows it.
struct LaunchHeader {
    unsigned grid[3], block[3];
    unsigned flags, nargs;
    unsigned long long shared_bytes, stack_bytes;
};
static_assert(sizeof(LaunchHeader) == 48, "launch.py packs a 48-byte header");

// One argument from its slot: scalars sit in the slot's low bytes (little-endian hosts: x86-64,
// AArch64), 16-bit floats as their bit pattern, pointers as the host address. launch.py refuses
// parameter types it cannot pack, so the trap only guards a kernel nobody can launch.
template <class T>
inline T arg_from_slot(const unsigned char* slot) {
    if constexpr (sizeof(T) <= 8 && std::is_trivially_copyable_v<T> &&
                  std::is_default_constructible_v<T>) {
        T v;
        std::memcpy(&v, slot, sizeof(T));
        return v;
    } else {
        trap("kernel parameter type does not fit an 8-byte launch slot", __FILE__, __LINE__);
    }
}
template <class... A, std::size_t... I>
inline void invoke_impl(void (*f)(A...), const unsigned char* a, std::index_sequence<I...>) {
    f(arg_from_slot<std::remove_cv_t<std::remove_reference_t<A>>>(a + 8 * I)...);
}
// Calls a kernel with its arguments unpacked from consecutive 8-byte slots (packed by launch.py).
template <class... A>
inline void invoke(void (*f)(A...), const unsigned char* a) {
    invoke_impl(f, a, std::index_sequence_for<A...>{});
}
}  // namespace gt_emu

#define threadIdx (gt_emu::g_cur->tid)
#define blockIdx (gt_emu::g_block_idx)
#define blockDim (gt_emu::g_block_dim)
#define gridDim (gt_emu::g_grid_dim)
#define warpSize 32
#define __syncthreads() gt_emu::syncthreads(__FILE__, __LINE__)
#define __trap() gt_emu::trap("__trap() called", __FILE__, __LINE__)
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

// ---- warp intrinsics ------------------------------------------------------------------------
namespace gt_emu {
template <class T>
inline unsigned long long to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T from_bits(unsigned long long b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
template <class T>
inline T shfl(unsigned mask, T v, int src, const char* what) {
    return from_bits<T>(warp_exchange(mask, to_bits(v), src, 0, nullptr, what));
}
inline int check_width(int width) {
    if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
        trap("shuffle width must be a power of two in [1, 32]", __FILE__, __LINE__);
    return width;
}
}  // namespace gt_emu

inline void __syncwarp(unsigned mask = 0xffffffffu) {
    gt_emu::warp_exchange(mask, 0, (int)gt_emu::lane_id(), 0, nullptr, "__syncwarp");
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    width = gt_emu::check_width(width);
    int lane = (int)gt_emu::lane_id();
    int s = (lane & ~(width - 1)) + (src & (width - 1));
    return gt_emu::shfl(mask, v, s, "__shfl_sync");
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    width = gt_emu::check_width(width);
    int lane = (int)gt_emu::lane_id();
    int s = lane - (int)delta;
    if (s < (lane & ~(width - 1))) s = lane;
    return gt_emu::shfl(mask, v, s, "__shfl_up_sync");
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    width = gt_emu::check_width(width);
    int lane = (int)gt_emu::lane_id();
    int s = lane + (int)delta;
    if (s >= (lane & ~(width - 1)) + width) s = lane;
    return gt_emu::shfl(mask, v, s, "__shfl_down_sync");
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    width = gt_emu::check_width(width);
    int lane = (int)gt_emu::lane_id();
    int s = lane ^ lane_mask;
    if (s >= (lane & ~(width - 1)) + width) s = lane;
    return gt_emu::shfl(mask, v, s, "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    unsigned b = 0;
    gt_emu::warp_exchange(mask, 0, (int)gt_emu::lane_id(), pred != 0, &b, "__ballot_sync");
    return b & mask;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
inline unsigned __activemask() { return 0xffffffffu; }

// ---- atomics: CUDA's overload set; execution is single-threaded, so plain RMW -------------
#define GT_EMU_ATOMIC(NAME, T, EXPR) \
    inline T NAME(T* a, T v) { T old = *a; *a = (EXPR); return old; }
GT_EMU_ATOMIC(atomicAdd, int, old + v) GT_EMU_ATOMIC(atomicAdd, unsigned, old + v)
GT_EMU_ATOMIC(atomicAdd, unsigned long long, old + v) GT_EMU_ATOMIC(atomicAdd, float, old + v)
GT_EMU_ATOMIC(atomicAdd, double, old + v)
GT_EMU_ATOMIC(atomicSub, int, old - v) GT_EMU_ATOMIC(atomicSub, unsigned, old - v)
GT_EMU_ATOMIC(atomicExch, int, v) GT_EMU_ATOMIC(atomicExch, unsigned, v)
GT_EMU_ATOMIC(atomicExch, unsigned long long, v) GT_EMU_ATOMIC(atomicExch, float, v)
GT_EMU_ATOMIC(atomicMin, int, v < old ? v : old) GT_EMU_ATOMIC(atomicMin, unsigned, v < old ? v : old)
GT_EMU_ATOMIC(atomicMin, long long, v < old ? v : old)
GT_EMU_ATOMIC(atomicMin, unsigned long long, v < old ? v : old)
GT_EMU_ATOMIC(atomicMax, int, v > old ? v : old) GT_EMU_ATOMIC(atomicMax, unsigned, v > old ? v : old)
GT_EMU_ATOMIC(atomicMax, long long, v > old ? v : old)
GT_EMU_ATOMIC(atomicMax, unsigned long long, v > old ? v : old)
GT_EMU_ATOMIC(atomicAnd, int, old & v) GT_EMU_ATOMIC(atomicAnd, unsigned, old & v)
GT_EMU_ATOMIC(atomicAnd, unsigned long long, old & v)
GT_EMU_ATOMIC(atomicOr, int, old | v) GT_EMU_ATOMIC(atomicOr, unsigned, old | v)
GT_EMU_ATOMIC(atomicOr, unsigned long long, old | v)
GT_EMU_ATOMIC(atomicXor, int, old ^ v) GT_EMU_ATOMIC(atomicXor, unsigned, old ^ v)
GT_EMU_ATOMIC(atomicXor, unsigned long long, old ^ v)
GT_EMU_ATOMIC(atomicInc, unsigned, old >= v ? 0u : old + 1u)
GT_EMU_ATOMIC(atomicDec, unsigned, (old == 0u || old > v) ? v : old - 1u)
#undef GT_EMU_ATOMIC
#define GT_EMU_CAS(T) \
    inline T atomicCAS(T* a, T cmp, T v) { T old = *a; if (old == cmp) *a = v; return old; }
GT_EMU_CAS(int) GT_EMU_CAS(unsigned) GT_EMU_CAS(unsigned long long) GT_EMU_CAS(unsigned short)
#undef GT_EMU_CAS

// ---- bit / reinterpret helpers ------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
inline int __float_as_int(float f) { return gt_emu::from_bits<int>(gt_emu::to_bits(f)); }
inline unsigned __float_as_uint(float f) { return gt_emu::from_bits<unsigned>(gt_emu::to_bits(f)); }
inline float __int_as_float(int i) { return gt_emu::from_bits<float>(gt_emu::to_bits(i)); }
inline float __uint_as_float(unsigned i) { return gt_emu::from_bits<float>(gt_emu::to_bits(i)); }
inline long long __double_as_longlong(double d) {
    return gt_emu::from_bits<long long>(gt_emu::to_bits(d));
}
inline double __longlong_as_double(long long i) {
    return gt_emu::from_bits<double>(gt_emu::to_bits(i));
}
template <class T>
inline T __ldg(const T* p) { return *p; }

// ---- min / max (CUDA's are global overloads with the usual arithmetic conversions) --------
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) {
    return b < a ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) {
    return a < b ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}

// ---- fast-math intrinsics: exact <cmath> versions ------------------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752); }

// ---- half precision ------------------------------------------------------------------------
// Conversions use GCC's _Float16 (IEEE binary16, round-to-nearest-even).
struct __half {
    unsigned short __x;
    __half() = default;
    __half(float f) { _Float16 h = (_Float16)f; std::memcpy(&__x, &h, 2); }
    __half(double f) : __half((float)f) {}
    __half(int i) : __half((float)i) {}
    operator float() const { _Float16 h; std::memcpy(&h, &__x, 2); return (float)h; }
};
// bfloat16: the upper half of a float, rounded to nearest even (NaN kept quiet).
struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) {
        unsigned u = __float_as_uint(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) { __x = (unsigned short)((u >> 16) | 0x40u); return; }
        u += 0x7fffu + ((u >> 16) & 1u);
        __x = (unsigned short)(u >> 16);
    }
    __nv_bfloat16(double f) : __nv_bfloat16((float)f) {}
    __nv_bfloat16(int i) : __nv_bfloat16((float)i) {}
    operator float() const { return __uint_as_float((unsigned)__x << 16); }
};
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return (float)h; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
#define GT_EMU_HALF_OPS(H, P)                                                               \
    inline H P##add(H a, H b) { return H((float)a + (float)b); }                            \
    inline H P##sub(H a, H b) { return H((float)a - (float)b); }                            \
    inline H P##mul(H a, H b) { return H((float)a * (float)b); }                            \
    inline H P##div(H a, H b) { return H((float)a / (float)b); }                            \
    inline H P##fma(H a, H b, H c) { return H(std::fma((float)a, (float)b, (float)c)); }    \
    inline H P##neg(H a) { return H(-(float)a); }                                           \
    inline bool P##eq(H a, H b) { return (float)a == (float)b; }                            \
    inline bool P##ne(H a, H b) { return (float)a != (float)b; }                            \
    inline bool P##lt(H a, H b) { return (float)a < (float)b; }                             \
    inline bool P##le(H a, H b) { return (float)a <= (float)b; }                            \
    inline bool P##gt(H a, H b) { return (float)a > (float)b; }                             \
    inline bool P##ge(H a, H b) { return (float)a >= (float)b; }                            \
    inline H P##max(H a, H b) { return (float)a < (float)b ? b : a; }                       \
    inline H P##min(H a, H b) { return (float)b < (float)a ? b : a; }                       \
    inline H operator+(H a, H b) { return H((float)a + (float)b); }                         \
    inline H operator-(H a, H b) { return H((float)a - (float)b); }                         \
    inline H operator*(H a, H b) { return H((float)a * (float)b); }                         \
    inline H operator/(H a, H b) { return H((float)a / (float)b); }                         \
    inline H operator-(H a) { return H(-(float)a); }                                        \
    inline H& operator+=(H& a, H b) { return a = a + b; }                                   \
    inline H& operator-=(H& a, H b) { return a = a - b; }                                   \
    inline H& operator*=(H& a, H b) { return a = a * b; }                                   \
    inline H& operator/=(H& a, H b) { return a = a / b; }                                   \
    inline bool operator==(H a, H b) { return (float)a == (float)b; }                       \
    inline bool operator!=(H a, H b) { return (float)a != (float)b; }                       \
    inline bool operator<(H a, H b) { return (float)a < (float)b; }                         \
    inline bool operator<=(H a, H b) { return (float)a <= (float)b; }                       \
    inline bool operator>(H a, H b) { return (float)a > (float)b; }                         \
    inline bool operator>=(H a, H b) { return (float)a >= (float)b; }                       \
    inline H atomicAdd(H* p, H v) { H old = *p; *p = old + v; return old; }
GT_EMU_HALF_OPS(__half, __h)
GT_EMU_HALF_OPS(__nv_bfloat16, __h)
#undef GT_EMU_HALF_OPS
inline bool __hisnan(__half h) { return std::isnan((float)h); }
inline bool __hisinf(__half h) { return std::isinf((float)h); }

// ---- CUDA math functions <cmath> lacks (special functions; glibc has j0/j1/y0/y1) ----------
namespace gt_emu {
// erf^-1 on [-1/2, 1/2]: Giles' approximation refined by Newton steps on erf.
inline double erfinv_center(double y) {
    double w = -std::log((1.0 - y) * (1.0 + y)) - 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w; p = 1.50140941 + p * w;
    double x = p * y;
    for (int i = 0; i < 3; ++i)
        x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
    return x;
}
inline double erfcx(double x) {
    if (std::isnan(x)) return x;
    if (x < 25) return std::exp(x * x) * std::erfc(x);
    if (x > 1e8) return 0.5641895835477563 / x;
    const double z = 1 / (2 * x * x);
    double term = 1, sum = 1;
    for (int k = 1; k < 12; ++k) {  // 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k
        term *= -(2.0 * k - 1) * z;
        sum += term;
    }
    return 0.5641895835477563 / x * sum;
}
// erfc^-1 on (0, 2): a normal-quantile starting value, then Newton steps on log(erfc).
inline double erfcinv(double q) {
    if (!(q > 0 && q < 2)) return q == 0 ? HUGE_VAL : (q == 2 ? -HUGE_VAL : NAN);
    if (q >= 0.5 && q <= 1.5) return erfinv_center(1 - q);
    if (q > 1.5) return -erfcinv(2 - q);
    const double t = std::sqrt(-2 * std::log(q / 2));
    double x = (t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                (1 + t * (1.432788 + t * (0.189269 + t * 0.001308)))) * 0.7071067811865476;
    // log erfc(x) = log erfcx(x) - x^2 stays exact where erfc(x) is subnormal
    for (int i = 0; i < 5; ++i)
        x += (std::log(erfcx(x)) - x * x - std::log(q)) * erfcx(x) * 0.886226925452758;
    return x;
}
inline double erfinv(double y) {
    if (std::fabs(y) <= 0.5) return erfinv_center(y);
    if (!(std::fabs(y) <= 1)) return NAN;
    return y > 0 ? erfcinv(1 - y) : -erfcinv(1 + y);
}
}  // namespace gt_emu
inline double erfinv(double y) { return gt_emu::erfinv(y); }
inline float erfinvf(float y) { return (float)gt_emu::erfinv(y); }
inline double erfcinv(double q) { return gt_emu::erfcinv(q); }
inline float erfcinvf(float q) { return (float)gt_emu::erfcinv(q); }
inline double erfcx(double x) { return gt_emu::erfcx(x); }
inline float erfcxf(float x) { return (float)gt_emu::erfcx(x); }
inline double normcdfinv(double p) { return -1.4142135623730951 * gt_emu::erfcinv(2 * p); }
inline float normcdfinvf(float p) { return (float)normcdfinv(p); }
namespace gt_emu {
// I0 and I1 (x >= 0): the power series up to 30, Hankel's asymptotic series beyond.
inline double bessel_i01(double x, int nu) {
    if (std::isnan(x)) return x;
    if (x <= 30) {
        const double y = 0.25 * x * x;
        double term = nu ? 0.5 * x : 1.0, sum = term;
        for (int k = 1; k < 200 && term > 1e-17 * sum; ++k) {
            term *= y / ((double)k * (k + nu));
            sum += term;
        }
        return sum;
    }
    const double mu = 4.0 * nu * nu;
    double term = 1, sum = 1;
    for (int k = 1; k < 12; ++k) {
        const double m = 2.0 * k - 1;
        term *= -(mu - m * m) / (k * 8.0 * x);
        sum += term;
    }
    const double h = std::exp(0.5 * x);  // e^x in two halves: finite wherever I(x) is
    return h * (sum / std::sqrt(2 * 3.14159265358979323846 * x)) * h;
}
}  // namespace gt_emu
// CUDA's cyl_bessel_i0/i1 give I0(+-inf) = inf and I1(+-inf) = +-inf (seen on an H200)
inline double cyl_bessel_i0(double x) {
    return std::isinf(x) ? HUGE_VAL : gt_emu::bessel_i01(std::fabs(x), 0);
}
inline float cyl_bessel_i0f(float x) { return (float)cyl_bessel_i0(x); }
inline double cyl_bessel_i1(double x) {
    if (std::isinf(x)) return x;
    return std::copysign(gt_emu::bessel_i01(std::fabs(x), 1), x);
}
inline float cyl_bessel_i1f(float x) { return (float)cyl_bessel_i1(x); }

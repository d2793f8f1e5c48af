// Mixed-precision kernels behind GradScaler (PyTorch's AmpKernels.cu semantics).
//
//  * foreach_unscale: ONE launch unscales every gradient of a (device, dtype) group in place
//    and raises found_inf when any element is inf/NaN. The gradients arrive as a table in
//    device memory (like PyTorch's multi_tensor_apply metadata, but as an array instead of a
//    kernel parameter, so the group never splits into several launches), one record of
//    `width` long longs per non-empty tensor, in order:
//        [address, first (its elements' start in the group's concatenation), ndim,
//         size_0 .. size_{D-1}, stride_0 .. stride_{D-1}]   (D = (width - 3) / 2)
//    with address as the kernel dereferences it (runtime.kernel_addresses). A dense tensor
//    (contiguous, or a permutation of contiguous) is one dim of stride 1: in-place
//    elementwise work may run in memory order. Blocks take chunks of the concatenation; each
//    thread finds its chunk's tensor by binary search once and walks forward from there.
//  * update_scale: one thread applies PyTorch's _amp_update_scale_ rule.
//
// The element rule is PyTorch's: compute in float (double for double), flag !isfinite, and
// multiply by inv_scale unless it is exactly 1 (then the value is stored back unchanged).
#include "common.cuh"
#include "scalar_fns.cuh"

namespace gtamp {

#define GT_AMP_CHUNK 4096  // elements per block step (16 per thread at 256 threads)

// inf - inf and NaN - NaN are NaN, a finite v - v is 0 (no header spells isfinite the same way
// for NVRTC and the emulator's g++; no fast-math flag folds this).
template <class C>
__device__ __forceinline__ bool finite_(C v) { return v - v == C(0); }

template <class T, class C>
__device__ void foreach_unscale(const long long* __restrict__ table, int count, int width,
                                long long total, float* __restrict__ found_inf,
                                const float* __restrict__ inv_scale_ptr) {
    const C inv = (C)(*inv_scale_ptr);
    const bool identity = *inv_scale_ptr == 1.f;
    const int dims = (width - 3) / 2;
    bool bad = false;
    for (long long chunk = blockIdx.x; chunk * GT_AMP_CHUNK < total; chunk += gridDim.x) {
        const long long lo = chunk * GT_AMP_CHUNK;
        const long long hi = lo + GT_AMP_CHUNK < total ? lo + GT_AMP_CHUNK : total;
        // The last record whose first element is <= lo.
        int a = 0, b = count - 1;
        while (a < b) {
            const int mid = (a + b + 1) / 2;
            if (table[(long long)mid * width + 1] <= lo) a = mid;
            else b = mid - 1;
        }
        int k = a;
        for (long long g = lo + threadIdx.x; g < hi; g += blockDim.x) {
            while (k + 1 < count && table[(long long)(k + 1) * width + 1] <= g) ++k;
            const long long* rec = table + (long long)k * width;
            T* base = reinterpret_cast<T*>(static_cast<unsigned long long>(rec[0]));
            long long rem = g - rec[1], off = 0;
            const int nd = (int)rec[2];
            for (int d = nd - 1; d >= 0; --d) {
                const long long n = rec[3 + d];
                off += (rem % n) * rec[3 + dims + d];
                rem /= n;
            }
            const C v = gt::load<C>(base[off]);
            if (!finite_(v)) bad = true;
            base[off] = gt::store<T>(identity ? v : v * inv);
        }
    }
    if (bad) *found_inf = 1.f;  // every writer stores the same value, as PyTorch's threads do
}

// PyTorch's rule: after an overflow multiply by backoff_factor (in double, rounded to float)
// and reset the tracker; otherwise count the clean step and, every growth_interval of them,
// multiply by growth_factor unless that leaves float's range.
__device__ void update_scale(float* __restrict__ scale, int* __restrict__ growth_tracker,
                             const float* __restrict__ found_inf, double growth_factor,
                             double backoff_factor, long long growth_interval) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (*found_inf != 0.f) {  // NaN counts as found, as C's truth test does
        *scale = (float)((double)(*scale) * backoff_factor);
        *growth_tracker = 0;
    } else {
        const int successful = *growth_tracker + 1;
        if ((long long)successful == growth_interval) {
            const float grown = (float)((double)(*scale) * growth_factor);
            if (finite_(grown)) *scale = grown;
            *growth_tracker = 0;
        } else {
            *growth_tracker = successful;
        }
    }
}

}  // namespace gtamp

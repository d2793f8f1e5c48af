// Common header for gputensor's CUDA kernels. The same source compiles with NVRTC/nvcc for a
// GPU and with g++ for the CPU emulator (which force-includes emulator/cuda_shim.h and defines
// GT_CUDA_EMULATOR).
#pragma once

// Dynamic shared memory (the launch's shared_bytes) viewed as an array of `type`:
//   GT_DYNAMIC_SHARED(float, tile);  tile[threadIdx.x] = ...;
#ifdef GT_CUDA_EMULATOR
#define GT_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(gt_emu::g_dyn_shared)
#else
#define GT_DYNAMIC_SHARED(type, name)                               \
    extern __shared__ __align__(16) unsigned char gt_dyn_shared_[]; \
    type* name = reinterpret_cast<type*>(gt_dyn_shared_)
#endif

// Grid-stride loop over [0, n): for (GT_GRID_STRIDE(i, n)) { ... }
#define GT_GRID_STRIDE(i, n)                                                          \
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n); \
    i += (long long)blockDim.x * gridDim.x

#define GT_FULL_MASK 0xffffffffu

namespace gt {
// An aligned chunk of V elements: loading or storing one is a single vector access (NVRTC turns a
// 16-byte-aligned 16-byte struct access into ld/st.global.v4). Used by the elementwise kernels'
// contiguous path and by reductions over a contiguous dim.
template <class T, int V>
struct alignas(sizeof(T) * V) ew_vec { T v[V]; };
}  // namespace gt

// Sum of `v` over the 32 lanes of a full warp; every lane gets the total.
template <class T>
__device__ __forceinline__ T gt_warp_sum(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(GT_FULL_MASK, v, offset);
    return v;
}

// Max of `v` over the 32 lanes of a full warp; every lane gets the result.
template <class T>
__device__ __forceinline__ T gt_warp_max(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        T o = __shfl_xor_sync(GT_FULL_MASK, v, offset);
        v = o > v ? o : v;
    }
    return v;
}

__device__ __forceinline__ unsigned gt_ceil_div(unsigned a, unsigned b) { return (a + b - 1) / b; }

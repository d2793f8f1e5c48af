#include <cuda_bf16.h>
#include "common.cuh"

// A templated device helper with its own static shared array (per instantiation), used by
// two non-template kernels: launchable kernels are non-template wrappers.
template <class T, int N>
__device__ T block_total(T v) {
    __shared__ T vals[N];
    vals[threadIdx.x] = v;
    __syncthreads();
    T acc = T(0);
    for (int i = 0; i < (int)blockDim.x; ++i) acc += vals[i];
    __syncthreads();  // vals is reused by the next call
    return acc;
}

__global__ void totals_f(const float* x, float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] =
        block_total<float, 128>(x[blockIdx.x * blockDim.x + threadIdx.x]);
}

__global__ void totals_i(const int* x, int* out) {
    int v = x[blockIdx.x * blockDim.x + threadIdx.x];
    out[blockIdx.x * blockDim.x + threadIdx.x] = block_total<int, 128>(v) + block_total<int, 128>(1);
}

__global__ void bf16_scale(const __nv_bfloat16* x, __nv_bfloat16* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * s);
}

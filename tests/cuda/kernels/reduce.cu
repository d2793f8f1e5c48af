#include "common.cuh"

// Each block sums its grid-stride share: per-thread partial -> warp shuffle -> shared memory
// across warps (__syncthreads) -> one atomicAdd per block.
__global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float warp_sums[32];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        acc += x[i];
    acc = gt_warp_sum(acc);
    const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + warpSize - 1) / warpSize;
        float v = lane < nwarps ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(GT_FULL_MASK, v, off);
        if (lane == 0) atomicAdd(out, v);
    }
}

// Tree reduction in dynamic shared memory, one partial per block (no atomics).
__global__ void tree_sum(const double* x, double* partials, int n) {
    GT_DYNAMIC_SHARED(double, buf);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = buf[0];
}

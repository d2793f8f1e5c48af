#include <cuda_fp16.h>
#include "common.cuh"

__global__ void histogram(const int* values, unsigned* bins, int n, int nbins) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&bins[values[i] % nbins], 1u);
}

// Per warp: ballot of (x > 0), any, all; lane 0 writes them.
__global__ void votes(const float* x, unsigned* ballots, int* any, int* all) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int pred = x[i] > 0.0f;
    unsigned b = __ballot_sync(GT_FULL_MASK, pred);
    int a = __any_sync(GT_FULL_MASK, pred), l = __all_sync(GT_FULL_MASK, pred);
    if (threadIdx.x % 32 == 0) {
        const int w = i / 32;
        ballots[w] = b;
        any[w] = a;
        all[w] = l;
    }
}

// out[i] = float(half(x[i]) * half(2)); also the raw bits of half(x[i]).
__global__ void half_roundtrip(const float* x, float* out, unsigned short* bits, __half scale,
                               int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half h = __float2half(x[i]);
    bits[i] = __half_as_ushort(h);
    out[i] = __half2float(__hmul(h, scale));
}

__global__ void half_in(const __half* x, __half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hadd(x[i], x[i]);
}

// Rotates each block's values by one using shared memory but WITHOUT a barrier between the
// write and the read: only correct if thread t-1 happens to run before thread t.
__global__ void shift_no_barrier(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    float v = t > 0 ? s[t - 1] : 0.0f;  // BUG: missing __syncthreads()
    out[blockIdx.x * blockDim.x + t] = v;
}

__global__ void shift_with_barrier(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = t > 0 ? s[t - 1] : 0.0f;
}

// Even threads wait at one barrier, odd threads at another: divergent.
__global__ void divergent_barrier(float* out) {
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
        out[threadIdx.x] = 1.0f;
    } else {
        __syncthreads();
        out[threadIdx.x] = 2.0f;
    }
}

// Half the block returns early, the rest wait in a warp shuffle for lanes that are gone.
__global__ void warp_deadlock(float* out) {
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(GT_FULL_MASK, 1.0f, 1);
}

// Threads that exited count as arrived at __syncthreads (legal early return).
__global__ void early_exit_barrier(const int* x, int* out, int n) {
    __shared__ int s[128];
    int t = threadIdx.x;
    if (t >= n) return;
    s[t] = x[t];
    __syncthreads();
    out[t] = s[n - 1 - t];
}

__global__ void checked(const int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] >= 0);
}

__device__ int deep(int d, volatile char* sink) {
    volatile char pad[4096];
    pad[0] = (char)d;
    sink[0] = pad[0];
    if (d == 0) return 0;
    int r = deep(d - 1, sink);
    return r + 1 + pad[d % 7] - pad[d % 7];  // use the frame after the call: no tail call
}

__global__ void recurse(int depth, int* out) {
    char sink[1];
    out[threadIdx.x] = deep(depth, sink);
}

// Every scalar flavour, to exercise argument checking.
__global__ void scalars(int a, unsigned b, long long c, double d, bool e, unsigned char f,
                        double* out) {
    out[0] = a; out[1] = b; out[2] = (double)c; out[3] = d; out[4] = e; out[5] = f;
}

// 2-D blocks, 3-D grid: each thread writes its coordinates.
__global__ void coords(int* out) {
    int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int nt = blockDim.x * blockDim.y * blockDim.z;
    int* o = out + 6 * (block * nt + t);
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
    o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
}

// Shuffle flavours with width 8, and a shared variable declared at namespace scope.
__shared__ int ns_shared[64];
__global__ void shuffles(const int* x, int* idx, int* up, int* down, int* xr) {
    int t = threadIdx.x, v = x[t];
    ns_shared[t] = v;
    __syncthreads();
    idx[t] = __shfl_sync(GT_FULL_MASK, v, 3, 8);
    up[t] = __shfl_up_sync(GT_FULL_MASK, v, 2, 8);
    down[t] = __shfl_down_sync(GT_FULL_MASK, v, 2, 8);
    xr[t] = __shfl_xor_sync(GT_FULL_MASK, ns_shared[t], 5);
}

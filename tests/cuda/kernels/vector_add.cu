#include "common.cuh"

__global__ void add(const float* __restrict__ x, const float* __restrict__ y,
                    float* __restrict__ out, long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = x[i] + y[i];
}

// Scales in place: exercises scalar conversion of a float parameter.
__global__ void axpy_inplace(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

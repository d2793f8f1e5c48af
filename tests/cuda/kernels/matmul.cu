#include "common.cuh"

// C[M,N] = A[M,K] @ B[K,N], TILE x TILE thread blocks, both tiles in dynamic shared memory.
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    const int T = blockDim.x;
    GT_DYNAMIC_SHARED(float, smem);
    float* As = smem;
    float* Bs = smem + T * T;
    const int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y * T + threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[threadIdx.y * T + threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc = fmaf(As[threadIdx.y * T + k], Bs[k * T + threadIdx.x], acc);
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

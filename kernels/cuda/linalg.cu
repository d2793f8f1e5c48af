// Tiled shared-memory GEMM for the dtypes cuBLAS does not cover (float16/bfloat16 accumulate in
// float, integers wrap in 64 bits like the CPU's modular arithmetic, bool is OR-of-AND as NumPy's
// matmul), plus the small helpers the CUDA matmul and convolution launchers share.
//
// out[b] = alpha * (a[b] @ b[b]) + beta * c[b] for every batch index b, every operand strided:
// matrix strides are scalar parameters, batch strides (0 where an operand broadcasts) come in a
// small device array `meta` = [nd, shape[nd], a[nd], b[nd], c[nd], out[nd]]. K == 0 (the host
// passes it for alpha == 0 too) skips the products: out = beta * c, or zeros when there is no c
// or beta == 0, so NaN/inf in ignored operands never propagate (BLAS semantics).
//
// Each 16x16-thread block computes a 64x64 output tile, 4 rows x 4 columns per thread (rows
// ty + 16i, columns tx + 16j, so a warp's stores and shared-memory reads of b are consecutive),
// staging 64x16 tiles of a and 16x64 tiles of b through shared memory. Grid: x over column tiles,
// y over row tiles and z over batches, with y and z looping so any size fits the grid limits.
#include "common.cuh"
#include "scalar_fns.cuh"

namespace gt_gemm {

constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 16;
constexpr int TDIM = 16;       // threads per block side
constexpr int TM = BM / TDIM;  // outputs per thread, each way
constexpr int TN = BN / TDIM;

// A value of storage type T as the accumulator type A (integers sign/zero-extend into 64 bits).
template <class A, class T>
__device__ __forceinline__ A to_acc(T x) {
    if constexpr (gt::is_bool<A>::value) {
        return gt::load<float>(x) != 0.0f;
    } else if constexpr (gt::is_float<A>::value) {
        return gt::load<A>(x);
    } else {
        return (A)(long long)x;
    }
}

// acc + x * y in the accumulator's arithmetic (bool: acc | (x & y)).
template <class A>
__device__ __forceinline__ A madd(A acc, A x, A y) {
    if constexpr (gt::is_bool<A>::value) return acc || (x && y);
    else return acc + x * y;
}

template <class T, class A>
__device__ __forceinline__ T from_acc(A v) {
    if constexpr (gt::is_bool<A>::value || gt::is_float<A>::value) return gt::store<T>(v);
    else return (T)(long long)v;  // integers: keep the low bits (wraparound)
}

// Batch index -> element offsets of each operand (meta as described at the top).
__device__ __forceinline__ void batch_offsets(const long long* meta, long long bi, long long& oa,
                                              long long& ob, long long& oc, long long& oo) {
    const int nd = (int)meta[0];
    oa = ob = oc = oo = 0;
    for (int d = nd - 1; d >= 0; --d) {
        const long long size = meta[1 + d];
        const long long i = bi % size;
        bi /= size;
        oa += i * meta[1 + nd + d];
        ob += i * meta[1 + 2 * nd + d];
        oc += i * meta[1 + 3 * nd + d];
        oo += i * meta[1 + 4 * nd + d];
    }
}

// S is the host scalar type of alpha/beta (float, double, long long or bool). `out` is not
// __restrict__: c may be out itself (in-place add*), each element read then written by one
// thread; a and b never alias out (the launcher gives the product a scratch output then).
template <class T, class A, class S>
__device__ void gemm_tiled(T* out, const T* __restrict__ a, const T* __restrict__ b,
                           const T* c, S alpha_s, S beta_s, long long M, long long N, long long K,
                           long long batch, long long a_sm, long long a_sk, long long b_sk,
                           long long b_sn, long long c_sm, long long c_sn, long long o_sm,
                           long long o_sn, const long long* meta) {
    __shared__ A As[BM][BK + 1];
    __shared__ A Bs[BK][BN + 1];
    const A alpha = (A)alpha_s;
    const A beta = (A)beta_s;
    const bool use_c = c != nullptr && beta_s != S(0);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TDIM + tx;
    // Consecutive threads load along the operand's unit-stride dim (coalesced global reads).
    const bool a_m_fast = a_sm == 1 && a_sk != 1;
    const bool b_k_fast = b_sk == 1 && b_sn != 1;
    const long long n0 = (long long)blockIdx.x * BN;
    const long long row_tiles = (M + BM - 1) / BM;
    for (long long bz = blockIdx.z; bz < batch; bz += gridDim.z) {
        long long oa, ob, oc, oo;
        batch_offsets(meta, bz, oa, ob, oc, oo);
        for (long long ry = blockIdx.y; ry < row_tiles; ry += gridDim.y) {
            const long long m0 = ry * BM;
            A acc[TM][TN];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] = A(0);
            for (long long k0 = 0; k0 < K; k0 += BK) {
                // Stage the a tile (BM x BK) and the b tile (BK x BN): four loads per thread each.
                for (int r = 0; r < (BM * BK) / (TDIM * TDIM); ++r) {
                    const int idx = tid + r * TDIM * TDIM;
                    const int row = a_m_fast ? idx % BM : idx / BK;
                    const int col = a_m_fast ? idx / BM : idx % BK;
                    const long long m = m0 + row, k = k0 + col;
                    As[row][col] = (m < M && k < K) ? to_acc<A>(a[oa + m * a_sm + k * a_sk]) : A(0);
                }
                for (int r = 0; r < (BK * BN) / (TDIM * TDIM); ++r) {
                    const int idx = tid + r * TDIM * TDIM;
                    const int row = b_k_fast ? idx % BK : idx / BN;
                    const int col = b_k_fast ? idx / BK : idx % BN;
                    const long long k = k0 + row, n = n0 + col;
                    Bs[row][col] = (k < K && n < N) ? to_acc<A>(b[ob + k * b_sk + n * b_sn]) : A(0);
                }
                __syncthreads();
                const int kmax = (K - k0) < BK ? (int)(K - k0) : BK;
                for (int kk = 0; kk < kmax; ++kk) {
                    A x[TM], y[TN];
                    for (int i = 0; i < TM; ++i) x[i] = As[ty + i * TDIM][kk];
                    for (int j = 0; j < TN; ++j) y[j] = Bs[kk][tx + j * TDIM];
                    for (int i = 0; i < TM; ++i)
                        for (int j = 0; j < TN; ++j) acc[i][j] = madd(acc[i][j], x[i], y[j]);
                }
                __syncthreads();
            }
            for (int i = 0; i < TM; ++i) {
                const long long m = m0 + ty + i * TDIM;
                if (m >= M) continue;
                for (int j = 0; j < TN; ++j) {
                    const long long n = n0 + tx + j * TDIM;
                    if (n >= N) continue;
                    A v;
                    if constexpr (gt::is_bool<A>::value) {
                        v = K > 0 && alpha && acc[i][j];
                        if (use_c) v = v || (beta && to_acc<A>(c[oc + m * c_sm + n * c_sn]));
                    } else {
                        v = K > 0 ? alpha * acc[i][j] : A(0);
                        if (use_c) v = v + beta * to_acc<A>(c[oc + m * c_sm + n * c_sn]);
                    }
                    out[oo + m * o_sm + n * o_sn] = from_acc<T>(v);
                }
            }
        }
    }
}

}  // namespace gt_gemm

// Zero `nbytes` bytes (outputs that no product or fold writes: empty contractions).
__device__ void gt_fill_zero_bytes(unsigned char* p, long long nbytes) {
    for (GT_GRID_STRIDE(i, nbytes)) p[i] = 0;
}

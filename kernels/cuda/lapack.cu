// Helpers of the batched factorizations (kernels/cuda/ops/lapack_batched.py) around cuSOLVER's
// and cuBLAS' batched routines, over stacks of row-major n x n matrices: the identity per
// matrix (the right-hand sides of an inverse) and the finish of a Cholesky factorization.
#include "common.cuh"
#include "scalar_fns.cuh"  // and complex.cuh, which needs its vocabulary

namespace gtlapack {

// Finite (x - x is 0 exactly for a finite x; NaN for inf and NaN), and the real part.
template <class T> __device__ __forceinline__ bool finite(T v) { return v - v == T(0); }
template <class T> __device__ __forceinline__ bool finite(gt::complex<T> v) {
    return v.re - v.re == T(0) && v.im - v.im == T(0);
}
template <class T> __device__ __forceinline__ T real_part(T v) { return v; }
template <class T> __device__ __forceinline__ T real_part(gt::complex<T> v) { return v.re; }

template <class T>
__device__ void eye(T* __restrict__ out, int n, long long total) {
    const long long nn = (long long)n * n;
    for (GT_GRID_STRIDE(i, total)) {
        const long long e = i % nn;
        out[i] = e / n == e % n ? T(1) : T(0);
    }
}

// The lower factors L of a potrf (row-major): the strict upper triangle, which still holds the
// input, is zeroed; info[m] is LAPACK potrf's code read off the diagonal: the 1-based index of
// the first entry that is not finite and positive (the failing leading minor), 0 if none. The
// diagonal is never written here, so the thread reading it races with nothing.
template <class T>
__device__ void chol_finish(T* __restrict__ a, int* __restrict__ info, int n, long long total) {
    const long long nn = (long long)n * n;
    for (GT_GRID_STRIDE(i, total)) {
        const long long e = i % nn;
        const int r = (int)(e / n), c = (int)(e % n);
        if (c > r) {
            a[i] = T(0);
        } else if (e == 0) {
            int code = 0;
            for (int j = 0; j < n; ++j) {
                const T d = a[i + (long long)j * n + j];
                if (!(finite(d) && real_part(d) > 0)) {
                    code = j + 1;
                    break;
                }
            }
            info[i / nn] = code;
        }
    }
}

}  // namespace gtlapack

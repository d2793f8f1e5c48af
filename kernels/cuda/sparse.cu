// Sparse kernels of the SparseCUDA backend (launched by kernels/cuda/ops/sparse.py; the
// interface is the one the SparseCPU backend's Numba kernels share).
//
// Coalescing: linear keys (row-major over the sparse dims) sort on the device with the CUDA
// backend's stable sort (sort.cu), heads of equal-key runs are flagged and scanned (sort.cu's
// scan), and each (run, dense column) then sums its rows in sorted order: one thread per output
// element, no atomics, so results are deterministic and duplicates add in their input order.
//
// Row / nonzero / segment kernels give each unit of work (a CSR row's block of output columns,
// a few nonzeros, a softmax segment's block of columns) one warp. The warp splits into 32 / G
// groups of G lanes (G a power of two: the dense width rounded up, capped at 32): lanes of a
// group walk the dense columns, groups walk the unit's nonzeros, and shuffles across groups (or
// within one, for sddmm) finish each sum. One kernel so covers SpMV (G = 1: every lane on its
// own nonzero) and wide SpMM (G = 32: lanes over columns) without idle lanes. Loops that
// contain shuffles are warp-uniform: every lane of a warp reaches every shuffle (idle lanes
// contribute the identity).
#include "common.cuh"
#include "scalar_fns.cuh"

namespace gtsp {

// ---- warp helpers ---------------------------------------------------------------------------
__device__ __forceinline__ long long warp_index() {
    return ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}
__device__ __forceinline__ long long warp_total() {
    return ((long long)gridDim.x * blockDim.x) >> 5;
}

// Sum over the 32 / G groups of a warp (lanes with the same lane % G); every lane gets its sum.
template <class A>
__device__ __forceinline__ A sum_across_groups(A v, int G) {
    for (int off = 16; off >= G; off >>= 1) v += __shfl_xor_sync(GT_FULL_MASK, v, off);
    return v;
}

// Sum over the G lanes of each group; every lane gets its group's sum.
template <class A>
__device__ __forceinline__ A sum_within_group(A v, int G) {
    for (int off = G >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(GT_FULL_MASK, v, off);
    return v;
}

// max that propagates NaN, so every lane of a reduction agrees on the result.
template <class A>
__device__ __forceinline__ A max_nan(A a, A b) {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

template <class A>
__device__ __forceinline__ A max_across_groups(A v, int G) {
    for (int off = 16; off >= G; off >>= 1) v = max_nan(v, __shfl_xor_sync(GT_FULL_MASK, v, off));
    return v;
}

template <class A>
__device__ __forceinline__ A neg_inf() {
    return (A)(-__longlong_as_double(0x7ff0000000000000LL));
}

// ---- coalesce --------------------------------------------------------------------------------
// keys[i] = row-major linear index of column i of indices [S, nnz] (strides: S element strides
// of the sparse dims; the launcher checked the product of the sparse sizes fits in int64).
__device__ void coalesce_keys(const long long* indices, long long nnz, int S,
                              const long long* strides, long long* keys) {
    for (GT_GRID_STRIDE(i, nnz)) {
        long long k = 0;
        for (int d = 0; d < S; ++d) k += indices[d * nnz + i] * strides[d];
        keys[i] = k;
    }
}

// flags[p] = sorted position p starts a run of equal entries: compared by their sorted keys
// when given, else by the S index columns (the lexicographic path for huge sizes).
__device__ void coalesce_flags(const long long* keys, const long long* indices, long long nnz,
                               int S, const long long* perm, int* flags) {
    for (GT_GRID_STRIDE(p, nnz)) {
        int head = p == 0;
        if (!head) {
            if (keys) {
                head = keys[p] != keys[p - 1];
            } else {
                const long long a = perm[p], b = perm[p - 1];
                for (int d = 0; d < S && !head; ++d)
                    head = indices[d * nnz + a] != indices[d * nnz + b];
            }
        }
        flags[p] = head;
    }
}

// first[g] = sorted position of run g's first entry; first[groups] = nnz (pos: exclusive scan
// of flags, so run g of a head at p is pos[p]).
__device__ void coalesce_heads(const int* flags, const long long* pos, long long nnz,
                               long long* first) {
    for (GT_GRID_STRIDE(p, nnz)) {
        if (flags[p]) first[pos[p]] = p;
        if (p == nnz - 1) first[pos[p] + flags[p]] = nnz;
    }
}

// out [S, groups]: run g's indices (those of its first entry).
__device__ void coalesce_indices(const long long* indices, long long nnz, int S,
                                 const long long* perm, const long long* first, long long groups,
                                 long long* out) {
    for (GT_GRID_STRIDE(t, (long long)S * groups)) {
        const long long d = t / groups, g = t - d * groups;
        out[t] = indices[d * nnz + perm[first[g]]];
    }
}

// out [groups, F]: run g's value rows summed in sorted (stable: input) order in A.
template <class T, class A>
__device__ void coalesce_values(const T* values, long long F, const long long* perm,
                                const long long* first, long long groups, T* out) {
    for (GT_GRID_STRIDE(t, groups * F)) {
        const long long g = t / F, f = t - g * F;
        A acc = A(0);
        for (long long p = first[g]; p < first[g + 1]; ++p)
            acc += gt::load<A>(values[perm[p] * F + f]);
        out[t] = gt::store<T>(acc);
    }
}

// ---- CSR row offsets ---------------------------------------------------------------------------
// rowptr[r] = number of entries of the sorted rows below r, for r in [0, nrows].
__device__ void csr_rowptr(const long long* rows, long long nnz, long long nrows,
                           long long* rowptr) {
    for (GT_GRID_STRIDE(r, nrows + 1)) {
        long long lo = 0, hi = nnz;
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (rows[mid] < r) lo = mid + 1;
            else hi = mid;
        }
        rowptr[r] = lo;
    }
}

// ---- SpMM: out = beta * out + alpha * (A @ dense) ------------------------------------------
// A [M, K] CSR; dense [K, N] and out [M, N] contiguous. A warp per (row, block of G output
// columns), so few rows with many columns still fill the GPU; neighbouring warps take a row's
// neighbouring column blocks (its nonzeros stay in cache). The warp's groups split the row's
// nonzeros. beta == 0 never reads out (NaN-safe); alpha == 0 still multiplies (PyTorch's
// sparse addmm and the SparseCPU kernel propagate inf/NaN of A).
template <class T, class A>
__device__ void spmm(T* out, const long long* rowptr, const long long* cols, const T* values,
                     const T* dense, A alpha, A beta, long long M, long long N, int G) {
    const int lane = threadIdx.x & 31;
    const int sub = lane & (G - 1), grp = lane / G, ngroups = 32 / G;
    const long long nblocks = (N + G - 1) / G;
    for (long long u = warp_index(); u < M * nblocks; u += warp_total()) {
        const long long row = u / nblocks;
        const long long n = (u - row * nblocks) * G + sub;
        const long long start = rowptr[row], end = rowptr[row + 1];
        A acc = A(0);
        if (n < N)
            for (long long p = start + grp; p < end; p += ngroups)
                acc += gt::load<A>(values[p]) * gt::load<A>(dense[cols[p] * N + n]);
        acc = sum_across_groups(acc, G);
        if (grp == 0 && n < N) {
            T* o = out + row * N + n;
            A r = alpha * acc;
            if (beta != A(0)) r = beta * gt::load<A>(*o) + r;
            *o = gt::store<T>(r);
        }
    }
}

// ---- SDDMM: out[i] = dot(a[rows[i], :], b[cols[i], :]) -------------------------------------
// a [M, N], b [K, N] contiguous. Each group of G lanes takes one nonzero (32 / G per warp) and
// finishes its dot product with shuffles inside the group.
template <class T, class A>
__device__ void sddmm(T* out, const long long* rows, const long long* cols, const T* a,
                      const T* b, long long nnz, long long N, int G) {
    const int lane = threadIdx.x & 31;
    const int sub = lane & (G - 1), grp = lane / G, ngroups = 32 / G;
    for (long long u = warp_index(); u * ngroups < nnz; u += warp_total()) {
        const long long i = u * ngroups + grp;
        A acc = A(0);
        if (i < nnz) {
            const T* ar = a + rows[i] * N;
            const T* br = b + cols[i] * N;
            for (long long n = sub; n < N; n += G) acc += gt::load<A>(ar[n]) * gt::load<A>(br[n]);
        }
        acc = sum_within_group(acc, G);
        if (i < nnz && sub == 0) out[i] = gt::store<T>(acc);
    }
}

// ---- segment softmax -------------------------------------------------------------------------
// values/out [nnz, F]; segment s holds entries order[segptr[s] .. segptr[s+1]). A warp per
// (segment, block of G columns): max, sum of exp(v - max), then the writes. Entries outside
// the tensor are absent (each segment normalises over its own entries only).
template <class T, class A>
__device__ void segment_softmax(T* out, const T* values, const long long* order,
                                const long long* segptr, long long nseg, long long F, int G,
                                int log_softmax) {
    const int lane = threadIdx.x & 31;
    const int sub = lane & (G - 1), grp = lane / G, ngroups = 32 / G;
    const long long nblocks = (F + G - 1) / G;
    for (long long u = warp_index(); u < nseg * nblocks; u += warp_total()) {
        const long long s = u / nblocks;
        const long long f = (u - s * nblocks) * G + sub;
        const long long lo = segptr[s], hi = segptr[s + 1];
        const bool ok = f < F;
        A mx = neg_inf<A>();
        if (ok)
            for (long long p = lo + grp; p < hi; p += ngroups)
                mx = max_nan(mx, gt::load<A>(values[order[p] * F + f]));
        mx = max_across_groups(mx, G);
        A sum = A(0);
        if (ok)
            for (long long p = lo + grp; p < hi; p += ngroups)
                sum += gt::exp(gt::load<A>(values[order[p] * F + f]) - mx);
        sum = sum_across_groups(sum, G);
        if (ok) {
            const A lse = gt::log(sum);
            for (long long p = lo + grp; p < hi; p += ngroups) {
                const long long at = order[p] * F + f;
                const A v = gt::load<A>(values[at]) - mx;
                out[at] = gt::store<T>(log_softmax ? v - lse : gt::exp(v) / sum);
            }
        }
    }
}

// grad_in from grad_out and the forward's out, same layout as segment_softmax:
//   softmax:     grad_in = out * (grad_out - sum_seg(grad_out * out))
//   log_softmax: grad_in = grad_out - exp(out) * sum_seg(grad_out)
template <class T, class A>
__device__ void segment_softmax_backward(T* grad_in, const T* grad_out, const T* out,
                                         const long long* order, const long long* segptr,
                                         long long nseg, long long F, int G, int log_softmax) {
    const int lane = threadIdx.x & 31;
    const int sub = lane & (G - 1), grp = lane / G, ngroups = 32 / G;
    const long long nblocks = (F + G - 1) / G;
    for (long long u = warp_index(); u < nseg * nblocks; u += warp_total()) {
        const long long s = u / nblocks;
        const long long f = (u - s * nblocks) * G + sub;
        const long long lo = segptr[s], hi = segptr[s + 1];
        const bool ok = f < F;
        A sum = A(0);
        if (ok)
            for (long long p = lo + grp; p < hi; p += ngroups) {
                const long long at = order[p] * F + f;
                const A go = gt::load<A>(grad_out[at]);
                sum += log_softmax ? go : go * gt::load<A>(out[at]);
            }
        sum = sum_across_groups(sum, G);
        if (ok)
            for (long long p = lo + grp; p < hi; p += ngroups) {
                const long long at = order[p] * F + f;
                const A go = gt::load<A>(grad_out[at]), o = gt::load<A>(out[at]);
                grad_in[at] = gt::store<T>(log_softmax ? go - gt::exp(o) * sum
                                                       : o * (go - sum));
            }
    }
}

}  // namespace gtsp

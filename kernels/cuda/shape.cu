// Shape and gather kernels of the CUDA backend (launched from kernels/cuda/ops/shape.py).
//
// Every op here only moves elements, so the kernels are instantiated per element *size*
// (unsigned 1/2/4/8-byte words: bits are bits) rather than per dtype. Tensors arrive as their
// storage's base pointer plus element offsets and strides in a small int64 metadata array
// (`meta`), so non-contiguous, offset and negatively strided views need no copy and every
// address a kernel forms is an offset from a base it owns. All kernels are grid-stride loops
// over the output's elements in C order.
//
// Index kernels check every index against its dimension before using it: a bad one is never
// dereferenced; it goes to the device's error record (errors.cuh: the first error wins) with
// its bound and dim, which kernels/cuda/errors.py turns into the op's IndexError.
#include "common.cuh"
#include "errors.cuh"

#define GT_NO_ERROR 0x7fffffffffffffffLL

// ---- remap: out[c] = x[f(c)], one coordinate map per dim --------------------------------------
// meta: nd, out offset, x offset, then per dim GT_REMAP_FIELDS values:
//   out size, out stride, x stride, mode, p0, p1, p2, x size
// Modes (s is the x coordinate for out coordinate c):
//   0 identity s = c          1 flip s = size-1-c       2 roll s = c - p0 (+size if < 0)
//   3 tile s = c % size       4 constant pad s = c - p0 (outside [0, size): `fill`)
//   5 replicate s = clamp(c - p0, 0, size-1)            6 reflect s = |c - p0| folded back
//   7 circular s = p0 + (c - p1) mod p2 (p0 = first kept, p1 = left pad, p2 = kept length)
// A coordinate that still falls outside [0, size) writes `fill` (nothing is read).
#define GT_REMAP_FIELDS 8

__device__ __forceinline__ long long gt_remap_coord(long long c, const long long* f) {
    const long long mode = f[3], p0 = f[4], p1 = f[5], p2 = f[6], size = f[7];
    long long s = c;
    switch (mode) {
        case 1: s = size - 1 - c; break;
        case 2: s = c - p0; if (s < 0) s += size; break;
        case 3: s = c % size; break;
        case 4: s = c - p0; break;
        case 5: s = c - p0; s = s < 0 ? 0 : (s >= size ? size - 1 : s); break;
        case 6: s = c - p0; if (s < 0) s = -s; if (s >= size) s = 2 * (size - 1) - s; break;
        case 7: s = (c - p1) % p2; if (s < 0) s += p2; s += p0; break;
        default: break;
    }
    return s;
}

template <class U>
__device__ void gt_remap(U* __restrict__ out, const U* __restrict__ x, U fill, long long n,
                         const long long* __restrict__ meta) {
    const int nd = (int)meta[0];
    for (GT_GRID_STRIDE(i, n)) {
        long long rest = i, o = meta[1], xo = meta[2];
        bool inside = true;
        for (int d = nd - 1; d >= 0; --d) {
            const long long* f = meta + 3 + d * GT_REMAP_FIELDS;
            const long long c = rest % f[0];
            rest /= f[0];
            o += c * f[1];
            const long long s = gt_remap_coord(c, f);
            if (s < 0 || s >= f[7]) inside = false;
            else xo += s * f[2];
        }
        out[o] = inside ? x[xo] : fill;
    }
}

// ---- tril / triu --------------------------------------------------------------------------------
// meta: nd, out offset, x offset, row dim (the column dim follows it), shape[nd], out
// strides[nd], x strides[nd]. Elements on the kept side of diagonal k (col - row <= k for tril,
// >= k for triu) are copied, the rest zeroed (all-zero bits are zero in every dtype). In place
// (out == x) each element reads itself.
template <class U>
__device__ void gt_tri(U* out, const U* x, long long n, long long k, int upper,
                       const long long* __restrict__ meta) {
    const int nd = (int)meta[0];
    const int rdim = (int)meta[3];
    const long long* shape = meta + 4;
    const long long* ost = shape + nd;
    const long long* xst = ost + nd;
    for (GT_GRID_STRIDE(i, n)) {
        long long rest = i, o = meta[1], xo = meta[2], row = 0, col = 0;
        for (int d = nd - 1; d >= 0; --d) {
            const long long c = rest % shape[d];
            rest /= shape[d];
            o += c * ost[d];
            xo += c * xst[d];
            if (d == rdim + 1) col = c;
            if (d == rdim) row = c;
        }
        const bool keep = upper ? (col - row >= k) : (col - row <= k);
        out[o] = keep ? x[xo] : U(0);
    }
}

// ---- gather by index tensors ---------------------------------------------------------------------
// out[c] = x[xoff + sum_d c_d * xs_d + sum_k idx_k(c) * bs_k] with idx_k(c) = idx[ioff_k +
// sum_d c_d * is_kd] checked against [0, size_k) (negative values first wrapped by size_k
// with `wrap`). One kernel serves gather, index_select, take and advanced indexing: they differ
// only in the strides. All K index tensors live in one buffer (`idx`, element offsets ioff_k).
// meta: nd, out offset, x offset, K, wrap, shape[nd], out strides[nd], x strides[nd], then
// per index tensor: ioff, size, bs, dim, is[nd]. A bad index is reported to the error record
// `err` as error site `site` (value, size, dim) and its element is skipped.
template <class U, class I>
__device__ void gt_index_gather(U* __restrict__ out, const U* __restrict__ x,
                                const I* __restrict__ idx, long long n, long long* err,
                                long long site, const long long* __restrict__ meta) {
    const int nd = (int)meta[0];
    const int K = (int)meta[3];
    const bool wrap = meta[4] != 0;
    const long long* shape = meta + 5;
    const long long* ost = shape + nd;
    const long long* xst = ost + nd;
    const long long* per = xst + nd;  // K records of (4 + nd) values
    for (GT_GRID_STRIDE(i, n)) {
        long long o = meta[1], xo = meta[2];
        long long rest = i;
        for (int d = nd - 1; d >= 0; --d) {
            const long long c = rest % shape[d];
            rest /= shape[d];
            o += c * ost[d];
            xo += c * xst[d];
        }
        bool ok = true;
        for (int k = 0; k < K; ++k) {
            const long long* r = per + k * (4 + nd);
            long long io = r[0];
            rest = i;
            for (int d = nd - 1; d >= 0; --d) {
                io += (rest % shape[d]) * r[4 + d];
                rest /= shape[d];
            }
            const long long given = (long long)idx[io];
            const long long v = wrap && given < 0 ? given + r[1] : given;
            if (v < 0 || v >= r[1]) {
                gt_report_error(err, site, given, r[1], r[3]);
                ok = false;
                break;
            }
            xo += v * r[2];
        }
        if (ok) out[o] = x[xo];
    }
}

// ---- repeat_interleave ----------------------------------------------------------------------------
// Inclusive prefix sum of the n repeats (any stride) into cum, by one block: each thread sums
// a contiguous chunk, the chunk totals are scanned in shared memory, then each thread writes
// its chunk's running sums. res[0] gets the first negative repeat's position (GT_NO_ERROR if
// none) and res[1] the total (the output size the launcher reads back).
#define GT_SCAN_THREADS 256

template <class I>
__device__ void gt_repeats_scan(const I* __restrict__ rep, long long rstride,
                                long long* __restrict__ cum, long long n, long long* res) {
    __shared__ long long part[GT_SCAN_THREADS];
    const int t = threadIdx.x;
    const long long chunk = (n + GT_SCAN_THREADS - 1) / GT_SCAN_THREADS;
    const long long lo = t * chunk;
    const long long hi = lo + chunk < n ? lo + chunk : n;
    long long s = 0;
    for (long long j = lo; j < hi; ++j) {
        const long long v = (long long)rep[j * rstride];
        if (v < 0) atomicMin(res, j);
        s += v < 0 ? 0 : v;
    }
    part[t] = s;
    __syncthreads();
    for (int off = 1; off < GT_SCAN_THREADS; off <<= 1) {
        const long long add = t >= off ? part[t - off] : 0;
        __syncthreads();
        part[t] += add;
        __syncthreads();
    }
    long long run = t ? part[t - 1] : 0;
    for (long long j = lo; j < hi; ++j) {
        const long long v = (long long)rep[j * rstride];
        run += v < 0 ? 0 : v;
        cum[j] = run;
    }
    if (t == GT_SCAN_THREADS - 1) res[1] = part[t];
}

// out[.., j, ..] = x[.., s, ..] along dim with s the first position whose running total
// exceeds j (binary search in cum). meta: nd, x offset, dim, shape[nd] (out's), x strides[nd];
// out is contiguous.
template <class U>
__device__ void gt_repeat_interleave(U* __restrict__ out, const U* __restrict__ x,
                                     const long long* __restrict__ cum, long long nrep,
                                     long long n, const long long* __restrict__ meta) {
    const int nd = (int)meta[0];
    const int dim = (int)meta[2];
    const long long* shape = meta + 3;
    const long long* xst = shape + nd;
    for (GT_GRID_STRIDE(i, n)) {
        long long rest = i, xo = meta[1];
        for (int d = nd - 1; d >= 0; --d) {
            long long c = rest % shape[d];
            rest /= shape[d];
            if (d == dim) {
                long long lo = 0, hi = nrep;  // first s with cum[s] > c
                while (lo < hi) {
                    const long long mid = (lo + hi) >> 1;
                    if (cum[mid] > c) hi = mid;
                    else lo = mid + 1;
                }
                c = lo < nrep ? lo : nrep - 1;  // (never past the end: n is the total)
            }
            xo += c * xst[d];
        }
        out[i] = x[xo];
    }
}

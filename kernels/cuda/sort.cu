// Sorting, searching and data-dependent-size kernels of the CUDA backend
// (launched by kernels/cuda/ops/sort.py).
//
// Sorting works on 64-bit order keys: every dtype maps to an unsigned key whose unsigned order
// is the value order PyTorch sorts by (-0.0 == 0.0, every NaN one key above +inf), inverted for
// descending sorts. Rows sort as (key, index) pairs, which are all distinct, so any correct sort
// is the stable sort: tiles of a row (or several short rows) sort in shared memory with a
// bitonic network, then global merge passes double the sorted runs (each element finds its
// place in the other run by binary search; no atomics, deterministic).
//
// Ops whose output size depends on the data (nonzero, masked_select, unique) mark elements with
// 0/1 flags, take an exclusive scan (per-block sums, one block scanning those, then per-block
// scans with their offsets) whose total the launcher reads back to size the output, then
// scatter each marked element to its scanned position.
//
// Strided tensors: `meta` arrays hold {ndim, shape[ndim], strides[ndim]} (element strides, dims
// in the logical order the kernel walks); a null meta means contiguous.
#include "common.cuh"
#include "scalar_fns.cuh"

#define GT_NAN_KEY 0xffffffffffffffffull
#define GT_SIGN64 0x8000000000000000ull
#define GT_PAD_INDEX 0x7fffffff

typedef unsigned long long gt_u64;

// ---- addressing ----------------------------------------------------------------------------
// Element offset of logical (C-order) index L of a tensor described by meta (null: contiguous).
__device__ __forceinline__ long long gt_sort_offset(long long L, const long long* meta) {
    if (meta == nullptr) return L;
    const int nd = (int)meta[0];
    long long off = 0;
    for (int k = nd - 1; k >= 0; --k) {
        const long long s = meta[1 + k];
        off += (L % s) * meta[1 + nd + k];
        L /= s;
    }
    return off;
}

// ---- order keys ----------------------------------------------------------------------------
__device__ __forceinline__ gt_u64 gt_key_double(double d) {
    if (d != d) return GT_NAN_KEY;
    if (d == 0.0) d = 0.0;  // -0.0 sorts equal to 0.0
    const gt_u64 b = (gt_u64)__double_as_longlong(d);
    return (b & GT_SIGN64) ? ~b : (b | GT_SIGN64);
}
template <class T>
__device__ __forceinline__ gt_u64 gt_key(T v) {
    if constexpr (gt::is_float<T>::value) return gt_key_double((double)v);
    else if constexpr (gt::is_signed_int<T>::value) return (gt_u64)(long long)v ^ GT_SIGN64;
    else return (gt_u64)v;
}
__device__ __forceinline__ gt_u64 gt_key(__half v) { return gt_key_double((double)__half2float(v)); }
__device__ __forceinline__ gt_u64 gt_key(__nv_bfloat16 v) {
    return gt_key_double((double)__bfloat162float(v));
}

// keys[L] = key of x at logical index L (inverted when descending).
template <class T>
__device__ void gt_sort_keys(const T* x, const long long* xmeta, gt_u64* keys, long long total,
                             int descending) {
    for (GT_GRID_STRIDE(L, total)) {
        const gt_u64 k = gt_key(x[gt_sort_offset(L, xmeta)]);
        keys[L] = descending ? ~k : k;
    }
}

// ---- tile sort: bitonic network in shared memory ------------------------------------------
// (row, key, index) lexicographic order; rows only differ when a tile packs several short rows.
__device__ __forceinline__ bool gt_pair_less(int ra, gt_u64 ka, int ia, int rb, gt_u64 kb,
                                             int ib) {
    if (ra != rb) return ra < rb;
    if (ka != kb) return ka < kb;
    return ia < ib;
}

// Sorts tiles of `tile` (a power of two, 2 * blockDim.x) elements. Rows of length n <= tile pack
// `tile / n` whole rows per tile; longer rows split into ceil(n / tile) tiles each. idx_in null:
// an element's index is its position in its row.
__device__ void gt_tile_sort(const gt_u64* keys_in, const int* idx_in, gt_u64* keys_out,
                             int* idx_out, long long n, long long total, int tile) {
    GT_DYNAMIC_SHARED(gt_u64, skey);
    int* sidx = reinterpret_cast<int*>(skey + tile);
    int* srow = sidx + tile;
    const bool packed = n <= tile;
    const long long rows_per_tile = packed ? tile / n : 1;
    const long long tiles_per_row = packed ? 1 : (n + tile - 1) / tile;
    const long long rows = total / n;
    const long long ntiles = packed ? (rows + rows_per_tile - 1) / rows_per_tile
                                    : rows * tiles_per_row;
    for (long long t = blockIdx.x; t < ntiles; t += gridDim.x) {
        long long start, len;
        if (packed) {
            start = t * rows_per_tile * n;
            len = min(rows_per_tile * n, total - start);
        } else {
            const long long c = (t % tiles_per_row) * tile;
            start = (t / tiles_per_row) * n + c;
            len = min((long long)tile, n - c);
        }
        const long long row0 = start / n;
        for (int e = threadIdx.x; e < tile; e += blockDim.x) {
            if (e < len) {
                const long long p = start + e;
                skey[e] = keys_in[p];
                sidx[e] = idx_in ? idx_in[p] : (int)(p % n);
                srow[e] = (int)(p / n - row0);
            } else {
                skey[e] = GT_NAN_KEY;
                sidx[e] = GT_PAD_INDEX;
                srow[e] = GT_PAD_INDEX;
            }
        }
        __syncthreads();
        for (int k = 2; k <= tile; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                for (int i = threadIdx.x; i < tile / 2; i += blockDim.x) {
                    const int lo = 2 * j * (i / j) + (i % j);
                    const int hi = lo + j;
                    const bool up = (lo & k) == 0;
                    const bool swap = gt_pair_less(srow[hi], skey[hi], sidx[hi], srow[lo],
                                                   skey[lo], sidx[lo]) == up;
                    if (swap) {
                        const gt_u64 tk = skey[lo]; skey[lo] = skey[hi]; skey[hi] = tk;
                        const int ti = sidx[lo]; sidx[lo] = sidx[hi]; sidx[hi] = ti;
                        const int tr = srow[lo]; srow[lo] = srow[hi]; srow[hi] = tr;
                    }
                }
                __syncthreads();
            }
        }
        for (int e = threadIdx.x; e < len; e += blockDim.x) {
            keys_out[start + e] = skey[e];
            idx_out[start + e] = sidx[e];
        }
        __syncthreads();
    }
}

// ---- merge pass: sorted runs of `width` within each row of length n become runs of 2*width ----
// Count of elements of the sorted run [lo, hi) ordered before (k, i).
__device__ __forceinline__ long long gt_rank_in(const gt_u64* keys, const int* idx, long long lo,
                                               long long hi, gt_u64 k, int i) {
    long long a = lo, b = hi;
    while (a < b) {
        const long long mid = (a + b) >> 1;
        if (keys[mid] < k || (keys[mid] == k && idx[mid] < i)) a = mid + 1;
        else b = mid;
    }
    return a - lo;
}

__device__ void gt_merge_pass(const gt_u64* keys_in, const int* idx_in, gt_u64* keys_out,
                              int* idx_out, long long n, long long total, long long width) {
    for (GT_GRID_STRIDE(L, total)) {
        const long long base = (L / n) * n;
        const long long i = L - base;
        const long long s = (i / (2 * width)) * (2 * width);
        const long long mid = min(s + width, n);
        const long long end = min(s + 2 * width, n);
        const gt_u64 k = keys_in[L];
        const int ix = idx_in[L];
        long long dst;
        if (i < mid) dst = i + gt_rank_in(keys_in, idx_in, base + mid, base + end, k, ix);
        else dst = s + (i - mid) + gt_rank_in(keys_in, idx_in, base + s, base + mid, k, ix);
        keys_out[base + dst] = k;
        idx_out[base + dst] = ix;
    }
}

// ---- lexicographic row sort (unique along a dim): merge passes over row numbers ---------------
// Rows are the n rows of the (n, m) key matrix K; ties keep row order (stable).
__device__ __forceinline__ bool gt_row_less(const gt_u64* K, long long m, int a, int b) {
    const gt_u64* ra = K + (long long)a * m;
    const gt_u64* rb = K + (long long)b * m;
    for (long long c = 0; c < m; ++c)
        if (ra[c] != rb[c]) return ra[c] < rb[c];
    return a < b;
}

__device__ void gt_row_merge_pass(const gt_u64* K, long long m, const int* in, int* out,
                                  long long n, long long width) {
    for (GT_GRID_STRIDE(i, n)) {
        const long long s = (i / (2 * width)) * (2 * width);
        const long long mid = min(s + width, n);
        const long long end = min(s + 2 * width, n);
        const int me = in[i];
        long long a, b;
        if (i < mid) { a = mid; b = end; }
        else { a = s; b = mid; }
        const long long lo0 = a;
        while (a < b) {
            const long long h = (a + b) >> 1;
            if (gt_row_less(K, m, in[h], me)) a = h + 1;
            else b = h;
        }
        const long long rank = a - lo0;
        const long long dst = i < mid ? i + rank : s + (i - mid) + rank;
        out[dst] = me;
    }
}

__device__ void gt_iota(int* out, long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = (int)i;
}

// ---- writing sorted results ----------------------------------------------------------------
// For each row and j < count: the element at sorted position start + j goes to output position
// j: its value (raw copy of W-sized words) to vals and its index to inds (either may be null).
template <class W>
__device__ void gt_sort_write(const W* x, const long long* xmeta, const int* idx, long long n,
                              long long start, long long count, long long rows, W* vals,
                              const long long* vmeta, long long* inds, const long long* imeta) {
    for (GT_GRID_STRIDE(L, rows * count)) {
        const long long row = L / count;
        const long long j = L - row * count;
        const int src = idx[row * n + start + j];
        if (vals) vals[gt_sort_offset(L, vmeta)] = x[gt_sort_offset(row * n + src, xmeta)];
        if (inds) inds[gt_sort_offset(L, imeta)] = src;
    }
}

// ---- exclusive scan of 0/1 flags -----------------------------------------------------------
#define GT_SCAN_BLOCK 256
#define GT_SCAN_ITEMS 8
#define GT_SCAN_CHUNK (GT_SCAN_BLOCK * GT_SCAN_ITEMS)

// Exclusive block-wide scan of v (blockDim.x == GT_SCAN_BLOCK); *total gets the block's sum.
__device__ long long gt_block_scan(long long v, long long* total) {
    __shared__ long long warp_sums[GT_SCAN_BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long inc = v;
    for (int d = 1; d < 32; d <<= 1) {
        const long long o = __shfl_up_sync(GT_FULL_MASK, inc, d);
        if (lane >= d) inc += o;
    }
    if (lane == 31) warp_sums[warp] = inc;
    __syncthreads();
    long long before = 0, all = 0;
    for (int w = 0; w < GT_SCAN_BLOCK / 32; ++w) {
        if (w < warp) before += warp_sums[w];
        all += warp_sums[w];
    }
    __syncthreads();
    *total = all;
    return before + inc - v;
}

// sums[b] = sum of flags in chunk b.
__device__ void gt_scan_reduce(const int* flags, long long n, long long* sums) {
    const long long nchunks = (n + GT_SCAN_CHUNK - 1) / GT_SCAN_CHUNK;
    for (long long b = blockIdx.x; b < nchunks; b += gridDim.x) {
        long long s = 0;
        for (int e = threadIdx.x; e < GT_SCAN_CHUNK; e += GT_SCAN_BLOCK) {
            const long long p = b * GT_SCAN_CHUNK + e;
            if (p < n) s += flags[p];
        }
        long long all;
        gt_block_scan(s, &all);
        if (threadIdx.x == 0) sums[b] = all;
    }
}

// One block: sums becomes its exclusive scan; *total = the sum of all.
__device__ void gt_scan_sums(long long* sums, long long nchunks, long long* total) {
    long long carry = 0;
    for (long long b0 = 0; b0 < nchunks; b0 += GT_SCAN_BLOCK) {
        const long long b = b0 + threadIdx.x;
        const long long v = b < nchunks ? sums[b] : 0;
        long long all;
        const long long ex = gt_block_scan(v, &all);
        if (b < nchunks) sums[b] = carry + ex;
        carry += all;
    }
    if (threadIdx.x == 0) *total = carry;
}

// out[p] = number of flags before p.
__device__ void gt_scan_apply(const int* flags, long long n, const long long* sums,
                              long long* out) {
    const long long nchunks = (n + GT_SCAN_CHUNK - 1) / GT_SCAN_CHUNK;
    for (long long b = blockIdx.x; b < nchunks; b += gridDim.x) {
        const long long first = b * GT_SCAN_CHUNK + (long long)threadIdx.x * GT_SCAN_ITEMS;
        long long s = 0;
        for (int e = 0; e < GT_SCAN_ITEMS; ++e)
            if (first + e < n) s += flags[first + e];
        long long all;
        long long run = sums[b] + gt_block_scan(s, &all);
        for (int e = 0; e < GT_SCAN_ITEMS; ++e) {
            if (first + e < n) {
                out[first + e] = run;
                run += flags[first + e];
            }
        }
    }
}

// ---- nonzero / masked_select ----------------------------------------------------------------
// flags[L] = x[L] != 0; `comps` scalar components per element (2 for complex).
template <class T>
__device__ void gt_nonzero_flags(const T* x, const long long* xmeta, long long total, int comps,
                                 int* flags) {
    for (GT_GRID_STRIDE(L, total)) {
        const long long off = gt_sort_offset(L, xmeta) * comps;
        bool nz = false;
        for (int c = 0; c < comps; ++c) nz = nz || gt::load<double>(x[off + c]) != 0.0;
        flags[L] = nz ? 1 : 0;
    }
}

// out[pos[L], :] = coordinates of L (shape in xmeta's shape, or in shape when xmeta is null).
__device__ void gt_nonzero_write(const int* flags, const long long* pos, long long total,
                                 const long long* shape, int nd, long long* out) {
    for (GT_GRID_STRIDE(L, total)) {
        if (!flags[L]) continue;
        long long rest = L;
        long long* row = out + pos[L] * nd;
        for (int k = nd - 1; k >= 0; --k) {
            row[k] = rest % shape[k];
            rest /= shape[k];
        }
    }
}

__device__ void gt_mask_flags(const unsigned char* mask, const long long* mmeta, long long total,
                              int* flags) {
    for (GT_GRID_STRIDE(L, total)) flags[L] = mask[gt_sort_offset(L, mmeta)] != 0;
}

// out[pos[L]] = x[L] where flagged; each element is `comps` words of type W.
template <class W>
__device__ void gt_select_write(const W* x, const long long* xmeta, const int* flags,
                                const long long* pos, long long total, int comps, W* out) {
    for (GT_GRID_STRIDE(L, total)) {
        if (!flags[L]) continue;
        const long long src = gt_sort_offset(L, xmeta) * comps;
        for (int c = 0; c < comps; ++c) out[pos[L] * comps + c] = x[src + c];
    }
}

// ---- unique ----------------------------------------------------------------------------------
// Over sorted (or original) order of the n rows of K (n, m): flags[i] = row order[i] starts a
// new group (it differs from the previous one; NaN never equals anything).
__device__ void gt_unique_flags(const gt_u64* K, long long m, const int* order, long long n,
                                int is_float, int* flags) {
    for (GT_GRID_STRIDE(i, n)) {
        int f = i == 0;
        if (!f) {
            const gt_u64* a = K + (long long)order[i] * m;
            const gt_u64* b = K + (long long)order[i - 1] * m;
            for (long long c = 0; c < m && !f; ++c)
                f = a[c] != b[c] || (is_float && (a[c] == GT_NAN_KEY || b[c] == GT_NAN_KEY));
        }
        flags[i] = f;
    }
}

// inverse[order[i]] = group of i; first[group] = i for the first member of each group.
__device__ void gt_unique_groups(const int* flags, const long long* pos, const int* order,
                                 long long n, long long* inverse, long long* first) {
    for (GT_GRID_STRIDE(i, n)) {
        const long long g = pos[i] + flags[i] - 1;
        if (inverse) inverse[order[i]] = g;
        if (flags[i]) first[g] = i;
    }
}

__device__ void gt_unique_counts(const long long* first, long long groups, long long n,
                                 long long* counts) {
    for (GT_GRID_STRIDE(g, groups)) counts[g] = (g + 1 < groups ? first[g + 1] : n) - first[g];
}

// values (pre, groups, post) contiguous: slice g is row order[first[g]] of the moved input, whose
// logical (moved) index is row * m + j with m = pre * post.
template <class W>
__device__ void gt_unique_values(const W* x, const long long* xmeta, const int* order,
                                 const long long* first, long long groups, long long pre,
                                 long long post, int comps, W* out) {
    const long long m = pre * post;
    for (GT_GRID_STRIDE(t, groups * m)) {
        const long long g = t / m;
        const long long j = t - g * m;
        const long long row = order[first[g]];
        const long long src = gt_sort_offset(row * m + j, xmeta) * comps;
        const long long dst = ((j / post) * groups + g) * post + j % post;
        for (int c = 0; c < comps; ++c) out[dst * comps + c] = x[src + c];
    }
}

// ---- searchsorted ----------------------------------------------------------------------------
// out[L] = x at logical index L (through gather: row-wise positions, as sorter gives them),
// rounded to R (the compute dtype's precision) and stored as O (long long or double).
template <class T, class R, class O>
__device__ void gt_stage(const T* x, const long long* xmeta, const long long* gather,
                         long long row_len, long long total, O* out) {
    for (GT_GRID_STRIDE(L, total)) {
        long long src = L;
        if (gather) {  // sorter positions were bounds-checked by the frontend; clamp regardless
            const long long g = gather[L];
            src = (L / row_len) * row_len + (g < 0 ? 0 : (g >= row_len ? row_len - 1 : g));
        }
        out[L] = (O)gt::load<R>(x[gt_sort_offset(src, xmeta)]);
    }
}

// PyTorch's bounds use raw comparisons, so NaN boundaries / values behave as in PyTorch.
template <class C, class O>
__device__ void gt_searchsorted(const C* bnd, long long n, int per_row, const C* vals,
                                long long m, long long total, int right, O* out,
                                const long long* ometa) {
    for (GT_GRID_STRIDE(L, total)) {
        const C* b = per_row ? bnd + (L / m) * n : bnd;
        const C v = vals[L];
        long long lo = 0, hi = n;
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            const C bm = b[mid];
            if (right ? !(bm > v) : !(bm >= v)) lo = mid + 1;
            else hi = mid;
        }
        out[gt_sort_offset(L, ometa)] = (O)lo;
    }
}

// ---- bincount / histc ----------------------------------------------------------------------
__device__ void gt_zero_u64(gt_u64* out, long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = 0;
}

// The frontend sized out from the inputs' max and rejected negatives; the guard only makes sure
// no value can ever address memory outside out.
template <class T>
__device__ void gt_bincount_count(const T* x, const long long* xmeta, long long n,
                                  long long bins, gt_u64* out) {
    for (GT_GRID_STRIDE(i, n)) {
        const long long v = (long long)x[gt_sort_offset(i, xmeta)];
        if (v >= 0 && v < bins) atomicAdd(out + v, 1ull);
    }
}

// Weighted: keys hold the inputs sorted stably (bin members in index order), so each bin sums
// its weights in index order in double, as the CPU backend (NumPy's bincount) does.
template <class W, class O>
__device__ void gt_bincount_weighted(const gt_u64* keys, const int* idx, long long n,
                                     const W* w, const long long* wmeta, long long bins,
                                     gt_u64 flip, O* out) {
    for (GT_GRID_STRIDE(b, bins)) {
        const gt_u64 key = (gt_u64)b ^ flip;  // bin b's order key (flip: signed input dtypes)
        const long long lo = gt_rank_in(keys, idx, 0, n, key, -1);
        double s = 0.0;
        for (long long p = lo; p < n && keys[p] == key; ++p)
            s += gt::load<double>(w[gt_sort_offset(idx[p], wmeta)]);
        out[b] = (O)s;
    }
}

// Bin b holds lo + b*w <= v < lo + (b+1)*w (v == hi in the last bin), computed in A (the
// input's precision; float rounded to 16 bits per operation for 16-bit floats) as the CPU
// backend does; NaN and outliers skip.
template <class T, class A>
__device__ void gt_histc_count(const T* x, const long long* xmeta, long long n, long long bins,
                               double lo, double hi, gt_u64* counts) {
    const A lo_t = (A)lo, hi_t = (A)hi;
    for (GT_GRID_STRIDE(i, n)) {
        const A v = gt::load<A>(x[gt_sort_offset(i, xmeta)]);
        if (!(v >= lo_t && v <= hi_t)) continue;
        // 16-bit inputs round each operation's float result, as c10's Half/BFloat16 do
        const auto r = [](A u) { return gt::load<A>(gt::store<T>(u)); };
        const A q = r(r(r(v - lo_t) * r((A)bins)) / r(hi_t - lo_t));
        // q NaN (an empty range: lo == hi in A) or inf (a 16-bit overflow) becomes PyTorch's
        // index INT64_MIN, which its kernel's pointer arithmetic wraps to bin 0
        long long p = q < (A)9.2233720368547758e18 ? (long long)q : 0;
        if (p > bins - 1) p = bins - 1;
        atomicAdd(counts + p, 1ull);
    }
}

template <class T>
__device__ void gt_counts_store(const gt_u64* counts, long long n, T* out) {
    for (GT_GRID_STRIDE(i, n)) out[i] = gt::store<T>((double)counts[i]);
}

// Scatter / in-place indexing kernels of the CUDA backend: scatter, scatter_reduce, index_add,
// index_copy, index_fill (one strided "walk" over index positions), index_put (advanced
// indexing writes), masked_fill and masked_scatter (a prefix sum over the mask).
//
// Why this shape:
//  * Every index is checked on the device. A bad one is never dereferenced: its thread reports
//    it (value, size, dim) to the device's error record (errors.cuh; the first error wins) and
//    moves on. kernels/cuda/errors.py raises PyTorch's IndexError naming the index and the size,
//    right after the launch or at the next synchronising call.
//  * Reductions where several positions hit one element use atomics: native atomicAdd/Max/Min
//    where CUDA has an overload for the type, otherwise a compare-and-swap loop on the element's
//    bits (on the containing 32-bit word for 1- and 2-byte types, as CUDA has no narrower CAS
//    on sm_70). Complex sums are two real atomicAdds; complex prod/amax/amin (16-byte
//    complex128 has no CAS) take a per-element spin lock from a scratch array.
//  * Plain assignment with duplicate targets is made deterministic, matching the CPU backend's
//    "last position wins" (C order over the index): a claim pass records, per target slot, the
//    largest key that writes it (atomicMax into an int scratch), then a write pass lets only
//    that key store. PyTorch leaves these cases undefined on CUDA; we keep the CPU's answer.
//  * Metadata (shapes, strides) travels in one small int64 device array per launch; kernels
//    are grid-stride loops over a bounded grid.
#include "common.cuh"
#include "errors.cuh"
#include "scalar_fns.cuh"

#define GT_SC_MAX_DIMS 16

// Reduction codes (match kernels/cuda/ops/scatter.py).
#define GT_OP_ASSIGN 0
#define GT_OP_SUM 1
#define GT_OP_PROD 2
#define GT_OP_AMAX 3
#define GT_OP_AMIN 4

// Walk modes.
#define GT_MODE_REDUCE 0  // apply op atomically (op ASSIGN: racy store, for same-value fills)
#define GT_MODE_CLAIM 1   // winner[slot] = max key
#define GT_MODE_WRITE 2   // store where winner[slot] == key
#define GT_MODE_COUNT 3   // counts[slot] += 1 (scatter_reduce "mean")
#define GT_MODE_STORE 4   // plain store (index_put of a value equal for colliding positions)

namespace gtsc {

// ---- bits of a value, for compare-and-swap -------------------------------------------------
__device__ __forceinline__ unsigned to_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned long long to_bits(double v) {
    return (unsigned long long)__double_as_longlong(v);
}
// __half / __nv_bfloat16 are standard-layout structs whose only member is the unsigned short
// bit pattern, so a pointer to one is a pointer to its bits.
__device__ __forceinline__ unsigned short to_bits(__half v) {
    return *reinterpret_cast<const unsigned short*>(&v);
}
__device__ __forceinline__ unsigned short to_bits(__nv_bfloat16 v) {
    return *reinterpret_cast<const unsigned short*>(&v);
}
__device__ __forceinline__ unsigned char to_bits(bool v) { return v ? 1 : 0; }
__device__ __forceinline__ unsigned char to_bits(unsigned char v) { return v; }
__device__ __forceinline__ unsigned char to_bits(signed char v) { return (unsigned char)v; }
__device__ __forceinline__ unsigned short to_bits(short v) { return (unsigned short)v; }
__device__ __forceinline__ unsigned to_bits(int v) { return (unsigned)v; }
__device__ __forceinline__ unsigned long long to_bits(long long v) {
    return (unsigned long long)v;
}

template <class T> __device__ __forceinline__ T from_bits(unsigned long long b);
template <> __device__ __forceinline__ float from_bits<float>(unsigned long long b) {
    return __uint_as_float((unsigned)b);
}
template <> __device__ __forceinline__ double from_bits<double>(unsigned long long b) {
    return __longlong_as_double((long long)b);
}
template <> __device__ __forceinline__ __half from_bits<__half>(unsigned long long b) {
    __half h;
    *reinterpret_cast<unsigned short*>(&h) = (unsigned short)b;
    return h;
}
template <> __device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(
        unsigned long long b) {
    __nv_bfloat16 h;
    *reinterpret_cast<unsigned short*>(&h) = (unsigned short)b;
    return h;
}
template <> __device__ __forceinline__ bool from_bits<bool>(unsigned long long b) {
    return (b & 0xffu) != 0;
}
template <> __device__ __forceinline__ unsigned char from_bits<unsigned char>(
        unsigned long long b) {
    return (unsigned char)b;
}
template <> __device__ __forceinline__ signed char from_bits<signed char>(unsigned long long b) {
    return (signed char)(unsigned char)b;
}
template <> __device__ __forceinline__ short from_bits<short>(unsigned long long b) {
    return (short)(unsigned short)b;
}
template <> __device__ __forceinline__ int from_bits<int>(unsigned long long b) {
    return (int)(unsigned)b;
}
template <> __device__ __forceinline__ long long from_bits<long long>(unsigned long long b) {
    return (long long)b;
}

// The type a reduction computes in: float for 16-bit floats, 64-bit integers for integers.
template <class T> struct acc { typedef long long type; };
template <> struct acc<float> { typedef float type; };
template <> struct acc<double> { typedef double type; };
template <> struct acc<__half> { typedef float type; };
template <> struct acc<__nv_bfloat16> { typedef float type; };
template <class R> struct acc<gt::complex<R>> { typedef gt::complex<R> type; };

// Whether amax (MAX) / amin replaces the current value a by b: NaN propagates, as in PyTorch.
template <bool MAX, class C> __device__ __forceinline__ bool replaces(C a, C b) {
    return (MAX ? b > a : b < a) || b != b;
}
// Complex values order lexicographically, as NumPy's maximum/minimum (the CPU backend's
// ufunc.at): a stays when it has a NaN part or is >= b (<= for MIN), else b (NaNs included).
template <bool MAX, class R> __device__ __forceinline__ bool replaces(gt::complex<R> a,
                                                                     gt::complex<R> b) {
    if (a.re != a.re || a.im != a.im) return false;
    const bool b_nan = b.re != b.re || b.im != b.im;
    const bool keep = ((MAX ? a.re > b.re : a.re < b.re) && !b_nan) ||
                      (a.re == b.re && (MAX ? a.im >= b.im : a.im <= b.im));
    return !keep;
}

// cur (op)= v, as the CPU backend's walker does it (NaN propagates through amax / amin).
template <class T>
__device__ __forceinline__ T combine(T cur, T v, int op) {
    typedef typename acc<T>::type C;
    const C a = gt::load<C>(cur), b = gt::load<C>(v);
    switch (op) {
        case GT_OP_SUM: return gt::store<T>(a + b);
        case GT_OP_PROD: return gt::store<T>(a * b);
        case GT_OP_AMAX: return replaces<true>(a, b) ? v : cur;
        case GT_OP_AMIN: return replaces<false>(a, b) ? v : cur;
        default: return v;
    }
}

// *addr = combine(*addr, v, op) for complex elements, which no compare-and-swap covers
// (complex128 is 16 bytes): under a per-element spin lock (0 free, 1 held). Volta's
// independent thread scheduling lets lanes of one warp contend safely; the critical section
// sits inside the retry loop, and the element is read and written through volatile (L2).
template <class R>
__device__ void locked_apply(gt::complex<R>* addr, gt::complex<R> v, int op, int* lock) {
    volatile R* parts = reinterpret_cast<volatile R*>(addr);
    bool done = false;
    while (!done) {
        if (atomicCAS(lock, 0, 1) == 0) {
            __threadfence();
            const gt::complex<R> nv = combine(gt::complex<R>(parts[0], parts[1]), v, op);
            parts[0] = nv.re;
            parts[1] = nv.im;
            __threadfence();
            atomicExch(lock, 0);
            done = true;
        }
    }
}

// Compare-and-swap loop applying `combine(., v, op)` to *addr.
template <class T>
__device__ void atomic_cas_apply(T* addr, T v, int op) {
    if constexpr (sizeof(T) == 4) {
        unsigned* word = reinterpret_cast<unsigned*>(addr);
        unsigned old = *word, assumed;
        do {
            assumed = old;
            const T nv = combine<T>(from_bits<T>(assumed), v, op);
            old = atomicCAS(word, assumed, (unsigned)to_bits(nv));
        } while (old != assumed);
    } else if constexpr (sizeof(T) == 8) {
        unsigned long long* word = reinterpret_cast<unsigned long long*>(addr);
        unsigned long long old = *word, assumed;
        do {
            assumed = old;
            const T nv = combine<T>(from_bits<T>(assumed), v, op);
            old = atomicCAS(word, assumed, (unsigned long long)to_bits(nv));
        } while (old != assumed);
    } else {
        // 1- and 2-byte types: CAS the aligned 32-bit word holding the element.
        const unsigned long long a = (unsigned long long)addr;
        unsigned* word = reinterpret_cast<unsigned*>(a & ~3ULL);
        const unsigned shift = (unsigned)(a & 3ULL) * 8u;
        const unsigned lane = sizeof(T) == 1 ? 0xffu : 0xffffu;
        unsigned old = *word, assumed;
        do {
            assumed = old;
            const T cur = from_bits<T>((assumed >> shift) & lane);
            const unsigned nv = ((unsigned)to_bits(combine<T>(cur, v, op)) & lane) << shift;
            old = atomicCAS(word, assumed, (assumed & ~(lane << shift)) | nv);
        } while (old != assumed);
    }
}

template <class A, class B> struct same { static constexpr bool value = false; };
template <class A> struct same<A, A> { static constexpr bool value = true; };

// *addr (op)= v atomically; the native atomics where CUDA has them for T. Complex sums are
// two real atomicAdds; other complex reductions need `lock` (this element's spin lock).
template <class T>
__device__ __forceinline__ void atomic_apply(T* addr, T v, int op, int* lock) {
    if constexpr (gt::is_complex<T>::value) {
        if (op == GT_OP_SUM) {
            atomicAdd(&addr->re, v.re);
            atomicAdd(&addr->im, v.im);
        } else if (op == GT_OP_ASSIGN) {
            *addr = v;
        } else {
            locked_apply(addr, v, op, lock);
        }
        return;
    } else if constexpr (same<T, float>::value || same<T, double>::value) {
        if (op == GT_OP_SUM) { atomicAdd(addr, v); return; }
    } else if constexpr (same<T, int>::value) {
        if (op == GT_OP_SUM) { atomicAdd(addr, v); return; }
        if (op == GT_OP_AMAX) { atomicMax(addr, v); return; }
        if (op == GT_OP_AMIN) { atomicMin(addr, v); return; }
    } else if constexpr (same<T, long long>::value) {
        if (op == GT_OP_SUM) {
            atomicAdd(reinterpret_cast<unsigned long long*>(addr), (unsigned long long)v);
            return;
        }
        if (op == GT_OP_AMAX) { atomicMax(addr, v); return; }
        if (op == GT_OP_AMIN) { atomicMin(addr, v); return; }
    }
    if constexpr (!gt::is_complex<T>::value) {
        if (op == GT_OP_ASSIGN) { *addr = v; return; }
        atomic_cas_apply<T>(addr, v, op);
    }
}

// An index element of any integer width (index tensors may be int8/16/32/64).
__device__ __forceinline__ long long load_index(const void* p, long long off, int isz) {
    switch (isz) {
        case 1: return (long long)static_cast<const signed char*>(p)[off];
        case 2: return (long long)static_cast<const short*>(p)[off];
        case 4: return (long long)static_cast<const int*>(p)[off];
        default: return static_cast<const long long*>(p)[off];
    }
}

// ---- the scatter walk -----------------------------------------------------------------------
// mode REDUCE with a complex prod/amax/amin: `scratch` holds one spin lock per slot (zeros).
// meta: [nd, dim, dim_size, flags, shape[nd], self_stride[nd], index_stride[nd],
//        src_stride[nd], slot_stride[nd]]; flags bit 0: negative indices wrap; bit 1: the
// winner slot is the index value itself and the key the coordinate along dim (index_copy).
// Position q of `shape` writes self[q with q[dim] = index[q]] with src[q] (or `value`).
template <class T, class A>
__device__ void walk(T* __restrict__ self, const void* __restrict__ index, int isz,
                     const T* __restrict__ src, A value, A alpha, int use_alpha,
                     const long long* __restrict__ meta, long long n, int mode, int op,
                     int* __restrict__ scratch, long long* __restrict__ err, long long site) {
    const int nd = (int)meta[0], dim = (int)meta[1];
    const long long size = meta[2], flags = meta[3];
    const long long* shape = meta + 4;
    const long long* tst = shape + nd;
    const long long* ist = tst + nd;
    const long long* sst = ist + nd;
    const long long* cst = sst + nd;
    const bool wrap = (flags & 1) != 0, slot_is_index = (flags & 2) != 0;
    const T scalar = gt::store<T>(value);
    for (GT_GRID_STRIDE(pos, n)) {
        long long rem = pos, toff = 0, ioff = 0, soff = 0, slot = 0, key = 0;
        for (int d = nd - 1; d >= 0; --d) {
            const long long c = rem % shape[d];
            rem /= shape[d];
            ioff += c * ist[d];
            soff += c * sst[d];
            if (d == dim) {
                key = c;
            } else {
                toff += c * tst[d];
                slot += c * cst[d];
            }
        }
        const long long given = load_index(index, ioff, isz);
        const long long j = wrap && given < 0 ? given + size : given;
        if (j < 0 || j >= size) {
            // claim/count passes see every index first; later passes need not report again
            if (mode != GT_MODE_WRITE) gt_report_error(err, site, given, size, dim);
            continue;
        }
        toff += j * tst[dim];
        slot = slot_is_index ? j : slot + j * cst[dim];
        if (mode == GT_MODE_CLAIM) {
            atomicMax(scratch + slot, (int)key);
            continue;
        }
        if (mode == GT_MODE_COUNT) {
            atomicAdd(scratch + slot, 1);
            continue;
        }
        if (mode == GT_MODE_WRITE && scratch[slot] != (int)key) continue;
        T v = src != nullptr ? src[soff] : scalar;
        if (use_alpha) v = gt::store<T>(gt::load<A>(v) * alpha);
        if (mode == GT_MODE_WRITE) self[toff] = v;
        else atomic_apply<T>(self + toff, v, op, scratch != nullptr ? scratch + slot : nullptr);
    }
}

// scatter_reduce "mean": divide each element that received values by how many it combined.
// meta: [nd, shape[nd], stride[nd]] of self.
template <class T>
__device__ void mean_finish(T* __restrict__ self, const int* __restrict__ counts,
                            int include_self, const long long* __restrict__ meta, long long n) {
    const int nd = (int)meta[0];
    const long long* shape = meta + 1;
    const long long* st = shape + nd;
    for (GT_GRID_STRIDE(i, n)) {
        const int c = counts[i];
        // x / 1 is x, except for complex values: PyTorch divides every element by its count
        // (1 where none arrived) with Smith's formula, which turns inf + 1j into inf + nan j
        if (c == 0 && !gt::is_complex<T>::value) continue;
        long long rem = i, off = 0;
        for (int d = nd - 1; d >= 0; --d) {
            off += (rem % shape[d]) * st[d];
            rem /= shape[d];
        }
        const long long total = c + include_self > 0 ? (long long)c + include_self : 1LL;
        if constexpr (gt::is_complex<T>::value) {
            self[off] = self[off] / (double)total;
        } else if constexpr (gt::is_float<typename acc<T>::type>::value) {
            self[off] = gt::store<T>(gt::load<double>(self[off]) / (double)total);
        } else {
            const long long x = gt::load<long long>(self[off]);
            long long q = x / total;
            if ((x % total != 0) && ((x < 0) != (total < 0))) --q;  // floor, as NumPy
            self[off] = gt::store<T>(q);
        }
    }
}

// ---- advanced-index writes: base[idx_0, ..., idx_k] (+)= value ------------------------------
// meta: [ndr, K, nb,
//        per result dim (ndr): size, base_stride, value_stride, bdim (-1: a sliced dim),
//        per broadcast index dim (nb): size,
//        per index tensor (K): dim_size, base_stride, itemsize, slot_stride, dim, istride[nb]]
// The result (and value) shape is NumPy's: the broadcast index dims take the place of the
// indexed dims. `iptrs` holds the index tensors (kernel parameters: the emulator cannot follow
// device addresses stored in device memory). Keys are positions in the broadcast index shape;
// slots linearise the indexed dims of base.
#define GT_SC_MAX_INDICES 8
template <class T, class A>
__device__ void index_put(T* __restrict__ base, const T* __restrict__ value_ptr, A value,
                          const long long* __restrict__ meta,
                          const void* const* __restrict__ iptrs, long long n, int mode,
                          int* __restrict__ scratch, long long* __restrict__ err,
                          long long site) {
    const int ndr = (int)meta[0], K = (int)meta[1], nb = (int)meta[2];
    const long long* rdims = meta + 3;
    const long long* bsize = rdims + 4 * ndr;
    const long long* adv = bsize + nb;
    const int adv_len = 5 + nb;
    const T scalar = gt::store<T>(value);
    for (GT_GRID_STRIDE(pos, n)) {
        long long bcoord[GT_SC_MAX_DIMS];
        long long boff = 0, voff = 0, bpos = 0;
        if (mode == GT_MODE_CLAIM) {
            long long rem = pos;
            for (int b = nb - 1; b >= 0; --b) {
                bcoord[b] = rem % bsize[b];
                rem /= bsize[b];
            }
            bpos = pos;
        } else {
            long long rem = pos;
            for (int d = ndr - 1; d >= 0; --d) {
                const long long* r = rdims + 4 * d;
                const long long c = rem % r[0];
                rem /= r[0];
                boff += c * r[1];
                voff += c * r[2];
                if (r[3] >= 0) bcoord[r[3]] = c;
            }
            for (int b = 0; b < nb; ++b) bpos = bpos * bsize[b] + bcoord[b];
        }
        long long slot = 0;
        bool bad = false;
        for (int k = 0; k < K; ++k) {
            const long long* a = adv + k * adv_len;
            long long ioff = 0;
            for (int b = 0; b < nb; ++b) ioff += bcoord[b] * a[5 + b];
            const long long given = load_index(iptrs[k], ioff, (int)a[2]);
            const long long j = given < 0 ? given + a[0] : given;
            if (j < 0 || j >= a[0]) {
                if (mode != GT_MODE_WRITE) gt_report_error(err, site, given, a[0], a[4]);
                bad = true;
                break;
            }
            boff += j * a[1];
            slot += j * a[3];
        }
        if (bad) continue;
        if (mode == GT_MODE_CLAIM) {
            atomicMax(scratch + slot, (int)bpos);
            continue;
        }
        if (mode == GT_MODE_WRITE && scratch[slot] != (int)bpos) continue;
        const T v = value_ptr != nullptr ? value_ptr[voff] : scalar;
        if (mode == GT_MODE_WRITE || mode == GT_MODE_STORE) base[boff] = v;
        else atomic_apply<T>(base + boff, v, GT_OP_SUM, nullptr);
    }
}

// ---- masks -----------------------------------------------------------------------------------
// meta (masked_fill / masked_scatter): [nd, shape[nd], self_stride[nd], mask_stride[nd]];
// a null meta means self and mask are contiguous with the same shape.
__device__ __forceinline__ void mask_offsets(const long long* meta, long long i, long long* so,
                                             long long* mo) {
    if (meta == nullptr) {
        *so = i;
        *mo = i;
        return;
    }
    const int nd = (int)meta[0];
    const long long* shape = meta + 1;
    long long rem = i, s = 0, m = 0;
    for (int d = nd - 1; d >= 0; --d) {
        const long long c = rem % shape[d];
        rem /= shape[d];
        s += c * shape[nd + d];
        m += c * shape[2 * nd + d];
    }
    *so = s;
    *mo = m;
}

template <class T, class A>
__device__ void masked_fill(T* __restrict__ self, const bool* __restrict__ mask, A value,
                            const long long* __restrict__ meta, long long n) {
    const T v = gt::store<T>(value);
    for (GT_GRID_STRIDE(i, n)) {
        long long so, mo;
        mask_offsets(meta, i, &so, &mo);
        if (mask[mo]) self[so] = v;
    }
}

// Exclusive prefix sum over the block of one value per thread; *total gets the block's sum.
// Every thread of the block must call it (it synchronises); blockDim.x is a multiple of 32.
__device__ long long block_exclusive_scan(long long v, long long* total) {
    __shared__ long long warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    long long incl = v;
    for (int off = 1; off < 32; off <<= 1) {
        const long long o = __shfl_up_sync(GT_FULL_MASK, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        long long w = lane < nwarps ? warp_sums[lane] : 0;
        for (int off = 1; off < 32; off <<= 1) {
            const long long o = __shfl_up_sync(GT_FULL_MASK, w, off);
            if (lane >= off) w += o;
        }
        if (lane < nwarps) warp_sums[lane] = w;  // inclusive scan of the warp totals
    }
    __syncthreads();
    const long long excl = incl - v + (warp > 0 ? warp_sums[warp - 1] : 0);
    *total = warp_sums[nwarps - 1];
    __syncthreads();  // warp_sums may be rewritten by the next call
    return excl;
}

// Pass 1: block b counts the true mask elements of its chunk [b * chunk, (b + 1) * chunk).
__device__ void mask_count(const bool* __restrict__ mask, const long long* __restrict__ meta,
                           long long n, long long chunk, long long* __restrict__ block_counts) {
    __shared__ long long partial[32];
    const long long start = (long long)blockIdx.x * chunk;
    const long long end = start + chunk < n ? start + chunk : n;
    long long c = 0;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        long long so, mo;
        mask_offsets(meta, i, &so, &mo);
        c += mask[mo] ? 1 : 0;
    }
    c = gt_warp_sum(c);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long s = 0;
        for (int w = 0; w < (int)((blockDim.x + 31) >> 5); ++w) s += partial[w];
        block_counts[blockIdx.x] = s;
    }
}

// Pass 2 (one block): exclusive prefix sum of the per-block counts, in place.
__device__ void scan_counts(long long* __restrict__ counts, long long nb) {
    long long carry = 0;
    for (long long base = 0; base < nb; base += blockDim.x) {
        const long long i = base + threadIdx.x;
        const long long v = i < nb ? counts[i] : 0;
        long long total;
        const long long excl = block_exclusive_scan(v, &total);
        if (i < nb) counts[i] = carry + excl;
        carry += total;
    }
}

// Pass 3: each block rescans its chunk tile by tile and copies source[rank] to the rank-th
// masked position. meta as for masks, followed by [src_nd, src_shape[src_nd],
// src_stride[src_nd]] (the source is read in C order, whatever its strides).
template <class T>
__device__ void masked_scatter(T* __restrict__ self, const bool* __restrict__ mask,
                               const T* __restrict__ src, const long long* __restrict__ meta,
                               const long long* __restrict__ smeta, long long n, long long chunk,
                               const long long* __restrict__ offsets, long long src_n,
                               long long* __restrict__ err, long long site) {
    const long long start = (long long)blockIdx.x * chunk;
    const long long end = start + chunk < n ? start + chunk : n;
    long long carry = offsets[blockIdx.x];
    const int snd = (int)smeta[0];
    const long long* sshape = smeta + 1;
    const long long* sst = sshape + snd;
    for (long long base = start; base < end; base += blockDim.x) {
        const long long i = base + threadIdx.x;
        long long so = 0, mo = 0;
        bool flag = false;
        if (i < end) {
            mask_offsets(meta, i, &so, &mo);
            flag = mask[mo];
        }
        long long total;
        const long long rank = carry + block_exclusive_scan(flag ? 1 : 0, &total);
        if (flag) {
            if (rank >= src_n) {
                gt_report_error(err, site, rank, src_n, 0);
            } else {
                long long rem = rank, off = 0;
                for (int d = snd - 1; d >= 0; --d) {
                    off += (rem % sshape[d]) * sst[d];
                    rem /= sshape[d];
                }
                self[so] = src[off];
            }
        }
        carry += total;
    }
}

// Scratch initialisation (winner slots, hit counts).
__device__ void fill_i32(int* __restrict__ p, int v, long long n) {
    for (GT_GRID_STRIDE(i, n)) p[i] = v;
}

}  // namespace gtsc

// CUDA kernels of the neural-network ops: batch/layer/group norm, NLL loss and embedding.
//
// They mirror kernels/cpu/nn.py operation for operation, so both backends round alike:
// statistics accumulate in double (two passes: mean, then squared deviations), the elementwise
// passes compute in the accumulator type A (float for float16/bfloat16/float32, double for
// float64) from per-channel constants rounded to A, and the layer/group norm backward sums its
// rows in A, as the CPU (and PyTorch) do. Per-channel parameters (weight, bias, running stats)
// arrive already in A (the launcher converts them). Reductions are one pass per statistic:
// per-thread partials, warp shuffles, then shared memory across warps.
//
// Index kernels never touch memory out of range: a bad target/index is skipped and reported to
// the device's error record (errors.cuh), which kernels/cuda/errors.py turns into the IndexError.
#include "common.cuh"
#include "errors.cuh"
#include "scalar_fns.cuh"

namespace gtnn {

// Sum of v over a 1-D block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// total, added in warp order (deterministic). shm holds at least 32 doubles.
template <class V>
__device__ __forceinline__ V block_sum(V v, double* shm) {
    v = gt_warp_sum(v);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned nwarps = (blockDim.x + 31u) >> 5;
    __syncthreads();  // the previous call's readers are done with shm
    if (lane == 0) shm[warp] = (double)v;
    __syncthreads();
    V t = V(0);
    for (unsigned w = 0; w < nwarps; ++w) t += (V)shm[w];
    return t;
}

// Sum of v over the threads of a 2-D block that share threadIdx.x (the blockDim.y of them);
// every thread gets its column's total. blockDim.x == 1 reduces with warp shuffles, wider
// blocks (one warp per row of 32 columns) through shared memory. shm: blockDim.x * blockDim.y
// doubles (at least 32).
template <class V>
__device__ __forceinline__ V column_sum(V v, double* shm) {
    const unsigned tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, TY = blockDim.y;
    __syncthreads();
    if (TX == 1) {
        v = gt_warp_sum(v);
        if ((ty & 31u) == 0) shm[ty >> 5] = (double)v;
        __syncthreads();
        V t = V(0);
        for (unsigned w = 0; w < (TY + 31u) / 32u; ++w) t += (V)shm[w];
        return t;
    }
    shm[ty * TX + tx] = (double)v;
    __syncthreads();
    V t = V(0);
    for (unsigned y = 0; y < TY; ++y) t += (V)shm[y * TX + tx];
    return t;
}

// Element (m, c) of x seen as (N, C, S), m = n * S + i running over the N * S positions.
__device__ __forceinline__ long long bn_index(long long m, long long c, long long C, long long S) {
    if (S == 1) return m * C + c;
    const long long n = m / S;
    return (n * C + c) * S + (m - n * S);
}

// ---- batch norm ---------------------------------------------------------------------------
// The (C, N * S) statistics are cut into tiles of blockDim.x channels (1 when S > 1, threads
// along a channel's positions; 32 when S == 1, a warp reading 32 adjacent channels of a row,
// coalesced) times P parts of each channel's positions, one block per (tile, part), walking
// its positions with blockDim.y threads. With P == 1 one launch does everything (phase 3).
// With fewer channels than it takes to fill the device, P > 1 splits each channel over P
// blocks and three launches meet through the (C, P, 2) double partials ``part``:
// phase 0 the sums, phase 1 the squared deviations from the mean, phase 2 the output (and
// the statistics, by part 0). Partials are added in a fixed order: the results don't depend
// on the split's scheduling.
#define GT_BN_PHASE_FUSED 3

struct BnBlock {
    long long c, lo, hi, p;
    bool on;
};

__device__ __forceinline__ BnBlock bn_block(long long blk, long long P, long long C,
                                            long long cnt) {
    BnBlock r;
    const long long tile = blk / P;
    r.p = blk - tile * P;
    r.c = tile * blockDim.x + threadIdx.x;
    r.on = r.c < C;
    const long long chunk = (cnt + P - 1) / P;
    r.lo = r.p * chunk;
    r.hi = r.lo + chunk < cnt ? r.lo + chunk : cnt;
    return r;
}

// The sum over the P parts of partial k of channel c.
__device__ __forceinline__ double bn_total(const double* part, long long c, long long P, int k) {
    double t = 0.0;
    for (long long q = 0; q < P; ++q) t += part[(c * P + q) * 2 + k];
    return t;
}

template <class T, class A>
__device__ void batch_norm_forward(T* __restrict__ out, A* __restrict__ save_mean,
                                   A* __restrict__ save_rstd, const T* __restrict__ x,
                                   const A* __restrict__ w, const A* __restrict__ b,
                                   A* __restrict__ rmean, A* __restrict__ rvar,
                                   double* __restrict__ part, double momentum, double eps,
                                   long long N, long long C, long long S, long long P,
                                   int phase) {
    __shared__ double shm[256];
    const long long cnt = N * S;
    const long long blocks = (C + blockDim.x - 1) / blockDim.x * P;
    const unsigned TY = blockDim.y;
    for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const BnBlock k = bn_block(blk, P, C, cnt);
        const long long c = k.c;
        double mean = 0.0, var = 0.0;
        if (phase == 0 || phase == GT_BN_PHASE_FUSED) {
            double s = 0.0;
            if (k.on)
                for (long long m = k.lo + threadIdx.y; m < k.hi; m += TY)
                    s += gt::load<double>(x[bn_index(m, c, C, S)]);
            s = column_sum(s, shm);
            if (phase == 0) {
                if (k.on && threadIdx.y == 0) part[(c * P + k.p) * 2] = s;
                continue;
            }
            mean = s / (double)cnt;
        } else if (k.on) {
            mean = bn_total(part, c, P, 0) / (double)cnt;
        }
        if (phase == 1 || phase == GT_BN_PHASE_FUSED) {
            double q = 0.0;
            if (k.on)
                for (long long m = k.lo + threadIdx.y; m < k.hi; m += TY) {
                    const double d = gt::load<double>(x[bn_index(m, c, C, S)]) - mean;
                    q += d * d;
                }
            q = column_sum(q, shm);
            if (phase == 1) {
                if (k.on && threadIdx.y == 0) part[(c * P + k.p) * 2 + 1] = q;
                continue;
            }
            var = q / (double)cnt;
        } else if (k.on) {
            var = bn_total(part, c, P, 1) / (double)cnt;
        }
        if (!k.on) continue;
        const double rstd = 1.0 / ::sqrt(var + eps);
        const double scale = (w ? (double)w[c] : 1.0) * rstd;
        const double shift = (b ? (double)b[c] : 0.0) - mean * scale;
        const A sa = (A)scale, sh = (A)shift;
        for (long long m = k.lo + threadIdx.y; m < k.hi; m += TY) {
            const long long e = bn_index(m, c, C, S);
            out[e] = gt::store<T>(gt::load<A>(x[e]) * sa + sh);
        }
        if (threadIdx.y == 0 && k.p == 0) {
            save_mean[c] = (A)mean;
            save_rstd[c] = (A)rstd;
            // (1 - momentum) * running in A (NumPy's float32 * Python float), plus the double
            // momentum * batch statistic.
            const A keep = (A)(1.0 - momentum);
            if (rmean) rmean[c] = (A)((double)(keep * rmean[c]) + momentum * mean);
            if (rvar) {
                const double unbiased = cnt > 1 ? var * ((double)cnt / (double)(cnt - 1))
                                                : __longlong_as_double(0x7ff8000000000000LL);
                rvar[c] = (A)((double)(keep * rvar[c]) + momentum * unbiased);
            }
        }
    }
}

// grad_input = w * rstd * (g - sum_g / m - xhat * sum(g * xhat) / m), as g * p + x * q + r
// with per-channel p, q, r rounded to A; grad_weight = sum(g * (x - mean)) * rstd,
// grad_bias = sum(g). Phases as the forward's: 0 the partial sums, 1 the rest, 3 both.
template <class T, class A>
__device__ void batch_norm_backward(T* __restrict__ gi, A* __restrict__ gw, A* __restrict__ gb,
                                    const T* __restrict__ g, const T* __restrict__ x,
                                    const A* __restrict__ w, const A* __restrict__ save_mean,
                                    const A* __restrict__ save_rstd, double* __restrict__ part,
                                    long long N, long long C, long long S, long long P,
                                    int phase) {
    __shared__ double shm[256];
    const long long cnt = N * S;
    const long long blocks = (C + blockDim.x - 1) / blockDim.x * P;
    const unsigned TY = blockDim.y;
    for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const BnBlock k = bn_block(blk, P, C, cnt);
        const long long c = k.c;
        const double mean = k.on ? (double)save_mean[c] : 0.0;
        double sum_g = 0.0, sum_gx = 0.0;
        if (phase == 0 || phase == GT_BN_PHASE_FUSED) {
            double s1 = 0.0, s2 = 0.0;
            if (k.on)
                for (long long m = k.lo + threadIdx.y; m < k.hi; m += TY) {
                    const long long e = bn_index(m, c, C, S);
                    const double gv = gt::load<double>(g[e]);
                    s1 += gv;
                    s2 += gv * (gt::load<double>(x[e]) - mean);
                }
            sum_g = column_sum(s1, shm);
            sum_gx = column_sum(s2, shm);
            if (phase == 0) {
                if (k.on && threadIdx.y == 0) {
                    part[(c * P + k.p) * 2] = sum_g;
                    part[(c * P + k.p) * 2 + 1] = sum_gx;
                }
                continue;
            }
        } else if (k.on) {
            sum_g = bn_total(part, c, P, 0);
            sum_gx = bn_total(part, c, P, 1);
        }
        if (!k.on) continue;
        const double rstd = (double)save_rstd[c];
        const double p = (w ? (double)w[c] : 1.0) * rstd;
        const double q = -p * rstd * rstd * sum_gx / (double)cnt;
        const double r = -p * sum_g / (double)cnt - q * mean;
        const A pa = (A)p, qa = (A)q, ra = (A)r;
        for (long long m = k.lo + threadIdx.y; m < k.hi; m += TY) {
            const long long e = bn_index(m, c, C, S);
            gi[e] = gt::store<T>(gt::load<A>(g[e]) * pa + gt::load<A>(x[e]) * qa + ra);
        }
        if (threadIdx.y == 0 && k.p == 0) {
            gw[c] = (A)(sum_gx * rstd);
            gb[c] = (A)sum_g;
        }
    }
}

// ---- layer and group norm: rows ---------------------------------------------------------------
// x is (R, L): row r holds K = L / S channels of S elements, channel c0 + j / S of the affine
// parameters with c0 = (r % groups) * K. One block per row (grid-stride over rows).
template <class T, class A>
__device__ void rows_forward(T* __restrict__ out, A* __restrict__ mean, A* __restrict__ rstd,
                             const T* __restrict__ x, const A* __restrict__ w,
                             const A* __restrict__ b, long long groups, long long S, double eps,
                             long long R, long long L, int cached) {
    // cached: the launch gave L * sizeof(A) bytes of dynamic shared memory, and the row is read
    // from global memory once (each thread keeps its own elements there: no barrier needed).
    // The statistics in double are the same either way: A holds x exactly.
    __shared__ double shm[32];
    GT_DYNAMIC_SHARED(A, row);
    const long long K = L / S;
    for (long long r = blockIdx.x; r < R; r += gridDim.x) {
        const T* xr = x + r * L;
        T* orow = out + r * L;
        double s = 0.0;
        for (long long j = threadIdx.x; j < L; j += blockDim.x) {
            const A v = gt::load<A>(xr[j]);
            if (cached) row[j] = v;
            s += (double)v;
        }
        const double m = block_sum(s, shm) / (double)L;
        double q = 0.0;
        for (long long j = threadIdx.x; j < L; j += blockDim.x) {
            const double d = (double)(cached ? row[j] : gt::load<A>(xr[j])) - m;
            q += d * d;
        }
        const double v = block_sum(q, shm) / (double)L;
        const A mr = (A)m, rs = (A)(1.0 / ::sqrt(v + eps));
        if (threadIdx.x == 0) {
            mean[r] = mr;
            rstd[r] = rs;
        }
        const long long c0 = (r % groups) * K;
        if (S == 1) {
            for (long long j = threadIdx.x; j < L; j += blockDim.x) {
                const A wj = w ? w[c0 + j] : A(1), bj = b ? b[c0 + j] : A(0);
                const A xv = cached ? row[j] : gt::load<A>(xr[j]);
                orow[j] = gt::store<T>((xv - mr) * rs * wj + bj);
            }
        } else {
            for (long long j = threadIdx.x; j < L; j += blockDim.x) {
                const long long k = c0 + j / S;
                const A a = (w ? w[k] : A(1)) * rs;
                const A sh = (b ? b[k] : A(0)) - mr * a;
                const A xv = cached ? row[j] : gt::load<A>(xr[j]);
                orow[j] = gt::store<T>(xv * a + sh);
            }
        }
    }
}

// Input gradient of each row; with S > 1 also the row's per-channel sums of g and
// g * xhat (pb, pw: (R, K) doubles, reduced over the batch by rows_param_partials). With S == 1
// the parameter gradients come from rows_param_direct instead.
template <class T, class A>
__device__ void rows_backward(T* __restrict__ gi, double* __restrict__ pw,
                              double* __restrict__ pb, const T* __restrict__ g,
                              const T* __restrict__ x, const A* __restrict__ w,
                              const A* __restrict__ mean, const A* __restrict__ rstd,
                              long long groups, long long S, long long R, long long L) {
    __shared__ double shm[32];
    const long long K = L / S;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (long long r = blockIdx.x; r < R; r += gridDim.x) {
        const T* xr = x + r * L;
        const T* gr = g + r * L;
        const A m = mean[r], rs = rstd[r];
        const long long c0 = (r % groups) * K;
        A s1 = A(0), s2 = A(0);  // sums of g * w and g * w * xhat, in A as the CPU's
        if (S == 1) {
            for (long long j = threadIdx.x; j < L; j += blockDim.x) {
                const A xh = (gt::load<A>(xr[j]) - m) * rs;
                const A gw = gt::load<A>(gr[j]) * (w ? w[c0 + j] : A(1));
                s1 += gw;
                s2 += gw * xh;
            }
        } else if (S >= 32) {  // a warp per channel, lanes along its S elements
            for (long long k = warp; k < K; k += nwarps) {
                A a1 = A(0), a2 = A(0);
                for (long long i = k * S + lane; i < k * S + S; i += 32) {
                    const A xh = (gt::load<A>(xr[i]) - m) * rs;
                    const A gv = gt::load<A>(gr[i]);
                    a1 += gv;
                    a2 += gv * xh;
                }
                a1 = gt_warp_sum(a1);
                a2 = gt_warp_sum(a2);
                if (lane == 0) {
                    const A wk = w ? w[c0 + k] : A(1);
                    s1 += a1 * wk;
                    s2 += a2 * wk;
                    pb[r * K + k] = (double)a1;
                    pw[r * K + k] = (double)a2;
                }
            }
        } else {  // a thread per channel
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {
                A a1 = A(0), a2 = A(0);
                for (long long i = k * S; i < k * S + S; ++i) {
                    const A xh = (gt::load<A>(xr[i]) - m) * rs;
                    const A gv = gt::load<A>(gr[i]);
                    a1 += gv;
                    a2 += gv * xh;
                }
                const A wk = w ? w[c0 + k] : A(1);
                s1 += a1 * wk;
                s2 += a2 * wk;
                pb[r * K + k] = (double)a1;
                pw[r * K + k] = (double)a2;
            }
        }
        // s / L divides by an integer in double, as Numba does; the rest follows the CPU's
        // rs * (g * w - c1 - xhat * c2) with its float/double promotions.
        const double c1 = (double)block_sum(s1, shm) / (double)L;
        const double c2 = (double)block_sum(s2, shm) / (double)L;
        T* orow = gi + r * L;
        for (long long j = threadIdx.x; j < L; j += blockDim.x) {
            const A xh = (gt::load<A>(xr[j]) - m) * rs;
            const A gw = gt::load<A>(gr[j]) * (w ? w[c0 + j / S] : A(1));
            orow[j] = gt::store<T>((double)rs * ((double)gw - c1 - (double)xh * c2));
        }
    }
}

// Parameter gradients by column reductions over the batch, block (32, 8): 32 adjacent channels,
// 8 threads down the rows. Blocks own (tile of 32 channels, part of P of the N rows); with
// P == 1 they write gw/gb, else their (C, P, 2) double partials that cols_finalize adds up in a
// fixed order.
__device__ __forceinline__ void cols_store_or_part(long long c, long long C, long long p,
                                                   long long P, double s1, double s2,
                                                   double* part) {
    if (c < C && threadIdx.y == 0 && P > 1) {
        part[(c * P + p) * 2] = s1;
        part[(c * P + p) * 2 + 1] = s2;
    }
}

// S == 1, x seen as (N, C) with C = groups * K channels: column c sums g * xhat and g over the
// rows, xhat from the statistics of row n * groups + c / K.
template <class T, class A>
__device__ void rows_param_direct(A* __restrict__ gw, A* __restrict__ gb, double* __restrict__ part,
                                  const T* __restrict__ g, const T* __restrict__ x,
                                  const A* __restrict__ mean, const A* __restrict__ rstd,
                                  long long groups, long long N, long long C, long long P) {
    __shared__ double shm[256];
    const long long K = C / groups;
    const long long blocks = (C + blockDim.x - 1) / blockDim.x * P;
    const long long chunk = (N + P - 1) / P;
    for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const long long tile = blk / P, p = blk - tile * P;
        const long long c = tile * blockDim.x + threadIdx.x;
        const long long lo = p * chunk, hi = lo + chunk < N ? lo + chunk : N;
        double s1 = 0.0, s2 = 0.0;
        if (c < C)
            for (long long n = lo + threadIdx.y; n < hi; n += blockDim.y) {
                const long long r = n * groups + c / K;
                const A xh = (gt::load<A>(x[n * C + c]) - mean[r]) * rstd[r];
                const A gv = gt::load<A>(g[n * C + c]);
                s1 += (double)gv;
                s2 += (double)(gv * xh);
            }
        s1 = column_sum(s1, shm);
        s2 = column_sum(s2, shm);
        cols_store_or_part(c, C, p, P, s1, s2, part);
        if (c < C && threadIdx.y == 0 && P == 1) {
            gw[c] = (A)s2;
            gb[c] = (A)s1;
        }
    }
}

// S > 1: the (N, C) per-row channel partials of rows_backward summed over N.
template <class A>
__device__ void rows_param_partials(A* __restrict__ gw, A* __restrict__ gb,
                                    double* __restrict__ part, const double* __restrict__ pw,
                                    const double* __restrict__ pb, long long N, long long C,
                                    long long P) {
    __shared__ double shm[256];
    const long long blocks = (C + blockDim.x - 1) / blockDim.x * P;
    const long long chunk = (N + P - 1) / P;
    for (long long blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const long long tile = blk / P, p = blk - tile * P;
        const long long c = tile * blockDim.x + threadIdx.x;
        const long long lo = p * chunk, hi = lo + chunk < N ? lo + chunk : N;
        double s1 = 0.0, s2 = 0.0;
        if (c < C)
            for (long long n = lo + threadIdx.y; n < hi; n += blockDim.y) {
                s1 += pb[n * C + c];
                s2 += pw[n * C + c];
            }
        s1 = column_sum(s1, shm);
        s2 = column_sum(s2, shm);
        cols_store_or_part(c, C, p, P, s1, s2, part);
        if (c < C && threadIdx.y == 0 && P == 1) {
            gw[c] = (A)s2;
            gb[c] = (A)s1;
        }
    }
}

// gw/gb from the (C, P, 2) partials: bias sums first, weight sums second.
template <class A>
__device__ void cols_finalize(A* __restrict__ gw, A* __restrict__ gb,
                              const double* __restrict__ part, long long C, long long P) {
    for (GT_GRID_STRIDE(c, C)) {
        double s1 = 0.0, s2 = 0.0;
        for (long long p = 0; p < P; ++p) {
            s1 += part[(c * P + p) * 2];
            s2 += part[(c * P + p) * 2 + 1];
        }
        gw[c] = (A)s2;
        gb[c] = (A)s1;
    }
}

// ---- NLL loss -------------------------------------------------------------------------------
// The reduced result from the summed losses and counted weights: mode 1 out = total / weights
// (NaN when no weight was counted), mode 2 out = total, mode 3 scale = 1 / weights (inf for
// none; the backward's 'mean' factor).
template <class T>
__device__ void nll_store_total(T* __restrict__ out, double* __restrict__ scale, double total,
                                double tw, int mode) {
    const double nan = __longlong_as_double(0x7ff8000000000000LL);
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    if (mode == 1) out[0] = gt::store<T>(tw != 0.0 ? total / tw : nan);
    else if (mode == 2) out[0] = gt::store<T>(total);
    else scale[0] = tw != 0.0 ? 1.0 / tw : inf;
}

// Log-probabilities x (N, C, S), targets t (N, S). reduction 0 writes each item's loss
// -w[t] * x[n, t, s] (0 where ignored); otherwise each block leaves its sums of the losses and
// of the counted weights in part[2 * block], part[2 * block + 1], or, launched as one block
// (as PyTorch's reducing kernel is), writes the finalised loss itself.
template <class T, class A>
__device__ void nll_forward(T* __restrict__ out, double* __restrict__ part,
                            long long* __restrict__ err, long long site,
                            const T* __restrict__ x, const long long* __restrict__ t,
                            const A* __restrict__ w, long long ignore_index, int reduction,
                            long long N, long long C, long long S) {
    __shared__ double shm[32];
    double total = 0.0, tw = 0.0;
    for (GT_GRID_STRIDE(i, N * S)) {
        const long long c = t[i];
        if (c == ignore_index || c < 0 || c >= C) {
            if (c != ignore_index) gt_report_error(err, site, c, C, 1);
            if (reduction == 0) out[i] = gt::store<T>(A(0));
            continue;
        }
        const long long n = i / S;
        const A wc = w ? w[c] : A(1);
        const A loss = -wc * gt::load<A>(x[(n * C + c) * S + (i - n * S)]);
        if (reduction == 0) {
            out[i] = gt::store<T>(loss);
        } else {
            total += (double)loss;
            tw += (double)wc;
        }
    }
    if (reduction == 0) return;  // uniform across the block
    total = block_sum(total, shm);
    tw = block_sum(tw, shm);
    if (threadIdx.x != 0) return;
    if (gridDim.x == 1) {
        nll_store_total(out, (double*)nullptr, total, tw, reduction);
    } else {
        part[2 * blockIdx.x] = total;
        part[2 * blockIdx.x + 1] = tw;
    }
}

// Sum of the block partials, stored by nll_store_total's mode.
template <class T>
__device__ void nll_finalize(T* __restrict__ out, double* __restrict__ scale,
                             const double* __restrict__ part, int nparts, int mode) {
    __shared__ double shm[32];
    double total = 0.0, tw = 0.0;
    for (int k = threadIdx.x; k < nparts; k += blockDim.x) {
        total += part[2 * k];
        tw += part[2 * k + 1];
    }
    total = block_sum(total, shm);
    tw = block_sum(tw, shm);
    if (threadIdx.x == 0) nll_store_total(out, scale, total, tw, mode);
}

// Block partials of the summed weights of the counted targets (the backward's 'mean'), or,
// launched as one block, scale = 1 / their sum directly.
template <class A>
__device__ void nll_weight_sum(double* __restrict__ part, double* __restrict__ scale,
                               long long* __restrict__ err, long long site,
                               const long long* __restrict__ t, const A* __restrict__ w,
                               long long ignore_index, long long items, long long C) {
    __shared__ double shm[32];
    double tw = 0.0;
    for (GT_GRID_STRIDE(i, items)) {
        const long long c = t[i];
        if (c == ignore_index) continue;
        if (c < 0 || c >= C) {
            gt_report_error(err, site, c, C, 1);
            continue;
        }
        tw += (double)(w ? w[c] : A(1));
    }
    tw = block_sum(tw, shm);
    if (threadIdx.x != 0) return;
    if (gridDim.x == 1) {
        nll_store_total((double*)nullptr, scale, 0.0, tw, 3);
    } else {
        part[2 * blockIdx.x] = 0.0;
        part[2 * blockIdx.x + 1] = tw;
    }
}

// grad_input (N, C, S) in one pass: -w[t] * g * scale at each item's target class, 0 elsewhere.
// g is per item (reduction 0) or one value; scale points at 1 / weights for 'mean', else null.
template <class T, class A>
__device__ void nll_backward(T* __restrict__ gi, long long* __restrict__ err, long long site,
                             const T* __restrict__ g, const long long* __restrict__ t,
                             const A* __restrict__ w, const double* __restrict__ scale,
                             long long ignore_index, int reduction, long long N, long long C,
                             long long S) {
    const double sc = scale ? scale[0] : 1.0;
    for (GT_GRID_STRIDE(e, N * C * S)) {
        const long long nc = e / S, s = e - nc * S;
        const long long n = nc / C, c = nc - n * C;
        const long long item = n * S + s;
        const long long tc = t[item];
        double v = 0.0;
        if (tc == c && tc != ignore_index) {
            const A gv = gt::load<A>(g[reduction == 0 ? item : 0]);
            v = (double)(-(w ? w[c] : A(1)) * gv) * sc;
        } else if (c == 0 && tc != ignore_index && (tc < 0 || tc >= C)) {
            gt_report_error(err, site, tc, C, 1);
        }
        gi[e] = gt::store<T>(v);
    }
}

// ---- embedding ------------------------------------------------------------------------------
// out (M, D) = rows of weight (V, D) at idx; a pure copy, so E is an unsigned type of the
// element's size.
template <class E, class I>
__device__ void embedding_forward(E* __restrict__ out, long long* __restrict__ err,
                                  long long site, const E* __restrict__ weight,
                                  const I* __restrict__ idx, long long M, long long V,
                                  long long D) {
    for (GT_GRID_STRIDE(e, M * D)) {
        const long long i = e / D, d = e - i * D;
        const long long r = (long long)idx[i];
        if (r < 0 || r >= V) {
            if (d == 0) gt_report_error(err, site, r, V, 0);
            out[e] = E(0);
            continue;
        }
        out[e] = weight[r * D + d];
    }
}

// How often each row is indexed (for scale_grad_by_freq); counts start zeroed.
template <class I>
__device__ void embedding_counts(int* __restrict__ counts, const I* __restrict__ idx,
                                 long long M, long long V) {
    for (GT_GRID_STRIDE(i, M)) {
        const long long r = (long long)idx[i];
        if (r >= 0 && r < V) atomicAdd(counts + r, 1);
    }
}

// acc (V, D), zeroed, += rows of g (M, D) at idx with atomics; the padding row gets nothing,
// each row is divided by its index's count when counts is given.
template <class T, class A, class I>
__device__ void embedding_backward(A* __restrict__ acc, long long* __restrict__ err,
                                   long long site, const T* __restrict__ g,
                                   const I* __restrict__ idx,
                                   const int* __restrict__ counts, long long padding_idx,
                                   long long M, long long V, long long D) {
    for (GT_GRID_STRIDE(e, M * D)) {
        const long long i = e / D, d = e - i * D;
        const long long r = (long long)idx[i];
        if (r < 0 || r >= V) {
            if (d == 0) gt_report_error(err, site, r, V, 0);
            continue;
        }
        if (r == padding_idx) continue;
        A v = gt::load<A>(g[e]);
        if (counts) v = (A)((double)v * (1.0 / (double)counts[r]));
        atomicAdd(acc + r * D + d, v);
    }
}

// ---- helpers ----------------------------------------------------------------------------------
template <class V>
__device__ void fill_zero(V* __restrict__ p, long long n) {
    for (GT_GRID_STRIDE(i, n)) p[i] = V(0);
}

template <class T, class A>
__device__ void cast_store(T* __restrict__ out, const A* __restrict__ src, long long n) {
    for (GT_GRID_STRIDE(i, n)) out[i] = gt::store<T>(src[i]);
}

}  // namespace gtnn

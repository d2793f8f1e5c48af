// torch.mode's row kernel (launched by kernels/cuda/ops/mode.py): one thread per row sorts the
// row's (value, index) pairs by value exactly as libstdc++'s std::sort does (introsort: median
// of three pivots, unguarded partitions, heapsort past 2 log2(n) levels, a final insertion
// sort of 16-element runs), then scans the runs, as PyTorch's CPU kernel does. std::sort is not
// stable, so which index PyTorch reports among equal values is whatever this exact sequence of
// moves leaves last in the value's run; replaying it gives the same index on every device.
// Keys compare in the accumulator type (float for 16-bit floats), as c10's operator< does.
#include "common.cuh"
#include "scalar_fns.cuh"

#define GT_MODE_THRESHOLD 16
#define GT_MODE_STACK 130  // introsort ranges pending: at most one per level, 2 log2(n) + 2

template <class A>
__device__ void gt_mode_swap(A* v, long long* ix, long long i, long long j) {
    const A tv = v[i]; v[i] = v[j]; v[j] = tv;
    const long long ti = ix[i]; ix[i] = ix[j]; ix[j] = ti;
}

template <class A>
__device__ void gt_mode_adjust_heap(A* v, long long* ix, long long hole, long long len, A val,
                                    long long vi) {
    const long long top = hole;
    long long second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (v[second] < v[second - 1]) second--;
        v[hole] = v[second]; ix[hole] = ix[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        v[hole] = v[second - 1]; ix[hole] = ix[second - 1];
        hole = second - 1;
    }
    long long parent = (hole - 1) / 2;  // push_heap
    while (hole > top && v[parent] < val) {
        v[hole] = v[parent]; ix[hole] = ix[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    v[hole] = val; ix[hole] = vi;
}

template <class A>
__device__ void gt_mode_heap_sort(A* v, long long* ix, long long len) {
    if (len >= 2) {  // make_heap
        for (long long parent = (len - 2) / 2;; parent--) {
            gt_mode_adjust_heap(v, ix, parent, len, v[parent], ix[parent]);
            if (parent == 0) break;
        }
    }
    for (long long last = len - 1; last > 0; last--) {  // sort_heap: pop_heap one by one
        const A val = v[last];
        const long long vi = ix[last];
        v[last] = v[0]; ix[last] = ix[0];
        gt_mode_adjust_heap(v, ix, 0, last, val, vi);
    }
}

template <class A>
__device__ void gt_mode_linear_insert(A* v, long long* ix, long long i, long long first) {
    const A val = v[i];
    const long long vi = ix[i];
    long long j = i - 1;
    while (j >= first && val < v[j]) {  // (libstdc++'s bound is a sentinel; same moves)
        v[j + 1] = v[j]; ix[j + 1] = ix[j];
        j--;
    }
    v[j + 1] = val; ix[j + 1] = vi;
}

template <class A>
__device__ void gt_mode_insertion_sort(A* v, long long* ix, long long first, long long last) {
    for (long long i = first + 1; i < last; i++) {
        if (v[i] < v[first]) {
            const A val = v[i];
            const long long vi = ix[i];
            for (long long j = i; j > first; j--) { v[j] = v[j - 1]; ix[j] = ix[j - 1]; }
            v[first] = val; ix[first] = vi;
        } else {
            gt_mode_linear_insert(v, ix, i, first);
        }
    }
}

template <class A>
__device__ void gt_mode_move_median_to_first(A* v, long long* ix, long long result, long long a,
                                             long long b, long long c) {
    if (v[a] < v[b]) {
        if (v[b] < v[c]) gt_mode_swap(v, ix, result, b);
        else if (v[a] < v[c]) gt_mode_swap(v, ix, result, c);
        else gt_mode_swap(v, ix, result, a);
    } else if (v[a] < v[c]) gt_mode_swap(v, ix, result, a);
    else if (v[b] < v[c]) gt_mode_swap(v, ix, result, c);
    else gt_mode_swap(v, ix, result, b);
}

template <class A>
__device__ void gt_mode_std_sort(A* v, long long* ix, long long n) {
    if (n < 2) return;
    int lg = 0;
    while ((n >> (lg + 1)) > 0) lg++;
    // introsort: each pending range with its depth budget; disjoint ranges, so the order in
    // which they are finished does not change the result
    long long st_first[GT_MODE_STACK], st_last[GT_MODE_STACK];
    int st_depth[GT_MODE_STACK];
    int top = 0;
    st_first[0] = 0; st_last[0] = n; st_depth[0] = 2 * lg; top = 1;
    while (top > 0) {
        top--;
        const long long first = st_first[top];
        long long last = st_last[top];
        int depth = st_depth[top];
        while (last - first > GT_MODE_THRESHOLD) {
            if (depth == 0) {
                gt_mode_heap_sort(v + first, ix + first, last - first);
                break;
            }
            depth--;
            const long long mid = first + (last - first) / 2;
            gt_mode_move_median_to_first(v, ix, first, first + 1, mid, last - 1);
            long long lo = first + 1, hi = last;  // unguarded partition around v[first]
            while (true) {
                while (v[lo] < v[first]) lo++;
                hi--;
                while (v[first] < v[hi]) hi--;
                if (!(lo < hi)) break;
                gt_mode_swap(v, ix, lo, hi);
                lo++;
            }
            st_first[top] = lo; st_last[top] = last; st_depth[top] = depth; top++;
            last = lo;
        }
    }
    if (n > GT_MODE_THRESHOLD) {
        gt_mode_insertion_sort(v, ix, 0, GT_MODE_THRESHOLD);
        for (long long i = GT_MODE_THRESHOLD; i < n; i++) gt_mode_linear_insert(v, ix, i, 0);
    } else {
        gt_mode_insertion_sort(v, ix, 0, n);
    }
}

// rows: x (rows, n) contiguous; keys/order: (rows, n) scratch; values/indices: (rows,)
template <class T, class A>
__device__ void gt_mode_rows(const T* x, long long rows, long long n, A* keys, long long* order,
                             T* values, long long* indices) {
    for (GT_GRID_STRIDE(r, rows)) {
        const T* row = x + r * n;
        A* v = keys + r * n;
        long long* ix = order + r * n;
        for (long long i = 0; i < n; i++) { v[i] = gt::load<A>(row[i]); ix[i] = i; }
        gt_mode_std_sort(v, ix, n);
        long long best = 0, run = 0, at = 0;
        for (long long i = 0; i < n; i++) {
            run++;
            if (i == n - 1 || v[i] != v[i + 1]) {
                if (run > best) { best = run; at = ix[i]; }
                run = 0;
            }
        }
        values[r] = row[at];
        indices[r] = at;
    }
}

// Gate kernels of the fused recurrences behind nn.LSTM/GRU/RNN (kernels/cuda/ops/rnn.py): one
// launch per time step after that step's cuBLAS gemm hh = h_{t-1} W_hh^T, one thread per
// (batch row, hidden unit). The math is the CPU kernels' (kernels/cpu/rnn.py), element for
// element, so the saved activations mean the same on both devices.
//
// Layouts (contiguous, T = float or double): xg (T, B, G*H) input-side pre-activations of
// every step, biases folded in; hh (B, G*H) this step's hidden projection; states (B, H);
// `t` the step's time index and `tp` the index of the step before it (unused when `first`).
// LSTM saves (i, f, g, o) after their nonlinearities plus every cell state; GRU saves
// (r, z, n, W_hn h + b_hn). Backward steps read the carried state gradient dh (and dc), add
// the output gradient of step t, write the gate gradients and leave in dh the part that does
// not go through W_hh (GRU: dh * z; the others: nothing, the gemm overwrites dh).
#include "common.cuh"
#include "scalar_fns.cuh"

namespace gtrnn {

template <class T>
__device__ void lstm_forward(const T* __restrict__ xg, const T* __restrict__ hh,
                             const T* __restrict__ c0, T* __restrict__ out, T* __restrict__ cs,
                             T* __restrict__ acts, long long t, long long tp, int first,
                             long long B, long long H) {
    const long long step = B * H;
    for (GT_GRID_STRIDE(idx, step)) {
        const long long b = idx / H, j = idx - b * H;
        const T* x = xg + (t * B + b) * 4 * H;
        const T* g = hh + b * 4 * H;
        T* a = acts + (t * B + b) * 4 * H;
        const T i = gt::sigmoid(x[j] + g[j]);
        const T f = gt::sigmoid(x[H + j] + g[H + j]);
        const T gg = gt::tanh(x[2 * H + j] + g[2 * H + j]);
        const T o = gt::sigmoid(x[3 * H + j] + g[3 * H + j]);
        const T cp = first ? c0[idx] : cs[tp * step + idx];
        const T c = f * cp + i * gg;
        cs[t * step + idx] = c;
        out[t * step + idx] = o * gt::tanh(c);
        a[j] = i;
        a[H + j] = f;
        a[2 * H + j] = gg;
        a[3 * H + j] = o;
    }
}

template <class T>
__device__ void lstm_backward(const T* __restrict__ g_out, const T* __restrict__ acts,
                              const T* __restrict__ cs, const T* __restrict__ c0,
                              T* __restrict__ d_gates, T* __restrict__ dh, T* __restrict__ dc,
                              long long t, long long tp, int first, long long B, long long H) {
    const long long step = B * H;
    for (GT_GRID_STRIDE(idx, step)) {
        const long long b = idx / H, j = idx - b * H;
        const T* a = acts + (t * B + b) * 4 * H;
        T* d = d_gates + (t * B + b) * 4 * H;
        const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
        const T tc = gt::tanh(cs[t * step + idx]);
        const T cp = first ? c0[idx] : cs[tp * step + idx];
        const T dhj = dh[idx] + g_out[t * step + idx];
        const T dcj = dc[idx] + dhj * o * (T(1) - tc * tc);
        d[j] = dcj * g * i * (T(1) - i);
        d[H + j] = dcj * cp * f * (T(1) - f);
        d[2 * H + j] = dcj * i * (T(1) - g * g);
        d[3 * H + j] = dhj * tc * o * (T(1) - o);
        dc[idx] = dcj * f;
    }
}

template <class T>
__device__ void gru_forward(const T* __restrict__ xg, const T* __restrict__ hh,
                            const T* __restrict__ b_hh, const T* __restrict__ h0,
                            T* __restrict__ out, T* __restrict__ acts, long long t,
                            long long tp, int first, long long B, long long H) {
    const long long step = B * H;
    for (GT_GRID_STRIDE(idx, step)) {
        const long long b = idx / H, j = idx - b * H;
        const T* x = xg + (t * B + b) * 3 * H;
        const T* g = hh + b * 3 * H;
        T* a = acts + (t * B + b) * 4 * H;
        const T br = b_hh ? b_hh[j] : T(0);
        const T bz = b_hh ? b_hh[H + j] : T(0);
        const T bn = b_hh ? b_hh[2 * H + j] : T(0);
        const T r = gt::sigmoid(x[j] + g[j] + br);
        const T z = gt::sigmoid(x[H + j] + g[H + j] + bz);
        const T hn = g[2 * H + j] + bn;
        const T n = gt::tanh(x[2 * H + j] + r * hn);
        const T hp = first ? h0[idx] : out[tp * step + idx];
        out[t * step + idx] = n + z * (hp - n);
        a[j] = r;
        a[H + j] = z;
        a[2 * H + j] = n;
        a[3 * H + j] = hn;
    }
}

template <class T>
__device__ void gru_backward(const T* __restrict__ g_out, const T* __restrict__ acts,
                             const T* __restrict__ out, const T* __restrict__ h0,
                             T* __restrict__ d_x, T* __restrict__ d_h, T* __restrict__ dh,
                             long long t, long long tp, int first, long long B, long long H) {
    const long long step = B * H;
    for (GT_GRID_STRIDE(idx, step)) {
        const long long b = idx / H, j = idx - b * H;
        const T* a = acts + (t * B + b) * 4 * H;
        T* dx = d_x + (t * B + b) * 3 * H;
        T* dg = d_h + (t * B + b) * 3 * H;
        const T r = a[j], z = a[H + j], n = a[2 * H + j], hn = a[3 * H + j];
        const T hp = first ? h0[idx] : out[tp * step + idx];
        const T dhj = dh[idx] + g_out[t * step + idx];
        const T dn = dhj * (T(1) - z) * (T(1) - n * n);
        const T dr = dn * hn * r * (T(1) - r);
        const T dz = dhj * (hp - n) * z * (T(1) - z);
        dx[j] = dr;
        dx[H + j] = dz;
        dx[2 * H + j] = dn;
        dg[j] = dr;
        dg[H + j] = dz;
        dg[2 * H + j] = dn * r;
        dh[idx] = dhj * z;
    }
}

template <class T>
__device__ void rnn_forward(const T* __restrict__ xg, const T* __restrict__ hh,
                            T* __restrict__ out, long long t, long long B, long long H,
                            int relu) {
    const long long step = B * H;
    for (GT_GRID_STRIDE(idx, step)) {
        const T v = xg[t * step + idx] + hh[idx];
        out[t * step + idx] = relu ? ((v > T(0) || v != v) ? v : T(0)) : gt::tanh(v);
    }
}

template <class T>
__device__ void rnn_backward(const T* __restrict__ g_out, const T* __restrict__ out,
                             T* __restrict__ d_x, const T* __restrict__ dh, long long t,
                             long long B, long long H, int relu) {
    const long long step = B * H;
    for (GT_GRID_STRIDE(idx, step)) {
        const T o = out[t * step + idx];
        const T d = dh[idx] + g_out[t * step + idx];
        d_x[t * step + idx] = relu ? (o > T(0) ? d : T(0)) : d * (T(1) - o * o);
    }
}

}  // namespace gtrnn

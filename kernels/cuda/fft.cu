// The framing step of the fused stft (kernels/cuda/ops/fft.py): frames[b, t, j] =
// x[b, s] * w[j] for the sample s = t * hop + j - pad of the signal reflect-padded by `pad`
// (< length) on both sides, into a contiguous (batch, frames, n_fft) buffer that one batched
// cuFFT r2c then transforms. The padding is an index, never a padded copy.
#include "common.cuh"

namespace gtfft {

template <class T>
__device__ void stft_frames(T* __restrict__ frames, const T* __restrict__ x,
                            const T* __restrict__ w, long long length, int n_frames, int n_fft,
                            int hop, int pad, long long total) {
    const long long per_signal = (long long)n_frames * n_fft;
    for (GT_GRID_STRIDE(i, total)) {
        const long long b = i / per_signal, e = i % per_signal;
        const int t = (int)(e / n_fft), j = (int)(e % n_fft);
        long long s = (long long)t * hop + j - pad;
        if (s < 0) s = -s;
        if (s >= length) s = 2 * (length - 1) - s;
        frames[i] = x[b * length + s] * w[j];
    }
}

}  // namespace gtfft

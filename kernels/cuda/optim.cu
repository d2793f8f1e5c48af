// Fused optimizer steps: one launch per parameter tensor updates it and its state together;
// Adam/AdamW updates a whole list in ONE launch (adam_multi).
//
// Each element follows kernels/cpu/optim.py (itself PyTorch's single-tensor rule) operation
// for operation, in the parameter's dtype T (float32 or float64) with the hyper-parameters
// already rounded to T by the launcher, so both backends agree bit for bit (NVRTC compiles
// with -fmad=false: no contraction into FMAs).
#include "common.cuh"

namespace gtoptim {

template <class T>
__device__ __forceinline__ T sqrt_(T v) { return ::sqrt(v); }
template <>
__device__ __forceinline__ float sqrt_<float>(float v) { return ::sqrtf(v); }

template <class T>
__device__ __forceinline__ T abs_(T v) { return v < T(0) ? -v : v; }

// Adam/AdamW. c0 coupled weight decay (0: none), c1 decoupled decay factor (1: none),
// c2 = 1 - beta1, c3 = 1 - c2 in T, c4 = beta2, c5 = 1 - beta2, c6 = sqrt(bias_correction2),
// c7 = eps, c8 = -step_size. mx is only touched with amsgrad.
template <class T>
__device__ void adam(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                     T* __restrict__ v, T* __restrict__ mx, T c0, T c1, T c2, T c3, T c4, T c5,
                     T c6, T c7, T c8, int neg, int amsgrad, long long n) {
    for (GT_GRID_STRIDE(i, n)) {
        T gi = g[i];
        T pi = p[i];
        if (neg) gi = -gi;
        if (c0 != T(0)) gi = gi + c0 * pi;      // grad.add(param, alpha=weight_decay)
        pi = pi * c1;                           // param.mul_(1 - lr * weight_decay)
        T mi = m[i];
        if (abs_(c2) < T(0.5)) mi = mi + c2 * (gi - mi);  // exp_avg.lerp_(grad, 1 - beta1)
        else mi = gi - (gi - mi) * c3;
        T vi = v[i] * c4 + c5 * gi * gi;        // exp_avg_sq.mul_(beta2).addcmul_(...)
        T s = vi;
        if (amsgrad) {
            T mxi = mx[i];
            if (vi > mxi || vi != vi) mxi = vi;  // torch.maximum propagates NaN
            mx[i] = mxi;
            s = mxi;
        }
        const T denom = sqrt_(s) / c6 + c7;
        p[i] = pi + c8 * mi / denom;            // param.addcdiv_(exp_avg, denom, -step_size)
        m[i] = mi;
        v[i] = vi;
    }
}

// Adam/AdamW over a list of tensors in one launch: blockIdx.y picks the tensor's record in
// `table` (six long longs each: the addresses of p, g, m, v, mx (0 without amsgrad), as the
// kernel dereferences them, and the element count); blockIdx.x strides over its elements as in
// `adam` (the grid is sized for the largest tensor; blocks past a small one's end do nothing).
template <class T>
__device__ void adam_multi(const long long* __restrict__ table, T c0, T c1, T c2, T c3, T c4,
                           T c5, T c6, T c7, T c8, int neg, int amsgrad) {
    const long long* rec = table + 6 * (long long)blockIdx.y;
    adam<T>(reinterpret_cast<T*>(static_cast<unsigned long long>(rec[0])),
            reinterpret_cast<const T*>(static_cast<unsigned long long>(rec[1])),
            reinterpret_cast<T*>(static_cast<unsigned long long>(rec[2])),
            reinterpret_cast<T*>(static_cast<unsigned long long>(rec[3])),
            reinterpret_cast<T*>(static_cast<unsigned long long>(rec[4])), c0, c1, c2, c3, c4,
            c5, c6, c7, c8, neg, amsgrad, rec[5]);
}

// SGD. c0 weight decay, c1 momentum, c2 = 1 - dampening, c3 = -lr. b (the momentum buffer)
// is only touched with momentum; first: the buffer is fresh and becomes the gradient.
template <class T>
__device__ void sgd(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ b, T c0, T c1,
                    T c2, T c3, int neg, int has_momentum, int first, int nesterov,
                    long long n) {
    for (GT_GRID_STRIDE(i, n)) {
        T gi = g[i];
        const T pi = p[i];
        if (neg) gi = -gi;
        if (c0 != T(0)) gi = gi + c0 * pi;      // grad.add(param, alpha=weight_decay)
        if (has_momentum) {
            T bi = first ? gi : b[i] * c1 + c2 * gi;  // buf.mul_(momentum).add_(grad, 1 - d)
            b[i] = bi;
            gi = nesterov ? gi + c1 * bi : bi;
        }
        p[i] = pi + c3 * gi;                    // param.add_(grad, alpha=-lr)
    }
}

// Adagrad. c0 weight decay, c1 eps, c2 = -clr.
template <class T>
__device__ void adagrad(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sum, T c0,
                        T c1, T c2, int neg, long long n) {
    for (GT_GRID_STRIDE(i, n)) {
        T gi = g[i];
        const T pi = p[i];
        if (neg) gi = -gi;
        if (c0 != T(0)) gi = gi + c0 * pi;      // grad.add(param, alpha=weight_decay)
        const T s = sum[i] + gi * gi;           // state_sum.addcmul_(grad, grad, value=1)
        sum[i] = s;
        p[i] = pi + c2 * gi / (sqrt_(s) + c1);  // param.addcdiv_(grad, std, value=-clr)
    }
}

}  // namespace gtoptim

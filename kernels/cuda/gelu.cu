// GELU, elementwise, in its exact (erf) form and its tanh approximation:
//   exact  y = x Phi(x),  Phi(x) = erfc(-x / sqrt 2) / 2
//          gx = gy (Phi(x) + x phi(x)),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh   y = x/2 (1 + tanh u),  u = sqrt(2/pi) (x + 0.044715 x^3)
//          gx = gy (1/2 (1 + tanh u) + x/2 (1 - tanh^2 u) u'),
//          u' = sqrt(2/pi) (1 + 3 0.044715 x^2)
//
// Mapping: a grid-stride loop over the flat array: thread t of the grid handles elements t,
// t + (threads in the grid), ..., so consecutive threads read consecutive addresses (coalesced)
// and a grid of any size covers any n. The wrapper caps the grid at a few times what the GPU
// holds at once; beyond that, more blocks would only add scheduling work.
// Memory traffic: forward reads x and writes y; backward reads gy and x and writes gx (x is
// saved instead of Phi or tanh u: recomputing them is cheaper than a second array's traffic).
// The form is a run-time int (0 exact, 1 tanh), the same for every thread, so the branch never
// diverges. Constants are the reference's (tinyformer/ops/gelu.py), rounded to T as NumPy
// rounds a Python float meeting a float32 array; the float32 kernels call the float versions of
// erfc, tanh and exp (erfcf, tanhf, expf), float64 the double ones.
// Offsets are 64-bit: n can pass 2^31.
#include "common.cuh"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654
#define GELU_INV_SQRT_2PI 0.3989422804014327
#define GELU_INV_SQRT_2 0.7071067811865475
#define GELU_TANH_C 0.044715

__device__ __forceinline__ float gelu_erfc(float v) { return erfcf(v); }
__device__ __forceinline__ double gelu_erfc(double v) { return erfc(v); }
__device__ __forceinline__ float gelu_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double gelu_tanh(double v) { return tanh(v); }
__device__ __forceinline__ float gelu_exp(float v) { return expf(v); }
__device__ __forceinline__ double gelu_exp(double v) { return exp(v); }

// Phi(v), the standard normal CDF, via erfc: accurate in both tails.
template <class T>
__device__ __forceinline__ T normal_cdf(T v) {
    return T(0.5) * gelu_erfc(-v * T(GELU_INV_SQRT_2));
}

template <class T>
__device__ __forceinline__ T tanh_of_u(T v) {
    return gelu_tanh(T(GELU_SQRT_2_OVER_PI) * (v + T(GELU_TANH_C) * v * v * v));
}

template <class T>
__device__ void gelu_forward(const T* __restrict__ x, T* __restrict__ y, long long n,
                             int tanh_form) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T v = x[i];
        y[i] = tanh_form ? T(0.5) * v * (T(1) + tanh_of_u(v)) : v * normal_cdf(v);
    }
}

template <class T>
__device__ void gelu_backward(const T* __restrict__ gy, const T* __restrict__ x,
                              T* __restrict__ gx, long long n, int tanh_form) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T v = x[i], dy;
        if (tanh_form) {
            T th = tanh_of_u(v);
            T du = T(GELU_SQRT_2_OVER_PI) * (T(1) + T(3.0 * GELU_TANH_C) * v * v);
            dy = T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du;
        } else {
            dy = normal_cdf(v) + v * T(GELU_INV_SQRT_2PI) * gelu_exp(T(-0.5) * v * v);
        }
        gx[i] = gy[i] * dy;
    }
}

extern "C" __global__ void gelu_forward_f32(const float* x, float* y, long long n, int tanh_form) {
    gelu_forward(x, y, n, tanh_form);
}
extern "C" __global__ void gelu_forward_f64(const double* x, double* y, long long n,
                                            int tanh_form) {
    gelu_forward(x, y, n, tanh_form);
}
extern "C" __global__ void gelu_backward_f32(const float* gy, const float* x, float* gx,
                                             long long n, int tanh_form) {
    gelu_backward(gy, x, gx, n, tanh_form);
}
extern "C" __global__ void gelu_backward_f64(const double* gy, const double* x, double* gx,
                                             long long n, int tanh_form) {
    gelu_backward(gy, x, gx, n, tanh_form);
}

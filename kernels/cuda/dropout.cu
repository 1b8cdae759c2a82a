// Dropout, elementwise: element i of a call seeded with `seed` is kept iff u(seed, i) >= p,
// and y = x * keep * scale, scale = 1 / (1 - p); backward gx = gy * keep * scale.
//
// The mask is the reference's (tinyformer/ops/dropout.py), bit for bit, made from (seed, i)
// alone, with no random state to carry between threads or launches (a counter-based
// generator): the counter z = (i + 1) * golden + seed * golden (unsigned 64-bit, wrapping),
// then splitmix64's mixing of z, then u = (z >> 11) * 2^-53, the top 53 bits as a double in
// [0, 1) (exact: a 53-bit integer and a power of two). Rather than make u and compare it with
// p in double precision, the kernel compares integers: with k = z >> 11,
//   u >= p  <=>  k >= p * 2^53  <=>  k >= ceil(p * 2^53) = threshold,
// where p * 2^53 is exact in double, so the wrapper computes `threshold` once on the host.
// Same mask, no floating point in it, and no float64 arithmetic (slow on most GPUs) in a
// float32 kernel.
//
// Mapping: a grid-stride loop over the flat array (thread t handles t, t + grid threads, ...),
// so consecutive threads read and write consecutive elements (coalesced).
// Memory traffic: forward reads x, writes y and the keep mask (one byte, C++ bool, as NumPy's
// bool); backward reads gy and keep, writes gx. y is computed as (x * keep) * scale, in the
// reference's order, so that a dropped element is x * 0 as there (-0 for negative x, NaN for
// inf or NaN), not a plain 0. Offsets are 64-bit: n can pass 2^31.
#include "common.cuh"

#define SPLITMIX_GOLDEN 0x9E3779B97F4A7C15ull
#define SPLITMIX_MIX1 0xBF58476D1CE4E5B9ull
#define SPLITMIX_MIX2 0x94D049BB133111EBull

// Keep element i of the call seeded with `seed`? (splitmix64_unit(...) >= p in the reference.)
__device__ __forceinline__ bool dropout_keeps(unsigned long long i, unsigned long long seed,
                                              unsigned long long threshold) {
    unsigned long long z = (i + 1) * SPLITMIX_GOLDEN + seed * SPLITMIX_GOLDEN;
    z = (z ^ (z >> 30)) * SPLITMIX_MIX1;
    z = (z ^ (z >> 27)) * SPLITMIX_MIX2;
    z = z ^ (z >> 31);
    return (z >> 11) >= threshold;
}

template <class T>
__device__ void dropout_forward(const T* __restrict__ x, T* __restrict__ y,
                                bool* __restrict__ keep, long long n, unsigned long long seed,
                                unsigned long long threshold, T scale) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        bool kept = dropout_keeps((unsigned long long)i, seed, threshold);
        keep[i] = kept;
        y[i] = x[i] * T(kept) * scale;
    }
}

template <class T>
__device__ void dropout_backward(const T* __restrict__ gy, const bool* __restrict__ keep,
                                 T* __restrict__ gx, long long n, T scale) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        gx[i] = gy[i] * T(keep[i]) * scale;
}

extern "C" __global__ void dropout_forward_f32(const float* x, float* y, bool* keep, long long n,
                                               unsigned long long seed,
                                               unsigned long long threshold, float scale) {
    dropout_forward(x, y, keep, n, seed, threshold, scale);
}
extern "C" __global__ void dropout_forward_f64(const double* x, double* y, bool* keep,
                                               long long n, unsigned long long seed,
                                               unsigned long long threshold, double scale) {
    dropout_forward(x, y, keep, n, seed, threshold, scale);
}
extern "C" __global__ void dropout_backward_f32(const float* gy, const bool* keep, float* gx,
                                                long long n, float scale) {
    dropout_backward(gy, keep, gx, n, scale);
}
extern "C" __global__ void dropout_backward_f64(const double* gy, const bool* keep, double* gx,
                                                long long n, double scale) {
    dropout_backward(gy, keep, gx, n, scale);
}

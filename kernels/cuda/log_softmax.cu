// log_softmax over the last axis of a (rows, cols) array:
//     y = x - lse,   lse = m + log(sum_j exp(x_j - m)),   m = max_j x_j.
//
// Mapping: one block per row, blockDim.x threads (a multiple of 32, at most 1024) striding over
// its columns, so consecutive threads read consecutive addresses (coalesced). Per row:
//   pass 1  each thread keeps a running maximum m and a running sum s of exp(x - m) over its
//           columns ("online" log-sum-exp: when a larger x arrives, the sum so far is rescaled
//           by exp(m_old - m_new)). One exp per element, and max and sum come out of a single
//           read of x and a single block reduction of the pairs (m, s), where softmax.cu reads
//           x twice and reduces twice (block_max, then block_sum).
//   pass 2  y = x - lse.
// Memory traffic: x read twice (the second read usually hits L1/L2), y written once. Nothing
// is stored between passes but lse: a register of every thread. Row offsets are 64-bit:
// rows * cols can pass 2^31.
//
// Backward: gx = gy - exp(y) * sum(gy), one block per row, one block_sum; exp(y) is the
// softmax, recomputed rather than saved.
#include "common.cuh"

template <class T>
__device__ void log_softmax_forward(const T* __restrict__ x, T* __restrict__ y, int cols) {
    long long row = (long long)blockIdx.x * cols;
    const T* xr = x + row;
    T* yr = y + row;
    T m = -TF_INF, s = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) lse_push(m, s, xr[j]);
    block_lse(m, s);
    T lse = m + log(s);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] - lse;
}

template <class T>
__device__ void log_softmax_backward(const T* __restrict__ gy, const T* __restrict__ y,
                                     T* __restrict__ gx, int cols) {
    long long row = (long long)blockIdx.x * cols;
    T total = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) total += gy[row + j];
    total = block_sum(total);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        gx[row + j] = gy[row + j] - exp(y[row + j]) * total;
}

extern "C" __global__ void log_softmax_forward_f32(const float* x, float* y, int cols) {
    log_softmax_forward(x, y, cols);
}
extern "C" __global__ void log_softmax_forward_f64(const double* x, double* y, int cols) {
    log_softmax_forward(x, y, cols);
}
extern "C" __global__ void log_softmax_backward_f32(const float* gy, const float* y, float* gx,
                                                    int cols) {
    log_softmax_backward(gy, y, gx, cols);
}
extern "C" __global__ void log_softmax_backward_f64(const double* gy, const double* y,
                                                    double* gx, int cols) {
    log_softmax_backward(gy, y, gx, cols);
}

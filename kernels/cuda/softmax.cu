// Softmax over the last axis of a (rows, cols) array: y = exp(x - max) / sum(exp(x - max)).
//
// Mapping: one block per row, blockDim.x threads (a multiple of 32, at most 1024) striding over
// its columns, so consecutive threads read consecutive addresses (coalesced). Per row:
//   pass 1  each thread's running max over its columns, then block_max (warp shuffles, then
//           one slot per warp in shared memory);
//   pass 2  e = exp(x - max) written to y, each thread summing its e's, then block_sum;
//   pass 3  y *= 1 / sum.
// Memory traffic: x read twice, y written twice and read once; a row of a few thousand floats
// stays in L2 between passes. Row offsets are 64-bit: rows * cols can pass 2^31.
//
// Backward: gx = y * (gy - sum(gy * y)), one block per row, one block_sum.
#include "common.cuh"

template <class T>
__device__ void softmax_forward(const T* __restrict__ x, T* __restrict__ y, int cols) {
    long long row = (long long)blockIdx.x * cols;
    const T* xr = x + row;
    T* yr = y + row;
    T top = -TF_INF;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) top = max(top, xr[j]);
    top = block_max(top);
    T total = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        T e = exp(xr[j] - top);
        yr[j] = e;
        total += e;
    }
    T inv = T(1) / block_sum(total);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] *= inv;
}

template <class T>
__device__ void softmax_backward(const T* __restrict__ gy, const T* __restrict__ y,
                                 T* __restrict__ gx, int cols) {
    long long row = (long long)blockIdx.x * cols;
    T dot = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) dot += gy[row + j] * y[row + j];
    dot = block_sum(dot);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        gx[row + j] = y[row + j] * (gy[row + j] - dot);
}

extern "C" __global__ void softmax_forward_f32(const float* x, float* y, int cols) {
    softmax_forward(x, y, cols);
}
extern "C" __global__ void softmax_forward_f64(const double* x, double* y, int cols) {
    softmax_forward(x, y, cols);
}
extern "C" __global__ void softmax_backward_f32(const float* gy, const float* y, float* gx,
                                                int cols) {
    softmax_backward(gy, y, gx, cols);
}
extern "C" __global__ void softmax_backward_f64(const double* gy, const double* y, double* gx,
                                                int cols) {
    softmax_backward(gy, y, gx, cols);
}

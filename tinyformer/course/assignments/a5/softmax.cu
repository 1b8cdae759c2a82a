// A5.3: softmax over the last axis of a (rows, cols) array, as a CUDA kernel (the student's;
// see assignments/A5_kernels.py). tinyformer/course/assignments/a5/cuda.py compiles and launches it.
//
// Mapping: one block per row (blockIdx.x is the row); blockDim.x threads, a multiple of 32,
// stride over its columns: thread t takes columns t, t + blockDim.x, t + 2 blockDim.x, ...,
// so a warp's 32 threads read 32 neighbouring elements at once (coalesced). A row may be
// longer than the block, shorter than a warp, or a single column. Per row:
//   pass 1  each thread's running max over its columns, then block_max (common.cuh: warp
//           shuffles, then one slot per warp in shared memory), which every thread gets back;
//   pass 2  e = exp(x - max) written to y, each thread summing its e's, then block_sum;
//   pass 3  y *= 1 / sum.
// Subtracting the max keeps every exponent <= 0: no overflow for logits of 1e4, and a -inf
// logit (a masked score) gets exactly exp(-inf) = 0. Accumulate in T: float for float32,
// double for float64. The row offset is 64-bit: rows * cols can pass 2^31.
#include "common.cuh"

template <class T>
__device__ void a5_softmax_row(const T* __restrict__ x, T* __restrict__ y, int cols) {
    // ### BEGIN SOLUTION A5.3
    long long row = (long long)blockIdx.x * cols;
    const T* xr = x + row;
    T* yr = y + row;
    T top = -TF_INF;  // threads with no column keep -inf, which block_max ignores
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
    // ### END SOLUTION
}

// One entry point per dtype, unmangled: the wrapper launches them by name.
extern "C" __global__ void a5_softmax_forward_f32(const float* x, float* y, int cols) {
    a5_softmax_row(x, y, cols);
}
extern "C" __global__ void a5_softmax_forward_f64(const double* x, double* y, int cols) {
    a5_softmax_row(x, y, cols);
}

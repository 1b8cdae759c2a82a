// Softmax cross-entropy of logits (rows, cols) against class indices target (rows,), fused with
// the log-softmax it needs, for label smoothing eps and an ignore_index:
//     lse  = m + log(sum_j exp(x_j - m)),   m = max_j x_j
//     loss = (1 - eps) * (lse - x[t]) + eps * (lse - mean_j x_j),   0 where t == ignore_index
//     glogits_j = gloss * (exp(x_j - lse) - eps / cols - (1 - eps) * [j == t]),
//                 0 for the whole row where t == ignore_index.
// The loss never forms log p for every class: mean_j(lse - x_j) = lse - mean_j x_j, so the
// smoothing term only needs the row's sum of logits.
//
// Forward mapping: one block per row, blockDim.x threads (a multiple of 32, at most 1024)
// striding over its columns, so consecutive threads read consecutive addresses (coalesced).
// Each thread keeps, over its columns, a running maximum m, a running sum s of exp(x - m)
// (rescaled by exp(m_old - m_new) when a larger x arrives: the "online" log-sum-exp) and the
// plain sum of x. One read of the row, one exp per element, then block reductions of the pair
// (m, s) and of the sum (common.cuh's block_lse and block_sum: warp butterflies, one slot per
// warp in shared memory, and a final warp-level combine). Thread 0 then reads x[t] (one more
// load, from cache) and writes loss and lse. Memory traffic: the row read once; two numbers a
// row written.
//
// Backward mapping: the same blocks; every thread reads target[row], lse[row] and gloss[row]
// (one broadcast load each) and writes glogits_j for its columns in one pass: the row read
// once and written once, one launch, no one-hot matrix, no atomics. gloss is read with a
// stride: a "mean" or "sum" reduction hands back one number broadcast to every row (stride 0),
// which is then read in place instead of being copied out by a launch of its own.
//
// Targets: int64, as the op stores them. The op checks their range on the host before calling
// the primitives. A target outside [0, cols) that is not ignore_index reaches the kernels only
// through a direct call of the primitive: x[t] is then never read, and the row's loss and its
// whole gradient row are NaN (a loud result, without a sync, where a GPU gather would silently
// read another row's memory). Row offsets are 64-bit: rows * cols can pass 2^31.
#include "common.cuh"

// A quiet NaN of type T, without the NAN macro (NVRTC has none).
template <class T>
__device__ __forceinline__ T quiet_nan() {
    return T(__int_as_float(0x7fc00000));
}

template <class T>
__device__ void cross_entropy_forward(const T* __restrict__ logits,
                                      const long long* __restrict__ target, T* __restrict__ loss,
                                      T* __restrict__ lse, long long ignore_index, T eps,
                                      int cols) {
    const T* xr = logits + (long long)blockIdx.x * cols;
    T m = -TF_INF, s = 0, total = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        T v = xr[j];
        lse_push(m, s, v);
        total += v;
    }
    block_lse(m, s);  // common.cuh
    total = block_sum(total);
    if (threadIdx.x != 0) return;
    T row_lse = m + log(s);
    lse[blockIdx.x] = row_lse;
    long long t = target[blockIdx.x];
    T out = 0;
    if (t != ignore_index) {
        if (t < 0 || t >= cols) {
            out = quiet_nan<T>();  // out of range: x[t] is not read (see the top of the file)
        } else {
            out = row_lse - xr[t];
            // Only when smoothing, as the reference: eps * (lse - mean) is not added as 0 * ...,
            // which would turn an infinite lse - mean into NaN.
            if (eps != T(0)) out = (T(1) - eps) * out + eps * (row_lse - total / T(cols));
        }
    }
    loss[blockIdx.x] = out;
}

template <class T>
__device__ void cross_entropy_backward(const T* __restrict__ gloss, const T* __restrict__ logits,
                                       const long long* __restrict__ target,
                                       const T* __restrict__ lse, T* __restrict__ glogits,
                                       long long gloss_stride, long long ignore_index, T eps,
                                       int cols) {
    long long row = (long long)blockIdx.x * cols;
    const T* xr = logits + row;
    T* gr = glogits + row;
    long long t = target[blockIdx.x];
    if (t == ignore_index) {  // the same for the whole block: no divergence
        for (int j = threadIdx.x; j < cols; j += blockDim.x) gr[j] = T(0);
        return;
    }
    T g = gloss[blockIdx.x * gloss_stride], row_lse = lse[blockIdx.x];
    T uniform = eps / T(cols), hit = T(1) - eps;
    if (t < 0 || t >= cols) g = quiet_nan<T>();  // out of range: the whole row NaN
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        T p = exp(xr[j] - row_lse) - uniform;
        gr[j] = g * (j == t ? p - hit : p);
    }
}

extern "C" __global__ void cross_entropy_forward_f32(const float* logits, const long long* target,
                                                     float* loss, float* lse,
                                                     long long ignore_index, float eps,
                                                     int cols) {
    cross_entropy_forward(logits, target, loss, lse, ignore_index, eps, cols);
}
extern "C" __global__ void cross_entropy_forward_f64(const double* logits,
                                                     const long long* target, double* loss,
                                                     double* lse, long long ignore_index,
                                                     double eps, int cols) {
    cross_entropy_forward(logits, target, loss, lse, ignore_index, eps, cols);
}
extern "C" __global__ void cross_entropy_backward_f32(const float* gloss, const float* logits,
                                                      const long long* target, const float* lse,
                                                      float* glogits, long long gloss_stride,
                                                      long long ignore_index, float eps,
                                                      int cols) {
    cross_entropy_backward(gloss, logits, target, lse, glogits, gloss_stride, ignore_index, eps,
                           cols);
}
extern "C" __global__ void cross_entropy_backward_f64(const double* gloss, const double* logits,
                                                      const long long* target,
                                                      const double* lse, double* glogits,
                                                      long long gloss_stride,
                                                      long long ignore_index, double eps,
                                                      int cols) {
    cross_entropy_backward(gloss, logits, target, lse, glogits, gloss_stride, ignore_index, eps,
                           cols);
}

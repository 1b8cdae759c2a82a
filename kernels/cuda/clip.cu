// clip_grad_norm_ over every gradient in two launches (tinyformer/nn/utils/clip.py has the math
// and the reference):
//     total = sqrt(sum over all gradients g of sum(g^2)),  coef = min(max_norm / (total + eps), 1)
//     g <- g * coef   for every g, in place
// A small GPT has ~50-100 gradients; a launch or two per gradient (a dot product, then a
// scale) is what this replaces: on a GPU at baby sizes each launch costs the host more than
// its work.
//
// The gradients live at unrelated addresses: the kernels read them through one table built
// on the host (kernels/cuda/clip.py) and copied to the device each call (gradients are new
// arrays each step):
//   table[2n + 2w]  the address of each of the n gradients, then their sizes, then one work
//                   item per (gradient, chunk of `chunk` elements): the gradient's number for
//                   each item, then the chunk's first element.
// Launch 1 (grad_sumsq): one block per work item; thread t sums the squares of elements t,
//   t + blockDim.x, ... of the chunk in double, block_sum adds the threads' sums, thread 0
//   writes parts[item]. Memory traffic: every gradient read once.
// Launch 2 (grad_clip): one block per work item again. Every block first sums all of parts
//   (thread t takes parts t, t + blockDim.x, ..., then block_sum): the same code in the same
//   order in every block, so every block gets the same bits of total, and no third launch or
//   grid-wide barrier is needed. The wrapper picks `chunk` so that there are at most about a
//   thousand items: the redundant sums stay small next to the gradients' traffic. Then the
//   block scales its chunk by coef rounded to T, as the reference multiplies by coef cast to
//   the gradient's dtype (a coef of exactly 1 leaves the bits as they were); block 0 writes
//   the total. Memory traffic: every gradient read and written once, parts read per block.
// Sums are in double (the reference sums each gradient's squares in its dtype, then the
// per-gradient sums in float64): the kernel's total is at least as accurate, and its order
// is fixed, so a run gives the same bits every time.
#include "common.cuh"

template <class T>
__device__ void grad_sumsq(const unsigned long long* __restrict__ table, double* __restrict__ parts,
                           int n, int chunk) {
    long long item = blockIdx.x;
    int t = (int)table[2 * n + item];
    long long start = (long long)table[2 * n + gridDim.x + item];
    long long end = min(start + chunk, (long long)table[n + t]);
    const T* g = reinterpret_cast<const T*>(table[t]);
    double sum = 0.0;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        double v = (double)g[i];
        sum += v * v;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) parts[item] = sum;
}

template <class T>
__device__ void grad_clip(const unsigned long long* __restrict__ table,
                          const double* __restrict__ parts, double* __restrict__ total_out, int n,
                          int chunk, double max_norm, double eps) {
    long long item = blockIdx.x;
    double sum = 0.0;
    for (long long k = threadIdx.x; k < gridDim.x; k += blockDim.x) sum += parts[k];
    double total = sqrt(block_sum(sum));
    double coef = min(max_norm / (total + eps), 1.0);
    if (item == 0 && threadIdx.x == 0) total_out[0] = total;
    int t = (int)table[2 * n + item];
    long long start = (long long)table[2 * n + gridDim.x + item];
    long long end = min(start + chunk, (long long)table[n + t]);
    T* g = reinterpret_cast<T*>(table[t]);
    const T scale = T(coef);
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) g[i] = g[i] * scale;
}

extern "C" __global__ void grad_sumsq_f32(const unsigned long long* table, double* parts, int n,
                                          int chunk) {
    grad_sumsq<float>(table, parts, n, chunk);
}
extern "C" __global__ void grad_sumsq_f64(const unsigned long long* table, double* parts, int n,
                                          int chunk) {
    grad_sumsq<double>(table, parts, n, chunk);
}
extern "C" __global__ void grad_clip_f32(const unsigned long long* table, const double* parts,
                                         double* total_out, int n, int chunk, double max_norm,
                                         double eps) {
    grad_clip<float>(table, parts, total_out, n, chunk, max_norm, eps);
}
extern "C" __global__ void grad_clip_f64(const unsigned long long* table, const double* parts,
                                         double* total_out, int n, int chunk, double max_norm,
                                         double eps) {
    grad_clip<double>(table, parts, total_out, n, chunk, max_norm, eps);
}

// AdamW for every tensor of a parameter group in one launch (a "multi-tensor apply", as in
// apex and PyTorch's fused optimizers). The math is tinyformer/optim/adamw_step.py's, per element:
//     m <- beta1 m + (1 - beta1) g
//     v <- beta2 v + (1 - beta2) g^2
//     p <- p * decay - step_size * m / (sqrt(v * inv_bc2) + eps)
// with per-tensor scalars decay = 1 - lr wd, step_size = lr / (1 - beta1^t) and
// inv_bc2 = 1 / (1 - beta2^t) (each tensor has its own step count t).
//
// Why one launch: a small GPT has ~50-100 parameter tensors, most of them a few hundred to a
// few thousand numbers. One launch per tensor costs a launch each for almost no work; here
// the whole group is one grid.
//
// The tensors live at unrelated addresses, so the kernel reads them through tables built on
// the host (kernels/cuda/adamw.py) and copied to the device:
//   tensors[4n]  the addresses of p, m and v of each of the n tensors, then their sizes
//                (cached between steps: the same parameters keep their memory);
//   work[2w]     one item per (tensor, chunk of `chunk` elements): the tensor's number, then the
//                chunk's first element (cached with `tensors`);
//   grads[n]     the address of each gradient, and
//   scalars[3n]  step_size, decay and inv_bc2 of each tensor, as doubles (these two are views
//                of one array, the only copy a step makes: gradients are new arrays each step).
// Mapping: one block per work item, blockDim.x threads striding over the chunk, so consecutive
// threads touch consecutive elements (coalesced), ADAMW_ILP elements per thread in flight at
// once (apex's multi-tensor kernels do the same). No reductions, no shared memory.
// Memory traffic: each element reads p, g, m, v and writes p, m, v once (7 accesses, in place);
// each block also reads its work item and its tensor's 7 table entries (72 bytes, from L2).
// Arithmetic in T (float for float32, as the reference), scalars rounded to T once per block.

#define ADAMW_ILP 4  // elements a thread loads before it computes and stores any of them

template <class T>
__device__ void adamw_step_many(const unsigned long long* __restrict__ tensors,
                                const unsigned long long* __restrict__ work,
                                const unsigned long long* __restrict__ grads,
                                const double* __restrict__ scalars, int n, int chunk,
                                double beta1, double beta2, double eps) {
    long long item = blockIdx.x;
    int t = (int)work[item];
    long long start = (long long)work[gridDim.x + item];
    long long end = min(start + chunk, (long long)tensors[3 * n + t]);
    T* p = reinterpret_cast<T*>(tensors[t]);
    T* m = reinterpret_cast<T*>(tensors[n + t]);
    T* v = reinterpret_cast<T*>(tensors[2 * n + t]);
    const T* g = reinterpret_cast<const T*>(grads[t]);
    const T step_size = T(scalars[t]), decay = T(scalars[n + t]), inv_bc2 = T(scalars[2 * n + t]);
    const T b1 = T(beta1), b2 = T(beta2), c1 = T(1.0 - beta1), c2 = T(1.0 - beta2), e = T(eps);
    // ADAMW_ILP elements per thread per round, all loaded before any is stored: the compiler
    // cannot tell that p, m, v and g never overlap, so it would not move a load of the next
    // element above the stores of this one, and each element would wait for its own loads.
    for (long long base = start + threadIdx.x; base < end; base += ADAMW_ILP * blockDim.x) {
        T pi[ADAMW_ILP], gi[ADAMW_ILP], mi[ADAMW_ILP], vi[ADAMW_ILP];
#pragma unroll
        for (int u = 0; u < ADAMW_ILP; ++u) {
            long long i = base + (long long)u * blockDim.x;
            if (i < end) {
                pi[u] = p[i];
                gi[u] = g[i];
                mi[u] = m[i];
                vi[u] = v[i];
            }
        }
#pragma unroll
        for (int u = 0; u < ADAMW_ILP; ++u) {
            long long i = base + (long long)u * blockDim.x;
            if (i >= end) break;
            T mu = b1 * mi[u] + c1 * gi[u];
            T vu = b2 * vi[u] + c2 * gi[u] * gi[u];
            m[i] = mu;
            v[i] = vu;
            p[i] = pi[u] * decay - step_size * mu / (sqrt(vu * inv_bc2) + e);
        }
    }
}

extern "C" __global__ void adamw_step_many_f32(const unsigned long long* tensors,
                                               const unsigned long long* work,
                                               const unsigned long long* grads,
                                               const double* scalars, int n, int chunk,
                                               double beta1, double beta2, double eps) {
    adamw_step_many<float>(tensors, work, grads, scalars, n, chunk, beta1, beta2, eps);
}
extern "C" __global__ void adamw_step_many_f64(const unsigned long long* tensors,
                                               const unsigned long long* work,
                                               const unsigned long long* grads,
                                               const double* scalars, int n, int chunk,
                                               double beta1, double beta2, double eps) {
    adamw_step_many<double>(tensors, work, grads, scalars, n, chunk, beta1, beta2, eps);
}

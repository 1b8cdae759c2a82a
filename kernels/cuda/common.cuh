// What every tinyformer kernel shares: infinity, and sums and maxima across a warp and a block.
//
// A warp is 32 threads that run in lockstep; `__shfl_xor_sync` hands a register from one lane to
// another without touching memory. Five butterfly steps (16, 8, 4, 2, 1) leave every lane with
// the warp's total. A block is up to 32 warps: each warp's lane 0 posts its total to shared
// memory, then the first warp combines those (at most 32) and every thread reads the result.
#pragma once

// NVRTC has no INFINITY macro; this is the IEEE-754 bit pattern of +inf.
#define TF_INF (__int_as_float(0x7f800000))

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// The sum of `v` over the block, returned to every thread. blockDim.x must be a multiple of 32.
template <class T>
__device__ T block_sum(T v) {
    __shared__ T partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    __syncthreads();  // a previous call's readers may still be reading `partial`
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    return warp_sum(lane < blockDim.x / 32 ? partial[lane] : T(0));
}

// The maximum of `v` over the block, returned to every thread (same rules as block_sum).
template <class T>
__device__ T block_max(T v) {
    __shared__ T partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    return warp_max(lane < blockDim.x / 32 ? partial[lane] : T(-TF_INF));
}

// Log-sum-exp in one pass: a running pair (m, s) with s = sum of exp(x - m) over the columns
// seen so far, rescaled when a larger x arrives (the "online" softmax). Used by log_softmax
// and cross_entropy.

// (m, s) <- the log-sum-exp pair of the union of two sets of columns given by their pairs.
// A pair with m = -inf is empty (s = 0); two empty pairs stay empty instead of giving
// exp(-inf - -inf) = NaN.
template <class T>
__device__ __forceinline__ void lse_merge(T& m, T& s, T m2, T s2) {
    T top = max(m, m2);
    s = top == T(-TF_INF) ? T(0) : s * exp(m - top) + s2 * exp(m2 - top);
    m = top;
}

// Adds column value v to a thread's running pair (m, s). A -inf column adds nothing: skipped
// rather than computed, because exp(-inf - -inf) is NaN while the pair is still empty.
template <class T>
__device__ __forceinline__ void lse_push(T& m, T& s, T v) {
    if (v > m) {
        s = s * exp(m - v) + T(1);
        m = v;
    } else if (v != T(-TF_INF)) {
        s += exp(v - m);  // NaN inputs land here and make the sum NaN, as in the reference
    }
}

// The block's log-sum-exp pair, returned to every thread: warp butterflies, then one slot per
// warp in shared memory, combined by every warp (as block_sum in common.cuh does).
template <class T>
__device__ void block_lse(T& m, T& s) {
    __shared__ T part_m[32], part_s[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int offset = 16; offset > 0; offset >>= 1)
        lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset),
                  __shfl_xor_sync(0xffffffffu, s, offset));
    __syncthreads();  // a previous call's readers may still be reading the slots
    if (lane == 0) {
        part_m[warp] = m;
        part_s[warp] = s;
    }
    __syncthreads();
    bool used = lane < blockDim.x / 32;
    m = used ? part_m[lane] : T(-TF_INF);
    s = used ? part_s[lane] : T(0);
    for (int offset = 16; offset > 0; offset >>= 1)
        lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset),
                  __shfl_xor_sync(0xffffffffu, s, offset));
}

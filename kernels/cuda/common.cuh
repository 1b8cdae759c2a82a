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
